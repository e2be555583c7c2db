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
# FUZZ_SEED (default 1) fixes the random seed so a run can be repeated as far as a timed
# run allows; FUZZ_SEED=0 lets libFuzzer pick one (exploration beyond CI).
# The whole log stays in WORK_DIR/fuzz.log; ctest shows its end, and on a failure
# also the lines that say why (the target's own message comes before the stack).
status=0
"$fuzzer" -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=2048 -timeout=10 \
  -print_final_stats=1 -error_exitcode=1 -seed="${FUZZ_SEED:-1}" -artifact_prefix="$work/" "$work/corpus" "$work/seeds" \
  >"$work/fuzz.log" 2>&1 || status=$?
if [[ $status -ne 0 ]]; then
  echo "--- why it failed ($work/fuzz.log):"
  grep -n -B 8 -m 1 -E "ERROR: |deadly signal|runtime error|==[0-9]+==" "$work/fuzz.log" | grep -v "NEW_FUNC" | head -n 40
  echo "--- the log's end:"
fi
grep -v "NEW_FUNC" "$work/fuzz.log" | tail -n 25
exit "$status"
