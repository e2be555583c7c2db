#!/usr/bin/env bash
# The semantic cache's live audit against the truth: STS Benchmark dev pairs
# replayed through a semantic route (hash embedder) in front of a stand-in
# upstream that answers by meaning class. Each sentence has a class: a pair
# scored >= 4 (a paraphrase) shares its first sentence's class, any other
# sentence has its own; the stand-in answers "class N: ..." for the class of the
# question it is asked, deterministically, so the client can tell from a cached
# answer's class whether the hit was right (the truth, from the labels) while
# the gateway's audit compares the fresh answer with the cached one (exact,
# the stand-in being deterministic). Every first sentence is asked (and stored),
# then every second sentence: the true false-hit rate among the hits, and the
# audit's estimate with its 95% interval, with audit_sample = 1.0 and 0.25.
#
#   benchmarks/semantic_audit.sh [THRESHOLD]   (after a release build; default 0.8, guards off)
set -euo pipefail
cd "$(dirname "$0")/.."
tachyon=build/release/src/cli/tachyon
pairs=../shared/data/similarity/stsb/sts-dev.csv
THRESHOLD=${1:-0.8}
[ -f "$pairs" ] || { echo "no $pairs (../shared/data is needed)"; exit 1; }
work=$(mktemp -d)
pids=()
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT

# Classes and the order of questions.
python3 - "$pairs" "$work" <<'PY'
import csv, json, sys
pairs, work = sys.argv[1], sys.argv[2]
klass, firsts, seconds = {}, [], []
for row in csv.reader(open(pairs, encoding="utf-8"), delimiter="\t", quoting=csv.QUOTE_NONE):
    if len(row) < 7: continue
    score, a, b = float(row[4]), row[5].strip(), row[6].strip()
    if a not in klass: klass[a] = len(klass)
    if b not in klass: klass[b] = klass[a] if score >= 4 else len(klass)
    firsts.append(a); seconds.append(b)
json.dump(klass, open(f"{work}/classes.json", "w"))
json.dump({"firsts": firsts, "seconds": seconds}, open(f"{work}/questions.json", "w"))
PY

# The stand-in: OpenAI chat completions (whole answers), the answer by the last user message's class.
cat >"$work/standin.py" <<'PY'
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
klass = json.load(open(sys.argv[1]))
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        body = b'{"object":"list","data":[{"id":"m","object":"model"}]}'
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        q = req["messages"][-1]["content"]
        text = f"class {klass.get(q, -1)}: the answer to this meaning."
        body = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                           "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                        "finish_reason": "stop"}],
                           "usage": {"prompt_tokens": 8, "completion_tokens": 8, "total_tokens": 16}}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(f"listening on http://127.0.0.1:{s.server_address[1]}", flush=True)
s.serve_forever()
PY

cat >"$work/client.py" <<'PY'
import http.client, json, re, sys, time
host, port, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
klass = json.load(open(f"{work}/classes.json"))
q = json.load(open(f"{work}/questions.json"))
conn = http.client.HTTPConnection(host, port)
def ask(question):
    body = json.dumps({"model": "m", "temperature": 0, "max_tokens": 16,
                       "messages": [{"role": "user", "content": question}]})
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = json.loads(r.read())
    return r.getheader("x-tachyon-cache"), data["choices"][0]["message"]["content"]
hits = wrong = 0
for phase in ("firsts", "seconds"):
    for question in q[phase]:
        status, text = ask(question)
        if status != "hit": continue
        hits += 1
        if int(re.match(r"class (-?\d+)", text).group(1)) != klass[question]: wrong += 1
    time.sleep(1)  # the semantic cache inserts behind the answers
print(json.dumps({"hits": hits, "wrong": wrong}))
PY

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; tachyon $(git rev-parse --short HEAD)"
echo "STS-B dev, $(wc -l <"$pairs") pairs; embedder hash, threshold $THRESHOLD, guards off"
start standin -- python3 "$work/standin.py" "$work/classes.json"
standin=$url
for sample in 1.0 0.25; do
  printf '[cache]\nstore = "memory"\n[[backend]]\nname = "standin"\nkind = "openai"\nbase_url = "%s/v1"\n[[route]]\nmodel = "m"\nbackends = ["standin"]\nsemantic_cache = { embedder = "hash", threshold = %s, guards = "off", audit_sample = %s, audit_compare = "exact", audit_concurrency = 64 }\n' \
    "$standin" "$THRESHOLD" "$sample" >"$work/gw.toml"
  start gw -- "$tachyon" serve --config "$work/gw.toml" --port 0 --no-access-log --admin-key admin-k
  gw=$url
  hostport=${gw#http://}
  truth=$(python3 "$work/client.py" "${hostport%:*}" "${hostport##*:}" "$work")
  sleep 1  # the last audits
  audit=$(curl -s -H 'Authorization: Bearer admin-k' "$gw/v1/cache")
  python3 - "$sample" "$truth" "$audit" <<'PY'
import json, sys
sample, t, a = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])["semantic"]["audits"]["m"]
lo, hi = a["interval_95"]
print(f"audit_sample {sample}: {t['hits']} hits, truly wrong {t['wrong']} -> true false-hit rate "
      f"{t['wrong'] / max(t['hits'], 1):.4f}; audited {a['audits']}, disagreed {a['disagreements']} -> estimate "
      f"{a['false_hit_rate']:.4f} (95% interval {lo:.4f} .. {hi:.4f})")
PY
  kill "$gw_pid"; wait "$gw_pid" 2>/dev/null || true
done
