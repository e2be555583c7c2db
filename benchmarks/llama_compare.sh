#!/usr/bin/env bash
# Tachyon against llama.cpp on the same GGUF files, in one run: prompt processing
# (PP tokens) and generation (TG tokens) speed of `tachyon run` and `llama-bench`,
# alternated A B A B, the median of the pairs, and the ratio Tachyon / llama.cpp.
# Builds nothing: point LLAMA_BENCH at a llama-bench binary (llama.cpp fetched and
# built outside this repository). Models are random-weight files of real shapes
# written by `tachyon model gen` into ${MODEL_DIR:-/tmp/tachyon-bench-models}.
#
#   LLAMA_BENCH=~/.cache/llama.cpp/build/bin/llama-bench benchmarks/llama_compare.sh
#   LLAMA_BENCH=... SHAPES="smol-135m" TYPES="q8_0 q5_k_m" PAIRS=3 benchmarks/llama_compare.sh
#   LLAMA_BENCH=... PP=2000 TG=16 FA=1 ...   (a long prompt; FA=1: llama.cpp with flash attention)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${LLAMA_BENCH:?set LLAMA_BENCH to a llama-bench binary}"
tachyon=build/release/src/cli/tachyon
[ -x "$tachyon" ] || { echo "missing $tachyon: build the release preset first" >&2; exit 1; }
shared=${TACHYON_SHARED_DIR:-../shared}
models=${MODEL_DIR:-/tmp/tachyon-bench-models}
shapes=${SHAPES:-"smol-135m llama-1b"}
types=${TYPES:-"f16 q8_0 q4_0 q4_k_m"}
threads=${THREADS:-2} PAIRS=${PAIRS:-2} PP=${PP:-512} TG=${TG:-64} FA=${FA:-0}
mkdir -p "$models"

source benchmarks/bench_models.sh
llama() {  # model -p N -n M: tokens/s
  "$LLAMA_BENCH" -m "$1" -p "$2" -n "$3" -t "$threads" -fa "$FA" -r 1 -o json 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["avg_ts"])'
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $threads threads; tachyon $(git rev-parse --short HEAD);" \
     "llama.cpp $LLAMA_BENCH (flash attention: $FA)"
echo "$PAIRS A/B pairs per figure, median of the pairs (tokens/s)"
echo
echo "| model | type | pp$PP tachyon | pp$PP llama.cpp | ratio | tg$TG tachyon | tg$TG llama.cpp | ratio |"
echo "|---|---|---|---|---|---|---|---|"
for shape in $shapes; do
  for type in $types; do
    model=$(bench_model "$shape" "$type")
    rows=()
    for _ in $(seq "$PAIRS"); do
      rows+=("$(tachyon_pp "$model" "$PP" "$threads") $(llama "$model" "$PP" 0) $(tachyon_tg "$model" "$TG" "$threads")"\
" $(llama "$model" 0 "$TG")")
    done
    printf '%s\n' "${rows[@]}" | python3 -c '
import statistics, sys
rows = [list(map(float, line.split())) for line in sys.stdin if line.strip()]
med = lambda i: statistics.median(r[i] for r in rows)
ratio = lambda a, b: statistics.median(r[a] / r[b] for r in rows)
print(f"| {sys.argv[1]} | {sys.argv[2]} | {med(0):.1f} | {med(1):.1f} | {ratio(0, 1):.2f}x | {med(2):.1f} | {med(3):.1f} | {ratio(2, 3):.2f}x |")
' "$shape" "$type"
  done
done
