#!/usr/bin/env bash
# Run a command (make test's test suites) with everything the kind tests need, then clean up:
#   - a container engine (tools/container-engine.sh start), stopped again at the end -- on
#     success, failure or interrupt -- when this run started it;
#   - the offline kind node image (tools/build-kind-node-image.sh: a `docker load` when cached)
#     and the driver + stand-in workload images (tools/build-test-images.sh), preloaded into a
#     copy of the node image (tools/preload-test-images.sh; LABKIT_KIND_PRELOAD=0 skips that);
#   - the environment: DOCKER_HOST (or the Podman provider), LABKIT_KIND_NODE_IMAGE, and the
#     cache's bin/ (kind, a kubectl of the pinned version) at the front of PATH.
# usage: tools/with-kind.sh CMD [ARG...]
# LABKIT_KIND_TESTS=0 runs CMD without any of this (the kind tests then fail preflight).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${LABKIT_CACHE:-$HOME/.cache/dra-labkit}"
[[ $# -gt 0 ]] || { echo "usage: $0 CMD [ARG...]" >&2; exit 2; }
if [[ "${LABKIT_KIND_TESTS:-1}" == 0 ]]; then exec "$@"; fi

t0=$SECONDS
say() { printf 'with-kind: %s (%ds)\n' "$*" "$((SECONDS - t0))" >&2; }

started=0
if [[ "$(bash "$ROOT/tools/container-engine.sh" status)" == none ]]; then started=1; fi
cleanup() {
  local rc=$?
  if [[ $started == 1 ]]; then
    say "stopping the engine this run started"
    bash "$ROOT/tools/container-engine.sh" stop || rc=1
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

s=$SECONDS
bash "$ROOT/tools/container-engine.sh" start
eval "$(bash "$ROOT/tools/container-engine.sh" env)"
say "engine ready in $((SECONDS - s))s"

s=$SECONDS
LABKIT_KIND_NODE_IMAGE="$(bash "$ROOT/tools/build-kind-node-image.sh" | tail -1)"
export LABKIT_KIND_NODE_IMAGE
say "node image $LABKIT_KIND_NODE_IMAGE ready in $((SECONDS - s))s"

s=$SECONDS
bash "$ROOT/tools/build-test-images.sh"
say "driver and workload images ready in $((SECONDS - s))s"

# the node image with those two preloaded: each cluster's `kind load` becomes a check
if [[ "${LABKIT_KIND_PRELOAD:-1}" != 0 ]]; then
  s=$SECONDS
  LABKIT_KIND_NODE_IMAGE="$(bash "$ROOT/tools/preload-test-images.sh" "$LABKIT_KIND_NODE_IMAGE" | tail -1)"
  say "node image with the test images preloaded: $LABKIT_KIND_NODE_IMAGE ready in $((SECONDS - s))s"
fi

export PATH="$CACHE/bin:$PATH"
"$@"
