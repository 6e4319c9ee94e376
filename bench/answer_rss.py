#!/usr/bin/env python3
# (i) The server's peak memory for one large answer: /v2 patterns as binary
# tensors against /v1 patterns as JSON numbers and as base64. demo-4d (one
# head, d_model 4) makes the request small (n × 16 bytes of embeddings) and
# the answer large (n² floats of patterns), so the answer is what the
# memory is spent on.
#
# Each run starts a fresh server (the built one, or --server's) with the
# default configuration on a free loopback port, sends a tiny /v2 request
# (so that every thread and library has started), resets the server's peak
# resident size (5 > /proc/PID/clear_refs), sends the large request, reads
# the whole answer and takes the server's VmHWM: the growth is VmHWM less
# the VmRSS it had before the request. Cases alternate within each round, so
# that other load on the machine falls on all of them alike; medians are
# quoted. MiB = 2^20 bytes.
#
#   bench/answer_rss.py [--server PATH] [--models DIR] [--runs 5] [--n 8000] [--v1-n 3900]
#                       [--only TEXT]
#
# --n: the /v2 answer's tokens (8000: 256 MB of patterns, the largest
# under the default --max-response-bytes of 256 MiB); --v1-n: the tokens of
# the /v1 answers and of a /v2 answer of the same size (3900: the largest
# whose JSON numbers, counted at their widest, fit the same limit); --only:
# the cases whose name holds TEXT ("base64", "/v2").
import argparse, http.client, json, os, random, socket, statistics, struct, subprocess, sys, time

top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--server", default=f"{top}/build/attention-server")
ap.add_argument("--models", default=f"{top}/build/models")
ap.add_argument("--runs", type=int, default=5)
ap.add_argument("--n", type=int, default=8000)
ap.add_argument("--v1-n", type=int, default=3900)
ap.add_argument("--only", default="", help="only the cases whose name holds this text")
args = ap.parse_args()
if not os.access(args.server, os.X_OK) or not os.path.isdir(args.models):
    sys.exit("answer_rss.py: build first (make)")

MiB = 1 << 20
rng = random.Random(1)


def embeddings(n):
    return [rng.uniform(-1, 1) for _ in range(n * 4)]


def v2_request(n):
    emb = struct.pack(f"<{n * 4}f", *embeddings(n))
    head = json.dumps({"inputs": [{"name": "embeddings", "shape": [1, n, 4], "datatype": "FP32",
                                   "parameters": {"binary_data_size": len(emb)}}],
                       "outputs": [{"name": "patterns", "parameters": {"binary_data": True}}]})
    return ("/v2/models/demo-4d/infer", head.encode() + emb,
            {"Inference-Header-Content-Length": str(len(head))})


def v1_request(n, encoding):
    e = embeddings(n)
    body = json.dumps({"model": "demo-4d", "encoding": encoding, "return": ["patterns"],
                       "embeddings": [e[i * 4:(i + 1) * 4] for i in range(n)]})
    return "/v1/attention", body.encode(), {"Content-Type": "application/json"}


cases = [(f"/v2 patterns, binary, n = {args.n}", args.n, v2_request(args.n)),
         (f"/v2 patterns, binary, n = {args.v1_n}", args.v1_n, v2_request(args.v1_n)),
         (f"/v1 patterns, JSON numbers, n = {args.v1_n}", args.v1_n, v1_request(args.v1_n, "float")),
         (f"/v1 patterns, base64, n = {args.v1_n}", args.v1_n, v1_request(args.v1_n, "base64"))]
cases = [c for c in cases if args.only in c[0]]


def status_bytes(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} for {pid}")


def post(port, path, body, headers):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", path, body, headers)
    r = c.getresponse()
    total = 0
    while True:  # read and drop: the client holds no copy
        d = r.read(1 << 20)
        if not d:
            break
        total += len(d)
    c.close()
    if r.status != 200:
        sys.exit(f"answer_rss.py: {path}: {r.status}")
    return total


def run_once(path, body, headers):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    srv = subprocess.Popen([args.server, "--bind", "127.0.0.1", "--port", str(port), "--models-dir",
                            args.models], stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.05)
        post(port, *v2_request(4))
        with open(f"/proc/{srv.pid}/clear_refs", "w") as f:
            f.write("5")
        before = status_bytes(srv.pid, "VmRSS:")
        t0 = time.monotonic()
        length = post(port, path, body, headers)
        seconds = time.monotonic() - t0
        return status_bytes(srv.pid, "VmHWM:") - before, length, seconds
    finally:
        srv.terminate()
        srv.wait()


print(f"load average before: {open('/proc/loadavg').read().split()[:3]}")
got = {c[0]: [] for c in cases}
for _ in range(args.runs):
    for name, n, req in cases:
        got[name].append(run_once(*req))
print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")
print()
print(f"server: {args.server}, {args.runs} runs each")
print()
print("| answer | patterns (n² floats) | answer bytes | peak RSS growth, median | min – max | "
      "÷ answer | ÷ patterns | request, median |")
print("|---|---|---|---|---|---|---|---|")
for name, n, _ in cases:
    peaks = [g[0] for g in got[name]]
    length = got[name][0][1]
    floats = n * n * 4
    peak = statistics.median(peaks)
    print(f"| {name} | {floats / MiB:.1f} MiB | {length / MiB:.1f} MiB | **{peak / MiB:.1f} MiB** | "
          f"{min(peaks) / MiB:.1f} – {max(peaks) / MiB:.1f} | {peak / length:.2f} | "
          f"{peak / floats:.2f} | {statistics.median(g[2] for g in got[name]):.2f} s |")
