"""Lesson 14 (rack-scale NVLink) as NVIDIA's driver and the kubelet have it (issue #43, item 1).

Every message the lesson's outputs present as the kubelet's or a driver's words (a code cell that a
Markdown cell announces with "kubelet's words", "driver's words", "plugin's words" or "its own words") is
upstream's wording, the whole line; and the lesson teaches what NVIDIA's sources say about `numNodes`,
IMEX, cliques, ComputeDomainCliques, Fabric Manager partitions and placement. The lesson's code runs here
as a learner's Run All runs it (sim backend, cwd notebooks/), cell by cell in one namespace.

Sources (facts only):
- kubelet, kubernetes/kubernetes: pkg/kubelet/kuberuntime/kuberuntime_manager.go (event
  FailedPrepareDynamicResources, "Failed to prepare dynamic resources: %v"); pkg/kubelet/cm/dra/manager.go
  ("prepare dynamic resources: %w" around "NodePrepareResources failed for ResourceClaim %s: %s", the
  claim's name and the driver's error).
- NVIDIA's compute-domain kubelet plugin, kubernetes-sigs/dra-driver-nvidia-gpu at 95932046:
  cmd/compute-domain-kubelet-plugin/driver.go ("error preparing devices for claim '%s': %w", the claim as
  types.go ResourceClaimToString "<ns>/<name>:<uid>"), device_state.go ("prepare devices failed: %w",
  "error applying config: %w", "error asserting ComputeDomain Ready: %w", "error asserting ComputeDomain's
  namespace: %w", "error adding Node label for ComputeDomain: %w"), computedomain.go ("current node not
  ready in ComputeDomain", "ComputeDomain not found: %s", "the ResourceClaim's namespace is different than
  the ComputeDomain's namespace", "label already exists for a different ComputeDomain").
- api/nvidia.com/resource/v1beta1/computedomain.go (numNodes deprecated, "recommended to be set to zero");
  README.md ("a CD follows the workload"); pkg/featuregates/featuregates.go (FabricManagerPartitioning:
  alpha, off, FABRIC_MODE=1, Prepare needs the claim's GPUs to match a partition exactly);
  cmd/compute-domain-controller/cdstatus.go (status.nodes built from the ComputeDomainCliques).
- NVIDIA MNNVL User Guide §1.1.2 / IMEX guide: IMEX is the Internode Memory Exchange service.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import jupytext
import pytest
import yaml

from tests.paths import REPO

ROOT = REPO
NOTEBOOKS = ROOT / "notebooks"
LESSON = NOTEBOOKS / "14_rack_scale_nvlink.md"

KUBELET = ("Failed to prepare dynamic resources: prepare dynamic resources: "
           "NodePrepareResources failed for ResourceClaim (?P<claim>[a-z0-9.-]+): ")
PLUGIN = r"error preparing devices for claim '(?P<ns>[a-z0-9-]+)/(?P=claim):[0-9a-f-]{36}': "
APPLY = "prepare devices failed: error applying config: "
#: the ends of the plugin's chain a channel claim's Prepare can have (device_state.go / computedomain.go)
PLUGIN_ERRORS = (
    "error asserting ComputeDomain Ready: current node not ready in ComputeDomain",
    "error asserting ComputeDomain's namespace: ComputeDomain not found: [0-9a-f-]{36}",
    "error asserting ComputeDomain's namespace: the ResourceClaim's namespace is different than the "
    "ComputeDomain's namespace",
    "error adding Node label for ComputeDomain: label already exists for a different ComputeDomain",
)
#: a whole line that is the kubelet's event for a compute-domain claim, in upstream's words
UPSTREAM_LINE = re.compile(f"{KUBELET}{PLUGIN}{re.escape(APPLY)}(?:{'|'.join(PLUGIN_ERRORS)})")
#: what a lesson says before a cell whose output is someone's own words
ANNOUNCED = re.compile(r"(kubelet's|driver's|plugin's|its own) words", re.I)


@pytest.fixture(scope="module")
def lesson() -> list[tuple[str, str, str]]:
    """(cell type, source, what the cell printed) of each cell of lesson 14, run as Run All runs it."""
    mp = pytest.MonkeyPatch()
    mp.setenv("LABKIT_BACKEND", "sim")
    mp.setenv("MPLBACKEND", "Agg")
    mp.chdir(NOTEBOOKS)
    ns: dict = {"__name__": "__lesson__"}
    cells: list[tuple[str, str, str]] = []
    try:
        for cell in jupytext.read(LESSON).cells:
            out = io.StringIO()
            if cell.cell_type == "code":
                with contextlib.redirect_stdout(out):
                    exec(compile(cell.source, f"{LESSON.name} cell", "exec"), ns)  # noqa: S102 - the lesson's code
            cells.append((cell.cell_type, cell.source, out.getvalue()))
    finally:
        if ns.get("cluster") is not None:
            ns["cluster"].down()
        mp.undo()
    return cells


def _announced_outputs(cells: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """(the announcing sentence, the output of the next code cell) for each announced output."""
    found = []
    for i, (kind, source, _) in enumerate(cells):
        if kind == "markdown" and (m := ANNOUNCED.search(source)):
            nxt = next(out for k, _, out in cells[i + 1:] if k == "code")
            sentence = source[:m.end()].rsplit(".", 1)[-1].strip()
            found.append((sentence, nxt))
    return found


def test_every_kubelet_or_driver_message_the_lesson_prints_is_upstreams_wording(lesson) -> None:
    announced = _announced_outputs(lesson)
    assert announced, "lesson 14 announces no output as the kubelet's or the plugin's words"
    for sentence, output in announced:
        lines = [ln for ln in output.splitlines() if ln.strip()]
        assert lines, f"{sentence!r}: the cell after it prints nothing"
        for line in lines:
            assert UPSTREAM_LINE.fullmatch(line), (
                f"{sentence!r}: the lesson prints {line!r}, which is not the kubelet's event around NVIDIA's "
                f"plugin error in upstream's words")
    # and every such message anywhere in the lesson's outputs is whole, wherever it is printed
    for _, _, output in lesson:
        for line in output.splitlines():
            if "NodePrepareResources" in line or "error preparing devices" in line:
                assert UPSTREAM_LINE.fullmatch(line.strip()), line


def test_the_lesson_teaches_numnodes_as_deprecated_and_sizes_nothing_with_it(lesson) -> None:
    text = "\n".join(src for kind, src, _ in lesson if kind == "markdown")
    assert "deprecated" in text and "recommended to be set to zero" in text
    # the manifests the lesson applies and its exercise's answer set no numNodes
    applied = re.findall(r'EXAMPLES / "([^"]+)"', "\n".join(src for kind, src, _ in lesson if kind == "code"))
    # NVIDIA's own demos, applied unchanged (a copy of tests/data/upstream/nvidia-computedomain), keep theirs
    upstream = ROOT / "tests" / "data" / "upstream" / "nvidia-computedomain"
    applied = [f for f in applied if not ((upstream / Path(f).name).is_file() and
                                          (upstream / Path(f).name).read_bytes() == (ROOT / "examples" / f).read_bytes())]
    docs = [d for f in applied for d in yaml.safe_load_all((ROOT / "examples" / f).read_text()) if d]
    solution = next(src for kind, src, _ in lesson if kind == "code" and "pair-channel\n'''" in src)
    docs += [d for d in yaml.safe_load_all(solution.split("'''")[1]) if d]
    domains = [d for d in docs if d.get("kind") == "ComputeDomain"]
    assert domains and all(not (d.get("spec") or {}).get("numNodes") for d in domains), domains
    # the 19th worker waits, and the domain does not pretend to know (Ready for the trays its pods reached)
    too_big = next(out for _, src, out in lesson if '"too-big"' in src and "status" in src)
    assert "1 pending" in too_big and "ComputeDomain too-big: Ready with 18 nodes" in too_big, too_big


def test_the_lesson_says_what_nvidias_sources_say(lesson) -> None:
    text = " ".join(" ".join(src for kind, src, _ in lesson if kind == "markdown").split())
    assert "Internode Memory Exchange" in text and "GPU to GPU over NVLink" in text
    assert "import/export service" not in text
    # a clique is the NVLink partition; the rack only when unpartitioned
    assert "NVLink partition" in text and "whole rack unless" in text
    # daemons register in a ComputeDomainClique, copied into status.nodes: and the lesson shows one
    assert re.search(r"registered in the domain's `ComputeDomainClique`.*`status.nodes`", text)
    shown = "\n".join(out for _, _, out in lesson)
    assert re.search(r"^ComputeDomainClique clique .+ daemons on \['rack-a-tray-00'", shown, re.M), shown
    # FabricManagerPartitioning: alpha and off, FM in FABRIC_MODE=1, a claim of exactly the partition's size
    fm = next(p for p in re.split(r"(?<=:)\s(?=```)|\n\n", text) if "`FabricManagerPartitioning` gate" in p)
    assert "alpha, off by default" in fm and "`FABRIC_MODE=1`" in fm and "exactly the partition's size" in fm
    # placement: the clique node selector keeps the job in a rack, the ComputeDomain follows the pods
    assert "nodeSelector` on `nvidia.com/gpu.clique`, not the ComputeDomain" in text
    assert "follows its pods wherever" in text
