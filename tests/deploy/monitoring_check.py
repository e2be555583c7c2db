#!/usr/bin/env python3
"""Checks deploy/grafana/tachyon.json and deploy/prometheus/rules.yml against the
real binary:

- the dashboard JSON is what deploy/grafana/make_dashboard.py writes (no drift),
  its datasource is a variable, and every panel query parses as PromQL
  (`promtool check rules` on the queries, Grafana's variables substituted);
- rules.yml passes `promtool check rules`, and `promtool test rules` on
  rules_test.yml (the alerts fire on the series that should fire them);
- every tachyon:* name the dashboard or the rules read is a family that a live
  `tachyon serve` exports on /metrics (a gateway with every component: a local
  engine, an upstream, both caches on a Redis store, a classify route, the
  trimmer, telemetry).

Exits 77 (skipped) without promtool (Debian package prometheus).

  tests/deploy/monitoring_check.py DEPLOY_DIR TACHYON_BINARY
"""
import json, os, re, shutil, subprocess, sys, tempfile

SKIP = 77
NAME = re.compile(r"(?<![\w:])tachyon:[A-Za-z0-9_:]+")


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def promtool(*args):
    r = subprocess.run(["promtool", *args], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"promtool {' '.join(args)}:\n{r.stdout}{r.stderr}")
    return r.stdout


def queries(dashboard):
    out = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            out.append((panel["title"], target["expr"]))
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            out.append((f"variable {var['name']}", var["query"]["query"]))
    return out


def live_families(tachyon, work):
    """The metric families of a gateway with every component, and their types."""
    model = os.path.join(work, "tiny.gguf")
    subprocess.run([tachyon, "model", "gen", "--shape", "tiny", "--type", "q8_0", "--out", model], check=True,
                   capture_output=True)
    config = os.path.join(work, "tachyon.toml")
    with open(config, "w") as f:
        f.write(f"""
[[backend]]
name = "engine"
kind = "local"
model = "{model}"
threads = 1
chat_template = "chatml"
[[backend]]
name = "upstream"
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
[[route]]
model = "chat"
backends = ["engine", "upstream"]
policy = "fallback"
exact_cache = true
semantic_cache = {{ embedder = "hash", threshold = 0.95 }}
trim = {{ whitespace = true }}
[[route]]
model = "auto"
policy = "classify"
default = "large"
[[route.class]]
name = "small"
backends = ["engine"]
[[route.class]]
name = "large"
backends = ["upstream"]
[[route.rule]]
name = "extraction"
class = "small"
user_regex = "(?i)^extract"
[cache]
store = "redis://127.0.0.1:9/0"
[telemetry]
otlp_endpoint = "http://127.0.0.1:9"
""")
    server = subprocess.Popen([tachyon, "serve", "--config", config, "--port", "0", "--no-warmup",
                               "--no-access-log"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        if "http://" not in line:
            server.kill()
            fail("tachyon serve did not start: " + line + server.stderr.read())
        url = line[line.index("http://"):].strip()
        text = subprocess.run(["curl", "-s", "--max-time", "20", url + "/metrics"], capture_output=True,
                              text=True).stdout
        return dict(re.findall(r"^# TYPE (\S+) (\S+)", text, re.M))
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def main():
    deploy, tachyon = sys.argv[1], sys.argv[2]
    if shutil.which("promtool") is None:
        print("skipped: promtool is not installed (Debian package prometheus)")
        sys.exit(SKIP)
    grafana = os.path.join(deploy, "grafana")
    prometheus = os.path.join(deploy, "prometheus")
    made = subprocess.run([sys.executable, os.path.join(grafana, "make_dashboard.py")], capture_output=True,
                          text=True, check=True).stdout
    with open(os.path.join(grafana, "tachyon.json")) as f:
        committed = f.read()
    if json.loads(made) != json.loads(committed):
        fail("deploy/grafana/tachyon.json is not make_dashboard.py's output: run "
             "python3 deploy/grafana/make_dashboard.py > deploy/grafana/tachyon.json")
    dashboard = json.loads(committed)
    variables = [v["name"] for v in dashboard["templating"]["list"]]
    if "datasource" not in variables:
        fail("the datasource is not a variable")
    for panel in dashboard["panels"]:
        if panel["type"] != "row" and panel["datasource"]["uid"] != "${datasource}":
            fail(f"panel {panel['title']!r} names a datasource of its own")

    with tempfile.TemporaryDirectory() as work:
        # Each query as a recording rule: promtool parses its PromQL.
        rules = os.path.join(work, "queries.yml")
        with open(rules, "w") as f:
            f.write("groups:\n  - name: dashboard\n    rules:\n")
            for i, (title, expr) in enumerate(queries(dashboard)):
                if expr.startswith("label_values("):
                    continue  # Grafana's own function
                expr = expr.replace("$__rate_interval", "1m").replace("$route", ".*").replace("$backend", ".*")
                f.write(f"      - record: dashboard_query_{i}\n        expr: {json.dumps(expr)}\n")
        promtool("check", "rules", rules)
        promtool("check", "rules", os.path.join(prometheus, "rules.yml"))
        tested = subprocess.run(["promtool", "test", "rules", "rules_test.yml"], cwd=prometheus, capture_output=True,
                                text=True)
        if tested.returncode != 0:
            fail("promtool test rules rules_test.yml:\n" + tested.stdout + tested.stderr)

        families = live_families(tachyon, work)
        if len(families) < 40:
            fail(f"only {len(families)} families on /metrics")
        with open(os.path.join(prometheus, "rules.yml")) as f:
            rules_text = f.read()
        used = set(NAME.findall(committed)) | set(NAME.findall(rules_text))
        missing = []
        for name in sorted(used):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            if name in families or (base in families and families[base] == "histogram"):
                continue
            missing.append(name)
        if missing:
            fail("queried but not exported by tachyon serve: " + ", ".join(missing))
        print(f"{len(queries(dashboard))} dashboard queries and the rules parse; {len(used)} tachyon:* names, "
              f"all among the {len(families)} families a live server exports")


if __name__ == "__main__":
    main()
