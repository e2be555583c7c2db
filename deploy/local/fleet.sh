#!/usr/bin/env bash
# What deploy/kubernetes describes, on one machine's loopback: N engines, M gateways
# with one tachyon.toml, one redis-server shared by the gateways' caches.
#
#   engines   `tachyon serve --model MODEL` on 127.0.0.11, 127.0.0.12, ... all on
#             one port, as the pods behind a headless Service; the name
#             tachyon-engine resolves to them through DIR/fleet.hosts (the
#             gateways' hosts_file), as the Service's DNS name would
#   gateways  `tachyon serve --config DIR/tachyon.toml` on 127.0.0.1, ports
#             GATEWAY_PORT, +1, ...: engines discovered by DNS (every second),
#             prefix-affinity (or --policy), the exact cache in Redis
#   redis     redis-server on 127.0.0.1:REDIS_PORT, in memory, with a password
#
# usage: deploy/local/fleet.sh start DIR [--engines N] [--gateways M] [--model GGUF]
#            [--threads T] [--policy P] [--port BASE] [--tachyon BIN] [-- ENGINE_FLAGS...]
#        deploy/local/fleet.sh stop DIR
#        deploy/local/fleet.sh engine-hosts DIR I...  (the name resolves to engines I... only,
#            as when pods leave or join the Service)
# start prints one line per process ("engine 1 http://127.0.0.11:PORT pid P", ...) and
# writes them to DIR/fleet.txt; stop ends every pid listed there (SIGTERM, then SIGKILL).
# Defaults: 2 engines, 2 gateways, the built-in demo model, 1 thread each, base port
# 18000 (engines on BASE, gateways on BASE+100..., Redis on BASE+200).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command=${1:-}
dir=${2:-}
[ -n "$command" ] && [ -n "$dir" ] || { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
shift 2

stop() {
  [ -f "$dir/fleet.txt" ] || return 0
  local pids
  pids=$(awk '{print $NF}' "$dir/fleet.txt")
  kill $pids 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 $pids 2>/dev/null || break
    sleep 0.1
  done
  kill -9 $pids 2>/dev/null || true
  rm -f "$dir/fleet.txt"
}

case "$command" in
  stop) stop; exit 0 ;;
  engine-hosts)
    : > "$dir/fleet.hosts.new"
    for i in "$@"; do sed -n "${i}p" "$dir/fleet.hosts.all" >> "$dir/fleet.hosts.new"; done
    mv "$dir/fleet.hosts.new" "$dir/fleet.hosts"
    exit 0 ;;
  start) ;;
  *) echo "fleet.sh: unknown command '$command' (start, stop, engine-hosts)" >&2; exit 2 ;;
esac

engines=2 gateways=2 model="" threads=1 policy=prefix-affinity base=18000
tachyon=$here/../../build/release/src/cli/tachyon
engine_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --engines) engines=$2; shift 2 ;;
    --gateways) gateways=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --policy) policy=$2; shift 2 ;;
    --port) base=$2; shift 2 ;;
    --tachyon) tachyon=$2; shift 2 ;;
    --) shift; engine_flags=("$@"); break ;;
    *) echo "fleet.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$tachyon" ] || { echo "fleet.sh: $tachyon is not built (make test builds it)" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "fleet.sh: redis-server is not installed (scripts/setup)" >&2; exit 1; }
mkdir -p "$dir"
stop
: > "$dir/fleet.txt"
trap 'status=$?; [ $status -eq 0 ] || stop' EXIT

# start NAME URL-IN-LOG COMMAND...: starts it, waits for its "listening on" line (redis: its port).
launch() {
  local name=$1
  shift
  "$@" >"$dir/$name.out" 2>"$dir/$name.err" &
  local pid=$!
  for _ in $(seq 600); do
    url=$(sed -n 's/^listening on //p' "$dir/$name.out" | head -1)
    [ -n "$url" ] && break
    kill -0 "$pid" 2>/dev/null || { echo "fleet.sh: $name exited:"; tail -5 "$dir/$name.err"; exit 1; }
    sleep 0.05
  done
  [ -n "$url" ] || { echo "fleet.sh: $name did not start"; exit 1; }
  echo "$name $url pid $pid" | tee -a "$dir/fleet.txt"
}

redis_port=$((base + 200))
password=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$password" > "$dir/redis.password"
chmod 600 "$dir/redis.password"
redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no --requirepass "$password" \
  >"$dir/redis.out" 2>&1 &
redis_pid=$!
for _ in $(seq 100); do
  redis-cli -p "$redis_port" -a "$password" --no-auth-warning ping 2>/dev/null | grep -q PONG && break
  sleep 0.05
done
echo "redis redis://127.0.0.1:$redis_port pid $redis_pid" | tee -a "$dir/fleet.txt"

: > "$dir/fleet.hosts.all"
model_flags=()
[ -n "$model" ] && model_flags=(--model "$model")
for i in $(seq 1 "$engines"); do
  address=127.0.0.$((10 + i))
  launch "engine-$i" "$tachyon" serve --host "$address" --port "$base" --threads "$threads" "${model_flags[@]}" \
    --served-model-name chat --allowed-hosts tachyon-engine --no-access-log "${engine_flags[@]}"
  echo "$address tachyon-engine" >> "$dir/fleet.hosts.all"
done
cp "$dir/fleet.hosts.all" "$dir/fleet.hosts"

cat > "$dir/tachyon.toml" <<TOML
# deploy/local/fleet.sh: the engines by DNS (fleet.hosts stands for the headless
# Service), the exact cache in the fleet's Redis.
[[backend]]
name = "engines"
kind = "openai"
base_url = "http://tachyon-engine:$base/v1"
discover = "dns"
discover_interval = 1
hosts_file = "fleet.hosts"
connect_timeout = 1
first_byte_timeout = 60

[[route]]
model = "chat"
aliases = ["*"]
backends = ["engines"]
policy = "$policy"
exact_cache = true

[cache]
store = "redis://127.0.0.1:$redis_port"
password_env = "FLEET_REDIS_PASSWORD"
TOML
export FLEET_REDIS_PASSWORD=$password
for j in $(seq 1 "$gateways"); do
  launch "gateway-$j" "$tachyon" serve --config "$dir/tachyon.toml" --host 127.0.0.1 --port $((base + 100 + j - 1))
done
