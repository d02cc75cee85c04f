"""Lesson 15 (device health) teaches what its outputs show (issue #43, item 3): run as a learner's Run All
runs it (a Jupyter kernel, sim backend, cwd notebooks/, solutions included), the lesson shows the driver's
XID taint, the pod's allocatedResourcesStatus Unhealthy, a new pod avoiding the GPU, an application XID with
effect None, the drain's eviction and the replacement on a healthy GPU, a tolerating pod that stays, an
`nvidia.com/gpu` pod evicted too, and a before/after drawing as two real PNG images; and its exercise
checker accepts the pool-wide drain and refuses near misses.

Sources: kubernetes-sigs/dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/device_health.go (taints),
kubernetes pkg/kubelet/cm/dra/manager.go (UpdateAllocatedResourcesStatus), pkg/controller/devicetainteviction
(DisruptionTarget, DeviceTaintManagerEviction).
"""

from __future__ import annotations

import base64
import struct

import jupytext
import pytest

from labkit.course import checks
from tests.coursechecks import output_problems, text_matches_output_problems
from tests.paths import REPO

NOTEBOOKS = REPO / "notebooks"
LESSON = NOTEBOOKS / "15_device_health.md"


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o["output_type"] == "stream")


@pytest.fixture(scope="module")
def run():
    from nbclient import NotebookClient

    mp = pytest.MonkeyPatch()
    mp.setenv("LABKIT_BACKEND", "sim")
    try:
        nb = jupytext.read(LESSON)
        NotebookClient(nb, timeout=900, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    finally:
        mp.undo()
    code = [c for c in nb.cells if c.cell_type == "code"]
    return nb, code


def _cell(code, starts: str):
    return next(c for c in code if c.source.startswith(starts))


def test_it_runs_clean_and_its_outputs_pass_the_course_checks(run):
    nb, _ = run
    assert output_problems(nb) + text_matches_output_problems(LESSON.stem, nb) == []


def test_the_outputs_teach_taint_health_avoidance_and_eviction(run):
    _, code = run
    xid79 = _text(_cell(code, 'cluster.inject_health_event("dgx-a100-0", "gpu-0", xid=79)'))
    assert "dgx-a100-0  gpu-0   gpu.nvidia.com/xid  79     NoSchedule  ResourceSlice (gpu.nvidia.com)" in xid79
    unhealthy = _text(_cell(code, 'cluster.wait(until=lambda c: "Unhealthy" in health_lines(c)'))
    assert "claim:gpu  k8s.gpu.nvidia.com/claim=<claim uid>-gpu-0  Unhealthy" in unhealthy
    assert "Running" in _text(_cell(code, "print(pod_lines(cluster))"))
    probe = _text(_cell(code, 'cluster.apply(EXAMPLES / "health/probe.yaml")'))
    assert "probe        gpu      dgx-a100-0  gpu-1" in probe
    xid13 = _text(_cell(code, 'cluster.inject_health_event("dgx-a100-0", "gpu-1", xid=13)'))
    assert "gpu-1   gpu.nvidia.com/xid  13     None" in xid13 and "gpu-1  Healthy" in xid13
    drained = _text(_cell(code, "last_seen: dict = {}"))
    assert "('DisruptionTarget', 'DeletionByDeviceTaintManager', " in drained
    assert "Normal DeviceTaintManagerEviction Marking for deletion (device-taint-eviction-controller)" in drained
    moved = _text(code[code.index(_cell(code, "last_seen: dict = {}")) + 1])  # the replacement's placement
    assert "dgx-a100-0  gpu-2" in moved and "gpu-0" not in moved
    explained = _text(_cell(code, 'cluster.apply(EXAMPLES / "health/all-eight.yaml")'))
    assert "taint gpu.nvidia.com/xid=79:NoSchedule not tolerated" in explained
    diag = _text(_cell(code, 'show_yaml(EXAMPLES / "health/diag.yaml"'))
    assert "request gpu -> gpu.nvidia.com/dgx-a100-0/gpu-0" in diag and "gpu-diag     Running" in diag
    legacy = _text(_cell(code, 'cluster.apply(EXAMPLES / "health/legacy.yaml")'))
    assert "gpu.nvidia.com/gpu-lost" in legacy and "(no health reported)" in legacy
    after = _text(_cell(code, 'cluster.apply(EXAMPLES / "health/drain-t4.yaml")'))
    assert "legacy" not in after and "gpu-diag     Running" in after


def test_the_drawing_is_two_real_images_before_and_after(run):
    _, code = run
    cell = _cell(code, "from labkit.topology import draw_node, node_graph")
    pngs = [base64.b64decode(o["data"]["image/png"]) for o in cell.outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 2
    for png in pngs:
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", png[16:24])
        assert width > 400 and height > 300 and len(png) > 20_000


def test_the_exercise_is_open_then_solved(run):
    _, code = run
    exercise, solution = [c for c in code if "checks.check_node_drain(" in c.source]
    assert _text(exercise).startswith("❌ node drain: not answered yet")
    assert _text(solution).startswith("✅ on-t4-1 evicted (DeviceTaintManagerEviction); the pod on t4-0 stays")


RULE = """
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {{name: m}}
spec:
  deviceSelector: {{{selector}}}
  taint: {{key: labkit.dev/maintenance, effect: {effect}}}
"""


@pytest.mark.parametrize("selector,effect,verdict", [
    ("driver: gpu.nvidia.com, pool: t4-1", "NoExecute", "✅ on-t4-1 evicted"),
    ("driver: gpu.nvidia.com, pool: t4-1", "NoSchedule", "❌ the taint's effect is 'NoSchedule'"),
    ("driver: gpu.nvidia.com, pool: t4-1, device: gpu-0", "NoExecute", "❌ the rule selects only device gpu-0"),
    ("driver: gpu.nvidia.com, pool: t4-0", "NoExecute", "❌ the rule selects driver 'gpu.nvidia.com', pool 't4-0'"),
])
def test_the_checker_accepts_the_pool_drain_only(selector, effect, verdict, capsys):
    result = checks.check_node_drain(RULE.format(selector=selector, effect=effect))
    out = capsys.readouterr().out
    assert out.startswith(verdict), out
    assert bool(result) is verdict.startswith("✅")


@pytest.mark.parametrize("answer", [..., None, "???", "kind: ???"])
def test_a_placeholder_fails_without_raising(answer, capsys):
    assert not checks.check_node_drain(answer)
    assert capsys.readouterr().out.startswith("❌")
