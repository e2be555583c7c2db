#!/usr/bin/env bash
# What `tachyon bench` itself adds, measured against tests/support/mock_upstream
# (a trivial streaming server that does no work). The server runs on core 1, the
# client on core 0 (taskset), so "one core" is literal.
#
#  1. streams per second: every response (N_CHUNKS content chunks of OpenAI's
#     size, usage, [DONE]) written at once; closed loop at several concurrencies;
#     the client's CPU share shows whether it, not the server, is the limit
#     (the client's is bench's own figure for the measured run; the server's is of
#     the whole command's wall time, warm-up included).
#  2. added latency: one chunk every 10 ms on the server's timer, at 1, 100, 1000
#     and 2000 concurrent streams; TTFT against a server that answers at once is
#     the client + loopback floor, and ITL - 10 ms is what is added per chunk.
#
#   benchmarks/client_overhead.sh            (after a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=build/release/src/cli/tachyon
server=build/release/tests/support/mock_upstream
N_CHUNKS=${N_CHUNKS:-16}
port_fast=$((18500 + $$ % 200)) port_gap=$((18700 + $$ % 200))
work=$(mktemp -d)
trap 'kill $fast $gap 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
taskset -c 1 "$server" --port "$port_fast" >/dev/null &
fast=$!
taskset -c 1 "$server" --port "$port_gap" --gap-ms 10 >/dev/null &
gap=$!
sleep 0.5

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

run() {  # port concurrency requests label
  local before after
  local pid=$fast
  [ "$1" = "$port_gap" ] && pid=$gap
  before=$(cpu_ticks $pid)
  /usr/bin/time -f "%e %U %S" -o "$work/time" taskset -c 0 "$tachyon" bench --url "http://127.0.0.1:$1" --model m \
    --input-len 16 --output-len "$N_CHUNKS" --num-requests "$3" --concurrency "$2" --warmup "$2" --no-progress \
    --out "$work/run.json" >/dev/null 2>&1
  after=$(cpu_ticks $pid)
  python3 - "$work/run.json" "$work/time" "$2" "$4" "$((after - before))" <<'PY'
import json, sys
run = json.load(open(sys.argv[1])); s = run["summary"]
wall, user, sys_ = map(float, open(sys.argv[2]).read().split()[-3:])
server_cpu = int(sys.argv[5]) / 100.0
print(f"| {sys.argv[4]} | {sys.argv[3]} | {s['num_ok']}/{s['num_requests']} | {s['request_throughput']:.0f} | "
      f"{s['output_token_throughput']:.0f} | {s['ttft']['p50_ms']:.2f} / {s['ttft']['p99_ms']:.2f} | "
      f"{s['itl']['p50_ms']:.2f} / {s['itl']['p99_ms']:.2f} | {100 * run['info']['client_cpu_share']:.0f}% | "
      f"{run['info']['client_lag_p99_ms']:.2f} | {100 * server_cpu / wall:.0f}% |")
PY
}

echo "| mode | concurrency | ok | streams/s | chunks/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | client CPU | client loop lag p99 ms | server CPU |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for c in 16 64 256 1024; do run "$port_fast" "$c" 40000 "at once"; done
for c in 1 100 1000 2000; do
  n=$((c * 4)); [ "$c" = 1 ] && n=50
  run "$port_gap" "$c" "$n" "10 ms gaps"
done
