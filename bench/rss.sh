#!/usr/bin/env bash
# Peak memory of one GPT-2-shape computation (d_model 768, 12 heads of 64,
# causal, w_o) of n tokens on 1 worker, with and without patterns: the
# "Maximum resident set size" of /usr/bin/time -v over
# `bench_attention --rss N patterns|emb`, beside the bytes the process
# holds by necessity (inputs, weights, outputs) and its workspace, as that
# process reported them. MB = 10^6 bytes.
#
#   bench/rss.sh [N]        (default 8192; run from anywhere)
set -euo pipefail
n=${1:-8192}
bin=$(cd "$(dirname "$0")" && pwd)/build/bench_attention
target_mb=200
[ -x /usr/bin/time ] || { echo "rss.sh: /usr/bin/time is needed (apt-get install time)" >&2; exit 2; }
[ -x "$bin" ] || { echo "rss.sh: build first (make -C bench)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "## (c) Peak RSS, one GPT-2-shape computation of n = $n on 1 worker"
echo
echo "| outputs | compute | peak RSS | inputs + weights | embeddings out | patterns out | workspace | RSS before allocating | peak − inputs − weights | peak − inputs − weights − patterns | vs $target_mb MB |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for outputs in emb patterns; do
    /usr/bin/time -v "$bin" --rss "$n" "$outputs" >"$tmp/out" 2>"$tmp/err"
    peak_kb=$(awk -F': *' '/Maximum resident set size/ {print $2}' "$tmp/err")
    # the key=value pairs of bench_attention's one "rss ..." line
    awk -v line="$(grep '^rss ' "$tmp/out")" -v pk="$peak_kb" -v t="$target_mb" 'BEGIN {
        for (i = split(line, f, " "); i > 0; i--) { split(f[i], kv, "="); r[kv[1]] = kv[2] }
        if (r["status"] != "0") { print "rss.sh: the computation failed" > "/dev/stderr"; exit 1 }
        mb = 1e6; peak = pk * 1024 / mb; over = peak - r["inputs_weights"] / mb
        bare = over - r["patterns"] / mb
        printf "| %s | %.2f s | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %s | %.2f |\n",
            r["outputs"], r["seconds"], peak, r["inputs_weights"] / mb, r["embeddings"] / mb,
            r["patterns"] / mb, r["workspace"] / mb, r["rss_before"] / mb, over,
            r["patterns"] ? sprintf("%.1f MB", bare) : "—", bare / t
    }'
done
echo
echo "\"vs $target_mb MB\": (peak − inputs − weights − patterns) ÷ $target_mb MB; the target is ≤ 1 without patterns."
