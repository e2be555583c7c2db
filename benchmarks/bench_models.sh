# Sourced by the engine benchmarks (model_speed.sh, llama_compare.sh). Needs
# $tachyon, $shared (../shared) and $models (where generated models are kept).

# bench_model SHAPE TYPE: prints the path of a random-weight model of that shape
# and type, writing it first if it is not there yet. smol-135m takes the GPT-2
# vocabulary (50257 tokens, the size nearest SmolLM's 49152), the others Llama 3's
# (128256 tokens; Qwen3's own 151936-token vocabulary is not in ../shared).
bench_model() {
  local vocab=$shared/fixtures/tokenizer/ggml-vocab-llama-bpe.gguf model=$models/$1-$2.gguf
  [ "$1" = smol-135m ] && vocab=$shared/fixtures/tokenizer/ggml-vocab-gpt-2.gguf
  [ -f "$model" ] || "$tachyon" model gen --shape "$1" --type "$2" --vocab "$vocab" --out "$model" >/dev/null
  echo "$model"
}

# tachyon_pp MODEL TOKENS THREADS: prompt processing tokens/s of `tachyon run` on a TOKENS-token prompt.
tachyon_pp() {
  local ids
  ids=$(seq 0 $(($2 - 1)) | awk '{ printf "%s%d", (NR > 1 ? "," : ""), ($1 * 37) % 5000 + 100 }')
  "$tachyon" run --model "$1" --prompt-ids "$ids" -n 1 --temp 0 --ignore-eos --print-ids --threads "$3" \
    2>&1 >/dev/null | awk '/^prompt:/ { gsub(/[(]/, "", $7); print $7 }'
}

# tachyon_tg MODEL TOKENS THREADS: generation tokens/s of `tachyon run` over TOKENS tokens.
tachyon_tg() {
  "$tachyon" run --model "$1" --prompt-ids 1,2,3,4 -n "$2" --temp 0 --ignore-eos --print-ids --threads "$3" \
    2>&1 >/dev/null | awk '/^generation:/ { gsub(/[(]/, "", $7); print $7 }'
}
