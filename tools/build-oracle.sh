#!/usr/bin/env bash
# Build the differential oracle (tools/oracle) against the real Kubernetes
# structured allocator, through the Go module proxy.
#   bash tools/build-oracle.sh [VERSION...]     VERSION: 0.37 (default), 0.36, 0.35, 0.34 or a full v0.3x.y
# Binaries: ${LABKIT_CACHE:-$HOME/.cache/dra-labkit}/oracle/oracle-<version>; oracle-0.37 is the one tests use.
# A build is skipped when the binary was built from the same inputs: a digest of the sources, this
# script, the gate table and the release, kept beside it (<binary>.inputs; see build-inputs.sh).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/oracle"
# the one feature-gate table (labkit/api/features.py reads it too); embedded into the binary
gates_json="$here/../labkit/api/feature_gates.json"
out_dir="${LABKIT_CACHE:-$HOME/.cache/dra-labkit}/oracle"
mkdir -p "$out_dir"

if ! command -v go >/dev/null 2>&1; then
  echo "build-oracle: Go is not installed; install Go >= 1.24 to build the oracle" >&2
  exit 1
fi

# Newest patch releases known to work; the go.mod in tools/oracle pins 0.37.
declare -A pins=([0.34]=v0.34.13 [0.35]=v0.35.10 [0.36]=v0.36.6 [0.37]=v0.37.2)

source "$here/build-inputs.sh"

build_one() {
  local want="$1" minor full bin
  minor="$(sed -E 's/^v?([0-9]+\.[0-9]+).*/\1/' <<<"$want")"
  full="${pins[$minor]:-}"
  [[ "$want" == v*.*.* || "$want" == *.*.* ]] && full="v${want#v}"
  if [[ -z "$full" ]]; then
    echo "build-oracle: unknown version '$want' (use 0.34, 0.35, 0.36 or 0.37)" >&2
    return 1
  fi
  bin="$out_dir/oracle-$minor"
  local digest
  digest="$(inputs_digest "$full" "$src" "${BASH_SOURCE[0]}" "$gates_json")"
  if built_from "$bin" "$digest"; then
    echo "$bin (up to date)"
    return 0
  fi
  local start=$SECONDS
  # Every release builds in a scratch copy: the sources plus the gate table they embed.
  local work
  work="$(mktemp -d)"
  cp "$src"/*.go "$gates_json" "$work"/
  if [[ "$minor" == "0.37" ]]; then
    cp "$src"/go.mod "$src"/go.sum "$work"/
    (cd "$work" && go build -trimpath -o "$bin.tmp" .) || { rm -rf "$work"; return 1; }
    rm -rf "$work"
  else
    # Older releases: a go.mod that requires that release.
    printf 'module github.com/dra-labkit/oracle\n\ngo 1.24\n' >"$work/go.mod"
    (cd "$work" && go get "k8s.io/dynamic-resource-allocation@$full" "sigs.k8s.io/yaml" >"$work/log" 2>&1 \
      && go mod tidy >>"$work/log" 2>&1 && go build -trimpath -tags "dra${minor/./}" -o "$bin.tmp" . >>"$work/log" 2>&1) \
      || { tail -20 "$work/log" >&2; rm -rf "$work"; return 1; }
    rm -rf "$work"
  fi
  mv "$bin.tmp" "$bin"
  echo "$digest" > "$bin.inputs"
  echo "$bin (built $full in $((SECONDS - start))s)"
}

versions=("$@")
[[ ${#versions[@]} -eq 0 ]] && versions=(0.37)
status=0
for v in "${versions[@]}"; do
  build_one "$v" || { echo "build-oracle: build of $v failed" >&2; status=1; }
done
exit $status
