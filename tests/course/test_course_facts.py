"""The course tells the truth (issue #33): what a lesson quotes, states or counts is checked against its
source — upstream's messages, labkit/api/feature_gates.json, the node profiles, the repository itself.

The lessons' code runs here as a learner's Run All runs it (sim backend, cwd notebooks/), cell by cell
in one namespace, so the kit's own output is what is checked; the browser test applies the same
checks (tests/coursechecks.py) to JupyterLab's Run All.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import jupytext
import pytest
import yaml

from labkit.cel.validation import validate
from tests.coursefacts import (
    PROFILES,
    ROOT,
    UPSTREAM_MESSAGES,
    maturity_problems,
    number,
    profile_topology,
    quoted_message_problems,
    registry_quotes,
    symptom_quotes,
    topology_output_problems,
    upstream_source,
)

NOTEBOOKS = ROOT / "notebooks"
LESSONS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.md"))
DOCS = [ROOT / "README.md", NOTEBOOKS / "README.md", *sorted((ROOT / "examples").glob("*/README.md"))]


def _markdown(path: Path) -> list[str]:
    return [c.source for c in jupytext.read(path).cells if c.cell_type == "markdown"]


def run_lesson(stem: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Everything the lesson's code cells print (solutions included)."""
    monkeypatch.setenv("LABKIT_BACKEND", "sim")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(NOTEBOOKS)
    path = next(NOTEBOOKS.glob(f"{stem}_*.md"))
    ns: dict = {"__name__": "__lesson__"}
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            for cell in jupytext.read(path).cells:
                if cell.cell_type == "code":
                    exec(compile(cell.source, f"{path.name} cell", "exec"), ns)  # noqa: S102 - the lesson's own code
    finally:
        if ns.get("cluster") is not None:
            ns["cluster"].down()
    return out.getvalue()


# ------------------------------------------------------------------------- 1. quoted Kubernetes messages
def test_every_upstream_message_names_its_source():
    assert all(fmt and "/" in source for fmt, source in UPSTREAM_MESSAGES)
    assert upstream_source("request gpu: device class gpu.nvidia.co does not exist")
    assert upstream_source("must be a DNS subdomain") is None  # API documentation wording, no error says it
    assert upstream_source("waiting for resource claim controller to create the resourceclaim") is None  # 1.26-1.27


@pytest.mark.parametrize("stem", ["03", "09", "14"])
def test_the_messages_a_lesson_quotes_are_upstreams_and_the_kit_prints_them(stem, monkeypatch):
    path = next(NOTEBOOKS.glob(f"{stem}_*.md"))
    quotes = registry_quotes(_markdown(path)) + (symptom_quotes(_markdown(path)) if stem == "09" else [])
    assert quotes, f"{path.name} quotes no Kubernetes message any more: drop it from this test"
    assert quoted_message_problems(quotes, run_lesson(stem, monkeypatch)) == []


def test_no_other_lesson_quotes_a_message_this_test_does_not_run():
    quoting = {p.name[:2] for p in LESSONS if registry_quotes(_markdown(p))}
    assert quoting <= {"03", "09", "14"}, f"add {sorted(quoting - {'03', '09', '14'})} to the test above"


def test_the_quote_check_catches_words_kubernetes_never_says():
    shown = "Pod default/x is Pending: 0/3 nodes are available: 3 cannot allocate all claims."
    assert quoted_message_problems(["cannot allocate all claims"], shown) == []
    assert "never says it" in quoted_message_problems(["must be a DNS subdomain"], shown + " must be a DNS subdomain")[0]
    assert "no output shows" in quoted_message_problems(["no such key: index"], shown)[0]


