#!/usr/bin/env bash
# make test's suites, in nine lanes that run at the same time (run inside tools/with-kind.sh):
#   main    pytest -m "not kind and not browser and not local": the library (api, cel, model, sim,
#           cluster, fake_gpus, the site's Pyodide run);
#   shipped the same markers over the kit as shipped and as attacked (SHIPPED_FOLDERS): the wheel, the
#           pre-commit hook and the lint rules (packaging), the fuzzers and hostile inputs (security):
#           half of the main lane's CPU, which ended 3 minutes after every other lane, alone on one core;
#   cli     the same markers over the CLI, the experiments, the course's build, topology and the
#           e2e's sim side (CLI_FOLDERS): the other half of what was one main lane, whose last
#           5 minutes ran alone on one core while the other lanes had ended;
#   allocator  the same markers over tests/allocator (the allocator against the Go oracles of five
#           releases), which the main lane leaves out: half of its work, so that the two halves end
#           together on 2 cores instead of one pytest running alone for the last minutes;
#   local   pytest -m "local and not kind and not browser": the tests on the local control plane
#           (real kube-apiserver / kube-scheduler / kube-controller-manager);
#   course  the course as a learner meets it: the real-browser tests (JupyterLab + Chromium), then
#           the notebooks under nbval on sim, then on the local control plane;
#   site    the course with nothing installed: the JupyterLite site built clean and every sim
#           notebook run in Chromium on Pyodide (tests/site/test_browser_site.py, marker `site`);
#   kind    the e2e on real kind clusters (tests/e2e/test_cluster_kind_e2e.py, the course's notebooks
#           on kind included), one profile's cluster after the other;
#   faults  the driver-fault runs on a kind cluster of their own (tests/e2e/test_kind_faults.py), of
#           profile tiny (one worker: enough for plugin kills and a node restart, half the CPU).
# Much of a lane's time is waiting (for kubelets, containers, controllers, a browser, a kernel), so
# lanes overlap. On 2 cores the CPUs are busy ~90 % of the run (the per-minute figures are printed
# at the end), so lanes help only by evening out the longest chain: the main lane was the last to
# end (one pytest thread among the kind clusters' many) until its local-control-plane half became
# a lane of its own.
# Each lane has its own LABKIT_RUN_DIR, so `connect()` in one never attaches to another's cluster.
# The main lane prints as it goes; the others write test-artifacts/lanes/<lane>.log, printed at the
# end. The exit status fails when any lane fails. LABKIT_TEST_LANES=serial runs them one by one.
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
cpu_jiffies() {  # "busy total" since boot, in USER_HZ (1/100 s)
  local line; read -r line < /proc/stat; set -- $line
  echo "$(( $2 + $4 + $7 + $8 )) $(( $2 + $3 + $4 + $5 + $6 + $7 + $8 ))"
}
cpu_sampler() {
  local prev_busy prev_total busy total minute=0
  read -r prev_busy prev_total <<< "$(cpu_jiffies)"
  while sleep 60; do
    read -r busy total <<< "$(cpu_jiffies)"
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

# CPU seconds: the machine's busy time over the run (cpu_jiffies), and each lane's own processes
# (bash `times`: the children it waited for; a kind cluster's containers are dockerd's children,
# so they are in the machine's figure only)
read -r busy0 _ <<< "$(cpu_jiffies)"
# CPU seconds of the containers the engine ran (the kind nodes), from the engine's parent cgroup, which
# counts its containers, deleted ones included (cgroup v1 cpuacct, or v2 cpu.stat with the cgroupfs
# driver); empty where the containers' cgroups are elsewhere (systemd driver, rootless, Podman)
containers_cpu() {
  local f=/sys/fs/cgroup/cpuacct/docker/cpuacct.usage k v
  if [[ -r $f ]]; then echo $(( $(<"$f") / 1000000000 )); return; fi
  f=/sys/fs/cgroup/docker/cpu.stat
  [[ -r $f ]] || return 0
  while read -r k v; do [[ $k == usage_usec ]] && echo $(( v / 1000000 )); done < "$f"
}
containers0=$(containers_cpu)  # empty too when the engine has run no container yet: 0 then
run_lane() {
  local lane=$1 rc
  shift
  "${lane}_lane" "$@"; rc=$?
  times > "$LOGS/$lane.times"  # in this shell: `times` in a pipe or $(...) would see a fresh process
  awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); t += a[1] * 60 + a[2] }
       printf "%.0f\n", t }' "$LOGS/$lane.times" > "$LOGS/$lane.cpu"
  return $rc
}
cpu_split() {
  local lane busy total own=0 line=""
  read -r busy _ <<< "$(cpu_jiffies)"
  total=$(( (busy - busy0) / 100 ))
  for lane in "$@"; do
    local s; s=$(cat "$LOGS/$lane.cpu" 2>/dev/null || echo 0)
    own=$((own + s)); line+=" $lane $s,"
  done
  local containers; containers=$(containers_cpu)
  if [[ -n $containers ]]; then
    containers=$((containers - ${containers0:-0}))
    printf 'test-lanes: CPU seconds: machine busy %d; the lanes own processes:%s; the kind clusters (their containers) %d; the rest (dockerd, processes no lane waited for, the kernel) %d\n' \
      "$total" "${line%,}" "$containers" "$((total - own - containers))" >&2
  else
    printf 'test-lanes: CPU seconds: machine busy %d; the lanes own processes:%s; the rest (kind clusters, dockerd, processes no lane waited for) %d\n' \
      "$total" "${line%,}" "$((total - own))" >&2
  fi
}

