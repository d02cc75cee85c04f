"""Pieces of the local backend that need no control-plane binaries (fast)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from hypothesis import given
from hypothesis import strategies as st

from labkit.cluster.backends.local import binaries, controlplane, pki
from labkit.cluster.backends.local.cdi import CDIError, resolve_env
from labkit.cluster.backends.local.procs import Supervisor, free_port, pid_alive, port_open


@pytest.mark.parametrize("use_openssl", [False, True], ids=["cryptography", "openssl-cli"])
def test_pki_serving_cert_is_signed_by_ca_and_names_loopback(tmp_path: Path, use_openssl: bool) -> None:
    if use_openssl and not shutil.which("openssl"):
        pytest.skip("no openssl CLI")
    keys = pki.generate(tmp_path, use_openssl=use_openssl)
    ca = x509.load_pem_x509_certificate(keys.ca_cert.read_bytes())
    cert = x509.load_pem_x509_certificates(keys.serving_cert.read_bytes())[0]
    assert cert.issuer == ca.subject
    pub = ca.public_key()
    assert isinstance(pub, ec.EllipticCurvePublicKey)
    pub.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "127.0.0.1" in [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)]
    rows = keys.token_file.read_text().splitlines()
    assert any(r.startswith(keys.tokens["admin"] + ",admin,admin,") and "system:masters" in r for r in rows)
    assert oct(keys.sa_key.stat().st_mode & 0o777) == "0o600"
    # etcd's cert: same CA, loopback, usable as etcd's server/peer cert and the apiserver's client cert
    etcd = x509.load_pem_x509_certificate(keys.etcd_cert.read_bytes())
    assert etcd.issuer == ca.subject
    pub.verify(etcd.signature, etcd.tbs_certificate_bytes, ec.ECDSA(etcd.signature_hash_algorithm))
    etcd_sans = etcd.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "127.0.0.1" in [str(ip) for ip in etcd_sans.get_values_for_type(x509.IPAddress)]
    usages = set(etcd.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    assert {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH} <= usages, usages
    assert oct(keys.etcd_key.stat().st_mode & 0o777) == "0o600"


def test_kubeconfig_has_server_ca_and_token(tmp_path: Path) -> None:
    kc = yaml.safe_load(pki.kubeconfig("https://127.0.0.1:1234", tmp_path / "ca.crt", "tok"))
    assert kc["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:1234"
    assert kc["users"][0]["user"]["token"] == "tok"
    assert kc["current-context"] == kc["contexts"][0]["name"]


def test_feature_gate_flag_only_lists_changed_unlocked_gates() -> None:
    from labkit.api.features import FEATURE_DEFAULTS

    gates = dict(FEATURE_DEFAULTS["1.37"])
    assert controlplane.feature_gate_flag("1.37", gates) == []
    gates["DRAListTypeAttributes"] = True
    gates["DynamicResourceAllocation"] = False  # locked: cannot be passed, left out
    assert controlplane.feature_gate_flag("1.37", gates) == ["--feature-gates=DRAListTypeAttributes=true"]


@given(st.dictionaries(st.sampled_from(sorted(__import__("labkit.api.features", fromlist=["x"]).FEATURE_DEFAULTS["1.36"])),
                       st.booleans()))
def test_feature_gate_flag_round_trips(overrides: dict[str, bool]) -> None:
    from labkit.api.features import FEATURE_DEFAULTS, LOCKED

    gates = {**FEATURE_DEFAULTS["1.36"], **overrides}
    flag = controlplane.feature_gate_flag("1.36", gates)
    parsed = dict(kv.split("=") for kv in flag[0].split("=", 1)[1].split(",")) if flag else {}
    expect = {g: str(v).lower() for g, v in gates.items()
              if g not in LOCKED["1.36"] and FEATURE_DEFAULTS["1.36"][g] != v}
    assert parsed == expect


def test_runtime_config_only_for_enabled_gates() -> None:
    assert controlplane.runtime_config("1.37", {"DRAWorkloadResourceClaims": False}) == []
    flag = controlplane.runtime_config("1.35", {"DRADeviceTaints": True, "DRADeviceTaintRules": True})
    assert flag == ["--runtime-config=resource.k8s.io/v1alpha3=true"]


def _spec(tmp: Path, name: str, kind: str, common: list[str], devices: dict[str, list[str]]) -> None:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / name).write_text(yaml.safe_dump({
        "cdiVersion": "0.5.0", "kind": kind, "containerEdits": {"env": common},
        "devices": [{"name": n, "containerEdits": {"env": e}} for n, e in devices.items()]}))


def test_cdi_env_merges_spec_and_device_edits(tmp_path: Path) -> None:
    _spec(tmp_path, "a.yaml", "k8s.gpu.nvidia.com/claim", ["COMMON=1", "X=spec"],
          {"u1-gpu-0": ["GPU0=yes", "X=dev"], "u1-gpu-1": ["GPU1=yes"]})
    _spec(tmp_path, "b.yaml", "k8s.nic/claim", ["NIC=1"], {"u2-nic-0": ["N0=yes"]})
    env = resolve_env(["k8s.gpu.nvidia.com/claim=u1-gpu-0", "k8s.gpu.nvidia.com/claim=u1-gpu-1"], [tmp_path])
    assert env == {"COMMON": "1", "X": "dev", "GPU0": "yes", "GPU1": "yes"}
    assert "NIC" not in env


def test_cdi_unknown_device_is_a_clear_error(tmp_path: Path) -> None:
    _spec(tmp_path, "a.yaml", "k8s.gpu.nvidia.com/claim", [], {"d": []})
    with pytest.raises(CDIError, match="k8s.gpu.nvidia.com/claim=missing not found"):
        resolve_env(["k8s.gpu.nvidia.com/claim=missing"], [tmp_path])
    with pytest.raises(CDIError, match="not fully qualified"):
        resolve_env(["d"], [tmp_path])


def test_supervisor_kills_whole_process_group_and_frees_port(tmp_path: Path) -> None:
    port = free_port()
    sup = Supervisor(tmp_path)
    # a parent that ignores SIGTERM and a grandchild listening on a port: both must go
    code = textwrap.dedent(f"""
        import signal, socket, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen([sys.executable, "-c", "import socket,time; s=socket.socket(); "
            "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', {port})); "
            "s.listen(); print(flush=True); time.sleep(600)"])
        print(child.pid, flush=True)
        time.sleep(600)
    """)
    comp = sup.start("stubborn", [sys.executable, "-c", code], ports=(port,))
    deadline = time.monotonic() + 30
    while not port_open(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert port_open(port)
    grandchild = int(comp.log.read_text().split()[0])
    sup.stop_all(timeout=0.5)
    assert not pid_alive(comp.pid)
    deadline = time.monotonic() + 10
    while pid_alive(grandchild) and time.monotonic() < deadline:  # reaped by init, asynchronously
        time.sleep(0.05)
    assert not pid_alive(grandchild)
    assert not port_open(port)


def test_atexit_stops_children_when_python_exits_without_down(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from labkit.cluster.backends.local.procs import Supervisor
        sup = Supervisor(Path({str(tmp_path)!r}))
        c = sup.start("sleeper", [sys.executable, "-c", "import time; time.sleep(600)"])
        print(c.pid, flush=True)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    pid = int(out.stdout.split()[0])
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(pid)


def test_missing_binaries_give_one_line_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path))
    monkeypatch.delenv("LABKIT_CONTROLPLANE_BIN", raising=False)
    assert binaries.find("1.36") is None
    with pytest.raises(binaries.BinariesMissing) as err:
        binaries.ensure("1.36", build=False)
    msg = str(err.value)
    assert "\n" not in msg and "tools/build-controlplane.sh 1.36" in msg


def _fake_binaries(cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A control-plane cache under `cache` holding 1.37 binaries (empty scripts) of v1.37.1."""
    monkeypatch.setenv("LABKIT_CACHE", str(cache))
    monkeypatch.delenv("LABKIT_CONTROLPLANE_BIN", raising=False)
    root = cache / "controlplane" / "1.37"
    (root / "bin").mkdir(parents=True)
    for c in binaries.COMPONENTS:
        (root / "bin" / c).write_text("#!/bin/sh\n")
        os.chmod(root / "bin" / c, 0o755)
    (root / "VERSION").write_text("v1.37.1\n")
    return root


