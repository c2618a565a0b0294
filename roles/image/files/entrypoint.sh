#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# aisb sandbox entrypoint. Runs as root in the container's own user namespace with
# NET_ADMIN, SETUID, SETGID and SETPCAP; the harness never does.
#
# Nothing from the operator or the project runs while a capability is held: the image's
# ENTRYPOINT runs this file as `/bin/bash FILE` (its shebang is never used, so no PATH
# lookup finds its interpreter), and its environment
# is podman's defaults, the image's and the session's own AISB_* values, never an
# operator's (the session hands those to the harness on AISB_ENV_FD, applied by
# harness-exec after the drop). It still sets PATH and HOME itself and runs nothing
# from /project.
#
#   entrypoint [--allow-unenforced] [COMMAND...]   enforce, drop every privilege, exec COMMAND
#   entrypoint --check                             nft -c over the ruleset the policy makes
#
# 1. Read the policy (/etc/aisb/policy, mounted read-only). Missing, unreadable or
#    malformed: exit 78, whatever the flags.
# 2. Install `table inet aisb` from the ruleset template plus the policy's gate and
#    pinned rules and its budgets' quotas and chains, in one nft transaction.
# 3. Verify the installed table from `nft -j` output, never from nft's exit status:
#    a rejected ruleset leaves the container wide open. Failure of 2 or 3: exit 77,
#    unless --allow-unenforced was given, which says so loudly and goes on.
# 4. With a gate: wait until this session's gate (AISB_SESSION) answers an HTTP request
#    through the path the table allows (it starts beside the sandbox). No answer within
#    GATE_WAIT seconds: exit 79, whatever the flags (never a fallback to direct egress).
# 5. setpriv to uid/gid 1000 with every capability set empty and no-new-privs; exec
#    harness-exec, which applies the harness's environment and execs COMMAND.
#
# Policy format (one directive a line; '#' comments and blank lines ignored):
#   gate ADDRESS PORT | gate none     exactly one: the gate as the sandbox reaches it
#   pin ADDRESS[/LEN] PORT            any number: TCP to that address or network and port
#   budget ADDRESS PORT BYTES         at most one a port: the gate's or a pin's single IPv4
#                                     address and port is reached through chain upload_PORT,
#                                     whose named quota upload_PORT counts every packet that
#                                     carries payload; over BYTES, such packets are rejected
#                                     with a TCP reset (module_utils/policy/_ruleset.py)
set -uo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
unset TMPDIR

readonly POLICY=/etc/aisb/policy
readonly RULESET=/usr/local/lib/aisb/ruleset.nft
readonly HARNESS_EXEC=/usr/local/lib/aisb/harness-exec
readonly EX_ENFORCEMENT=77 EX_POLICY=78 EX_GATE=79
# The session's bound on a gate's start (GATE_READY_TIMEOUT in module_utils/gate/_gate_loopback.py).
readonly GATE_WAIT=15
readonly IPV4='[0-9]{1,3}(\.[0-9]{1,3}){3}' IPV6='[0-9a-f]*:[0-9a-f:]*' PORT='[1-9][0-9]{0,4}'
# A budget's chain: packets whose IPv4 length is their headers' (20 bytes and a TCP
# header of 5 to 15 words) carry no payload and pass uncounted (_ruleset.TCP_WORDS).
readonly TCP_WORDS='5 6 7 8 9 10 11 12 13 14 15'

say() { printf 'aisb-entrypoint: %s\n' "$*" >&2; }

# The nft family of an address: ip or ip6.
family() { case $1 in *:*) echo ip6 ;; *) echo ip ;; esac; }