RUNS="$(mktemp -d "${TMPDIR:-/tmp}/labkit-lanes.XXXXXX")"
# compiled bytecode, kept for the run in its own folder (outside the checkout, gone with it): a machine that
# sets PYTHONDONTWRITEBYTECODE (and a venv that uv installed without .pyc files) has every one of the run's
# Python processes compile its imports again (`import labkit.cli`: 1.1 CPU-s from source, 0.5 with bytecode)
export PYTHONPYCACHEPREFIX="$RUNS/pycache"
unset PYTHONDONTWRITEBYTECODE
lane_env() { mkdir -p "$RUNS/$1"; echo "LABKIT_RUN_DIR=$RUNS/$1"; }

# the cli lane's folders (about half of the main lane's CPU, measured per folder), then the shipped lane's
# (half of what was left, measured per folder on 2026-12-05: security ~130 CPU-s and packaging ~48, against
# ~160 for the main lane's api, cel, model, sim, cluster, fake_gpus and site); every other folder, a new one
# included, stays in the main lane
CLI_FOLDERS=(cli experiments course e2e topology)
SHIPPED_FOLDERS=(security packaging)
main_lane() {
  local skip=(--ignore=tests/allocator) f
  for f in "${CLI_FOLDERS[@]}" "${SHIPPED_FOLDERS[@]}"; do skip+=(--ignore="tests/$f"); done
  env "$(lane_env main)" "$VENV/bin/pytest" tests "${skip[@]}" -m "not kind and not browser and not local" \
    --junitxml="$LOGS/main.xml"
}

cli_lane() {
  env "$(lane_env cli)" "$VENV/bin/pytest" "${CLI_FOLDERS[@]/#/tests/}" -m "not kind and not browser and not local" \
    -p no:cacheprovider --junitxml="$LOGS/cli.xml"
}

shipped_lane() {
  env "$(lane_env shipped)" "$VENV/bin/pytest" "${SHIPPED_FOLDERS[@]/#/tests/}" \
    -m "not kind and not browser and not local" -p no:cacheprovider --junitxml="$LOGS/shipped.xml"
}

allocator_lane() {
  env "$(lane_env allocator)" "$VENV/bin/pytest" tests/allocator -m "not kind and not browser and not local" \
    -p no:cacheprovider --junitxml="$LOGS/allocator.xml"
}

