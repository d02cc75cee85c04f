#!/usr/bin/env bash
# Build an offline kind node image for labkit's tests: no container registry, only the Go module
# proxy and Debian packages. Users never need it (they run the pinned kindest/node image).
#
# usage: tools/build-kind-node-image.sh [--print-image|--parts-only]
#   (no option)    make sure the image is in the engine: `docker load` the cached tarball when
#                  there is one, else build everything; prints the image name on stdout last
#   --print-image  only print the image name (the cache key is part of its tag)
#   --parts-only   build the binaries and root filesystem (no engine needed)
# The engine is whatever DOCKER_HOST points at (tools/container-engine.sh start; eval its env).
#
# What goes in (versions in tools/kind-node/versions.env; Kubernetes from tools/controlplane):
#   Debian minbase root filesystem (debootstrap) + kind's own base files (entrypoint, systemd
#   units, containerd config) from the kind module zip; containerd, runc, CNI plugins from the
#   module proxy; kubelet/kubeadm/kubectl built like tools/build-controlplane.sh builds the
#   control plane (whose binaries are reused for the control-plane images); pause from pause.c;
#   and labkit-cni (tools/kind-cni) as kind's default CNI, since kindnetd is not on the proxy.
# Cache: ~/.cache/dra-labkit/kind-node/parts (binaries, per version), .../<key>/node-image.tar.gz
# (the finished image), key = hash of every pinned version and of these scripts.
set -euo pipefail

KN_NAME=build-kind-node-image
source "$(dirname "${BASH_SOURCE[0]}")/kind-node/lib.sh"
export DOCKER_BUILDKIT=0   # classic builder: works with every engine version, no buildx needed

KV="$(kube_version)"
[[ -n "$KV" ]] || die "no k8s.io/kubernetes version in tools/controlplane/go.mod"

cache_key() {
  {
    echo "kubernetes=$KV etcd=$(etcd_version)"
    cat "$KN_ROOT/tools/kind-node/versions.env"
    cat "$KN_ROOT/tools/build-kind-node-image.sh" "$KN_ROOT/tools/kind-node/lib.sh" \
        "$KN_ROOT/tools/kind-node/setup-node.sh" "$KN_ROOT/tools/kind-node/manifests/"*.yaml
    cat "$KN_ROOT/tools/kind-cni/go.mod" "$KN_ROOT/tools/kind-cni/"*.go
    cat "$KN_ROOT/tools/controlplane/go.mod" "$KN_ROOT/tools/controlplane/etcd/go.mod"
  } | sha256sum | cut -c1-12
}
KEY="$(cache_key)"
IMAGE="labkit.local/kind-node:$KV-$KEY"
CNI_IMAGE="labkit.local/kind-cni:$KEY"
OUT="$KN_DIR/$KEY"
TARBALL="$OUT/node-image.tar.gz"
export KN_TIMINGS="$OUT/timings.txt"

case "${1:-}" in
  --print-image) echo "$IMAGE"; exit 0 ;;
  --parts-only|"") ;;
  *) echo "usage: $0 [--print-image|--parts-only]" >&2; exit 2 ;;
esac
mkdir -p "$OUT" "$KN_PARTS"

