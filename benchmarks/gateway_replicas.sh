#!/usr/bin/env bash
# Two `tachyon serve` engine replicas behind the gateway, on the shared-prefix
# workload (K prefixes of P tokens, a unique suffix of S tokens each, N requests
# at concurrency C, O output tokens): the prefix-cache hit rate summed over both
# replicas, and TTFT p50 / p95, with the route's policy `round-robin` and
# `prefix-affinity`, each on fresh replicas (empty caches), in one run: RR PA RR PA.
# Each replica has one thread on a core of its own.
#
#   benchmarks/gateway_replicas.sh [MODEL.gguf]   (default: a random-weight `tiny` model, generated once)
#   PAIRS=2 K=4 P=1000 S=50 N=64 C=8 O=16 LOAD_FACTOR=2.0 SEED=0 benchmarks/gateway_replicas.sh
# The bench gives prefixes out round robin; with K even, round-robin routing over two
# replicas sends each prefix to one replica by construction (perfect affinity by
# accident): K=3 or 5 shows what round-robin does to a workload it is not aligned with.
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=build/release/src/cli/tachyon
model=${1:-${TMPDIR:-/tmp}/tachyon-replicas-tiny-q8_0.gguf}
PAIRS=${PAIRS:-2} K=${K:-4} P=${P:-1000} S=${S:-50} N=${N:-64} C=${C:-8} O=${O:-16}
[ -f "$model" ] || "$tachyon" model gen --shape tiny --type q8_0 --seed 1 --out "$model" >/dev/null
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT


metric() {  # url name: the value of an unlabelled-looking series (first match)
  curl -s "$1/metrics" | awk -v n="$2" 'index($0, n "{") == 1 { print $2; exit }'
}

run() {  # policy label
  local policy=$1 label=$2
  local max_len=$((P + S + O + 64))
  start r1 0 -- "$tachyon" serve --model "$model" --port 0 --threads 1 --max-model-len "$max_len" --max-num-seqs 16 --served-model-name m \
    --no-access-log
  local r1=$url
  start r2 1 -- "$tachyon" serve --model "$model" --port 0 --threads 1 --max-model-len "$max_len" --max-num-seqs 16 --served-model-name m \
    --no-access-log
  local r2=$url
  cat >"$work/gateway.toml" <<TOML
[[backend]]
name = "replica-1"
kind = "openai"
base_url = "$r1/v1"
[[backend]]
name = "replica-2"
kind = "openai"
base_url = "$r2/v1"
[[route]]
model = "m"
backends = ["replica-1", "replica-2"]
policy = "$policy"
load_factor = ${LOAD_FACTOR:-2.0}
TOML
  start gateway 0 -- "$tachyon" serve --config "$work/gateway.toml" --port 0 --io-threads 1 --no-access-log
  local gw=$url
  "$tachyon" bench --url "$gw" --model m --workload shared-prefix --num-prefixes "$K" --prefix-len "$P" \
    --input-len "$S" --output-len "$O" --num-requests "$N" --concurrency "$C" --ignore-eos --tokenizer "$model" \
    --prompt-ids --seed "${SEED:-0}" --no-progress --label "$label" --out "$work/$label.json" >/dev/null 2>"$work/bench.err" ||
    { cat "$work/bench.err"; exit 1; }
  local q1 h1 q2 h2
  q1=$(metric "$r1" tachyon:prefix_cache_queries_total) h1=$(metric "$r1" tachyon:prefix_cache_hits_total)
  q2=$(metric "$r2" tachyon:prefix_cache_queries_total) h2=$(metric "$r2" tachyon:prefix_cache_hits_total)
  local c1 c2
  c1=$(metric "$r1" tachyon:prompt_tokens_computed_total) c2=$(metric "$r2" tachyon:prompt_tokens_computed_total)
  python3 - "$work/$label.json" "$policy" "$q1" "$h1" "$q2" "$h2" "$c1" "$c2" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
q1, h1, q2, h2, c1, c2 = map(float, sys.argv[3:9])
print(f"| {sys.argv[2]} | {s['num_ok']}/{s['num_requests']} | {100 * (h1 + h2) / max(1, q1 + q2):.1f}% "
      f"({100 * h1 / max(1, q1):.0f}% / {100 * h2 / max(1, q2):.0f}%) | {c1 + c2:.0f} ({c1:.0f} / {c2:.0f}) | "
      f"{s['ttft']['p50_ms']:.0f} | {s['ttft']['p95_ms']:.0f} | {s['e2e']['p95_ms']:.0f} | {s['request_throughput']:.2f} |")
PY
  stop_servers
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; tachyon $(git rev-parse --short HEAD); model $model"
echo "workload: $K prefixes of $P tokens + $S unique, $N requests at concurrency $C, $O output tokens"
echo
echo "| policy | ok | prefix-cache hit rate (replica 1 / 2) | prompt tokens computed (1 / 2) | TTFT p50 ms | TTFT p95 ms | E2E p95 ms | req/s |"
echo "|---|---|---|---|---|---|---|---|"
for p in $(seq "$PAIRS"); do
  run round-robin "rr$p"
  run prefix-affinity "pa$p"
done
