#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time from a fresh copy of its seeds.
# usage: run_fuzz.sh FUZZER SEEDS SECONDS WORK_DIR [MAX_LEN]
#   SEEDS: a directory of committed seeds, or a program that writes them into a directory.
set -euo pipefail
fuzzer=$1 seeds=$2 seconds=$3 work=$4 max_len=${5:-4096}
rm -rf "$work/seeds" "$work/corpus"
mkdir -p "$work/seeds" "$work/corpus"
if [[ -d "$seeds" ]]; then
  cp "$seeds"/* "$work/seeds/"
else
  "$seeds" "$work/seeds"
fi
# New inputs go to corpus/; seeds/ stays as given. -error_exitcode makes a crash fail ctest.
"$fuzzer" -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=2048 -timeout=10 \
  -print_final_stats=1 -error_exitcode=1 -artifact_prefix="$work/" "$work/corpus" "$work/seeds" 2>&1 | tail -n 25
exit "${PIPESTATUS[0]}"
