#!/usr/bin/env bash
# Build (or download) the Kubernetes control-plane binaries used by labkit's `local` backend:
#   etcd, kube-apiserver, kube-scheduler, kube-controller-manager
# into ${LABKIT_CACHE:-$HOME/.cache/dra-labkit}/controlplane/<minor>/bin/.
#
# usage: tools/build-controlplane.sh [MINOR]        (MINOR defaults to 1.37)
#   LABKIT_DOWNLOAD_BINARIES=1  fetch official release binaries instead of building (kube-* from
#                               dl.k8s.io, etcd from its GitHub release); not exercised in CI
#   LABKIT_FORCE_BUILD=1        rebuild even when cached binaries exist
#
# Why a wrapper module: `go install k8s.io/kubernetes/cmd/...@vX` fails because k8s.io/kubernetes
# points its staging modules (k8s.io/api, k8s.io/client-go, ...) at ./staging with replace
# directives. tools/controlplane/go.mod requires k8s.io/kubernetes and replaces every staging
# module with its published v0.X.Y tag. The committed go.mod/go.sum pin the default version; any
# other minor is generated into the cache from that version's go.mod on the proxy.
#
# Any other minor builds the release pinned in tools/kubernetes-releases.env (the one place for
# the pins; 1.38: v1.38.0-beta.0), else the newest patch release the module proxy serves.
#
# The cache directory gets a VERSION file holding the exact Kubernetes version built (for
# example v1.37.1 when v1.37.2 exists but its source is not on the module proxy).
set -euo pipefail

MINOR="${1:-1.37}"
MINOR="${MINOR#v}"
if [[ ! "$MINOR" =~ ^1\.[0-9]+$ ]]; then
  echo "build-controlplane: version '$MINOR' must look like 1.37" >&2
  exit 2
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${LABKIT_CACHE:-$HOME/.cache/dra-labkit}"
OUT="$CACHE/controlplane/$MINOR"
BIN="$OUT/bin"
ETCD_VERSION="${LABKIT_ETCD_VERSION:-}"
COMPONENTS=(kube-apiserver kube-scheduler kube-controller-manager)
export GOFLAGS="${GOFLAGS:--mod=mod}"
# the Go toolchain: the minor's GO_<major>_<minor> line in tools/kubernetes-releases.env (1.38 needs Go >= 1.27:
# go1.27.3, fetched from the module proxy) unless $GOTOOLCHAIN names another; else the local Go. (An unset or
# `local` GOTOOLCHAIN does not outvote the pin: actions/setup-go exports GOTOOLCHAIN=local.)
release_pin() { # key -> its value in tools/kubernetes-releases.env (empty when absent)
  awk -F= -v k="$1" '$1==k {print $2}' "$ROOT/tools/kubernetes-releases.env"
}
GO_PIN="$(release_pin "GO_${MINOR/./_}")"
[[ -z "$GO_PIN" || "${GOTOOLCHAIN:-local}" != local ]] || GOTOOLCHAIN="$GO_PIN"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

t0=$SECONDS
say() { printf 'build-controlplane: %s (%ds)\n' "$*" "$((SECONDS - t0))"; }

have_all() {
  for c in etcd "${COMPONENTS[@]}"; do [[ -x "$BIN/$c" ]] || return 1; done
  [[ -s "$OUT/VERSION" ]]
}

if [[ -z "${LABKIT_FORCE_BUILD:-}" ]] && have_all; then
  say "cached: $(cat "$OUT/VERSION") in $BIN"
  exit 0
fi

# one build per version at a time (make test, notebooks and CI may all ask at once)
mkdir -p "$OUT"
exec 9>"$OUT/.lock"
if command -v flock >/dev/null; then
  flock 9
  if [[ -z "${LABKIT_FORCE_BUILD:-}" ]] && have_all; then
    say "cached (built by a concurrent run): $(cat "$OUT/VERSION") in $BIN"
    exit 0
  fi
fi

