#!/usr/bin/env bash
# The trimming lever, measured on a long system prompt assembled from real
# instruction text (benchmarks/prompt_audit/assemble_system_prompt.py:
# self-instruct and MT-Bench, with duplicates, near duplicates, contradictions,
# a repeated example and stray whitespace put in): `tachyon prompt audit` on it
# with the engine's tokenizer, then TTFT through `tachyon serve` of requests
# carrying it, on a route without and a route with the trimmer (whitespace +
# duplicates), A B A B. The engine: qwen2-0.5b shape (its 32k context holds the
# prompt; smol-135m's 2,048 does not), Q8_0, random weights, Llama-3 BPE
# vocabulary, prefix caching off so that every request prefills the whole
# prompt (what a first request, or one after the prompt changed, pays; with
# prefix caching on the repeats would share the prompt's blocks).
#
#   benchmarks/prompt_audit.sh        (after a release build; needs ../shared)
#   N=3 benchmarks/prompt_audit.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=build/release/src/cli/tachyon
vocab=../shared/fixtures/tokenizer/ggml-vocab-llama-bpe.gguf
[ -f "$vocab" ] || { echo "needs $vocab (../shared)"; exit 1; }
N=${N:-3} O=${O:-8} SHAPE=${SHAPE:-qwen2-0.5b}
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT

python3 benchmarks/prompt_audit/assemble_system_prompt.py "$work/system.txt"
"$tachyon" model gen --shape "$SHAPE" --type q8_0 --vocab "$vocab" --out "$work/model.gguf" >/dev/null
"$tachyon" prompt audit "$work/system.txt" --model "$work/model.gguf" --threads 2 --write "$work/trimmed.txt" \
  >"$work/audit.txt"
"$tachyon" prompt audit "$work/system.txt" --model "$vocab" --json >"$work/audit.json" 2>/dev/null

python3 - "$work" "$N" <<'PY'
import json, sys
work, n = sys.argv[1], int(sys.argv[2])
system = open(f"{work}/system.txt").read()
questions = ["Which of the tasks above can you do for me?", "Summarize your rules in one line.",
             "What should I ask you first?", "Can you give me an example of what you do?",
             "Who wrote these instructions?", "What is your role?"]
with open(f"{work}/requests.jsonl", "w") as f:
    for q in questions[:n]:
        f.write(json.dumps({"messages": [{"role": "system", "content": system}, {"role": "user", "content": q}]}) + "\n")
PY

cat >"$work/gateway.toml" <<TOML
[[backend]]
name = "engine"
kind = "local"
model = "$work/model.gguf"
chat_template = "chatml"
threads = 2
prefix_caching = false
[[route]]
model = "plain"
backends = ["engine"]
[[route]]
model = "trimmed"
backends = ["engine"]
trim = { whitespace = true, duplicates = true }
TOML
start gw -- "$tachyon" serve --config "$work/gateway.toml" --port 0 --no-access-log
bench() {  # route out
  "$tachyon" bench --url "$url" --no-progress --endpoint chat --model "$1" --workload prompts \
    --prompts "$work/requests.jsonl" --concurrency 1 --output-len "$O" --ignore-eos --out "$2" \
    >/dev/null 2>"$work/bench.err" || { cat "$work/bench.err"; exit 1; }
}
for rep in 1 2; do
  bench plain "$work/plain_$rep.json"
  bench trimmed "$work/trimmed_$rep.json"
done
curl -s "$url/metrics" | grep -E '^tachyon:trimmed_tokens_total' >"$work/trimmed_metrics.txt"
stop_servers

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; tachyon $(git rev-parse --short HEAD)"
echo "engine: $SHAPE shape, Q8_0, random weights, Llama-3 BPE vocab, 2 threads, prefix caching off; $N requests"
echo "        per pass at concurrency 1, $O output tokens"
echo
sed -n '/^tokens:/p;/^exact duplicates/p;/^near duplicates/p;/^contradictions/p;/^repeated examples/p;/^removable/p;/^prefill saved/p' "$work/audit.txt"
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
a = json.load(open(f"{work}/audit.json"))
print(f"audit --json: tokens {a['tokens']}, removable_tokens {a['removable_tokens']}, "
      f"{len(a['duplicates'])} duplicates, {len(a['near_duplicates'])} near duplicates, "
      f"{len(a['contradictions'])} contradictions, {len(a['repeated_examples'])} repeated examples")
print()
print("| route | pass | TTFT p50 (ms) | TTFT p95 (ms) | E2E p50 (ms) | prompt tokens (mean) |")
print("|---|---|---|---|---|---|")
for rep in (1, 2):
    for route in ("plain", "trimmed"):
        d = json.load(open(f"{work}/{route}_{rep}.json"))
        s = d["summary"]
        print(f"| {route} | {rep} | {s['ttft']['p50_ms']:.0f} | {s['ttft']['p95_ms']:.0f} | {s['e2e']['p50_ms']:.0f} | "
              f"{s['total_prompt_tokens'] / max(1, s['num_ok']):.0f} |")
print()
print(open(f"{work}/trimmed_metrics.txt").read().rstrip())
PY
