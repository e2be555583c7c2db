#!/usr/bin/env bash
# Two builds of tachyon against each other, in one run on this machine: the
# engine's prompt processing and generation (`tachyon run`, measured as
# llama_compare.sh measures it) and what the gateway adds in front of an
# upstream (gateway_overhead.sh section 1: added TTFT and E2E at a fixed rate),
# alternated BEFORE AFTER BEFORE AFTER, the median of the pairs, and the ratio
# AFTER / BEFORE. For a change that must keep speed (a refactor): build the old
# commit in a worktree, then
#
#   git worktree add /tmp/before <commit> && (cd /tmp/before && cmake --preset release \
#     -DTACHYON_BUILD_TESTS=OFF && cmake --build --preset release --target tachyon)
#   BEFORE=/tmp/before/build/release/src/cli/tachyon benchmarks/binary_ab.sh
#   BEFORE=... SHAPES=llama-1b TYPES="q8_0 q4_k_m" PAIRS=3 GATEWAY_PAIRS=3 benchmarks/binary_ab.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BEFORE:?set BEFORE to the tachyon binary to compare against}"
AFTER=${AFTER:-build/release/src/cli/tachyon}
shared=${TACHYON_SHARED_DIR:-../shared}
models=${MODEL_DIR:-/tmp/tachyon-bench-models}
shapes=${SHAPES:-"smol-135m llama-1b"}
types=${TYPES:-"q8_0 q4_0 q4_k_m"}
threads=${THREADS:-2} PAIRS=${PAIRS:-2} PP=${PP:-512} TG=${TG:-64} GATEWAY_PAIRS=${GATEWAY_PAIRS:-3}
mkdir -p "$models"
tachyon=$AFTER  # writes the models (bench_model)
source benchmarks/bench_models.sh

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $threads threads"
echo "before: $BEFORE; after: $AFTER ($(git rev-parse --short HEAD))"
echo "$PAIRS pairs per engine figure, median of the pairs (tokens/s)"
echo
echo "| model | type | pp$PP before | pp$PP after | ratio | tg$TG before | tg$TG after | ratio |"
echo "|---|---|---|---|---|---|---|---|"
for shape in $shapes; do
  for type in $types; do
    model=$(bench_model "$shape" "$type")
    rows=()
    for _ in $(seq "$PAIRS"); do
      tachyon=$BEFORE; a=$(tachyon_pp "$model" "$PP" "$threads")
      tachyon=$AFTER; b=$(tachyon_pp "$model" "$PP" "$threads")
      tachyon=$BEFORE; c=$(tachyon_tg "$model" "$TG" "$threads")
      tachyon=$AFTER; d=$(tachyon_tg "$model" "$TG" "$threads")
      rows+=("$a $b $c $d")
    done
    printf '%s\n' "${rows[@]}" | python3 -c '
import statistics, sys
rows = [list(map(float, line.split())) for line in sys.stdin if line.strip()]
med = lambda i: statistics.median(r[i] for r in rows)
ratio = lambda a, b: statistics.median(r[a] / r[b] for r in rows)
print(f"| {sys.argv[1]} | {sys.argv[2]} | {med(0):.1f} | {med(1):.1f} | {ratio(1, 0):.3f} | {med(2):.1f} | {med(3):.1f} | {ratio(3, 2):.3f} |")
' "$shape" "$type"
  done
done

[ "$GATEWAY_PAIRS" -gt 0 ] || exit 0
echo
echo "gateway: added latency at ${RATE:-500} streaming requests/s (gateway_overhead.sh section 1, one A/B pair per run)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for p in $(seq "$GATEWAY_PAIRS"); do
  for side in before after; do
    bin=$BEFORE; [ "$side" = after ] && bin=$AFTER
    TACHYON=$bin SECTIONS=1 PAIRS=1 SECONDS_PER_RUN=${SECONDS_PER_RUN:-5} benchmarks/gateway_overhead.sh \
      > "$work/$side$p.txt"
  done
done
python3 - "$work" "$GATEWAY_PAIRS" <<'PY'
import re, statistics, sys
work, pairs = sys.argv[1], int(sys.argv[2])
def added(path):
    text = open(path).read()
    return {m.group(1) + " " + m.group(2): float(m.group(3))
            for m in re.finditer(r"added (\w+) (p\d+): ([-\d.]+) ms", text)}
print("| added (ms) | before | after |")
print("|---|---|---|")
runs = {side: [added(f"{work}/{side}{p}.txt") for p in range(1, pairs + 1)] for side in ("before", "after")}
for key in runs["before"][0]:
    b = statistics.median(r[key] for r in runs["before"])
    a = statistics.median(r[key] for r in runs["after"])
    print(f"| {key} | {b:.3f} | {a:.3f} |")
PY