# Fills GATE ("" for none), the PINS and BUDGETS arrays and EXPECTED_RULES from the
# policy file, or exits 78.
read_policy() {
  if [ ! -r "$POLICY" ] || ! policy_text=$(<"$POLICY"); then
    say "policy $POLICY is missing or unreadable: refusing to start"
    exit "$EX_POLICY"
  fi
  GATE=unset PINS=() BUDGETS=()
  local line number=0 budget address port
  while IFS= read -r line || [ -n "$line" ]; do
    number=$((number + 1))
    if [[ $line =~ ^[[:space:]]*(#.*)?$ ]]; then
      continue
    elif [[ $line =~ ^gate\ none$ ]] && [ "$GATE" = unset ]; then
      GATE=""
    elif [[ $line =~ ^gate\ ($IPV4|$IPV6)\ ($PORT)$ ]] && [ "$GATE" = unset ]; then
      GATE="${BASH_REMATCH[1]} ${BASH_REMATCH[-1]}"
    elif [[ $line =~ ^pin\ (($IPV4|$IPV6)(/[0-9]{1,3})?)\ ($PORT)$ ]]; then
      PINS+=("${BASH_REMATCH[1]} ${BASH_REMATCH[-1]}")
    elif [[ $line =~ ^budget\ ($IPV4)\ ($PORT)\ ([1-9][0-9]{0,17})$ ]]; then
      BUDGETS+=("${BASH_REMATCH[1]} ${BASH_REMATCH[3]} ${BASH_REMATCH[4]}")
    else
      say "policy $POLICY line $number is not understood: ${line@Q}"
      exit "$EX_POLICY"
    fi
  done <<<"$policy_text"
  if [ "$GATE" = unset ]; then
    say "policy $POLICY has no 'gate' line"
    exit "$EX_POLICY"
  fi
  for budget in "${BUDGETS[@]}"; do
    read -r address port _ <<<"$budget"
    if [ "$(printf '%s\n' "${BUDGETS[@]}" | awk -v port="$port" '$2 == port' | wc -l)" != 1 ] \
        || ! printf '%s\n' ${GATE:+"$GATE"} "${PINS[@]}" | grep -qxF "$address $port"; then
      say "policy $POLICY: budget ${budget@Q} meters no gate or pin of its address and port, or its port twice"
      exit "$EX_POLICY"
    fi
  done
  EXPECTED_RULES=$(expected_rules)
}

# The budget of destination ADDRESS PORT in bytes, or nothing.
budget_of() {
  local entry address port bytes
  for entry in "${BUDGETS[@]}"; do
    read -r address port bytes <<<"$entry"
    if [ "$address $port" = "$1 $2" ]; then
      echo "$bytes"
    fi
  done
}

# The rules the table must hold beyond its base, one "FAMILY ADDRESS PORT" (or, for a
# budgeted destination, "FAMILY ADDRESS PORT jump upload_PORT") a line, sorted: the
# ruleset adds them and verify wants them (each jump " before oif lo" as well). Made once,
# as EXPECTED_RULES, after the policy is read.
expected_rules() {
  local entry address port budget
  for entry in ${GATE:+"$GATE"} "${PINS[@]}"; do
    read -r address port <<<"$entry"
    budget=$(budget_of "$address" "$port")
    echo "$(family "$address") $address $port${budget:+ jump upload_$port}"
  done | sort
}

# The budgets' quotas, chains and chain rules as verify reads them back, sorted:
# "quota NAME BYTES", "chain NAME", "NAME #POSITION: RULE".
expected_budgets() {
  local entry address port bytes words position
  for entry in "${BUDGETS[@]}"; do
    read -r address port bytes <<<"$entry"
    echo "quota upload_$port $bytes"
    echo "chain upload_$port"
    position=0
    for words in $TCP_WORDS; do
      position=$((position + 1))
      echo "upload_$port #$position: tcp doff $words ip length $((20 + 4 * words)) accept"
    done
    echo "upload_$port #$((position + 1)): quota upload_$port reject tcp reset"
    echo "upload_$port #$((position + 2)): accept"
  done | sort
}

# The nft script: the template, the budgets' quotas and chains, then the gate and pinned
# rules (one transaction).
ruleset() {
  cat "$RULESET" || return 1
  local entry family address port bytes words jump
  for entry in "${BUDGETS[@]}"; do
    read -r address port bytes <<<"$entry"
    echo "add quota inet aisb upload_$port { over $bytes bytes }"
    echo "add chain inet aisb upload_$port"
    for words in $TCP_WORDS; do
      echo "add rule inet aisb upload_$port tcp doff $words ip length $((20 + 4 * words)) accept"
    done
    echo "add rule inet aisb upload_$port quota name \"upload_$port\" reject with tcp reset"
    echo "add rule inet aisb upload_$port accept"
  done
  # A budget's jump goes first, before oif lo: on the tcp-forward gate path the gate is at
  # 127.0.0.1, and loopback's accept would pass it unmetered.
  while read -r family address port jump; do
    if [ -n "$family" ]; then
      if [ -n "$jump" ]; then
        echo "insert rule inet aisb output $family daddr $address tcp dport $port $jump"
      else
        echo "add rule inet aisb output $family daddr $address tcp dport $port accept"
      fi
    fi
  done <<<"$EXPECTED_RULES"
}

# Every rule of chain output, reduced to "oif lo",
# "FAMILY ADDRESS PORT", "FAMILY ADDRESS PORT jump CHAIN before oif lo" (or "after"),
# or "unexpected <json>" for anything else.
# \(...) below is jq's string interpolation, not the shell's:
# shellcheck disable=SC2016
readonly CANONICAL='
  def accept: {"accept": null};
  def address: if type == "object" and .prefix then "\(.prefix.addr)/\(.prefix.len)" else . end;
  def jump: if .[2].jump and (.[2] | keys) == ["jump"] and (.[2].jump | keys) == ["target"]
    and (.[2].jump.target | type) == "string" then " jump \(.[2].jump.target)" else null end;
  def lo: [{"match": {"op": "==", "left": {"meta": {"key": "oif"}}, "right": "lo"}}, accept];
  [.nftables[] | select(.rule and .rule.chain == "output") | .rule.expr] |
  ([to_entries[] | select(.value == lo) | .key][0]) as $lo | to_entries[] | .key as $at | .value |
  def place: if $lo != null and $at < $lo then " before oif lo" else " after oif lo" end;
  if . == lo
  then "oif lo"
  elif length == 3 and (.[2] == accept or jump)
    and (.[0].match.left.payload.protocol as $f | $f == "ip" or $f == "ip6")
    and .[0] == {"match": {"op": "==", "left": {"payload": {"protocol": .[0].match.left.payload.protocol, "field": "daddr"}}, "right": .[0].match.right}}
    and .[1] == {"match": {"op": "==", "left": {"payload": {"protocol": "tcp", "field": "dport"}}, "right": .[1].match.right}}
    and (.[1].match.right | type == "number")
    and (.[0].match.right | type == "string" or (type == "object" and keys == ["prefix"]))
  then "\(.[0].match.left.payload.protocol) \(.[0].match.right | address) \(.[1].match.right)\(jump // "")\(
    if jump then place else "" end)"
  else "unexpected \(tojson)" end'
# The quotas ("quota NAME BYTES", mode over), the chains but output ("chain NAME") and
# their rules, numbered in the order nft lists them ("NAME #POSITION: RULE"): in a budget
# chain the rules' order decides. nft may print the l4proto and nfproto matches it adds.
# shellcheck disable=SC2016
readonly BUDGET_CANONICAL='
  def accept: {"accept": null};
  def field($p; $f): .match == {"op": "==", "left": {"payload": {"protocol": $p, "field": $f}}, "right": .match.right}
    and (.match.right | type) == "number";
  def rule: [.[] | select((.match.left == {"meta": {"key": "l4proto"}} or .match.left == {"meta": {"key": "nfproto"}})
    and .match.op == "==" | not)] |
    if . == [accept] then "accept"
    elif length == 2 and (.[0] | keys) == ["quota"] and (.[0].quota | type) == "string"
      and .[1] == {"reject": {"type": "tcp reset"}} then "quota \(.[0].quota) reject tcp reset"
    elif length == 3 and .[2] == accept and (.[0] | field("tcp"; "doff")) and (.[1] | field("ip"; "length"))
    then "tcp doff \(.[0].match.right) ip length \(.[1].match.right) accept"
    else "unexpected \(tojson)" end;
  (.nftables[] | select(.quota) | .quota |
    if .inv == true then "quota \(.name) \(.bytes)" else "unexpected quota \(tojson)" end),
  (.nftables[] | select(.chain and .chain.name != "output") | "chain \(.chain.name)"),
  ([.nftables[] | select(.rule and .rule.chain != "output") | .rule] | group_by(.chain)[] | to_entries[] |
    "\(.value.chain) #\(.key + 1): \(.value.expr | rule)")'
readonly OUTPUT_CHAIN='[.nftables[] | select(.chain) | .chain
  | select(.name == "output" and .type == "filter" and .hook == "output" and .policy == "drop")] | length == 1'

# What one jq prints, instead of the rules, when chain output is not as the ruleset makes
# it (CANONICAL never prints this line).
readonly NO_OUTPUT_CHAIN="no output chain"

# Succeeds only when the kernel holds exactly the table this policy asks for; then
# VERIFIED_TABLE is the `nft -j` listing it read, which the session is told of.
verify() {
  local json actual wanted rule
  json=$(nft -j list table inet aisb) || { say "no table inet aisb is installed"; return 1; }
  actual=$(jq -r "if $OUTPUT_CHAIN then ($CANONICAL) else \"$NO_OUTPUT_CHAIN\" end" <<<"$json" | sort) \
    || { say "cannot read the installed rules"; return 1; }
  if [ "$actual" = "$NO_OUTPUT_CHAIN" ]; then
    say "chain inet aisb output is missing, not on the output hook, or its policy is not drop"
    return 1
  fi
  wanted=$(
    {
      echo "oif lo"
      while read -r rule; do
        case $rule in
          "") ;;
          *" jump "*) echo "$rule before oif lo" ;;
          *) echo "$rule" ;;
        esac
      done <<<"$EXPECTED_RULES"
    } | sort
  )
  if [ "$actual" != "$wanted" ]; then
    say "installed rules differ from the policy:"
    diff <(echo "$wanted") <(echo "$actual") | sed 's/^/  /' >&2
    return 1
  fi
  # The quotas and budget chains, exactly: before the privilege drop, never after. Without
  # a budget nothing jumps anywhere, and no jq more delays the start.
  if [ "${#BUDGETS[@]}" -gt 0 ]; then
    actual=$(jq -r "$BUDGET_CANONICAL" <<<"$json" | sort) || { say "cannot read the installed budgets"; return 1; }
    wanted=$(expected_budgets)
    if [ "$actual" != "$wanted" ]; then
      say "installed quotas or budget chains differ from the policy:"
      diff <(echo "$wanted") <(echo "$actual") | sed 's/^/  /' >&2
      return 1
    fi
  fi
  VERIFIED_TABLE=$json
}

