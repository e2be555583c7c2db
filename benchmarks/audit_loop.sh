#!/usr/bin/env bash
# The capture -> audit -> replay loop on a real engine, measured: serves stories260K
# (../shared) with --capture, sends a realistic chat mix (MT-Bench, self-instruct and
# FastChat identity questions, popular ones asked again and again; a long shared system
# prompt, with a repeated instruction, on 60% of them; half streamed, half answered
# whole, from two clients at once), audits the capture, then replays it against the
# config without and with one lever (LEVER: route keys, default the exact cache), A B A B,
# and compares.
#   benchmarks/audit_loop.sh [build/release/src/cli/tachyon]   (REQUESTS=300 RATE=20 PAIRS=2 LEVER=...)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tachyon="${1:-$here/../build/release/src/cli/tachyon}"
shared="${SHARED:-$here/../../shared}"
requests="${REQUESTS:-300}"
rate="${RATE:-20}"
pairs="${PAIRS:-2}"
lever="${LEVER:-exact_cache = true}"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

config() {  # $1: file, $2: extra route keys
  cat > "$1" <<TOML
[[backend]]
name = "stories"
kind = "local"
model = "$shared/fixtures/models/stories260K.gguf"
chat_template = "llama2"
threads = 1

[[route]]
model = "chat"
backends = ["stories"]
$2

[cache]
store = "memory"

[server]
access_log = false
TOML
}
serve() {  # $1: config, then extra flags; sets url
  "$tachyon" serve --port 0 --config "$@" > "$work/out" 2> "$work/err" &
  pids+=($!)
  for _ in $(seq 100); do grep -q listening "$work/out" 2>/dev/null && break; sleep 0.1; done
  url="$(grep -o 'http://[0-9.:]*' "$work/out")"
}
stop() { kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'; }

config "$work/before.toml" ""
config "$work/after.toml" "$lever"
python3 - "$shared" "$requests" "$work" <<'PY'
import json, os, random, sys
shared, n, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random(1)
texts = []
for line in open(os.path.join(shared, "data/prompts/mt_bench/question.jsonl")):
    texts.append(json.loads(line)["turns"][0])
for line in open(os.path.join(shared, "data/prompts/self_instruct/user_oriented_instructions.jsonl")):
    texts.append(json.loads(line)["instruction"])
for conv in json.load(open(os.path.join(shared, "data/prompts/fastchat_identity/dummy_conversation.json"))):
    texts += [t["value"] for t in conv["conversations"] if t["from"] == "human"]
texts = sorted({t for t in texts if len(t) < 200})
rng.shuffle(texts)
system = ("You are a friendly story teller for small children.\n\n\n"
          "Use short sentences and simple words.\nAlways end the story with a happy ending.\n"
          "Never use scary words.\nAlways end the story with a happy ending.\n\n\n"
          "Keep every answer under fifty words.   ")
weights = [1.0 / (i + 1) for i in range(len(texts))]
for name in ("stream", "whole"):
    with open(f"{work}/{name}.jsonl", "w") as out:
        for _ in range(n // 2):
            user = rng.choices(texts, weights)[0]
            messages = ([{"role": "system", "content": system}] if rng.random() < 0.6 else []) + \
                       [{"role": "user", "content": user}]
            out.write(json.dumps({"messages": messages, "max_tokens": 24}) + "\n")
PY
lscpu | grep "Model name"

serve "$work/before.toml" --capture "$work/traffic.jsonl"
half_rate="$(python3 -c "print($rate / 2)")"
"$tachyon" bench --url "$url" --endpoint chat --model chat --workload prompts --prompts "$work/stream.jsonl" \
  --request-rate "$half_rate" --seed 1 > /dev/null &
client=$!
"$tachyon" bench --url "$url" --endpoint chat --model chat --workload prompts --prompts "$work/whole.jsonl" \
  --no-stream --request-rate "$half_rate" --seed 2 > /dev/null
wait "$client"
stop
echo "captured $(wc -l < "$work/traffic.jsonl") requests"
"$tachyon" audit "$work/traffic.jsonl" --config "$work/before.toml" --json > "$work/audit.json"
python3 - "$work/audit.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"audit of {r['requests']} requests: TTFT p95 {r['ttft_p95_ms']} ms, E2E p95 {r['e2e_p95_ms']} ms; ranking {r['ranking']}")
for l in r["levers"]:
    keys = {k: v for k, v in l.items() if k.endswith("_share") or k.endswith("_rate")}
    print(f"  {l['step']}. {l['lever']}: {keys}; predicted TTFT p95 {l['predicted_ttft_p95_ms']} ms "
          f"(gain {l['expected_ttft_p95_gain_ms']} ms); config: {l['config']}")
PY

for i in $(seq "$pairs"); do
  for side in before after; do
    serve "$work/$side.toml"
    "$tachyon" bench --url "$url" --workload replay --traffic "$work/traffic.jsonl" --out "$work/$side-$i.json" > /dev/null
    stop
  done
done
python3 - "$work" "$pairs" <<'PY'
import json, sys, statistics
work, pairs = sys.argv[1], int(sys.argv[2])
def p95(run, key):
    v = sorted(x for x in (rec.get(key) for rec in run["records"] if rec["ok"]) if x is not None)
    return v[int(0.95 * (len(v) - 1))] * 1e3 if v else float("nan")
def ttft(rec):
    return rec["chunks_s"][0] if rec.get("chunks_s") else rec["e2e_s"]
rows = []
for i in range(1, pairs + 1):
    b = json.load(open(f"{work}/before-{i}.json")); a = json.load(open(f"{work}/after-{i}.json"))
    for run in (a, b):
        for rec in run["records"]: rec["ttft_s"] = ttft(rec)
    rows.append((p95(b, "ttft_s"), p95(a, "ttft_s"), p95(b, "e2e_s"), p95(a, "e2e_s")))
    print(f"pair {i}: TTFT p95 {rows[-1][0]:.1f} -> {rows[-1][1]:.1f} ms, E2E p95 {rows[-1][2]:.1f} -> {rows[-1][3]:.1f} ms")
print("median of pairs: TTFT p95 %.1f -> %.1f ms, E2E p95 %.1f -> %.1f ms" % tuple(statistics.median(r[k] for r in rows) for k in range(4)))
PY
"$tachyon" bench compare "$work/before-1.json" "$work/after-1.json" | head -30
