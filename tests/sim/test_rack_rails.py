"""Rails (issue 27): per-claim matchAttribute aligns a GPU with its NIC, but not two pods; what DRA
offers instead, each run through `labkit simulate` as typed and checked against kube-scheduler's
answer (the sim's scheduler, the same filters and messages)."""

from __future__ import annotations

import json

from labkit.cli import main
from labkit.topology import fleet_distance, fleet_graph
from tests.paths import REPO

EX = REPO / "examples" / "rack-rails"
PROFILE = "nvl72-rails"


def simulate(capsys, *names: str) -> dict[str, dict]:
    rc = main(["simulate", "--profile", PROFILE, "-o", "json", "-f", *(str(EX / n) for n in names)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return {p["name"]: p for p in json.loads(out)["pods"]}


def nic(pod: dict) -> str:
    (name,) = [v for c in pod["containers"] for k, v in c["env"].items() if k.startswith("FAKE_NIC_") and k.endswith("_NAME")]
    return f"{pod['node']}/{name}"


def test_two_aligned_claims_still_put_the_pods_on_different_rails(capsys):
    pods = simulate(capsys, "gpu-nic-pair.yaml", "busy.yaml", "prefill-decode.yaml")
    prefill, decode = pods["prefill"], pods["decode"]
    assert prefill["phase"] == decode["phase"] == "Running"
    g = fleet_graph(PROFILE)
    for p in (prefill, decode):  # each claim: GPU and NIC under one root
        gpu = next(v for c in p["containers"] for k, v in c["env"].items() if k.startswith("FAKE_GPU_") and k.endswith("_NAME"))
        assert fleet_distance(g, f"{p['node']}/{gpu}", nic(p)) == "PHB"
    assert fleet_distance(g, nic(prefill), nic(decode)) == "NET"  # different rails


def test_a_rail_attribute_pins_both_pods_to_rail_0_or_says_why_not(capsys):
    pods = simulate(capsys, "rail0-pair.yaml", "gpu-nic-pair.yaml", "busy.yaml", "prefill-decode-rail0.yaml",
                    "decode-anywhere-rail0.yaml")
    decode = pods["decode"]
    assert decode["phase"] == "Pending" and decode["node"] is None
    msg = next(e["message"] for e in decode["events"] if e["reason"] == "FailedScheduling")
    assert msg.startswith("0/37 nodes are available: 1 cannot allocate all claims, "
                          "36 node(s) didn't match Pod's node affinity/selector."), msg
    g = fleet_graph(PROFILE)
    anywhere = pods["decode-anywhere"]
    assert anywhere["phase"] == "Running" and anywhere["node"] not in ("rack-a-tray-00", "rack-a-tray-01")
    assert fleet_distance(g, nic(pods["prefill"]), nic(anywhere)) == "RAIL"


def test_one_shared_claim_puts_both_pods_on_the_node_of_its_allocation(capsys):
    pods = simulate(capsys, "shared-claim.yaml")
    a, b = pods["prefill-shared"], pods["decode-shared"]
    assert a["phase"] == b["phase"] == "Running" and a["node"] == b["node"]
    assert nic(a) != nic(b)  # each container got its own request's NIC, not the other pod's
