#!/usr/bin/env bash
# What tracing costs a request (docs/observability.md): the same gateway in front of
# tests/support/mock_upstream three ways, A B C A B C, Poisson arrivals at RATE
# streaming requests/s for SECONDS_PER_RUN s each:
#   A  no [telemetry]
#   B  [telemetry] exporting every request's trace to a live collector (a Python
#      OTLP/HTTP receiver that decodes each export and counts its spans)
#   C  [telemetry] pointed at a dead collector (nothing listens: every span dropped)
# Prints TTFT and E2E p50 / p99 per run and the added TTFT p99 of B and C over A,
# median of the rounds, and the spans the collector received.
#   benchmarks/otel_overhead.sh             (after a release build)
#   RATE=200 SECONDS_PER_RUN=10 ROUNDS=2 benchmarks/otel_overhead.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=${TACHYON:-build/release/src/cli/tachyon}
mock=build/release/tests/support/mock_upstream
RATE=${RATE:-200} SECONDS_PER_RUN=${SECONDS_PER_RUN:-10} ROUNDS=${ROUNDS:-2}
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT

cat >"$work/collector.py" <<'PY'
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    spans = 0
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        H.spans += sum(len(ss["spans"]) for rs in body["resourceSpans"] for ss in rs["scopeSpans"])
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"{}")
    def do_GET(self):
        out = str(H.spans).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out)
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(f"listening on http://127.0.0.1:{s.server_port}", flush=True)
s.serve_forever()
PY
start collector -- python3 "$work/collector.py"
collector=$url
dead=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start upstream 0 -- "$mock" --port 0
upstream=$url
config() {  # name [telemetry endpoint]
  cat >"$work/$1.toml" <<TOML
[[backend]]
name = "mock"
kind = "openai"
base_url = "$upstream/v1"
pool_size = 1024
[[route]]
model = "m"
backends = ["mock"]
TOML
  if [ -n "${2:-}" ]; then printf '[telemetry]\notlp_endpoint = "%s"\n' "$2" >>"$work/$1.toml"; fi
}
config off
config live "$collector"
config dead "http://127.0.0.1:$dead"
for g in off live dead; do
  start "gw_$g" 0 -- "$tachyon" serve --config "$work/$g.toml" --port 0 --io-threads 1 --workers 1 --no-access-log
  eval "url_$g=\$url"
done

n=$((RATE * SECONDS_PER_RUN))
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; tachyon $(git rev-parse --short HEAD)"
echo "$RATE streaming requests/s, $SECONDS_PER_RUN s per run, $ROUNDS rounds of A (off) B (live collector) C (dead collector)"
for r in $(seq "$ROUNDS"); do
  for g in off live dead; do
    eval "target=\$url_$g"
    taskset -c 1 "$tachyon" bench --url "$target" --model m --input-len 16 --output-len 16 --no-progress \
      --request-rate "$RATE" --num-requests "$n" --warmup 100 --out "$work/$g$r.json" >/dev/null 2>"$work/bench.err" \
      || { cat "$work/bench.err"; exit 1; }
  done
done
sleep 2  # the exporter's last batch
spans=$(curl -s "$collector/")
python3 - "$work" "$ROUNDS" "$spans" <<'PY'
import json, statistics, sys
work, rounds, spans = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def s(name): return json.load(open(f"{work}/{name}.json"))["summary"]
print("| round | run | ok | TTFT p50 (ms) | TTFT p99 | E2E p50 | E2E p99 |")
print("|---|---|---|---|---|---|---|")
added = {"live": [], "dead": []}
for r in range(1, rounds + 1):
    base = s(f"off{r}")
    for g in ("off", "live", "dead"):
        x = s(f"{g}{r}")
        print(f"| {r} | {g} | {x['num_ok']} | {x['ttft']['p50_ms']:.3f} | {x['ttft']['p99_ms']:.3f} | "
              f"{x['e2e']['p50_ms']:.3f} | {x['e2e']['p99_ms']:.3f} |")
        if g != "off":
            added[g].append((x['ttft']['p50_ms'] - base['ttft']['p50_ms'], x['ttft']['p99_ms'] - base['ttft']['p99_ms']))
for g, xs in added.items():
    print(f"added TTFT with the exporter on ({g} collector), median of the rounds: "
          f"p50 {statistics.median(a for a, _ in xs):+.3f} ms, p99 {statistics.median(b for _, b in xs):+.3f} ms")
print(f"spans the live collector received: {spans}")
PY
