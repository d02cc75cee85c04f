#!/usr/bin/env bash
# Build the `helm` CLI from the Go module proxy (no other network) into
#   ${LABKIT_CACHE:-$HOME/.cache/dra-labkit}/helm/<version>/helm
# for the fake driver's chart tests (tests/fake_gpus/test_fake_gpus_helm.py, tests/e2e/test_cluster_kind_e2e.py).
# A cached binary of that version is reused; the last line printed is the binary's path.
#
# usage: tools/build-helm.sh [VERSION]       (default v4.3.1; v3.x builds helm.sh/helm/v3)
#   LABKIT_FORCE_BUILD=1   rebuild even when the cached binary exists
#
# Why Helm 4: Helm 3 gets no more security fixes after 2026-11-11 (the Helm 4 release announcement),
# and charts of apiVersion v2 (what fake_gpus/deploy/helm/fake-gpus is) install unchanged with both.
set -euo pipefail

VERSION="${1:-${LABKIT_HELM_VERSION:-v4.3.1}}"
[[ "$VERSION" == v* ]] || VERSION="v$VERSION"
if [[ ! "$VERSION" =~ ^v([34])\.[0-9]+\.[0-9]+$ ]]; then
  echo "build-helm: version '$VERSION' must look like v4.3.1 or v3.22.0" >&2
  exit 2
fi
MAJOR="${BASH_REMATCH[1]}"
CACHE="${LABKIT_CACHE:-$HOME/.cache/dra-labkit}"
OUT="$CACHE/helm/$VERSION"
BIN="$OUT/helm"
export GOFLAGS="${GOFLAGS:--mod=mod}"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

t0=$SECONDS
say() { printf 'build-helm: %s (%ds)\n' "$*" "$((SECONDS - t0))" >&2; }

if [[ -z "${LABKIT_FORCE_BUILD:-}" && -x "$BIN" ]]; then
  say "cached: helm $VERSION"
  echo "$BIN"
  exit 0
fi

# one build per version at a time (make test and a developer may both ask)
mkdir -p "$OUT"
exec 9>"$OUT/.lock"
if command -v flock >/dev/null; then
  flock 9
  if [[ -z "${LABKIT_FORCE_BUILD:-}" && -x "$BIN" ]]; then
    say "cached (built by a concurrent run): helm $VERSION"
    echo "$BIN"
    exit 0
  fi
fi
command -v go >/dev/null || { echo "build-helm: Go is not installed; install Go >= 1.26" >&2; exit 1; }

MOD="helm.sh/helm/v$MAJOR"
# helm's own Makefile stamps the version the same way (`helm version` prints it)
LDFLAGS="-s -w -X $MOD/internal/version.version=$VERSION -X $MOD/internal/version.gitTreeState=clean"
say "building helm $VERSION from the module proxy (cold: a few minutes on 2 busy cores)"
GOBIN="$OUT/.gobin.$$"
trap 'rm -rf "$GOBIN"' EXIT
CGO_ENABLED=0 GOBIN="$GOBIN" go install -trimpath -ldflags "$LDFLAGS" "$MOD/cmd/helm@$VERSION"
mv "$GOBIN/helm" "$BIN"
"$BIN" version --short >&2
say "built helm $VERSION in $((SECONDS - t0))s"
echo "$BIN"
