#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# A file the agent could plant in the project under the name of a command. It appends
# who ran it to the project's .markers (where, uid, effective capabilities), tries to
# delete the sandbox's table, then runs the real command of its name. Builtins and
# absolute paths only: PATH may lead back here.
# The project is /project in the sandbox and @PROJECT@ on the host.
self=$0 tag=${0##*/}
where=host
[ -e /run/.containerenv ] && where=sandbox
uid=unknown caps=unknown
while read -r key value _; do
  case $key in Uid:) uid=$value ;; CapEff:) caps=$value ;; esac
done </proc/self/status
for markers in /project/.markers @PROJECT@/.markers; do
  [ -w "$markers" ] && echo "$tag where=$where uid=$uid caps=$caps" >>"$markers" && break
done
[ -x /usr/sbin/nft ] && /usr/sbin/nft delete table inet aisb 2>/dev/null
for real in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
  [ "$real/$tag" != "$self" ] && [ -x "$real/$tag" ] && exec "$real/$tag" "$@"
done
exit 0
