#!/usr/bin/env bash
# Request overhead, measured side by side: wrk posts the 我爱你 request on
# demo-4d to attention-server, and the same body to bench/bare_server (a
# libmicrohttpd server that reads the body and answers a fixed one), on
# 127.0.0.1, alternating three rounds each; prints the medians and the ratio.
#
#   bench/http.sh [SECONDS] [CONNECTIONS]      (from the top of the tree)
set -euo pipefail
secs=${1:-5}
conns=${2:-32}
top=$(cd "$(dirname "$0")/.." && pwd)
server=$top/build/attention-server
bare=$top/bench/build/bare_server
models=$top/build/models
command -v wrk >/dev/null || { echo "http.sh: wrk is needed (apt-get install wrk)" >&2; exit 2; }
[ -x "$server" ] && [ -x "$bare" ] && [ -d "$models" ] || { echo "http.sh: build first (make, make -C bench)" >&2; exit 2; }

lua=$(mktemp --suffix=.lua)
trap 'rm -f "$lua"; kill $spid $bpid 2>/dev/null || true' EXIT
cat > "$lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"demo-4d","tokens":["我","爱","你"],"embeddings":[[0.1,-0.2,0.3,0.1],[-0.1,0.2,0.2,-0.3],[0.2,0.1,-0.1,0.2]]}'
LUA

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
sport=$(free_port); bport=$(free_port)
"$server" --bind 127.0.0.1 --port "$sport" --models-dir "$models" 2>/dev/null & spid=$!
"$bare" "$bport" 2 & bpid=$!
sleep 1

rps() { wrk -t2 -c"$conns" -d"${secs}s" -s "$lua" "http://127.0.0.1:$1/v1/attention" | awk '/Requests\/sec/ {print $2}'; }
ours=(); base=()
for round in 1 2 3; do
    ours+=("$(rps "$sport")")
    base+=("$(rps "$bport")")
done
median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
mo=$(median "${ours[@]}"); mb=$(median "${base[@]}")
echo "attention-server (demo-4d, 我爱你): ${ours[*]} req/s, median $mo"
echo "bare libmicrohttpd server:         ${base[*]} req/s, median $mb"
awk -v a="$mo" -v b="$mb" 'BEGIN { printf "ratio: %.2f of the bare server\n", a / b }'
