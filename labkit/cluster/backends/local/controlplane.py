"""Command lines and start-up order of etcd, kube-apiserver, kube-controller-manager and
kube-scheduler, all on 127.0.0.1 with random free ports."""

from __future__ import annotations

import ssl
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from labkit.api.features import FEATURE_DEFAULTS, LOCKED
from labkit.cluster.backends.local.binaries import Binaries
from labkit.cluster.backends.local.pki import Pki, kubeconfig
from labkit.cluster.backends.local.procs import Component, Supervisor, free_port, wait_until
from labkit.fileio import write_text

SERVICE_CIDR = "10.0.0.0/24"

#: API group versions that are off by default but needed when a gate is on (per minor).
#: Everything DRA needs at 1.37 defaults is served by resource.k8s.io/v1. DeviceTaintRule lives
#: in v1alpha3 (1.34/1.35) and v1beta2 (1.36); the 1.37 workload API version is unverified. 1.38 has the same
#: group versions as 1.37, off by default the same way (kubernetes@v1.38.0-beta.0:pkg/controlplane/instance.go,
#: betaAPIGroupVersionsDisabledByDefault: resource.k8s.io/v1beta1, v1beta2, scheduling.k8s.io/v1beta1), so the kit
#: enables nothing more there by default and passes no flag a 1.38 kube-apiserver would refuse.
RUNTIME_CONFIG: dict[str, dict[str, str]] = {
    "1.34": {"DRADeviceTaints": "resource.k8s.io/v1alpha3"},
    "1.35": {"DRADeviceTaints": "resource.k8s.io/v1alpha3", "DRADeviceTaintRules": "resource.k8s.io/v1alpha3"},
    "1.36": {"DRADeviceTaintRules": "resource.k8s.io/v1beta2",
             "DRAWorkloadResourceClaims": "scheduling.k8s.io/v1alpha2"},
    "1.37": {"DRAWorkloadResourceClaims": "scheduling.k8s.io/v1beta1"},
    "1.38": {"DRAWorkloadResourceClaims": "scheduling.k8s.io/v1beta1"},
}


def feature_gate_flag(version: str, gates: dict[str, bool]) -> list[str]:
    """`--feature-gates=...` for the gates that differ from the version's defaults (locked ones
    are left out: they cannot be changed)."""
    defaults, locked = FEATURE_DEFAULTS.get(version, {}), LOCKED.get(version, frozenset())
    diff = {g: v for g, v in sorted(gates.items()) if g not in locked and defaults.get(g) != v}
    return [f"--feature-gates={','.join(f'{g}={str(v).lower()}' for g, v in diff.items())}"] if diff else []


def runtime_config(version: str, gates: dict[str, bool]) -> list[str]:
    apis = sorted({api for g, api in RUNTIME_CONFIG.get(version, {}).items() if api and gates.get(g)})
    return [f"--runtime-config={','.join(f'{a}=true' for a in apis)}"] if apis else []


def _https_ok(url: str, token: str | None = None) -> bool:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # scheduler/kcm serve a self-signed cert of their own
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(req, context=ctx, timeout=2) as r:
        return r.status == 200


@dataclass
class ControlPlane:
    """The four processes and how to reach them."""

    server: str
    kubeconfig: Path
    etcd: Component
    apiserver: Component
    controller_manager: Component
    scheduler: Component


