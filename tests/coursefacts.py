"""What the course may state as fact about Kubernetes and NVIDIA, and where each fact comes from.

One home for the checks of issue #33 (the course fact-check, the team's course-factcheck.md):

- `UPSTREAM_MESSAGES`: the Kubernetes messages a lesson may quote, as upstream formats them (Go verbs
  ``%s``/``%q``/``%v``), each with its source. A lesson that quotes a Kubernetes message quotes one of
  these, and the kit prints it (`quoted_message_problems`, applied to executed notebooks by
  tests/coursechecks.py and to the kit's own output by tests/course/test_course_facts.py).
- `maturity_problems`: every alpha/beta/GA statement in a lesson names its feature gate, and says what
  labkit/api/feature_gates.json says (NVIDIA driver gates: `NVIDIA_DRIVER_GATES`).
- `profile_topology` / `topology_output_problems`: the topology figures a lesson prints, recomputed
  from the node profile's YAML (not through labkit.topology, so a bug there cannot hide).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import yaml

from tests.paths import REPO

ROOT = REPO
PROFILES = ROOT / "fake_gpus" / "catalog" / "profiles"

K_SCHED = "kubernetes/kubernetes pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go"
#: (upstream format, source). Only what a 1.37 user can see: events, statuses, API errors.
UPSTREAM_MESSAGES: tuple[tuple[str, str], ...] = (
    ("request %s: device class %s does not exist", f"{K_SCHED} validateDeviceClass (PreFilter)"),
    ("cannot allocate all claims", f"{K_SCHED} Filter"),
    ("%d/%d nodes are available: %s", "kubernetes/kubernetes pkg/scheduler/framework/types.go FitError"),
    ('pod "%s/%s": ResourceClaim not created yet',
     "kubernetes/dynamic-resource-allocation resourceclaim/resourceclaim.go ErrClaimNotFound; "
     f"{K_SCHED}_test.go case missing-claim (PreEnqueue)"),
    ("FailedResourceClaimCreation", "kubernetes/kubernetes pkg/controller/resourceclaim/controller.go (event reason)"),
    ('PodResourceClaim %s: resource claim template "%s": resourceclaimtemplate.resource.k8s.io "%s" not found',
     "kubernetes/kubernetes pkg/controller/resourceclaim/controller.go handleClaim"),
    ("no such key: %s", "cel-go runtime error, wrapped by kubernetes/dynamic-resource-allocation cel/compile.go"),
    ("compilation failed: %s", "kubernetes/dynamic-resource-allocation cel/compile.go"),
    ("found no matching overload for '_>=_' applied to '(kubernetes.Quantity, kubernetes.Quantity)'",
     "cel-go checker with the Kubernetes quantity library (k8s.io/apiserver/pkg/cel/library)"),
    ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
     "start and end with an alphanumeric character", "kubernetes/apimachinery pkg/util/validation IsDNS1123Subdomain"),
)

_VERB = re.compile(r"%[sqvd]")


def _template_regex(fmt: str) -> re.Pattern[str]:
    return re.compile(".+?".join(re.escape(p) for p in _VERB.split(fmt)))


def _literals(fmt: str) -> list[str]:
    return [p for p in _VERB.split(fmt) if p.strip()]


def upstream_source(text: str) -> str | None:
    """The source of the upstream message ``text`` is (part of), or None when Kubernetes never says it."""
    for fmt, source in UPSTREAM_MESSAGES:
        if _template_regex(fmt).search(text) or (len(text.strip()) >= 10 and any(text.strip() in lit for lit in _literals(fmt))):
            return source
    return None


def quoted_pieces(quote: str) -> list[str]:
    """A quote with elisions (`a … b`) is several pieces, each said verbatim."""
    return [p.strip() for p in quote.split("…") if p.strip()]


def symptom_quotes(markdown: Iterable[str]) -> list[str]:
    """The messages the debugging lab's symptom table quotes (its first column)."""
    table = next((m for m in markdown if "| symptom |" in m), "")
    rows = [ln for ln in table.splitlines() if ln.startswith("| ") and "symptom" not in ln]
    return [q for row in rows for q in re.findall(r"`([^`]+)`", row.split("|")[1])]


def quoted_message_problems(quotes: Iterable[str], shown: str) -> list[str]:
    """Each quoted message piece is upstream's text (`UPSTREAM_MESSAGES`) and the kit printed it: a line of
    ``shown`` holds the piece, and upstream's format matches that line around it."""
    problems = []
    for quote in quotes:
        for piece in quoted_pieces(quote):
            if upstream_source(piece) is None:
                problems.append(f"the course quotes {piece!r} as Kubernetes' message; Kubernetes 1.37 never says it "
                                f"(tests/coursefacts.py UPSTREAM_MESSAGES lists what it says, with sources)")
                continue
            lines = [ln for ln in shown.splitlines() if piece in ln]
            if not lines:
                problems.append(f"the course quotes {piece!r}, which no output shows")
            elif not any(_template_regex(fmt).search(ln) or piece in _literals(fmt) for ln in lines
                         for fmt, _ in UPSTREAM_MESSAGES):
                problems.append(f"the kit prints {piece!r} but not in upstream's words: {lines[0]!r}")
    return problems


