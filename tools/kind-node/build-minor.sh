#!/usr/bin/env bash
# The offline kind node image for a Kubernetes minor other than the default one (e.g. 1.38, issue 42 item 8).
#
# usage: tools/kind-node/build-minor.sh MINOR [--print-image|--parts-only]
#   (options as tools/build-kind-node-image.sh's; prints the image name on stdout last)
#   needs that minor's control plane first: bash tools/build-controlplane.sh MINOR (make controlplane-138)
#
# tools/build-kind-node-image.sh builds the default minor, the one tools/controlplane/go.mod pins. Its cache key
# hashes its own text and lib.sh's, so teaching those scripts a second minor would change the default image's key
# and rebuild it on every warm machine. Instead the same scripts run unchanged in an overlay of tools/ whose pins
# are the minor's:
#   tools/controlplane/go.mod, go.sum  the wrapper module tools/build-controlplane.sh MINOR generated for the
#                                      release tools/kubernetes-releases.env pins (KUBE_1_38=v1.38.0-beta.0)
#   tools/controlplane/etcd/go.mod     the etcd that release pins (the same control-plane build's etcd module)
#   GOTOOLCHAIN                        GO_<major>_<minor> of tools/kubernetes-releases.env (1.38: go1.27.3)
# plus one fix in the overlay's lib.sh: kube_minor of a pre-release (v1.38.0-beta.0) is 1.38, not 1.38.0-beta.
# (When the default moves to that minor, tools/controlplane/go.mod changes and with it the key anyway: fold the
# fix into lib.sh then.) The image's key is the scripts' own: a hash of the overlay's pins and scripts.
# 1.38 today (v1.38.0-beta.0, measured 2026-12-05): the control-plane images build, but kubelet and kube-proxy
# fail at the kube-node stage: 1.38 moved their iptables code to sigs.k8s.io/iptables-wrappers, a module the
# Go module proxy refuses ("403 ... not available", like sigs.k8s.io/kindnet and cri-tools), so the 1.38 node
# image cannot be built offline until that module is served.
# Cache: $LABKIT_CACHE/kind-node-MINOR/ (the image tarball, current-image, the kind CLI and that minor's kubectl);
# the version-keyed parts ($LABKIT_CACHE/kind-node/parts) and the control plane ($LABKIT_CACHE/controlplane) are
# shared with the default image, whose files are not touched.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${LABKIT_CACHE:-$HOME/.cache/dra-labkit}"
die() { printf 'kind-node/build-minor: %s\n' "$*" >&2; exit 1; }

MINOR="${1:-}"; MINOR="${MINOR#v}"
[[ "$MINOR" =~ ^1\.[0-9]+$ ]] || { echo "usage: $0 MINOR [--print-image|--parts-only]   (MINOR like 1.38)" >&2; exit 2; }
shift
pin() { awk -F= -v k="$1" '$1==k {print $2}' "$ROOT/tools/kubernetes-releases.env"; }
KV="$(pin "KUBE_${MINOR/./_}")"
[[ -n "$KV" ]] || die "no KUBE_${MINOR/./_} line in tools/kubernetes-releases.env: Kubernetes $MINOR has no pinned release"
DEFAULT_KV="$(awk '$1=="k8s.io/kubernetes" && $2 ~ /^v/ {print $2} $1=="require" && $2=="k8s.io/kubernetes" {print $3}' \
  "$ROOT/tools/controlplane/go.mod" | head -1)"
[[ "$DEFAULT_KV" != "v$MINOR".* ]] \
  || die "$MINOR is the default minor ($DEFAULT_KV, tools/controlplane/go.mod): build it with tools/build-kind-node-image.sh"
GO_PIN="$(pin "GO_${MINOR/./_}")"  # as tools/build-controlplane.sh chooses it: the pin unless another is named
[[ -z "$GO_PIN" || "${GOTOOLCHAIN:-local}" != local ]] || GOTOOLCHAIN="$GO_PIN"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

# the minor's control plane: its wrapper module and etcd module are the overlay's pins
CP="$CACHE/controlplane/$MINOR"
if [[ "${1:-}" != --print-image ]]; then
  bash "$ROOT/tools/build-controlplane.sh" "$MINOR" >&2
fi
[[ -s "$CP/module/go.mod" && -s "$CP/module/go.sum" && "$(cat "$CP/VERSION" 2>/dev/null)" == "$KV" ]] \
  || die "no control plane of $KV in $CP (its wrapper module is this image's pin): run bash tools/build-controlplane.sh $MINOR"
[[ -s "$CP/etcd-module/go.mod" ]] \
  || die "no etcd module in $CP/etcd-module (the etcd $KV pins): rebuild with LABKIT_FORCE_BUILD=1 bash tools/build-controlplane.sh $MINOR"

OVL="$(mktemp -d "${TMPDIR:-/tmp}/labkit-kind-node-$MINOR.XXXXXX")"
trap 'rm -rf "$OVL"' EXIT
mkdir -p "$OVL/tools/controlplane/etcd"
cp -r "$ROOT/tools/kind-node" "$ROOT/tools/kind-cni" "$OVL/tools/"
cp "$ROOT/tools/build-kind-node-image.sh" "$ROOT/tools/build-controlplane.sh" "$ROOT/tools/kubernetes-releases.env" \
  "$OVL/tools/"
cp "$CP/module/go.mod" "$CP/module/go.sum" "$OVL/tools/controlplane/"
cp "$CP/etcd-module/go.mod" "$OVL/tools/controlplane/etcd/"
[[ ! -s "$CP/etcd-module/go.sum" ]] || cp "$CP/etcd-module/go.sum" "$OVL/tools/controlplane/etcd/"
rm -f "$OVL/tools/kind-node/build-minor.sh"
old='kube_minor() { local v; v="$(kube_version)"; v="${v#v}"; echo "${v%.*}"; }'
new='kube_minor() { local v; v="$(kube_version)"; v="${v#v}"; v="${v%%-*}"; echo "${v%.*}"; }'
grep -qxF "$old" "$OVL/tools/kind-node/lib.sh" \
  || die "tools/kind-node/lib.sh's kube_minor changed: update the overlay fix in $0"
sed -i "s|^kube_minor() .*|${new//&/\\&}|" "$OVL/tools/kind-node/lib.sh"
grep -qxF "$new" "$OVL/tools/kind-node/lib.sh" || die "patching the overlay's kube_minor failed"

# a cache of its own that shares the parts and the control plane
OC="$CACHE/kind-node-$MINOR"
if [[ "${1:-}" != --print-image ]]; then
  mkdir -p "$OC/kind-node" "$CACHE/kind-node/parts"
  [[ -e "$OC/controlplane" ]] || ln -s "$CACHE/controlplane" "$OC/controlplane"
  [[ -e "$OC/kind-node/parts" ]] || ln -s "$CACHE/kind-node/parts" "$OC/kind-node/parts"
fi
LABKIT_CACHE="$OC" bash "$OVL/tools/build-kind-node-image.sh" "$@"
