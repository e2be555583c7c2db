#!/usr/bin/env bash
# Writes tests/golden/embedding_golden.json: llama.cpp's sentence embeddings of
# random-weight bge-small and nomic-embed models (F32 and Q8_0, written by
# `tachyon model gen`, seed 0) for the inputs of embedding_inputs.txt, with
# llama.cpp's token ids for each input. embedding_golden_test.cc regenerates the
# same models and compares Tachyon's vectors with these.
#
#   LLAMA_CPP=~/.cache/llama.cpp tests/golden/make_embedding_golden.sh
#
# LLAMA_CPP is a llama.cpp checkout built with llama-embedding and
# llama-tokenize in build/bin (the figures committed came from commit
# c392e5094deaf2d1a7c18683214f007fad3fe42b, CPU build, GGML_NATIVE=ON).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${LLAMA_CPP:?set LLAMA_CPP to a built llama.cpp checkout}"
tachyon=build/release/src/cli/tachyon
vocab=../shared/fixtures/tokenizer/ggml-vocab-bert-bge.gguf
inputs=tests/golden/embedding_inputs.txt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

commit=$(git -C "$LLAMA_CPP" rev-parse HEAD 2>/dev/null || echo unknown)
n=0
while IFS= read -r line || [ -n "$line" ]; do
  "$LLAMA_CPP/build/bin/llama-tokenize" -m "$vocab" -p "$line" --ids --log-disable --no-escape 2>/dev/null \
    | tail -1 >"$work/ids.$n"
  n=$((n + 1))
done <"$inputs"
for shape in bge-small nomic-embed; do
  for type in f32 q8_0; do
    model="$work/$shape-$type.gguf"
    "$tachyon" model gen --shape "$shape" --type "$type" --vocab "$vocab" --seed 0 --out "$model" >/dev/null
    "$LLAMA_CPP/build/bin/llama-embedding" -m "$model" -f "$inputs" --embd-output-format array \
      -c 512 -b 512 -ub 512 -t 2 2>"$work/log" >"$work/$shape-$type.json" || { tail "$work/log"; exit 1; }
  done
done
python3 - "$work" "$inputs" "$n" "$commit" <<'PY' >tests/golden/embedding_golden.json
import json, sys
work, inputs, n, commit = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
texts = open(inputs, encoding="utf-8").read().split("\n")[:n]
ids = [json.loads(open(f"{work}/ids.{i}").read()) for i in range(n)]
out = {
    "llama_cpp_commit": commit,
    "command": "LLAMA_CPP=... tests/golden/make_embedding_golden.sh (llama-embedding -f inputs "
               "--embd-output-format array -c 512 -b 512 -ub 512; mean of tokens or CLS per the file, L2-normalized)",
    "inputs": texts,
    "token_ids": ids,
    "models": [],
}
for shape in ("bge-small", "nomic-embed"):
    for type_ in ("f32", "q8_0"):
        vecs = json.load(open(f"{work}/{shape}-{type_}.json"))
        assert len(vecs) == n, (shape, type_, len(vecs))
        out["models"].append({"shape": shape, "type": type_, "seed": 0,
                              "embeddings": [[float(f"{x:.7g}") for x in v] for v in vecs]})
json.dump(out, sys.stdout, separators=(",", ":"))
print()
PY
echo "wrote tests/golden/embedding_golden.json ($n inputs, llama.cpp $commit)"
