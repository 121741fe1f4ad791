#!/usr/bin/env bash
# One prompt to ToyCoder over raw JSON-RPC, with nothing but bash and coreutils (printf, head):
#
#   clients/terminal/oneshot.sh "What does app.py do?"      # run it in the project's directory
#
# The streamed reply goes to stdout, tool activity to stderr. Permission requests are answered by
# TOYCODER_APPROVE=allow|deny (default deny), questions are declined. Exit status 1 on an error,
# 127 (and one line) when the daemon cannot start. TOYCODER_DAEMON is the daemon command (default
# toycoder-daemon, e.g. .venv/bin/toycoder-daemon when it is not on PATH); it reads TOYCODER_CONFIG itself.
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: $0 PROMPT" >&2; exit 2; }

read -ra daemon <<<"${TOYCODER_DAEMON:-toycoder-daemon}"
cannot_start() {
  echo "oneshot: cannot start the daemon \`${daemon[*]}\` (set TOYCODER_DAEMON, or put toycoder-daemon on PATH)" >&2
  exit 127
}
command -v "${daemon[0]:-}" >/dev/null || cannot_start
# A daemon that dies at once must not kill us with SIGPIPE on the next write, nor win the race for
# DAEMON/DAEMON_PID (bash unsets them when the coproc ends): writes then fail quietly, reads see EOF.
trap '' PIPE
coproc DAEMON { exec "${daemon[@]}" 2>/dev/null; }
pid=${DAEMON_PID:-}
to= from=
[ -n "${DAEMON[1]:-}" ] && exec {to}>&"${DAEMON[1]}"- {from}<&"${DAEMON[0]}"-   # our own fds (bash drops DAEMON when it exits)

gone() {  # the daemon closed its end: one line saying why, and the exit status
  local rc=
  [ -n "$pid" ] && { wait "$pid" 2>/dev/null; rc=$?; }
  [[ $rc == 126 || $rc == 127 ]] && cannot_start
  echo "oneshot: the daemon exited${rc:+ (status $rc)}" >&2
  exit 1
}
[ -n "$to" ] || gone   # it ended before we could take its pipes

send() {  # frame a JSON body: Content-Length counts bytes, hence the C locale for ${#1}
  local LC_ALL=C
  printf 'Content-Length: %d\r\n\r\n%s' "${#1}" "$1" >&"$to" 2>/dev/null
}

recv() {  # the next frame's body into $msg; fails when the daemon is gone
  local line len=0
  while IFS= read -r line <&"$from"; do   # bash reads a pipe byte by byte: nothing is over-read
    line=${line%$'\r'}
    [ -z "$line" ] && break
    [[ ${line,,} =~ ^content-length:\ *([0-9]+) ]] && len=${BASH_REMATCH[1]}
  done
  [ "$len" -gt 0 ] && msg=$(head -c "$len" <&"$from")
}

quote() {  # a shell string as a JSON string
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"} s=${s//$'\n'/\\n} s=${s//$'\r'/\\r} s=${s//$'\t'/\\t}
  printf '"%s"' "$s"
}

field() {  # field NAME -> $val: the first string field NAME of $msg, unescaped
  [[ $msg =~ \"$1\":\ ?\"(([^\"\\]|\\.)*)\" ]] || { val=; return 1; }
  local s=${BASH_REMATCH[1]//\\\"/\"}
  printf -v val '%b' "${s//\\\//\/}"   # %b turns \n, \t, \\ and \uXXXX back into characters
}

call() {  # call ID METHOD PARAMS: send a request, serve what comes, stop at its answer
  send "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"$2\",\"params\":$3}"
  while recv; do
    local method= id=
    [[ $msg =~ \"method\":\ ?\"([^\"]*)\" ]] && method=${BASH_REMATCH[1]}
    [[ $msg =~ \"id\":\ ?(\"[^\"]*\"|[0-9]+) ]] && id=${BASH_REMATCH[1]}
    case $method in
      toycoder/update)
        [[ $msg == *'"parentToolCallId"'* ]] && continue   # a sub-agent's activity
        if [[ $msg =~ \"kind\":\ ?\"text_delta\" ]]; then field text && printf '%s' "$val"
        elif [[ $msg =~ \"kind\":\ ?\"tool_call\" ]]; then field title; printf '\n-> %s\n' "$val" >&2
        elif [[ $msg =~ \"kind\":\ ?\"tool_result\" ]]; then field status; printf '<- %s\n' "$val" >&2
        fi ;;
      toycoder/requestPermission)
        field title; printf '\n[permission] %s: %s\n' "$val" "${TOYCODER_APPROVE:-deny}" >&2
        decision=reject; [ "${TOYCODER_APPROVE:-deny}" = allow ] && decision=allow_once
        send "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"decision\":\"$decision\"}}" ;;
      toycoder/askUser)
        send "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"cancelled\":true}}" ;;
      "")
        [ "$id" = "$1" ] || continue
        if [[ $msg == *'"error":'* ]]; then field message; printf '\noneshot: %s\n' "$val" >&2; return 1; fi
        return 0 ;;
      *) [ -n "$id" ] && send "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":null}" ;;  # other requests
    esac
  done
  gone
}

caps='{"experimental":{"toycoder":{"permissionRequest":true,"askUser":true}}}'
call 1 initialize "{\"rootPath\":$(quote "$PWD"),\"capabilities\":$caps}" || exit 1
send '{"jsonrpc":"2.0","method":"initialized","params":{}}'
call 2 toycoder/session/new '{}' || exit 1
field sessionId
call 3 toycoder/prompt "{\"sessionId\":\"$val\",\"text\":$(quote "$1")}"
status=$?
echo
exec {to}>&- {from}<&-   # closing the daemon's stdin ends it
wait "$pid" 2>/dev/null
exit $status
