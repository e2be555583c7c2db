#!/usr/bin/env bash
# Batched decode: output tokens/s of `tachyon serve` at 1, 4 and 16 concurrent
# streams (IN prompt tokens, OUT output tokens each, ignore_eos), measured with
# `tachyon bench`, and each figure as a multiple of one stream's. A step reads the
# weights once for the whole batch, so the multiple shows how far batching pays.
#
#   benchmarks/batched_decode.sh [MODEL.gguf]     (default: smol-135m Q8_0, generated)
#   CONCURRENCY="1 4 16" IN=64 OUT=64 ROUNDS=4 THREADS=2 benchmarks/batched_decode.sh
#   TACHYON=/path/to/another/tachyon benchmarks/batched_decode.sh   (to compare builds)
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=${TACHYON:-build/release/src/cli/tachyon}
[ -x "$tachyon" ] || { echo "missing $tachyon: build the release preset first" >&2; exit 1; }
shared=${TACHYON_SHARED_DIR:-../shared}
models=${MODEL_DIR:-/tmp/tachyon-bench-models}
CONCURRENCY=${CONCURRENCY:-"1 4 16"} IN=${IN:-64} OUT=${OUT:-64} ROUNDS=${ROUNDS:-4} THREADS=${THREADS:-2}
mkdir -p "$models"
source benchmarks/bench_models.sh
model=${1:-$(bench_model smol-135m q8_0)}
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT

start serve -- "$tachyon" serve --model "$model" --port 0 --threads "$THREADS" --max-num-seqs 16 \
  --max-model-len $((IN + OUT + 16)) --no-prefix-caching --no-access-log
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $THREADS threads; tachyon $(git rev-parse --short HEAD);" \
     "$(basename "$model"), $IN in, $OUT out, $ROUNDS requests a stream"
echo
echo "| streams | output tok/s | x one stream | TPOT p50 (ms) |"
echo "|---|---|---|---|"
one=
for c in $CONCURRENCY; do
  "$tachyon" bench --url "$url" --input-len "$IN" --output-len "$OUT" --ignore-eos --concurrency "$c" \
    --num-requests $((c * ROUNDS)) --tokenizer "$model" --prompt-ids --no-progress --out "$work/c$c.json" \
    >/dev/null 2>"$work/bench.err" || { cat "$work/bench.err"; exit 1; }
  read -r tput tpot < <(python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))["summary"]
print(s["output_token_throughput"], s["tpot"]["p50_ms"])' "$work/c$c.json")
  one=${one:-$tput}
  python3 -c 'import sys; c, t, one, tpot = sys.argv[1:]
print(f"| {c} | {float(t):.1f} | {float(t) / float(one):.2f}x | {float(tpot):.1f} |")' "$c" "$tput" "$one" "$tpot"
done
