#!/usr/bin/env bash
# What the gateway adds in front of an upstream, measured with tachyon bench
# against tests/support/mock_upstream (an upstream that does no work) directly
# (A) and through `tachyon serve --config` (B), in one run, A B A B.
# The gateway and the upstream run on core 0 (taskset), the client on core 1:
# both paths then cross between the cores the same number of times (client ->
# core 0 -> client), so what B adds is the gateway's own work and its thread
# hand-offs, not the cost of waking an idle core (on a VM, ~0.1 ms a crossing).
# The upstream's share of core 0 is small (it does no work), so the gateway has
# about one core.
#
#  1. added latency at a fixed rate: Poisson arrivals at RATE streaming requests/s
#     (16 chunks each, written by the upstream at once), TTFT and E2E p50 / p99 of
#     A and B, B - A per pair, median of the pairs;
#  2. the same at higher rates, once each: the highest rate whose added TTFT p99
#     stays under 1 ms;
#  3. small non-streaming requests (max_tokens 2) in a closed loop at concurrency
#     64: requests/s through the gateway on its one core, and the gateway's CPU share;
#  4. no buffering: an upstream that sends 20 chunks 20 ms apart, 50 requests one
#     at a time, directly and through the gateway: how far each gap the client
#     sees is from 20 ms (p50, p99, max).
#
#   benchmarks/gateway_overhead.sh            (after a release build)
#   RATE=500 SECONDS_PER_RUN=10 PAIRS=3 SWEEP="1000 2000 3000 4000" benchmarks/gateway_overhead.sh
#   SECTIONS="1" benchmarks/gateway_overhead.sh   (only the parts named)
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=${TACHYON:-build/release/src/cli/tachyon}
mock=build/release/tests/support/mock_upstream
RATE=${RATE:-500} SECONDS_PER_RUN=${SECONDS_PER_RUN:-10} PAIRS=${PAIRS:-3}
SWEEP=${SWEEP:-"1000 2000 3000 4000"} SECTIONS=${SECTIONS:-"1 2 3 4"}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT


start upstream 0 -- "$mock" --port 0
upstream=$url
cat >"$work/gateway.toml" <<TOML
[[backend]]
name = "mock"
kind = "openai"
base_url = "$upstream/v1"
pool_size = 1024
[[route]]
model = "m"
backends = ["mock"]
TOML
start gateway 0 -- "$tachyon" serve --config "$work/gateway.toml" --port 0 --io-threads 1 --workers 1 --no-access-log
gateway=$url

bench() {  # url out extra-flags...
  local target=$1 out=$2
  shift 2
  taskset -c 1 "$tachyon" bench --url "$target" --model m --input-len 16 --output-len "${OUTPUT_LEN:-16}" --no-progress \
    --out "$out" "$@" >/dev/null 2>"$work/bench.err" || { cat "$work/bench.err"; exit 1; }
}
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; tachyon $(git rev-parse --short HEAD)"
echo
if want 1; then
echo "## 1. streaming at $RATE requests/s, $SECONDS_PER_RUN s per run, $PAIRS A/B pairs"
n=$((RATE * SECONDS_PER_RUN))
for p in $(seq "$PAIRS"); do
  bench "$upstream" "$work/a$p.json" --request-rate "$RATE" --num-requests "$n" --warmup 200
  bench "$gateway" "$work/b$p.json" --request-rate "$RATE" --num-requests "$n" --warmup 200
done
python3 - "$work" "$PAIRS" <<'PY'
import json, statistics, sys
work, pairs = sys.argv[1], int(sys.argv[2])
def s(path): return json.load(open(path))["summary"]
rows = []
for p in range(1, pairs + 1):
    a, b = s(f"{work}/a{p}.json"), s(f"{work}/b{p}.json")
    rows.append((a, b))
print("| pair | ok A / B | TTFT p50 A / B (ms) | TTFT p99 A / B | E2E p50 A / B | E2E p99 A / B |")
print("|---|---|---|---|---|---|")
for i, (a, b) in enumerate(rows, 1):
    print(f"| {i} | {a['num_ok']} / {b['num_ok']} | {a['ttft']['p50_ms']:.3f} / {b['ttft']['p50_ms']:.3f} | "
          f"{a['ttft']['p99_ms']:.3f} / {b['ttft']['p99_ms']:.3f} | {a['e2e']['p50_ms']:.3f} / {b['e2e']['p50_ms']:.3f} | "
          f"{a['e2e']['p99_ms']:.3f} / {b['e2e']['p99_ms']:.3f} |")
