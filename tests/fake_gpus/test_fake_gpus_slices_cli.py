"""`python -m fake_gpus` CLI: output, determinism, errors, subcommand registry."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest
import yaml

from fake_gpus.catalog import node_profiles
from fake_gpus.cli import build_parser, dump, main
from fake_gpus.slices import build_slices, device_classes


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_slices_yaml_and_json(capsys):
    rc, out, _ = run(capsys, "slices", "--profile", "mig-a100", "--node", "n1", "--mig", "dynamic")
    assert rc == 0
    assert list(yaml.safe_load_all(out)) == build_slices("mig-a100", "n1", mig_mode="dynamic")
    rc, out2, _ = run(capsys, "slices", "--profile", "mig-a100", "--node", "n1", "--mig", "dynamic")
    assert out2 == out  # byte-identical
    rc, js, _ = run(capsys, "slices", "--profile", "dgx-a100", "--node", "n1", "-o", "json",
                    "--driver", "gpu.example.com", "--kubernetes-version", "1.34")
    assert rc == 0 and json.loads(js) == build_slices("dgx-a100", "n1", driver="gpu.example.com",
                                                      kubernetes_version="1.34")


def test_deviceclasses(capsys):
    rc, out, _ = run(capsys, "deviceclasses")
    assert rc == 0 and list(yaml.safe_load_all(out)) == device_classes()
    rc, out, _ = run(capsys, "deviceclasses", "-o", "json", "--nic-driver", "net.example.com")
    assert [c["metadata"]["name"] for c in json.loads(out)][-1] == "net.example.com"


def test_profiles_table(capsys):
    rc, out, _ = run(capsys, "profiles")
    lines = out.splitlines()
    assert rc == 0 and lines[0].split()[:4] == ["NAME", "GPUS", "NICS", "MIG"]
    assert [ln.split()[0] for ln in lines[1:]] == node_profiles()
    row = next(ln for ln in lines if ln.startswith("mig-a100 "))
    assert row.split()[1:4] == ["4xA100-SXM4-40GB", "2", "static"]


def test_topo(capsys):
    rc, out, _ = run(capsys, "topo", "--profile", "dgx-a100")
    assert rc == 0
    header, gpu0 = out.splitlines()[:2]
    assert header.split()[:2] == ["GPU0", "GPU1"]
    assert gpu0.split()[:3] == ["GPU0", "X", "NV12"] and "PIX" in gpu0 and "SYS" in gpu0


def test_unknown_profile_is_one_line_error(capsys):
    rc, out, err = run(capsys, "slices", "--profile", "nope", "--node", "n1")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "unknown node profile 'nope'" in err and "dgx-a100" in err


def test_bad_profile_file_names_field_path(capsys, tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("name: bad\nsockets: [{id: 0}]\ngpus:\n  - {minor: 0, model: T4, pciBusID: '0000:01:00.0'}\n")
    rc, _, err = run(capsys, "topo", "--profile", str(f))
    assert rc == 2 and "NodeProfile/bad: gpus[0]: exactly one of pcieSwitch or pcieRoot is required" in err
    assert "Traceback" not in err


def test_bad_node_name(capsys):
    rc, _, err = run(capsys, "slices", "--profile", "l4-edge", "--node", "Bad_Node")
    assert rc == 2 and "node name 'Bad_Node'" in err


def test_subcommand_registry(monkeypatch):
    mod = types.ModuleType("fake_gpus_test_ext")
    seen = {}

    def register(sub):
        p = sub.add_parser("hello")
        p.add_argument("--who")
        p.set_defaults(func=lambda a: seen.setdefault("who", a.who) and 7)

    mod.register = register
    monkeypatch.setitem(sys.modules, "fake_gpus_test_ext", mod)
    parser = build_parser(("fake_gpus_test_ext", "fake_gpus_no_such_module"))
    args = parser.parse_args(["hello", "--who", "me"])
    assert args.func(args) == 7 and seen == {"who": "me"}


def test_broken_extension_does_not_break_builtins(monkeypatch, capsys):
    mod = types.ModuleType("fake_gpus_broken_ext")

    def register(sub):
        raise RuntimeError("boom")

    mod.register = register
    monkeypatch.setitem(sys.modules, "fake_gpus_broken_ext", mod)
    with pytest.raises(RuntimeError):  # a register() that raises is a bug in that module: surfaced
        build_parser(("fake_gpus_broken_ext",))
    monkeypatch.delitem(sys.modules, "fake_gpus_broken_ext")
    parser = build_parser(("fake_gpus_broken_ext",))  # not importable: skipped quietly
    assert parser.parse_args(["profiles"]).command == "profiles"


def test_module_entrypoint_subprocess():
    r = subprocess.run([sys.executable, "-m", "fake_gpus", "slices", "--profile", "t4-inference", "--node", "n"],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout == dump(build_slices("t4-inference", "n"), "yaml")


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_dump_is_deterministic(fmt):
    a = dump(build_slices("dgx-h100", "n", mig_mode="dynamic"), fmt)
    b = dump(build_slices("dgx-h100", "n", mig_mode="dynamic"), fmt)
    assert a == b