# ---------------------------------------------------------------- binaries and root filesystem
labkit_go_part() { # our own Go programs: labkit-cni
  local src="$KN_ROOT/tools/kind-cni" key out
  key="$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go | sha256sum | cut -c1-12)"
  out="$KN_PARTS/labkit-cni-$key"
  if [[ ! -x "$out/labkit-cni" ]]; then
    mkdir -p "$out"
    (cd "$src" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w" -o "$out/labkit-cni.tmp" .)
    mv "$out/labkit-cni.tmp" "$out/labkit-cni"
  fi
  LABKIT_CNI_BIN="$out/labkit-cni"
}

build_parts() {
  command -v go >/dev/null || die "Go is not installed (Go >= 1.26 builds the node's binaries)"
  need_debs debootstrap=debootstrap gcc=gcc pkg-config=pkg-config /usr/include/seccomp.h=libseccomp-dev \
            "/usr/lib/$(uname -m)-linux-gnu/libc.a=libc6-dev"
  # the Debian root filesystems (network and disk bound) download while Go compiles: both the
  # node's and the driver image's local python base (tools/build-test-images.sh finds it cached)
  ( stage rootfs rootfs_part node-rootfs "$NODE_PACKAGES" > "$OUT/node-rootfs.path"
    stage python-rootfs rootfs_part python-rootfs "$PYTHON_BASE_PACKAGES" > /dev/null ) 2> "$OUT/rootfs.log" &
  local rootfs_pid=$!
  stage kind go_install_part kind "$KIND_VERSION" "" 0 "sigs.k8s.io/kind@$KIND_VERSION"
  stage cni-plugins go_install_part cni-plugins "$CNI_PLUGINS_VERSION" "" 0 \
    github.com/containernetworking/plugins/plugins/main/{ptp,bridge,loopback}@"$CNI_PLUGINS_VERSION" \
    github.com/containernetworking/plugins/plugins/ipam/host-local@"$CNI_PLUGINS_VERSION" \
    github.com/containernetworking/plugins/plugins/meta/portmap@"$CNI_PLUGINS_VERSION"
  stage containerd go_install_part containerd "$CONTAINERD_VERSION" "no_aufs no_zfs no_btrfs no_devmapper" 0 \
    github.com/containerd/containerd/v2/cmd/{containerd,ctr,containerd-shim-runc-v2}@"$CONTAINERD_VERSION"
  stage runc go_install_part runc "$RUNC_VERSION" seccomp 1 "github.com/opencontainers/runc@$RUNC_VERSION"
  stage coredns go_install_part coredns "$COREDNS_VERSION" "" 0 "github.com/coredns/coredns@$COREDNS_VERSION"
  # etcd, kube-apiserver, -scheduler, -controller-manager: the `local` backend's (cached) build
  stage controlplane "$KN_ROOT/tools/build-controlplane.sh" "$(kube_minor)"
  CP_BIN="$KN_CACHE/controlplane/$(kube_minor)/bin"
  [[ "$(cat "$KN_CACHE/controlplane/$(kube_minor)/VERSION")" == "$KV" ]] \
    || die "control-plane binaries in $CP_BIN are not $KV"
  stage kube-node kube_node_part
  KUBE_BIN="$KN_PARTS/kube-node-$KV/bin"
  stage labkit-cni labkit_go_part
  wait "$rootfs_pid" || { tail -30 "$OUT/rootfs.log" >&2; die "building the root filesystems failed (log: $OUT/rootfs.log)"; }
  NODE_ROOTFS="$(cat "$OUT/node-rootfs.path")"
}

# ---------------------------------------------------------------- the image
docker_ok() { timeout 30 docker info >/dev/null 2>&1; }

# single_binary_image NAME BINARY... -- CHANGE...: an image holding just static binaries
single_binary_image() {
  local name="$1" dir; shift
  dir="$(mktemp -d "${TMPDIR:-/tmp}/labkit-img.XXXXXX")"
  mkdir -p "$dir/usr/local/bin" "$dir/tmp" "$dir/etc"
  chmod 1777 "$dir/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n' > "$dir/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' > "$dir/etc/group"
  while [[ $# -gt 0 && "$1" != -- ]]; do install -D -m 0755 "$1" "$dir/$2"; shift 2; done
  shift
  local changes=(--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin') c
  for c in "$@"; do changes+=(--change "$c"); done
  tar -C "$dir" --numeric-owner --owner=0 --group=0 -c . | docker import "${changes[@]}" - "$name" >/dev/null
  rm -rf "$dir"
}

kind_module_dir() { # the kind module zip, unpacked (`go install` of kind put it in the module cache)
  local d; d="$(go env GOMODCACHE)/sigs.k8s.io/kind@$KIND_VERSION"
  if [[ ! -d "$d" ]]; then
    local w; w="$(mktemp -d)"
    d="$(cd "$w" && go mod init labkit.dev/probe >/dev/null 2>&1 && go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" \
          | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')"
    rm -rf "$w"
  fi
  [[ -d "$d/images/base/files" ]] || die "kind module zip has no images/base/files ($d)"
  echo "$d"
}

component_images() { # build the images kubeadm will ask for (+ ours); sets IMAGES
  local list; list="$("$KUBE_BIN/kubeadm" config images list --kubernetes-version "$KV")"
  say "kubeadm expects: $(echo "$list" | tr '\n' ' ')"
  IMAGES=()
  local img base
  local base_img="labkit.local/kind-node-rootfs:$(basename "$NODE_ROOTFS" .tar)"
  docker image inspect "$base_img" >/dev/null 2>&1 || docker import "$NODE_ROOTFS" "$base_img" >/dev/null
  for img in $list; do
    base="${img##*/}"; base="${base%%:*}"
    case "$base" in
      kube-apiserver|kube-controller-manager|kube-scheduler)
        single_binary_image "$img" "$CP_BIN/$base" "usr/local/bin/$base" -- ;;
      etcd)
        single_binary_image "$img" "$CP_BIN/etcd" usr/local/bin/etcd -- ;;
      coredns)
        [[ "$img" == *":$COREDNS_VERSION" ]] || say "note: kubeadm wants $img; shipping coredns $COREDNS_VERSION under that name"
        single_binary_image "$img" "$KN_PARTS/coredns-$COREDNS_VERSION/bin/coredns" coredns -- 'ENTRYPOINT ["/coredns"]' ;;
      pause)
        PAUSE_IMAGE="$img"
        single_binary_image "$img" "$KUBE_BIN/pause" pause -- 'ENTRYPOINT ["/pause"]' ;;
      kube-proxy)
        # kube-proxy drives nftables/iptables: a Debian base with those tools
        local cid; cid="$(docker create "$base_img" /bin/true)"
        docker cp "$KUBE_BIN/kube-proxy" "$cid:/usr/local/bin/kube-proxy"
        docker commit --change 'ENTRYPOINT ["/usr/local/bin/kube-proxy"]' "$cid" "$img" >/dev/null
        docker rm "$cid" >/dev/null ;;
      *) die "kubeadm wants $img, which this script does not know how to build" ;;
    esac
    IMAGES+=("$img")
  done
  [[ -n "${PAUSE_IMAGE:-}" ]] || die "kubeadm listed no pause image"
  single_binary_image "$CNI_IMAGE" "$LABKIT_CNI_BIN" labkit-cni -- 'ENTRYPOINT ["/labkit-cni"]'
  IMAGES+=("$CNI_IMAGE")
}

