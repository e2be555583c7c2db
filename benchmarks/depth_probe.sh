#!/usr/bin/env bash
# The deepest JSON body each request path survives (issue 31): a request nested
# N levels is sent down a path; if the server dies (no answer, /health silent) the
# path did not survive N and the server is started again. N doubles from 1,000 to
# MAX, then the first failure is narrowed by bisection to within 5%.
#
#   benchmarks/depth_probe.sh [TACHYON_BINARY]   (default build/release/src/cli/tachyon)
#
# Paths: an `openai` route (the body re-serialized upstream), an exact-cached and a
# semantic-cached route (the canonical key), and plain `serve --model` with a deep
# tools[0].function.parameters and response_format schema (the stories260K fixture in
# ../shared). A path that answers every depth up to MAX is reported as ">= MAX";
# after issue 31 every path answers 400 json_too_deep past 128 and survives them all.
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=$(realpath "${1:-build/release/src/cli/tachyon}")
mock=build/release/tests/support/mock_upstream
MAX=${MAX:-1000000}
model=../shared/fixtures/models/stories260K.gguf
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT

start upstream -- "$mock" --port 0
upstream_url=$url
cat >"$work/gateway.toml" <<TOML
[[backend]]
name = "up"
kind = "openai"
base_url = "$upstream_url/v1"
[[route]]
model = "plain"
backends = ["up"]
[[route]]
model = "exact"
backends = ["up"]
exact_cache = true
[[route]]
model = "semantic"
backends = ["up"]
semantic_cache = { embedder = "hash", threshold = 0.93 }
[cache]
store = "memory"
TOML

# body PATH DEPTH: the request for one path, written to $work/body.json.
body() {
  python3 - "$1" "$2" >"$work/body.json" <<'PY'
import sys
path, depth = sys.argv[1], int(sys.argv[2])
deep = "[" * depth + "1" + "]" * depth
deep_object = '{"a":' * depth + "1" + "}" * depth
user = '{"role":"user","content":"hi"}'
if path in ("plain", "exact", "semantic"):
    print('{"model":"%s","temperature":0,"max_tokens":2,"messages":[%s],"metadata":%s}' % (path, user, deep))
elif path == "tools":
    print('{"max_tokens":2,"messages":[%s],"tools":[{"type":"function","function":{"name":"f","parameters":%s}}]}'
          % (user, deep_object))
else:
    print('{"max_tokens":2,"messages":[%s],"response_format":{"type":"json_schema","json_schema":{"name":"s",'
          '"schema":{"type":"object","properties":{"x":%s}}}}}' % (user, deep_object))
PY
}

server_for() {
  stop_servers
  start upstream -- "$mock" --port 0 >/dev/null
  if [[ $1 == tools || $1 == schema ]]; then
    start server -- "$tachyon" serve --port 0 --threads 1 --no-access-log --model "$model"
  else
    sed -i "s|base_url = .*|base_url = \"$url/v1\"|" "$work/gateway.toml"
    start server -- "$tachyon" serve --port 0 --no-access-log --config "$work/gateway.toml"
  fi
  server_url=$url
}

# survives PATH DEPTH: 0 when the server answered and still answers /health.
survives() {
  body "$1" "$2"
  curl -s -o /dev/null --max-time 60 -X POST -H 'Content-Type: application/json' \
    --data-binary @"$work/body.json" "$server_url/v1/chat/completions" || true
  curl -sf -o /dev/null --max-time 5 "$server_url/health"
}

echo "binary: $tachyon ($(cd "$(dirname "$tachyon")" && git rev-parse --short HEAD 2>/dev/null || echo '?')); up to $MAX levels"
echo
echo "| path | deepest body survived |"
echo "|---|---|"
for path in plain exact semantic tools schema; do
  if [[ ($path == tools || $path == schema) && ! -f $model ]]; then
    echo "| $path | skipped: $model is absent |"
    continue
  fi
  server_for "$path"
  ok=0 bad=0 depth=1000
  while (( depth <= MAX )); do
    if survives "$path" "$depth"; then ok=$depth; depth=$(( depth * 2 )); else bad=$depth; break; fi
  done
  if (( bad == 0 )); then
    (( ok < MAX )) && { survives "$path" "$MAX" && ok=$MAX || bad=$MAX; }
  fi
  if (( bad == 0 )); then
    echo "| $path | >= $ok (every depth tried) |"
    continue
  fi
  while (( (bad - ok) * 20 > bad )); do
    mid=$(( (ok + bad) / 2 ))
    server_for "$path"
    if survives "$path" "$mid"; then ok=$mid; else bad=$mid; fi
  done
  echo "| $path | $ok (dies at $bad) |"
done
