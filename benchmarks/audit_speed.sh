#!/usr/bin/env bash
# How long `tachyon audit` takes on a large capture: writes a synthetic capture of a
# realistic mix (benchmarks/make_capture.py, from ../shared/data prompt sets) and
# times the audit, with its peak memory.
#   REQUESTS=1000000 benchmarks/audit_speed.sh [build/release/src/cli/tachyon]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tachyon="${1:-$here/../build/release/src/cli/tachyon}"
shared="${SHARED:-$here/../../shared}"
requests="${REQUESTS:-1000000}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 "$here/make_capture.py" --shared "$shared" --requests "$requests" --out "$work/capture.jsonl"
echo "capture: $requests requests, $(du -h "$work/capture.jsonl" | cut -f1)"
lscpu | grep "Model name"
/usr/bin/time -f "audit: %e s wall, %U s user, %M KiB peak" "$tachyon" audit "$work/capture.jsonl" --json \
  > "$work/audit.json"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('audited', r['requests'], 'requests;',
  'audit_seconds', r['audit_seconds'])" "$work/audit.json"
