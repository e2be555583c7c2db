#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time from a fresh seed corpus.
# usage: run_fuzz.sh FUZZER SEED_WRITER SECONDS WORK_DIR
set -euo pipefail
fuzzer=$1 seed_writer=$2 seconds=$3 work=$4
rm -rf "$work/seeds" "$work/corpus"
mkdir -p "$work/seeds" "$work/corpus"
"$seed_writer" "$work/seeds"
# New inputs go to corpus/; seeds/ stays as written. -error_exitcode makes a crash fail ctest.
"$fuzzer" -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=2048 -timeout=10 \
  -print_final_stats=1 -error_exitcode=1 -artifact_prefix="$work/" "$work/corpus" "$work/seeds" 2>&1 | tail -n 25
exit "${PIPESTATUS[0]}"