assemble() {
  docker_ok || die "no container engine answers (DOCKER_HOST=${DOCKER_HOST:-}); run tools/container-engine.sh start"
  local base_img="labkit.local/kind-node-rootfs:$(basename "$NODE_ROOTFS" .tar)"
  stage component-images component_images

  # everything our node adds to the Debian root filesystem, as one tree copied in at once
  local tree; tree="$(mktemp -d "${TMPDIR:-/tmp}/labkit-node-tree.XXXXXX")"
  local kdir; kdir="$(kind_module_dir)"
  cp -r "$kdir/images/base/files/." "$tree/"
  chmod -R u+w "$tree"
  rm -f "$tree/usr/local/bin/clean-install" "$tree/etc/systemd/system/containerd-fuse-overlayfs.service"
  mkdir -p "$tree/usr/local/bin" "$tree/usr/local/sbin" "$tree/usr/bin" "$tree/opt/cni/bin" "$tree/kind/manifests"
  cp "$KN_PARTS/containerd-$CONTAINERD_VERSION/bin/"{containerd,ctr,containerd-shim-runc-v2} "$tree/usr/local/bin/"
  cp "$KN_PARTS/runc-$RUNC_VERSION/bin/runc" "$tree/usr/local/sbin/runc"
  cp "$KN_PARTS/cni-plugins-$CNI_PLUGINS_VERSION/bin/"* "$tree/opt/cni/bin/"
  cp "$KUBE_BIN/"{kubelet,kubeadm,kubectl} "$tree/usr/bin/"
  printf '%s' "$KV" > "$tree/kind/version"
  sed "s|\${CNI_IMAGE}|$CNI_IMAGE|" "$KN_ROOT/tools/kind-node/manifests/default-cni.yaml" > "$tree/kind/manifests/default-cni.yaml"
  cp "$KN_ROOT/tools/kind-node/setup-node.sh" "$tree/kind/bin/labkit-setup-node.sh"

  # (`docker commit --change` cannot set a stop signal; the container's own is kept: systemd's)
  local cid; cid="$(docker run -d --privileged --stop-signal=SIGRTMIN+3 --entrypoint=sleep "$base_img" infinity)"
  # shellcheck disable=SC2064
  trap "docker rm -f $cid >/dev/null 2>&1 || true; rm -rf '$tree'" EXIT
  tar -C "$tree" --numeric-owner --owner=0 --group=0 -c . | docker cp - "$cid:/"
  stage setup docker exec "$cid" bash /kind/bin/labkit-setup-node.sh "$PAUSE_IMAGE"
  docker exec "$cid" rm /kind/bin/labkit-setup-node.sh

  # preload the images into the node's containerd, the way kind's own node-image build does
  import_images() {
    docker exec "$cid" bash -c 'nohup containerd >/tmp/containerd.log 2>&1 &
      for i in $(seq 1 60); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && exit 0; sleep 0.5; done
      cat /tmp/containerd.log; exit 1'
    docker save "${IMAGES[@]}" | docker exec -i "$cid" ctr --namespace=k8s.io images import \
      --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests -
    local have img missing=()
    have="$(docker exec "$cid" ctr --namespace=k8s.io images list -q)"
    for img in "${IMAGES[@]}"; do grep -qxF "$img" <<<"$have" || missing+=("$img"); done
    [[ ${#missing[@]} -eq 0 ]] || die "not imported into the node: ${missing[*]}"
    # stop it cleanly (its metadata database must be flushed before the commit); PID 1 here
    # is `sleep`, which never reaps, so a stopped containerd stays a zombie: wait for that state
    docker exec "$cid" bash -c 'pkill -x containerd
      for i in $(seq 1 60); do ps -C containerd -o stat= | grep -qv Z || exit 0; sleep 0.5; done; exit 1'
    docker exec "$cid" bash -c 'rm -rf /tmp/containerd.log /var/log/*.log' 
  }
  stage import-images import_images

  stage commit docker commit \
    --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
    --change 'ENV container=docker' \
    --change 'CMD []' \
    "$cid" "$IMAGE" >/dev/null
  docker rm -f "$cid" >/dev/null
  rm -rf "$tree"
  trap - EXIT
  # the component images now live inside the node image only
  docker rmi "${IMAGES[@]}" >/dev/null 2>&1 || true

  mkdir -p "$OUT/bin"
  cp "$KN_PARTS/kind-$KIND_VERSION/bin/kind" "$KUBE_BIN/kubectl" "$OUT/bin/"
  save_tarball() { docker save "$IMAGE" | gzip -1 > "$TARBALL.tmp" && mv "$TARBALL.tmp" "$TARBALL"; }
  stage save save_tarball
  echo "$IMAGE" > "$KN_DIR/current-image"
}

# ---------------------------------------------------------------- main
if [[ "${1:-}" == --parts-only ]]; then
  build_parts >&2
  say "parts ready"
  exit 0
fi

docker_ok || die "no container engine answers (DOCKER_HOST=${DOCKER_HOST:-}); run tools/container-engine.sh start"
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  say "image $IMAGE already in the engine"
elif [[ -s "$TARBALL" ]]; then
  stage load bash -c "gunzip -c '$TARBALL' | docker load >/dev/null"
  say "loaded $IMAGE from $TARBALL"
else
  : > "$KN_TIMINGS"
  build_parts >&2   # stdout carries only the image name
  assemble >&2
  say "built $IMAGE ($(du -h "$TARBALL" | cut -f1) tarball; timings in $KN_TIMINGS)"
fi
# the pinned kind CLI and a kubectl of the pinned Kubernetes version, for make test (PATH may
# have neither, or a kubectl outside the version skew)
mkdir -p "$KN_BIN"
for b in "$OUT/bin/"*; do
  if [[ -x "$b" ]] && ! cmp -s "$b" "$KN_BIN/${b##*/}"; then cp "$b" "$KN_BIN/"; fi
done
echo "$IMAGE" > "$KN_DIR/current-image"
echo "$IMAGE"
