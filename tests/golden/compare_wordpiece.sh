#!/usr/bin/env bash
# Tachyon's WordPiece against llama.cpp's (llama-tokenize) on the BGE vocabulary
# (../shared/fixtures/tokenizer/ggml-vocab-bert-bge.gguf), string by string over
# tests/golden/wordpiece_strings.txt (strings separated by a "__sep__" line):
# prints every string whose ids differ, then the count. docs/embeddings.md says
# which side follows BERT's rules on each.
#
#   LLAMA_CPP=~/.cache/llama.cpp tests/golden/compare_wordpiece.sh   (after a release build)
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${LLAMA_CPP:?set LLAMA_CPP to a llama.cpp checkout built with llama-tokenize}"
python3 - build/release/src/cli/tachyon "$LLAMA_CPP/build/bin/llama-tokenize" \
  ../shared/fixtures/tokenizer/ggml-vocab-bert-bge.gguf tests/golden/wordpiece_strings.txt <<'PY'
import json, subprocess, sys, tempfile, os
tachyon, llama, vocab, strings_path = sys.argv[1:5]
strings = open(strings_path, encoding="utf-8").read().split("\n__sep__\n")
with tempfile.TemporaryDirectory() as work:
    jsonl = os.path.join(work, "in.jsonl")
    with open(jsonl, "w") as f:
        for s in strings:
            f.write(json.dumps({"text": s}) + "\n")
    out = subprocess.run([tachyon, "tokenize", "--model", vocab, "--no-bos", "--jsonl", jsonl],
                         capture_output=True, text=True, check=True).stdout
    ours = [json.loads(line)["ids"] for line in out.split("\n") if line]
    differ = 0
    for i, s in enumerate(strings):
        one = os.path.join(work, "one.txt")
        with open(one, "w", encoding="utf-8") as f:
            f.write(s)
        r = subprocess.run([llama, "-m", vocab, "-f", one, "--ids", "--no-bos", "--log-disable", "--no-escape"],
                           capture_output=True, text=True)
        lines = [l for l in r.stdout.split("\n") if l.strip()]
        theirs = json.loads(lines[-1]) if lines else None
        if theirs != ours[i]:
            differ += 1
            print(f"{i:3d} {s[:60]!r}\n      tachyon   {ours[i][:16]}\n      llama.cpp {theirs[:16] if theirs else theirs}")
    print(f"{differ} of {len(strings)} strings differ")
PY
