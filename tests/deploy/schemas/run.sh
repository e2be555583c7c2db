#!/usr/bin/env bash
# Renders deploy/kubernetes and its overlays with `kubectl kustomize` and validates
# every object offline against its schema (validate.mjs; packages pinned by
# package-lock.json, installed into WORKDIR from the npm registry). Exits 77
# (skipped) without kubectl, node or npm, or when the packages cannot be installed.
#   tests/deploy/schemas/run.sh DEPLOY_DIR WORKDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
deploy=$1 dir=$2
command -v kubectl > /dev/null || { echo "skipped: kubectl is not installed"; exit 77; }
command -v node > /dev/null && command -v npm > /dev/null || { echo "skipped: node and npm are not installed"; exit 77; }
mkdir -p "$dir"
cp "$here/package.json" "$here/package-lock.json" "$here/validate.mjs" "$dir/"
if ! cmp -s "$here/package-lock.json" "$dir/node_modules/.package-lock.json.installed" 2>/dev/null; then
  if ! (cd "$dir" && timeout 300 npm ci --no-audit --no-fund --ignore-scripts > npm.log 2>&1); then
    echo "skipped: npm ci failed (no registry?)"; tail -5 "$dir/npm.log"; exit 77
  fi
  cp "$here/package-lock.json" "$dir/node_modules/.package-lock.json.installed"
fi
files=()
for overlay in "$deploy" "$deploy/monitoring" "$deploy/inference-extension"; do
  out="$dir/$(basename "$overlay").yaml"
  kubectl kustomize "$overlay" > "$out"
  files+=("$out")
done
# The validator refuses what it must (else a pass would mean nothing).
cp "$here/broken.yaml" "$dir/"
if refused=$(cd "$dir" && node validate.mjs broken.yaml); then
  echo "FAIL: validate.mjs accepted broken.yaml"; exit 1
fi
if ! grep -q "^0 of 4 objects valid" <<<"$refused"; then
  echo "FAIL: validate.mjs refused not exactly the 4 broken objects:"; echo "$refused"; exit 1
fi
(cd "$dir" && node validate.mjs "${files[@]}")
