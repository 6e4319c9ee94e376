#!/usr/bin/env bash
# Two builds of attention-server side by side (before and after a change):
# both started on 127.0.0.1 with the same models, then wrk rounds that
# alternate between them (which server goes first alternates too), for each
# endpoint asked for; for each round, requests/s and the server's CPU time
# per request (utime + stime of the process from /proc over the round).
# Prints the rounds and their medians, per endpoint, and a summary.
#
#   bench/ab_http.sh OLD_SERVER NEW_SERVER [MODELS_DIR] [ROUNDS] [SECONDS] [ENDPOINTS]
#
# ENDPOINTS, a comma-separated list (default "single"):
#   single  POST /v1/attention, the 我爱你 request on demo-4d (bench/woaini.lua's)
#   batch   POST /v1/attention/batch, 4 sequences, each that request
#   v2      POST /v2/models/demo-4d/infer, its embeddings as FP32 [1, 3, 4]
#   gpt2    POST /v1/attention on gpt2-small-shape, 64 tokens (~310 kB;
#           runs on the worker pool)
# (the bodies are bench/ab_bodies.py's)
# The first three are small enough to be answered on the polling thread.
# wrk runs 2 threads and 32 connections (4 for gpt2, whose answers take
# milliseconds: enough to keep the 2 default workers busy).
# Every body is posted once to each server with curl first; anything but
# 200 stops the run. Each server and endpoint has a 1 s wrk warm-up.
set -euo pipefail
old=$1 new=$2
top=$(cd "$(dirname "$0")/.." && pwd)
models=${3:-$top/build/models}
rounds=${4:-8}
secs=${5:-3}
endpoints=${6:-single}
command -v wrk >/dev/null || { echo "ab_http.sh: wrk is needed (apt-get install wrk)" >&2; exit 2; }
command -v curl >/dev/null || { echo "ab_http.sh: curl is needed" >&2; exit 2; }
pids=()
tmp=$(mktemp -d)
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT

# The bodies, one file per endpoint, and their paths.
declare -A path
while read -r e p f; do path[$e]=$p; done < <(python3 "$top/bench/ab_bodies.py" "$tmp")
declare -A conns=([single]=32 [batch]=32 [v2]=32 [gpt2]=4)
IFS=, read -ra eps <<<"$endpoints"
for e in "${eps[@]}"; do
    [[ -n ${path[$e]:-} ]] || { echo "ab_http.sh: unknown endpoint '$e' (single, batch, v2, gpt2)" >&2; exit 2; }
done

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ports=()
for bin in "$old" "$new"; do
    p=$(free_port)
    "$bin" --bind 127.0.0.1 --port "$p" --models-dir "$models" 2>/dev/null &
    pids+=($!) ports+=("$p")
done
for k in 0 1; do
    for i in $(seq 50); do
        curl -sf -o /dev/null "http://127.0.0.1:${ports[$k]}/v1/models" && break
        sleep 0.1
    done
done
for e in "${eps[@]}"; do
    for k in 0 1; do
        code=$(curl -s -o "$tmp/answer$k" -w '%{http_code}' -H 'Content-Type: application/json' \
               --data-binary "@$tmp/$e.json" "http://127.0.0.1:${ports[$k]}${path[$e]}")
        if [[ $code != 200 ]]; then
            echo "ab_http.sh: $e on server $k answered $code: $(head -c 300 "$tmp/answer$k")" >&2
            exit 1
        fi
    done
    same=$(cmp -s "$tmp/answer0" "$tmp/answer1" && echo "the same bytes" || echo "answers differ")
    echo "# $e: 200 from both, request $(stat -c %s "$tmp/$e.json") B, answers $(stat -c %s "$tmp/answer0") B and $(stat -c %s "$tmp/answer1") B, $same" >&2
done
run() {  # run SERVER ENDPOINT SECONDS
    wrk -t2 -c"${conns[$2]}" -d"$3s" --timeout 10s -s "$top/bench/body_file.lua" \
        "http://127.0.0.1:${ports[$1]}${path[$2]}" -- "$tmp/$2.json"
}
for e in "${eps[@]}"; do run 0 "$e" 1 >/dev/null; run 1 "$e" 1 >/dev/null; done
tck=$(getconf CLK_TCK)
for r in $(seq "$rounds"); do
    for e in "${eps[@]}"; do
        for k in $(( (r + 1) % 2 )) $(( r % 2 )); do
            pid=${pids[$k]}
            t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
            out=$(run "$k" "$e" "$secs")
            t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
            n=$(awk '/requests in/ {print $1}' <<<"$out")
            rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
            bad=$(awk '/Non-2xx/ {print $NF} /Socket errors/ {print "errors"}' <<<"$out" | tr '\n' ' ')
            [[ -z $bad ]] || echo "ab_http.sh: round $r, $e, server $k: non-2xx or socket errors: $bad" >&2
            echo "$e $k $rps $(awk -v a="$t0" -v b="$t1" -v t="$tck" -v n="$n" 'BEGIN {print (b - a) / t / n * 1e6}')"
        done
    done
done | python3 -c '
import sys, statistics
rows, order = {}, []
for line in sys.stdin:
    e, k, rps, cpu = line.split()
    if e not in rows:
        rows[e] = {0: [], 1: []}
        order.append(e)
    rows[e][int(k)].append((float(rps), float(cpu)))
def quartiles(xs):
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return q[0], q[2]
summary = []
for e in order:
    print("%s:" % e)
    print()
    print("| server | requests/s (rounds) | median | CPU µs per request (rounds) | median |")
    print("|---|---|---|---|---|")
    for k, name in ((0, "before"), (1, "after")):
        r = rows[e][k]
        print("| %s | %s | %.0f | %s | %.1f |" % (name, ", ".join("%.0f" % x for x, _ in r),
              statistics.median(x for x, _ in r), ", ".join("%.1f" % c for _, c in r),
              statistics.median(c for _, c in r)))
    m = [statistics.median(x for x, _ in rows[e][k]) for k in (0, 1)]
    c = [statistics.median(y for _, y in rows[e][k]) for k in (0, 1)]
    # the two servers of a round ran one after the other: their ratio, round by round
    pr = [a[0] / b[0] for a, b in zip(rows[e][1], rows[e][0])]
    pc = [a[1] / b[1] for a, b in zip(rows[e][1], rows[e][0])]
    print()
    print("after ÷ before: requests/s %.3f, CPU per request %.3f" % (m[1] / m[0], c[1] / c[0]))
    print("round by round: requests/s %s; CPU per request %s" % (
          ", ".join("%.2f" % x for x in pr), ", ".join("%.2f" % x for x in pc)))
    print()
    summary.append((e, m, c, quartiles(pr), quartiles(pc)))
print("| endpoint | requests/s before | after | ratio | rounds\x27 ratios, middle half | CPU µs/request before | after | ratio | rounds\x27 ratios, middle half |")
print("|---|---|---|---|---|---|---|---|---|")
for e, m, c, qr, qc in summary:
    print("| %s | %.0f | %.0f | %.3f | %.2f – %.2f | %.1f | %.1f | %.3f | %.2f – %.2f |" % (
          e, m[0], m[1], m[1] / m[0], qr[0], qr[1], c[0], c[1], c[1] / c[0], qc[0], qc[1]))
'
