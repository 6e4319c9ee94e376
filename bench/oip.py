#!/usr/bin/env python3
# (f) The Open Inference Protocol: one batch of B sequences of n tokens through
# POST /v2/models/MODEL/infer with binary tensors both ways (tritonclient's
# defaults: embeddings as bytes after the JSON header, no outputs named, so
# patterns and embeddings come back as bytes), against the same sequences as
# B POST /v1/attention requests (base64 tensors, the same outputs) on one
# kept-alive connection, and, when the server serves it, one
# POST /v1/attention/batch. Rounds alternate, so that other load falls on
# every form alike; medians are quoted. The answers are checked equal to
# the byte (sequence 0's embeddings) before anything is timed.
#
#   bench/oip.py PORT [MODEL] [B] [N] [ROUNDS]
import base64, http.client, json, random, statistics, struct, sys, time

port = int(sys.argv[1])
model = sys.argv[2] if len(sys.argv) > 2 else "gpt2-small-shape"
B = int(sys.argv[3]) if len(sys.argv) > 3 else 64
N = int(sys.argv[4]) if len(sys.argv) > 4 else 16
rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 15

conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

def call(method, path, body=None, headers={}):
    conn.request(method, path, body, headers)
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        sys.exit(f"oip.py: {path}: {r.status} {data[:300]!r}")
    return r, data

meta = json.loads(call("GET", f"/v2/models/{model}")[1])
dm = meta["inputs"][0]["shape"][-1]
rng = random.Random(1)
emb = struct.pack(f"<{B * N * dm}f", *(rng.uniform(-1, 1) for _ in range(B * N * dm)))
header = json.dumps({"inputs": [{"name": "embeddings", "shape": [B, N, dm], "datatype": "FP32",
                                 "parameters": {"binary_data_size": len(emb)}}],
                     "parameters": {"binary_data_output": True}}).encode()
v2_body = header + emb
v2_headers = {"Inference-Header-Content-Length": str(len(header))}
seq_bytes = N * dm * 4

def v1_body(s):
    data = base64.b64encode(emb[s * seq_bytes:(s + 1) * seq_bytes]).decode()
    return json.dumps({"model": model, "encoding": "base64", "return": ["patterns", "embeddings"],
                       "embeddings": {"dtype": "float32", "shape": [N, dm], "data": data}})
v1_bodies = [v1_body(s) for s in range(B)]
json_headers = {"Content-Type": "application/json"}
batch_body = json.dumps({"model": model, "encoding": "base64", "return": ["patterns", "embeddings"],
                         "sequences": [{"embeddings": json.loads(b)["embeddings"]} for b in v1_bodies]})

def run_v2():
    r, data = call("POST", f"/v2/models/{model}/infer", v2_body, v2_headers)
    hl = int(r.getheader("Inference-Header-Content-Length"))
    head = json.loads(data[:hl])
    at = hl
    for o in head["outputs"]:
        if o["name"] == "embeddings":
            return data[at:at + seq_bytes]
        at += o["parameters"]["binary_data_size"]

def run_v1():
    first = None
    for s in range(B):
        j = json.loads(call("POST", "/v1/attention", v1_bodies[s], json_headers)[1])
        if s == 0:
            first = base64.b64decode(j["embeddings"]["data"])
    return first

# A server without the batch endpoint answers 404 from the headers and
# closes the connection: asked on a connection of its own.
try:
    pc = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    pc.request("POST", "/v1/attention/batch", batch_body, json_headers)
    probe = pc.getresponse()
    probe.read()
    has_batch = probe.status == 200
    pc.close()
except (BrokenPipeError, ConnectionResetError, http.client.HTTPException):
    has_batch = False

def run_batch():
    j = json.loads(call("POST", "/v1/attention/batch", batch_body, json_headers)[1])
    return base64.b64decode(j["sequences"][0]["embeddings"]["data"])

forms = [("v2 infer, binary", run_v2), (f"{B} x /v1/attention, base64", run_v1)]
if has_batch:
    forms.append(("/v1/attention/batch, base64", run_batch))
want = run_v1()
for name, f in forms:
    if f() != want:
        sys.exit(f"oip.py: {name}: sequence 0's embeddings differ from /v1/attention's")

times = {name: [] for name, _ in forms}
for _ in range(rounds):
    for name, f in forms:
        t0 = time.perf_counter()
        f()
        times[name].append((time.perf_counter() - t0) * 1e3)

print(f"## (f) Open Inference Protocol: {model}, B = {B} sequences of n = {N}, {rounds} rounds")
base = statistics.median(times[forms[0][0]])
for name, _ in forms:
    m = statistics.median(times[name])
    print(f"{name:32s} median {m:8.2f} ms  (min {min(times[name]):8.2f})  ratio to v2 {m / base:5.2f}")
