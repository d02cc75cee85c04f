"""The shared Kubernetes-API base of the real-cluster backends, and the `kubeconfig` backend.

`KubeCluster` is what every backend with a real API server shares (as kwok's backends share
``runtime.Cluster``): events, placements and explain, written once over ``get``/``list``. The
`local` and `kind` backends derive from it and add only what differs (how the cluster starts,
how objects are written, how a container's env is read); no backend imports a sibling.

`KubeconfigCluster` is that base reached through a kubeconfig: the `kubeconfig` backend (attach
to an existing cluster, any conformant one serving resource.k8s.io/v1, read-only unless asked)
and the kept-alive API connection of the kind backend.

    c = connect("kubeconfig", context="prod", kubeconfig="~/.kube/config")
    print(c.explain("trainer-0", "ml"))          # why is it Pending?
    c.placements(); c.events(); c.list("ResourceSlice")

Credentials are whatever the kubeconfig holds (token, tokenFile, basic auth, client certificate,
exec plugin), handled as kubectl handles them (`kube.kubeconfig_configuration`): sent only to an
https server, an exec plugin run as client-go runs it. Each request waits at most `request_timeout`
seconds to connect and for each part of the answer; an exec plugin at most `exec_timeout` seconds.
The server's /version picks the allocator profile used by `explain`.
Writes (`apply`, `delete`) are refused unless `read_only=False`.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labkit.api.features import DEFAULT_VERSION, FEATURE_DEFAULTS, SUPPORTED_VERSIONS, minor_key
from labkit.cluster.annotations import CONTAINER_ENV_ANNOTATION, ENV_ANNOTATION
from labkit.cluster.base import (
    Cluster,
    ClusterError,
    ClusterInputError,
    NotFound,
    RefusedObjects,
    Source,
    load_source,
    register_backend,
    server_minor,
)
from labkit.cluster.explain_live import explain_pod
from labkit.cluster.kube import EXEC_TIMEOUT, ApiError, Kube, client, kubeconfig_configuration
from labkit.cluster.placements import PlacementTable, build_placements
from labkit.model.kinds import API_VERSIONS, canonical_kind, is_namespaced
from labkit.model.profiles import ClusterProfile, NodeSpec


def _resource_name(kind: str) -> str:
    kind = canonical_kind(kind)
    group = API_VERSIONS.get(kind, "v1").rpartition("/")[0]
    plural = kind.lower() + ("es" if kind.endswith("s") else "s")
    return f"{plural}.{group}" if group else plural


#: API server answers that mean the request (the objects, the context's rights) is what is wrong:
#: 400 Bad Request, 409 Conflict, 422 Invalid (401 and 403 name the credentials)
REFUSED_INPUT = frozenset({400, 409, 422})

#: apply order on a real API server: what pods depend on first (namespaces, classes, taint rules),
#: then claims and templates, then the rest (pods, workloads); a stable sort keeps the file's order
#: within a tier, so pods never race their claims
APPLY_TIERS = {"Namespace": 0, "CustomResourceDefinition": 0, "DeviceClass": 0, "PriorityClass": 0,
               "ResourceSlice": 0, "DeviceTaintRule": 0, "ServiceAccount": 1, "ConfigMap": 1,
               "ResourceClaimTemplate": 1, "ResourceClaim": 1}

#: seconds `apply` waits for kube-controller-manager to report a new or changed DeviceTaintRule
RULE_REPORT_TIMEOUT = 60.0
#: the first minor whose kube-controller-manager reports DeviceTaintRules in their status
RULE_STATUS_SINCE = (1, 35)
RULE_POLL_INTERVAL = 0.1  # the controller reports a rule within a fraction of a second on a quiet machine


def apply_tier(obj: dict) -> int:
    return APPLY_TIERS.get(str(obj.get("kind", "")), 2)


def rule_reported(rule: dict) -> bool:
    """kube-controller-manager has seen this generation of the DeviceTaintRule: its status carries
    the EvictionInProgress condition for it (written for every effect since 1.35)."""
    generation = (rule.get("metadata") or {}).get("generation") or 1
    return any(c.get("type") == "EvictionInProgress" and (c.get("observedGeneration") or 0) >= generation
               for c in (rule.get("status") or {}).get("conditions") or [])


def _event_time(e: dict) -> str:
    return (e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp")
            or e["metadata"].get("creationTimestamp") or "")


#: how often wait() looks (each look is a few reads over one kept-alive connection)
POLL_INTERVAL = 0.5
#: how long nothing must change before wait() calls the cluster settled (kube-scheduler requeues a
#: pod that was unschedulable when something it waits for changes, a moment later)
QUIET = 2.0
#: how long wait() gives a pod that a kubelet has not started, with nothing changing
UNDECIDED_GRACE = 10.0


def _settle_fingerprint(pods: list[dict], claims: list[dict]) -> str:
    return json.dumps([
        [(p["metadata"].get("namespace"), p["metadata"]["name"], p["spec"].get("nodeName"),
          (p.get("status") or {}).get("phase"), bool(p["metadata"].get("deletionTimestamp")),
          [(c.get("type"), c.get("status"), c.get("reason")) for c in (p.get("status") or {}).get("conditions") or []],
          (p.get("status") or {}).get("resourceClaimStatuses")) for p in pods],
        [(c["metadata"].get("namespace"), c["metadata"]["name"], bool(c["metadata"].get("deletionTimestamp")),
          (c.get("status") or {}).get("allocation"), (c.get("status") or {}).get("reservedFor")) for c in claims],
    ], sort_keys=True, default=str)


def _keys(objs: list[dict]) -> set[tuple[str, str]]:
    return {(o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objs}


def pod_in_flight(pod: dict, claims: set[tuple[str, str]], templates: set[tuple[str, str]]) -> bool:
    """Whether the control plane will still act on `pod` without anyone's help. `claims`, `templates`:
    the (namespace, name) of every ResourceClaim and of every ResourceClaimTemplate.

    In flight: a pod being deleted; a pod whose template's claim the resourceclaim controller has not
    created yet (the template exists); a pod kube-scheduler has not decided on (no PodScheduled
    condition, not bound) although every claim it names exists. Not in flight: a pod naming a claim
    or template that does not exist — kube-scheduler's DRA PreEnqueue holds it back without a
    condition, and nothing changes until someone creates the object."""
    meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
    if meta.get("deletionTimestamp"):
        return True
    if status.get("phase", "Pending") != "Pending":
        return False
    ns = meta.get("namespace", "default")
    created = {s["name"]: s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []}
    missing = False
    for ref in spec.get("resourceClaims") or []:
        if ref.get("resourceClaimName"):
            missing |= (ns, ref["resourceClaimName"]) not in claims
        elif ref.get("resourceClaimTemplateName") and ref["name"] not in created:
            # the resourceclaim controller has not written the claim's name yet
            if (ns, ref["resourceClaimTemplateName"]) in templates:
                return True
            missing = True
    decided = bool(spec.get("nodeName")) or any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" for c in status.get("conditions") or [])
    return not decided and not missing


class KubeCluster(Cluster):
    """A cluster with a real API server: what the local, kind and kubeconfig backends share."""

    #: gitVersion from the server's /version once attached ("v1.37.0"); "" for a cluster the kit made
    server_version: str = ""
    #: the minor the server emulates when it is newer binaries behaving as an older one ("1.36"), else None
    emulated_version: str | None = None

    @property
    def kubernetes_version(self) -> str:
        """The minor the server emulates, else the server's own minor, else the profile's."""
        if self.emulated_version:
            return self.emulated_version
        if self.server_version:
            return server_minor(self.server_version)
        return super().kubernetes_version

    # -- objects ---------------------------------------------------------------------------
    def _apply_in_order(self, objs: list[dict], write: Callable[[list[dict]], list[dict]]) -> list[dict]:
        """Write `objs` (through `write`, the backend's way) in `APPLY_TIERS` order; returns them as stored.

        A DeviceTaintRule does not act when the API server stores it but when the scheduler's own
        watch brings it, and a pod created right after it can still be given a device it taints
        (seen on kind under load: the sim's answer was gpu-1, kind's the tainted gpu-0). So the
        rules go first, and nothing that could be scheduled is written until the cluster has
        reported every rule (`wait_for_taint_rules`), as an admin waits before sending work.

        An object the server refuses does not stop the others, as with `kubectl apply`: `write`
        raises RefusedObjects after writing the rest, and so does this, naming every refusal."""
        objs = sorted(objs, key=apply_tier)
        first = sum(1 for o in objs if apply_tier(o) == 0)
        if not any(o.get("kind") == "DeviceTaintRule" for o in objs[:first]):
            return write(objs)
        refused: list[RefusedObjects] = []
        try:
            stored = write(objs[:first])
        except RefusedObjects as exc:
            refused, stored = [exc], exc.stored
        self.wait_for_taint_rules([o for o in stored if o.get("kind") == "DeviceTaintRule"])
        try:
            stored += write(objs[first:]) if objs[first:] else []
        except RefusedObjects as exc:
            refused, stored = [*refused, exc], stored + exc.stored
        if refused:
            raise RefusedObjects.merge(refused, stored)
        return stored

    def wait_for_taint_rules(self, rules: list[dict], timeout: float | None = None) -> bool:
        """Wait until kube-controller-manager has reported each of `rules` (its status names their
        generation), the cluster's sign that its controllers see the taint; True when all were.
        Kubernetes before 1.35 writes no status: nothing to wait for. A rule not reported within
        `timeout` (default `RULE_REPORT_TIMEOUT`) gets a warning naming it (work sent now may still
        be given its devices)."""
        timeout = RULE_REPORT_TIMEOUT if timeout is None else timeout
        if not rules or minor_key(getattr(self.profile, "kubernetes_version", DEFAULT_VERSION)) < RULE_STATUS_SINCE:
            return True
        deadline = time.monotonic() + timeout
        waiting = {r["metadata"]["name"] for r in rules if not rule_reported(r)}
        while waiting:
            for name in sorted(waiting):
                try:
                    if rule_reported(self.get("DeviceTaintRule", name, None)):
                        waiting.discard(name)
                except NotFound:  # deleted meanwhile: nothing left to wait for
                    waiting.discard(name)
            if not waiting:
                break
            if time.monotonic() > deadline:
                warnings.warn(f"DeviceTaintRule {', '.join(sorted(waiting))}: kube-controller-manager has not reported "
                              f"it within {timeout:.0f} s (no EvictionInProgress condition for its generation), so the "
                              "scheduler may not see its taint yet and pods applied now can still get its devices; "
                              "check that kube-controller-manager runs and has the DRADeviceTaintRules feature",
                              stacklevel=2)
                return False
            time.sleep(RULE_POLL_INTERVAL)
        return True

    def events(self) -> list[dict]:
        return sorted(self.list("Event"), key=_event_time)

    def placements(self) -> PlacementTable:
        return build_placements(self.list("Pod"), self.list("ResourceClaim"), self.list("ResourceSlice"))

    def explain(self, pod: str, namespace: str = "default") -> str:
        return explain_pod(self, pod, namespace)

    # -- running ---------------------------------------------------------------------------
    def wait(self, until: Callable[[Cluster], bool] | None = None, timeout: float = 60.0) -> bool:
        """Poll until `until(self)` holds, or (None) until the cluster has settled: pods and claims
        did not change between two polls and no pod is in flight (`pod_in_flight`: the control plane
        will still act on it without anyone's help, however long a busy machine makes that take).
        A pod bound to a node but not started (`_starting`) is the kubelet's: waited for while
        things change, given up on after `UNDECIDED_GRACE` seconds without a change (a claim that
        cannot be prepared, an image that cannot be had)."""
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while True:
            self._check_alive()
            if until is not None:
                if until(self):
                    return True
            else:
                pods, claims = self.list("Pod"), self.list("ResourceClaim")
                fingerprint = _settle_fingerprint(pods, claims)
                if fingerprint != last:
                    last, since = fingerprint, time.monotonic()
                else:
                    quiet = time.monotonic() - since
                    made, templates = _keys(claims), _keys(self.list("ResourceClaimTemplate"))
                    if quiet >= QUIET and not any(pod_in_flight(p, made, templates) for p in pods) and (
                            quiet >= UNDECIDED_GRACE or not any(self._starting(p) for p in pods)):
                        return True
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL_INTERVAL)

    def _check_alive(self) -> None:
        """Raise ClusterError when the cluster's own processes are gone (a backend that runs them)."""

    def _starting(self, pod: dict) -> bool:
        """Bound to a node, not started, not given up on: the kubelet is still at it."""
        return bool(pod["spec"].get("nodeName")) and (pod.get("status") or {}).get("phase", "Pending") == "Pending"


class KubeconfigCluster(KubeCluster):
    """An existing cluster reached through a kubeconfig (see the module doc)."""

    backend = "kubeconfig"

    def __init__(self, *, kubeconfig: str | Path | None = None, context: str | None = None,
                 read_only: bool = True, progress: bool = True, request_timeout: float = 15.0,
                 exec_timeout: float = EXEC_TIMEOUT, **kw: Any) -> None:
        super().__init__(progress=progress, **kw)
        self.kubeconfig_path = Path(os.path.expanduser(str(kubeconfig))) if kubeconfig else None
        self.context = context
        self.read_only = read_only
        self.request_timeout = request_timeout
        self.exec_timeout = exec_timeout
        self.kube: Any = None
        self.server = ""
        self.server_version = ""  # gitVersion from /version, e.g. "v1.37.0"
        self.emulated_version = None  # "1.36" when the server emulates an older minor
        self._gates: dict[str, bool] | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def up(self, profile: Any = None) -> KubeconfigCluster:
        """Attach (the profile argument is ignored: the cluster is what it is)."""
        client(self.backend)  # MissingPackage (one line) where the kubernetes client is not installed
        path = self.kubeconfig_path or Path(os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0]
                                            ).expanduser()
        if not path.is_file():
            raise NotFound(f"kubeconfig {path}: no such file; pass kubeconfig=PATH (--kubeconfig) or set $KUBECONFIG")
        cfg, self.context = kubeconfig_configuration(path, self.context, exec_timeout=self.exec_timeout)
        self.kube = Kube(configuration=cfg, timeout=self.request_timeout)
        self.server = self.kube.server
        self.where = f"context {self.context} ({self.server})"
        version = self._call(lambda: self.kube.request("GET", "/version"), "/version")
        version = version if isinstance(version, dict) else {}
        self.server_version = str(version.get("gitVersion", ""))
        if version.get("emulationMinor") and version.get("emulationMinor") != version.get("minor"):
            # newer binaries behaving as an older minor (--emulated-version): that minor's rules apply
            self.emulated_version = f"{version.get('emulationMajor', '1')}.{version['emulationMinor']}"
        self._call(self.kube.discover, "API discovery")
        try:
            self.kube.resource("ResourceSlice", "resource.k8s.io/v1")
        except Exception:  # noqa: BLE001 - ApiError: not served
            raise ClusterError(f"{self.where} does not serve resource.k8s.io/v1 (Kubernetes {self.server_version}); "
                               "DRA's v1 API needs Kubernetes 1.34 or newer") from None
        self.profile = self._describe()
        return self

    def _describe(self) -> Any:
        minor = self.emulated_version or server_minor(self.server_version)
        nodes = [NodeSpec(name=n["metadata"]["name"],
                          node_profile=(n["metadata"].get("labels") or {}).get("fake-gpus.dev/node-profile", "(live)"))
                 for n in self.list("Node")]
        return ClusterProfile(name=self.context or "kubeconfig", nodes=nodes,
                              kubernetes_version=minor if minor in SUPPORTED_VERSIONS else DEFAULT_VERSION,
                              description=f"attached through kubeconfig {self.where}", source=str(self.kubeconfig_path))

    def down(self) -> None:
        """Detach (the cluster itself is not touched)."""
        if self.kube is not None:
            self.kube.close()
            self.kube = None

    def _call(self, fn: Callable[[], Any], what: str) -> Any:
        """Run one API call; every failure becomes one line naming the server, the call and the fix."""
        import urllib3

        if self.kube is None:
            raise ClusterError("kubeconfig cluster: not attached; use connect('kubeconfig', context=...)")
        try:
            return fn()
        except ApiError as exc:
            if exc.status in (401, 403) and self.kube.plain_http:
                raise ClusterInputError(f"{self.where}: {what}: {'Unauthorized' if exc.status == 401 else 'Forbidden'}: "
                                        "the server address is plain http, so the context's credentials were not sent "
                                        "(kubectl sends them only over https); use the cluster's https:// address"
                                        ) from None
            if exc.status == 401:
                raise ClusterInputError(f"{self.where}: {what}: Unauthorized: the context's credentials were not accepted "
                                   "(expired token or certificate?); refresh them in the kubeconfig") from None
            if exc.status == 403:
                raise ClusterInputError(f"{self.where}: {what}: forbidden by RBAC ({exc.message}); ask for a (Cluster)Role "
                                   "granting get/list on it, or use a context with more rights") from None
            if exc.status == 404:
                raise NotFound(exc.message) from None
            cls = ClusterInputError if exc.status in REFUSED_INPUT else ClusterError
            raise cls(f"{self.where}: {what}: {exc.message}") from None
        except urllib3.exceptions.TimeoutError:
            raise ClusterError(f"cannot reach the API server of {self.where}: {what}: no answer within "
                               f"{self.request_timeout:g} s (request_timeout); check the server address in the "
                               "kubeconfig and that the cluster is running") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise ClusterError(f"cannot reach the API server of {self.where}: {what}: {reason}; check the server "
                               "address in the kubeconfig and that the cluster is running") from None

    # -- objects ---------------------------------------------------------------------------
    def _refuse(self, verb: str) -> None:
        if self.read_only:
            raise ClusterError(f"{verb} refused: the kubeconfig cluster {self.context} is attached read-only; "
                               "connect('kubeconfig', ..., read_only=False) to write to it")

    def apply(self, source: Source) -> list[dict]:
        self._refuse("apply")
        return self._apply_in_order(load_source(source), self._write)

    def _write(self, objs: list[dict]) -> list[dict]:
        stored, refused = [], []
        for obj in objs:
            what = f"apply {obj.get('kind')} {(obj.get('metadata') or {}).get('name')}"
            try:
                stored.append(self._call(lambda o=obj: self.kube.apply(o), what))
            except (ClusterInputError, NotFound) as exc:  # refused (invalid, forbidden, no namespace): on, as kubectl
                refused.append(exc.line())
        if refused:
            raise RefusedObjects(refused, stored)
        return stored

    def delete(self, kind: str, name: str, namespace: str | None = "default") -> None:
        self._refuse("delete")
        self._call(lambda: self.kube.delete(canonical_kind(kind), name, namespace), f"delete {kind} {name}")

    def get(self, kind: str, name: str, namespace: str | None = "default") -> dict:
        kind = canonical_kind(kind)
        ns = namespace if is_namespaced(kind) else None
        try:
            obj = self._call(lambda: self.kube.get(kind, name, ns), f"get {_resource_name(kind)} {name}")
        except NotFound:
            where = f" in namespace {namespace}" if ns else ""
            raise NotFound(f'{kind} "{name}" not found{where}') from None
        obj.setdefault("kind", kind)
        return obj

    def list(self, kind: str, namespace: str | None = None) -> list[dict]:
        kind = canonical_kind(kind)
        items = self._call(lambda: self.kube.list(kind, namespace if is_namespaced(kind) else None),
                           f"list {_resource_name(kind)}")
        return sorted(items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))

    # -- looking ---------------------------------------------------------------------------
    def pod_env(self, pod: str, namespace: str = "default", container: str | None = None) -> dict[str, str]:
        """The CDI environment when labkit's local node agent recorded it (one container's, or the
        union over the pod's containers), else a pointer to kubectl exec."""
        obj = self.get("Pod", pod, namespace)
        self._check_container(obj, container)
        ann = obj["metadata"].get("annotations") or {}
        raw = ann.get(ENV_ANNOTATION) if container is None else ann.get(CONTAINER_ENV_ANNOTATION)
        if raw is None:
            where = f" -c {container}" if container else ""
            raise ClusterError(f"pod {namespace}/{pod}: its environment is inside the container; read it with "
                               f"`kubectl --context {self.context} exec -n {namespace} {pod}{where} -- env`")
        env = json.loads(raw)
        return env if container is None else dict(env.get(container, {}))

    def feature_gates(self) -> dict[str, bool]:
        """DRA feature gates as the API server reports them (its /metrics), {} when it may not be read."""
        if self._gates is None:
            known = set().union(*FEATURE_DEFAULTS.values())
            gates: dict[str, bool] = {}
            try:
                text = self._call(lambda: self.kube.request("GET", "/metrics", accept="text/plain"), "/metrics")
            except ClusterError:
                text = ""
            for line in str(text).splitlines():
                if line.startswith("kubernetes_feature_enabled{"):
                    labels, _, value = line.rpartition(" ")
                    name = labels.split('name="', 1)[-1].split('"', 1)[0]
                    if name in known:
                        gates[name] = value.strip() in ("1", "1.0")
            self._gates = gates
        return dict(self._gates)

    def status(self) -> str:
        if self.kube is None:
            return "kubeconfig cluster (not attached)"
        nodes = self.profile.nodes if self.profile else []
        mode = "read-only" if self.read_only else "read-write"
        version = self.server_version + (f" (emulating {self.emulated_version})" if self.emulated_version else "")
        return (f"kubeconfig cluster: {self.where}, Kubernetes {version}, {len(nodes)} node(s), "
                f"{len(self.list('ResourceSlice'))} ResourceSlices, {mode}")

    def __repr__(self) -> str:
        return f"<KubeconfigCluster context={self.context!r} server={self.server!r} read_only={self.read_only}>"


register_backend("kubeconfig", KubeconfigCluster)