# Succeeds when this session's gate answers at ADDRESS PORT: squid answers this malformed
# request with a 400 page "Generated ... by aisb-gate-SESSION (squid)" (its
# visible_hostname) and logs it as error:invalid-request, which the record skips. Any
# other server on that port (one that took it before squid could) does not count.
gate_answers() {
  # $1, $2 and $3 expand in the inner shell, which gets them as its arguments:
  # shellcheck disable=SC2016
  timeout 1 bash -c 'exec 9<>"/dev/tcp/$1/$2" && printf "aisb-gate-probe\r\n\r\n" >&9 && grep -a -m1 -q -F -e "$3" <&9' \
    gate-probe "$1" "$2" "by aisb-gate-$AISB_SESSION (" 2>/dev/null
}

# Waits until the gate answers, at most GATE_WAIT seconds.
wait_for_gate() {
  local address port deadline=$((SECONDS + GATE_WAIT))
  read -r address port <<<"$GATE"
  if ! [[ ${AISB_SESSION:-} =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]]; then
    say "AISB_SESSION does not name the session, so its gate cannot be told from another server (exit $EX_GATE)"
    return 1
  fi
  until gate_answers "$address" "$port"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      say "the gate at $address port $port did not answer as aisb-gate-$AISB_SESSION within $GATE_WAIT s: refusing to start (exit $EX_GATE)"
      return 1
    fi
    sleep 0.02
  done
}

