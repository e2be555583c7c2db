#!/usr/bin/env bash
# The routing lever, measured: a gateway with two local engines (smol-135m and
# llama-1b shapes, Q8_0, random weights, the same Llama-3 BPE vocabulary) and a
# classify route that sends classification and extraction to the small one.
# Prompts: MT-Bench first turns (80, 8 categories) and the self-instruct seed
# tasks marked is_classification (26), from ../shared/data/prompts.
#
# The route: a rule (a leading classify / categorize / extract / identify /
# label / detect verb) first, then a classifier trained here on those 106
# prompts (labels: MT-Bench's categories plus "classification"), whose
# "extraction" and "classification" go to the small class; the rest, and
# anything under min_probability, to the large one. Compared with a route that
# sends everything to the large engine: TTFT p50/p95 and E2E of the prompts the
# router sends small (the 36 extraction + classification prompts), and of the
# whole mix; then the router's own added latency (router_decision).
#
#   benchmarks/router_classify.sh          (after a release build; needs ../shared)
#   O=16 C=1 benchmarks/router_classify.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=build/release/src/cli/tachyon
decision=build/release/benchmarks/router_decision
prompts=../shared/data/prompts
vocab=../shared/fixtures/tokenizer/ggml-vocab-llama-bpe.gguf
[ -d "$prompts" ] || { echo "needs $prompts (../shared)"; exit 1; }
O=${O:-16} C=${C:-1} MIX=${MIX:-40}
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT

"$tachyon" model gen --shape smol-135m --type q8_0 --vocab "$vocab" --out "$work/small.gguf" >/dev/null
"$tachyon" model gen --shape llama-1b --type q8_0 --vocab "$vocab" --out "$work/large.gguf" >/dev/null

python3 - "$prompts" "$work" "$MIX" <<'PY'
import json, random, sys
src, work, mix_n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = []
for line in open(f"{src}/mt_bench/question.jsonl"):
    q = json.loads(line)
    rows.append({"text": q["turns"][0], "label": q["category"]})
for line in open(f"{src}/self_instruct/seed_tasks.jsonl"):
    t = json.loads(line)
    if t["is_classification"]:
        inp = t["instances"][0]["input"]
        rows.append({"text": t["instruction"] + ("\n" + inp if inp else ""), "label": "classification"})
with open(f"{work}/examples.jsonl", "w") as f:
    for r in rows: f.write(json.dumps(r) + "\n")
small = [r for r in rows if r["label"] in ("extraction", "classification")]
with open(f"{work}/routed.jsonl", "w") as f:
    for r in small: f.write(json.dumps({"text": r["text"]}) + "\n")
mix = random.Random(3).sample(rows, mix_n)
with open(f"{work}/mix.jsonl", "w") as f:
    for r in mix: f.write(json.dumps({"text": r["text"]}) + "\n")
print(f"{len(rows)} prompts, {len(small)} extraction/classification; mix of {mix_n} has "
      f"{sum(r['label'] in ('extraction', 'classification') for r in mix)} of them")
PY

"$tachyon" router train --examples "$work/examples.jsonl" --out "$work/router.bin" --json >"$work/train.json"

cat >"$work/gateway.toml" <<TOML
[[backend]]
name = "smol"
kind = "local"
model = "$work/small.gguf"
chat_template = "llama3"
threads = 2
[[backend]]
name = "llama"
kind = "local"
model = "$work/large.gguf"
chat_template = "llama3"
threads = 2

[[route]]
model = "large"
backends = ["llama"]

[[route]]
model = "auto"
policy = "classify"
default = "large"
classifier = { model = "$work/router.bin", min_probability = 0.4, labels = { extraction = "small", classification = "small" } }
[[route.class]]
name = "small"
backends = ["smol"]
fallback = ["llama"]
[[route.class]]
name = "large"
backends = ["llama"]
[[route.rule]]
name = "task-verb"
class = "small"
user_regex = "(?i)^\\\\s*(classify|categorize|extract|identify|label|detect)\\\\b"
TOML

start gw -- "$tachyon" serve --config "$work/gateway.toml" --port 0 --no-access-log
bench() {  # route prompts out
  "$tachyon" bench --url "$url" --no-progress --endpoint chat --model "$1" --workload prompts --prompts "$2" \
    --concurrency "$C" --output-len "$O" --ignore-eos --out "$3" >/dev/null 2>"$work/bench.err" ||
    { cat "$work/bench.err"; exit 1; }
}
# A warm-up pass each (page faults of two models' weights), then the measured A B A B.
bench large "$work/routed.jsonl" "$work/warm1.json"
bench auto "$work/routed.jsonl" "$work/warm2.json"
for rep in 1 2; do
  bench large "$work/routed.jsonl" "$work/routed_large_$rep.json"
  bench auto "$work/routed.jsonl" "$work/routed_auto_$rep.json"
done
bench large "$work/mix.jsonl" "$work/mix_large.json"
bench auto "$work/mix.jsonl" "$work/mix_auto.json"
curl -s "$url/metrics" | grep -E '^tachyon:router_decisions_total' >"$work/decisions.txt"
stop_servers

"$decision" --config "$work/gateway.toml" --prompts "$work/mix.jsonl" >"$work/decision.txt"

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; tachyon $(git rev-parse --short HEAD)"
echo "engines: smol-135m and llama-1b shapes, Q8_0, random weights, Llama-3 BPE vocab, 2 threads each;"
echo "         $O output tokens (ignore_eos), concurrency $C"
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
t = json.load(open(f"{work}/train.json"))["cross_validation"]
print(f"classifier (hash embedder, 5-fold CV on the 106 prompts, 9 labels): accuracy {t['accuracy']:.3f}, "
      f"majority baseline {t['majority_baseline']:.3f}")
print()
print("| prompts | route | TTFT p50 (ms) | TTFT p95 (ms) | E2E p50 (ms) | E2E p95 (ms) |")
print("|---|---|---|---|---|---|")
def row(name, label, route):
    s = json.load(open(f"{work}/{name}.json"))["summary"]
    print(f"| {label} | {route} | {s['ttft']['p50_ms']:.1f} | {s['ttft']['p95_ms']:.1f} | "
          f"{s['e2e']['p50_ms']:.1f} | {s['e2e']['p95_ms']:.1f} |")
    return s
for rep in (1, 2):
    row(f"routed_large_{rep}", f"36 extraction + classification (pass {rep})", "large (everything to llama-1b)")
    row(f"routed_auto_{rep}", f"36 extraction + classification (pass {rep})", "auto (classify)")
row("mix_large", "mix (sampled)", "large")
row("mix_auto", "mix (sampled)", "auto")
print()
print("decisions through the server (both runs of the auto route):")
print(open(f"{work}/decisions.txt").read().rstrip())
print(open(f"{work}/decision.txt").read().rstrip())
PY
