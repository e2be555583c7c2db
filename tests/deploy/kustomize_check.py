#!/usr/bin/env python3
"""Renders deploy/kubernetes with `kubectl kustomize` and checks what every object
must have: workloads with resource requests and limits, readiness and liveness
probes, a restricted security context and a drain-long-enough grace period;
secrets referenced, never inlined; the gateways' config in a ConfigMap that the
real binary reads (`tachyon serve --config` refusing nothing but the missing
network). Exits 77 (skipped) without kubectl.

  tests/deploy/kustomize_check.py DEPLOY_DIR TACHYON_BINARY
"""
import os, shutil, subprocess, sys, tempfile

import yaml

SKIP = 77


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    deploy, tachyon = sys.argv[1], sys.argv[2]
    if shutil.which("kubectl") is None:
        print("skipped: kubectl is not installed")
        sys.exit(SKIP)
    rendered = subprocess.run(["kubectl", "kustomize", deploy], capture_output=True, text=True)
    if rendered.returncode != 0:
        fail("kubectl kustomize: " + rendered.stderr)
    objects = [o for o in yaml.safe_load_all(rendered.stdout) if o]
    kinds = sorted(o["kind"] for o in objects)
    for need in ["ConfigMap", "Deployment", "HorizontalPodAutoscaler", "NetworkPolicy", "PodDisruptionBudget",
                 "Service", "StatefulSet"]:
        if need not in kinds:
            fail(f"no {need} rendered (got {kinds})")
    if "Secret" in kinds:
        fail("a Secret is inlined in the manifests: secrets are created by the user and referenced")
    config = None
    for o in objects:
        name = f'{o["kind"]}/{o["metadata"]["name"]}'
        for key in ("apiVersion", "kind", "metadata"):
            if key not in o:
                fail(f"{name}: no {key}")
        if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("tachyon-gateway-config"):
            config = o["data"]["tachyon.toml"]
        if o["kind"] not in ("Deployment", "StatefulSet"):
            continue
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
    if config is None:
        fail("no tachyon-gateway-config ConfigMap with tachyon.toml")
    # The real binary reads the config: with the secrets' variables set, the only
    # thing it may not do here is reach Redis (the store is checked at start).
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tachyon.toml")
        with open(path, "w") as f:
            f.write(config)
        env = dict(os.environ, TACHYON_API_KEY="k", ENGINE_API_KEY="e", REDIS_PASSWORD="p")
        try:
            run = subprocess.run([tachyon, "audit", "--config", path, "/dev/null"], capture_output=True, text=True,
                                 env=env, timeout=60)
        except subprocess.TimeoutExpired:
            fail("tachyon audit --config took over 60 s")
        if "no chat or completion requests" not in run.stderr:
            fail("the gateway config does not load: " + run.stderr.strip())
    print(f"ok: {len(objects)} objects ({', '.join(sorted(set(kinds)))})")


if __name__ == "__main__":
    main()
