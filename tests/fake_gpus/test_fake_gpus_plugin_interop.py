"""Wire compatibility with the real kubelet API and CDI validity, checked by Go code.

fake_gpus/plugin/interop is a small Go program built on k8s.io/kubelet v0.37 (the kubelet's own
generated gRPC clients for pluginregistration/v1, dra/v1, dra/v1beta1) and the CDI reference
library (tags.cncf.io/container-device-interface), which loads the specs the plugin wrote and
injects the returned CDI IDs into an OCI spec as containerd does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from fake_gpus.plugin import cdi
from fake_gpus.plugin.claims import InMemoryClaimSource
from tests.fake_gpus.test_fake_gpus_plugin_support import (
    DRIVER,
    make_claim,
    node_slices,
    short_tmpdir,
    start_plugin,
)
from tests.paths import REPO

pytestmark = pytest.mark.slow

SRC = REPO / "fake_gpus" / "plugin" / "interop"
OFFLINE_HINTS = ("dial tcp", "proxy.golang.org", "no such host", "connection refused", "i/o timeout")


@pytest.fixture(scope="module")
def interop_bin() -> Path:
    go = shutil.which("go")
    if go is None:
        pytest.skip("needs the go toolchain")
    cache = Path(os.environ.get("LABKIT_CACHE", Path.home() / ".cache" / "dra-labkit")) / "fake-gpus-interop"
    binary = cache / "plugin-interop"
    newest = max(p.stat().st_mtime for p in SRC.iterdir())
    if not binary.exists() or binary.stat().st_mtime < newest:
        cache.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([go, "build", "-o", str(binary), "."], cwd=SRC, capture_output=True, text=True)
        if r.returncode != 0:
            if any(h in r.stderr for h in OFFLINE_HINTS):
                pytest.skip(f"Go modules not downloadable: {r.stderr.strip().splitlines()[-1]}")
            pytest.fail(f"go build failed:\n{r.stderr}")
    return binary


def test_real_kubelet_health_api(interop_bin):
    with short_tmpdir() as dirs:
        state_server = start_plugin(dirs, InMemoryClaimSource(), health=True)
        try:
            state_server.health.set("node-a", "gpu-1", "Unhealthy", "XID 79")
            r = subprocess.run([str(interop_bin), "-registration", str(state_server.registration_socket)],
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr
        finally:
            state_server.stop()
    health = json.loads(r.stdout)["health"]
    assert health == {"node-a/gpu-0": "HEALTHY", "node-a/gpu-1": "UNHEALTHY", "node-a/gpu-2-mig-1g5gb-19-0": "HEALTHY",
                      "node-a/gpu-3": "HEALTHY", "node-a/nic-0": "HEALTHY"}


def test_real_kubelet_api_and_cdi_library(interop_bin):
    s1, s2 = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
    c1 = make_claim("c1", "1a000000-0000-4000-8000-000000000001",
                    [("gpu/a", "gpu-0"), ("mig", "gpu-2-mig-1g5gb-19-0"), ("n", "nic-0")])
    c2 = make_claim("c2", "2b000000-0000-4000-8000-000000000002", [("r1", "gpu-3", s1), ("r2", "gpu-3", s2)],
                    namespace="team")
    with short_tmpdir() as dirs:
        server = start_plugin(dirs, InMemoryClaimSource([c1, c2]))
        try:
            refs = [{k: c["metadata"][k] for k in ("namespace", "name", "uid")} for c in (c1, c2)]
            r = subprocess.run([str(interop_bin), "-registration", str(server.registration_socket),
                                "-claims", json.dumps(refs), "-cdi-dir", str(dirs.cdi)],
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr
            out = json.loads(r.stdout)
            assert server.wait_for_registration(0)
        finally:
            server.stop()
    assert out["info"] == {"type": "DRAPlugin", "name": DRIVER, "endpoint": str(server.dra_socket),
                           "supportedVersions": ["v1.DRAPlugin", "v1beta1.DRAPlugin"]}
    assert out["cdiErrors"] == {}
    v1, v1beta1 = out["prepare"]["v1"], out["prepare"]["v1beta1"]
    for claim in (c1, c2):
        uid = claim["metadata"]["uid"]
        assert v1[uid]["error"] == "" and "cdiError" not in v1[uid]
        # the env the CDI library injects, finished by the runtime hook (visible_devices: the list
        # variables of every injected device), is exactly what container_env promises the simulator
        injected = dict(e.split("=", 1) for e in v1[uid]["env"])
        expected = cdi.container_env(claim, DRIVER, node_slices())
        assert cdi.visible_devices(injected) == expected
        # without the hook every per-device variable is there already; only the lists are the last device's
        assert {k: v for k, v in injected.items() if not k.endswith(("_DEVICES", "_COUNT"))} == {
            k: v for k, v in expected.items() if not k.endswith(("_DEVICES", "_COUNT"))}
        strip = [{k: v for k, v in d.items() if k != "shareID"} for d in v1[uid]["devices"]]
        assert strip == v1beta1[uid]["devices"]
    assert [d["requestNames"] for d in v1[c1["metadata"]["uid"]]["devices"]] == [["gpu"], ["mig"], ["n"]]
    assert [d.get("shareID") for d in v1[c2["metadata"]["uid"]]["devices"]] == [s1, s2]
    assert out["unprepare"]["v1"] == {c1["metadata"]["uid"]: "", c2["metadata"]["uid"]: ""}
