#!/usr/bin/env bash
# Two builds of attention-server side by side (before and after a change):
# both started on 127.0.0.1 with the same models, then wrk rounds that
# alternate between them, posting the 我爱你 request on demo-4d; for each
# round, requests/s and the server's CPU time per request (utime + stime
# from /proc over the round). Prints the rounds and their medians.
#
#   bench/ab_http.sh OLD_SERVER NEW_SERVER [MODELS_DIR] [ROUNDS] [SECONDS]
set -euo pipefail
old=$1 new=$2
top=$(cd "$(dirname "$0")/.." && pwd)
models=${3:-$top/build/models}
rounds=${4:-8}
secs=${5:-3}
command -v wrk >/dev/null || { echo "ab_http.sh: wrk is needed (apt-get install wrk)" >&2; exit 2; }
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ports=()
for bin in "$old" "$new"; do
    p=$(free_port)
    "$bin" --bind 127.0.0.1 --port "$p" --models-dir "$models" 2>/dev/null &
    pids+=($!) ports+=("$p")
done
sleep 1
tck=$(getconf CLK_TCK)
for r in $(seq "$rounds"); do
    for k in 0 1; do
        pid=${pids[$k]}
        t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
        out=$(wrk -t2 -c32 -d"${secs}s" -s "$top/bench/woaini.lua" "http://127.0.0.1:${ports[$k]}/v1/attention")
        t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
        n=$(awk '/requests in/ {print $1}' <<<"$out")
        rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
        echo "$k $rps $(awk -v a="$t0" -v b="$t1" -v t="$tck" -v n="$n" 'BEGIN {print (b - a) / t / n * 1e6}')"
    done
done | python3 -c '
import sys, statistics
rows = {0: [], 1: []}
for line in sys.stdin:
    k, rps, cpu = line.split()
    rows[int(k)].append((float(rps), float(cpu)))
print("| server | requests/s (rounds) | median | CPU µs per request (rounds) | median |")
print("|---|---|---|---|---|")
for k, name in ((0, "before"), (1, "after")):
    r = rows[k]
    print("| %s | %s | %.0f | %s | %.1f |" % (name, ", ".join("%.0f" % x for x, _ in r),
          statistics.median(x for x, _ in r), ", ".join("%.1f" % c for _, c in r),
          statistics.median(c for _, c in r)))
m = [statistics.median(x for x, _ in rows[k]) for k in (0, 1)]
c = [statistics.median(y for _, y in rows[k]) for k in (0, 1)]
print()
print("after ÷ before: requests/s %.3f, CPU per request %.3f" % (m[1] / m[0], c[1] / c[0]))
'
