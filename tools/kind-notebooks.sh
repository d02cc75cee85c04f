#!/usr/bin/env bash
# The lessons tested on kind (front matter lesson.backends) under nbval on real kind clusters (LABKIT_BACKEND=kind).
#
# usage: tools/kind-notebooks.sh [PYTEST ARGS...]     (`make notebooks-kind`; make test runs the same
#        notebooks inside tests/e2e/test_cluster_kind_e2e.py, on the clusters that test starts)
#
# One cluster per profile, started with `labkit cluster up --backend kind` and reused by every
# notebook of that profile (each notebook's connect() attaches; its down() removes only what the
# notebook applied), then removed with `labkit cluster down`. Profiles run one after the other so
# that at most one kind cluster runs at a time. The run dir is private to this script.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
LABKIT=("$VENV/bin/python" -m labkit)
export LABKIT_RUN_DIR="${LABKIT_RUN_DIR:-$(mktemp -d /tmp/labkit-nb-run.XXXXXX)}"
export LABKIT_BACKEND=kind

# profile -> notebooks: the lessons whose front matter lists `kind` in lesson.backends, grouped by
# lesson.profile (the profile each notebook's first cell connects to; tools/lessons.py)
mapfile -t GROUPS_ < <(python3 tools/lessons.py groups --backend kind)

status=0
current=""
cleanup() {
  if [[ -n "$current" ]]; then "${LABKIT[@]}" cluster down --backend kind --profile "$current" || true; fi
}
trap cleanup EXIT

for group in "${GROUPS_[@]}"; do
  profile="${group%%:*}"
  # shellcheck disable=SC2206  # the paths are split on spaces
  books=(${group#*:})
  current="$profile"
  SECONDS=0
  "${LABKIT[@]}" cluster up --backend kind --profile "$profile" --name "labkit-nb-$profile"
  echo "kind-notebooks: cluster $profile up in ${SECONDS}s" >&2
  SECONDS=0
  "$VENV/bin/pytest" -p no:cacheprovider --nbval-lax --nbval-current-env "$@" "${books[@]}" || status=1
  echo "kind-notebooks: ${books[*]} on $profile took ${SECONDS}s" >&2
  "${LABKIT[@]}" cluster down --backend kind --profile "$profile"
  current=""
done
exit "$status"
