#!/usr/bin/env bash
# Build the CEL oracle (tools/cel-oracle): Kubernetes' own DRA CEL environment
# (k8s.io/dynamic-resource-allocation/cel, 1.37) behind a small CLI, through the Go module proxy.
# Binary: ${LABKIT_CACHE:-$HOME/.cache/dra-labkit}/cel-oracle/cel-oracle (rebuilt when a digest of
# its sources and this script, kept in <binary>.inputs, changes; not mtimes: a fresh clone's are all new).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/cel-oracle"
out="${LABKIT_CACHE:-$HOME/.cache/dra-labkit}/cel-oracle/cel-oracle"
mkdir -p "$(dirname "$out")"
if ! command -v go >/dev/null 2>&1; then
  echo "build-cel-oracle: Go is not installed; the CEL oracle tests will be skipped" >&2
  exit 0
fi
source "$here/build-inputs.sh"
digest="$(inputs_digest "" "$src" "${BASH_SOURCE[0]}")"
if built_from "$out" "$digest"; then
  echo "$out (up to date)"
  exit 0
fi
start=$(date +%s)
(cd "$src" && GOFLAGS=-mod=mod go build -trimpath -o "$out" .)
echo "$digest" > "$out.inputs"
echo "$out (built in $(( $(date +%s) - start ))s)"
