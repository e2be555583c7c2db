#!/usr/bin/env bash
# What a gateway does to a Redis that needs a password it was not given (issue 31):
# connections per second it opens and the bytes it logs, over SECONDS.
#
#   benchmarks/redis_noauth.sh [TACHYON_BINARY] [SECONDS]    (default build/release/src/cli/tachyon, 5)
#
# A real redis-server with --requirepass on a free loopback port, a mock upstream,
# and `tachyon serve --config` with an exact-cached route whose store names the
# Redis without a password. Before issue 31 the reader thread looped connect ->
# "reachable again" -> load -> fail with no pause; now each failure waits 0.5 s
# doubling to 30 s and the log says it once.
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=$(realpath "${1:-build/release/src/cli/tachyon}")
seconds=${2:-5}
mock=build/release/tests/support/mock_upstream
command -v redis-server >/dev/null && command -v redis-cli >/dev/null || { echo "needs redis-server and redis-cli"; exit 1; }
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --requirepass s3cret --loglevel warning \
  >"$work/redis.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do redis-cli -p "$port" -a s3cret --no-auth-warning PING >/dev/null 2>&1 && break; sleep 0.05; done
connections() { redis-cli -p "$port" -a s3cret --no-auth-warning INFO stats | awk -F: '/total_connections_received/ { print $2 + 0 }'; }

start upstream -- "$mock" --port 0
cat >"$work/gateway.toml" <<TOML
[[backend]]
name = "up"
kind = "openai"
base_url = "$url/v1"
[[route]]
model = "chat"
backends = ["up"]
exact_cache = true
[cache]
store = "redis://127.0.0.1:$port"
TOML
before=$(connections)
start gateway -- "$tachyon" serve --port 0 --config "$work/gateway.toml"
sleep "$seconds"
after=$(connections)
log_bytes=$(wc -c <"$work/gateway.err")
store_lines=$(grep -c "cache store" "$work/gateway.err" || true)
echo "binary: $tachyon"
echo "over ${seconds} s: $(( (after - before) / seconds )) connections/s to Redis; the log grew $log_bytes bytes ($store_lines cache-store lines)"
