#!/usr/bin/env bash
# Makes the architecture goldens of tests/golden/arch (README.md there): for each
# tiny test shape and weight type, the model written by `tachyon model gen` (the
# test writes the same file again from the shape, type and seed) run through
# llama.cpp by llama_logits.cc; its logits and greedy ids are the fixture.
#
#   LLAMA_CPP=~/.cache/llama.cpp-arch tests/golden/arch/make_arch_goldens.sh [SHAPE...]
#
# LLAMA_CPP: a llama.cpp checkout outside this repository (its commit is written
# into each fixture). Needs a release build of Tachyon (build/release).
set -euo pipefail
cd "$(dirname "$0")/../../.."
: "${LLAMA_CPP:?set LLAMA_CPP to a llama.cpp checkout (outside this repository)}"
tachyon=build/release/src/cli/tachyon
out=tests/golden/arch
shapes=${*:-"qwen3-tiny qwen3moe-tiny mixtral-tiny gemma2-tiny gemma3-tiny phi3-tiny"}
types=${TYPES:-"f32 q8_0"}
seed=${SEED:-20261206}
[ -x "$tachyon" ] || { echo "missing $tachyon: build the release preset first" >&2; exit 1; }

# llama.cpp, CPU only, its shared libraries; then the driver against them.
build="$LLAMA_CPP/build-tachyon-golden"
if [ ! -f "$build/bin/libllama.so" ]; then
  cmake -S "$LLAMA_CPP" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=OFF \
    -DGGML_OPENMP=OFF >/dev/null
  cmake --build "$build" --target llama
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
g++ -O2 -std=c++17 "$out/llama_logits.cc" -I"$LLAMA_CPP/include" -I"$LLAMA_CPP/ggml/include" \
  -L"$build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$build/bin" -o "$work/llama_logits"
commit=$(git -C "$LLAMA_CPP" rev-parse HEAD 2>/dev/null || echo unknown)

for shape in $shapes; do
  for type in $types; do
    stem="$shape-$type"
    "$tachyon" model gen --shape "$shape" --type "$type" --seed "$seed" --out "$work/$stem.gguf" >/dev/null
    "$work/llama_logits" "$work/$stem.gguf" "$out" "$stem" "$out/prompts.json" 16 64 2>"$work/$stem.log" ||
      { cat "$work/$stem.log" >&2; exit 1; }
    python3 - "$out" "$stem" "$shape" "$type" "$seed" "$commit" "$work/$stem.gguf" <<'PY'
import hashlib, json, sys
out, stem, shape, type_, seed, commit, model = sys.argv[1:]
refs = json.load(open(f"{out}/{stem}.logits.json"))
refs = {"gen": {"shape": shape, "type": type_, "seed": int(seed)},
        "model_sha256": hashlib.sha256(open(model, "rb").read()).hexdigest(),
        "llama_cpp_commit": commit,
        "settings": "1 thread, KV cache F32, flash attention off, the prompt in one llama_decode, then one token per call",
        **refs}
json.dump(refs, open(f"{out}/{stem}.refs.json", "w"), indent=1)
PY
    rm "$out/$stem.logits.json"
    echo "$stem: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(*(p["name"] + " greedy " + str(p["greedy_ids"][:8]) for p in r["prompts"]), sep="; ")' "$out/$stem.refs.json")"
  done
done
