#!/usr/bin/env bash
# Build `actionlint` (GitHub Actions workflow linter) from the Go module proxy (no other network) into
#   ${LABKIT_CACHE:-$HOME/.cache/dra-labkit}/bin/actionlint
# for tests/packaging/test_workflows_actionlint.py, which lints every file in .github/workflows/.
# A cached binary of the pinned version is reused; the last line printed is the binary's path.
#
# usage: tools/build-actionlint.sh [VERSION]   (default v1.7.12)
#   LABKIT_FORCE_BUILD=1   rebuild even when the cached binary is of that version
set -euo pipefail

VERSION="${1:-${LABKIT_ACTIONLINT_VERSION:-v1.7.12}}"
[[ "$VERSION" == v* ]] || VERSION="v$VERSION"
if [[ ! "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "build-actionlint: version '$VERSION' must look like v1.7.12" >&2
  exit 2
fi
CACHE="${LABKIT_CACHE:-$HOME/.cache/dra-labkit}"
OUT="$CACHE/bin"
BIN="$OUT/actionlint"
export GOFLAGS="${GOFLAGS:--mod=mod}"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

t0=$SECONDS
say() { printf 'build-actionlint: %s (%ds)\n' "$*" "$((SECONDS - t0))" >&2; }
# `actionlint -version` prints the version on its first line (stamped below, as actionlint's release does)
cached() { [[ -x "$BIN" ]] && [[ "$("$BIN" -version 2>/dev/null | head -1)" == "$VERSION" ]]; }

if [[ -z "${LABKIT_FORCE_BUILD:-}" ]] && cached; then
  say "cached: actionlint $VERSION"
  echo "$BIN"
  exit 0
fi

mkdir -p "$OUT"
exec 9>"$OUT/.actionlint.lock"
if command -v flock >/dev/null; then
  flock 9
  if [[ -z "${LABKIT_FORCE_BUILD:-}" ]] && cached; then
    say "cached (built by a concurrent run): actionlint $VERSION"
    echo "$BIN"
    exit 0
  fi
fi
command -v go >/dev/null || { echo "build-actionlint: Go is not installed; install Go >= 1.24" >&2; exit 1; }

say "building actionlint $VERSION from the module proxy"
GOBIN="$OUT/.gobin.$$"
trap 'rm -rf "$GOBIN"' EXIT
CGO_ENABLED=0 GOBIN="$GOBIN" go install -trimpath \
  -ldflags "-s -w -X github.com/rhysd/actionlint.version=$VERSION" \
  "github.com/rhysd/actionlint/cmd/actionlint@$VERSION"
mv "$GOBIN/actionlint" "$BIN"
say "built actionlint $("$BIN" -version | head -1)"
echo "$BIN"
