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
# The kind lane has up to three clusters at once (the next profiles' clusters are created while the
# fault runs wait). Every node runs systemd, containerd and a kubelet, and together they pass Linux's
# default of 128 inotify instances per user: a node's systemd then exits ("Too many open files") or
# a plugin cannot watch its registration directory. kind's known-issues page gives the fix used here,
# for this run only: raised when lower, put back at the end. Without root the tests create one
# cluster at a time (LABKIT_KIND_PREFETCH=0).
INOTIFY=/proc/sys/fs/inotify
inotify_restore=()
raise_inotify() {
  local key want have
  for key in max_user_instances:512 max_user_watches:524288; do
    want=${key#*:}; key=${key%%:*}
    have=$(cat "$INOTIFY/$key" 2>/dev/null || echo 0)
    if (( have < want )); then
      if echo "$want" 2>/dev/null > "$INOTIFY/$key"; then
        inotify_restore+=("$key:$have")
      else
        say "cannot raise fs.inotify.$key ($have) without root: kind clusters are created one at a time"
        export LABKIT_KIND_PREFETCH=0  # (the e2e also checks the limit itself)
      fi
    fi
  done
}
cleanup() {
  local rc=$? key
  for key in ${inotify_restore[@]+"${inotify_restore[@]}"}; do
    echo "${key#*:}" > "$INOTIFY/${key%%:*}" 2>/dev/null || true
  done
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

# Clusters named labkit-e2e-* belong to the test lanes. One still there now was left by a run that
# was killed before its fixtures could delete it (its containers persist in the engine's data root,
# which lives in the cache): the e2e would attach to it, or the fault lane run on a stale node, so it
# goes first. LABKIT_KIND_E2E_KEEP (a developer's kept e2e clusters) leaves them alone.
remove_leftover_clusters() {
  [[ -z "${LABKIT_KIND_E2E_KEEP:-}" ]] || return 0
  local name
  for name in $(kind get clusters 2>/dev/null | grep '^labkit-e2e-' || true); do
    say "removing kind cluster $name, left over from an interrupted test run"
    kind delete cluster --name "$name" >&2 || true
  done
}

raise_inotify
export PATH="$CACHE/bin:$PATH"
remove_leftover_clusters
"$@"
