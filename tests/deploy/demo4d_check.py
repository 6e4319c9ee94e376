#!/usr/bin/env python3
"""Checks a /v1/attention answer on demo-4d for the worked example's
embeddings (models/README.md) against a float64 reference computed here:
W_q and W_k as printed there, W_v = W_o = I, no mask, scale 1/sqrt(4).
The request: {"model": "demo-4d", "embeddings": EMBEDDINGS}."""
import json
import math
import sys

EMBEDDINGS = [[0.1, -0.2, 0.3, 0.1], [-0.1, 0.2, 0.2, -0.3], [0.2, 0.1, -0.1, 0.2]]
W_Q = [[1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 0, 1], [0, 1, 1, 0]]
W_K = [[0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 1, 0], [1, 0, 0, 1]]


def mul(a, b):
    return [[sum(row[t] * b[t][j] for t in range(len(b))) for j in range(len(b[0]))] for row in a]


def reference():
    e = EMBEDDINGS
    q, k = mul(e, W_Q), mul(e, W_K)
    patterns = []
    for qi in q:
        s = [0.5 * sum(x * y for x, y in zip(qi, kj)) for kj in k]
        top = max(s)
        w = [math.exp(x - top) for x in s]
        patterns.append([x / sum(w) for x in w])
    out = [[e[i][j] + sum(patterns[i][t] * e[t][j] for t in range(len(e))) for j in range(4)]
           for i in range(len(e))]
    return patterns, out


def main():
    if sys.argv[1:] == ["--request"]:
        print(json.dumps({"model": "demo-4d", "embeddings": EMBEDDINGS}, separators=(",", ":")))
        return
    got = json.load(open(sys.argv[1]))
    patterns, out = reference()
    if got.get("n_tokens") != 3 or got.get("n_heads") != 1:
        sys.exit(f"demo-4d: n_tokens {got.get('n_tokens')}, n_heads {got.get('n_heads')}")
    for what, want, have in (("patterns", patterns, got["patterns"][0]),
                             ("embeddings", out, got["embeddings"])):
        for i, (rw, rh) in enumerate(zip(want, have, strict=True)):
            for j, (w, h) in enumerate(zip(rw, rh, strict=True)):
                if abs(w - h) > 1e-5:
                    sys.exit(f"demo-4d: {what}[{i}][{j}] is {h}, the float64 reference {w}")


if __name__ == "__main__":
    main()
