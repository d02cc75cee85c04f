"""What `labkit cluster status` (no --backend) prints about the running clusters, in each -o form.

The input is the run states of the clusters found running (labkit.cluster.runstate: one
``state.json`` per backend and profile). The document (``-o json|yaml``)::

    {"clusters": [{"backend", "profile", "cluster", "pid", "server", "kubernetesVersion", "kubeconfig"}]}

``cluster`` is the kind cluster's name (None for local), ``pid`` the local server's process (None
for kind), ``server`` / ``kubernetesVersion`` what the local server recorded (None when unknown).
``-o name`` prints ``BACKEND/PROFILE`` per cluster: what ``--backend`` and ``--profile`` take.
"""

from __future__ import annotations

from typing import Any

from labkit.output import Table

__all__ = ["status_doc", "status_names", "status_table"]


def status_doc(states: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    return {"clusters": [{"backend": st.get("backend"), "profile": st.get("profile"),
                          "cluster": st.get("cluster"), "pid": st.get("pid"), "server": st.get("server"),
                          "kubernetesVersion": st.get("kubernetesVersion"), "kubeconfig": st.get("kubeconfig")}
                         for st in states]}


def status_names(states: list[dict[str, Any]]) -> list[str]:
    return [f"{st.get('backend')}/{st.get('profile')}" for st in states]


def status_table(states: list[dict[str, Any]], wide: bool = False) -> Table:
    """BACKEND PROFILE CLUSTER (the kind cluster's name, or the local server's pid), then
    ``KUBECONFIG=PATH`` under each row, ready to export (a path is never cut to fit a column);
    ``wide``: one line per cluster, with the server's address, Kubernetes version and KUBECONFIG."""
    rows = []
    for c in status_doc(states)["clusters"]:
        where = c["cluster"] if c["backend"] == "kind" else f"pid {c['pid']}"
        row = [c["backend"], c["profile"], where]
        if wide:
            row += [c["server"] or "-", c["kubernetesVersion"] or "-"]
        rows.append([*row, c["kubeconfig"] if wide else f"KUBECONFIG={c['kubeconfig']}"])
    headers = ["backend", "profile", "cluster", *(["server", "version"] if wide else []), "kubeconfig"]
    return Table(headers, rows, shrink=[1, 2], detail=None if wide else len(headers) - 1)
