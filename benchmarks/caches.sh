#!/usr/bin/env bash
# The exact and semantic caches through `tachyon serve --config` in front of
# tests/support/mock_upstream (route "cached": the exact cache; route
# "semantic": the semantic cache alone, hash embedder, so its hits are semantic):
#  1. hits: one prompt asked again and again (the first a miss), one request at a
#     time: E2E p50 / p99 of the answers, streaming and not;
#  2. the miss path: unique prompts (every request a miss) through a route with the
#     cache and one without, same upstream, A B A B: what computing the key and
#     keeping the answer add to TTFT and E2E.
#
#   benchmarks/caches.sh            (after a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=build/release/src/cli/tachyon
mock=build/release/tests/support/mock_upstream
N=${N:-2000} PAIRS=${PAIRS:-3}
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
[[route]]
model = "cached"
backends = ["mock"]
exact_cache = true
[[route]]
model = "semantic"
backends = ["mock"]
semantic_cache = { embedder = "hash", threshold = 0.8 }
[[route]]
model = "plain"
backends = ["mock"]
[cache]
store = "sqlite:$work/cache.db"
TOML
start gateway 0 -- "$tachyon" serve --config "$work/gateway.toml" --port 0 --io-threads 1 --workers 1 --no-access-log
gateway=$url
echo '{"prompt": "What is the capital of France?"}' >"$work/one.jsonl"

bench() {  # out flags...
  local out=$1
  shift
  taskset -c 1 "$tachyon" bench --url "$gateway" --no-progress --out "$out" "$@" >/dev/null 2>"$work/bench.err" ||
    { cat "$work/bench.err"; exit 1; }
}
summary() { python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['summary']; print(f'{s[sys.argv[2]][sys.argv[3]]:.3f}')" "$@"; }

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; tachyon $(git rev-parse --short HEAD)"
echo
echo "## 1. hits, one request at a time, $N requests (the first a miss)"
echo "| cache | shape | E2E p50 (ms) | E2E p99 (ms) | TTFT p50 (ms) | TTFT p99 (ms) |"
echo "|---|---|---|---|---|---|"
for route in cached semantic; do
for shape in stream no-stream; do
  flags=(--endpoint chat --model "$route" --workload prompts --prompts "$work/one.jsonl" --num-requests "$N"
         --concurrency 1 --output-len 16)
  [ "$shape" = no-stream ] && flags+=(--no-stream)
  out="$work/hit-$route-$shape.json"
  bench "$out" "${flags[@]}"
  echo "| ${route/cached/exact} | $shape | $(summary "$out" e2e p50_ms) | $(summary "$out" e2e p99_ms) |" \
       "$(summary "$out" ttft p50_ms) | $(summary "$out" ttft p99_ms) |"
done
done
echo
echo "## 2. the miss path: unique prompts at 200 requests/s, cached routes (B) vs plain route (A)"
for p in $(seq "$PAIRS"); do
  for route in plain cached semantic; do
    bench "$work/miss-$route-$p.json" --endpoint chat --model "$route" --input-len 32 --output-len 16 \
      --request-rate 200 --num-requests "$N" --seed "$p"
  done
done
python3 - "$work" "$PAIRS" <<'PY'
import json, statistics, sys
work, pairs = sys.argv[1], int(sys.argv[2])
s = lambda r, p: json.load(open(f"{work}/miss-{r}-{p}.json"))["summary"]
for route, name in (("cached", "exact"), ("semantic", "semantic")):
    for metric in ("ttft", "e2e"):
        for q in ("p50_ms", "p99_ms"):
            added = statistics.median(s(route, p)[metric][q] - s("plain", p)[metric][q] for p in range(1, pairs + 1))
            print(f"{name}: added {metric.upper()} {q[:3]} on a miss: {added:.3f} ms (median of {pairs} pairs)")
PY
