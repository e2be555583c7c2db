#!/usr/bin/env bash
# The gateway's fault handling, measured with tachyon bench through `tachyon serve
# --config` in front of mock_upstream processes:
#
#  1. killed mid-run: route fallback [a, b]; a is killed (SIGKILL) a few seconds
#     into a streaming run at RATE requests/s (chunks 5 ms apart): fallback takes
#     over, and every request ends; the streams that a was sending when it died
#     end with an error event (no retry after the first byte), none hangs;
#  2. never answers: route fallback [stuck, b], first_byte_timeout 0.5 s: the first
#     requests wait the timeout and go to b, until stuck's breaker opens
#     (breaker_failures 5); then b answers at once;
#  3. answers 500, then recovers: route fallback [flaky, b]; flaky answers 500 until
#     it is replaced by a healthy one on the same port; its breaker opens after 5
#     failures and closes at the first half-open probe after the replacement.
#
#   benchmarks/gateway_faults.sh      (after a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=build/release/src/cli/tachyon
mock=build/release/tests/support/mock_upstream
RATE=${RATE:-200}
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT

backend() {  # name url extra-lines
  printf '[[backend]]\nname = "%s"\nkind = "openai"\nbase_url = "%s/v1"\n%s\n' "$1" "$2" "${3:-}"
}
summary() {  # run.json: one line
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); s = r["summary"]
errors = ", ".join(f"{k} {v}" for k, v in s.get("errors_by_kind", {}).items()) or "none"
print(f"{s['num_ok']}/{s['num_requests']} ok; errors: {errors}; TTFT p50 {s['ttft']['p50_ms']:.2f} ms, "
      f"p99 {s['ttft']['p99_ms']:.2f} ms, max E2E {max([x['e2e_s'] for x in r['records']] or [0]) * 1e3:.0f} ms")
PY
}
metric() { curl -s "$1/metrics" | grep -F "$2" | head -1 | awk '{ print $2 }'; }

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; tachyon $(git rev-parse --short HEAD)"

echo
echo "## 1. an upstream killed mid-run ($RATE streaming requests/s for 8 s, a killed after 3 s)"
start a -- "$mock" --port 0 --gap-ms 5
a=$url
start b -- "$mock" --port 0 --gap-ms 5
b=$url
{ backend a "$a"; backend b "$b"; printf '[[route]]\nmodel = "m"\nbackends = ["a", "b"]\n'; } >"$work/1.toml"
start gw1 -- "$tachyon" serve --config "$work/1.toml" --port 0 --no-access-log
gw=$url
(sleep 3; kill -9 "$a_pid" 2>/dev/null) &
"$tachyon" bench --url "$gw" --model m --input-len 16 --output-len 16 --request-rate "$RATE" --num-requests $((RATE * 8)) \
  --request-timeout 30 --no-progress --out "$work/1.json" >/dev/null 2>&1 || true
summary "$work/1.json"
echo "gateway: fallbacks $(metric "$gw" 'tachyon:route_fallbacks_total{route="m"}'), a's errors: $(curl -s "$gw/metrics" | grep '^tachyon:backend_errors_total{backend="a"' | tr '\n' ' ')"
echo "a's breaker: $(metric "$gw" 'tachyon:backend_breaker_state{backend="a"}') (1 = open)"

echo
echo "## 2. an upstream that never answers (first_byte_timeout 0.5 s, breaker after 5 failures)"
start stuck -- "$mock" --port 0 --hang
stuck=$url
{ backend stuck "$stuck" "first_byte_timeout = 0.5
breaker_cooldown = 60"; backend b "$b"; printf '[[route]]\nmodel = "m"\nbackends = ["stuck", "b"]\n'; } >"$work/2.toml"
start gw2 -- "$tachyon" serve --config "$work/2.toml" --port 0 --no-access-log
gw=$url
"$tachyon" bench --url "$gw" --model m --input-len 16 --output-len 16 --concurrency 1 --num-requests 20 \
  --no-progress --out "$work/2.json" >/dev/null 2>&1 || true
summary "$work/2.json"
python3 - "$work/2.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["records"]
print("TTFT of each request in order (ms): " + " ".join(f"{x['chunks_s'][0] * 1e3:.0f}" if x["chunks_s"] else "-" for x in r))
PY
echo "stuck's breaker: $(metric "$gw" 'tachyon:backend_breaker_state{backend="stuck"}') (1 = open); first-byte timeouts: $(metric "$gw" 'tachyon:backend_errors_total{backend="stuck",kind="first_byte_timeout"}')"

echo
echo "## 3. an upstream answering 500, then replaced by a healthy one (breaker_cooldown 1 s)"
start flaky -- "$mock" --port 0 --status 500
flaky=$url
flaky_port=${flaky##*:}
{ backend flaky "$flaky" "breaker_cooldown = 1"; backend b "$b"; printf '[[route]]\nmodel = "m"\nbackends = ["flaky", "b"]\n'; } >"$work/3.toml"
start gw3 -- "$tachyon" serve --config "$work/3.toml" --port 0 --no-access-log
gw=$url
for i in $(seq 8); do curl -s -o /dev/null "$gw/v1/completions" -d '{"model":"m","prompt":"x"}'; done
echo "after 8 requests: flaky's breaker $(metric "$gw" 'tachyon:backend_breaker_state{backend="flaky"}') (1 = open), its 5xx $(metric "$gw" 'tachyon:backend_errors_total{backend="flaky",kind="upstream_5xx"}'), answered by b: $(curl -s -D - -o /dev/null "$gw/v1/completions" -d '{"model":"m","prompt":"x"}' | sed -n 's/^x-tachyon-backend: //p' | tr -d '\r')"
kill "$flaky_pid" 2>/dev/null; wait "$flaky_pid" 2>/dev/null || true
start healthy -- "$mock" --port "$flaky_port"
sleep 1.1
who=$(curl -s -D - -o /dev/null "$gw/v1/completions" -d '{"model":"m","prompt":"x"}' | sed -n 's/^x-tachyon-backend: //p' | tr -d '\r')
echo "after the cool-down, the probe went to: $who; flaky's breaker $(metric "$gw" 'tachyon:backend_breaker_state{backend="flaky"}') (0 = closed)"
