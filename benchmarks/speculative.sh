#!/usr/bin/env bash
# Speculative decoding end to end: `tachyon serve` with --speculative off, ngram
# and draft:FILE on the same target and the same requests (greedy, ignore_eos, so
# every mode emits the same tokens), at several concurrencies, measured with
# `tachyon bench`; acceptance and tokens per target forward from /metrics.
# Modes alternate within each pair (off ngram draft, off ngram draft, ...);
# figures are the median of the pairs.
#
#   benchmarks/speculative.sh
#   WORKLOADS="code stories" CONCURRENCY="1 4 16" ROUNDS=4 OUT=96 PAIRS=2 K=4 THREADS=2 benchmarks/speculative.sh
#
# Workloads:
#   code     "repeat this function" over ../shared/data/prompts/humaneval (the
#            function, then its header again): target smol-135m Q8_0 (random
#            weights, GPT-2 vocabulary), draft the tiny shape with the same vocabulary.
#   stories  stories260K (trained) continuing its own TinyStories-style text cut at
#            8 points per story; draft: stories260K quantized to Q8_0.
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=build/release/src/cli/tachyon
[ -x "$tachyon" ] || { echo "missing $tachyon: build the release preset first" >&2; exit 1; }
shared=${TACHYON_SHARED_DIR:-../shared}
models=${MODEL_DIR:-/tmp/tachyon-bench-models}
WORKLOADS=${WORKLOADS:-"code stories"} CONCURRENCY=${CONCURRENCY:-"1 4 16"} ROUNDS=${ROUNDS:-4}
OUT=${OUT:-96} PAIRS=${PAIRS:-2} K=${K:-4} THREADS=${THREADS:-2}
mkdir -p "$models"
source benchmarks/bench_models.sh
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT

prompts_code() {  # out.jsonl
  python3 - "$shared/data/prompts/humaneval/HumanEval.jsonl.gz" "$1" <<'PY'
import gzip, json, sys
with gzip.open(sys.argv[1], "rt") as f, open(sys.argv[2], "w") as out:
    for line in f:
        t = json.loads(line)
        code = t["prompt"] + t["canonical_solution"]
        header = t["prompt"].split('"""')[0]
        text = "Repeat this function exactly.\n\n" + code + "\n\nThe same function:\n\n" + header
        out.write(json.dumps({"prompt": text}) + "\n")
PY
}
prompts_stories() {  # out.jsonl
  python3 - "$shared/fixtures/models/stories260K.reference.json" "$1" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))["cases"]
with open(sys.argv[2], "w") as out:
    for c in cases:
        text = c["stdout_text"]
        for k in range(1, 9):  # the story cut at 8 points
            cut = text[: len(text) * k // 10]
            out.write(json.dumps({"prompt": cut}) + "\n")
PY
}

# metric NAME: the engine counter's value on the running server.
metric() {
  curl -sf "$url/metrics" | awk -v m="$1{" 'index($0, m) == 1 { print $2; exit }'
}

run() {  # workload target draft mode c pair
  local spec=off len=1024
  [ "$1" = stories ] && len=512  # stories260K's context
  [ "$4" = ngram ] && spec=ngram
  [ "$4" = draft ] && spec="draft:$3"
  start serve -- "$tachyon" serve --model "$2" --port 0 --threads "$THREADS" --max-num-seqs 16 \
    --max-model-len "$len" --speculative "$spec" --num-speculative-tokens "$K" --no-access-log
  "$tachyon" bench --url "$url" --workload prompts --prompts "$work/$1.jsonl" --output-len "$OUT" --ignore-eos \
    --concurrency "$5" --num-requests $(($5 * ROUNDS)) --no-progress --out "$work/$1-$4-c$5-$6.json" \
    >/dev/null 2>"$work/bench.err" || { cat "$work/bench.err"; exit 1; }
  echo "$(metric tachyon:spec_decode_num_drafts_total) $(metric tachyon:spec_decode_num_draft_tokens_total)" \
       "$(metric tachyon:spec_decode_num_accepted_tokens_total) $(metric tachyon:spec_decode_num_emitted_tokens_total)" \
    >"$work/$1-$4-c$5-$6.spec"
  stop_servers
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $THREADS threads; tachyon $(git rev-parse --short HEAD);" \
     "greedy, $OUT tokens out (ignore_eos), $ROUNDS requests per stream, k <= $K, median of $PAIRS pairs"
for w in $WORKLOADS; do
  case $w in
    code)
      target=$(bench_model smol-135m q8_0)
      draft=$models/tiny-gpt2-q8_0.gguf
      [ -f "$draft" ] || "$tachyon" model gen --shape tiny --type q8_0 \
        --vocab "$shared/fixtures/tokenizer/ggml-vocab-gpt-2.gguf" --out "$draft" >/dev/null
      prompts_code "$work/code.jsonl" ;;
    stories)
      target=$shared/fixtures/models/stories260K.gguf
      draft=$models/stories260K-q8_0.gguf
      [ -f "$draft" ] || "$tachyon" model quantize "$target" "$draft" --type q8_0 >/dev/null
      prompts_stories "$work/stories.jsonl" ;;
    *) echo "unknown workload $w" >&2; exit 2 ;;
  esac
  for c in $CONCURRENCY; do
    for pair in $(seq "$PAIRS"); do
      for mode in off ngram draft; do run "$w" "$target" "$draft" "$mode" "$c" "$pair"; done
    done
  done
  echo
  echo "### $w: $(basename "$target"), draft $(basename "$draft")"
  python3 - "$work" "$w" "$PAIRS" $CONCURRENCY <<'PY'
import json, statistics, sys
work, w, pairs, cs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
print("| streams | mode | output tok/s | x off | E2E p50 (ms) | E2E p95 (ms) | accepted | tokens per forward |")
print("|---|---|---|---|---|---|---|---|")
for c in cs:
    def med(mode, f):
        return statistics.median(f(mode, p) for p in range(1, pairs + 1))
    summary = lambda mode, p: json.load(open(f"{work}/{w}-{mode}-c{c}-{p}.json"))["summary"]
    def spec(mode, p):
        vals = [float(x or 0) for x in open(f"{work}/{w}-{mode}-c{c}-{p}.spec").read().split()]
        return vals + [0.0] * (4 - len(vals))
    off = med("off", lambda m, p: summary(m, p)["output_token_throughput"])
    for mode in ("off", "ngram", "draft"):
        tput = med(mode, lambda m, p: summary(m, p)["output_token_throughput"])
        p50 = med(mode, lambda m, p: summary(m, p)["e2e"]["p50_ms"])
        p95 = med(mode, lambda m, p: summary(m, p)["e2e"]["p95_ms"])
        drafts, proposed, accepted, emitted = (sum(spec(mode, p)[i] for p in range(1, pairs + 1)) for i in range(4))
        acc = f"{100 * accepted / proposed:.0f}% of {proposed:.0f}" if proposed else "-"
        tpf = f"{emitted / drafts:.2f}" if drafts else "-"
        print(f"| {c} | {mode} | {tput:.1f} | {tput / off:.2f}x | {p50:.0f} | {p95:.0f} | {acc} | {tpf} |")
PY
done
