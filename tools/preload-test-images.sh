#!/usr/bin/env bash
# A kind node image with labkit's test images already in its containerd, for make test only.
#
# usage: tools/preload-test-images.sh NODE_IMAGE [IMAGE...]     (default images: the driver and
#        the stand-in workload that tools/build-test-images.sh makes); prints the new image's name
#
# Every `labkit cluster up --backend kind` runs `kind load docker-image` for the driver and the
# workload image; on 2 cores that import costs 40-80 s per cluster, and make test starts several
# clusters. kind skips a node whose containerd already holds an image with the same ID, so a node
# image made with them preloaded (the way kind's own node-image build preloads its images:
# `ctr images import --no-unpack`, pinned) turns each load into a check (kind asks `crictl
# inspecti`; the offline image gets a stand-in for that one command, tools/kind-node/crictl-inspecti.sh). The result is tagged
# with the IDs of everything in it and kept in the engine, so a warm run builds nothing; older
# preloaded variants of the same node image are removed. Users never run this: their clusters load
# the driver image as usual.
set -euo pipefail

KN_NAME=preload-test-images
source "$(dirname "${BASH_SOURCE[0]}")/kind-node/lib.sh"

[[ $# -ge 1 ]] || die "usage: $0 NODE_IMAGE [IMAGE...]"
BASE="$1"; shift
IMAGES=("$@")
[[ ${#IMAGES[@]} -gt 0 ]] || IMAGES=("${LABKIT_FAKE_GPUS_IMAGE:-labkit/fake-gpus:dev}" "${LABKIT_KIND_WORKLOAD_IMAGE:-labkit/workload:dev}")

timeout 30 docker info >/dev/null 2>&1 \
  || die "no container engine answers (DOCKER_HOST=${DOCKER_HOST:-}); run tools/container-engine.sh start"
id_of() { docker image inspect -f '{{.Id}}' "$1" 2>/dev/null || die "image $1 is not in the engine"; }

ids="$(id_of "$BASE")"
for img in "${IMAGES[@]}"; do ids+=" $img=$(id_of "$img")"; done
key="$(printf '%s\n' "$ids" "$(cat "${BASH_SOURCE[0]}" "$KN_ROOT/tools/kind-node/crictl-inspecti.sh")" | sha256sum | cut -c1-12)"
repo="${BASE%:*}"
tag="${BASE##*:}"
OUT="$repo:$tag-pre-$key"

if docker image inspect "$OUT" >/dev/null 2>&1; then
  say "cached: $OUT"
  echo "$OUT"
  exit 0
fi

s=$SECONDS
cid="$(docker run -d --privileged --stop-signal=SIGRTMIN+3 --entrypoint=sleep "$BASE" infinity)"
trap 'docker rm -f "$cid" >/dev/null 2>&1 || true' EXIT
docker exec "$cid" bash -c 'nohup containerd >/tmp/containerd.log 2>&1 &
  for i in $(seq 1 60); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && exit 0; sleep 0.5; done
  cat /tmp/containerd.log; exit 1'
docker save "${IMAGES[@]}" | docker exec -i "$cid" ctr --namespace=k8s.io images import \
  --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - >/dev/null
have="$(docker exec "$cid" ctr --namespace=k8s.io images list -q)"
for img in "${IMAGES[@]}"; do
  full="$img"; [[ "$full" == */*/* || "$full" == *.*/* ]] || full="docker.io/$full"
  grep -qxF "$full" <<<"$have" || die "not imported into the node: $img (node has: $(tr '\n' ' ' <<<"$have"))"
done
# kind asks `crictl inspecti` whether a node already has an image; the offline node image has no
# crictl (cri-tools is not on the Go module proxy), so it gets a stand-in that answers just that
if ! docker exec "$cid" sh -c 'command -v crictl' >/dev/null 2>&1; then
  docker cp "$KN_ROOT/tools/kind-node/crictl-inspecti.sh" "$cid:/usr/local/bin/crictl"
  docker exec "$cid" crictl inspecti "${IMAGES[0]}" >/dev/null || die "the crictl stand-in does not find ${IMAGES[0]}"
fi
# containerd's metadata database must be flushed before the commit (PID 1 is sleep: wait for the zombie)
docker exec "$cid" bash -c 'pkill -x containerd
  for i in $(seq 1 60); do ps -C containerd -o stat= | grep -qv Z || exit 0; sleep 0.5; done; exit 1'
docker exec "$cid" rm -f /tmp/containerd.log
# the base image's entrypoint and command, not the `sleep` this container ran
docker commit \
  --change "ENTRYPOINT $(docker image inspect -f '{{json .Config.Entrypoint}}' "$BASE")" \
  --change "CMD $(docker image inspect -f '{{json .Config.Cmd}}' "$BASE" | sed 's/^null$/[]/')" \
  "$cid" "$OUT" >/dev/null
docker rm -f "$cid" >/dev/null
trap - EXIT

# older preloaded variants of this node image (their driver image is gone by now)
docker images --format '{{.Repository}}:{{.Tag}}' "$repo" \
  | grep -F -- "$tag-pre-" | grep -vxF "$OUT" | xargs -r docker rmi >/dev/null 2>&1 || true
say "built $OUT in $((SECONDS - s))s"
echo "$OUT"
