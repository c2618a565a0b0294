#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# aisb harness-exec: the last step before the harness, run by the entrypoint's setpriv
# (as /bin/bash FILE) as uid 1000 with every capability dropped and no-new-privs set.
#
#   harness-exec COMMAND [ARG...]
#
# When the session hands in descriptor 4 (AISB_ENV_FD=4), it holds the harness's
# environment: NAME=VALUE pairs, each ended by a NUL byte (operator values,
# pass-throughs, the recipe's names, the proxy settings). They are applied here, after
# the drop, and only to the harness: PATH, LD_PRELOAD, BASH_ENV and the rest are the
# harness's business once nothing privileged is left to reach. The descriptor is
# closed before the exec, so the harness never holds it.
set -u

pairs=()
if [ "${AISB_ENV_FD:-}" = 4 ] && { true <&4; } 2>/dev/null; then
  while IFS= read -r -d '' pair; do
    pairs+=("$pair")
  done <&4
  exec 4<&-
fi
unset AISB_ENV_FD
# '--' ends env's options; the session refuses a COMMAND whose first word holds '=',
# which env would take for one more variable.
exec /usr/bin/env -- "${pairs[@]}" "$@"
