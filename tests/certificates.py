# SPDX-License-Identifier: GPL-3.0-or-later
"""A throwaway CA and a server certificate it signed for one name, made with openssl:
the fake model providers' (unit tests, integration tests, bench)."""

import subprocess


def script(name, *more):
    """bash that writes ca.crt, ca.key, server.crt and server.key (for NAME and MORE names)
    into the current directory: with the extensions a strict verifier wants (Python
    3.13's default context sets VERIFY_X509_STRICT: a CA without keyUsage is refused)."""
    return f"""
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=aisb-test-ca \
          -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
        openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN={name}
        printf '%s\n' subjectAltName={','.join('DNS:' + n for n in (name, *more))} basicConstraints=CA:FALSE \
          keyUsage=critical,digitalSignature,keyEncipherment extendedKeyUsage=serverAuth \
          subjectKeyIdentifier=hash authorityKeyIdentifier=keyid,issuer >server.ext
        openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 \
          -extfile server.ext
    """


def make(directory, name):
    subprocess.run(["bash", "-euc", script(name)], cwd=directory, check=True, capture_output=True)
