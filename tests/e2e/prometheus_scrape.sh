#!/usr/bin/env bash
# A real Prometheus server scrapes `tachyon serve` (the gateway in front of
# mock_upstream) while tachyon bench sends traffic; the TTFT p95 is then read
# back through Prometheus's query API with histogram_quantile, and promtool
# lints the exposition (nothing but the colons in the names, which stay for
# compatibility with vLLM's dashboards).
#
#   tests/e2e/prometheus_scrape.sh TACHYON MOCK_UPSTREAM
# Exit 77 (skipped) without prometheus and promtool (Debian package prometheus).
set -euo pipefail
tachyon=$1
mock=$2
command -v prometheus >/dev/null && command -v promtool >/dev/null || { echo "prometheus is not installed"; exit 77; }
work=$(mktemp -d)
pids=()
source "$(dirname "$0")/../../scripts/servers.sh"
trap 'stop_servers; rm -rf "$work"' EXIT


start upstream -- "$mock" --port 0 --gap-ms 2
upstream=$url
cat >"$work/tachyon.toml" <<TOML
[[backend]]
name = "mock"
kind = "openai"
base_url = "$upstream/v1"
[[route]]
model = "chat"
backends = ["mock"]
TOML
start gateway -- "$tachyon" serve --config "$work/tachyon.toml" --port 0 --no-access-log
gateway=$url

# Prometheus on a free port (a few tries), scraping every second.
cat >"$work/prometheus.yml" <<YML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: tachyon
    static_configs:
      - targets: ["${gateway#http://}"]
YML
for try in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 20000))
  prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
    --web.listen-address="127.0.0.1:$port" >"$work/prometheus.log" 2>&1 &
  prom_pid=$!
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1 && break
    kill -0 $prom_pid 2>/dev/null || break
    sleep 0.1
  done
  if curl -sf "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1; then pids+=($prom_pid); break; fi
  kill $prom_pid 2>/dev/null || true
  [ $try = 5 ] && { echo "prometheus did not start"; cat "$work/prometheus.log"; exit 1; }
done
prom=http://127.0.0.1:$port

"$tachyon" bench --url "$gateway" --model chat --input-len 16 --output-len 8 --num-requests 200 --concurrency 4 \
  --no-progress >/dev/null 2>"$work/bench.err" || { cat "$work/bench.err"; exit 1; }

lint=$(curl -sf "$gateway/metrics" | promtool check metrics 2>&1 | grep -v "metric names should not contain ':'" || true)
if [ -n "$lint" ]; then echo "promtool check metrics:"; echo "$lint"; exit 1; fi

# Over every request since the start (the buckets are cumulative): no rate window to wait for.
query='histogram_quantile(0.95, sum by (le) (tachyon:time_to_first_token_seconds_bucket{route="chat"}))'
number() { sed -n 's/.*"value":\[[0-9.]*,"\([^"]*\)"\].*/\1/p'; }
for _ in $(seq 60); do
  # {"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000.1,"0.0012"]}]}}
  answer=$(curl -sf "$prom/api/v1/query" --data-urlencode "query=$query" || true)
  value=$(printf '%s' "$answer" | number)
  count=$(curl -sf "$prom/api/v1/query" --data-urlencode \
    'query=sum(tachyon:time_to_first_token_seconds_count{route="chat"})' | number || true)
  # Until a scrape after the last of the bench's 200 requests.
  if [ "$count" = 200 ] && [ -n "$value" ] && [ "$value" != NaN ]; then
    echo "TTFT p95 through Prometheus: $value s over $count requests"
    awk -v v="$value" 'BEGIN { exit !(v > 0 && v < 1) }' || { echo "TTFT p95 $value s is not plausible"; exit 1; }
    exit 0
  fi
  sleep 0.5
done
echo "Prometheus never answered the TTFT quantile over 200 requests: $answer (count $count)"
exit 1
