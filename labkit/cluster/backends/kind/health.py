"""A GPU health event on a kind node: the event file the fake driver's plugin reads from its spool.

The plugin on each worker watches ``<plugins-dir>/<driver>/health-events/`` (fake_gpus.plugin.healthspool),
a hostPath of its DaemonSet, so the node container's own filesystem: the event is written with
``<engine> exec -i <node> sh`` (kind nodes have no Python; no kubectl exec, no network port). The plugin
answers in a result file (a refusal: its one-line reason), taints the device in its ResourceSlice as
NVIDIA's driver does with NVMLDeviceHealthCheck (the kit's DaemonSet turns the gate on) and reports
the device on the kubelet's DRAResourceHealth stream; this returns once the API server shows the taint.
"""

from __future__ import annotations

import json
import shlex
import time
import uuid
from typing import TYPE_CHECKING, Any

from fake_gpus.health_events import GPU_DRIVER, HEALTH_TAINT_KEYS, HealthEventError
from fake_gpus.plugin import healthspool
from fake_gpus.plugin.paths import DEFAULT_PLUGINS_DIR
from labkit.cluster.base import ClusterError, ClusterInputError

if TYPE_CHECKING:
    from labkit.cluster.backends.kind.backend import KindCluster

FIX = "kind is xid (with xid, e.g. 79 or 13), gpu-lost, unmonitored, or repair (the GPU replaced)"


def _node_devices(cluster: KindCluster, node: str) -> dict[str, list[dict[str, Any]]]:
    """The node's GPU devices in its ResourceSlices, in slice order, each with its taints."""
    return {d.get("name", ""): list(d.get("taints") or []) for s in cluster.list("ResourceSlice")
            if (s.get("spec") or {}).get("driver") == GPU_DRIVER and s["spec"].get("nodeName") == node
            for d in s["spec"].get("devices") or []}


def inject(cluster: KindCluster, node: str, device: str, xid: int | None, kind: str,
           timeout: float = 120.0) -> None:
    """See KindCluster.inject_health_event."""
    obj = f"node {node}"
    if cluster.profile is None:
        raise ClusterError("the kind cluster is not up: call up() first")
    nodes = [n.name for n in cluster.profile.nodes]
    if node not in nodes:
        raise ClusterInputError(f"not a node of kind cluster {cluster.cluster_name}", obj=obj,
                                fix=f"use one of: {', '.join(nodes)}")
    try:
        doc = healthspool.event_doc(device, kind, xid)
    except HealthEventError as exc:
        raise ClusterInputError(str(exc), obj=obj, field="kind" if kind != "xid" else "xid", fix=FIX) from None
    if device not in (devices := _node_devices(cluster, node)):
        shown = list(devices)
        raise ClusterInputError(f"no GPU device {device!r} in the node's ResourceSlices", obj=obj, field="device",
                                fix=f"use one of: {', '.join(shown[:12])}{' ...' if len(shown) > 12 else ''}")
    container = dict(zip(nodes, cluster.worker_containers(), strict=True))[node]
    spool = healthspool.spool_dir(DEFAULT_PLUGINS_DIR, GPU_DRIVER)
    event_id = uuid.uuid4().hex
    final = spool / f"{event_id}{healthspool.EVENT_SUFFIX}"
    tmp = spool / f".{event_id}.tmp"
    write = f"mkdir -p {shlex.quote(str(spool))} && cat > {shlex.quote(str(tmp))} && mv {shlex.quote(str(tmp))} " \
            f"{shlex.quote(str(final))}"
    engine = cluster.engine()
    cluster.runner.run([engine, "exec", "-i", container, "sh", "-c", write], input=json.dumps(doc))
    result = spool / f"{event_id}{healthspool.RESULT_SUFFIX}"
    read = f"cat {shlex.quote(str(result))} 2>/dev/null && rm -f {shlex.quote(str(result))}"
    deadline = time.monotonic() + timeout
    answer: dict[str, Any] | None = None
    while answer is None:
        out = cluster.runner.run([engine, "exec", container, "sh", "-c", read], check=False)
        if out.returncode == 0 and out.stdout.strip():
            answer = json.loads(out.stdout)
        elif time.monotonic() > deadline:
            cluster.runner.run([engine, "exec", container, "rm", "-f", str(final)], check=False)
            raise ClusterError(f"{obj}: the fake driver's plugin did not answer the health event in {timeout:.0f}s; "
                               f"see `kubectl --kubeconfig {cluster.kubeconfig} -n fake-gpus logs "
                               "-l app.kubernetes.io/name=fake-gpus-kubelet-plugin`")
        else:
            time.sleep(0.5)
    if not answer.get("ok"):
        message = str(answer.get("message") or "refused")
        cls = ClusterError if message.startswith("health event failed") else ClusterInputError
        raise cls(message, obj=obj)
    _, event = healthspool.parse_event(doc)

    def seen() -> bool:
        taints = _node_devices(cluster, node).get(device) or []
        if event is None:
            return not any(t.get("key") in HEALTH_TAINT_KEYS for t in taints)
        want = event.taint()
        return any(all(t.get(k) == v for k, v in want.items()) for t in taints)

    while not seen():
        if time.monotonic() > deadline:
            raise ClusterError(f"{obj}: the plugin took the health event ({answer.get('message')}) but its "
                               f"ResourceSlice did not show it within {timeout:.0f}s")
        time.sleep(0.5)
