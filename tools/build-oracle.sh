#!/usr/bin/env bash
# Build the differential oracle (tools/oracle) against the real Kubernetes
# structured allocator, through the Go module proxy.
#   bash tools/build-oracle.sh [VERSION...]     VERSION: 0.37 (default), 0.38, 0.36, 0.35, 0.34 (tools/kubernetes-releases.env) or a full v0.3x.y
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

# The release of each minor: tools/kubernetes-releases.env (KUBE_1_37=v1.37.2 -> pins[0.37]=v0.37.2),
# the one place for the pins; the go.mod in tools/oracle pins 0.37. 0.38: the beta until the module
# proxy serves v0.38.0 (then change that one line; the binary rebuilds by itself).
declare -A pins=()
while IFS='=' read -r key value; do
  if [[ "$key" =~ ^KUBE_1_([0-9]+)$ ]]; then pins["0.${BASH_REMATCH[1]}"]="v0.${value#v1.}"; fi
done < <(grep -E '^KUBE_1_[0-9]+=' "$here/kubernetes-releases.env")
# Releases that need a newer Go than the machine's: the toolchain the Go command fetches from the
# module proxy for them (Kubernetes 1.38 needs Go >= 1.27.0 and is built with go1.27.3).
declare -A toolchains=([0.38]=go1.27.3)

source "$here/build-inputs.sh"

build_one() {
  local want="$1" minor full bin
  minor="$(sed -E 's/^v?([0-9]+\.[0-9]+).*/\1/' <<<"$want")"
  full="${pins[$minor]:-}"
  [[ "$want" == v*.*.* || "$want" == *.*.* ]] && full="v${want#v}"
  if [[ -z "$full" ]]; then
    echo "build-oracle: unknown version '$want' (use one of: ${!pins[*]})" >&2
    return 1
  fi
  bin="$out_dir/oracle-$minor"
  local digest
  local toolchain="${toolchains[$minor]:-${GOTOOLCHAIN:-}}"
  digest="$(inputs_digest "$full${toolchain:+ $toolchain}" "$src" "${BASH_SOURCE[0]}" "$gates_json")"
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
    # Other releases: a go.mod that requires that release.
    printf 'module github.com/dra-labkit/oracle\n\ngo 1.24\n' >"$work/go.mod"
    (cd "$work" && { [[ -z "$toolchain" ]] || export GOTOOLCHAIN="$toolchain"; } && go get "k8s.io/dynamic-resource-allocation@$full" "sigs.k8s.io/yaml" >"$work/log" 2>&1 \
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
