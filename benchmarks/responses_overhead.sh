#!/usr/bin/env bash
# What /v1/responses costs over /v1/chat/completions on the same route
# (docs/gateway.md, "The /v1/responses front door"): one `tachyon serve --config`
# in front of tests/support/mock_upstream (16 chunks, one write), streamed
# requests one at a time from one keep-alive connection, A (chat completions)
# and B (responses, store true) in rounds A B A B. TTFT is measured at the
# client: the request sent to the first text delta parsed (chat: the first
# chunk with content; responses: the first response.output_text.delta event).
# Prints p50 / p99 per run and the added TTFT p50 / p99 of B over A, median of
# the rounds.
#   benchmarks/responses_overhead.sh              (after a release build)
#   REQUESTS=2000 ROUNDS=4 benchmarks/responses_overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=${TACHYON:-build/release/src/cli/tachyon}
mock=build/release/tests/support/mock_upstream
REQUESTS=${REQUESTS:-1000} ROUNDS=${ROUNDS:-4}
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT

start upstream -- "$mock" --port 0
cat >"$work/tachyon.toml" <<TOML
[[backend]]
name = "mock"
kind = "openai"
base_url = "$url/v1"
[[route]]
model = "m"
backends = ["mock"]
TOML
start gateway -- "$tachyon" serve --config "$work/tachyon.toml" --port 0 --no-access-log
python3 - "$url" "$REQUESTS" "$ROUNDS" <<'PY'
import http.client, json, statistics, sys, time, urllib.parse

url, n, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
u = urllib.parse.urlparse(url)
conn = http.client.HTTPConnection(u.hostname, u.port)
bodies = {
    "chat": ("/v1/chat/completions", json.dumps({"model": "m", "stream": True, "max_tokens": 16,
                                                 "messages": [{"role": "user", "content": "Hello there"}]})),
    "responses": ("/v1/responses", json.dumps({"model": "m", "stream": True, "max_output_tokens": 16,
                                               "input": "Hello there"})),
}

# Only the event that carries the first text is parsed: the client's own parsing
# of the events before it (created, in_progress, ... each a whole response
# object) is not the gateway's time.
def first_delta(kind, line):
    if not line.startswith(b"data: "):
        return False
    if kind == "chat":
        if b'"content":"' not in line or b'"content":""' in line:
            return False
        choices = json.loads(line[6:]).get("choices") or [{}]
        return bool(choices[0].get("delta", {}).get("content"))
    return b'"response.output_text.delta"' in line and json.loads(line[6:])["type"] == "response.output_text.delta"

def one(kind):
    path, body = bodies[kind]
    start = time.perf_counter()
    conn.request("POST", path, body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    ttft = None
    for line in r:  # the SSE lines as they arrive
        if ttft is None and first_delta(kind, line.rstrip(b"\r\n")):
            ttft = time.perf_counter() - start
    if r.status != 200 or ttft is None:
        sys.exit(f"{kind}: status {r.status}, no text delta")
    return ttft * 1000

def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]

for kind in bodies:  # warm-up
    for _ in range(100):
        one(kind)
added50, added99 = [], []
print(f"{'round':<6} {'endpoint':<10} {'p50 ms':>8} {'p99 ms':>8}")
for r in range(rounds):
    runs = {}
    for kind in bodies:
        runs[kind] = [one(kind) for _ in range(n)]
        print(f"{r + 1:<6} {kind:<10} {pct(runs[kind], .5):8.3f} {pct(runs[kind], .99):8.3f}")
    added50.append(pct(runs["responses"], .5) - pct(runs["chat"], .5))
    added99.append(pct(runs["responses"], .99) - pct(runs["chat"], .99))
print(f"added TTFT of /v1/responses over /v1/chat/completions (median of {rounds} rounds, {n} requests each): "
      f"p50 {statistics.median(added50):+.3f} ms, p99 {statistics.median(added99):+.3f} ms")
PY