def test_find_reads_recorded_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _fake_binaries(tmp_path, monkeypatch)
    (root / "ETCD_VERSION").write_text("v3.6.16\n")
    found = binaries.find("1.37")
    assert found is not None
    assert (found.kubernetes_version, found.etcd_version, found.minor) == ("v1.37.1", "v3.6.16", "1.37")


def test_local_backend_is_registered() -> None:
    from labkit.cluster import backend_class
    from labkit.cluster.backends.local import LocalCluster

    assert backend_class("local") is LocalCluster


def test_up_without_binaries_is_a_cluster_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from labkit.cluster import ClusterError
    from labkit.cluster.backends.local import LocalCluster

    monkeypatch.setenv("LABKIT_CACHE", str(tmp_path))
    monkeypatch.delenv("LABKIT_CONTROLPLANE_BIN", raising=False)
    with pytest.raises(ClusterError, match="no control-plane binaries"):
        LocalCluster(build=False, progress=False).up("tiny")


def test_agent_env_per_container_honours_request_names(tmp_path: Path) -> None:
    from labkit.cluster.backends.local.agent import NodeAgent

    _spec(tmp_path, "a.yaml", "k8s.gpu.nvidia.com/claim", ["C=1"], {"u-a": ["A=1"], "u-b": ["B=1"]})
    agent = NodeAgent(None, "n", tmp_path / "reg", tmp_path)  # type: ignore[arg-type]
    claim = {"metadata": {"uid": "u", "name": "c", "namespace": "default"}}
    pod = {"spec": {"containers": [
        {"name": "one", "resources": {"claims": [{"name": "gpus", "request": "first"}]}},
        {"name": "all", "resources": {"claims": [{"name": "gpus"}]}},
        {"name": "none"}]}}
    prepared = {"u": [{"requests": ["first"], "cdi": ["k8s.gpu.nvidia.com/claim=u-a"]},
                      {"requests": ["second"], "cdi": ["k8s.gpu.nvidia.com/claim=u-b"]}]}
    env, devices = agent._container_env(pod, {"gpus": claim}, prepared)
    assert env == {"one": {"C": "1", "A": "1"}, "all": {"C": "1", "A": "1", "B": "1"}, "none": {}}
    assert devices["one"] == ["k8s.gpu.nvidia.com/claim=u-a"]
    assert json.dumps(devices)  # serialisable for the pod annotation


