#!/usr/bin/env bash
# The shared-prefix serving workload against `tachyon serve` and llama.cpp's
# `llama-server` on the same GGUF file, in one run (A B A B, median of the pairs):
# N streaming requests at concurrency C, each one of K prefixes of P tokens plus a
# unique suffix of S tokens, O output tokens (ignore_eos), prompts sent as token
# ids. Prints TTFT p50/p95, E2E p95 and output tokens/s of each, and the ratios.
# Builds nothing: point LLAMA_SERVER at a llama-server binary (llama.cpp fetched
# and built outside this repository).
#
# WORKLOAD=conversation runs the chat workload instead (issue 41, goal 6): the
# MT-Bench questions of ../shared as two-turn conversations through
# /v1/chat/completions, each turn's max_tokens drawn from OUT_LEN (default
# lognormal:176:0.5, a mean of 200), ignore_eos, N requests at concurrency C;
# llama-server gets NP slots (default C) of LEN tokens each (default 2048, as
# --max-model-len for tachyon). Either workload: MAX_SEQS is tachyon's
# --max-num-seqs (default 16).
#
#   LLAMA_SERVER=~/.cache/llama.cpp/build/bin/llama-server benchmarks/serve_compare.sh [MODEL.gguf]
#   N=16 C=4 K=1 P=1000 S=50 O=64 PAIRS=2 THREADS=2 LLAMA_SERVER=... benchmarks/serve_compare.sh
#   WORKLOAD=conversation N=128 C=64 NP=16 MAX_SEQS=64 LLAMA_SERVER=... benchmarks/serve_compare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${LLAMA_SERVER:?set LLAMA_SERVER to a llama-server binary}"
tachyon=build/release/src/cli/tachyon
[ -x "$tachyon" ] || { echo "missing $tachyon: build the release preset first" >&2; exit 1; }
shared=${TACHYON_SHARED_DIR:-../shared}
models=${MODEL_DIR:-/tmp/tachyon-bench-models}
N=${N:-16} C=${C:-4} K=${K:-1} P=${P:-1000} S=${S:-50} O=${O:-64} PAIRS=${PAIRS:-2} THREADS=${THREADS:-2}
WORKLOAD=${WORKLOAD:-shared-prefix} OUT_LEN=${OUT_LEN:-lognormal:176:0.5} NP=${NP:-$C} MAX_SEQS=${MAX_SEQS:-16}
prompts=$shared/data/prompts/mt_bench/question.jsonl
mkdir -p "$models"
source benchmarks/bench_models.sh
model=${1:-$(bench_model smol-135m q8_0)}
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT
len=$((P + S + O + 16))
if [ "$WORKLOAD" = conversation ]; then
  [ -f "$prompts" ] || { echo "no MT-Bench questions at $prompts (../shared absent?)" >&2; exit 1; }
  LEN=${LEN:-2048}
  len=$LEN
fi

bench() {  # url out
  if [ "$WORKLOAD" = conversation ]; then
    "$tachyon" bench --url "$1" --workload conversation --prompts "$prompts" --output-len "$OUT_LEN" \
      --num-requests "$N" --concurrency "$C" --ignore-eos --no-progress --out "$2" >/dev/null 2>"$work/bench.err" ||
      { cat "$work/bench.err"; exit 1; }
    return
  fi
  "$tachyon" bench --url "$1" --workload shared-prefix --num-prefixes "$K" --prefix-len "$P" --input-len "$S" \
    --output-len "$O" --num-requests "$N" --concurrency "$C" --ignore-eos --tokenizer "$model" --prompt-ids \
    --no-progress --out "$2" >/dev/null 2>"$work/bench.err" || { cat "$work/bench.err"; exit 1; }
}
# Each server runs alone (the other stopped): both get the two cores.
run_tachyon() {
  start tachyon -- "$tachyon" serve --model "$model" --port 0 --threads "$THREADS" --max-model-len "$len" \
    --max-num-seqs "$MAX_SEQS" --max-num-batched-tokens 512 --no-access-log
  bench "$url" "$1"
  stop_servers
}
run_llama() {
  local port=$((19000 + $$ % 1000))
  "$LLAMA_SERVER" -m "$model" --port "$port" -t "$THREADS" -np "$NP" -c $((len * NP)) --no-webui \
    >"$work/llama.out" 2>"$work/llama.err" &
  pids+=($!)
  for _ in $(seq 600); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.1; done
  bench "http://127.0.0.1:$port" "$1"
  stop_servers
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $THREADS threads; tachyon $(git rev-parse --short HEAD);" \
     "$LLAMA_SERVER; $(basename "$model"): $N requests at concurrency $C," \
     "$([ "$WORKLOAD" = conversation ] && echo "MT-Bench conversations, max_tokens $OUT_LEN, llama-server -np $NP" ||
       echo "$K prefix(es) of $P tokens + $S, $O out")"
for pair in $(seq "$PAIRS"); do  # (not $p: stop_servers loops with it)
  run_tachyon "$work/t$pair.json"
  run_llama "$work/l$pair.json"
done
python3 - "$work" "$PAIRS" <<'PY'
import collections, json, statistics, sys
work, pairs = sys.argv[1], int(sys.argv[2])
s = lambda path: json.load(open(path))["summary"]
rows = [(s(f"{work}/t{p}.json"), s(f"{work}/l{p}.json")) for p in range(1, pairs + 1)]
med = lambda f: statistics.median(f(t, l) for t, l in rows)
print()
print("| server | ok | failed | TTFT p50 (ms) | TTFT p95 (ms) | E2E p95 (ms) | output tok/s |")
print("|---|---|---|---|---|---|---|")
for name, i in (("tachyon", 0), ("llama-server", 1)):
    pick = lambda t, l: (t, l)[i]
    print(f"| {name} | {med(lambda t, l: pick(t, l)['num_ok'])} | {med(lambda t, l: pick(t, l)['num_requests'] - pick(t, l)['num_ok'])} | "
          f"{med(lambda t, l: pick(t, l)['ttft']['p50_ms']):.0f} | "
          f"{med(lambda t, l: pick(t, l)['ttft']['p95_ms']):.0f} | {med(lambda t, l: pick(t, l)['e2e']['p95_ms']):.0f} | "
          f"{med(lambda t, l: pick(t, l)['output_token_throughput']):.1f} |")
for name, prefix in (("tachyon", "t"), ("llama-server", "l")):
    errors = collections.Counter(r["error"] for p in range(1, pairs + 1)
                                 for r in json.load(open(f"{work}/{prefix}{p}.json"))["records"] if not r["ok"])
    for error, count in errors.most_common(3):
        print(f"{name}: {count} failed: {error}")
print(f"TTFT p95 tachyon / llama-server: {med(lambda t, l: t['ttft']['p95_ms'] / l['ttft']['p95_ms']):.2f}x "
      f"(median of the pairs); output tok/s: {med(lambda t, l: t['output_token_throughput'] / l['output_token_throughput']):.2f}x")
PY
