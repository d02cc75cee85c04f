"""Every command line reports an error as one line, ``<program> <command>: ...``, with the exit code
of its kind (labkit.errors): 2 bad input, 3 not found, 1 the work failed, 70 a bug. One place
prints them (labkit.cli.run_guarded); these run each CLI as typed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from labkit import cli, kubectl_dra
from tests.paths import REPO

ROOT = REPO
CLAIM = ("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: x}\n"
         "spec: {devices: {requests: [{name: g, exactly: {deviceClassName: gpu.nvidia.com}}]}}\n")


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    rc = cli.main(argv)
    return rc, capsys.readouterr().err


@pytest.mark.parametrize(("argv", "code", "says"), [
    # labkit cluster
    (["cluster", "up", "--profile", "no-such-profile"], 3, "labkit cluster: cluster profile 'no-such-profile' not found"),
    (["cluster", "up", "--profile", "tests/data/nasty/profiles/count-yes.yaml"], 2,
     "labkit cluster: tests/data/nasty/profiles/count-yes.yaml: nodes[0].count: must be a positive integer"),
    # labkit simulate / describe (cluster/cli.py)
    (["simulate", "-f", "no/such/file.yaml"], 3, "labkit simulate: no/such/file.yaml: no such file"),
    (["simulate", "-f", "tests/data/nasty/empty.yaml", "--state", "x.yaml", "--profile", "tiny"], 2,
     "labkit simulate: --state and --profile: the dump already says which nodes there are"),
    (["describe", "pod", "x"], 2, "labkit describe: describe what?"),
    # platform CLI (explain, snapshot)
    (["explain", "pod", "a/b/c"], 2, "labkit explain: 'a/b/c': give the pod as NAMESPACE/NAME or NAME"),
    (["snapshot", "-o", "-", "--kubeconfig", "no/such/kubeconfig"], 3,
     "labkit snapshot: kubeconfig no/such/kubeconfig: no such file"),
    # labkit experiment
    # (a number out of range is argparse's error, before the command runs: tests/security/test_security_cli_numbers.py)
    (["experiment", "run", "--policy", ","], 2, "labkit experiment: --policy: give at least one policy name"),
    (["experiment", "run", "--fleet", "tiny", "--policy", "whole-gpu", "--trace", "no-such.csv"], 3,
     "labkit experiment: trace 'no-such.csv': no such file"),
    (["experiment", "run", "--fleet", "no-such-fleet", "--policy", "whole-gpu", "--trace", "synthetic"], 3,
     "labkit experiment: cluster profile 'no-such-fleet' not found"),
    (["experiment", "run", "--fleet", "tiny", "--policy", "no-such-policy", "--trace", "synthetic"], 2,
     "labkit experiment: policy 'no-such-policy': unknown"),
])
def test_labkit_commands_exit_with_their_kind(capsys, argv, code, says):
    rc, err = run(capsys, argv)
    assert (rc, err.splitlines()[0][:len(says)]) == (code, says), err
    assert len(err.strip().splitlines()) == 1


def test_bad_objects_in_the_sim_are_bad_input(capsys, tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text(CLAIM.replace("deviceClassName", "deviceClassNmae"))
    rc, err = run(capsys, ["simulate", "-f", str(f), "--profile", "tiny"])
    assert rc == 2 and err.startswith("labkit simulate: ResourceClaim") and "deviceClassNmae" in err, err


def test_a_bug_is_70_with_the_command_named(capsys, monkeypatch, tmp_path):
    def boom(*_a: object, **_k: object) -> object:
        raise KeyError("surprise")
    monkeypatch.setattr("labkit.cluster.cli.simulate_report", boom)
    f = tmp_path / "c.yaml"
    f.write_text(CLAIM)
    rc, err = run(capsys, ["simulate", "-f", str(f), "--profile", "tiny"])
    assert rc == 70 and err.startswith("labkit simulate: internal error: KeyError: 'surprise'"), err


def test_kind_on_a_machine_without_an_engine_is_an_engine_error(tmp_path):
    """What the machine cannot do is no bad input: exit 1, after the failed checks and their fixes."""
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path), "LABKIT_KIND_BIN_DIR": str(tmp_path / "none"),
           "LABKIT_RUN_DIR": str(tmp_path / "run")}
    out = subprocess.run([sys.executable, "-m", "labkit", "cluster", "up", "--backend", "kind", "--profile", "tiny"],
                         capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        "labkit cluster: kind cannot run on this machine yet: 3 check(s) failed (fixes above)")


def test_kubectl_dra_goes_through_the_same_printer(capsys):
    rc = kubectl_dra.main(["explain", "pod", "a/b", "-n", "c"])
    err = capsys.readouterr().err
    assert rc == 2 and err == "kubectl dra: 'a/b' names namespace 'a' but -n says 'c'; give one of them\n"


@pytest.mark.parametrize(("argv", "code", "says"), [
    (["slices", "--profile", "no-such-profile", "--node", "n1"], 2, "fake_gpus slices: unknown node profile 'no-such-profile'"),
    (["slices", "--profile", "dgx-a100", "--node", "Bad_Node"], 2, "fake_gpus slices: "),
])
def test_python_m_fake_gpus_uses_the_same_form(argv, code, says):
    out = subprocess.run([sys.executable, "-m", "fake_gpus", *argv], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "FAKE_GPUS_DEBUG": ""})
    assert out.returncode == code and out.stderr.startswith(says), out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
