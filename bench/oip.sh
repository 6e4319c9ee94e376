#!/usr/bin/env bash
# (f) The Open Inference Protocol's batch against /v1 (bench/oip.py): starts
# the built server on a free loopback port with the built-in models, runs
# oip.py against it, stops it.
#
#   bench/oip.sh [MODEL] [B] [N] [ROUNDS]      (run from anywhere)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
server=$top/build/attention-server
[ -x "$server" ] && [ -d "$top/build/models" ] || { echo "oip.sh: build first (make)" >&2; exit 2; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$server" --bind 127.0.0.1 --port "$port" --models-dir "$top/build/models" 2>/dev/null & spid=$!
trap 'kill $spid 2>/dev/null || true' EXIT
sleep 1
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$top/bench/oip.py" "$port" "${1:-gpt2-small-shape}" "${2:-64}" "${3:-16}" "${4:-15}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
