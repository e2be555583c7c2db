#!/usr/bin/env bash
# The official npm clients (tests/sdk/package.json, versions pinned by its lock
# file) against the real binary: `tachyon serve --config` in front of
# tests/support/anthropic_standin (an Anthropic route). Exits 77 (skipped) when
# node or npm is missing or the packages cannot be installed (no registry).
#   tests/sdk/run.sh TACHYON ANTHROPIC_STANDIN WORKDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tachyon=$1 standin=$2 dir=$3
command -v node > /dev/null && command -v npm > /dev/null || { echo "skipped: node and npm are not installed"; exit 77; }
mkdir -p "$dir"
cp "$here/package.json" "$here/package-lock.json" "$here"/*.mjs "$dir/"
if ! cmp -s "$here/package-lock.json" "$dir/node_modules/.package-lock.json.installed" 2>/dev/null; then
  if ! (cd "$dir" && timeout 300 npm ci --no-audit --no-fund --ignore-scripts > npm.log 2>&1); then
    echo "skipped: npm ci failed (no registry?)"; tail -5 "$dir/npm.log"; exit 77
  fi
  cp "$here/package-lock.json" "$dir/node_modules/.package-lock.json.installed"
fi
work=$(mktemp -d)
pids=()
source "$here/../../scripts/servers.sh"
trap 'stop_servers; rm -rf "$work"' EXIT
export TACHYON_SDK_TEST_KEY=sk-ant-sdk
start standin -- "$standin" --port 0 --key sk-ant-sdk
cat > "$work/gateway.toml" <<TOML
[[backend]]
name = "claude"
kind = "anthropic"
base_url = "$url"
api_key_env = "TACHYON_SDK_TEST_KEY"
upstream_model = "claude-test"
[[route]]
model = "claude"
backends = ["claude"]
prompt_cache = "auto"
TOML
start gateway -- "$tachyon" serve --config "$work/gateway.toml" --port 0
(cd "$dir" && GATEWAY=$url ROUTE=claude timeout 120 node openai_client.mjs)
stats=$(curl -s "$(sed -n 's/^listening on //p' "$work/standin.out")/stats")
echo "stand-in: $stats"
case $stats in *'"invalid":0'*) ;; *) echo "the stand-in refused a request as invalid"; exit 1 ;; esac
