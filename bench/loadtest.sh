#!/usr/bin/env bash
# A bounded load test of the built server on 127.0.0.1 (`make loadtest`).
#
# wrk (-t2) posts a mix of requests, a quarter each: the 我爱你 request on
# demo-4d, a tiny request with inline weights and a custom mask (both
# answered on the polling threads), a GPT-2-shape request of 4 tokens on
# gpt2-small-shape and one of 16 tokens asking for the patterns of two heads
# (both computed by the workers). Every answer's status is counted; every
# 50th 200 body is checked to be a whole answer (it names its model or its
# shape, holds "embeddings" or "patterns", ends with "}").
#
#   1. 64 connections for LONG seconds (at least 100,000 requests), the RSS
#      sampled against the server's request count: after 100,000 requests
#      it must be within 5 % of what it was after the first 10,000;
#   2. 256 connections for SECONDS.
#
# Fails on any socket error, any status but 200 and the documented 503,
# any bad body, or RSS growth over 5 %. Prints markdown for bench/README.md.
#
#   bench/loadtest.sh [SECONDS [LONG]]   (from the top of the tree, after make;
#                                         20 and 75 by default)
set -euo pipefail
secs=${1:-20}
long=${2:-75}
top=$(cd "$(dirname "$0")/.." && pwd)
server=$top/build/attention-server
models=$top/build/models
command -v wrk >/dev/null || { echo "loadtest: wrk is needed (apt-get install wrk)" >&2; exit 2; }
[ -x "$server" ] && [ -d "$models" ] || { echo "loadtest: build first (make)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'kill $spid 2>/dev/null || true; rm -rf "$tmp"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$server" --bind 127.0.0.1 --port "$port" --models-dir "$models" 2>"$tmp/server.log" & spid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done

python3 - "$tmp" <<'PY'
import json, random, sys
tmp = sys.argv[1]
random.seed(1)
def row(n): return [round(random.uniform(-1, 1), 4) for _ in range(n)]
bodies = [
    {"model": "demo-4d", "tokens": ["我", "爱", "你"],
     "embeddings": [[0.1, -0.2, 0.3, 0.1], [-0.1, 0.2, 0.2, -0.3], [0.2, 0.1, -0.1, 0.2]]},
    {"embeddings": [[1, 0], [0, 1], [0.5, 0.5]],
     "weights": {"heads": [{"w_q": [[1, 0], [0, 1]], "w_k": [[0, 1], [1, 0]], "w_v": [[1, 0], [0, 1]]}]},
     "mask": [[1, 0, 0], [1, 1, 0], [0, 1, 1]]},
    {"model": "gpt2-small-shape", "embeddings": [row(768) for _ in range(4)], "return": ["embeddings"]},
    {"model": "gpt2-small-shape", "embeddings": [row(768) for _ in range(16)], "select_heads": [0, 11]},
]
with open(tmp + "/bodies.lua", "w") as f:
    f.write("bodies = {\n")
    for b in bodies:
        f.write("  [==[" + json.dumps(b, ensure_ascii=False, separators=(",", ":")) + "]==],\n")
    f.write("}\n")
PY

cat > "$tmp/mix.lua" <<EOF
dofile("$tmp/bodies.lua")
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args)
    n, checked, bad, statuses = 0, 0, 0, {}
    wrk.method = "POST"
    wrk.headers["Content-Type"] = "application/json"
