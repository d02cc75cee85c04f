"""`python -m fake_gpus compute-domain-controller`: NVIDIA's ComputeDomain controller and daemons,
faked, against a real API server (kind, the local backend).

The objects and rules are fake_gpus.computedomain's (the same the sim uses); the plugin's side is
fake_gpus.plugin.cdgate. The controller polls:
per ComputeDomain it adds the finalizer, creates the daemon ResourceClaimTemplate and DaemonSet in
the driver's namespace and the workload template in the domain's namespace, and writes
`status` from the daemon pods that run (a daemon is Ready once its pod runs: the daemon's own IMEX
handshake is not modelled); a deleted domain loses its templates, DaemonSet and node labels, then
its finalizer. The ComputeDomain CRD must be installed (fake_gpus/deploy/compute-domains/00-crd.yaml,
with the controller's Deployment and least-privilege RBAC beside it: what the kind backend and the
Helm chart apply for nodes with ComputeDomains).

`python -m fake_gpus compute-domain-daemon` is what a daemon pod runs when the controller is given
`--daemon-image` (the driver's image, on kind): it prints the domain and clique its claim's CDI
edits gave it and waits, as an IMEX daemon would serve until it is stopped.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from fake_gpus import computedomain as cd
from fake_gpus.cli import number
from fake_gpus.plugin.claims import kube_api_client
from fake_gpus.plugin.kube import KubeError, KubeRest

log = logging.getLogger("fake_gpus.cdcontroller")
CRD_PATH = Path(__file__).resolve().parent / "deploy" / "compute-domains" / "00-crd.yaml"
#: what a daemon pod runs from the driver's image (--daemon-image)
DAEMON_COMMAND = ["python", "-m", "fake_gpus", "compute-domain-daemon"]
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
CDS = "/apis/resource.nvidia.com/v1beta1"
RCTS = "/apis/resource.k8s.io/v1"
OK = (200, 201)
GONE = (200, 202, 404)
#: --interval: seconds between the controller's rounds (finite: NaN or inf would never act, 0 would spin)
INTERVAL_RANGE = (0.05, 3600.0)


DEPLOY_DIR = CRD_PATH.parent
#: the controller's ServiceAccount and namespace in deploy/compute-domains (the chart: its release's)
SERVICE_ACCOUNT = "fake-gpus-compute-domain-controller"
DEPLOY_NAMESPACE = "fake-gpus"


def crds() -> list[dict[str, Any]]:
    """The ComputeDomain and ComputeDomainClique CustomResourceDefinitions (LabKit's, not NVIDIA's
    generated ones)."""
    return [d for d in yaml.safe_load_all(CRD_PATH.read_text(encoding="utf-8")) if isinstance(d, dict)]


def manifests() -> list[dict[str, Any]]:
    """deploy/compute-domains, in its kustomization's order: the CRD, the controller's ServiceAccount,
    its RBAC (and the plugin's extra rights), the two DeviceClasses, the controller's Deployment."""
    listed = yaml.safe_load((DEPLOY_DIR / "kustomization.yaml").read_text(encoding="utf-8"))["resources"]
    return [d for name in listed for d in yaml.safe_load_all((DEPLOY_DIR / name).read_text(encoding="utf-8"))
            if isinstance(d, dict)]


def _ns_path(group: str, namespace: str, plural: str, name: str = "") -> str:
    base = f"{group}/namespaces/{quote(namespace)}/{plural}"
    return f"{base}/{quote(name)}" if name else base


class Controller:
    """`daemon_image`: the image of the daemon pods; the driver's own image runs DAEMON_COMMAND, and
    without one they run the pause image (the local backend's nodes run no containers).
    `create_namespace`: make the daemons' namespace (local; on kind the chart's namespace exists, and
    the controller's ServiceAccount may not create namespaces)."""

    def __init__(self, rest: KubeRest, namespace: str = cd.DRIVER_NAMESPACE, daemon_image: str | None = None,
                 create_namespace: bool = False):
        self.rest, self.namespace = rest, namespace
        self.image = daemon_image or PAUSE_IMAGE
        self.command = DAEMON_COMMAND if daemon_image else None
        self.create_namespace = create_namespace

    def sync_once(self) -> None:
        domains = (self.rest.call("GET", f"{CDS}/computedomains") or {}).get("items") or []
        if domains and self.create_namespace:
            self.rest.call("POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                                "metadata": {"name": self.namespace}}, ok=(201, 409))
            self.create_namespace = False
        live = set()
        for domain in domains:
            try:
                if (domain.get("metadata") or {}).get("deletionTimestamp"):
                    self._delete(domain)
                elif cd.template_name(domain):
                    live.add(domain["metadata"]["uid"])
                    self._sync(domain)
            except KubeError as exc:  # a conflict or a race: the next round tries again
                log.info("ComputeDomain %s: %s", domain["metadata"].get("name"), exc)
        for node in (self.rest.call("GET", "/api/v1/nodes", query={"labelSelector": cd.LABEL}) or {}).get("items") or []:
            uid = node["metadata"]["labels"].get(cd.LABEL)
            if uid not in live and not any(d["metadata"]["uid"] == uid for d in domains):
                self._unlabel(node["metadata"]["name"])

    def _create(self, path: str, obj: dict[str, Any]) -> None:
        if obj["kind"] == "ResourceClaimTemplate":
            # no finalizer here: this client sends the opaque parameters with JSON's spaces, the API
            # server keeps those bytes, and any later update of the template (dropping a finalizer) is
            # refused as a change of the immutable spec once the server re-encodes them compactly
            obj = {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "finalizers"}}
        self.rest.call("POST", path, body=obj, ok=(201, 409))

    def _sync(self, domain: dict[str, Any]) -> None:
        m = domain["metadata"]
        ns, name = m.get("namespace", "default"), m["name"]
        if cd.LABEL not in (m.get("finalizers") or []):
            domain = self.rest.call("PATCH", _ns_path(CDS, ns, "computedomains", name),
                                    body={"metadata": {"finalizers": [*(m.get("finalizers") or []), cd.LABEL],
                                                       "resourceVersion": m.get("resourceVersion")}})
        self._create(_ns_path(RCTS, self.namespace, "resourceclaimtemplates"), cd.daemon_template(domain, self.namespace))
        self._create(_ns_path("/apis/apps/v1", self.namespace, "daemonsets"),
                     cd.daemonset(domain, self.namespace, image=self.image, command=self.command))
        self._create(_ns_path(RCTS, ns, "resourceclaimtemplates"), cd.workload_template(domain))
        self._status(domain)

    def _status(self, domain: dict[str, Any]) -> None:
        uid = domain["metadata"]["uid"]
        pods = (self.rest.call("GET", _ns_path("/api/v1", self.namespace, "pods"),
                               query={"labelSelector": f"{cd.LABEL}={uid}"}) or {}).get("items") or []
        running: dict[str, tuple[str, str]] = {}
        for p in pods:
            st, node = p.get("status") or {}, (p.get("spec") or {}).get("nodeName")
            if node and st.get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"):
                labels = (self.rest.call("GET", f"/api/v1/nodes/{quote(node)}").get("metadata") or {}).get("labels") or {}
                running[node] = (st.get("podIP", ""), labels.get(cd.CLIQUE_LABEL, ""))
        status = cd.domain_status(domain, running)
        self._cliques(domain, status)
        if (domain.get("status") or {}) != status:
            m = domain["metadata"]
            self.rest.call("PUT", _ns_path(CDS, m.get("namespace", "default"), "computedomains", m["name"]) + "/status",
                           body={**domain, "status": status})

    def _cliques(self, domain: dict[str, Any], status: dict[str, Any]) -> None:
        """The domain's ComputeDomainCliques, as its daemons keep them upstream (created, their
        daemons[] kept equal to the status entries of their clique, removed when empty)."""
        uid = domain["metadata"]["uid"]
        path = _ns_path(CDS, self.namespace, "computedomaincliques")
        wanted = {c["metadata"]["name"]: c for c in cd.cliques(domain, status, self.namespace)}
        have = (self.rest.call("GET", path, query={"labelSelector": f"{cd.LABEL}={uid}"}) or {}).get("items") or []
        for obj in have:
            want = wanted.pop(obj["metadata"]["name"], None)
            if want is None:
                self.rest.call("DELETE", f"{path}/{quote(obj['metadata']['name'])}", ok=GONE)
            elif obj.get("daemons") != want["daemons"]:
                self.rest.call("PUT", f"{path}/{quote(obj['metadata']['name'])}", body={**obj, "daemons": want["daemons"]})
        for obj in wanted.values():
            self.rest.call("POST", path, body=obj, ok=(201, 409))

    def _drop(self, path: str, obj: dict[str, Any]) -> None:
        fins = [f for f in obj["metadata"].get("finalizers") or [] if f != cd.LABEL]
        if fins != (obj["metadata"].get("finalizers") or []):
            self.rest.call("PATCH", path, body={"metadata": {"finalizers": fins or None}}, ok=(200, 404))

    def _delete(self, domain: dict[str, Any]) -> None:
        uid = domain["metadata"]["uid"]
        sel = {"labelSelector": f"{cd.LABEL}={uid}"}
        # templates: the workload's is in the domain's namespace; daemon sets: only ever in ours
        for group, plural in ((RCTS, "resourceclaimtemplates"), ("/apis/apps/v1", "daemonsets")):
            where = f"{group}/{plural}" if plural == "resourceclaimtemplates" else _ns_path(group, self.namespace, plural)
            for obj in (self.rest.call("GET", where, query=sel) or {}).get("items") or []:
                path = _ns_path(group, obj["metadata"]["namespace"], plural, obj["metadata"]["name"])
                self.rest.call("DELETE", path, ok=GONE)
                self._drop(path, obj)
        path = _ns_path(CDS, self.namespace, "computedomaincliques")
        for obj in (self.rest.call("GET", path, query=sel) or {}).get("items") or []:
            self.rest.call("DELETE", f"{path}/{quote(obj['metadata']['name'])}", ok=GONE)
        for node in (self.rest.call("GET", "/api/v1/nodes", query=sel) or {}).get("items") or []:
            self._unlabel(node["metadata"]["name"])
        m = domain["metadata"]
        self._drop(_ns_path(CDS, m.get("namespace", "default"), "computedomains", m["name"]), domain)

    def _unlabel(self, node: str) -> None:
        self.rest.call("PATCH", f"/api/v1/nodes/{quote(node)}", body={"metadata": {"labels": {cd.LABEL: None}}},
                       ok=(200, 404))


def register(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("compute-domain-controller",
                              help="run NVIDIA's ComputeDomain controller and daemons, faked, against an API server")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube/config)")
    p.add_argument("--namespace", default=cd.DRIVER_NAMESPACE, help="the driver's namespace (daemons, their claims)")
    p.add_argument("--interval", type=number(*INTERVAL_RANGE), default=0.5,
                   help="seconds between rounds, {:g} to {:g} (default 0.5)".format(*INTERVAL_RANGE))
    p.add_argument("--install-crd", action="store_true", help="create the ComputeDomain CRD first")
    p.add_argument("--create-namespace", action="store_true", help="create the daemons' namespace when missing")
    p.add_argument("--daemon-image", default=None,
                   help="the driver's image: daemon pods run `python -m fake_gpus compute-domain-daemon` from it "
                        f"(default: {PAUSE_IMAGE}, for nodes that run no containers)")
    p.set_defaults(func=run)
    d = subparsers.add_parser("compute-domain-daemon",
                              help="what a ComputeDomain daemon pod runs (faked): print its domain and clique, wait")
    d.set_defaults(func=run_daemon)
    return p


def run_daemon(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    """The IMEX daemon's stand-in: it says which domain and clique its claim's CDI edits gave it
    (COMPUTE_DOMAIN_UUID, CLIQUE_ID, ...) and serves until SIGTERM."""
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: stop.set())
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith(("COMPUTE_DOMAIN_", "CLIQUE_ID"))}
    if "COMPUTE_DOMAIN_UUID" not in env:
        print("fake_gpus compute-domain-daemon: error: no COMPUTE_DOMAIN_UUID: the pod's claim must be a "
              "ComputeDomain daemon claim (its CDI edits set it)", file=sys.stderr)
        return 2
    print("compute-domain-daemon (fake IMEX daemon): " + " ".join(f"{k}={v}" for k, v in env.items()), flush=True)
    stop.wait()
    return 0


def run(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: stop.set())
    try:
        rest = KubeRest(kube_api_client(args.kubeconfig))
        if args.install_crd:
            for definition in crds():
                rest.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=definition,
                          ok=(201, 409))
    except (KubeError, OSError) as exc:
        print(f"fake_gpus compute-domain-controller: error: {exc}", file=sys.stderr)
        return 2
    controller = Controller(rest, args.namespace, daemon_image=args.daemon_image,
                            create_namespace=args.create_namespace)
    log.info("ComputeDomain controller running (namespace %s)", args.namespace)
    while not stop.wait(args.interval):
        try:
            controller.sync_once()
        except KubeError as exc:
            log.info("round failed: %s", exc)
    return 0
