#!/usr/bin/env bash
# Build, without a container registry, the two images labkit's kind tests load into their nodes:
#   labkit/fake-gpus:dev  the driver, from the ordinary fake_gpus/deploy/Dockerfile
#   labkit/workload:dev   the stand-in workload (tools/kind-workload; see labkit.cluster.backends.kind.images)
# into the engine DOCKER_HOST points at (tools/container-engine.sh start; eval its env).
#
# The driver's base image (Dockerfile build arg BASE_IMAGE) is chosen by LABKIT_DRIVER_BASE_IMAGE:
#   auto (default)  python:3.11-slim when the engine has it or can pull it, else "local"
#   local           a Debian root filesystem with python3 + pip, made here with debootstrap
#   <image>         that image
# Users build the Dockerfile as it is (FROM python:3.11-slim); none of this runs for them.
set -euo pipefail

KN_NAME=build-test-images
source "$(dirname "${BASH_SOURCE[0]}")/kind-node/lib.sh"
export DOCKER_BUILDKIT=0   # classic builder: works with every engine version, no buildx needed

DRIVER_IMAGE="${LABKIT_FAKE_GPUS_IMAGE:-labkit/fake-gpus:dev}"
WORKLOAD_IMAGE="${LABKIT_KIND_WORKLOAD_IMAGE:-labkit/workload:dev}"
UPSTREAM_BASE="python:3.11-slim"

timeout 30 docker info >/dev/null 2>&1 \
  || die "no container engine answers (DOCKER_HOST=${DOCKER_HOST:-}); run tools/container-engine.sh start"
have() { docker image inspect "$1" >/dev/null 2>&1; }
label() { docker image inspect -f "{{index .Config.Labels \"$2\"}}" "$1" 2>/dev/null || true; }

# ---------------------------------------------------------------- the stand-in workload image
workload_image() {
  local src="$KN_ROOT/tools/kind-workload" key
  key="$(cat "$src/go.mod" "$src/main.go" "$src/Dockerfile" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12)"
  if [[ "$(label "$WORKLOAD_IMAGE" dev.labkit.source)" == "$key" ]]; then say "cached: $WORKLOAD_IMAGE"; return; fi
  local dir; dir="$(mktemp -d "${TMPDIR:-/tmp}/labkit-workload.XXXXXX")"
  (cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir/labkit-workload" .)
  # the same layout as tools/kind-workload/Dockerfile: the binary, also as env
  install -D -m 0755 "$dir/labkit-workload" "$dir/root/labkit-workload"
  install -D -m 0755 "$dir/labkit-workload" "$dir/root/usr/bin/env"
  install -D -m 0755 "$dir/labkit-workload" "$dir/root/bin/env"
  tar -C "$dir/root" --numeric-owner --owner=0 --group=0 -c . \
    | docker import --change 'ENTRYPOINT ["/labkit-workload"]' --change "LABEL dev.labkit.source=$key" - "$WORKLOAD_IMAGE" >/dev/null
  rm -rf "$dir"
  say "built $WORKLOAD_IMAGE"
}

# ---------------------------------------------------------------- the driver image
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
local_python_base() { # a Debian python3 + pip image, named after its root filesystem
  local tar name ca="$CA_BUNDLE"
  tar="$(rootfs_part python-rootfs "$PYTHON_BASE_PACKAGES")"
  # it trusts what this machine trusts (pip must reach PyPI through the same TLS proxies, if any)
  name="labkit.local/python-base:$(basename "$tar" .tar)-$(cat "$ca" 2>/dev/null | sha256sum | cut -c1-8)"
  if [[ "${1:-}" == --name-only ]]; then echo "$name"; return; fi
  if ! have "$name"; then
    docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      "$tar" "$name.tmp" >/dev/null
    # what the python image offers and the Dockerfile relies on: `python`, and pip allowed to
    # install into the system interpreter (Debian marks it externally managed)
    local cid
    cid="$(docker create "$name.tmp" sh -c 'ln -sf python3 /usr/bin/python && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED')"
    [[ ! -s "$ca" ]] || docker cp "$ca" "$cid:/etc/ssl/certs/ca-certificates.crt"
    docker start -a "$cid" >/dev/null
    docker commit --change 'CMD ["python3"]' "$cid" "$name" >/dev/null
    docker rm "$cid" >/dev/null
    docker rmi "$name.tmp" >/dev/null
  fi
  echo "$name"
}

driver_base() { # [--name-only]: the base image's name, without making a local one
  local want="${LABKIT_DRIVER_BASE_IMAGE:-auto}"
  case "$want" in
    local) local_python_base "$@" ;;
    auto)
      if have "$UPSTREAM_BASE" || timeout 60 docker pull -q "$UPSTREAM_BASE" >/dev/null 2>&1; then
        echo "$UPSTREAM_BASE"
      else
        say "cannot pull $UPSTREAM_BASE: using a local Debian python base"
        local_python_base "$@"
      fi ;;
    *) echo "$want" ;;
  esac
}

driver_image() {
  local key base
  key="$(cd "$KN_ROOT" && { cat fake_gpus/deploy/Dockerfile fake_gpus/deploy/requirements.txt "${BASH_SOURCE[0]}"
         find fake_gpus -name '*.py' -o -name '*.yaml' -o -name '*.json' | LC_ALL=C sort | xargs cat; } | sha256sum | cut -c1-12)"
  base="$(driver_base --name-only)"
  if [[ "$(label "$DRIVER_IMAGE" dev.labkit.source)" == "$key-$base" ]]; then say "cached: $DRIVER_IMAGE"; return; fi
  base="$(driver_base)"
  say "building $DRIVER_IMAGE from fake_gpus/deploy/Dockerfile on $base"
  # host network: RUN pip install reaches PyPI the way this machine does
  (cd "$KN_ROOT" && docker build -q --force-rm --network host --build-arg "BASE_IMAGE=$base" \
      --label "dev.labkit.source=$key-$base" -t "$DRIVER_IMAGE" -f fake_gpus/deploy/Dockerfile . >/dev/null)
  say "built $DRIVER_IMAGE"
}

stage workload-image workload_image
stage driver-image driver_image
docker run --rm "$DRIVER_IMAGE" profiles >/dev/null || die "$DRIVER_IMAGE does not run"
