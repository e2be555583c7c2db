#!/usr/bin/env bash
# Hosted prompt caching (route key prompt_cache) and the cost of the Anthropic
# translation, against tests/support/anthropic_standin: a strict stand-in for the
# Messages API whose first byte comes BASE_MS + MS_PER_TOKEN x (uncached input
# tokens) after a request (a prompt cache of its own, as the real API's).
#
#  1. A multi-turn workload: CONVERSATIONS conversations of TURNS turns each, a
#     ~2,000-token system prompt and two tools, streamed, one request at a time,
#     through a route with prompt_cache = "off" (A) and one with "auto" (B),
#     A B A B (PAIRS pairs; each run has its own system prompt, so nothing is
#     cached before it starts). Per run: TTFT p50 / p95 at the client, and the
#     cached-token share (cached / prompt tokens, from the usage chunks). At the
#     end, the stand-in's count of requests it refused as invalid (must be 0).
#  2. What the translation adds: streamed requests (8 deltas) to an
#     anthropic_standin with no delay, directly (its first text_delta) and through
#     an anthropic route (the first content chunk); and the same for
#     tests/support/mock_upstream directly and through an openai route (the
#     passthrough). Added TTFT p50 / p99 of each, A B A B.
#
#   benchmarks/prompt_cache.sh                 (after a release build)
#   PAIRS=3 CONVERSATIONS=8 TURNS=4 REQUESTS=300 benchmarks/prompt_cache.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=${TACHYON:-build/release/src/cli/tachyon}
standin=build/release/tests/support/anthropic_standin
mock=build/release/tests/support/mock_upstream
PAIRS=${PAIRS:-2} CONVERSATIONS=${CONVERSATIONS:-8} TURNS=${TURNS:-4} REQUESTS=${REQUESTS:-300}
BASE_MS=${BASE_MS:-20} MS_PER_TOKEN=${MS_PER_TOKEN:-0.1}
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT
export BENCH_ANTHROPIC_KEY=sk-bench

start claude -- "$standin" --port 0 --key sk-bench --base-ms "$BASE_MS" --ms-per-token "$MS_PER_TOKEN"
claude=$url
start fast -- "$standin" --port 0 --key sk-bench --base-ms 0 --ms-per-token 0
fast=$url
start mock -- "$mock" --port 0
mock_url=$url
cat > "$work/gateway.toml" <<TOML
[server]
port = 0
[[backend]]
name = "claude"
kind = "anthropic"
base_url = "$claude"
api_key_env = "BENCH_ANTHROPIC_KEY"
upstream_model = "claude-bench"
[[backend]]
name = "fast"
kind = "anthropic"
base_url = "$fast"
api_key_env = "BENCH_ANTHROPIC_KEY"
upstream_model = "claude-bench"
[[backend]]
name = "mock"
kind = "openai"
base_url = "$mock_url/v1"
upstream_model = "m"
[[route]]
model = "off"
backends = ["claude"]
[[route]]
model = "auto"
backends = ["claude"]
prompt_cache = "auto"
[[route]]
model = "translated"
backends = ["fast"]
[[route]]
model = "passthrough"
backends = ["mock"]
TOML
start gateway -- "$tachyon" serve --config "$work/gateway.toml" --port 0
gateway=$url

python3 - "$gateway" "$claude" "$fast" "$mock_url" "$PAIRS" "$CONVERSATIONS" "$TURNS" "$REQUESTS" <<'PY'
import http.client, json, statistics, sys, time, urllib.parse
gateway, claude, fast, mock = sys.argv[1:5]
pairs, conversations, turns, requests = map(int, sys.argv[5:9])

