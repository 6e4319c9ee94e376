#!/usr/bin/env bash
# (h) POST /v1/attention/batch against the same sequences as single
# requests: starts attention-server on a free loopback port with the
# built-in models and runs bench/build/bench_batch_http against it.
#
#   bench/batch_http.sh [bench_batch_http options: --seqs 64 --tokens 16 --rounds 7]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
server=$top/build/attention-server
client=$top/bench/build/bench_batch_http
models=$top/build/models
[ -x "$server" ] && [ -x "$client" ] && [ -d "$models" ] || { echo "batch_http.sh: build first (make, make -C bench)" >&2; exit 2; }
spid=
trap 'kill $spid 2>/dev/null || true' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$server" --bind 127.0.0.1 --port "$port" --models-dir "$models" 2>/dev/null & spid=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
"$client" "$port" "$@"
