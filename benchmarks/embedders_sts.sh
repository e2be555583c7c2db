#!/usr/bin/env bash
# Every embedder kind on STS Benchmark dev (../shared/data/similarity/stsb):
# Spearman of cosine vs the human score over the 1,500 pairs, and embeddings/s
# for one short sentence embedded on its own, again and again (`tachyon embed --sts`).
#
#   hash    character n-gram hashing, no files
#   words   GloVe 6B 100d (top 20k words) with SIF weights and the common component
#           removed, both fit on the STS-B train sentences (never on dev)
#   local   a random-weight bge-small (Q8_0) GGUF: the forward pass is real, the
#           weights are not, so its Spearman only says what random features keep
#           (no trained model can be downloaded here)
#   remote  the same model behind `tachyon serve --embedding-model`, through
#           /v1/embeddings on 127.0.0.1 (HTTP and JSON added)
#
#   benchmarks/embedders_sts.sh            (after a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=build/release/src/cli/tachyon
data=../shared/data
dev=$data/similarity/stsb/sts-dev.csv
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT

cut -f6 "$data/similarity/stsb/sts-train.csv" >"$work/train.txt"
cut -f7 "$data/similarity/stsb/sts-train.csv" >>"$work/train.txt"
"$tachyon" model gen --shape bge-small --type q8_0 --vocab ../shared/fixtures/tokenizer/ggml-vocab-bert-bge.gguf \
  --out "$work/bge-small-q8_0.gguf" >/dev/null
start embedder -- "$tachyon" serve --port 0 --embedding-model "$work/bge-small-q8_0.gguf" --threads 2 --no-access-log
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; tachyon $(git rev-parse --short HEAD)"
echo
echo "| embedder | Spearman (STS-B dev) | one short sentence (embeddings/s) |"
echo "|---|---|---|"
run() {  # label flags...
  local label=$1
  shift
  "$tachyon" embed "$@" --sts "$dev" 2>/dev/null |
    python3 -c "import json,sys; r=json.load(sys.stdin); print(f\"| $label | {r['spearman']:.4f} | {r['one_sentence_per_second']:,.0f} |\")"
}
run "hash (1024 slots, 3-5-grams)" --kind hash
run "words (GloVe 100d, SIF + common component)" --kind words \
  --vectors "$data/embeddings/glove-100d/glove.6B.100d.top20k.f32" --corpus "$work/train.txt"
run "words (GloVe 100d, plain average)" --kind words \
  --vectors "$data/embeddings/glove-100d/glove.6B.100d.top20k.f32" --sif-a 1e9 --remove-components 0
run "local (random-weight bge-small Q8_0, 2 threads)" --model "$work/bge-small-q8_0.gguf" --threads 2 --speed-runs 100
run "remote (the same model via /v1/embeddings)" --kind remote --url "$url/v1" --model bge-small-q8_0 --speed-runs 100