# ------------------------------------------------------------------------- 2. release and maturity facts
def test_maturity_statements_follow_the_feature_gate_table():
    table = json.loads((ROOT / "labkit" / "api" / "feature_gates.json").read_text(encoding="utf-8"))
    problems = [p for path in [*LESSONS, *DOCS]
                for p in maturity_problems(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"), table)]
    assert problems == []


def test_the_maturity_check_catches_a_wrong_or_unnamed_statement():
    table = json.loads((ROOT / "labkit" / "api" / "feature_gates.json").read_text(encoding="utf-8"))
    assert maturity_problems("x", "(`DRAConsumableCapacity` is beta and on in 1.37.)", table) == []
    assert maturity_problems("x", "`DRAConsumableCapacity` is GA in 1.37.", table) != []
    assert maturity_problems("x", "`DRADeviceTaintRules` is beta and on in 1.36.", table) != []  # off in 1.36
    assert maturity_problems("x", "Device taints are beta.", table) != []  # which gate?
    assert maturity_problems("x", "NVIDIA's `DynamicMIG` gate (beta).", table) != []


def test_what_the_course_says_of_1_38s_release_follows_the_pinned_release():
    """Lesson 11's "What 1.38 changes" and the README say 1.38 is due (2026-12-16) while
    tools/kubernetes-releases.env pins a pre-release and the kit's default is 1.37; once it pins v1.38.0
    the default is 1.38 and no text says "due" any more (issue 42: say "released" only once it is)."""
    pins = dict(re.findall(r"^(KUBE_1_\d+)=(\S+)$", (ROOT / "tools" / "kubernetes-releases.env").read_text(encoding="utf-8"),
                           flags=re.M))
    released = "-" not in pins["KUBE_1_38"]
    default = json.loads((ROOT / "labkit" / "api" / "feature_gates.json").read_text(encoding="utf-8"))["default"]
    assert (default == "1.38") == released, (pins["KUBE_1_38"], default)
    for path in [*LESSONS, *DOCS]:
        text = " ".join(path.read_text(encoding="utf-8").split())
        due = re.findall(r"1\.38[^.]{0,40}?\bdue\b|\bdue\b[^.]{0,20}?2026-12-16", text)
        said_released = re.findall(r"1\.38 \(released", text)
        assert not (due if released else said_released), (path.name, due or said_released)
    lesson = " ".join((NOTEBOOKS / "11_the_real_thing.md").read_text(encoding="utf-8").split())
    assert ("1.38 (released 2026-12-16)" if released else "1.38 is due on 2026-12-16") in lesson


def test_classic_dra_removal_releases_are_the_kits():
    """Lesson 11 and the example README say the releases `labkit validate` prints for old manifests."""
    rc = {"apiVersion": "resource.k8s.io/v1alpha2", "kind": "ResourceClass", "metadata": {"name": "gpu"}}
    psc = {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "PodSchedulingContext", "metadata": {"name": "p"}}
    removed = {kind: re.search(r"removed in Kubernetes (1\.\d+)", str(validate([obj])[0])).group(1)
               for kind, obj in (("ResourceClass", rc), ("PodSchedulingContext", psc))}
    assert removed == {"ResourceClass": "1.31", "PodSchedulingContext": "1.32"}  # K-API tags v0.30.0/v0.31.0/v0.32.0
    for path in (NOTEBOOKS / "11_the_real_thing.md", ROOT / "examples" / "real-cluster" / "README.md"):
        text = " ".join(path.read_text(encoding="utf-8").split())
        assert re.search(rf"v1alpha2[^.]*?{re.escape(removed['ResourceClass'])}", text), path.name
        assert re.search(rf"PodSchedulingContext[^.]*?{re.escape(removed['PodSchedulingContext'])}", text), path.name


# ------------------------------------------------------------------------- 3. hardware profiles


@pytest.mark.parametrize("path", sorted(PROFILES.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_profile_cites_its_sources(path: Path):
    header = "\n".join(ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.startswith("#"))
    assert re.search(r"^# Sources?\b", header, flags=re.M), f"{path.name}: no '# Sources' in its header comment"
    cited = re.findall(r"https://\S+|\b[\w.-]+/[\w.-]+ [\w./-]+\.(?:go|yaml|md)\b|User Guide|whitepaper|datasheet", header)
    assert cited, f"{path.name}: its sources name no document"


def test_the_dgx_h100_is_eight_gpu_nic_pairs_each_on_its_own_root():
    topo = profile_topology("dgx-h100")
    pairs = [r for r in topo["roots"].values() if r["gpus"]]
    assert [(len(r["gpus"]), len(r["nics"])) for r in pairs] == [(1, 1)] * 8
    assert all(r["gpus"][0].split("-")[1] == r["nics"][0].split("-")[1] for r in pairs)  # GPUn with its NICn
    assert "BlueField" not in yaml.safe_load((PROFILES / "dgx-h100.yaml").read_text(encoding="utf-8"))["description"]


def test_lesson_07_prints_the_profiles_topology(monkeypatch):
    assert topology_output_problems("dgx-h100", run_lesson("07", monkeypatch)) == []


def test_lesson_texts_state_the_profiles_figures():
    h100 = profile_topology("dgx-h100")
    text07 = " ".join((NOTEBOOKS / "07_topology.md").read_text(encoding="utf-8").split())
    m = re.search(r"(\w+) GPU\+NIC PCIe roots, (\w+) per socket", text07)
    pairs = [r for r in h100["roots"].values() if r["gpus"]]
    assert m and number(m.group(1)) == len(pairs)
    assert number(m.group(2)) * h100["sockets"] == len(pairs)
    a100 = profile_topology("dgx-a100")
    text02 = (NOTEBOOKS / "02_inventory.md").read_text(encoding="utf-8")
    m = re.search(r"DGX A100: (\d+) GPUs on NVSwitch, (\d+) PCIe roots with (\d+) GPUs \+ (\d+) NICs each", text02)
    assert m and int(m.group(1)) == a100["gpus"] and int(m.group(2)) == len(a100["roots"])
    assert {(len(r["gpus"]), len(r["nics"])) for r in a100["roots"].values()} == {(int(m.group(3)), int(m.group(4)))}


def test_the_topology_check_catches_a_lesson_that_disagrees_with_the_profile():
    wrong = "2 PCIe roots\npci0000:00 socket 0 ['gpu-0', 'gpu-1', 'gpu-2', 'gpu-3', 'nic-0']\n"
    problems = topology_output_problems("dgx-h100", wrong)
    assert any("10 PCIe roots" in p for p in problems) and len(problems) == 11


# ------------------------------------------------------------------------- 4. counts in the docs
def test_counts_in_the_docs_are_the_repositorys():
    readme = (NOTEBOOKS / "README.md").read_text(encoding="utf-8")
    m = re.search(r"^(\w+) notebooks", readme, flags=re.M)
    assert m and number(m.group(1)) == len(LESSONS), f"notebooks/README.md says {m and m.group(0)!r}"
    lanes = [lane for lane in re.findall(r"^(\w+)_lane\(\)", (ROOT / "tools" / "test-lanes.sh").read_text(encoding="utf-8"),
                                         flags=re.M) if lane != "run"]
    m = re.search(r"in (\w+) lanes at the same time", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert m and number(m.group(1)) == len(lanes), (m and m.group(0), lanes)
    policies = re.findall(r"^\| `[\w-]+` \|", (NOTEBOOKS / "12_experiments.md").read_text(encoding="utf-8"), flags=re.M)
    m = re.search(r"one trace, (\w+) placement policies", readme)
    assert m and number(m.group(1)) == len(policies)
    gang = yaml.safe_load((ROOT / "examples" / "gangs" / "train.yaml").read_text(encoding="utf-8").split("\n---\n")[0])
    m = re.search(r"a PodGroup of (\d+) workers", readme)
    assert m and int(m.group(1)) == gang["spec"]["schedulingPolicy"]["gang"]["minCount"]


# ------------------------------------------------------------------------- 5. sources in every lesson
@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem[:2])
def test_every_lesson_ends_with_how_we_know(path: Path):
    text = path.read_text(encoding="utf-8")
    section = text.partition("\n## How we know\n")[2]
    assert section, f"{path.name}: no '## How we know' section after the recap"
    assert text.index("## Recap") < text.index("## How we know")
    assert re.search(r"^- .*(/|KEP-\d+|https://)", section, flags=re.M), f"{path.name}: its sources name no document"