end
function request()
    n = n + 1
    return wrk.format(nil, "/v1/attention", nil, bodies[(n % #bodies) + 1])
end
function response(status, headers, body)
    statuses[status] = (statuses[status] or 0) + 1
    if status == 200 and (statuses[200] % 50) == 0 then
        checked = checked + 1
        if not (body:find('"embeddings"', 1, true) or body:find('"patterns"', 1, true))
           or body:sub(-1) ~= "}" or not body:find('"n_tokens"', 1, true) then
            bad = bad + 1
        end
    end
end
function done(summary, latency, requests)
    local total = {}
    local c, b = 0, 0
    for _, t in ipairs(threads) do
        for s, k in pairs(t:get("statuses")) do total[s] = (total[s] or 0) + k end
        c = c + t:get("checked"); b = b + t:get("bad")
    end
    local parts = {}
    for s, k in pairs(total) do table.insert(parts, s .. "=" .. k) end
    table.sort(parts)
    local e = summary.errors
    io.write(string.format("RESULT requests=%d rps=%.0f p50=%.3f p99=%.3f connect=%d read=%d write=%d timeout=%d checked=%d bad=%d statuses=%s\n",
        summary.requests, summary.requests / (summary.duration / 1e6),
        latency:percentile(50) / 1000, latency:percentile(99) / 1000,
        e.connect, e.read, e.write, e.timeout, c, b, table.concat(parts, ",")))
end
EOF

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$spid/status"; }
# Requests answered so far, from the server's own counter.
answered() {
    curl -sf "http://127.0.0.1:$port/metrics" |
        awk '/^attn_http_requests_total\{route="attention"/ {s += $2} END {print s + 0}'
}
declare -a rows
# Runs wrk; fails on any fault. $1 connections, $2 seconds.
run() {
    out=$(wrk -t2 -c"$1" -d"$2s" --latency -s "$tmp/mix.lua" "http://127.0.0.1:$port" | grep '^RESULT')
    eval "$(echo "$out" | sed 's/^RESULT //; s/ /\n/g' | grep -v '^statuses=' | sed 's/^/r_/')"
    statuses=$(echo "$out" | sed 's/.*statuses=//')
    local others
    others=$(echo "$statuses" | tr ',' '\n' | grep -v -E '^(200|503)=' || true)
    if [ "$((r_connect + r_read + r_write + r_timeout))" != 0 ] || [ -n "$others" ] || [ "$r_bad" != 0 ]; then
        echo "loadtest: FAILED at $1 connections: $out" >&2
        exit 1
    fi
    rows+=("| $1 | $2 s | $r_requests | $r_rps | $r_p50 ms | $r_p99 ms | $statuses | $r_checked, all whole |")
}
# One long run at 64 connections, the RSS sampled against the server's
# request count: after the first 10,000 requests, and after 100,000.
: > "$tmp/samples"
( while sleep 0.5; do echo "$(answered) $(rss_kb)" >> "$tmp/samples"; done ) & sampler=$!
run 64 "$long"
kill $sampler 2>/dev/null; wait $sampler 2>/dev/null || true
read -r at10 rss10 < <(awk '$1 >= 10000 {print; exit}' "$tmp/samples") || true
read -r at100 rss100 < <(awk '$1 >= 100000 {print; exit}' "$tmp/samples") || true
[ -n "${rss10:-}" ] && [ -n "${rss100:-}" ] ||
    { echo "loadtest: FAILED: fewer than 100,000 requests in $long s" >&2; exit 1; }
run 256 "$secs"
rss_end=$(rss_kb)
curl -sf "http://127.0.0.1:$port/healthz" >/dev/null || { echo "loadtest: /healthz does not answer" >&2; exit 1; }

echo "## Load test"
echo
echo "bench/loadtest.sh: wrk -t2, a quarter each of 我爱你 on demo-4d, tiny inline weights with a custom mask, GPT-2 shape n = 4 (embeddings) and n = 16 (patterns of 2 heads), on 127.0.0.1."
echo
echo "| connections | duration | requests | requests/s | p50 | p99 | statuses | bodies checked |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
awk -v a="$rss10" -v b="$rss100" -v c="$rss_end" -v n1="$at10" -v n2="$at100" 'BEGIN {
    printf "RSS after %d requests: %.1f MB; after %d: %.1f MB (%+.1f %%); after the 256-connection run: %.1f MB\n",
           n1, a / 1024, n2, b / 1024, 100 * (b - a) / a, c / 1024 }'
awk -v a="$rss10" -v b="$rss100" 'BEGIN { exit (b > a * 1.05) ? 1 : 0 }' ||
    { echo "loadtest: FAILED: RSS grew more than 5 % between 10,000 and 100,000 requests" >&2; exit 1; }
echo "No socket errors, no status but 200 and 503, every checked body whole."
