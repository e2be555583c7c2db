#!/usr/bin/env bash
# Sentence embeddings per second, Tachyon (`tachyon embed`) side by side with
# llama.cpp's llama-embedding on the same random-weight bge-small files (F32 and
# Q8_0): 64 inputs of 32 tokens each (CLS and SEP included), 2 threads, A B A B.
#
#   batch 1:  one input per forward pass (tachyon --batch 1; llama.cpp -c 32 -b 32)
#   batch 64: all 64 in one call (tachyon --batch 64: one pass, attention per
#             sequence; llama.cpp -c 2048 -b 2048: one batch, one attention over
#             all 2048 tokens with a mask; and llama.cpp's best split, -c 64:
#             two sequences per pass)
#
# Only the encoding is timed: Tachyon's Embed calls (its stderr line), llama.cpp's
# "prompt eval time" (model loading excluded on both sides).
#
#   LLAMA_CPP=~/.cache/llama.cpp benchmarks/embedding_speed.sh     (after a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${LLAMA_CPP:?set LLAMA_CPP to a llama.cpp checkout built with llama-embedding}"
PAIRS=${PAIRS:-3}
tachyon=build/release/src/cli/tachyon
embedding="$LLAMA_CPP/build/bin/llama-embedding"
vocab=../shared/fixtures/tokenizer/ggml-vocab-bert-bge.gguf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$work" <<'PY'
import json, random, sys
random.seed(1)
words = "the of and to in is was for on that with as by at from his her which or an be are were this".split()
lines = [" ".join(random.choice(words) for _ in range(30)) for _ in range(64)]  # 30 WordPiece tokens + CLS + SEP
open(f"{sys.argv[1]}/in.txt", "w").write("\n".join(lines))
open(f"{sys.argv[1]}/in.jsonl", "w").write("".join(json.dumps({"text": l}) + "\n" for l in lines))
PY
tokens=$("$tachyon" tokenize --model "$vocab" --ids "$(head -1 "$work/in.txt")" | wc -w)
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; tachyon $(git rev-parse --short HEAD);" \
     "llama.cpp $(git -C "$LLAMA_CPP" rev-parse --short HEAD 2>/dev/null || echo '?'); 64 inputs of $tokens tokens"

ours() {  # model batch -> texts/s
  "$tachyon" embed --model "$1" --threads 2 --jsonl "$work/in.jsonl" --batch "$2" 2>&1 >/dev/null |
    sed -n 's/.*(\([0-9.]*\) texts\/s).*/\1/p'
}
theirs() {  # model ctx -> texts/s
  "$embedding" -m "$1" -f "$work/in.txt" -t 2 -c "$2" -b "$2" -ub "$2" --embd-output-format array 2>&1 >/dev/null |
    sed -n 's/.*prompt eval time = *\([0-9.]*\) ms.*/\1/p' | awk '{ printf "%.1f\n", 64 * 1000 / $1 }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo
echo "| model | batch | Tachyon (sentences/s) | llama.cpp (sentences/s) | llama.cpp setting |"
echo "|---|---|---|---|---|"
for type in f32 q8_0; do
  model="$work/bge-small-$type.gguf"
  "$tachyon" model gen --shape bge-small --type "$type" --vocab "$vocab" --out "$model" >/dev/null
  for case in "1 32" "64 2048" "64 64"; do
    set -- $case
    a=() b=()
    for _ in $(seq "$PAIRS"); do
      a+=("$(ours "$model" "$1")")
      b+=("$(theirs "$model" "$2")")
    done
    echo "| bge-small $type | $1 | $(printf '%s\n' "${a[@]}" | median) | $(printf '%s\n' "${b[@]}" | median) |" \
         "-c $2 -b $2 -ub $2 |"
  done
done
echo
echo "(median of $PAIRS A/B pairs; each figure is 64 inputs over the encoding time)"
