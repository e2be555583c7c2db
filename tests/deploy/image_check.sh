#!/usr/bin/env bash
# `make test-image`: builds the OCI image (scripts/build-image) and checks it without
# starting a container (these machines refuse the container runtime's setrlimit):
#   - its config: user 10001:10001, entrypoint ["tachyon"], port 8000, the labels;
#   - its root: no shell, and every shared library the binary needs resolved by
#     the image's own loader inside the image (nothing from the host);
#   - its binary, run with chroot in the mounted root as user 10001: /health,
#     /ready and one completion of the demo model over loopback.
# Skips (exit 0 with a message) when buildah cannot be installed or used here.
set -euo pipefail
cd "$(dirname "$0")/../.."

skip() { echo "image check: SKIPPED: $*"; exit 0; }
fail() { echo "image check: FAILED: $*" >&2; exit 1; }

if [ "$(id -u)" -ne 0 ]; then skip "needs root (buildah mount and chroot)"; fi
./scripts/setup image >/dev/null 2>&1 || skip "buildah and mmdebstrap could not be installed"
command -v buildah >/dev/null || skip "buildah is absent"

./scripts/build-image "$@"
version=$(build/release/src/cli/tachyon --version | awk '{print $2}')
image=localhost/tachyon:$version

container=$(buildah from "$image")
root=""
pid=""
config=""
log=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  [ -n "$root" ] && umount "$root/proc" 2>/dev/null || true
  rm -f "$config" "$log"
  buildah umount "$container" >/dev/null 2>&1 || true
  buildah rm "$container" >/dev/null 2>&1 || true
}
trap cleanup EXIT
root=$(buildah mount "$container")

# The config.
config=$(mktemp)
buildah inspect --type image "$image" >"$config"
check() {  # check WHAT PYTHON-EXPRESSION-ON-c (c: the image's OCI config)
  python3 - "$config" "$1" "$2" <<'EOF' || fail "$1"
import json, sys
c = json.load(open(sys.argv[1]))["OCIv1"]["config"]
ok = eval(sys.argv[3])
print(("ok   " if ok else "FAIL ") + sys.argv[2])
sys.exit(0 if ok else 1)
EOF
}
check "user 10001:10001 (not root)" 'c.get("User") == "10001:10001"'
check "entrypoint [\"tachyon\"]" 'c.get("Entrypoint") == ["tachyon"]'
check "EXPOSE 8000" '"8000/tcp" in c.get("ExposedPorts", {})'
check "labels: version $version and the source revision" \
  "c['Labels'].get('org.opencontainers.image.version') == '$version' and len(c['Labels'].get('org.opencontainers.image.revision', '')) >= 40"
[ -s build/image/tachyon.oci.tar ] || fail "build/image/tachyon.oci.tar was not written"
echo "ok   build/image/tachyon.oci.tar ($(du -h build/image/tachyon.oci.tar | cut -f1))"

# The root: no shell, the binary's libraries all inside.
for sh in bin/sh bin/bash bin/dash usr/bin/sh; do
  [ ! -e "$root/$sh" ] || fail "the image has a shell: /$sh"
done
echo "ok   no shell in the image"
libs=$(chroot "$root" /lib64/ld-linux-x86-64.so.2 --list /usr/local/bin/tachyon) || fail "the image's loader cannot load the binary"
if grep -q "not found" <<<"$libs"; then fail "libraries missing from the image: $(grep 'not found' <<<"$libs")"; fi
echo "ok   every shared library resolved inside the image ($(grep -c '=>' <<<"$libs") of them)"
[ -s "$root/etc/ssl/certs/ca-certificates.crt" ] || fail "no CA bundle at /etc/ssl/certs/ca-certificates.crt"
echo "ok   CA bundle ($(grep -c 'BEGIN CERTIFICATE' "$root/etc/ssl/certs/ca-certificates.crt") certificates)"

# The image's own binary, serving from its own root as its own user.
mkdir -p "$root/proc"
mount -t proc proc "$root/proc" 2>/dev/null || echo "note: /proc not mounted in the image root (it serves without)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=$(mktemp)
chroot --userspec=10001:10001 "$root" /usr/local/bin/tachyon serve --host 127.0.0.1 --port "$port" >"$log" 2>&1 &
pid=$!
url=http://127.0.0.1:$port
for _ in $(seq 1 300); do
  curl -fs "$url/ready" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { cat "$log"; fail "the image's binary exited"; }
  sleep 0.1
done
curl -fs "$url/health" | grep -q '"status":"ok"' || { cat "$log"; fail "/health"; }
echo "ok   /health from the image's binary (chroot, user 10001)"
curl -fs "$url/ready" | grep -q '"status":"ready"' || { cat "$log"; fail "/ready"; }
echo "ok   /ready: the demo engine warmed up"
answer=$(curl -fs "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt":"Hello","max_tokens":8,"temperature":0}') || { cat "$log"; fail "the completion"; }
python3 -c 'import json,sys; a=json.loads(sys.argv[1]); assert 1 <= a["usage"]["completion_tokens"] <= 8 and "text" in a["choices"][0], a' "$answer" ||
  fail "the completion: $answer"
echo "ok   one completion from the image's binary"
kill -TERM "$pid"
wait "$pid" || true
pid=""
echo "image check: passed ($image)"
