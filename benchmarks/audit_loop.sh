#!/usr/bin/env bash
# The capture -> audit -> replay loop on a real engine, measured: serves stories260K
# (../shared) with --capture, sends a realistic chat mix (FastChat's identity
# conversations: many repeated questions), audits the capture, then replays it
# against the config without and with the lever the audit ranks first among the
# cache levers (the exact cache), A B A B, and compares.
#   benchmarks/audit_loop.sh [build/release/src/cli/tachyon]   (REQUESTS=300 RATE=20 PAIRS=2)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tachyon="${1:-$here/../build/release/src/cli/tachyon}"
shared="${SHARED:-$here/../../shared}"
requests="${REQUESTS:-300}"
rate="${RATE:-20}"
pairs="${PAIRS:-2}"
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
config "$work/after.toml" "exact_cache = true"
lscpu | grep "Model name"

serve "$work/before.toml" --capture "$work/traffic.jsonl"
"$tachyon" bench --url "$url" --endpoint chat --model chat --workload prompts \
  --prompts "$shared/data/prompts/fastchat_identity/dummy_conversation.json" --num-requests "$requests" \
  --output-len 32 --request-rate "$rate" --seed 1 > /dev/null
stop
echo "captured $(wc -l < "$work/traffic.jsonl") requests"
"$tachyon" audit "$work/traffic.jsonl" --config "$work/before.toml" --json > "$work/audit.json"
python3 - "$work/audit.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"audit: TTFT p95 {r['ttft_p95_ms']} ms, E2E p95 {r['e2e_p95_ms']} ms; ranking {r['ranking']}")
for l in r["levers"]:
    if l["lever"] == "semantic_cache":
        print(f"  semantic_cache: exact_duplicate_share {l['exact_duplicate_share']}, exact_hit_rate {l['exact_hit_rate']}, "
              f"predicted TTFT p95 {l['predicted_ttft_p95_ms']} ms (gain {l['expected_ttft_p95_gain_ms']} ms); config: {l['config']}")
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