# ---- official release binaries (for online users without Go; NOT exercised by labkit's CI,
# which only reaches the Go module proxy): kube-* from dl.k8s.io, etcd from its GitHub release.
if [[ "${LABKIT_DOWNLOAD_BINARIES:-}" == 1 ]]; then
  arch="$(uname -m)"; case "$arch" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
  KV="${LABKIT_KUBE_VERSION:-$(curl -fsSL "https://dl.k8s.io/release/stable-$MINOR.txt")}"
  mkdir -p "$BIN"
  for c in "${COMPONENTS[@]}"; do
    say "downloading $c $KV"
    curl -fsSL --retry 3 -o "$BIN/$c.tmp.$$" "https://dl.k8s.io/release/$KV/bin/linux/$arch/$c"
    echo "$(curl -fsSL --retry 3 "https://dl.k8s.io/release/$KV/bin/linux/$arch/$c.sha256")  $BIN/$c.tmp.$$" \
      | sha256sum -c --quiet -
    chmod +x "$BIN/$c.tmp.$$" && mv "$BIN/$c.tmp.$$" "$BIN/$c"
  done
  if [[ ! -x "$BIN/etcd" ]]; then
    EV="${LABKIT_ETCD_VERSION:-$(awk '$1=="go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2}' "$ROOT/tools/controlplane/etcd/go.mod" | head -1)}"
    say "downloading etcd $EV"
    tgz="$(mktemp)"
    curl -fsSL --retry 3 -o "$tgz" "https://github.com/etcd-io/etcd/releases/download/$EV/etcd-$EV-linux-$arch.tar.gz"
    tar -xzf "$tgz" -C "$BIN" --strip-components=1 "etcd-$EV-linux-$arch/etcd"
    rm -f "$tgz"
    echo "$EV" > "$OUT/ETCD_VERSION"
  fi
  echo "$KV" > "$OUT/VERSION"
  "$BIN/kube-apiserver" --version
  say "done (downloaded): $BIN"
  exit 0
fi

command -v go >/dev/null || { echo "build-controlplane: Go is not installed; install Go >= 1.26 or set LABKIT_DOWNLOAD_BINARIES=1" >&2; exit 1; }
mkdir -p "$BIN"

# ---- which k8s.io/kubernetes version: the newest v<MINOR>.x whose source zip the proxy serves
module_zip_ok() { # module version -> 0 when `go mod download` can fetch the zip
  (cd "$WORK" && go mod download "$1@$2" >/dev/null 2>&1)
}
WORK="$(mktemp -d "${TMPDIR:-/tmp}/labkit-cp.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
(cd "$WORK" && go mod init labkit.dev/probe >/dev/null 2>&1)

pick_version() { # module prefix -> newest released version under MINOR that downloads
  local mod="$1" prefix="$2" v
  for v in $(cd "$WORK" && go list -m -versions "$mod" 2>/dev/null | tr ' ' '\n' | grep -E "^${prefix//./\\.}\.[0-9]+$" | sort -t. -k3,3nr); do
    if module_zip_ok "$mod" "$v"; then echo "$v"; return 0; fi
    echo "build-controlplane: $mod@$v is listed but its source is not on the proxy; trying older" >&2
  done
  return 1
}

SRC="$ROOT/tools/controlplane"
# the version tidy wrote into the committed wrapper (a require line, possibly inside a block)
PINNED="$(awk '$1=="k8s.io/kubernetes" && $2 ~ /^v/ {print $2} $1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$SRC/go.mod" | head -1)"
if [[ -n "${LABKIT_KUBE_VERSION:-}" ]]; then
  KV="$LABKIT_KUBE_VERSION"
elif [[ "$PINNED" == "v$MINOR".* ]] && module_zip_ok k8s.io/kubernetes "$PINNED"; then
  KV="$PINNED"
elif RELEASE="$(release_pin "KUBE_${MINOR/./_}")" \
    && [[ -n "$RELEASE" ]] && module_zip_ok k8s.io/kubernetes "$RELEASE"; then
  KV="$RELEASE"  # another minor: its pin (tools/kubernetes-releases.env; 1.38: the beta)
else
  KV="$(pick_version k8s.io/kubernetes "v$MINOR")" || {
    echo "build-controlplane: no v$MINOR.x of k8s.io/kubernetes is downloadable from $(go env GOPROXY)" >&2; exit 1; }
fi
STAGING_V="v0.${KV#v1.}"
say "Kubernetes $KV (staging modules $STAGING_V, Go toolchain $GOTOOLCHAIN)"

