#!/usr/bin/env bash
# Prompt processing (512 tokens) and generation (128 tokens) speed of tachyon
# run on random-weight models of real shapes, with the fraction of the
# memory-bandwidth bound each generation figure reaches (issue 41, goal 1).
#
#   benchmarks/model_speed.sh [threads]            (default 2)
#   SHAPES="smol-135m" TYPES="q8_0" benchmarks/model_speed.sh
#   SHAPES=qwen3-30b-a3b TYPES=q4_0 benchmarks/model_speed.sh   (a mixture of experts: the active experts' bytes)
#
# Needs a release build (make test or cmake --build --preset release) and
# ../shared for the vocabularies: smol-135m uses the GPT-2 vocabulary (50257
# tokens, the size nearest SmolLM's 49152), llama-1b Llama 3's (128256).
# Models are written to ${MODEL_DIR:-/tmp/tachyon-bench-models} and reused.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
tachyon=build/release/src/cli/tachyon
probe=build/release/benchmarks/bandwidth_probe
shared=${TACHYON_SHARED_DIR:-../shared}
models=${MODEL_DIR:-/tmp/tachyon-bench-models}
shapes=${SHAPES:-"llama-1b smol-135m"}
types=${TYPES:-"f16 q8_0 q4_0 q4_k_m q6_k"}
mkdir -p "$models"
for bin in "$tachyon" "$probe"; do
  [ -x "$bin" ] || { echo "missing $bin: build the release preset first" >&2; exit 1; }
done

# The bandwidth is probed beside each generation figure (this VM's varies by
# tens of percent from minute to minute): before and after it, the mean of the two.
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $threads threads; tachyon $(git rev-parse --short HEAD)"
echo
echo "| model | type | file size | pp512 tok/s | tg128 tok/s | bytes read per token | read bandwidth | bandwidth bound tok/s | share of bound |"
echo "|---|---|---|---|---|---|---|---|---|"

source benchmarks/bench_models.sh
for shape in $shapes; do
  for type in $types; do
    model=$(bench_model "$shape" "$type")
    # Bytes a generated token reads: every tensor, except the embedding rows of
    # an untied model (one row is read, not the matrix), and of a mixture of
    # experts only the experts a token uses (expert_used_count of expert_count).
    read -r file_bytes per_token < <("$tachyon" model info --json "$model" | python3 -c '
import json, sys
j = json.load(sys.stdin)
meta, arch = j["metadata"], j["architecture"]
n_expert = meta.get(arch + ".expert_count", {}).get("value", 0)
n_used = meta.get(arch + ".expert_used_count", {}).get("value", 0)
names = {t["name"] for t in j["tensors"]}
total = 0
for t in j["tensors"]:
    if t["name"].startswith("token_embd") and "output.weight" in names:
        continue
    total += t["bytes"] * n_used / n_expert if "_exps" in t["name"] and n_expert else t["bytes"]
print(j["file_bytes"], int(total))')
    pp=$(tachyon_pp "$model" 512 "$threads")
    before=$("$probe" "$threads" 1024 2>/dev/null)
    tg=$(tachyon_tg "$model" 128 "$threads")
    after=$("$probe" "$threads" 1024 2>/dev/null)
    awk -v shape="$shape" -v type="$type" -v fb="$file_bytes" -v pt="$per_token" -v pp="$pp" -v tg="$tg" \
        -v b0="$before" -v b1="$after" 'BEGIN {
      bw = (b0 + b1) / 2
      bound = bw * 1e9 / pt
      printf "| %s | %s | %.2f GB | %.1f | %.1f | %.2f GB | %.1f GB/s | %.1f | %.0f%% |\n", shape, type, fb / 1e9, pp, tg, pt / 1e9, bw, bound, 100 * tg / bound
    }'
  done
done
