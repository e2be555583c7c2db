#!/usr/bin/env python3
"""The fleet of deploy/local/fleet.sh under load: 2 engines (found by DNS through a
hosts file), 2 gateways, one Redis. Bounded (about 20 s); every process is stopped by
its pid (fleet.sh stop). Checks:
  1. streams through both gateways while engine 1 is killed (SIGKILL) mid-run: the
     only failed requests are ones in flight on engine 1 when it died; later ones
     are answered by engine 2;
  2. the engine's address leaves the name (the hosts file, as a pod leaves its
     Service): the gateways drop it from their backends within the interval;
  3. an answer cached through gateway 1 is a hit through gateway 2 (Redis);
  4. gateway 1 killed: gateway 2 keeps serving.
Exits 77 (skipped) without redis-server.

  tests/deploy/fleet_check.py FLEET_SH TACHYON_BINARY
"""
import http.client, json, os, random, shutil, subprocess, sys, tempfile, threading, time

SKIP = 77


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def request(url, body, timeout=30):
    """POST /v1/completions; returns (status, headers, text, complete)."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = conn.getresponse()
        headers = {k.lower(): v for k, v in r.getheaders()}
        text = r.read().decode("utf-8", "replace")
        complete = r.status == 200 and (not body.get("stream") or
                                        (text.rstrip().endswith("data: [DONE]") and '"error"' not in text))
        return r.status, headers, text, complete
    except (OSError, http.client.HTTPException) as e:
        return 0, {}, str(e), False
    finally:
        conn.close()


def health(url):
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("GET", "/health")
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


def main():
    fleet_sh, tachyon = sys.argv[1], sys.argv[2]
    if shutil.which("redis-server") is None:
        print("skipped: redis-server is not installed")
        sys.exit(SKIP)
    work = tempfile.mkdtemp(prefix="tachyon-fleet-")
    # Fixed ports (base, base+100.., base+200) below the kernel's ephemeral range
    # (32768 up, by default), where tests running beside this one take theirs; a
    # port taken anyway (another run of this check) gets two more tries elsewhere.
    for attempt in range(3):
        base = 20000 + random.randrange(0, 250) * 50
        start = subprocess.run([fleet_sh, "start", work, "--tachyon", tachyon, "--port", str(base)],
                               capture_output=True, text=True, timeout=120)
        if start.returncode == 0:
            break
        subprocess.run([fleet_sh, "stop", work])
    if start.returncode != 0:
        fail("fleet.sh start: " + start.stdout + start.stderr)
    try:
        procs = {}
        for line in open(os.path.join(work, "fleet.txt")):
            name, url, _, pid = line.split()
            procs[name] = (url, int(pid))
        check(fleet_sh, work, procs)
    finally:
        subprocess.run([fleet_sh, "stop", work], timeout=60)
        shutil.rmtree(work, ignore_errors=True)


def check(fleet_sh, work, procs):
    gateways = [procs["gateway-1"][0], procs["gateway-2"][0]]
    killed_member = "engines/127.0.0.11"

    # 1. Load through both gateways; engine 1 dies 1.5 s in.
    records, lock = [], threading.Lock()
    stop_at = time.monotonic() + 4.0

    def client(k):
        i = 0
        while time.monotonic() < stop_at:
            body = {"prompt": f"client {k} request {i}: tell a story", "max_tokens": 300, "ignore_eos": True,
                    "temperature": 0, "stream": True}
            began = time.monotonic()
            status, headers, _, complete = request(gateways[(k + i) % 2], body)
            with lock:
                records.append({"began": began, "ended": time.monotonic(), "status": status, "complete": complete,
                                "backend": headers.get("x-tachyon-backend", "")})
            i += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    os.kill(procs["engine-1"][1], 9)
    killed_at = time.monotonic()
    for t in threads:
        t.join()
    failed = [r for r in records if not r["complete"]]
    in_flight = [r for r in records if r["backend"] == killed_member and r["began"] < killed_at < r["ended"]]
    after = [r for r in records if r["began"] > killed_at + 0.2]
    for r in failed:
        if r["began"] > killed_at or r["backend"] != killed_member:
            fail(f"a request failed that was not in flight on the killed engine: {r}")
    if len(failed) > len(in_flight):
        fail(f"{len(failed)} failed requests, {len(in_flight)} were in flight on the killed engine")
    if not after or any(not r["complete"] or r["backend"] != "engines/127.0.0.12" for r in after):
        fail(f"requests after the kill were not all answered by engine 2: {after[:5]}")
    before = [r for r in records if r["ended"] < killed_at]
    if not any(r["backend"] == killed_member for r in before):
        fail("engine 1 took no request before it was killed: the test proves nothing")
    print(f"load: {len(records)} streams through 2 gateways, engine 1 killed after {len(before)} had finished: "
          f"{len(failed)} failed, all of them among the {len(in_flight)} in flight on it; "
          f"{len(after)} later streams all answered by engine 2")

    # 2. The killed engine's address leaves the name: the gateways drop it.
    subprocess.run([fleet_sh, "engine-hosts", work, "2"], check=True)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        members = [set(health(g)["backends"]) for g in gateways]
        if all(m == {"engines/127.0.0.12"} for m in members):
            break
        time.sleep(0.1)
    else:
        fail(f"the gateways still list {members} 5 s after the address left the name")
    print(f"discovery: both gateways dropped {killed_member} after it left the name")

    # 3. Written through gateway 1, a hit through gateway 2.
    body = {"prompt": "the shared cache question", "max_tokens": 8, "temperature": 0}
    status, headers, first, _ = request(gateways[0], body)
    if status != 200 or headers.get("x-tachyon-cache") != "miss":
        fail(f"the first answer: {status} {headers} {first[:200]}")
    for _ in range(50):  # the store is written after the answer
        status, headers, second, _ = request(gateways[1], body)
        if headers.get("x-tachyon-cache") == "hit":
            break
        time.sleep(0.05)
    if headers.get("x-tachyon-cache") != "hit" or json.loads(second)["choices"] != json.loads(first)["choices"]:
        fail(f"gateway 2 did not answer from the cache gateway 1 wrote: {headers} {second[:200]}")
    print("cache: an answer written through gateway 1 is a hit through gateway 2")

    # 4. Gateway 1 dies; gateway 2 serves on.
    os.kill(procs["gateway-1"][1], 9)
    results = [request(gateways[1], {"prompt": f"after gateway 1 died {i}", "max_tokens": 16, "temperature": 0})
               for i in range(10)]
    if any(r[0] != 200 for r in results):
        fail(f"gateway 2 failed after gateway 1 died: {[r[0] for r in results]}")
    print("gateway 1 killed: 10 of 10 requests answered by gateway 2")


if __name__ == "__main__":
    main()
