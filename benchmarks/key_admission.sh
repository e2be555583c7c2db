#!/usr/bin/env bash
# Runs build/release/benchmarks/key_admission against a redis-server of its own
# on a free loopback port (no persistence), stopped when it ends.
#   benchmarks/key_admission.sh [REQUESTS_PER_RUN] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v redis-server >/dev/null || { echo "key_admission: redis-server is not installed"; exit 1; }
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --loglevel warning &
redis=$!
trap 'kill $redis 2>/dev/null; wait $redis 2>/dev/null || true' EXIT
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
redis-cli -p "$port" info server | grep -E '^redis_version' | tr -d '\r'
build/release/benchmarks/key_admission "redis://127.0.0.1:$port" "$@"
