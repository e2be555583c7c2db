#!/usr/bin/env bash
# Single flight: N identical streaming requests sent at once to an exact-cached
# route in front of mock_upstream (first byte 200 ms, 16 chunks 10 ms apart),
# for N = 10, 100 and 1,000 (a fresh question each time, so none is a cache
# hit), with coalesce = true (the default) and coalesce = false: the upstream
# calls made (tachyon:request_success_total of the backend), and the TTFT p50 /
# p95 of the leader (x-tachyon-cache: miss) and of the followers (coalesced),
# measured by a client that opens all N connections first, then sends.
#
#   benchmarks/single_flight.sh      (after a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=build/release/src/cli/tachyon
mock=build/release/tests/support/mock_upstream
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT

cat >"$work/client.py" <<'PY'
import asyncio, json, re, sys, time
host, port, n, question = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
body = json.dumps({"model": "m", "stream": True, "temperature": 0, "max_tokens": 16,
                   "messages": [{"role": "user", "content": question}]}).encode()
request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
content = re.compile(rb'"content":"[^"]')

async def one(conn, go):
    reader, writer = conn
    await go.wait()
    start = time.perf_counter()
    writer.write(request)
    await writer.drain()
    data, ttft, status = b"", None, ""
    while True:
        piece = await reader.read(65536)
        if not piece:
            break
        data += piece
        if ttft is None and b"\r\n\r\n" in data and content.search(data.split(b"\r\n\r\n", 1)[1]):
            ttft = time.perf_counter() - start
    head = data.split(b"\r\n\r\n", 1)[0].decode(errors="replace").lower()
    m = re.search(r"^x-tachyon-cache: (\S+)", head, re.M)
    ok = head.startswith("http/1.1 200") and b"[DONE]" in data and b'"error"' not in data
    writer.close()
    return (m.group(1) if m else "-"), ttft, ok

async def main():
    conns = [await asyncio.open_connection(host, port) for _ in range(n)]
    go = asyncio.Event()
    tasks = [asyncio.create_task(one(c, go)) for c in conns]
    await asyncio.sleep(0.2)
    go.set()
    print(json.dumps(await asyncio.gather(*tasks)))

asyncio.run(main())
PY

pct() {  # json of [status, ttft, ok] rows, status: p50/p95 of that group
  python3 - "$1" "$2" <<'PY'
import json, sys
rows, want = json.load(open(sys.argv[1])), sys.argv[2]
t = sorted(r[1] for r in rows if r[0] == want and r[1] is not None)
if not t: print("-"); sys.exit()
q = lambda p: t[min(len(t) - 1, int(p * len(t)))] * 1e3
print(f"n {len(t)}, TTFT p50 {q(0.5):.1f} p95 {q(0.95):.1f} ms")
PY
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; tachyon $(git rev-parse --short HEAD)"
start up -- "$mock" --port 0 --first-byte-ms 200 --gap-ms 10
up=$url
for coalesce in true false; do
  printf '[cache]\nstore = "memory"\n[[backend]]\nname = "up"\nkind = "openai"\nbase_url = "%s/v1"\n[[route]]\nmodel = "m"\nbackends = ["up"]\nexact_cache = true\ncoalesce = %s\n' \
    "$up" "$coalesce" >"$work/gw.toml"
  start gw -- "$tachyon" serve --config "$work/gw.toml" --port 0 --no-access-log
  gw=$url
  hostport=${gw#http://}
  before=0
  echo "## coalesce = $coalesce"
  for n in 10 100 1000; do
    python3 "$work/client.py" "${hostport%:*}" "${hostport##*:}" "$n" "question $n $coalesce" >"$work/rows.json"
    calls=$(curl -s "$gw/metrics" | grep '^tachyon:request_success_total{.*backend="up"}' | awk '{ s += $2 } END { print s + 0 }')
    ok=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sum(1 for x in r if x[2]), len(r))" "$work/rows.json")
    printf '%5d requests: %s ok; upstream calls %d; leader %s; followers %s\n' "$n" "$ok" $((calls - before)) \
      "$(pct "$work/rows.json" miss)" "$(pct "$work/rows.json" coalesced)"
    before=$calls
  done
  kill "$gw_pid"; wait "$gw_pid" 2>/dev/null || true
done
