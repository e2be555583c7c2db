#!/usr/bin/env bash
# Keys' limits held across replicas (docs/gateway.md, "Keys and limits"): two
# `tachyon serve` replicas sharing one redis-server, in front of
# tests/support/mock_upstream, three keys at different requests_per_minute
# limits, each offered twice its limit at a steady rate for SECONDS, its
# requests alternating between the replicas.
#
# Checked at the end (exit 1 when any fails):
#   - every request accounted: answered 200 (admitted) or 429 (limited), nothing else;
#   - per key, the admitted count is within GCRA's exact bound: at most
#     L + L * D / 60 over a run of D seconds (a full bucket of L at the start,
#     then L a minute), and in every stretch of the run between two admissions
#     at most L + L * (t2 - t1) / 60 (tolerance: 50 ms of client-side timing);
#   - the shortfall from the bound is printed (the limit admits what it may).
#
#   benchmarks/keys_soak.sh              (300 s, after a release build)
#   SECONDS_TOTAL=60 benchmarks/keys_soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=${TACHYON:-build/release/src/cli/tachyon}
mock=build/release/tests/support/mock_upstream
SECONDS_TOTAL=${SECONDS_TOTAL:-300}
command -v redis-server >/dev/null || { echo "keys_soak: redis-server is not installed"; exit 1; }
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --loglevel warning >"$work/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
start upstream -- "$mock" --port 0
upstream=$url
export SOAK_K1=sk-soak-1 SOAK_K2=sk-soak-2 SOAK_K3=sk-soak-3
cat >"$work/tachyon.toml" <<TOML
[[backend]]
name = "mock"
kind = "openai"
base_url = "$upstream/v1"
[[route]]
model = "m"
backends = ["mock"]
[[key]]
name = "k1"
key_env = "SOAK_K1"
requests_per_minute = 30
[[key]]
name = "k2"
key_env = "SOAK_K2"
requests_per_minute = 90
[[key]]
name = "k3"
key_env = "SOAK_K3"
requests_per_minute = 240
tokens_per_minute = 1000000
[cache]
store = "redis://127.0.0.1:$port"
TOML
start gw1 -- "$tachyon" serve --config "$work/tachyon.toml" --port 0 --no-access-log
gw1=$url
start gw2 -- "$tachyon" serve --config "$work/tachyon.toml" --port 0 --no-access-log
gw2=$url

python3 - "$gw1" "$gw2" "$SECONDS_TOTAL" <<'PY'
import http.client, json, sys, threading, time, urllib.parse
from concurrent.futures import ThreadPoolExecutor

replicas, duration = sys.argv[1:3], float(sys.argv[3])
keys = {"k1": ("sk-soak-1", 30), "k2": ("sk-soak-2", 90), "k3": ("sk-soak-3", 240)}
body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
local = threading.local()

def send(url, secret):
    conns = getattr(local, "conns", None)
    if conns is None:
        conns = local.conns = {}
    if url not in conns:
        u = urllib.parse.urlparse(url)
        conns[url] = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    c = conns[url]
    start = time.time()
    try:
        c.request("POST", "/v1/chat/completions", body,
                  {"Authorization": "Bearer " + secret, "Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        status = r.status
    except Exception as e:
        conns.pop(url, None)
        status = "error: %s" % e
    return start, time.time(), status

# Each key offered twice its limit, evenly spaced, alternating replicas.
schedule = []
for name, (secret, limit) in keys.items():
    gap = 60.0 / (2 * limit)
    n = int(duration / gap)
    schedule += [(i * gap, name, secret, replicas[i % 2]) for i in range(n)]
schedule.sort()
results = {name: [] for name in keys}
t0 = time.time()
with ThreadPoolExecutor(max_workers=32) as pool:
    futures = []
    for at, name, secret, url in schedule:
        delay = t0 + at - time.time()
        if delay > 0:
            time.sleep(delay)
        futures.append((name, pool.submit(send, url, secret)))
    for name, f in futures:
        results[name].append(f.result())
elapsed = time.time() - t0

ok = True
print(f"keys_soak: {len(schedule)} requests over {elapsed:.1f} s to 2 replicas sharing one Redis")
for name, (secret, limit) in keys.items():
    rs = results[name]
    statuses = [s for _, _, s in rs]
    admitted = sorted(start for start, _, s in rs if s == 200)
    limited = statuses.count(429)
    other = [s for s in statuses if s not in (200, 429)]
    first, last = min(a for a, _, _ in rs), max(b for _, b, _ in rs)
    bound = limit + limit * (last - first) / 60
    # Every stretch between two admissions: at most L + L*(t2-t1)/60 (+50 ms of client timing).
    worst = 0.0
    for i in range(len(admitted)):
        for j in range(i, len(admitted)):
            excess = (j - i + 1) - (limit + limit * (admitted[j] - admitted[i] + 0.05) / 60)
            worst = max(worst, excess)
    line = (f"  {name}: limit {limit}/min, offered {len(rs)}, admitted {len(admitted)}, limited {limited}, "
            f"other {len(other)}; bound over {last - first:.1f} s: {bound:.1f} (admitted {bound - len(admitted):.1f} "
            f"under it); worst stretch over its bound: {worst:+.2f}")
    print(line)
    if other:
        print(f"    FAIL: answers other than 200/429: {other[:5]}")
        ok = False
    if len(admitted) > bound or worst > 0:
        print("    FAIL: more admitted than the limit allows")
        ok = False
    if len(admitted) + limited != len(rs):
        ok = False
print("keys_soak: PASS" if ok else "keys_soak: FAIL")
sys.exit(0 if ok else 1)
PY
