"""The live pod explanation: `explain(pod)` for every backend that talks to a real API server
(local, kind, kubeconfig).

The live cluster's Nodes, DeviceClasses, ResourceSlices, claims, templates, pods and taint rules are
read once and restored into a throwaway sim (`labkit.sim`, bound pods and allocations kept as they
are); the sim scheduler then tries the pod on every node with labkit's allocator, and the answer is
printed in the sim's own format (`labkit.cluster.explain`). Below it: what the real scheduler said
(the PodScheduled condition and the pod's latest events).

    from labkit.cluster.explain_live import explain_pod
    print(explain_pod(cluster, "trainer", "default"))
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from labkit.api.features import SUPPORTED_VERSIONS
from labkit.cluster.base import Cluster, ClusterError, cluster_error, server_minor
from labkit.cluster.explain import format_pod_explanation, pod_explanation_doc
from labkit.cluster.snapshot import cluster_state
from labkit.model.state import StateError, load_state, profile_for_state
from labkit.output import escape_terminal
from labkit.sim.engine import Sim

#: events shown under the explanation
MAX_EVENTS = 5


def allocator_version(cluster: Cluster, kubernetes_version: str | None = None) -> str:
    """The minor ("1.36") whose allocator profile applies: the argument, else the cluster's own
    (`Cluster.kubernetes_version`: the minor a server emulates, its version, or the profile's). One line
    for versions labkit does not model."""
    raw = kubernetes_version or cluster.kubernetes_version
    minor = server_minor(raw)
    if minor not in SUPPORTED_VERSIONS:
        raise ClusterError(f"the cluster runs Kubernetes {raw}; labkit's allocator models {SUPPORTED_VERSIONS[0]}-"
                           f"{SUPPORTED_VERSIONS[-1]} only, so it cannot explain or simulate this cluster "
                           "(list/get/placements/events still work)")
    return minor


def cluster_gates(cluster: Cluster) -> dict[str, bool]:
    """Feature gates the cluster runs with, as far as the backend knows them (`Cluster.feature_gates`)."""
    return dict(cluster.feature_gates() or {})


def restored_sim(cluster: Any, objs: list[dict] | None = None, kubernetes_version: str | None = None) -> Any:
    """A `labkit.sim.engine.Sim` holding the live cluster's state (not run: nothing moved yet)."""
    version = allocator_version(cluster, kubernetes_version)
    try:
        objs = load_state(objs if objs is not None else cluster_state(cluster))
        profile = profile_for_state(objs, name=f"live {cluster.backend} cluster", kubernetes_version=version,
                                    feature_gates=cluster_gates(cluster))
    except StateError as exc:
        raise cluster_error(exc) from None
    return Sim(profile, state=objs)


def _scheduler_said(pod: dict, events: list[dict]) -> tuple[dict | None, list[dict]]:
    """(the False PodScheduled condition's reason and message, or None; the pod's latest events).

    An event that says again what an earlier one said (kube-scheduler retrying a pod that still does
    not fit writes the same FailedScheduling again) is listed once, where it was last said: the answer
    then does not depend on how many retries happened before the question was asked."""
    condition = None
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            condition = {"reason": c.get("reason", ""), "message": c.get("message", "")}
    uid = pod["metadata"].get("uid")
    mine = [e for e in events if (e.get("involvedObject") or e.get("regarding") or {}).get("uid") == uid]
    said = [{"type": e.get("type", ""), "reason": e.get("reason", ""),
             "source": (e.get("source") or {}).get("component") or e.get("reportingComponent")
             or e.get("reportingController") or "",
             "message": e.get("message") or e.get("note", "")} for e in mine]
    seen: set[tuple[str, ...]] = set()
    distinct = []
    for e in reversed(said):  # newest first: each distinct event where it was last said
        if (key := tuple(e.values())) not in seen:
            seen.add(key)
            distinct.append(e)
    return condition, distinct[::-1][-MAX_EVENTS:]


def _scheduler_lines(pod: dict, events: list[dict]) -> list[str]:
    condition, said = _scheduler_said(pod, events)
    lines = []
    if condition is not None:
        lines.append(f"  kube-scheduler says: {condition['reason']}: {condition['message']}".rstrip(": "))
    for e in said:
        lines.append(f"  event {e['type']} {e['reason']} ({e['source']}): {e['message']}")
    return lines


def _attempt(cluster: Any, pod: str, namespace: str, kubernetes_version: str | None) -> tuple[dict, Any, dict, Any]:
    """(the live pod, the restored sim, the sim's pod, the sim scheduler's attempt or None)."""
    live = cluster.get("Pod", pod, namespace)
    sim = restored_sim(cluster, kubernetes_version=kubernetes_version)
    spod = sim.store.get("Pod", pod, namespace)
    if spod is None:  # the pod went away between get and list
        raise ClusterError(f'Pod "{pod}" not found in namespace {namespace} (it was just deleted)')
    spec = spod.get("spec") or {}
    attempt = None
    if not spec.get("nodeName") and not spec.get("schedulingGates"):
        attempt = sim.scheduler.attempt(spod)
    return live, sim, spod, attempt


def explain_pod_doc(cluster: Any, pod: str, namespace: str = "default", *,
                    kubernetes_version: str | None = None) -> dict:
    """explain_pod's verdict as data (labkit.cluster.explain.pod_explanation_doc), plus what the
    real scheduler said: ``"scheduler": {"condition": {"reason", "message"} | null,
    "events": [{"type", "reason", "source", "message"}]}`` (the pod's latest events)."""
    live, sim, spod, attempt = _attempt(cluster, pod, namespace, kubernetes_version)
    doc = pod_explanation_doc(spod, attempt, lambda name: sim.store.get("ResourceClaim", name, namespace),
                              fits_on=attempt.node if attempt is not None and attempt.node else None)
    condition, events = _scheduler_said(live, cluster.events())
    doc["scheduler"] = {"condition": condition, "events": events}
    return doc


def explain_pod(cluster: Any, pod: str, namespace: str = "default", *, kubernetes_version: str | None = None,
                extra: Iterable[str] = ()) -> str:
    """Why `namespace/pod` is where it is, or why it is Pending, on a live cluster (see the module doc);
    what kube-scheduler and the events said escaped for a terminal (labkit.output.escape_terminal)."""
    live, sim, spod, attempt = _attempt(cluster, pod, namespace, kubernetes_version)
    if attempt is not None and attempt.node:
        devs = []
        for key, result in sorted(attempt.allocations.items()):
            for r in (result.get("devices") or {}).get("results") or []:
                devs.append(f"{key.split('/', 1)[1]}/{r.get('request')} -> {r.get('pool')}/{r.get('device')}")
        text = (f"Pod {namespace}/{pod} is Pending, but it fits now: labkit's scheduler would place it on node "
                f"{attempt.node}" + (f" ({', '.join(devs)})" if devs else "") + ". The real scheduler has not "
                "retried it yet (it retries after a backoff of up to 5 minutes, or at once when a node, slice or "
                "claim changes).")
    else:
        text = format_pod_explanation(spod, attempt, None,
                                  lambda name: sim.store.get("ResourceClaim", name, namespace))
    lines = [text, *_scheduler_lines(live, cluster.events()), *extra]
    return escape_terminal("\n".join(lines))
