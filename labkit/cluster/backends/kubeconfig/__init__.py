"""The `kubeconfig` backend: an existing cluster reached through a kubeconfig.

Attach to any conformant cluster serving resource.k8s.io/v1, read-only unless asked:

    c = connect("kubeconfig", context="prod", kubeconfig="~/.kube/config")
    print(c.explain("trainer-0", "ml"))          # why is it Pending?
    c.placements(); c.events(); c.list("ResourceSlice")

Credentials are whatever the kubeconfig holds (token, tokenFile, basic auth, client certificate,
exec plugin), handled as kubectl handles them (`kube.kubeconfig_configuration`): sent only to an
https server, an exec plugin run as client-go runs it. Each request waits at most `request_timeout`
seconds to connect and for each part of the answer; an exec plugin at most `exec_timeout` seconds.
The server's /version picks the allocator profile used by `explain`.
Writes (`apply`, `delete`) are refused unless `read_only=False`. The verbs are the shared base's
(`labkit.cluster.backends.kubeapi.KubeCluster`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from labkit.api.features import DEFAULT_VERSION, FEATURE_DEFAULTS, SUPPORTED_VERSIONS
from labkit.cluster.backends import register_backend
from labkit.cluster.backends.kubeapi import KubeCluster
from labkit.cluster.base import ClusterError, NotFound, server_minor
from labkit.cluster.kube import EXEC_TIMEOUT, client
from labkit.model.profiles import ClusterProfile, NodeSpec


class KubeconfigCluster(KubeCluster):
    """An existing cluster reached through a kubeconfig (see the module doc)."""

    backend = "kubeconfig"
    not_connected = "not attached; use connect('kubeconfig', context=...)"

    def __init__(self, *, kubeconfig: str | Path | None = None, context: str | None = None,
                 read_only: bool = True, progress: bool = True, request_timeout: float = 15.0,
                 exec_timeout: float = EXEC_TIMEOUT, **kw: Any) -> None:
        super().__init__(progress=progress, **kw)
        self.kubeconfig_path = Path(os.path.expanduser(str(kubeconfig))) if kubeconfig else None
        self.context = context
        self.read_only = read_only
        self.request_timeout = request_timeout
        self.exec_timeout = exec_timeout
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
        version = self._connect_kubeconfig(path, self.context, exec_timeout=self.exec_timeout)
        self.server_version = str(version.get("gitVersion", ""))
        if version.get("emulationMinor") and version.get("emulationMinor") != version.get("minor"):
            # newer binaries behaving as an older minor (--emulated-version): that minor's rules apply
            self.emulated_version = f"{version.get('emulationMajor', '1')}.{version['emulationMinor']}"
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

    # -- objects ---------------------------------------------------------------------------
    def _check_writable(self, verb: str) -> None:
        if self.read_only:
            raise ClusterError(f"{verb} refused: the kubeconfig cluster {self.context} is attached read-only; "
                               "connect('kubeconfig', ..., read_only=False) to write to it")

    # -- looking ---------------------------------------------------------------------------
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

    def _kubectl_where(self) -> str:
        return f" --context {self.context}"

    def __repr__(self) -> str:
        return f"<KubeconfigCluster context={self.context!r} server={self.server!r} read_only={self.read_only}>"


register_backend("kubeconfig", KubeconfigCluster)

__all__ = ["KubeconfigCluster"]
