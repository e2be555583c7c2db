#!/usr/bin/env bash
# The shared-prefix serving workload, measured with `tachyon bench` against
# `tachyon serve`: N streaming requests at concurrency C, each one of K prefixes
# of P tokens plus a unique suffix of S tokens, O output tokens (ignore_eos);
# prompts are sent as token ids from the model's own vocabulary, so lengths are
# exact. Prints bench's summary and the server's prompt tokens computed; writes
# OUT.json and OUT.html. Extra arguments go to `tachyon serve`.
#
#   benchmarks/serve_workload.sh MODEL.gguf OUT [serve flags...]
#   N=32 C=4 K=1 P=1000 S=50 O=64 benchmarks/serve_workload.sh /tmp/m.gguf /tmp/off --no-prefix-caching
#   build/release/src/cli/tachyon bench compare /tmp/off.json /tmp/on.json
set -euo pipefail
cd "$(dirname "$0")/.."
model=$1 out=$2
shift 2
N=${N:-16} C=${C:-4} K=${K:-1} P=${P:-1000} S=${S:-50} O=${O:-64} THREADS=${THREADS:-2}
tachyon=build/release/src/cli/tachyon
port=$((18000 + $$ % 1000))
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"' EXIT

"$tachyon" serve --model "$model" --port "$port" --threads "$THREADS" --max-model-len $((P + S + O + 16)) \
  --max-num-seqs 16 --max-num-batched-tokens 512 "$@" >"$work/out" 2>"$work/log" &
server=$!
for _ in $(seq 300); do grep -q listening "$work/out" 2>/dev/null && break; sleep 0.1; done

"$tachyon" bench --url "http://127.0.0.1:$port" --workload shared-prefix --num-prefixes "$K" --prefix-len "$P" \
  --input-len "$S" --output-len "$O" --num-requests "$N" --concurrency "$C" --ignore-eos \
  --tokenizer "$model" --prompt-ids --no-progress --label "$(basename "$out") (serve ${*:-default})" \
  --out "$out.json" --html "$out.html"
metrics=$(curl -s "http://127.0.0.1:$port/metrics")
computed=$(echo "$metrics" | awk '/^tachyon:prompt_tokens_computed_total/ { print $2 }')
hits=$(echo "$metrics" | awk '/^tachyon:prefix_cache_hits_total/ { print $2 }')
echo "server: prompt tokens computed $computed, prefix cache hits $hits tokens; serve flags: ${*:-(none)}"
