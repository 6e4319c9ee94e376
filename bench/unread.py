#!/usr/bin/env python3
"""bench/unread.py — the server's memory under clients that never read.

K clients each send a request whose answer is about 52 MB (n = 2000 tokens
of 4 dimensions, one head, patterns asked) from a body of some 50 KB, with a
4 KiB receive buffer, and read nothing. The server's peak RSS (VmHWM) and
its RSS once they have all sent are read from /proc, beside how many were
answered 503, for each --max-unsent-bytes given: the bound against none
(1024g, as before the bound existed).

    bench/unread.py [K] [BUDGET ...]     (defaults 20; 1024g 512m 64m)

Needs the top-level build (build/attention-server). MB = 10^6 bytes.
"""
import json
import os
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER = os.path.join(ROOT, "build", "attention-server")


def body(n=2000):
    emb = [[(i % 97) / 100, -(i % 89) / 100, (i % 83) / 100, 1] for i in range(n)]
    eye = [[1 if r == c else 0 for c in range(4)] for r in range(4)]
    return json.dumps({"mask": "none", "return": ["patterns"], "embeddings": emb,
                       "weights": {"heads": [{"w_q": eye, "w_k": eye, "w_v": eye}]}}).encode()


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def run(k, budget, port=18990):
    srv = subprocess.Popen([SERVER, "--port", str(port), "--workers", "2",
                            "--max-unsent-bytes", budget, "--connection-timeout", "120"],
                           stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        b = body()
        head = b"POST /v1/attention HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        socks, refused = [], 0
        for _ in range(k):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", port))
            s.sendall(head + b"Content-Length: %d\r\n\r\n" % len(b) + b)
            socks.append(s)
            time.sleep(0.6)  # its answer built before the next comes
        time.sleep(2)
        for s in socks:  # a refusal is small and whole in the buffer
            s.settimeout(0.2)
            try:
                if s.recv(12).startswith(b"HTTP/1.1 503"):
                    refused += 1
            except OSError:
                pass
        rss, hwm = status_kb(srv.pid, "VmRSS"), status_kb(srv.pid, "VmHWM")
        for s in socks:
            s.close()
        return rss, hwm, refused
    finally:
        srv.terminate()
        srv.wait()


def main():
    k = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    budgets = sys.argv[2:] or ["1024g", "512m", "64m"]
    print(f"## Server memory with {k} clients that never read an answer of ~52 MB\n")
    print("| --max-unsent-bytes | refused (503) | RSS after (MB) | peak RSS (MB) |")
    print("|---|---:|---:|---:|")
    for budget in budgets:
        rss, hwm, refused = run(k, budget)
        print(f"| {budget} | {refused} of {k} | {rss * 1.024 / 1000:.0f} | {hwm * 1.024 / 1000:.0f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
