#!/usr/bin/env bash
# Request overhead, measured side by side: wrk --latency posts the 我爱你
# request on demo-4d to attention-server, and the same body to
# bench/bare_server (a libmicrohttpd server that reads the body and answers
# a fixed one), on 127.0.0.1, alternating three rounds each; prints
# requests/s, p50 and p99 latency per round, their medians, and the ratios.
#
#   bench/http.sh [SECONDS] [CONNECTIONS]      (run from anywhere)
set -euo pipefail
secs=${1:-5}
conns=${2:-32}
top=$(cd "$(dirname "$0")/.." && pwd)
server=$top/build/attention-server
bare=$top/bench/build/bare_server
models=$top/build/models
command -v wrk >/dev/null || { echo "http.sh: wrk is needed (apt-get install wrk)" >&2; exit 2; }
[ -x "$server" ] && [ -x "$bare" ] && [ -d "$models" ] || { echo "http.sh: build first (make, make -C bench)" >&2; exit 2; }

tmp=$(mktemp -d)
spid=; bpid=
trap 'rm -rf "$tmp"; kill $spid $bpid 2>/dev/null || true' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
sport=$(free_port); bport=$(free_port)
"$server" --bind 127.0.0.1 --port "$sport" --models-dir "$models" 2>/dev/null & spid=$!
"$bare" "$bport" 2 & bpid=$!
sleep 1

# One round: "requests/s p50_ms p99_ms" (wrk prints latencies in us, ms or s).
round() {
    wrk -t2 -c"$conns" -d"${secs}s" --latency -s "$top/bench/woaini.lua" "http://127.0.0.1:$1/v1/attention" |
        awk 'function ms(v) {
                 if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0;
                 if (v ~ /m$/) return v * 60000; return v * 1000 }
             /^ +50%/ { p50 = ms($2) } /^ +99%/ { p99 = ms($2) }
             /Requests\/sec/ { rps = $2 }
             /Non-2xx/ { bad = $NF }
             END { if (bad) { print "http.sh: " bad " non-2xx answers" > "/dev/stderr"; exit 1 }
                   printf "%.0f %.3f %.3f\n", rps, p50, p99 }'
}
: > "$tmp/ours"; : > "$tmp/base"
for _ in 1 2 3; do
    round "$sport" >> "$tmp/ours"
    round "$bport" >> "$tmp/base"
done

# Median of column $1 of a 3-line file.
med() { awk -v c="$1" '{print $c}' "$2" | sort -g | sed -n 2p; }
list() { awk -v c="$1" '{printf "%s%s", (NR > 1 ? ", " : ""), $c}' "$2"; }
echo "## (b) HTTP: attention-server against a bare libmicrohttpd server"
echo
echo "wrk -t2 -c$conns -d${secs}s --latency, POST of the 我爱你 request on demo-4d, 127.0.0.1, three alternating rounds each."
echo
echo "| server | requests/s (rounds) | requests/s median | p50 (rounds) | p50 median | p99 (rounds) | p99 median |"
echo "|---|---|---|---|---|---|---|"
for s in ours base; do
    name=$([ $s = ours ] && echo attention-server || echo "bare libmicrohttpd")
    echo "| $name | $(list 1 "$tmp/$s") | $(med 1 "$tmp/$s") | $(list 2 "$tmp/$s") ms | $(med 2 "$tmp/$s") ms | $(list 3 "$tmp/$s") ms | $(med 3 "$tmp/$s") ms |"
done
echo
awk -v a="$(med 1 "$tmp/ours")" -v b="$(med 1 "$tmp/base")" \
    -v a50="$(med 2 "$tmp/ours")" -v b50="$(med 2 "$tmp/base")" \
    -v a99="$(med 3 "$tmp/ours")" -v b99="$(med 3 "$tmp/base")" \
    'BEGIN { printf "Ratio attention-server ÷ bare: requests/s %.2f, p50 latency %.2f, p99 latency %.2f\n",
             a / b, a50 / b50, a99 / b99 }'

# The server's own compute figure for large requests: Server-Timing's
# compute of one GPT-2 request at a time on gpt2-small-shape (embeddings as
# a base64 tensor, so that JSON does not dominate), to set beside table (a)'s
# "server" column.
echo
echo "Server-Timing compute, one request at a time on gpt2-small-shape (causal), median of 10 sent back to back:"
echo
echo "| n | outputs | compute (Server-Timing) |"
echo "|---|---|---|"
for n in 128 1024; do
    for ret in default emb; do
        python3 - "$n" "$ret" > "$tmp/big.json" <<'PY'
import base64, json, random, struct, sys
n, ret = int(sys.argv[1]), sys.argv[2]
random.seed(n)
data = struct.pack("<%df" % (n * 768), *(random.uniform(-1, 1) for _ in range(n * 768)))
body = {"model": "gpt2-small-shape", "encoding": "base64",
        "embeddings": {"dtype": "float32", "shape": [n, 768],
                       "data": base64.b64encode(data).decode()}}
if ret == "emb":
    body["return"] = ["embeddings"]
print(json.dumps(body))
PY
        : > "$tmp/compute"
        # Eleven requests back to back on one connection, the first not
        # counted: on a VM, a core left idle between requests is
        # descheduled by the host and a split's helper then arrives late.
        args=()
        for k in 1 2 3 4 5 6 7 8 9 10 11; do
            [ "$k" = 1 ] || args+=(--next)
            args+=(-s -o /dev/null -D - -H 'Content-Type: application/json' --data-binary @"$tmp/big.json"
                   "http://127.0.0.1:$sport/v1/attention")
        done
        curl "${args[@]}" | sed -n 's/.*compute;dur=\([0-9.]*\).*/\1/p' | tail -n +2 > "$tmp/compute"
        echo "| $n | $ret | $(sort -g "$tmp/compute" | sed -n 5,6p | awk '{s += $1} END {printf "%.3f", s / NR}') ms |"
    done
done