def stream(url, path, body, headers, first):
    """POSTs body; returns (seconds to the first line `first` accepts, the usage seen)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port)
    t0 = time.perf_counter()
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", **headers})
    r = conn.getresponse()
    assert r.status == 200, (r.status, r.read())
    ttft, usage = None, None
    for line in r:
        if ttft is None and first(line):
            ttft = time.perf_counter() - t0
        if line.startswith(b"data: {") and b'"usage"' in line:
            usage = json.loads(line[6:]).get("usage")
    conn.close()
    return ttft, usage

def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]

tools = [{"type": "function", "function": {"name": "lookup_order", "description": "Find an order by id",
          "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
         {"type": "function", "function": {"name": "refund", "description": "Refund an order",
          "parameters": {"type": "object", "properties": {"order_id": {"type": "string"},
                                                          "amount": {"type": "number"}}}}}]

def workload(route, run):
    system = "".join(f"Policy {run}.{i}: be accurate, cite the order, keep a friendly tone. " for i in range(120))
    ttfts, prompt, cached = [], 0, 0
    for c in range(conversations):
        messages = [{"role": "system", "content": system}]
        for t in range(turns):
            messages.append({"role": "user", "content": f"Conversation {c}, question {t}: where is my order?"})
            body = {"model": route, "stream": True, "stream_options": {"include_usage": True},
                    "tool_choice": "none", "tools": tools, "messages": messages, "max_tokens": 64}
            ttft, usage = stream(gateway, "/v1/chat/completions", body, {},
                                 lambda l: l.startswith(b"data: {") and b'"content":"' in l)
            ttfts.append(ttft * 1000)
            prompt += usage["prompt_tokens"]
            cached += usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
            messages.append({"role": "assistant", "content": "Hello tok tok tok tok tok tok tok"})
    return pct(ttfts, 50), pct(ttfts, 95), cached / max(1, prompt)

print(f"1. multi-turn workload: {conversations} conversations x {turns} turns, ~2,000-token system prompt, 2 tools")
print(f"{'pair':>4} {'route':>5} {'TTFT p50 ms':>12} {'TTFT p95 ms':>12} {'cached share':>13}")
ratios = []
for p in range(pairs):
    off = workload("off", 2 * p)
    auto = workload("auto", 2 * p + 1)
    for name, r in (("off", off), ("auto", auto)):
        print(f"{p + 1:>4} {name:>5} {r[0]:>12.1f} {r[1]:>12.1f} {r[2]:>13.2f}")
    ratios.append((auto[0] / off[0], auto[1] / off[1]))
print(f"auto / off, median of the pairs: TTFT p50 {statistics.median(r[0] for r in ratios):.2f}x, "
      f"p95 {statistics.median(r[1] for r in ratios):.2f}x")
u = urllib.parse.urlparse(claude)
conn = http.client.HTTPConnection(u.hostname, u.port)
conn.request("GET", "/stats")
stats = json.loads(conn.getresponse().read())
print(f"stand-in: {stats['requests']} requests valid, {stats['invalid']} refused as invalid"
      + (f" (last: {stats['last_invalid']})" if stats["invalid"] else ""))

print(f"\n2. added TTFT, {requests} streamed requests per run, one at a time")
hello = [{"role": "user", "content": "hi"}]
def ttfts(kind):
    out = []
    for _ in range(requests):
        if kind == "anthropic-direct":
            t, _ = stream(fast, "/v1/messages", {"model": "claude-bench", "max_tokens": 64, "stream": True,
                          "messages": hello}, {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"},
                          lambda l: b'"text_delta"' in l)
        elif kind == "anthropic-gateway":
            t, _ = stream(gateway, "/v1/chat/completions", {"model": "translated", "stream": True, "messages": hello},
                          {}, lambda l: l.startswith(b"data: {") and b'"content":"' in l)
        elif kind == "openai-direct":
            t, _ = stream(mock, "/v1/chat/completions", {"model": "m", "stream": True, "max_tokens": 8,
                          "messages": hello}, {}, lambda l: l.startswith(b"data: {") and b'"content":"' in l)
        else:
            t, _ = stream(gateway, "/v1/chat/completions", {"model": "passthrough", "stream": True, "max_tokens": 8,
                          "messages": hello}, {}, lambda l: l.startswith(b"data: {") and b'"content":"' in l)
        out.append(t * 1000)
    return out
added = {"anthropic": [], "openai": []}
for p in range(pairs):
    for dialect in ("anthropic", "openai"):
        direct = ttfts(dialect + "-direct")
        through = ttfts(dialect + "-gateway")
        added[dialect].append((pct(through, 50) - pct(direct, 50), pct(through, 99) - pct(direct, 99)))
        print(f"pair {p + 1} {dialect:>9}: direct p50 {pct(direct, 50):.3f} ms, through the gateway p50 "
              f"{pct(through, 50):.3f} ms, p99 {pct(direct, 99):.3f} -> {pct(through, 99):.3f} ms")
for dialect, xs in added.items():
    print(f"added TTFT, {dialect:>9} ({'translated' if dialect == 'anthropic' else 'passthrough'}), median of the "
          f"pairs: p50 {statistics.median(x[0] for x in xs):.3f} ms, p99 {statistics.median(x[1] for x in xs):.3f} ms")
PY
