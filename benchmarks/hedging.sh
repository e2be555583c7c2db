#!/usr/bin/env bash
# Hedged requests against a tail: a fallback route [a, b] in front of two
# mock_upstream processes; a's first byte is 100 ms late, and 1,500 ms late on
# every 4th request (--slow-every 4 --slow-ms 1500); b is steady at 100 ms.
# Runs NUM streaming requests at RATE/s through `tachyon serve --config` with
# and without `hedge = { after_ms = 250 }`, alternating (A B A B), fresh
# processes each run, then once each with max_rate = 0.3 and with after = "p90":
# TTFT p50/p95/p99 from tachyon bench, and the extra upstream load (hedges
# started per request, from tachyon:hedges_total).
#
#   benchmarks/hedging.sh [NUM] [RATE]      (after a release build; default 400 at 20/s)
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=build/release/src/cli/tachyon
mock=build/release/tests/support/mock_upstream
NUM=${1:-400}
RATE=${2:-20}
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT

backend() {  # name url
  printf '[[backend]]\nname = "%s"\nkind = "openai"\nbase_url = "%s/v1"\nfirst_byte_timeout = 10\n' "$1" "$2"
}

run() {  # label hedge-line: one line of figures
  local label=$1 hedge=$2
  start a -- "$mock" --port 0 --first-byte-ms 100 --slow-every 4 --slow-ms 1500
  local a=$url
  start b -- "$mock" --port 0 --first-byte-ms 100
  local b=$url
  { backend a "$a"; backend b "$b"; printf '[[route]]\nmodel = "m"\nbackends = ["a", "b"]\npolicy = "fallback"\n%s\n' "$hedge"; } \
    >"$work/gw.toml"
  start gw -- "$tachyon" serve --config "$work/gw.toml" --port 0 --no-access-log
  local gw=$url
  "$tachyon" bench --url "$gw" --model m --input-len 16 --output-len 16 --request-rate "$RATE" \
    --num-requests "$NUM" --request-timeout 30 --no-progress --out "$work/run.json" >/dev/null 2>&1 || true
  curl -s "$gw/metrics" >"$work/metrics.txt"
  stop_servers
  python3 - "$label" "$work/run.json" "$work/metrics.txt" <<'PY'
import json, re, sys
label, run, metrics = sys.argv[1:]
s = json.load(open(run))["summary"]
hedges = {}
requests = 0
for line in open(metrics):
    m = re.match(r'tachyon:hedges_total\{route="m",outcome="(\w+)"\} (\S+)', line)
    if m: hedges[m.group(1)] = float(m.group(2))
    m = re.match(r'tachyon:route_requests_total\{route="m"\} (\S+)', line)
    if m: requests = float(m.group(1))
refused = 0
for line in open(metrics):
    m = re.match(r'tachyon:hedges_refused_total\{route="m"\} (\S+)', line)
    if m: refused = float(m.group(1))
started = sum(hedges.values())
t = s["ttft"]
print(f"{label:<28} ok {s['num_ok']}/{s['num_requests']}  TTFT p50 {t['p50_ms']:7.1f}  p95 {t['p95_ms']:7.1f}  "
      f"p99 {t['p99_ms']:7.1f} ms  extra load {100 * started / max(requests, 1):5.1f}%  "
      f"(won {hedges.get('won', 0):.0f}, lost {hedges.get('lost', 0):.0f}, refused {refused:.0f})")
PY
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; tachyon $(git rev-parse --short HEAD)"
echo "$NUM streaming requests at $RATE/s; a: 100 ms, every 4th 1,500 ms; b: 100 ms"
for pair in 1 2; do
  run "no hedge (pair $pair)" ""
  run "after_ms = 250 (pair $pair)" 'hedge = { after_ms = 250 }'
done
run "after_ms = 250, max_rate 0.3" 'hedge = { after_ms = 250, max_rate = 0.3 }'
run 'after = "p90"' 'hedge = { after = "p90", min_ms = 150, max_ms = 1000, max_rate = 0.3 }'
