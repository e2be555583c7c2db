#!/usr/bin/env python3
"""Renders deploy/kubernetes and its overlays (monitoring/, inference-extension/)
with `kubectl kustomize` and checks what every object must have: workloads with
resource requests and limits, readiness and liveness probes, a restricted
security context and a drain-long-enough grace period; secrets referenced, never
inlined; the gateways' config in a ConfigMap that `tachyon config check` accepts;
and that the metric names the engines' autoscaler (through prometheus-adapter)
and the Inference Extension's endpoint picker read are ones a real engine serves.
Exits 77 (skipped) without kubectl. Schemas: tests/deploy/schemas.

  tests/deploy/kustomize_check.py DEPLOY_DIR TACHYON_BINARY
"""
import os, re, shutil, subprocess, sys, tempfile

import yaml

SKIP = 77


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def render(path):
    rendered = subprocess.run(["kubectl", "kustomize", path], capture_output=True, text=True)
    if rendered.returncode != 0:
        fail(f"kubectl kustomize {path}: " + rendered.stderr)
    return [o for o in yaml.safe_load_all(rendered.stdout) if o]


def check_workload(o):
    name = f'{o["kind"]}/{o["metadata"]["name"]}'
    spec = o["spec"]
    pod = spec["template"]["spec"]
    if spec["selector"]["matchLabels"].items() - spec["template"]["metadata"]["labels"].items():
        fail(f"{name}: the selector does not match the pod's labels")
    if pod.get("terminationGracePeriodSeconds", 30) < 15:
        fail(f"{name}: terminationGracePeriodSeconds under the server's 10 s drain plus margin")
    psc = pod.get("securityContext", {})
    if not psc.get("runAsNonRoot"):
        fail(f"{name}: runAsNonRoot is not set")
    for c in pod["containers"]:
        where = f"{name} container {c['name']}"
        res = c.get("resources", {})
        for part in ("requests", "limits"):
            for r in ("cpu", "memory"):
                if r not in res.get(part, {}):
                    fail(f"{where}: no resources.{part}.{r}")
        for probe in ("readinessProbe", "livenessProbe"):
            if probe not in c:
                fail(f"{where}: no {probe}")
        sc = c.get("securityContext", {})
        if sc.get("allowPrivilegeEscalation") is not False:
            fail(f"{where}: allowPrivilegeEscalation must be false")
        if sc.get("readOnlyRootFilesystem") is not True:
            fail(f"{where}: readOnlyRootFilesystem must be true")
        if sc.get("capabilities", {}).get("drop") != ["ALL"]:
            fail(f"{where}: capabilities must drop ALL")
        for env in c.get("env", []):
            if "value" in env and any(w in env["name"].upper() for w in ("KEY", "PASSWORD", "TOKEN", "SECRET")):
                fail(f"{where}: {env['name']} is inlined; take it from a Secret")
        if c.get("image", "").startswith("localhost/tachyon"):
            probe = c["readinessProbe"].get("httpGet", {}).get("path")
            if probe != "/ready":
                fail(f"{where}: a Tachyon container is ready on /ready (model loaded and warm), not {probe}")


