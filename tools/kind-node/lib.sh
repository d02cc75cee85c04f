# Shared helpers for tools/build-kind-node-image.sh and friends (sourced, not run).
# shellcheck shell=bash

KN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
KN_CACHE="${LABKIT_CACHE:-$HOME/.cache/dra-labkit}"
KN_DIR="$KN_CACHE/kind-node"
KN_PARTS="$KN_DIR/parts"
KN_BIN="$KN_CACHE/bin"          # the kind CLI lands here (make test puts it on PATH)
# shellcheck source=versions.env
source "$KN_ROOT/tools/kind-node/versions.env"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

kn_t0=${kn_t0:-$SECONDS}
say() { printf '%s: %s (%ds)\n' "${KN_NAME:-kind-node}" "$*" "$((SECONDS - kn_t0))" >&2; }
die() { printf '%s: %s\n' "${KN_NAME:-kind-node}" "$*" >&2; exit 1; }

# stage NAME CMD...: run one build stage and log how long it took
stage() {
  local name="$1" s=$SECONDS; shift
  say "stage $name: start"
  "$@"
  say "stage $name: done in $((SECONDS - s))s"
  echo "$name $((SECONDS - s))" >> "${KN_TIMINGS:-/dev/null}"
}

# the Kubernetes version the control-plane wrapper module pins (v1.37.1 today)
kube_version() {
  awk '$1=="k8s.io/kubernetes" && $2 ~ /^v/ {print $2} $1=="require" && $2=="k8s.io/kubernetes" {print $3}' \
    "$KN_ROOT/tools/controlplane/go.mod" | head -1
}
kube_minor() { local v; v="$(kube_version)"; v="${v#v}"; echo "${v%.*}"; }
etcd_version() {
  awk '$1=="go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2} $1=="require" && $2=="go.etcd.io/etcd/server/v3" {print $3}' \
    "$KN_ROOT/tools/controlplane/etcd/go.mod" | head -1
}

# go_install_part NAME VERSION TAGS CGO PKG@VERSION...: binaries of a `go install` into parts/NAME-VERSION/bin
go_install_part() {
  local name="$1" version="$2" tags="$3" cgo="$4"; shift 4
  local out="$KN_PARTS/$name-$version"
  if [[ -f "$out/.done" ]]; then say "cached: $name $version"; return 0; fi
  rm -rf "$out.tmp"; mkdir -p "$out.tmp/bin"
  local flags=(-trimpath -ldflags "-s -w")
  [[ -n "$tags" ]] && flags+=(-tags "$tags")
  GOBIN="$out.tmp/bin" CGO_ENABLED="$cgo" GOFLAGS= nice -n 10 go install "${flags[@]}" "$@"
  touch "$out.tmp/.done"
  rm -rf "$out"; mv "$out.tmp" "$out"
}

# the Debian mirror apt uses on this machine (deb822 or one-line sources), else deb.debian.org
debian_mirror() {
  local m
  m="$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
  [[ -n "$m" ]] || m="$(awk '$1=="deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)"
  echo "${m:-http://deb.debian.org/debian}"
}

# rootfs_part NAME PACKAGES: a debootstrap minbase root filesystem as parts/NAME-<hash>.tar;
# prints the tarball path
rootfs_part() {
  local name="$1" pkgs="$2" mirror key out dir
  mirror="$(debian_mirror)"
  key="$(printf '%s\n' "$DEBIAN_SUITE" "$pkgs" "$mirror" | sha256sum | cut -c1-12)"
  out="$KN_PARTS/$name-$DEBIAN_SUITE-$key.tar"
  if [[ -s "$out" ]]; then say "cached: $out"; echo "$out"; return 0; fi
  command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
  dir="$(mktemp -d "${TMPDIR:-/tmp}/labkit-rootfs.XXXXXX")"
  say "debootstrap $DEBIAN_SUITE from $mirror into $dir"
  nice -n 10 debootstrap --variant=minbase --include="$pkgs" "$DEBIAN_SUITE" "$dir" "$mirror" >&2 \
    || { rm -rf "$dir"; die "debootstrap failed"; }
  # trim what an image never needs: apt lists, caches, docs, man pages, locales
  rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/* "$dir"/usr/share/doc/* \
         "$dir"/usr/share/man/* "$dir"/usr/share/info/* "$dir"/var/log/*.log
  mkdir -p "$KN_PARTS"
  tar -C "$dir" --numeric-owner -cf "$out.tmp" . && mv "$out.tmp" "$out"
  rm -rf "$dir"
  echo "$out"
}

# the linker flags tools/build-controlplane.sh uses (version stamped the same way)
kube_ldflags() {
  local kv="$1" major minor flags="-s -w" pkg
  major="${kv#v}"; major="${major%%.*}"; minor="${kv#v*.}"; minor="${minor%%.*}"
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    flags+=" -X $pkg.gitVersion=$kv -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit=labkit-module-proxy-build"
  done
  echo "$flags"
}

# kube_node_part: kubelet, kubeadm, kubectl, kube-proxy from the control-plane wrapper module
# (same dependency versions, so the Go build cache of tools/build-controlplane.sh is reused)
# plus pause, built from pause.c in the k8s.io/kubernetes module zip
kube_node_part() {
  local kv; kv="$(kube_version)"
  local out="$KN_PARTS/kube-node-$kv"
  if [[ -f "$out/.done" ]]; then say "cached: kubelet kubeadm kubectl kube-proxy pause $kv"; return 0; fi
  local work; work="$(mktemp -d "${TMPDIR:-/tmp}/labkit-kube-node.XXXXXX")"
  cp "$KN_ROOT/tools/controlplane/go.mod" "$KN_ROOT/tools/controlplane/go.sum" "$work/"
  rm -rf "$out.tmp"; mkdir -p "$out.tmp/bin"
  (cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod nice -n 10 go build -trimpath -ldflags "$(kube_ldflags "$kv")" \
      -o "$out.tmp/bin/" k8s.io/kubernetes/cmd/{kubelet,kubeadm,kubectl,kube-proxy}) \
    || { rm -rf "$work"; die "building the Kubernetes node binaries failed"; }
  local kdir; kdir="$(cd "$work" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)"
  [[ -f "$kdir/build/pause/linux/pause.c" ]] || die "pause.c not found in $kdir"
  gcc -Os -static -Wall -Werror -DVERSION="labkit-$kv" -o "$out.tmp/bin/pause" "$kdir/build/pause/linux/pause.c"
  strip "$out.tmp/bin/pause"
  rm -rf "$work"
  touch "$out.tmp/.done"; rm -rf "$out"; mv "$out.tmp" "$out"
}

# need_debs CMD_OR_FILE=PACKAGE...: install the Debian packages whose command/file is missing
# (root with apt only; otherwise name them and stop)
need_debs() {
  local want=() pair what pkg
  for pair in "$@"; do
    what="${pair%%=*}"; pkg="${pair#*=}"
    if [[ "$what" == /* ]]; then [[ -e "$what" ]] && continue; else command -v "$what" >/dev/null && continue; fi
    want+=("$pkg")
  done
  [[ ${#want[@]} -gt 0 ]] || return 0
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
    die "missing: ${want[*]} (install them: apt-get install ${want[*]})"
  fi
  say "installing ${want[*]} (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${want[@]}" >&2
}
