#!/usr/bin/env bash
# Redis commands per request of the gateways' shared exact cache, to size Redis for
# a fleet: the local fleet (deploy/local/fleet.sh, 1 engine, G gateways), N distinct
# requests (misses: a lookup and a write) then the same N again (hits), counted
# with INFO commandstats; the idle rate (the change-log followers' blocking reads)
# measured apart; and what this machine's Redis does per second (redis-benchmark,
# HSET and GET). requests/s where Redis saturates = its ops/s / ops
# per request.
#
#   benchmarks/redis_ops.sh            N=200 G=2 benchmarks/redis_ops.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=$PWD/build/release/src/cli/tachyon
N=${N:-200} G=${G:-2}
work=$(mktemp -d)
trap 'deploy/local/fleet.sh stop "$work/fleet" >/dev/null 2>&1; rm -rf "$work"' EXIT
deploy/local/fleet.sh start "$work/fleet" --engines 1 --gateways "$G" --tachyon "$tachyon" >/dev/null
port=$(awk '/^redis/ {print $2}' "$work/fleet/fleet.txt" | sed 's/.*://')
password=$(cat "$work/fleet/redis.password")
gw=$(awk '/^gateway-1/ {print $2}' "$work/fleet/fleet.txt")
rcli() { redis-cli -p "$port" -a "$password" --no-auth-warning "$@"; }
stats() { rcli info commandstats | tr -d '\r' | sed -n 's/^cmdstat_\([a-z]*\):calls=\([0-9]*\).*/\1 \2/p' | sort; }
total() { stats | awk '{s += $2} END {print s + 0}'; }

rcli config resetstat >/dev/null
sleep 5
idle=$(total)
idle_rate=$(python3 -c "print($idle / 5)")

bench() {
  "$tachyon" bench --url "$gw" --model chat --workload random --input-len 64 --output-len 8 --num-requests "$N" \
    --concurrency 4 --no-stream --seed 7 --no-progress >/dev/null 2>&1
}
measure() {  # sets seconds, counts (per command) and commands for one bench run
  rcli config resetstat >/dev/null
  local start
  start=$(date +%s.%N)
  bench
  seconds=$(python3 -c "print($(date +%s.%N) - $start)")
  counts=$(stats)
  commands=$(total)
}
measure  # misses
misses_s=$seconds miss_stats=$counts miss_total=$commands
measure  # the same requests: hits
hits_s=$seconds hit_stats=$counts hit_total=$commands

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; tachyon $(git rev-parse --short HEAD); redis $(redis-server --version | awk '{print $3}')"
echo "fleet: 1 engine, $G gateways sharing one Redis; $N distinct requests, then the same $N again"
echo "idle: $idle_rate commands/s (the $G gateways' change-log followers)"
python3 - "$N" "$miss_total" "$misses_s" "$hit_total" "$hits_s" "$idle_rate" "$miss_stats" "$hit_stats" <<'PY'
import sys
n, mt, ms, ht, hs, idle = int(sys.argv[1]), *map(float, sys.argv[2:7])
fmt = lambda s: ", ".join(f"{c} {int(k) / n:.2f}" for c, k in (l.split() for l in s.splitlines()))
print(f"misses: {(mt - idle * ms) / n:.2f} commands per request beyond idle ({fmt(sys.argv[7])} per request, idle included)")
print(f"hits:   {(ht - idle * hs) / n:.2f} commands per request beyond idle ({fmt(sys.argv[8])} per request, idle included)")
PY
if command -v redis-benchmark >/dev/null; then
  echo "this machine's Redis (redis-benchmark, 50 clients, 100,000 requests each test):"
  redis-benchmark -p "$port" -a "$password" -q -n 100000 -t hset,get 2>/dev/null | tr "\r" "\n" | grep "requests per second"
fi