def engine_metric_names(tachyon):
    """The metric families a real engine serves: `tachyon serve` (the demo model) on loopback."""
    server = subprocess.Popen([tachyon, "serve", "--port", "0", "--no-warmup"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline()
        url = line[line.index("http://"):].strip()
        text = subprocess.run(["curl", "-s", "--max-time", "20", url + "/metrics"], capture_output=True,
                              text=True).stdout
        return set(re.findall(r"^# TYPE (\S+)", text, re.M))
    finally:
        server.terminate()
        server.wait(timeout=30)


def main():
    deploy, tachyon = sys.argv[1], sys.argv[2]
    if shutil.which("kubectl") is None:
        print("skipped: kubectl is not installed")
        sys.exit(SKIP)
    objects = render(deploy)
    kinds = sorted(o["kind"] for o in objects)
    for need in ["ConfigMap", "Deployment", "HorizontalPodAutoscaler", "NetworkPolicy", "PodDisruptionBudget",
                 "Service", "StatefulSet"]:
        if need not in kinds:
            fail(f"no {need} rendered (got {kinds})")
    overlays = {name: render(os.path.join(deploy, name)) for name in ("monitoring", "inference-extension")}
    if not any(o["kind"] == "ServiceMonitor" for o in overlays["monitoring"]):
        fail("monitoring/ renders no ServiceMonitor")
    if not any(o["kind"] == "InferencePool" for o in overlays["inference-extension"]):
        fail("inference-extension/ renders no InferencePool")
    config = None
    for o in objects + overlays["monitoring"] + overlays["inference-extension"]:
        name = f'{o["kind"]}/{o["metadata"]["name"]}'
        for key in ("apiVersion", "kind", "metadata"):
            if key not in o:
                fail(f"{name}: no {key}")
        if o["kind"] == "Secret":
            fail(f"{name} is inlined in the manifests: secrets are created by the user and referenced")
        if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("tachyon-gateway-config"):
            config = o["data"]["tachyon.toml"]
        if o["kind"] in ("Deployment", "StatefulSet"):
            check_workload(o)
    if config is None:
        fail("no tachyon-gateway-config ConfigMap with tachyon.toml")
    # The real binary reads the config as `tachyon serve` would (the secrets' variables
    # are the pod's: placeholders here).
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tachyon.toml")
        with open(path, "w") as f:
            f.write(config)
        run = subprocess.run([tachyon, "config", "check", "--placeholder-env", path], capture_output=True, text=True,
                             timeout=60)
        if run.returncode != 0:
            fail("tachyon config check refuses the gateway config: " + run.stderr.strip())
        if "discovered by DNS" not in run.stdout:
            fail("the gateway config does not discover the engines by DNS: " + run.stdout)
    # The engines answer to the model name the gateways' routes send (or an upstream_model).
    routes = set(re.findall(r'^model = "([^"]+)"', config, re.M))
    upstream = re.search(r'^upstream_model = "([^"]+)"', config, re.M)
    for o in objects:
        if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "tachyon-engine":
            args = o["spec"]["template"]["spec"]["containers"][0]["args"]
            served = args[args.index("--served-model-name") + 1] if "--served-model-name" in args else None
            wanted_name = upstream.group(1) if upstream else None
            if (wanted_name or served) is None or (served not in routes if not wanted_name else served != wanted_name):
                fail(f"the engines serve {served!r}, the gateways send {wanted_name or sorted(routes)}")
    # The metric names the autoscaler and the endpoint picker read are served by a real engine.
    served = engine_metric_names(tachyon)
    wanted = set()
    hpa = [o for o in objects if o["kind"] == "HorizontalPodAutoscaler" and o["spec"]["scaleTargetRef"]["kind"] == "StatefulSet"]
    if not hpa:
        fail("no HorizontalPodAutoscaler for the engines")
    adapter = yaml.safe_load(open(os.path.join(deploy, "monitoring", "prometheus-adapter-values.yaml")))
    exposed = {}
    for rule in adapter["rules"]["custom"]:
        series = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)", rule["seriesQuery"]).group(1)
        wanted.add(series)
        exposed[re.sub(rule["name"]["matches"], rule["name"]["as"].replace("${1}", r"\1"), series)] = series
    for m in hpa[0]["spec"]["metrics"]:
        if m["type"] == "Pods" and m["pods"]["metric"]["name"] not in exposed:
            fail(f'the engines\' HPA reads {m["pods"]["metric"]["name"]}, which no prometheus-adapter rule serves')
    for o in overlays["inference-extension"]:
        if o["kind"] == "Deployment" and o["metadata"]["name"] == "tachyon-epp":
            for arg in o["spec"]["template"]["spec"]["containers"][0]["args"]:
                if "-metric=" in arg and arg.split("=", 1)[1]:  # an empty name turns the metric off
                    wanted.add(arg.split("=", 1)[1])
    missing = wanted - served
    if missing:
        fail(f"metrics the manifests read but an engine does not serve: {sorted(missing)}")
    total = len(objects) + sum(len(v) for v in overlays.values())
    print(f"ok: {total} objects in the base and 2 overlays ({', '.join(sorted(set(kinds)))} ...); "
          f"engine metrics read by the HPA and the picker: {sorted(wanted)}")


if __name__ == "__main__":
    main()
