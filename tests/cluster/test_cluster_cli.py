"""`labkit simulate` and `labkit cluster` (sim backend), run through labkit.cli.main."""

from __future__ import annotations

import json

from labkit.cli import main
from tests.paths import TEST_DATA

SCENARIOS = TEST_DATA / "scenarios"


def test_simulate_json_contract(capsys):
    rc = main(["simulate", "-f", str(SCENARIOS / "shared-claim.yaml"), str(SCENARIOS / "unplaceable.yaml"),
               "--profile", "workshop", "-o", "json"])
    out = capsys.readouterr().out
    assert rc == 0
    rep = json.loads(out)
    assert list(rep) == ["pods", "claims"]
    for p in rep["pods"]:
        assert list(p) == ["namespace", "name", "node", "phase", "reason", "gate", "containers", "events"]
        assert p["gate"] is None  # every claim exists: no pod is held back in PreEnqueue
    for c in rep["claims"]:
        assert list(c) == ["namespace", "name", "allocation", "reservedFor"]
    assert [p["name"] for p in rep["pods"]] == ["infer-1", "infer-2", "too-big"]
    assert [c["name"] for c in rep["claims"]][0] == "shared-t4"
    assert rep["pods"][2]["reason"] == "Unschedulable" and rep["pods"][2]["node"] is None
    # per container env and the pod's events (DESIGN.md contract)
    envs = [c["env"] for p in rep["pods"][:2] for c in p["containers"]]
    assert envs[0]["NVIDIA_VISIBLE_DEVICES"].startswith("GPU-") and envs[0]["NVIDIA_VISIBLE_DEVICES"] == envs[-1][
        "NVIDIA_VISIBLE_DEVICES"]  # one shared claim: the same GPU
    assert rep["pods"][2]["containers"][0]["env"] == {}
    assert any(e["reason"] == "FailedScheduling" for e in rep["pods"][2]["events"])
    assert [e["reason"] for e in rep["pods"][0]["events"]][0] == "Scheduled"


def test_simulate_is_deterministic(capsys):
    args = ["simulate", "-f", str(SCENARIOS / "gpu-40gi.yaml"), "--profile", "workshop"]
    main(args)
    first = capsys.readouterr().out
    main(args)
    assert capsys.readouterr().out == first


def test_simulate_table(capsys):
    assert main(["simulate", "-f", str(SCENARIOS / "gpu-40gi.yaml"), "-o", "table"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["NAME", "NODE", "PHASE", "REASON"]
    assert "gpu=dgx-a100-0/gpu-0" in out


def test_simulate_advance_finishes_jobs(tmp_path, capsys):
    f = tmp_path / "job.yaml"
    f.write_text("""
apiVersion: batch/v1
kind: Job
metadata: {name: j, annotations: {labkit.dev/duration: 10s}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: x}]
""")
    assert main(["simulate", "-f", str(f), "--profile", "tiny", "--advance", "11"]) == 0
    [pod] = json.loads(capsys.readouterr().out)["pods"]
    assert pod["phase"] == "Succeeded" and pod["name"].startswith("j-")


def test_simulate_bad_input_is_one_line(tmp_path, capsys):
    f = tmp_path / "bad.yaml"
    f.write_text("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: x}\n"
                 "spec: {devices: {requests: [{name: g, exactly: {deviceClassName: gpu.nvidia.com, cuont: 1}}]}}\n")
    assert main(["simulate", "-f", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cuont" in err[0]
    assert main(["simulate", "-f", str(tmp_path / "missing.yaml")]) == 3  # not found
    assert "no such file" in capsys.readouterr().err
    assert main(["simulate", "-f", str(f), "--profile", "no-such-profile"]) == 3  # not found
    assert "cluster profile 'no-such-profile' not found; known profiles:" in capsys.readouterr().err


def test_cluster_status_and_down_for_sim(capsys):
    assert main(["cluster", "status", "--profile", "workshop"]) == 0
    out = capsys.readouterr().out
    assert "profile workshop: 3 node(s)" in out and "in-process" in out
    assert "devices from driver gpu.nvidia.com" in out
    assert main(["cluster", "down"]) == 0
    assert "nothing to stop" in capsys.readouterr().out
