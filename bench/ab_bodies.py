#!/usr/bin/env python3
"""The request bodies of bench/ab_http.sh and bench/ab_instr.sh, one file per
endpoint in DIR (DIR/single.json, ...), and a table of endpoint, path and
file on stdout.

    bench/ab_bodies.py DIR

  single  POST /v1/attention, the 我爱你 request on demo-4d (bench/woaini.lua's)
  batch   POST /v1/attention/batch, 4 sequences, each that request
  v2      POST /v2/models/demo-4d/infer, its embeddings as FP32 [1, 3, 4]
  gpt2    POST /v1/attention on gpt2-small-shape, 64 tokens of pseudo-random
          embeddings in [-1, 1] (~310 kB; over the inline rule's 4 KiB and
          1e6 FLOPs, so it runs on the worker pool)
"""
import json
import sys

d = sys.argv[1]
tok = ["我", "爱", "你"]
emb = [[0.1, -0.2, 0.3, 0.1], [-0.1, 0.2, 0.2, -0.3], [0.2, 0.1, -0.1, 0.2]]
x, rows = 12345, []  # Park-Miller: the same body on every run
for i in range(64):
    row = []
    for j in range(768):
        x = x * 16807 % 2147483647
        row.append(round((x % 2001 - 1000) / 1000, 3))
    rows.append(row)
bodies = [
    ("single", "/v1/attention", {"model": "demo-4d", "tokens": tok, "embeddings": emb}),
    ("batch", "/v1/attention/batch",
     {"model": "demo-4d", "sequences": [{"tokens": tok, "embeddings": emb}] * 4}),
    ("v2", "/v2/models/demo-4d/infer",
     {"inputs": [{"name": "embeddings", "shape": [1, 3, 4], "datatype": "FP32",
                  "data": [v for row in emb for v in row]}]}),
    ("gpt2", "/v1/attention", {"model": "gpt2-small-shape", "embeddings": rows}),
]
for name, path, obj in bodies:
    with open(f"{d}/{name}.json", "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")))
    print(name, path, f"{d}/{name}.json")
