"""The env a pod's containers got when the node agent prepared its devices (NodePrepareResources)
stays what it was then: the sim builds it when it is first read (labkit.sim.agent, fake_gpus'
cdi.prepare_deferred), and a slice or claim that changes in between must not show through, as a
kubelet's prepared CDI spec on disk does not change when the driver republishes its slices."""

from __future__ import annotations

from labkit.cluster.backends import connect
from tests import builders as b

POD = b.yaml_docs(b.claim_template("one"),
                  b.pod("p", templates={"g": "one"}, image="x", command=None, container="c"))


def _run(change_slices: bool) -> dict[str, str]:
    c = connect("sim", "tiny", progress=False)
    c.apply(POD)
    c.wait()
    (claim,) = c.list("ResourceClaim")
    (res,) = claim["status"]["allocation"]["devices"]["results"]
    if change_slices:  # the driver republishes its slice with another product name for the device
        for s in c.list("ResourceSlice"):
            for d in s["spec"].get("devices") or []:
                if s["spec"]["driver"] == res["driver"] and d["name"] == res["device"]:
                    d["attributes"]["productName"] = {"string": "Renamed GPU"}
                    c.apply(s)
        c.wait()
        assert "Renamed GPU" in str(c.list("ResourceSlice"))
    return c.pod_env("p", container="c")


def test_env_read_after_the_slices_changed_is_the_env_prepared_before():
    before = _run(change_slices=False)
    after = _run(change_slices=True)
    assert any(k.endswith("_PRODUCT") for k in before) and "Renamed GPU" not in after.values()
    assert after == before
