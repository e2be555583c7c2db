#!/usr/bin/env bash
# Semantic-cache thresholds per embedder kind: calibrated on STS Benchmark train
# (a pair is a paraphrase at score >= 4) at target precision P, then held out:
# precision, recall and false-hit rate on STS-B dev, and the hit rate on
# GPTCache's 999 paraphrase pairs (all positives: hit rate = recall).
# Each embedder four ways: similarity alone, with the guards on every hit, with
# the second-stage verifier (calibrate chooses its minimum score too), and both.
#
#   benchmarks/cache_calibration.sh            (after a release build; P=0.95 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
P=${P:-0.95}
tachyon=build/release/src/cli/tachyon
data=../shared/data
train=$data/similarity/stsb/sts-train.csv
dev=$data/similarity/stsb/sts-dev.csv
gptcache=$data/similarity/gptcache/mock_data.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cut -f6 "$train" >"$work/corpus.txt"
cut -f7 "$train" >>"$work/corpus.txt"

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; tachyon $(git rev-parse --short HEAD); target precision $P"
echo
echo "| embedder | verifier / guards | threshold (train) | 95% interval | train precision / recall | dev precision / recall / false-hit rate | GPTCache hit rate |"
echo "|---|---|---|---|---|---|---|"
for spec in hash "words:$data/embeddings/glove-100d/glove.6B.100d.top20k.f32"; do
for mode in "off off" "off on" "on off" "on on"; do
  read -r verifier guards <<<"$mode"
  corpus=()
  [[ $spec == words:* ]] && corpus=(--corpus "$work/corpus.txt")
  name=$spec
  [[ $spec == words:* ]] && name="words (GloVe 100d, SIF fit on train)"
  c=$("$tachyon" cache calibrate --pairs "$train" --embedder "$spec" "${corpus[@]}" --target-precision "$P" --json \
      --verifier "$verifier" --guards "$guards" --bootstrap 300 2>"$work/err") || {
    echo "| $name | $verifier / $guards | not reached: $(sed -n 's/.*(the best is \(.*\))$/best precision \1/p' "$work/err") | | | | |"
    continue
  }
  read -r t v <<<"$(python3 -c "import json,sys; c=json.loads(sys.argv[1]); print(c['threshold'], c['verifier'] or 'off')" "$c")"
  d=$("$tachyon" cache eval --pairs "$dev" --embedder "$spec" "${corpus[@]}" --threshold "$t" --verifier "$v" --guards "$guards" --json)
  g=$("$tachyon" cache eval --pairs "$gptcache" --embedder "$spec" "${corpus[@]}" --threshold "$t" --verifier "$v" --guards "$guards" --json)
  python3 - "$spec" "$c" "$d" "$g" "$guards" <<'PY'
import json, sys
spec, c, d, g = sys.argv[1], *(json.loads(x) for x in sys.argv[2:5])
guards = sys.argv[5]
name = spec if not spec.startswith("words:") else "words (GloVe 100d, SIF fit on train)"
lo, hi = c["threshold_interval"]
v = f"{c['verifier']:.2f}" if c["verifier"] else "off"
print(f"| {name} | {v} / {guards} | {c['threshold']:.4f} | {lo:.4f} .. {hi:.4f} | {c['precision']:.3f} / {c['recall']:.3f} | "
      f"{d['precision']:.3f} / {d['recall']:.3f} / {d['false_hit_rate']:.4f} | {g['recall']:.3f} |")
PY
done
done