# the folders that hold local-marked tests (tests/conftest.py refuses one elsewhere), not all of tests/
# filtered by marker: collecting every module cost ~9 CPU-s more (19.2 against 10.5) for the same 56 tests
local_lane() {
  env "$(lane_env local)" "$VENV/bin/pytest" tests/local tests/cluster tests/e2e tests/fake_gpus \
    -m "local and not kind and not browser" -p no:cacheprovider --junitxml="$LOGS/local.xml"
}

course_lane() {
  local rc=0 run
  run="$(lane_env course)"
  env "$run" "$VENV/bin/pytest" tests/course -m "browser and not kind and not site" -p no:cacheprovider --junitxml="$LOGS/course.xml" || rc=1
  say "course lane: browser tests done"
  env "$run" "$VENV/bin/pytest" -p no:cacheprovider --nbval-lax --nbval-current-env notebooks || rc=1
  say "course lane: notebooks on sim done"
  if [[ $# -gt 0 ]]; then
    env "$run" LABKIT_BACKEND=local "$VENV/bin/pytest" -p no:cacheprovider --nbval-lax --nbval-current-env "$@" || rc=1
    say "course lane: notebooks on local done"
  fi
  return $rc
}

site_lane() {
  env "$(lane_env site)" "$VENV/bin/pytest" tests/site -m "site and not kind" -p no:cacheprovider --junitxml="$LOGS/site.xml"
}

kind_lane() {
  env "$(lane_env kind)" "$VENV/bin/pytest" tests/e2e tests/cluster -m "kind and not kind_standalone and not kind_faults" \
    -p no:cacheprovider --junitxml="$LOGS/kind.xml"
}

# the fault tests' folder (tests/conftest.py keeps kind_faults tests in tests/e2e), not all of tests/
# filtered by marker: collecting every module cost ~12 CPU-s more (18.6 against 5.9) for the same tests
faults_lane() {
  env "$(lane_env faults)" LABKIT_FAULTS_PROFILE="${LABKIT_FAULTS_PROFILE:-tiny}" \
    LABKIT_FAULTS_CLUSTER="${LABKIT_FAULTS_CLUSTER:-labkit-e2e-faults}" "$VENV/bin/pytest" tests/e2e \
    -m kind_faults -p no:cacheprovider --junitxml="$LOGS/faults.xml"
}

BACKGROUND=(cli shipped allocator local course site kind faults)
declare -A status
if [[ "${LABKIT_TEST_LANES:-parallel}" == serial ]]; then
  (run_lane main); status[main]=$?
  (run_lane cli); status[cli]=$?
  (run_lane shipped); status[shipped]=$?
  (run_lane allocator); status[allocator]=$?
  (run_lane local); status[local]=$?
  (run_lane course "$@"); status[course]=$?
  (run_lane site); status[site]=$?
  (run_lane kind); status[kind]=$?
  (run_lane faults); status[faults]=$?
else
  declare -A pids
  for lane in "${BACKGROUND[@]}"; do
    run_lane "$lane" "$@" > "$LOGS/$lane.log" 2>&1 &
    pids[$lane]=$!
    say "$lane lane started (pid ${pids[$lane]}, log $LOGS/$lane.log)"
  done
  # an interrupted make test stops the other lanes too (the kind fixtures delete their clusters)
  trap 'for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null; done; wait; stop_sampler; rm -rf "$RUNS"; exit 130' INT TERM
  (run_lane main); status[main]=$?
  say "main lane finished (exit ${status[main]})"
  for lane in "${BACKGROUND[@]}"; do
    wait "${pids[$lane]}"; status[$lane]=$?
    say "$lane lane finished (exit ${status[$lane]})"
  done
  trap - INT TERM
  for lane in "${BACKGROUND[@]}"; do
    echo "==================================== $lane lane ($LOGS/$lane.log) ===================================="
    cat "$LOGS/$lane.log"
  done
fi
cpu_summary
cpu_split main "${BACKGROUND[@]}"
rm -rf "$RUNS"
failed=0
summary=""
for lane in main "${BACKGROUND[@]}"; do
  summary+=" $lane exit ${status[$lane]},"
  [[ ${status[$lane]} == 0 ]] || failed=1
done
say "lanes done:${summary%,}"
[[ $failed == 0 ]]
