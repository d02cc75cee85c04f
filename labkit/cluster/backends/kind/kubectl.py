"""The kind backend's API verbs as kubectl commands, for when there is no API connection to use.

`KubectlClient` has the HTTP client's `get`/`list`/`delete` (labkit.cluster.kube.Kube) and raises
its `ApiError`, so `KubeCluster._call` maps kubectl's failures as it maps the server's. The kind
backend uses it while its runner only records commands (tests/cluster/test_cluster_kind.py reads them: the
whole flow is testable without a container engine) or before its kubeconfig exists; `apply` runs
kubectl on a live cluster too (a client-side apply, as a student's own `kubectl apply` would be).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from labkit.cluster.kube import ApiError

#: kubectl resource names for the kinds LabKit handles
RESOURCE_NAMES = {
    "Pod": "pods", "Node": "nodes", "Namespace": "namespaces", "Event": "events",
    "DeviceClass": "deviceclasses.resource.k8s.io", "ResourceClaim": "resourceclaims.resource.k8s.io",
    "ResourceClaimTemplate": "resourceclaimtemplates.resource.k8s.io",
    "ResourceSlice": "resourceslices.resource.k8s.io", "DeviceTaintRule": "devicetaintrules.resource.k8s.io",
    "Deployment": "deployments.apps", "Job": "jobs.batch", "DaemonSet": "daemonsets.apps",
    "StatefulSet": "statefulsets.apps", "ReplicaSet": "replicasets.apps", "CronJob": "cronjobs.batch",
    "PriorityClass": "priorityclasses.scheduling.k8s.io",
    "ComputeDomain": "computedomains.resource.nvidia.com",
    "ComputeDomainClique": "computedomaincliques.resource.nvidia.com",
}
CLUSTER_SCOPED = {"Node", "Namespace", "DeviceClass", "ResourceSlice", "DeviceTaintRule", "PriorityClass"}
#: lower-case / plural spellings users type, to the Kind
KIND_ALIASES = {alias: kind for kind, res in RESOURCE_NAMES.items()
                 for alias in (kind.lower(), res, res.split(".")[0])}



#: the Status reason kubectl prints ("Error from server (NotFound): ...") -> its HTTP code
_REASON_CODES = {"NotFound": 404, "Forbidden": 403, "Unauthorized": 401, "Conflict": 409, "AlreadyExists": 409,
                 "Invalid": 422, "BadRequest": 400}


def api_error(said: str) -> ApiError:
    """kubectl's failure output as the ApiError the server gave it (500 when it names none)."""
    for reason, code in _REASON_CODES.items():
        if f"({reason})" in said or (reason == "NotFound" and "NotFound" in said):
            return ApiError(code, reason, one_line(said))
    if "doesn't have a resource type" in said:  # an API this cluster does not serve
        return ApiError(404, "NotFound", one_line(said))
    return ApiError(500, "", one_line(said))


class KubectlClient:
    """`get`, `list`, `delete` of the API client, each one kubectl command through `kubectl`
    (the backend's ``_kubectl(*args, check=False)``)."""

    plain_http = False

    def __init__(self, kubectl: Callable[..., Any]) -> None:
        self._kubectl = kubectl

    def _run(self, *args: str) -> str:
        result = self._kubectl(*args, check=False)
        if result.returncode != 0:
            raise api_error(result.stderr or result.stdout)
        return str(result.stdout)

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict:
        kind = kind_of(kind)
        args = ["get", resource(kind), name, "-o", "json"]
        if kind not in CLUSTER_SCOPED and namespace:
            args += ["-n", namespace]
        return dict(json.loads(self._run(*args)))

    def list(self, kind: str, namespace: str | None = None) -> list[dict]:
        kind = kind_of(kind)
        args = ["get", resource(kind), "-o", "json"]
        if kind not in CLUSTER_SCOPED:
            args += ["-n", namespace] if namespace else ["-A"]
        return items(self._run(*args))

    def delete(self, kind: str, name: str, namespace: str | None = None) -> dict:
        kind = kind_of(kind)
        args = ["delete", resource(kind), name, "--wait=false"]
        if kind not in CLUSTER_SCOPED and namespace:
            args += ["-n", namespace]
        self._run(*args)
        return {}


def kind_of(kind: str) -> str:
    return kind if kind in RESOURCE_NAMES else KIND_ALIASES.get(kind.lower(), kind)


def resource(kind: str) -> str:
    return RESOURCE_NAMES.get(kind, kind.lower() + "s")


def refusals(said: str) -> list[str]:
    """The lines kubectl apply printed for the objects the server refused, one per refusal
    (kubectl/pkg/cmd/util/helpers.go, checkErr): `Error from server (Invalid): error when creating
    ...` each when several were; when one was, `The Kind "name" is invalid: field: message`, or that
    head alone with one `* field: message` line per cause below it (each taken with the head)."""
    out: list[str] = []
    head = ""
    for line in (ln.strip() for ln in said.splitlines()):
        if line.startswith("Error from server (") and any(f"({r})" in line for r in REFUSED_REASONS):
            out.append(line)
            head = ""
        elif line.startswith("The ") and " is invalid" in line:
            head = line[:-1] if line.endswith(" is invalid:") else ""
            if not head:
                out.append(line)
        elif head and line.startswith("* "):
            out.append(f"{head}: {line[2:]}")
    return out


#: the Status reasons of an object the API server refused (bad input, not a failing cluster)
REFUSED_REASONS = ("Invalid", "BadRequest", "Conflict", "Forbidden", "NotFound", "AlreadyExists")


def one_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "kubectl failed without a message"


def items(text: str) -> list[dict]:
    if not text.strip():
        return []
    doc = json.loads(text)
    return doc.get("items", [doc]) if doc.get("kind", "").endswith("List") or "items" in doc else [doc]