# etcd: the committed tools/controlplane/etcd module for the default minor; another minor builds the
# etcd its release pins (k8s.io/kubernetes build/dependencies.yaml, name "etcd"; 1.38: 3.7.1)
if [[ -z "$ETCD_VERSION" && "$PINNED" != "$KV" ]]; then
  kdir="$(cd "$WORK" && go mod download -json "k8s.io/kubernetes@$KV" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')"
  ev="$(awk '$0 ~ /- name: "etcd"$/ {f=1; next} f && $1=="version:" {print $2; exit}' "$kdir/build/dependencies.yaml" 2>/dev/null || true)"
  [[ -z "$ev" ]] || ETCD_VERSION="v${ev#v}"
fi

# ---- build from the module proxy
prepare_module() { # -> directory holding the wrapper module for $KV
  if [[ "$PINNED" == "$KV" ]]; then echo "$SRC"; return; fi
  local dir="$OUT/module"; mkdir -p "$dir"
  local kmod; kmod="$(cd "$WORK" && go mod download -json "k8s.io/kubernetes@$KV" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')"
  {
    echo "module labkit.dev/controlplane"; echo
    echo "go $(awk '/^go /{print $2}' "$kmod")"; echo
    echo "tool ("
    for c in "${COMPONENTS[@]}"; do echo "	k8s.io/kubernetes/cmd/$c"; done
    echo ")"; echo
    echo "require k8s.io/kubernetes $KV"; echo
    echo "replace ("
    sed -n '/^replace (/,/^)/p' "$kmod" | awk '/=>/{print "\t"$1" => "$1" '"$STAGING_V"'"}'
    echo ")"
  } > "$dir/go.mod"
  (cd "$dir" && go mod tidy >&2)
  echo "$dir"
}

ldflags() {
  local major="${KV#v}"; major="${major%%.*}"
  local minor="${KV#v*.}"; minor="${minor%%.*}"
  local date; date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  local flags="-s -w" pkg
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    flags+=" -X $pkg.gitVersion=$KV -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date -X $pkg.gitCommit=labkit-module-proxy-build"
  done
  echo "$flags"
}

build_kube() {
  local dir; dir="$(prepare_module)"
  local lf; lf="$(ldflags)"
  local todo=() pkgs=() c
  for c in "${COMPONENTS[@]}"; do
    if [[ -x "$BIN/$c" && -z "${LABKIT_FORCE_BUILD:-}" && "$(cat "$OUT/VERSION.partial" 2>/dev/null)" == "$KV" ]]; then
      say "cached: $c"; continue
    fi
    todo+=("$c"); pkgs+=("k8s.io/kubernetes/cmd/$c")
  done
  [[ ${#todo[@]} -gt 0 ]] || return 0
  echo "$KV" > "$OUT/VERSION.partial"
  local s=$SECONDS tmp="$BIN/.build.$$"
  mkdir -p "$tmp"
  # one go command for all of them: shared packages compile once, links overlap with compiles
  say "building ${todo[*]} (cold: ~6 min on 2 quiet cores, measured; warm Go cache: ~1 min)"
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$lf" -o "$tmp/" "${pkgs[@]}") || { rm -rf "$tmp"; return 1; }
  for c in "${todo[@]}"; do mv "$tmp/$c" "$BIN/$c"; done
  rm -rf "$tmp"
  say "built ${todo[*]} in $((SECONDS - s))s"
}

build_etcd() {
  local dir="$SRC/etcd" ev
  ev="$(awk '$1=="go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2} $1=="require" && $2=="go.etcd.io/etcd/server/v3" {print $3}' "$dir/go.mod" | head -1)"
  if [[ -n "$ETCD_VERSION" && "$ETCD_VERSION" != "$ev" ]]; then
    dir="$OUT/etcd-module"; mkdir -p "$dir"
    printf 'module labkit.dev/controlplane/etcd\n\ngo 1.26.0\n\ntool go.etcd.io/etcd/server/v3\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > "$dir/go.mod"
    (cd "$dir" && go mod tidy)
    ev="$ETCD_VERSION"
  fi
  local s=$SECONDS
  say "building etcd $ev"
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp.$$" go.etcd.io/etcd/server/v3)
  mv "$BIN/etcd.tmp.$$" "$BIN/etcd"
  echo "$ev" > "$OUT/ETCD_VERSION"
  say "built etcd in $((SECONDS - s))s"
}

[[ -x "$BIN/etcd" && -z "${LABKIT_FORCE_BUILD:-}" ]] || build_etcd
build_kube
echo "$KV" > "$OUT/VERSION"
"$BIN/kube-apiserver" --version
say "done: $BIN"