for metric in ("ttft", "e2e"):
    for q in ("p50_ms", "p99_ms"):
        added = statistics.median(b[metric][q] - a[metric][q] for a, b in rows)
        print(f"added {metric.upper()} {q[:3]}: {added:.3f} ms (median of the pairs)")
PY
fi
echo
if want 2; then
echo "## 2. streaming at higher rates ($SECONDS_PER_RUN s each, A then B)"
echo "| rate | ok A / B | TTFT p99 A / B (ms) | added TTFT p99 | added E2E p99 |"
echo "|---|---|---|---|---|"
for rate in $SWEEP; do
  n=$((rate * SECONDS_PER_RUN))
  bench "$upstream" "$work/sa.json" --request-rate "$rate" --num-requests "$n" --warmup 200
  bench "$gateway" "$work/sb.json" --request-rate "$rate" --num-requests "$n" --warmup 200
  python3 - "$work/sa.json" "$work/sb.json" "$rate" <<'PY'
import json, sys
a, b = (json.load(open(p))["summary"] for p in sys.argv[1:3])
print(f"| {sys.argv[3]} | {a['num_ok']} / {b['num_ok']} | {a['ttft']['p99_ms']:.3f} / {b['ttft']['p99_ms']:.3f} | "
      f"{b['ttft']['p99_ms'] - a['ttft']['p99_ms']:.3f} | {b['e2e']['p99_ms'] - a['e2e']['p99_ms']:.3f} |")
PY
done
fi
echo
if want 3; then
echo "## 3. small non-streaming requests, closed loop at concurrency 64"
before=$(cpu_ticks "$gateway_pid")
start_ns=$(date +%s%N)
OUTPUT_LEN=2 bench "$gateway" "$work/ns.json" --no-stream --concurrency 64 --num-requests 50000 --warmup 500
elapsed=$(( $(date +%s%N) - start_ns ))
after=$(cpu_ticks "$gateway_pid")
OUTPUT_LEN=2 bench "$upstream" "$work/nsa.json" --no-stream --concurrency 64 --num-requests 50000 --warmup 500
python3 - "$work/ns.json" "$work/nsa.json" "$((after - before))" "$elapsed" <<'PY'
import json, sys
b, a = (json.load(open(p)) for p in sys.argv[1:3])
ticks, ns = int(sys.argv[3]), int(sys.argv[4])
print(f"through the gateway: {b['summary']['request_throughput']:.0f} requests/s "
      f"({b['summary']['num_ok']} ok), E2E p50 {b['summary']['e2e']['p50_ms']:.2f} ms, p99 {b['summary']['e2e']['p99_ms']:.2f} ms; "
      f"gateway CPU {100 * ticks / 100 / (ns / 1e9):.0f}% of its core; the client {100 * b['info']['client_cpu_share']:.0f}% of its")
print(f"direct: {a['summary']['request_throughput']:.0f} requests/s, E2E p50 {a['summary']['e2e']['p50_ms']:.2f} ms")
PY

fi
echo
if want 4; then
echo "## 4. 20 chunks 20 ms apart, 50 requests one at a time: |gap - 20 ms| as the client sees it"
kill "$gateway_pid" "$upstream_pid" 2>/dev/null || true
start paced 0 -- "$mock" --port 0 --gap-ms 20
paced=$url
sed "s|$upstream|$paced|" "$work/gateway.toml" >"$work/paced.toml"
start paced_gateway 0 -- "$tachyon" serve --config "$work/paced.toml" --port 0 --io-threads 1 --workers 1 --no-access-log
paced_gateway=$url
OUTPUT_LEN=20 bench "$paced" "$work/pa.json" --concurrency 1 --num-requests 50
OUTPUT_LEN=20 bench "$paced_gateway" "$work/pb.json" --concurrency 1 --num-requests 50
python3 - "$work/pa.json" "$work/pb.json" <<'PY'
import json, sys
for label, path in (("direct", sys.argv[1]), ("through the gateway", sys.argv[2])):
    records = json.load(open(path))["records"]
    dev = sorted(abs((c[i] - c[i - 1]) * 1e3 - 20) for r in records for c in [r["chunks_s"]] for i in range(1, len(c)))
    chunks = sorted(len(r["chunks_s"]) for r in records)
    print(f"{label}: {len(dev)} gaps, chunks per request {chunks[0]}..{chunks[-1]}; |gap - 20 ms| p50 "
          f"{dev[len(dev) // 2]:.3f} ms, p99 {dev[int(len(dev) * 0.99)]:.3f} ms, max {dev[-1]:.3f} ms")
PY
fi