enforce() {
  local script
  if ! command -v nft >/dev/null || ! command -v jq >/dev/null; then
    say "nft or jq is missing from the image"
    return 1
  fi
  script=$(ruleset) || { say "cannot read the ruleset template $RULESET"; return 1; }
  nft -f - <<<"$script" || { say "nft refused the ruleset"; return 1; }
  verify
}

unenforced=0 VERIFIED_TABLE=""
case ${1:-} in
  --check)
    read_policy
    if script=$(ruleset) && nft -c -f - <<<"$script"; then
      exit 0
    fi
    say "the ruleset for this policy does not pass nft -c"
    exit "$EX_ENFORCEMENT"
    ;;
  --allow-unenforced)
    unenforced=1
    shift
    ;;
esac

read_policy
if ! enforce; then
  if [ "$unenforced" = 0 ]; then
    say "egress enforcement could not be installed or verified: refusing to start (exit $EX_ENFORCEMENT)"
    exit "$EX_ENFORCEMENT"
  fi
  for _ in 1 2 3; do
    say "WARNING: --allow-unenforced: EGRESS IS NOT ENFORCED. This sandbox can reach anything its network can."
  done
fi

# The table for the session: the listing verify() accepted (one line), or, unenforced,
# whatever is installed, if anything. A subshell: a reader gone kills it with SIGPIPE,
# not the entrypoint, which then refuses with its own status.
report_table() (
  if [ -n "$VERIFIED_TABLE" ]; then
    printf '%s\n' "$VERIFIED_TABLE"
  else
    nft -j list table inet aisb || [ "$unenforced" = 1 ]
  fi
)

# The session records the table as installed and watches it from then on: it hands in
# descriptor 3 and names it in AISB_REPORT_FD. A session that asked for the report gets
# it before the harness can run, or the harness never runs. The descriptor is closed
# here, so the harness never holds it.
if [ -n "${AISB_REPORT_FD:-}" ]; then
  if [ "$AISB_REPORT_FD" != 3 ] || ! report_table 2>/dev/null >&3; then
    say "the table could not be reported to the session on descriptor ${AISB_REPORT_FD}: refusing to start (exit $EX_ENFORCEMENT)"
    exit "$EX_ENFORCEMENT"
  fi
  exec 3>&-
fi
unset AISB_REPORT_FD

if [ -n "$GATE" ] && ! wait_for_gate; then
  exit "$EX_GATE"
fi

export HOME=/home/agent USER=agent LOGNAME=agent
exec /usr/bin/setpriv --reuid=1000 --regid=1000 --clear-groups --inh-caps=-all --ambient-caps=-all \
  --bounding-set=-all --no-new-privs -- /bin/bash "$HARNESS_EXEC" "$@"
