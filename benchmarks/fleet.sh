#!/usr/bin/env bash
# The local fleet (deploy/local/fleet.sh: engines found by DNS through a hosts file,
# gateways sharing one Redis) on the shared-prefix workload (K prefixes of P tokens,
# S unique tokens each, O output tokens, N requests at concurrency C in all):
#   1x1    one gateway, one engine: one `tachyon bench`
#   2x2    two gateways, two engines, prefix-affinity: two benches at once, N/2
#          requests at C/2 each, one per gateway (a client-side load balancer)
#   2x2rr  the same with round-robin routing
# Reported per run: requests ok, requests/s and output tokens/s over the run's wall
# time, TTFT p50 / p95 and E2E p95 over every request of the run, and the engines'
# prefix-cache hit rate (hits / queries summed over engines). Fresh fleets (empty
# caches) each run; A B C A B C, PAIRS times.
#
#   benchmarks/fleet.sh [MODEL.gguf]   (default: a random-weight `tiny` model, generated once)
#   PAIRS=2 K=4 P=1000 S=50 N=64 C=8 O=16 THREADS=1 benchmarks/fleet.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=$PWD/build/release/src/cli/tachyon
model=${1:-${TMPDIR:-/tmp}/tachyon-replicas-tiny-q8_0.gguf}
PAIRS=${PAIRS:-2} K=${K:-4} P=${P:-1000} S=${S:-50} N=${N:-64} C=${C:-8} O=${O:-16} THREADS=${THREADS:-1}
[ -f "$model" ] || "$tachyon" model gen --shape tiny --type q8_0 --seed 1 --out "$model" >/dev/null
work=$(mktemp -d)
trap 'deploy/local/fleet.sh stop "$work/fleet" >/dev/null 2>&1; rm -rf "$work"' EXIT

metric_sum() {  # name: the series' values summed over the fleet's engines
  local total=0 v
  for url in $(awk '/^engine-/ {print $2}' "$work/fleet/fleet.txt"); do
    v=$(curl -s "$url/metrics" | awk -v n="$1" 'index($0, n "{") == 1 { print $2; exit }')
    total=$(python3 -c "print($total + ${v:-0})")
  done
  echo "$total"
}

run() {  # label engines gateways policy
  local label=$1 engines=$2 gateways=$3 policy=$4
  local max_len=$((P + S + O + 64))
  deploy/local/fleet.sh start "$work/fleet" --engines "$engines" --gateways "$gateways" --policy "$policy" \
    --model "$model" --threads "$THREADS" --tachyon "$tachyon" -- --max-model-len "$max_len" --max-num-seqs 16 \
    >/dev/null
  local files=() bench_pids=() j=0
  for gw in $(awk '/^gateway-/ {print $2}' "$work/fleet/fleet.txt"); do
    j=$((j + 1))
    "$tachyon" bench --url "$gw" --model chat --workload shared-prefix --num-prefixes "$K" --prefix-len "$P" \
      --input-len "$S" --output-len "$O" --num-requests $((N / gateways)) --concurrency $((C / gateways)) \
      --ignore-eos --tokenizer "$model" --prompt-ids --seed "$j" --no-progress --out "$work/$label-$j.json" \
      >/dev/null 2>"$work/bench-$j.err" &
    bench_pids+=($!)
    files+=("$work/$label-$j.json")
  done
  for p in "${bench_pids[@]}"; do wait "$p" || { cat "$work"/bench-*.err; exit 1; }; done
  local q h
  q=$(metric_sum tachyon:prefix_cache_queries_total) h=$(metric_sum tachyon:prefix_cache_hits_total)
  python3 - "$label" "$q" "$h" "${files[@]}" <<'PY'
import json, sys
label, q, h = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
records = [r for f in sys.argv[4:] for r in json.load(open(f))["records"]]
ok = [r for r in records if r["ok"]]
wall = max(r["start_s"] + r["e2e_s"] for r in records) - min(r["start_s"] for r in records)
def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] * 1000 if v else float("nan")
ttft = [r["chunks_s"][0] for r in ok if r["chunks_s"]]
e2e = [r["e2e_s"] for r in ok]
tokens = sum(r["output_tokens"] for r in ok)
print(f"| {label} | {len(ok)}/{len(records)} | {len(ok) / wall:.2f} | {tokens / wall:.0f} | {pct(ttft, 50):.0f} | "
      f"{pct(ttft, 95):.0f} | {pct(e2e, 95):.0f} | {100 * h / max(1, q):.1f}% |")
PY
  deploy/local/fleet.sh stop "$work/fleet" >/dev/null
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; tachyon $(git rev-parse --short HEAD); model $model"
echo "workload: $K prefixes of $P tokens + $S unique, $N requests at concurrency $C, $O output tokens; engines $THREADS thread(s)"
echo
echo "| run | ok | req/s | output tok/s | TTFT p50 ms | TTFT p95 ms | E2E p95 ms | prefix-cache hit rate |"
echo "|---|---|---|---|---|---|---|---|"
for p in $(seq "$PAIRS"); do
  run "1x1" 1 1 prefix-affinity
  run "2x2" 2 2 prefix-affinity
  run "2x2rr" 2 2 round-robin
done
