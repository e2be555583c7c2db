#!/usr/bin/env bash
# The sliding-window KV pool of a Gemma 2/3 file: the KV bytes `tachyon serve`
# sets aside with and without it (its model line, at LEN tokens and 1 and 16
# sequences), then one greedy completion of a PROMPT_WORDS-word prompt served
# both ways, whose choices (text and logprobs) must be equal, with the time
# each took.
#
#   benchmarks/window_pool.sh MODEL.gguf
#   LEN=32768 PROMPT_WORDS=1700 benchmarks/window_pool.sh /tmp/tachyon-bench-models/gemma3-1b-q4_k_m.gguf
set -euo pipefail
cd "$(dirname "$0")/.."
model=$1
LEN=${LEN:-32768} PROMPT_WORDS=${PROMPT_WORDS:-1700} THREADS=${THREADS:-2}
tachyon=build/release/src/cli/tachyon
port=$((18000 + $$ % 1000))
work=$(mktemp -d)
server=
trap 'if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi; rm -rf "$work"' EXIT

start() {  # start MAX_MODEL_LEN MAX_NUM_SEQS [flags...]: serves in the background, waits until it listens
  local len=$1 seqs=$2
  shift 2
  "$tachyon" serve --model "$model" --port "$port" --threads "$THREADS" --max-model-len "$len" \
    --max-num-seqs "$seqs" --no-warmup "$@" >"$work/out" 2>"$work/log" &
  server=$!
  for _ in $(seq 600); do grep -q listening "$work/out" 2>/dev/null && break; sleep 0.1; done
  grep -q listening "$work/out" || { cat "$work/log" >&2; exit 1; }
}
stop() {
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=
}

echo "== KV set aside at --max-model-len $LEN"
for seqs in 1 16; do
  for flag in "" --no-window-pool; do
    start "$LEN" "$seqs" $flag
    echo "--max-num-seqs $seqs ${flag:-(window pool)}: $(grep -o 'model .*KV blocks.*' "$work/log")"
    stop
  done
done

echo "== one completion of a $PROMPT_WORDS-word prompt, both ways"
python3 - "$PROMPT_WORDS" >"$work/req.json" <<'EOF'
import json, random, sys
random.seed(1)
words = ("the a river mountain quiet engine latency token window layer cache block sequence model story "
         "night morning light code function value return error").split()
text = " ".join(random.choice(words) for _ in range(int(sys.argv[1])))
print(json.dumps({"prompt": text, "max_tokens": 24, "temperature": 0, "ignore_eos": True, "logprobs": 2}))
EOF
for mode in window whole; do
  flag=""
  [ "$mode" = whole ] && flag=--no-window-pool
  start $((PROMPT_WORDS * 2 + 64)) 2 $flag
  t0=$(date +%s%N)
  curl -sf -X POST -H 'Content-Type: application/json' --data-binary @"$work/req.json" \
    "http://127.0.0.1:$port/v1/completions" >"$work/reply_$mode.json"
  t1=$(date +%s%N)
  echo "$mode: $(((t1 - t0) / 1000000)) ms"
  stop
done
python3 - "$work/reply_window.json" "$work/reply_whole.json" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
same = a["choices"] == b["choices"]
print(f"prompt tokens {a['usage']['prompt_tokens']}; choices equal: {same}")
sys.exit(0 if same else 1)
EOF