def registry_quotes(markdown: Iterable[str]) -> list[str]:
    """Backtick quotes anywhere in a lesson's text that are (part of) a message in `UPSTREAM_MESSAGES`."""
    return [q for m in markdown for q in re.findall(r"`([^`\n]{10,})`", m)
            if " " in q.strip() and all(upstream_source(p) for p in quoted_pieces(q))]


# --------------------------------------------------------------------------------------------- maturity
FEATURE_GATES = ROOT / "labkit" / "api" / "feature_gates.json"
#: NVIDIA DRA driver gates a lesson may name: (maturity, on by default). Source: kubernetes-sigs/
#: dra-driver-nvidia-gpu pkg/featuregates/featuregates.go (95932046, 2026-08-07).
NVIDIA_DRIVER_GATES = {"TimeSlicingSettings": ("alpha", False), "MPSSupport": ("alpha", False),
                       "DynamicMIG": ("alpha", False), "ConsumableShares": ("alpha", False),
                       "FabricManagerPartitioning": ("alpha", False), "PassthroughSupport": ("alpha", False),
                       "NVMLDeviceHealthCheck": ("alpha", False)}
_MATURITY = re.compile(r"\b(alpha|beta|GA)\b")
_VERSION = re.compile(r"\b1\.(2\d|3\d)\b")


def _sentences(text: str) -> list[str]:
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    return [s for s in re.split(r"(?<=[.;!?)])\s+|\n\n|\n\s*[-|]", text) if s.strip()]


def maturity_problems(name: str, text: str, table: dict[str, Any]) -> list[str]:
    """Every sentence with alpha/beta/GA names a gate; the maturity (and "on"/"off" by default) it states
    is the table's for the version it names (default: the table's default version)."""
    gates, default = table["gates"], table["default"]
    problems = []
    for sentence in _sentences(text):
        said = _MATURITY.findall(sentence)
        if not said:
            continue
        flat = " ".join(sentence.split())
        k8s = [g for g in gates if re.search(rf"\b{g}\b", sentence)]
        nvidia = [g for g in NVIDIA_DRIVER_GATES if re.search(rf"\b{g}\b", sentence)]
        if not k8s and not nvidia:
            problems.append(f"{name}: {flat!r} states a maturity without naming the feature gate")
            continue
        versions = _VERSION.findall(sentence)
        version = f"1.{versions[-1]}" if versions else default
        for gate in k8s:
            entry = gates[gate].get(version)
            if entry is None:
                problems.append(f"{name}: {flat!r}: {gate} does not exist in {version} (feature_gates.json)")
                continue
            maturity, on = entry[0], entry[1]
            if maturity not in said:
                problems.append(f"{name}: {flat!r}: {gate} is {maturity} in {version} (feature_gates.json)")
            if re.search(r"\b(on by default|on in|on since)\b", sentence) and not on:
                problems.append(f"{name}: {flat!r}: {gate} is off by default in {version}")
            if re.search(r"\boff\b", sentence) and on and not nvidia:
                problems.append(f"{name}: {flat!r}: {gate} is on by default in {version}")
        for gate in nvidia:
            maturity, on = NVIDIA_DRIVER_GATES[gate]
            if maturity not in said:
                problems.append(f"{name}: {flat!r}: NVIDIA's {gate} gate is {maturity}")
    return problems


# --------------------------------------------------------------------------------------------- topology
_NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                 "sixteen seventeen eighteen nineteen twenty")
_WORDS = {w: i for i, w in enumerate(_NUMBER_WORDS.split())}


def number(word: str) -> int:
    return int(word) if word.isdigit() else _WORDS[word.lower()]


def profile_topology(profile: str) -> dict[str, Any]:
    """From the profile's YAML alone: sockets, and per PCIe root its socket and the GPUs / NICs under it
    (device names as the fake driver publishes them: gpu-<minor>, nic-<index>)."""
    doc = yaml.safe_load((PROFILES / f"{profile}.yaml").read_text(encoding="utf-8"))
    switch_root = {s["id"]: s["root"] for s in doc.get("pcieSwitches") or []}
    roots: dict[str, dict[str, Any]] = {r["id"]: {"socket": r["socket"], "gpus": [], "nics": []}
                                        for r in doc.get("pcieRoots") or []}
    for kind, key, prefix in (("gpus", "minor", "gpu"), ("nics", "index", "nic")):
        for dev in doc.get(kind) or []:
            root = dev.get("pcieRoot") or switch_root[dev["pcieSwitch"]]
            roots[root][kind].append(f"{prefix}-{dev[key]}")
    return {"sockets": len(doc.get("sockets") or []), "gpus": len(doc.get("gpus") or []), "roots": roots}


def topology_output_problems(profile: str, shown: str) -> list[str]:
    """The root listing lesson 07 prints (`N PCIe roots`, then `<root> socket <s> [devices]`) is the profile's."""
    topo = profile_topology(profile)
    problems = []
    m = re.search(r"^(\d+) PCIe roots$", shown, flags=re.M)
    if not m or int(m.group(1)) != len(topo["roots"]):
        problems.append(f"{profile}: the lesson prints {m.group(0) if m else 'no root count'!r}, "
                        f"the profile has {len(topo['roots'])} PCIe roots")
    for root, info in topo["roots"].items():
        want = f"{root} socket {info['socket']} {sorted(info['gpus'] + info['nics'])}"
        if want not in shown:
            problems.append(f"{profile}: the lesson does not print {want!r}")
    return problems