def test_fleet_profiles_are_refused_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    from labkit.cluster import ClusterError
    from labkit.cluster.backends.local import LocalCluster

    monkeypatch.setenv("LABKIT_LOCAL_MAX_NODES", "2")
    profile = {"name": "big", "nodes": [{"namePrefix": "n-", "count": 3, "nodeProfile": "t4-inference"}]}
    with pytest.raises(ClusterError, match="at most 2; use the sim backend"):
        LocalCluster(build=False, progress=False).up(profile)


def test_older_minor_emulates_on_cached_newer_binaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_binaries(tmp_path, monkeypatch)
    bins, emulated = binaries.for_profile("1.35", build=False)
    assert (bins.kubernetes_version, emulated) == ("v1.37.1", "1.35")
    assert binaries.for_profile("1.37", build=False)[1] is None
    with pytest.raises(binaries.BinariesMissing):  # below the emulation range, and no build allowed
        binaries.for_profile("1.33", build=False)
    with pytest.raises(binaries.BinariesMissing):
        binaries.for_profile("1.35", build=False, exact=True)


def test_a_kind_the_server_does_not_serve_is_not_rediscovered_on_every_call(monkeypatch) -> None:
    """Polls that list an optional kind the server lacks (explain's snapshot lists DeviceTaintRule)
    fetched the whole API discovery each time; now once per MISS_TTL seconds."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from labkit.cluster import kube

    paths: list[str] = []
    docs = {"/api": {"items": [{"metadata": {"name": ""}, "versions": [{"version": "v1", "resources": [
        {"resource": "pods", "responseKind": {"kind": "Pod"}, "scope": "Namespaced"}]}]}]},
        "/apis": {"items": []}, "/api/v1/pods": {"items": [{"metadata": {"name": "p"}}]}}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            paths.append(self.path)
            body = json.dumps(docs.get(self.path.split("?")[0], {})).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        k = kube.Kube(f"http://127.0.0.1:{httpd.server_port}", "token")
        for _ in range(3):
            with pytest.raises(kube.ApiError, match="not served"):
                k.list("DeviceTaintRule")
        assert paths.count("/apis") == 1  # one discovery for three calls
        assert k.list("Pod")[0]["kind"] == "Pod" and paths.count("/apis") == 1
        monkeypatch.setattr(kube, "MISS_TTL", 0.0)  # the TTL is over: the server may serve it by now
        with pytest.raises(kube.ApiError):
            k.list("DeviceTaintRule")
        assert paths.count("/apis") == 2
        k.close()
    finally:
        httpd.shutdown()
