#!/usr/bin/env bash
# make test's suites, in two lanes that run at the same time (run inside tools/with-kind.sh):
#   kind  the tests on real kind clusters (pytest -m kind: the e2e, with the course's notebooks on
#         kind, and the driver-fault tests). Most of their time is spent waiting for kubelets,
#         containers and controllers, so they overlap well with
#   main  everything else, one after the other: pytest -m "not kind", then the notebooks under
#         nbval on sim, then on the local control plane.
# The kind lane's output goes to test-artifacts/lanes/kind.log and is printed when both are done;
# the exit status fails when either lane fails. LABKIT_TEST_LANES=serial runs them one after the other.
# usage: tools/test-lanes.sh [LOCAL_NOTEBOOK...]
set -uo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
LOGS=test-artifacts/lanes
mkdir -p "$LOGS"
t0=$SECONDS
say() { printf 'test-lanes: %s (%ds)\n' "$*" "$((SECONDS - t0))" >&2; }

# how busy the CPUs were, per minute, from /proc/stat (whether more lanes could help); niced
# processes (the nice column) are left out, so a niced side job does not count as the tests' load
cpu_sampler() {
  local prev_busy prev_total busy total line minute=0
  read -r line < /proc/stat; set -- $line
  prev_busy=$(( $2 + $4 + $7 + $8 )); prev_total=$(( $2 + $3 + $4 + $5 + $6 + $7 + $8 ))
  while sleep 60; do
    read -r line < /proc/stat; set -- $line
    busy=$(( $2 + $4 + $7 + $8 )); total=$(( $2 + $3 + $4 + $5 + $6 + $7 + $8 ))
    minute=$((minute + 1))
    printf '%d %d\n' "$minute" $(( total > prev_total ? 100 * (busy - prev_busy) / (total - prev_total) : 0 ))
    prev_busy=$busy; prev_total=$total
  done
}
cpu_sampler > "$LOGS/cpu.log" &
sampler_pid=$!
stop_sampler() { kill "$sampler_pid" 2>/dev/null; pkill -P "$sampler_pid" 2>/dev/null; true; }
trap stop_sampler EXIT
cpu_summary() {
  stop_sampler
  awk '{ s += $2; n++; line = line sprintf(" %d", $2) } END { if (n) printf "test-lanes: CPU busy %d%% on average over %d min; per minute:%s\n", s / n, n, line }' \
    "$LOGS/cpu.log" >&2
}

kind_lane() {
  "$VENV/bin/pytest" tests -m "kind and not kind_standalone" -p no:cacheprovider --junitxml="$LOGS/kind.xml"
}

main_lane() {
  local rc=0
  "$VENV/bin/pytest" tests -m "not kind" --junitxml="$LOGS/main.xml" || rc=1
  say "main lane: pytest done"
  "$VENV/bin/pytest" -p no:cacheprovider --nbval-lax --nbval-current-env notebooks || rc=1
  say "main lane: notebooks on sim done"
  if [[ $# -gt 0 ]]; then
    LABKIT_BACKEND=local "$VENV/bin/pytest" -p no:cacheprovider --nbval-lax --nbval-current-env "$@" || rc=1
    say "main lane: notebooks on local done"
  fi
  return $rc
}

if [[ "${LABKIT_TEST_LANES:-parallel}" == serial ]]; then
  main_lane "$@"; main=$?
  kind_lane; kind=$?
else
  kind_lane > "$LOGS/kind.log" 2>&1 &
  kind_pid=$!
  # an interrupted make test stops the kind lane too (its fixtures delete their clusters)
  trap 'kill -INT $kind_pid 2>/dev/null; wait $kind_pid; stop_sampler; exit 130' INT TERM
  say "kind lane started (pid $kind_pid, log $LOGS/kind.log)"
  main_lane "$@"; main=$?
  say "main lane finished (exit $main); waiting for the kind lane"
  wait "$kind_pid"; kind=$?
  trap - INT TERM
  echo "==================================== kind lane ($LOGS/kind.log) ===================================="
  cat "$LOGS/kind.log"
fi
cpu_summary
say "lanes done: main exit $main, kind exit $kind"
[[ $main == 0 && $kind == 0 ]]
