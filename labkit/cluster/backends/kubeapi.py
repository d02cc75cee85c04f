"""The shared Kubernetes-API base of the real-cluster backends (kubeconfig, local, kind).

`KubeCluster` is what every backend with a real API server shares, as kwok's runtimes share
``runtime.Cluster``: the verbs (`apply` in tiers, `get`, `list`, `delete`), ONE `_call` that turns
an API error into the kit's error (404 NotFound; 400/409/422 and 401/403 ClusterInputError; the
rest, and an unreachable server, ClusterError), `wait`, events, placements, explain and pod_env,
all over `_api()`: the backend's API client (`labkit.cluster.kube.Kube`, or any object with its
get/list/delete/apply/resource methods raising `ApiError`). A backend adds its lifecycle only (up,
down, status, manage, attach, its kubeconfig) and, where it differs, a hook: `_prepare` (change an
object before it is written: kind's image swap), `_stored` (after one was stored), `_write`
(how a tier is written), `_check_writable` (the kubeconfig backend's read-only mode).
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from labkit.api.features import DEFAULT_VERSION, minor_key
from labkit.cluster import runstate
from labkit.cluster.annotations import CONTAINER_ENV_ANNOTATION, ENV_ANNOTATION
from labkit.cluster.base import (
    Cluster,
    ClusterError,
    ClusterInputError,
    NotFound,
    RefusedObjects,
    Source,
    load_source,
    server_minor,
)
from labkit.cluster.explain_live import explain_pod
from labkit.cluster.kube import EXEC_TIMEOUT, ApiError, Kube, kubeconfig_configuration
from labkit.cluster.placements import PlacementTable, build_placements
from labkit.model.kinds import API_VERSIONS, canonical_kind, is_namespaced


def resource_name(kind: str) -> str:
    """'Pod' -> 'pods', 'ResourceClaim' -> 'resourceclaims.resource.k8s.io' (kubectl's resource.group)."""
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
    #: what the backend says when it has no API connection (after "<backend> cluster: ")
    not_connected: ClassVar[str] = "not up; call up() first"
    #: `list` of a kind the server does not serve: [] (nothing of it exists) rather than NotFound
    unserved_kind_is_empty: ClassVar[bool] = False

    def __init__(self, *, progress: bool = True, **kw: Any) -> None:
        super().__init__(progress=progress, **kw)
        #: the API client (labkit.cluster.kube.Kube) once connected
        self.kube: Any = None
        self.server = ""
        self.context: str | None = None
        #: where the API server is, for messages ("context kind-x (https://127.0.0.1:6443)"); "" names none
        self.where = ""
        #: seconds each request may wait (named in the "no answer" message)
        self.request_timeout = 15.0
        #: set when this connection attached to a cluster another process runs: `down()` then deletes
        #: only what this connection applied (`_applied`, see runstate.remember)
        self.attached: Any = None
        self._applied: list[tuple[str, str, str | None]] = []

    @property
    def kubernetes_version(self) -> str:
        """The minor the server emulates, else the server's own minor, else the profile's."""
        if self.emulated_version:
            return self.emulated_version
        if self.server_version:
            return server_minor(self.server_version)
        return super().kubernetes_version

    # -- the API connection and its errors ----------------------------------------------------
    def _api(self) -> Any:
        """The API client the verbs use; ClusterError when not connected."""
        if self.kube is None:
            raise ClusterError(f"{self.backend} cluster: {self.not_connected}")
        return self.kube

    def _connect_kubeconfig(self, path: Path, context: str | None, *, exec_timeout: float = EXEC_TIMEOUT) -> dict:
        """Connect to the API server `path`'s `context` names (None: its current context), as kubectl
        would; check it serves DRA's v1 API. Sets `kube`, `server`, `where`, `context`; returns /version."""
        cfg, self.context = kubeconfig_configuration(path, context, exec_timeout=exec_timeout)
        self.kube = Kube(configuration=cfg, timeout=self.request_timeout)
        self.server = self.kube.server
        self.where = f"context {self.context} ({self.server})"
        version = self._call(lambda: self.kube.request("GET", "/version"), "/version")
        version = version if isinstance(version, dict) else {}
        self._call(self.kube.discover, "API discovery")
        try:
            self.kube.resource("ResourceSlice", "resource.k8s.io/v1")
        except Exception:  # noqa: BLE001 - ApiError: not served
            raise ClusterError(f"{self.where} does not serve resource.k8s.io/v1 (Kubernetes "
                               f"{version.get('gitVersion', '')}); DRA's v1 API needs Kubernetes 1.34 or newer") from None
        return version

    def _call(self, fn: Callable[[], Any], what: str) -> Any:
        """Run one API call; every failure becomes one line naming the server, the call and the fix:
        404 NotFound, 400/409/422 (the objects) and 401/403 (the credentials) ClusterInputError,
        anything else, and a server that does not answer, ClusterError."""
        import urllib3

        prefix = f"{self.where}: {what}" if self.where else what
        try:
            return fn()
        except ApiError as exc:
            if exc.status in (401, 403) and getattr(self.kube, "plain_http", False):
                raise ClusterInputError(f"{prefix}: {'Unauthorized' if exc.status == 401 else 'Forbidden'}: "
                                        "the server address is plain http, so the context's credentials were not sent "
                                        "(kubectl sends them only over https); use the cluster's https:// address"
                                        ) from None
            if exc.status == 401:
                raise ClusterInputError(f"{prefix}: Unauthorized: the context's credentials were not accepted "
                                        "(expired token or certificate?); refresh them in the kubeconfig") from None
            if exc.status == 403:
                raise ClusterInputError(f"{prefix}: forbidden by RBAC ({exc.message}); ask for a (Cluster)Role "
                                        "granting get/list on it, or use a context with more rights") from None
            if exc.status == 404:
                raise NotFound(exc.message) from None
            cls = ClusterInputError if exc.status in REFUSED_INPUT else ClusterError
            raise cls(f"{prefix}: {exc.message}") from None
        except urllib3.exceptions.TimeoutError:
            raise ClusterError(f"cannot reach the API server of {self.where or self.backend}: {what}: no answer "
                               f"within {self.request_timeout:g} s (request_timeout); check the server address in "
                               "the kubeconfig and that the cluster is running") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise ClusterError(f"cannot reach the API server of {self.where or self.backend}: {what}: {reason}; "
                               "check the server address in the kubeconfig and that the cluster is running") from None

    def _not_found(self, kind: str, name: str, namespace: str | None) -> NotFound:
        """The one NotFound of `get` and `delete`."""
        where = f" in namespace {namespace}" if namespace and is_namespaced(kind) else ""
        return NotFound(f'{kind} "{name}" not found{where}')

    def _check_writable(self, verb: str) -> None:
        """Raise ClusterError when this connection may not `verb` (apply, delete); writable here."""

    # -- objects ---------------------------------------------------------------------------
    def apply(self, source: Source) -> list[dict]:
        self._check_writable("apply")
        objs = load_source(source)
        for obj in objs:
            self._prepare(obj)
        return self._apply_in_order(objs, self._write)

    def _prepare(self, obj: dict) -> None:
        """Change `obj` in place before it is written (kind swaps images the nodes lack); nothing here."""

    def _write(self, objs: list[dict]) -> list[dict]:
        """Write one tier, object by object (server-side apply); a refused object does not stop the
        others, as with kubectl apply: RefusedObjects names every refusal after the rest is stored."""
        api = self._api()
        stored, refused = [], []
        for obj in objs:
            what = self._apply_said(obj)
            try:
                got = self._call(lambda o=obj: api.apply(o), what)
            except ClusterInputError as exc:  # refused (invalid, conflict, forbidden): on with the others, as kubectl
                refused.append(exc.line())
                continue
            except NotFound as exc:  # its namespace (or its kind) is not there: the server's words name neither it
                refused.append(f"{self.where + ': ' if self.where else ''}{what}: {exc.line()}")
                continue
            stored.append(got)
            self._stored(got)
        if refused:
            raise RefusedObjects(refused, stored)
        return stored

    def _apply_said(self, obj: dict) -> str:
        """How a message names the apply of `obj` ("apply ResourceClaim bad")."""
        meta = obj.get("metadata") or {}
        return f"apply {obj.get('kind')} {meta.get('name') or meta.get('generateName')}"

    def _stored(self, obj: dict) -> None:
        """After one object was stored: an attached connection remembers it for `down()`."""
        if self.attached:
            runstate.remember(self._applied, [obj])

    def delete(self, kind: str, name: str, namespace: str | None = "default") -> None:
        self._check_writable("delete")
        kind = canonical_kind(kind)
        api = self._api()
        try:
            self._call(lambda: api.delete(kind, name, namespace), f"delete {resource_name(kind)} {name}")
        except NotFound:
            raise self._not_found(kind, name, namespace) from None

    def get(self, kind: str, name: str, namespace: str | None = "default") -> dict:
        kind = canonical_kind(kind)
        api = self._api()
        try:
            obj = self._call(lambda: api.get(kind, name, namespace), f"get {resource_name(kind)} {name}")
        except NotFound:
            raise self._not_found(kind, name, namespace) from None
        obj.setdefault("kind", kind)
        return obj

    def watch(self, kind: str, namespace: str | None = None, *, timeout: float = 60.0) -> Iterator[tuple[str, dict]]:
        """(event type, object) of `kind` (in `namespace`, or everywhere) as the API server's watch sends
        them: first ADDED for every object there is, then ADDED / MODIFIED / DELETED as they happen,
        until `timeout` seconds have passed (the server ends the watch). Errors as the other verbs'."""
        kind = canonical_kind(kind)
        api = self._api()
        if not hasattr(api, "watch"):
            raise ClusterError(f"{self.backend} cluster: watch needs its API connection (no kubeconfig yet?)")
        what = f"watch {resource_name(kind)}"
        stream = api.watch(kind, namespace, timeout=timeout)
        while (event := self._call(lambda: next(stream, None), what)) is not None:
            yield event

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
                               f"`kubectl{self._kubectl_where()} exec -n {namespace} {pod}{where} -- env`")
        env = json.loads(raw)
        return env if container is None else dict(env.get(container, {}))

    def _kubectl_where(self) -> str:
        """The kubectl option that reaches this cluster (" --context C"), for messages."""
        return ""

    # `list` last: below it, `list[...]` in an annotation would name the method (mypy)
    def list(self, kind: str, namespace: str | None = None) -> list[dict]:
        kind = canonical_kind(kind)
        api = self._api()
        try:
            items = self._call(lambda: api.list(kind, namespace), f"list {resource_name(kind)}")
        except NotFound:
            if self.unserved_kind_is_empty:  # an API this cluster does not serve: nothing of it exists
                return []
            raise
        for o in items:
            o.setdefault("kind", kind)
        return sorted(items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
