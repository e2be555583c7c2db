#!/usr/bin/env bash
# The seed's claim, measured: FastChat's identity conversations (FAQ-like, full
# of reworded "who are you" questions) replayed through `tachyon serve --config`
# in front of a local engine, with the caches off, the exact cache only, and the
# exact + semantic caches (the hash embedder, two settings: the issue's example
# threshold with the guards in the band, and the STS-B-calibrated threshold with
# the verifier). Each mode starts with an empty cache; the hit rate is what the
# replay itself repeats. Reports hit rate, TTFT p50/p95, E2E p50/p95 and
# throughput. Traffic: open loop at RATE requests/s (Poisson, the same seed in
# every mode: the same arrivals), so what the caches take off the engine also
# shortens the misses' queue; RATE=0 makes it a closed loop of C at a time
# (which keeps the engine saturated: the misses then wait as long as ever, and
# the caches show in throughput instead).
#
#   benchmarks/semantic_cache_replay.sh      (after a release build; needs ../shared)
#   N=200 RATE=2 O=16 SHAPE=smol-135m benchmarks/semantic_cache_replay.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=build/release/src/cli/tachyon
data=../shared/data/prompts/fastchat_identity/dummy_conversation.json
vocab=../shared/fixtures/tokenizer/ggml-vocab-llama-bpe.gguf
[ -f "$data" ] || { echo "needs $data (../shared)"; exit 1; }
N=${N:-200} C=${C:-4} RATE=${RATE:-2} O=${O:-16} SHAPE=${SHAPE:-smol-135m}
traffic=(--concurrency "$C")
[ "$RATE" != 0 ] && traffic=(--request-rate "$RATE" --seed 1)
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT

"$tachyon" model gen --shape "$SHAPE" --type q8_0 --vocab "$vocab" --out "$work/model.gguf" >/dev/null

run_mode() {  # name route-cache-lines
  local name=$1 cache=$2
  cat >"$work/$name.toml" <<TOML
[[backend]]
name = "engine"
kind = "local"
model = "$work/model.gguf"
chat_template = "chatml"
threads = 2
[[route]]
model = "chat"
backends = ["engine"]
$cache
[cache]
store = "memory"
TOML
  start "gw_$name" -- "$tachyon" serve --config "$work/$name.toml" --port 0 --no-access-log
  "$tachyon" bench --url "$url" --no-progress --endpoint chat --model chat --workload prompts --prompts "$data" \
    --num-requests "$N" "${traffic[@]}" --output-len "$O" --ignore-eos --out "$work/$name.json" \
    >/dev/null 2>"$work/bench.err" || { cat "$work/bench.err"; exit 1; }
  curl -s "$url/metrics" >"$work/$name.metrics"
  stop_servers
}

run_mode off ""
run_mode exact "exact_cache = true"
run_mode semantic_example 'exact_cache = true
semantic_cache = { embedder = "hash", threshold = 0.93 }'
run_mode semantic_calibrated 'exact_cache = true
semantic_cache = { embedder = "hash", threshold = 0.6386, verifier = 0.9 }'

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; tachyon $(git rev-parse --short HEAD)"
echo "replay: $N requests of $data (one per human turn, with the conversation so far), ${traffic[*]},"
echo "        $O output tokens (ignore_eos), local $SHAPE Q8_0 (random weights)"
echo
python3 - "$work" <<'PY'
import json, re, sys
work = sys.argv[1]
print("| caches | hit rate (exact / semantic) | TTFT p50 (ms) | TTFT p95 (ms) | E2E p50 (ms) | E2E p95 (ms) | requests/s |")
print("|---|---|---|---|---|---|---|")
for mode, label in [("off", "off"), ("exact", "exact"), ("semantic_example", "exact + semantic (0.93, guards in band)"),
                    ("semantic_calibrated", "exact + semantic (0.6386 + verifier 0.9)")]:
    s = json.load(open(f"{work}/{mode}.json"))["summary"]
    metrics = open(f"{work}/{mode}.metrics").read()
    def hits(kind):
        found = re.findall(r'tachyon:cache_lookups_total\{kind="%s",result="hit",route="[^"]*"\} (\d+)' % kind, metrics)
        return sum(int(n) for n in found)
    n = s["num_ok"]
    e, sem = hits("exact"), hits("semantic")
    total = max(1, n)
    print(f"| {label} | {(e + sem) / total:.1%} ({e} / {sem}) | {s['ttft']['p50_ms']:.1f} | {s['ttft']['p95_ms']:.1f} | "
          f"{s['e2e']['p50_ms']:.1f} | {s['e2e']['p95_ms']:.1f} | {s['request_throughput']:.2f} |")
PY