def start(sup: Supervisor, bins: Binaries, pki: Pki, state: Path, *, version: str,
          gates: dict[str, bool], timeout: float = 90.0, on_step=lambda name: None,
          before_controllers=lambda server: None, emulated_version: str | None = None) -> ControlPlane:
    """Start all four; `before_controllers(server)` runs once the apiserver is ready and before
    kube-controller-manager starts (so fake Nodes can get their Ready status before the node
    lifecycle controller first looks at them)."""
    gate_args = feature_gate_flag(version, gates)
    if emulated_version:  # newer binaries behaving like an older minor (KEP-4330 compatibility versions)
        gate_args = [f"--emulated-version=kube={emulated_version}", *gate_args]
    # etcd
    etcd_client, etcd_peer = free_port(), free_port()
    # mutual TLS on both of etcd's ports: only holders of a cert from this cluster's CA (the
    # apiserver) talk to it, not any local user
    tls = [f"--cert-file={pki.etcd_cert}", f"--key-file={pki.etcd_key}", f"--trusted-ca-file={pki.ca_cert}",
           "--client-cert-auth=true", f"--peer-cert-file={pki.etcd_cert}", f"--peer-key-file={pki.etcd_key}",
           f"--peer-trusted-ca-file={pki.ca_cert}", "--peer-client-cert-auth=true"]
    etcd = sup.start("etcd", [
        bins.path("etcd"), "--name=labkit", f"--data-dir={state / 'etcd'}",
        f"--listen-client-urls=https://127.0.0.1:{etcd_client}",
        f"--advertise-client-urls=https://127.0.0.1:{etcd_client}",
        f"--listen-peer-urls=https://127.0.0.1:{etcd_peer}",
        f"--initial-advertise-peer-urls=https://127.0.0.1:{etcd_peer}",
        f"--initial-cluster=labkit=https://127.0.0.1:{etcd_peer}",
        *tls,
        "--unsafe-no-fsync=true", "--log-level=warn", "--quota-backend-bytes=1073741824",
    ], ports=(etcd_client, etcd_peer))
    etcd_tls = ssl.create_default_context(cafile=str(pki.ca_cert))
    etcd_tls.load_cert_chain(str(pki.etcd_cert), str(pki.etcd_key))
    wait_until(lambda: urllib.request.urlopen(f"https://127.0.0.1:{etcd_client}/health", timeout=2,
                                              context=etcd_tls).status == 200,
               timeout, what="etcd /health", comp=etcd)
    on_step("etcd")

    # kube-apiserver
    port = free_port()
    server = f"https://127.0.0.1:{port}"
    apiserver = sup.start("kube-apiserver", [
        bins.path("kube-apiserver"),
        f"--etcd-servers=https://127.0.0.1:{etcd_client}", f"--etcd-cafile={pki.ca_cert}",
        f"--etcd-certfile={pki.etcd_cert}", f"--etcd-keyfile={pki.etcd_key}",
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={port}",
        f"--tls-cert-file={pki.serving_cert}", f"--tls-private-key-file={pki.serving_key}",
        f"--client-ca-file={pki.ca_cert}", f"--token-auth-file={pki.token_file}",
        "--authorization-mode=RBAC", "--anonymous-auth=true",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki.sa_pub}", f"--service-account-signing-key-file={pki.sa_key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--endpoint-reconciler-type=none",  # endpoints may not point at 127.0.0.1
        f"--cert-dir={state / 'apiserver-certs'}", "--allow-privileged=true", "--profiling=false",
        *gate_args, *runtime_config(version, gates),
    ], ports=(port,))
    wait_until(lambda: _https_ok(f"{server}/readyz", pki.tokens["admin"]), timeout, interval=0.2,
               what="kube-apiserver /readyz", comp=apiserver)
    on_step("kube-apiserver")

    admin_kc = state / "kubeconfig"
    write_text(admin_kc, kubeconfig(server, pki.ca_cert, pki.tokens["admin"]), mode=0o600)  # 0600 from creation
    kcs = {}
    for user, short in (("system:kube-scheduler", "scheduler"), ("system:kube-controller-manager", "kcm")):
        kcs[short] = state / f"{short}.kubeconfig"
        write_text(kcs[short], kubeconfig(server, pki.ca_cert, pki.tokens[user], user), mode=0o600)

    before_controllers(server)

    def component(name: str, kc: Path, extra: list[str]) -> tuple[Component, int]:
        p = free_port()
        comp = sup.start(name, [
            bins.path(name), f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}", "--bind-address=127.0.0.1", f"--secure-port={p}",
            f"--cert-dir={state / (name + '-certs')}", "--leader-elect=false", *gate_args, *extra,
        ], ports=(p,))
        return comp, p

    kcm, kcm_port = component("kube-controller-manager", kcs["kcm"], [
        "--use-service-account-credentials=true", f"--service-account-private-key-file={pki.sa_key}",
        f"--root-ca-file={pki.ca_cert}", "--controllers=*",
        # the nodes are this process's fake kubelets (heartbeat every 10 s): a heartbeat late by more than
        # the default 50 s means a busy machine, not a lost node; tainting the nodes unreachable then (seen at
        # load average 80) changed what the scheduler said between two reads of the same cluster
        "--node-monitor-period=5s", "--node-monitor-grace-period=5m",
    ])
    sched, sched_port = component("kube-scheduler", kcs["scheduler"], [])
    wait_until(lambda: _https_ok(f"https://127.0.0.1:{kcm_port}/healthz"), timeout, interval=0.2,
               what="kube-controller-manager /healthz", comp=kcm)
    on_step("kube-controller-manager")
    wait_until(lambda: _https_ok(f"https://127.0.0.1:{sched_port}/healthz"), timeout, interval=0.2,
               what="kube-scheduler /healthz", comp=sched)
    on_step("kube-scheduler")
    return ControlPlane(server, admin_kc, etcd, apiserver, kcm, sched)
