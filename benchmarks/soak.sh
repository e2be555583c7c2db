#!/usr/bin/env bash
# Soak: a real `tachyon serve` (the built-in demo model) under mixed load for
# DURATION seconds, then checked for leaks.
#
#   benchmarks/soak.sh 600        (10 minutes; 3600 for the hour documented in docs/hardening.md)
#
# Load, all to 127.0.0.1, bounded in time:
#   - `tachyon bench`, streaming: Poisson arrivals at RATE/s, prompts of 16-256
#     tokens, 16-64 tokens out, at most 16 in flight;
#   - `tachyon bench --no-stream` beside it at RATE/2;
#   - benchmarks/soak/chaos.py at CHAOS/s: malformed requests (each must get its
#     4xx), streams and non-streamed requests dropped at a random point, slow
#     readers (a 4 KB receive buffer, 512 bytes every 50 ms).
# Sampled every 5 s: RSS and open descriptors of the server (/proc), KV usage,
# requests running and open connections (/metrics).
# Pass, printed at the end: the server never died; RSS after the run within
# 10% of its level in warm-up (the most it reached in the first WARMUP seconds,
# default a fifth of the run, at most 120: the allocator's arenas fill up with
# load, then should stay); descriptors back to their idle count; no KV block in use, no
# request running, one connection (the probe); every request that reached a
# route ended as a success, a cancellation or an error (the counters add up);
# every malformed request got its expected status; every bench request ok or a
# counted error. Exit status 0 on pass, 1 on a failed check.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:?usage: benchmarks/soak.sh DURATION_SECONDS}
RATE=${RATE:-0.6} CHAOS=${CHAOS:-3} SEED=${SEED:-1}
WARMUP=${WARMUP:-$(( DURATION / 5 < 120 ? DURATION / 5 : 120 ))}
tachyon=build/release/src/cli/tachyon
[ -x "$tachyon" ] || { echo "build first: cmake --preset release && cmake --build --preset release"; exit 1; }
command -v python3 >/dev/null || { echo "soak.sh needs python3"; exit 1; }
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT

