#!/usr/bin/env bash
# Two builds of attention-server compared by the instructions they execute
# per request, which a busy machine does not change: each server runs under
# callgrind (--workers 1 --io-threads 1) twice per endpoint, once answering
# N1 requests and once N2, posted one after the other on one keep-alive
# connection; (instructions of the N2 run - those of the N1 run) / (N2 - N1)
# is the user-space instructions of one request, start-up, model loading and
# shutdown cancelled out. The bodies are bench/ab_bodies.py's.
#
#   bench/ab_instr.sh OLD_SERVER NEW_SERVER [MODELS_DIR] [ENDPOINTS] [KEEP_DIR]
#
# ENDPOINTS: comma-separated, default single,batch,v2,gpt2. N1, N2 are
# 100, 600 for the small endpoints and 3, 13 for gpt2 (~1 s a request under
# callgrind). With KEEP_DIR, the callgrind files stay there
# (ENDPOINT-before-N.out, ...) for callgrind_annotate.
set -euo pipefail
old=$1 new=$2
top=$(cd "$(dirname "$0")/.." && pwd)
models=${3:-$top/build/models}
endpoints=${4:-single,batch,v2,gpt2}
keep=${5:-}
command -v valgrind >/dev/null || { echo "ab_instr.sh: valgrind is needed" >&2; exit 2; }
tmp=$(mktemp -d)
pid=
trap '[[ -z $pid ]] || kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
[[ -z $keep ]] || mkdir -p "$keep"
declare -A path
while read -r e p f; do path[$e]=$p; done < <(python3 "$top/bench/ab_bodies.py" "$tmp")
declare -A n1=([single]=100 [batch]=100 [v2]=100 [gpt2]=3)
declare -A n2=([single]=600 [batch]=600 [v2]=600 [gpt2]=13)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

count() {  # count SERVER ENDPOINT N -> instructions of the whole run
    local bin=$1 e=$2 n=$3 port out
    port=$(free_port)
    out=$tmp/cg.out
    valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$bin" --bind 127.0.0.1 --port "$port" --models-dir "$models" \
        --workers 1 --io-threads 1 >/dev/null 2>"$tmp/vg.log" &
    pid=$!
    python3 - "$port" "${path[$e]}" "$tmp/$e.json" "$n" <<'PY'
import http.client, sys, time
port, path, body, n = int(sys.argv[1]), sys.argv[2], open(sys.argv[3], "rb").read(), int(sys.argv[4])
for _ in range(600):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        c.request("GET", "/v2/health/ready")
        if c.getresponse().status == 200:
            break
    except OSError:
        pass
    time.sleep(0.2)
else:
    sys.exit("the server did not start")
c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
for i in range(n):
    c.request("POST", path, body, {"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    if r.status != 200:
        sys.exit("answered %d" % r.status)
PY
    kill -TERM "$pid"
    wait "$pid" || true
    pid=
    [[ -z $keep ]] || cp "$out" "$keep/$e-$4-$n.out"
    awk '/^(summary|totals):/ {print $2; exit}' "$out"
}

IFS=, read -ra eps <<<"$endpoints"
for e in "${eps[@]}"; do
    [[ -n ${path[$e]:-} ]] || { echo "ab_instr.sh: unknown endpoint '$e'" >&2; exit 2; }
    for k in before after; do
        bin=$old; [[ $k == before ]] || bin=$new
        a=$(count "$bin" "$e" "${n1[$e]}" "$k")
        b=$(count "$bin" "$e" "${n2[$e]}" "$k")
        echo "$e $k $a $b $(( (b - a) / (${n2[$e]} - ${n1[$e]}) ))"
    done
done | python3 -c '
import sys
rows = {}
for line in sys.stdin:
    e, k, a, b, per = line.split()
    rows.setdefault(e, {})[k] = int(per)
print("| endpoint | instructions per request before | after | after ÷ before |")
print("|---|---|---|---|")
for e, r in rows.items():
    print("| %s | %s | %s | %.4f |" % (e, format(r["before"], ","), format(r["after"], ","), r["after"] / r["before"]))
'
