#!/usr/bin/env bash
# Constrained decoding end to end: output tokens/s of `tachyon serve` with no
# response_format, with json_object, and with a JSON schema (an extraction
# record), at several concurrencies, measured with `tachyon bench` on the same
# server and prompts (temperature 1, seeded). Formats alternate within each pair
# (none object schema, none object schema, ...); figures are the median of the
# pairs. The per-token cost of the mask alone is benchmarks/grammar_mask.cc.
#
#   benchmarks/structured_output.sh
#   SHAPE=llama-1b TYPE=q4_0 CONCURRENCY="1 16" ROUNDS=2 OUT=64 PAIRS=2 benchmarks/structured_output.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=build/release/src/cli/tachyon
[ -x "$tachyon" ] || { echo "missing $tachyon: build the release preset first" >&2; exit 1; }
shared=${TACHYON_SHARED_DIR:-../shared}
models=${MODEL_DIR:-/tmp/tachyon-bench-models}
SHAPE=${SHAPE:-smol-135m} TYPE=${TYPE:-q8_0} CONCURRENCY=${CONCURRENCY:-"1 16"} ROUNDS=${ROUNDS:-2}
OUT=${OUT:-64} PAIRS=${PAIRS:-2} THREADS=${THREADS:-2}
mkdir -p "$models"
source benchmarks/bench_models.sh
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT

schema='{"type":"object","properties":{"name":{"type":"string","maxLength":24},"age":{"type":"integer","minimum":0,"maximum":130},
"email":{"type":"string","maxLength":40},"tags":{"type":"array","items":{"type":"string","maxLength":12},"maxItems":4},
"city":{"type":"string","maxLength":24}},"required":["name","age","email","tags","city"],"additionalProperties":false}'
extra_none='{}'
extra_object='{"response_format":{"type":"json_object"}}'
extra_schema="{\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"person\",\"schema\":$schema}}}"

model=$(bench_model "$SHAPE" "$TYPE")
start serve -- "$tachyon" serve --model "$model" --port 0 --threads "$THREADS" --max-num-seqs 16 \
  --max-model-len 1024 --no-access-log
run() {  # format c pair
  local extra=$extra_none
  [ "$1" = object ] && extra=$extra_object
  [ "$1" = schema ] && extra=$extra_schema
  "$tachyon" bench --url "$url" --workload random --input-len 64 --output-len "$OUT" --temperature 1 \
    --extra-body "$extra" --concurrency "$2" --num-requests $(($2 * ROUNDS)) --seed "$3" --no-progress \
    --out "$work/$1-c$2-$3.json" >/dev/null 2>"$work/bench.err" || { cat "$work/bench.err"; exit 1; }
}
# One warm-up of each format: the first schema request compiles it and fills its mask cache.
for f in none object schema; do run "$f" 1 0; done
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $THREADS threads; tachyon $(git rev-parse --short HEAD);" \
     "$(basename "$model"), temperature 1, up to $OUT tokens out, $ROUNDS requests per stream, median of $PAIRS pairs"
for c in $CONCURRENCY; do
  for pair in $(seq "$PAIRS"); do
    for f in none object schema; do run "$f" "$c" "$pair"; done
  done
done
python3 - "$work" "$PAIRS" $CONCURRENCY <<'PY'
import json, statistics, sys
work, pairs, cs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("| streams | response_format | output tok/s | x none | TPOT p50 (ms) | E2E p50 (ms) | output tokens |")
print("|---|---|---|---|---|---|---|")
for c in cs:
    s = lambda f, p: json.load(open(f"{work}/{f}-c{c}-{p}.json"))["summary"]
    med = lambda f, g: statistics.median(g(s(f, p)) for p in range(1, pairs + 1))
    none = med("none", lambda x: x["output_token_throughput"])
    for f in ("none", "object", "schema"):
        t = med(f, lambda x: x["output_token_throughput"])
        tpot = med(f, lambda x: x["tpot"]["p50_ms"])
        e2e = med(f, lambda x: x["e2e"]["p50_ms"])
        toks = med(f, lambda x: x["total_output_tokens"])
        print(f"| {c} | {f} | {t:.1f} | {t / none:.2f}x | {tpot:.1f} | {e2e:.0f} | {toks:.0f} |")
PY
