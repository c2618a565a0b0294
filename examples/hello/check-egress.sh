#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# Runs inside the sandbox: one request the policy allows, two it refuses.
# DEMO_SERVER is the test server's address, passed in through aisb_environment.
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
echo "allowed.test through the gate:  $(code http://allowed.test/)"
echo "other.test through the gate:    $(code http://other.test/)   (403: not on the allowlist)"
echo "$DEMO_SERVER without the gate: $(code --noproxy '*' -m 3 "http://$DEMO_SERVER/")   (000: the ruleset drops it)"
