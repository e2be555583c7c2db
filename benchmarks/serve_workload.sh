#!/usr/bin/env bash
# The shared-prefix workload of the serving issue, against `tachyon serve`:
# N streaming requests at concurrency C, each a shared prefix of P tokens plus
# a unique suffix of S tokens, O output tokens (ignore_eos), prompts sent as
# token ids so their lengths are exact. Reports prompt tokens computed, TTFT
# p50/p95 and E2E p95 (server-side, from the access log), ITL p50 (from the
# server's histogram), mean TPOT, and
# output tokens/s over the run. Extra arguments go to `tachyon serve`
# (e.g. --no-prefix-caching).
#
#   benchmarks/serve_workload.sh MODEL.gguf [serve flags...]
#   N=16 C=4 P=1000 S=50 O=64 benchmarks/serve_workload.sh /tmp/m.gguf --no-prefix-caching
# A stand-in until `tachyon bench` exists; needs curl.
set -euo pipefail
cd "$(dirname "$0")/.."
model=$1
shift
N=${N:-16} C=${C:-4} P=${P:-1000} S=${S:-50} O=${O:-64} THREADS=${THREADS:-2}
tachyon=build/release/src/cli/tachyon
port=$((18000 + $$ % 1000))
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"' EXIT

"$tachyon" serve --model "$model" --port "$port" --threads "$THREADS" --max-model-len $((P + S + O + 16)) \
  --max-num-seqs 16 --max-num-batched-tokens 512 "$@" >"$work/out" 2>"$work/log" &
server=$!
for _ in $(seq 100); do grep -q listening "$work/out" 2>/dev/null && break; sleep 0.1; done

prefix=$(seq 0 $((P - 1)) | awk '{ printf "%s%d", (NR > 1 ? "," : ""), ($1 * 31) % 250 + 3 }')
for i in $(seq 1 "$N"); do
  suffix=$(seq 0 $((S - 1)) | awk -v r="$i" '{ printf ",%d", ($1 * 7 + r * 13) % 250 + 3 }')
  ids="$prefix$suffix"
  echo "{\"prompt\":[${ids#,}],\"max_tokens\":$O,\"temperature\":0,\"stream\":true,\"ignore_eos\":true}" \
    >"$work/req$i.json"
done
start=$(date +%s.%N)
seq 1 "$N" | xargs -P "$C" -I{} curl -s -N -o /dev/null -X POST --data-binary @"$work/req{}.json" \
  "http://127.0.0.1:$port/v1/completions"
end=$(date +%s.%N)
metrics=$(curl -s "http://127.0.0.1:$port/metrics")
computed=$(echo "$metrics" | awk '/^tachyon:prompt_tokens_computed_total/ { print $2 }')
generated=$(echo "$metrics" | awk '/^tachyon:generation_tokens_total/ { print $2 }')
hits=$(echo "$metrics" | awk '/^tachyon:prefix_cache_hits_total/ { print $2 }')

pct() { sort -n | awk -v p="$1" '{ v[NR] = $1 } END { i = int((NR - 1) * p + 0.5) + 1; printf "%.0f", v[i] }'; }
ttft() { grep '"ttft_ms"' "$work/log" | sed 's/.*"ttft_ms":\([0-9.e+-]*\).*/\1/'; }
e2e() { grep '"e2e_ms"' "$work/log" | sed 's/.*"e2e_ms":\([0-9.e+-]*\).*/\1/'; }
# ITL p50 from the server's histogram (linear inside the bucket).
itl_p50=$(echo "$metrics" | awk '
  /^tachyon:inter_token_latency_seconds_bucket/ {
    match($0, /le="[^"]+"/); le = substr($0, RSTART + 4, RLENGTH - 5); n++; bound[n] = le; count[n] = $2 }
  END {
    total = count[n]; target = total / 2; prev_b = 0; prev_c = 0
    for (i = 1; i <= n; i++) {
      if (count[i] >= target && total > 0) {
        b = (bound[i] == "+Inf") ? prev_b : bound[i]
        frac = (count[i] > prev_c) ? (target - prev_c) / (count[i] - prev_c) : 0
        printf "%.1f", 1000 * (prev_b + (b - prev_b) * frac); exit }
      prev_b = bound[i]; prev_c = count[i] } }')
tpot=$(paste <(e2e) <(ttft) | awk -v o="$O" '{ s += ($1 - $2) / (o - 1) } END { printf "%.1f", s / NR }')
echo "requests $N, concurrency $C, prompt $P shared + $S unique tokens, $O output tokens, serve flags: ${*:-(none)}"
echo "prompt tokens computed: $computed (prefix cache hits: $hits tokens)"
echo "TTFT p50 $(ttft | pct 0.5) ms, p95 $(ttft | pct 0.95) ms; E2E p95 $(e2e | pct 0.95) ms; ITL p50 $itl_p50 ms; mean TPOT $tpot ms"
awk -v g="$generated" -v a="$start" -v b="$end" 'BEGIN { printf "output tokens/s: %.1f (%d tokens in %.1f s)\n", g / (b - a), g, b - a }'
