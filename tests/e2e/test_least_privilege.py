"""Least privilege, verified (issue 17.4).

kind: the fake driver's ServiceAccount may do exactly what tests/data/rbac/fake-gpus-kubelet-plugin.txt
lists (beyond what every authenticated user may), nothing beyond what NVIDIA's and the example
driver's RBAC grant, and its ResourceSlice writes are confined to its own node.
local: every socket the control plane listens on is on 127.0.0.1, the API server speaks TLS only,
and it refuses a request without a token; etcd speaks mutual TLS only (a client needs this
cluster's etcd certificate).
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
import yaml

from labkit.cluster.backends.kind.backend import KindCluster
from labkit.cluster.backends.kind.preflight import find_tool
from tests import kindutil
from tests.leaks import env_for, labkit, recorded_state_dirs
from tests.paths import REPO, TEST_DATA

EXPECTED = TEST_DATA / "rbac" / "fake-gpus-kubelet-plugin.txt"
SA = "system:serviceaccount:fake-gpus:fake-gpus-kubelet-plugin"
NOBODY = "system:serviceaccount:fake-gpus:lk-nobody"
#: what NVIDIA's k8s-dra-driver-gpu kubelet plugin and kubernetes-sigs/dra-example-driver grant their
#: kubelet plugins (resource -> verbs); ours must be a subset
REFERENCE = {
    "nodes": {"get"},
    "resourceclaims.resource.k8s.io": {"get", "list", "watch"},
    "resourceclaims.resource.k8s.io/status": {"update", "patch"},
    "resourceslices.resource.k8s.io": {"get", "list", "watch", "create", "update", "patch", "delete"},
}


def can_i(c: KindCluster, user: str) -> dict[str, set[str]]:
    """`kubectl auth can-i --list --as=USER`: resource -> verbs (resource rows only)."""
    out: dict[str, set[str]] = {}
    for line in kindutil.kubectl(c, "auth", "can-i", "--list", f"--as={user}").splitlines()[1:]:
        if not line or line[0].isspace():
            continue  # non-resource URLs
        m = re.match(r"(\S+)\s+\[(.*?)\]\s+\[(.*?)\]\s+\[(.*?)\]", line)
        assert m, line
        out.setdefault(m.group(1), set()).update(m.group(4).split())
    return out


def expected() -> dict[str, set[str]]:
    rows = [ln.split() for ln in EXPECTED.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    return {r[0]: set(r[1:]) for r in rows}


@pytest.fixture(scope="module")
def kind_cluster():
    c = kindutil.cluster()
    yield c
    if not c.attached:
        c.down()


def check_service_account(kind_cluster: KindCluster) -> None:
    """can-i of the driver's ServiceAccount == the committed list (make test: on the e2e's cluster)."""
    base = can_i(kind_cluster, NOBODY)  # what any authenticated ServiceAccount may do
    granted = {r: v - base.get(r, set()) for r, v in can_i(kind_cluster, SA).items()}
    granted = {r: v for r, v in granted.items() if v}
    assert granted == expected()
    for resource, verbs in granted.items():
        assert verbs <= REFERENCE.get(resource, set()), f"{resource}: {verbs} beyond NVIDIA's / the example's"


def check_own_node_slices(kind_cluster: KindCluster) -> None:
    node = sorted(kindutil.plugin_pods(kind_cluster))[0]
    probe = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "lk-rbac-probe"},
             "spec": {"driver": kindutil.DRIVER, "nodeName": node,
                      "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": []}}
    text = yaml.safe_dump(probe)

    def create(*extra: str) -> str:
        out = kindutil.run(find_tool("kubectl") or "kubectl", "--kubeconfig", str(kind_cluster.kubeconfig),
                           "create", "--dry-run=server", "-f", "-", f"--as={SA}", *extra, input=text)
        return out.stdout + out.stderr

    key = "--as-user-extra=authentication.kubernetes.io/node-name"
    assert "created (server dry run)" in create(f"{key}={node}")
    other = create(f"{key}=some-other-node")
    assert f"may only write ResourceSlices of its own node (token node 'some-other-node', slice node '{node}')" in other
    assert "may only write ResourceSlices of its own node (token node ''" in create()
    # and the driver itself, running with its real token, published its slices through that policy
    slices = kindutil.kjson(kind_cluster, "get", "resourceslices")["items"]
    assert any(s["spec"].get("nodeName") == node and s["spec"]["driver"] == kindutil.DRIVER for s in slices)


@pytest.mark.kind
@pytest.mark.kind_standalone
@pytest.mark.slow
def test_driver_service_account_can_do_exactly_the_expected_list(kind_cluster):
    check_service_account(kind_cluster)


@pytest.mark.kind
@pytest.mark.kind_standalone
@pytest.mark.slow
def test_driver_may_write_resourceslices_of_its_own_node_only(kind_cluster):
    check_own_node_slices(kind_cluster)


# -- local ------------------------------------------------------------------------------------------
def _tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


@pytest.mark.local
@pytest.mark.slow
def test_local_control_plane_listens_on_loopback_with_tls_and_tokens(tmp_path):
    env = env_for(tmp_path / "run")
    up = labkit("cluster", "up", "--backend", "local", "--profile", "tiny", env=env)
    assert up.returncode == 0, up.stderr + up.stdout
    try:
        state = json.loads((tmp_path / "run" / "local-tiny" / "state.json").read_text())
        assert recorded_state_dirs(tmp_path / "run") == {state["stateDir"]}
        procs = _tree(int(state["pid"]))
        names = {p.name() for p in procs}
        assert {"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager"} <= names, names
        listening = [(p.name(), c.laddr.ip, c.laddr.port) for p in procs for c in p.net_connections(kind="inet")
                     if c.status == psutil.CONN_LISTEN]
        assert listening, "the control plane listens on no TCP socket?"
        assert [x for x in listening if x[1] != "127.0.0.1"] == []
        server = state["server"]
        assert server.startswith("https://127.0.0.1:")
        port = int(server.rsplit(":", 1)[1])
        assert ("kube-apiserver", "127.0.0.1", port) in listening
        # TLS only: plain HTTP on the API server's port gets the TLS server's refusal, not an API answer
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)) as plain:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/namespaces", timeout=30).read()
        assert "400" in str(plain.value) or "reset" in str(plain.value).lower() or "closed" in str(plain.value).lower()
        # no token: refused (anonymous requests may read /healthz and /version only)
        ctx = ssl.create_default_context(cafile=_ca_file(state["kubeconfig"], tmp_path))
        for path in ("/api/v1/namespaces", "/apis/resource.k8s.io/v1/resourceclaims", "/api/v1/secrets"):
            with pytest.raises(urllib.error.HTTPError) as denied:
                urllib.request.urlopen(f"{server}{path}", context=ctx, timeout=30)
            assert denied.value.code in (401, 403), (path, denied.value.code)
        bad = urllib.request.Request(f"{server}/api/v1/namespaces", headers={"Authorization": "Bearer not-a-token"})
        with pytest.raises(urllib.error.HTTPError) as wrong:
            urllib.request.urlopen(bad, context=ctx, timeout=30)
        assert wrong.value.code == 401
        # etcd: mutual TLS on each of its ports, so a local user without this cluster's etcd cert
        # reads nothing -- not over plain HTTP, not over TLS without a client certificate
        etcd_ports = sorted(port for name, _, port in listening if name == "etcd")
        assert len(etcd_ports) == 2, listening  # client and peer

        def plain_http(p: int) -> int | None:
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{p}/health", timeout=30).status
            except urllib.error.HTTPError as e:  # a TLS server's "HTTP request to an HTTPS server"
                return e.code
            except (urllib.error.URLError, OSError):
                return None

        pki_dir = Path(state["stateDir"]) / "pki"
        with_cert = ssl.create_default_context(cafile=str(pki_dir / "ca.crt"))
        with_cert.load_cert_chain(str(pki_dir / "etcd.crt"), str(pki_dir / "etcd.key"))
        for etcd_port in etcd_ports:
            assert plain_http(etcd_port) in (400, None), etcd_port
            with pytest.raises((urllib.error.URLError, ConnectionError, OSError, ssl.SSLError)):
                urllib.request.urlopen(f"https://127.0.0.1:{etcd_port}/health", context=ctx, timeout=30).read()
        # the control: with the cluster's etcd certificate the client port answers
        answers = []
        for etcd_port in etcd_ports:
            try:
                answers.append(urllib.request.urlopen(f"https://127.0.0.1:{etcd_port}/health", context=with_cert,
                                                      timeout=30).status)
            except (urllib.error.URLError, OSError):
                answers.append(None)
        assert 200 in answers, answers
    finally:
        down = labkit("cluster", "down", "--backend", "local", "--profile", "tiny", env=env)
        assert down.returncode == 0, down.stderr


def _ca_file(kubeconfig: str, tmp: Path) -> str:
    kc = yaml.safe_load(Path(kubeconfig).read_text())
    cluster = kc["clusters"][0]["cluster"]
    if cluster.get("certificate-authority"):
        return str(cluster["certificate-authority"])
    path = tmp / "ca.crt"
    path.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    return str(path)


def test_expected_list_matches_the_deployed_clusterrole():
    """Without a cluster: the committed list and fake_gpus/deploy's ClusterRole say the same."""
    deploy = REPO / "fake_gpus" / "deploy" / "02-rbac.yaml"
    role = next(d for d in yaml.safe_load_all(deploy.read_text()) if d and d["kind"] == "ClusterRole")
    granted: dict[str, set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for res in rule["resources"]:
                granted.setdefault(f"{res}.{group}" if group else res, set()).update(rule["verbs"])
    assert granted == expected()
