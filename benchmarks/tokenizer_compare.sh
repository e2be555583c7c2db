#!/usr/bin/env bash
# Tokenizer encode speed, Tachyon vs llama.cpp's llama-tokenize, on the same
# vocabulary and the same text files, one thread (both pinned to one core), in
# one run: A B A B, median of the pairs.
#
# Each run is a whole process (load, read the file, encode, print the ids); the
# load is taken out by subtracting each program's median time on an empty file,
# so what remains is encoding (and printing) the text. The last column is the
# whole process instead (load included): llama-tokenize's seconds over
# Tachyon's, median of the pairs. The ids of the two are compared once per
# corpus: a speed figure counts only when they are identical.
#
# The corpora are tokenizer_bench's (--write-corpora): prose (STS-B), code (this
# project's sources), CJK, emoji/multilingual, all mixed, each repeated to at
# least MIN_MB so that encoding outweighs the noise of the load; and "mixed-once"
# (each source once, nothing repeated: a word cache helps only as far as words
# recur in real text). Repetition favours a word cache: mixed-once is the figure
# to quote.
#
#   LLAMA_TOKENIZE=~/.cache/llama.cpp/build/bin/llama-tokenize benchmarks/tokenizer_compare.sh
#   VOCAB=../shared/fixtures/tokenizer/ggml-vocab-llama-bpe.gguf PAIRS=5 CORPORA="mixed mixed-once" ...
set -euo pipefail
cd "$(dirname "$0")/.."
: "${LLAMA_TOKENIZE:?set LLAMA_TOKENIZE to the llama-tokenize binary of llama.cpp}"
VOCAB=${VOCAB:-../shared/fixtures/tokenizer/ggml-vocab-llama-bpe.gguf}
PAIRS=${PAIRS:-3} MIN_MB=${MIN_MB:-4}
CORPORA=${CORPORA:-"prose code cjk emoji mixed mixed-once"}
CPU=${CPU:-1}
tachyon=build/release/src/cli/tachyon
bench=build/release/benchmarks/tokenizer_bench
[ -f "$VOCAB" ] || { echo "no vocabulary at $VOCAB (../shared absent?)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bench" --write-corpora "$work"
: >"$work/empty.txt"

run_llama() { "$LLAMA_TOKENIZE" -m "$VOCAB" -f "$1" --ids --no-escape --no-parse-special --no-bos --log-disable; }
run_tachyon() { "$tachyon" tokenize --model "$VOCAB" --file "$1" --ids --no-bos; }
# seconds FUNCTION FILE OUT: wall time of one pinned run, its ids written to OUT.
seconds() {
  local start end
  start=$(date +%s%N)
  taskset -c "$CPU" bash -c "$(declare -f "$1"); LLAMA_TOKENIZE='$LLAMA_TOKENIZE' VOCAB='$VOCAB' tachyon='$tachyon' $1 '$2'" >"$3"
  end=$(date +%s%N)
  echo "scale=4; ($end - $start) / 1000000000" | bc
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), one core; tachyon $(git rev-parse --short HEAD);" \
  "llama-tokenize $("$LLAMA_TOKENIZE" --version 2>&1 | sed -n 's/^version: //p' | head -1)"
echo "vocabulary: $(basename "$VOCAB")"
load_llama=$(for _ in 1 2 3 4 5; do seconds run_llama "$work/empty.txt" /dev/null; done | median)
load_tachyon=$(for _ in 1 2 3 4 5; do seconds run_tachyon "$work/empty.txt" /dev/null; done | median)
echo "load (empty file, median of 5): llama-tokenize ${load_llama} s, tachyon ${load_tachyon} s"
echo
echo "| corpus | MB | tokens | ids identical | llama.cpp MB/s | Tachyon MB/s | Tachyon / llama.cpp | whole process, load included |"
echo "|---|---|---|---|---|---|---|---|"
for corpus in $CORPORA; do
  file="$work/$corpus.txt"
  if [ "$corpus" != mixed-once ]; then
    while [ "$(stat -c %s "$file")" -lt $((MIN_MB * 1000000)) ]; do cat "$file" "$file" >"$file.2" && mv "$file.2" "$file"; done
  fi
  mb=$(echo "scale=3; $(stat -c %s "$file") / 1000000" | bc)
  ratios=()
  whole=()
  llama_rates=()
  tachyon_rates=()
  for p in $(seq "$PAIRS"); do
    a=$(seconds run_llama "$file" "$work/llama.ids")
    b=$(seconds run_tachyon "$file" "$work/tachyon.ids")
    ra=$(echo "scale=3; $mb / ($a - $load_llama)" | bc)
    rb=$(echo "scale=3; $mb / ($b - $load_tachyon)" | bc)
    llama_rates+=("$ra")
    tachyon_rates+=("$rb")
    ratios+=("$(echo "scale=3; $rb / $ra" | bc)")
    whole+=("$(echo "scale=3; $a / $b" | bc)")
  done
  same=$(python3 - "$work/llama.ids" "$work/tachyon.ids" <<'PY'
import ast, sys
a = ast.literal_eval(open(sys.argv[1]).read().strip() or "[]")
b = [int(x) for x in open(sys.argv[2]).read().split()]
print(f"{'yes' if a == b else 'NO'} {len(b)}")
PY
)
  echo "| $corpus | $mb | ${same#* } | ${same%% *} | $(printf '%s\n' "${llama_rates[@]}" | median) |" \
    "$(printf '%s\n' "${tachyon_rates[@]}" | median) | $(printf '%s\n' "${ratios[@]}" | median)x |" \
    "$(printf '%s\n' "${whole[@]}" | median)x |"
done