start server -- "$tachyon" serve --port 0 --threads 1 --max-queue 64 --no-access-log
port=${url##*:}
metric() { curl -s "$url/metrics" | awk -v m="$1" 'index($0, m) == 1 { print $NF; exit }'; }
sum_metric() { curl -s "$url/metrics" | awk -v m="$1" 'index($0, m) == 1 { s += $NF } END { print s + 0 }'; }
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$server_pid/status"; }
fds() { ls "/proc/$server_pid/fd" | wc -l; }

# A few requests first, so that every I/O thread has made its reactor (an epoll,
# an eventfd and a timer each, once): "idle" is the server after that.
for _ in 1 2 3 4; do curl -s "$url/health" >/dev/null; done
curl -s "$url/v1/completions" -d '{"prompt":"warm","max_tokens":2}' >/dev/null
sleep 1
idle_fds=$(fds)
start_rss=$(rss_kb)
echo "soak: ${DURATION}s against $url (pid $server_pid); warm-up ${WARMUP}s; idle: ${start_rss} kB RSS, $idle_fds fds"

"$tachyon" bench --url "$url" --workload random --input-len uniform:16:256 --output-len uniform:16:64 \
  --request-rate "$RATE" --concurrency 16 --duration "$DURATION" --num-requests 1000000 --seed "$SEED" \
  --request-timeout 120 --no-progress --out "$work/stream.json" >"$work/stream.txt" 2>&1 &
bench_stream=$!
"$tachyon" bench --url "$url" --workload random --input-len uniform:16:256 --output-len uniform:16:64 \
  --request-rate "$(python3 -c "print($RATE / 2)")" --concurrency 8 --duration "$DURATION" --num-requests 1000000 \
  --seed "$((SEED + 1))" --no-stream --request-timeout 120 --no-progress --out "$work/whole.json" \
  >"$work/whole.txt" 2>&1 &
bench_whole=$!
python3 benchmarks/soak/chaos.py "$port" "$DURATION" "$CHAOS" "$SEED" >"$work/chaos.json" 2>"$work/chaos.err" &
chaos=$!

warm_rss=0
max_rss=0
echo "  t(s)   rss(kB)  fds  kv_usage  running  connections"
t0=$(date +%s)
while kill -0 "$bench_stream" 2>/dev/null || kill -0 "$bench_whole" 2>/dev/null || kill -0 "$chaos" 2>/dev/null; do
  sleep 5
  kill -0 "$server_pid" 2>/dev/null || { echo "FAIL: the server died"; cat "$work/server.err" | tail -20; exit 1; }
  t=$(( $(date +%s) - t0 ))
  rss=$(rss_kb)
  [ "$rss" -gt "$max_rss" ] && max_rss=$rss
  if [ "$t" -le "$WARMUP" ] && [ "$rss" -gt "$warm_rss" ]; then warm_rss=$rss; fi
  if [ $(( t % 30 )) -lt 5 ]; then
    printf "%6d %9d %4d %9s %8s %12s\n" "$t" "$rss" "$(fds)" "$(sum_metric tachyon:kv_cache_usage_perc)" \
      "$(sum_metric tachyon:num_requests_running)" "$(metric tachyon:http_connections)"
  fi
done
wait "$bench_stream" || true
wait "$bench_whole" || true
wait "$chaos" || true
[ "$warm_rss" -gt 0 ] || warm_rss=$(rss_kb)

# Idle again: give cancellations and write timeouts a moment to land.
for _ in $(seq 120); do
  [ "$(sum_metric tachyon:num_requests_running)" = 0 ] && [ "$(metric tachyon:http_connections)" = 1 ] && break
  sleep 0.5
done
end_rss=$(rss_kb)
end_fds=$(fds)
kv=$(sum_metric tachyon:kv_cache_usage_perc)
running=$(sum_metric tachyon:num_requests_running)
connections=$(metric tachyon:http_connections)
routed=$(sum_metric tachyon:route_requests_total)
succeeded=$(sum_metric tachyon:request_success_total)
cancelled=$(sum_metric tachyon:request_cancelled_total)
errored=$(sum_metric tachyon:request_error_total)
rejected=$(sum_metric tachyon:request_rejected_total)
error_kinds=$(curl -s "$url/metrics" | sed -n 's/^tachyon:request_error_total{.*kind="\([^"]*\)"} \(.*\)/\1=\2/p' | paste -sd, -)

python3 - "$work" <<'PY' >"$work/bench_summary.txt"
import json, sys
work = sys.argv[1]
for name in ("stream", "whole"):
    run = json.load(open(f"{work}/{name}.json"))
    records = run["records"]
    ok = sum(1 for r in records if r["ok"])
    kinds = {}
    for r in records:
        if not r["ok"]:
            kinds[r["error_kind"]] = kinds.get(r["error_kind"], 0) + 1
    unclassified = sum(1 for r in records if not r["ok"] and not r["error_kind"])
    s = run["summary"]
    print(f"bench {name}: {len(records)} requests, {ok} ok, errors {kinds or '{}'}, unclassified {unclassified}; "
          f"TTFT p50 {s['ttft']['p50_ms']:.1f} p95 {s['ttft']['p95_ms']:.1f} ms, E2E p95 {s['e2e']['p95_ms']:.1f} ms")
    print(f"unclassified_{name}={unclassified}")
PY

echo
echo "after ${DURATION}s:"
cat "$work/bench_summary.txt" | grep -v '^unclassified_'
echo "chaos: $(cat "$work/chaos.json")"
echo "server: RSS idle ${start_rss} kB, warm-up level ${warm_rss} kB, max ${max_rss} kB, after ${end_rss} kB;" \
     "fds idle ${idle_fds}, after ${end_fds}; KV ${kv}; running ${running}; connections ${connections}"
echo "requests that reached a route: ${routed} = ${succeeded} succeeded + ${cancelled} cancelled + ${errored} errors;" \
     "${rejected} refused before a route"
echo "errors by kind: ${error_kinds:-none}"

fail=0
check() { if eval "$1"; then echo "  ok    $2"; else echo "  FAIL  $2"; fail=1; fi; }
check '[ "$end_rss" -le $(( warm_rss * 110 / 100 )) ]' "RSS after the run within 10% of its warm-up level ($end_rss vs $warm_rss kB)"
check '[ "$end_fds" -le "$idle_fds" ]' "descriptors back to idle ($end_fds vs $idle_fds)"
[ "$end_fds" -le "$idle_fds" ] || ls -l "/proc/$server_pid/fd" | sed 's/^/        /' 
check '[ "$kv" = 0 ] && [ "$running" = 0 ]' "no KV block in use, no request running"
check '[ "$connections" = 1 ]' "one open connection (the probe's)"
check '[ "$routed" = $(( succeeded + cancelled + errored )) ]' "every routed request accounted for"
check '[ "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[\"malformed_unexpected\"])" "$work/chaos.json")" = 0 ]' \
  "every malformed request got its expected status"
check '! grep -q "^unclassified_.*=[1-9]" "$work/bench_summary.txt"' "every failed bench request has an error kind"
exit $fail
