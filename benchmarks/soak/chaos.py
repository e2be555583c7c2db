#!/usr/bin/env python3
"""The hostile half of benchmarks/soak.sh: at a steady rate, against 127.0.0.1 only,
for a bounded time, it sends malformed requests (each must get its 4xx), opens
streams and disconnects at a random point, and reads streams slowly. It prints one
JSON line of counts at the end; a malformed request answered with anything but its
expected status is counted as unexpected (the soak then fails)."""
import json
import random
import socket
import sys
import threading
import time

HOST = "127.0.0.1"

# (request bytes, expected status)
def framed(method, path, body, extra=""):
    return (f"{method} {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n{extra}"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body

MALFORMED = [
    (b"GARBAGE\r\n\r\n", 400),
    (framed("POST", "/v1/completions", b"{oops"), 400),
    (framed("POST", "/v1/completions", b'{"prompt":"x","max_tokens":-1}'), 400),
    (framed("POST", "/v1/completions", b'{"prompt":[1,99999999],"max_tokens":1}'), 400),
    (framed("POST", "/v1/completions", b'{"prompt":"x","stop":["a","b","c","d","e"]}'), 400),
    (framed("POST", "/v1/chat/completions", b'{"messages":[{"role":"user","content":[{"type":1}]}]}'), 400),
    (framed("POST", "/v1/chat/completions", b'{"messages":[]}'), 400),
    (framed("POST", "/v1/completions", b'{"prompt":"\xff\xfe"}'), 400),
    (framed("PUT", "/v1/completions", b"{}"), 405),
    (framed("GET", "/nowhere", b""), 404),
    (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}", 400),
    (b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", 431),
]

counts = {"malformed": 0, "malformed_unexpected": 0, "disconnects": 0, "slow_readers": 0,
          "slow_reader_answers": 0, "socket_errors": 0}
lock = threading.Lock()


def bump(key, n=1):
    with lock:
        counts[key] += n


def status_of(raw):
    if raw.startswith(b"HTTP/1.1 "):
        return int(raw[9:12])
    return 0


def malformed(port):
    request, expected = random.choice(MALFORMED)
    try:
        with socket.create_connection((HOST, port), timeout=10) as s:
            s.sendall(request)
            raw = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                raw += chunk
    except OSError:
        bump("socket_errors")
        return
    bump("malformed")
    if status_of(raw) != expected:
        bump("malformed_unexpected")
        sys.stderr.write(f"chaos: expected {expected}, got {raw[:120]!r}\n")


def disconnect(port):
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": random.randint(50, 200),
                       "stream": random.random() < 0.7, "ignore_eos": True}).encode()
    try:
        s = socket.create_connection((HOST, port), timeout=10)
        s.sendall(framed("POST", "/v1/completions", body))
        time.sleep(random.uniform(0.01, 1.5))
        if random.random() < 0.5:
            s.recv(random.randint(1, 4096))
        s.close()
        bump("disconnects")
    except OSError:
        bump("socket_errors")


def slow_reader(port):
    body = json.dumps({"prompt": "Once", "max_tokens": random.randint(20, 120), "stream": True,
                       "ignore_eos": True}).encode()
    try:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(30)
        s.connect((HOST, port))
        s.sendall(framed("POST", "/v1/completions", body))
        bump("slow_readers")
        raw = b""
        while True:
            time.sleep(0.05)
            chunk = s.recv(512)
            if not chunk:
                break
            raw += chunk
        s.close()
        if status_of(raw) == 200:
            bump("slow_reader_answers")
    except OSError:
        bump("socket_errors")


def main():
    port, seconds, rate = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    random.seed(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    deadline = time.time() + seconds
    threads = []
    kinds = [malformed] * 6 + [disconnect] * 3 + [slow_reader]
    while time.time() < deadline:
        t = threading.Thread(target=random.choice(kinds), args=(port,), daemon=True)
        t.start()
        threads.append(t)
        threads = [x for x in threads if x.is_alive()]
        time.sleep(random.expovariate(rate))
    for t in threads:
        t.join(timeout=60)
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
