# SPDX-License-Identifier: GPL-3.0-or-later
"""A throwaway CA and a server certificate it signed for one name, made with openssl:
the fake model providers' (unit tests, integration tests, bench)."""

import subprocess


def script(name):
    """bash that writes ca.crt, ca.key, server.crt and server.key (for NAME) into the
    current directory."""
    return f"""
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=aisb-test-ca
        openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN={name}
        printf 'subjectAltName=DNS:{name}\\n' >san.ext
        openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 \\
          -extfile san.ext
    """


def make(directory, name):
    subprocess.run(["bash", "-euc", script(name)], cwd=directory, check=True, capture_output=True)
