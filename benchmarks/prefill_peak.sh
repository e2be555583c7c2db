#!/usr/bin/env bash
# Prefill as a fraction of the CPU's int8 multiply-add peak (issue 41, goal 2):
# int8_peak's register-only figures with THREADS threads, then `tachyon run`'s
# prompt processing at each of LENS tokens on MODEL (a random-weight file of a
# real shape; default llama-1b Q8_0), as multiply-adds/s of the matrices only:
# tokens/s x the multiply-adds a token takes in every blk.* matrix (a mixture
# of experts: the experts a token uses). The output matrix is left out (prefill
# computes one row of logits).
#
#   benchmarks/prefill_peak.sh [MODEL.gguf]
#   LENS="512 2000" THREADS=2 benchmarks/prefill_peak.sh /tmp/tachyon-bench-models/llama-1b-q8_0.gguf
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2} LENS=${LENS:-"512 2000"}
tachyon=build/release/src/cli/tachyon
peak_bin=build/release/benchmarks/int8_peak
for bin in "$tachyon" "$peak_bin"; do
  [ -x "$bin" ] || { echo "missing $bin: build the release preset first" >&2; exit 1; }
done
shared=${TACHYON_SHARED_DIR:-../shared}
models=${MODEL_DIR:-/tmp/tachyon-bench-models}
mkdir -p "$models"
source benchmarks/bench_models.sh
model=${1:-$(bench_model llama-1b q8_0)}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $THREADS threads; tachyon $(git rev-parse --short HEAD)"
"$peak_bin" "$THREADS" | tee "${TMPDIR:-/tmp}/int8_peak.$$"
# The MAC instruction's rate: vpdpbusd where the CPU has it, else vpmaddubsw alone.
peak=$(awk '/^vpdpbusd / { print $2; exit } /^vpmaddubsw / { v = $2 } END { if (v) print v }' \
  "${TMPDIR:-/tmp}/int8_peak.$$" | head -1)
rm -f "${TMPDIR:-/tmp}/int8_peak.$$"
macs=$("$tachyon" model info --json "$model" | python3 -c '
import json, sys
j = json.load(sys.stdin)
meta, arch = j["metadata"], j["architecture"]
n_expert = meta.get(arch + ".expert_count", {}).get("value", 0)
n_used = meta.get(arch + ".expert_used_count", {}).get("value", 0)
total = 0
for t in j["tensors"]:
    shape = t["shape"]
    if not t["name"].startswith("blk.") or len(shape) < 2:
        continue
    m = 1
    for d in shape:
        m *= d
    total += m * n_used / n_expert if "_exps" in t["name"] and n_expert else m
print(int(total))')
echo "model $(basename "$model"): $macs multiply-adds a token in its matrices; peak $peak G/s"
echo
echo "| prompt tokens | tokens/s | G multiply-adds/s | share of the int8 peak |"
echo "|---|---|---|---|"
for len in $LENS; do
  tps=$(tachyon_pp "$model" "$len" "$THREADS")
  awk -v len="$len" -v tps="$tps" -v macs="$macs" -v peak="$peak" 'BEGIN {
    g = tps * macs / 1e9
    printf "| %d | %.1f | %.1f | %.0f%% |\n", len, tps, g, 100 * g / peak
  }'
done
