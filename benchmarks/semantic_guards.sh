#!/usr/bin/env bash
# What the semantic cache's guards cost and buy at the documented config
# (threshold 0.93, band 0.03): precision, recall and false-hit rate on STS Benchmark
# dev (a pair is a paraphrase at score >= 4) with guards = "all" (the default since
# issue 31: numbers, negation and names checked on every hit), "band" (only in the
# band under the threshold) and "off", for the hash and words embedders.
#
#   benchmarks/semantic_guards.sh            (after a release build; THRESHOLD, BAND to change them)
set -euo pipefail
cd "$(dirname "$0")/.."
THRESHOLD=${THRESHOLD:-0.93}
BAND=${BAND:-0.03}
tachyon=build/release/src/cli/tachyon
data=../shared/data
train=$data/similarity/stsb/sts-train.csv
dev=$data/similarity/stsb/sts-dev.csv
if [[ ! -f $dev ]]; then
  echo "semantic_guards: $dev is absent (../shared/data): nothing to measure" >&2
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cut -f6 "$train" >"$work/corpus.txt"
cut -f7 "$train" >>"$work/corpus.txt"

echo "tachyon $(git rev-parse --short HEAD); STS-B dev; threshold $THRESHOLD, band $BAND"
echo
echo "| embedder | guards | hits | precision | recall | false-hit rate |"
echo "|---|---|---|---|---|---|"
for spec in hash "words:$data/embeddings/glove-100d/glove.6B.100d.top20k.f32"; do
  corpus=()
  name=$spec
  if [[ $spec == words:* ]]; then
    corpus=(--corpus "$work/corpus.txt")
    name="words (GloVe 100d, SIF fit on train)"
  fi
  # all: the guards on every hit and in the band; band: in the band only; off: the cosine alone.
  for mode in "all on $BAND" "band off $BAND" "off off 0"; do
    read -r label guards band <<<"$mode"
    d=$("$tachyon" cache eval --pairs "$dev" --embedder "$spec" "${corpus[@]}" --threshold "$THRESHOLD" \
        --guards "$guards" --band "$band" --json)
    python3 - "$name" "$label" "$d" <<'PY'
import json, sys
name, label, d = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
hits = d.get("hits", "")
print(f"| {name} | {label} | {hits} | {d['precision']:.3f} | {d['recall']:.3f} | {d['false_hit_rate']:.4f} |")
PY
  done
done
