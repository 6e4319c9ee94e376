#!/usr/bin/env bash
# (k) Peak memory of a stack of 12 GPT-2-shaped layers against one layer:
# `bench_stack --rss L`, a fresh process for each run, L = 1 and 12
# alternating. Each process allocates and fills all 12 layers' weights
# whatever L, starts the server's pool of 2 workers, resets its peak
# (/proc/self/clear_refs), computes one stack of L layers at n tokens with
# the final embeddings only, split as the server splits, and reports VmRSS
# before and VmHWM after. "growth" is that peak less the RSS before: the
# computation's own memory. Medians of the runs; MB = 10^6 bytes.
#
#   bench/stack_rss.sh [--runs 3] [--n 4096]
set -euo pipefail
runs=3
n=4096
while [ $# -gt 0 ]; do
    case $1 in
    --runs) runs=$2; shift 2 ;;
    --n) n=$2; shift 2 ;;
    *) echo "usage: $0 [--runs R] [--n N]" >&2; exit 2 ;;
    esac
done
bin=$(cd "$(dirname "$0")" && pwd)/build/bench_stack
[ -x "$bin" ] || { echo "stack_rss.sh: build first (make -C bench build/bench_stack)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq 1 "$runs"); do
    for L in 1 12; do
        "$bin" --rss "$L" --n "$n" | grep '^stack_rss ' >>"$tmp/L$L"
    done
done

echo "## (k) Peak RSS of a stack of L GPT-2-shaped layers at n = $n, final embeddings only"
echo
echo "$runs runs of each, alternating; medians (MB = 10^6 bytes). Every process holds all 12 layers' weights."
echo
echo "| L | peak RSS (VmHWM) | RSS before the call | growth | attn_stack_workspace_need | compute | E_L hash |"
echo "|---|---:|---:|---:|---:|---:|---|"
# one row per L, then the ratios; the key=value pairs of each run's line
awk '
function med(list,   a, k, t, i, j) {
    k = split(list, a, " ")
    for (i = 2; i <= k; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
{
    delete r
    for (i = 2; i <= NF; i++) { split($i, kv, "="); r[kv[1]] = kv[2] }
    if (r["reset"] != "1") { print "stack_rss.sh: could not reset the peak" > "/dev/stderr"; exit 1 }
    L = r["L"]; Ls[L] = 1
    peak[L] = peak[L] " " r["peak"]; before[L] = before[L] " " r["rss_before"]
    growth[L] = growth[L] " " (r["peak"] - r["rss_before"]); secs[L] = secs[L] " " r["seconds"]
    need[L] = r["need"]; hash[L] = r["hash"]; weights = r["weights"]
}
END {
    mb = 1e6
    for (L = 1; L <= 12; L++) {
        if (!(L in Ls)) continue
        p[L] = med(peak[L]); g[L] = med(growth[L])
        printf "| %d | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.2f s | %s |\n", L, p[L] / mb,
            med(before[L]) / mb, g[L] / mb, need[L] / mb, med(secs[L]), hash[L]
    }
    printf "\nL = 12 ÷ L = 1: peak RSS **%.3f**, growth %.3f, attn_stack_workspace_need %.3f (weights of the 12 layers: %.1f MB in both)\n",
        p[12] / p[1], g[12] / g[1], need[12] / need[1], weights / mb
}' "$tmp/L1" "$tmp/L12"
