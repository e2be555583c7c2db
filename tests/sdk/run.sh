#!/usr/bin/env bash
# The official npm clients (tests/sdk/package.json, versions pinned by its lock
# file) against the real binary: `tachyon serve --config` in front of
# tests/support/anthropic_standin (an Anthropic route), mock_upstream (an
# OpenAI route) and a local engine (a tiny model of random weights): the openai
# client on /v1/chat/completions and /v1/responses, @anthropic-ai/sdk on
# /v1/messages. Exits 77 (skipped) when
# node or npm is missing or the packages cannot be installed (no registry).
#   tests/sdk/run.sh TACHYON ANTHROPIC_STANDIN MOCK_UPSTREAM WORKDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tachyon=$1 standin=$2 mock_upstream=$3 dir=$4
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
standin_url=$url
start mock -- "$mock_upstream" --port 0
mock=$url
"$tachyon" model gen --shape tiny --type q8_0 --out "$work/tiny.gguf" > /dev/null
cat > "$work/gateway.toml" <<TOML
[[backend]]
name = "claude"
kind = "anthropic"
base_url = "$standin_url"
api_key_env = "TACHYON_SDK_TEST_KEY"
upstream_model = "claude-test"
[[backend]]
name = "openai"
kind = "openai"
base_url = "$mock/v1"
[[route]]
model = "claude"
backends = ["claude"]
prompt_cache = "auto"
[[backend]]
name = "engine"
kind = "local"
model = "$work/tiny.gguf"
threads = 1
chat_template = "chatml"
[[route]]
model = "gpt"
backends = ["openai"]
[[route]]
model = "local"
backends = ["engine"]
TOML
start gateway -- "$tachyon" serve --config "$work/gateway.toml" --port 0
(cd "$dir" && GATEWAY=$url ROUTE=claude timeout 120 node openai_client.mjs)
(cd "$dir" && GATEWAY=$url ROUTE=claude TOOLS=1 timeout 120 node anthropic_client.mjs)
# An OpenAI upstream behind /v1/messages: the answer translated the other way.
(cd "$dir" && GATEWAY=$url ROUTE=gpt timeout 120 node anthropic_client.mjs)
# /v1/responses on each backend kind: Anthropic, OpenAI-compatible, a local engine.
(cd "$dir" && GATEWAY=$url ROUTE=claude TOOLS=1 timeout 120 node responses_client.mjs)
(cd "$dir" && GATEWAY=$url ROUTE=gpt timeout 120 node responses_client.mjs)
(cd "$dir" && GATEWAY=$url ROUTE=local TOOLS=1 SCHEMA=1 RANDOM=1 timeout 300 node responses_client.mjs)
stats=$(curl -s "$standin_url/stats")
echo "stand-in: $stats"
case $stats in *'"invalid":0'*) ;; *) echo "the stand-in refused a request as invalid"; exit 1 ;; esac
