"""Bad input through the commands as a user types them: one clear line, a non-zero exit, no traceback.

Every nasty file under tests/data/nasty/ (plus a few made here: huge ones) is handed to every
command that loads that kind of file, each in its own process (forked from one that imported the
CLI once, tests/cliserver.py; a sample also runs through the real console scripts and must give
the same answer). tests/data/nasty/expected.tsv holds, per command line, the exit code and the
first line the user sees (stderr, or stdout when stderr is empty). Regenerate it after a
deliberate message change with

    .venv/bin/python -m tests.cli.test_bad_input --regenerate

and read the diff: each line must name the object or file, the field path and the fix.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest

from tests.cliserver import CliServer
from tests.paths import REPO

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

ROOT = REPO
NASTY = Path("tests/data/nasty")
EXPECTED = ROOT / NASTY / "expected.tsv"
BIN = Path(sys.executable).parent
LABKIT = str(BIN / "labkit")
GENERATED = Path("test-artifacts/nasty")  # made by _generate(), relative to ROOT

#: a valid ResourceSlice, so commands that need slices get past that to the file under test
SLICES = "tests/data/api/slices.yaml"

#: nasty inputs that Kubernetes accepts too: they must be accepted (exit 0), not refused
ACCEPTED = {
    # kubectl decodes JSON first and falls back to YAML, which allows the trailing comma
    "validate -f tests/data/nasty/trailing-comma.json",
    "simulate --profile tiny -f tests/data/nasty/trailing-comma.json",
    # kubectl decodes UTF-16 after a byte order mark (cli-runtime's FileVisitor, BOMOverride)
    "validate -f tests/data/nasty/utf16.yaml",
    "simulate --profile tiny -f tests/data/nasty/utf16.yaml",
}


def _manifests() -> list[str]:
    files = sorted(p.name for p in (ROOT / NASTY).iterdir() if p.is_file() and p.suffix != ".tsv")
    return [f"{NASTY}/{f}" for f in files] + [f"{GENERATED}/{f}" for f in ("huge-object.yaml", "huge-stream.yaml")]


def commands() -> list[str]:
    """Every command line tried (space-separated; no argument contains a space)."""
    out: list[str] = []
    for m in _manifests():
        out += [f"validate -f {m}", f"cel device.driver=='gpu.nvidia.com' -f {m}",
                f"allocate --node n1 -f {m}", f"simulate --profile tiny -f {m}"]
    for p in sorted((ROOT / NASTY / "profiles").iterdir()):
        f = f"{NASTY}/profiles/{p.name}"
        out += [f"topology --profile {f}", f"cluster --backend sim --profile {f} up",
                f"simulate --profile {f} -f {SLICES}"]
    for p in sorted((ROOT / NASTY / "node-profiles").iterdir()):
        f = f"{NASTY}/node-profiles/{p.name}"
        out += [f"fake_gpus slices --profile {f} --node n1", f"fake_gpus topo --profile {f}"]
    for p in sorted((ROOT / NASTY / "dumps").iterdir()):  # objects no API server could have stored
        out.append(f"simulate --state {NASTY}/dumps/{p.name} -f {SLICES}")
    for p in sorted((ROOT / NASTY / "traces").iterdir()):
        out.append(f"experiment run --fleet tiny --policy whole-gpu --trace {NASTY}/traces/{p.name}")
    out += [  # bad arguments typed on the command line
        "validate -f tests/data/nasty/no-such-file.yaml",
        "validate -f tests/data/nasty",
        # a directory or a device where one file is wanted
        "topology --profile /dev/null",
        "topology --profile tests/data/nasty/profiles",
        f"simulate --state /dev/null -f {SLICES}",
        f"simulate --state tests/data/nasty/dumps -f {SLICES}",
        "experiment run --fleet tiny --policy whole-gpu --trace /dev/null",
        "experiment run --fleet tiny --policy whole-gpu --trace tests/data/nasty/traces",
        "fake_gpus slices --profile /dev/null --node n1",
        "fake_gpus slices --profile tests/data/nasty/node-profiles --node n1",
        # a selector that fails on every device: kube-scheduler would fail every allocation
        f"cel device.attributes['gpu.nvidia.com'].nosuch==1 -f {SLICES}",
        f"validate --kubernetes-version 1.99 -f {SLICES}",
        f"validate --feature-gates DRANoSuchGate=true -f {SLICES}",
        f"validate --feature-gates DRAPrioritizedList=maybe -f {SLICES}",
        f"cel device.driver== -f {SLICES}",
        f"cel device.attributes['x'].y.z()+1 -f {SLICES}",
        f"allocate --node n1 --kubernetes-version 1.2 -f {SLICES}",
        "topology --profile no-such-profile",
        "topology --profile tiny --node no-such-node",
        "cluster --backend sim --profile no-such-profile up",
        "experiment run --fleet tiny --policy no-such-policy --trace synthetic",
        "experiment run --fleet no-such-fleet --policy whole-gpu --trace synthetic",
        "experiment run --fleet tiny --policy whole-gpu --trace no-such-trace.csv",
        "fake_gpus slices --profile no-such-profile --node n1",
        "fake_gpus slices --profile dgx-a100 --node n1 --mig sometimes",
        "fake_gpus slices --profile dgx-a100 --node n1 --kubernetes-version 9.9",
    ]
    return out


def _generate() -> None:
    """Huge inputs are made, not committed: a 2 MiB object and 1,000 objects in one stream."""
    d = ROOT / GENERATED
    d.mkdir(parents=True, exist_ok=True)
    big = d / "huge-object.yaml"
    if not big.exists():
        big.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: huge\ndata:\n  blob: "
                       + "x" * (2 * 2**20) + "\n")
    stream = d / "huge-stream.yaml"
    if not stream.exists():
        docs = [f"apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: c{i}\n"
                f"spec:\n  selectors:\n  - cel:\n      expression: device.driver == {i}\n"
                for i in range(1000)]
        stream.write_text("---\n".join(docs))


ENV = {**os.environ, "LABKIT_DEBUG": "", "PYTHONDONTWRITEBYTECODE": "1"}


def _first_line(stdout: str, stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("warning: ")]
    if lines and lines[0].startswith("usage: "):  # argparse: the usage, then "prog: error: ..."
        lines = lines[-1:]
    if not lines:
        lines = [ln for ln in stdout.splitlines() if ln.strip()]
    return (lines[0] if lines else "").replace(f"{ROOT}/", "").replace("\t", "\\t")


def _run_console_script(command: str) -> tuple[int, str, str, str]:
    """The command as typed: the installed `labkit` script, or `python -m fake_gpus`."""
    argv = command.split(" ")
    argv = [sys.executable, "-m", "fake_gpus", *argv[1:]] if argv[0] == "fake_gpus" else [LABKIT, *argv]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, errors="replace",
                          env=ENV, stdin=subprocess.DEVNULL, check=False)
    return proc.returncode, _first_line(proc.stdout, proc.stderr), proc.stdout, proc.stderr


def _run(server: CliServer, command: str) -> tuple[int, str, str, str]:
    """The command in a process forked by `server` (tests/cliserver.py)."""
    argv = command.split(" ")
    program, args = ("fake_gpus", argv[1:]) if argv[0] == "fake_gpus" else ("labkit", argv)
    rc, stdout, stderr = server.run(program, args)
    return rc, _first_line(stdout, stderr), stdout, stderr


@cache
def results() -> dict[str, tuple[int, str, str, str]]:
    """Every command's (exit code, first line, stdout, stderr): one CLI server per CPU, each
    running its share of the commands one after the other."""
    _generate()
    cmds = commands()
    workers = max(2, os.cpu_count() or 2)
    servers = [CliServer(ENV) for _ in range(workers)]
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            shares = pool.map(lambda i: [_run(servers[i], c) for c in cmds[i::workers]], range(workers))
            out: dict[str, tuple[int, str, str, str]] = {}
            for i, share in enumerate(shares):
                out.update(zip(cmds[i::workers], share, strict=True))
    finally:
        for server in servers:
            server.close()
    return {c: out[c] for c in cmds}


def expected() -> dict[str, tuple[int, str]]:
    out: dict[str, tuple[int, str]] = {}
    for line in EXPECTED.read_text().splitlines():
        if line and not line.startswith("#"):
            command, rc, first = line.split("\t")
            out[command] = (int(rc), first)
    return out


def test_every_command_is_in_the_expectations() -> None:
    assert sorted(expected()) == sorted(commands())


@pytest.mark.parametrize("command", commands())
def test_bad_input_gives_one_clear_line(command: str) -> None:
    rc, first, stdout, stderr = results()[command]
    assert "Traceback" not in stdout + stderr
    assert rc != 70, f"an internal error: {first}"
    if command in ACCEPTED:
        assert rc == 0
    else:
        assert rc != 0 and first, "bad input accepted silently"
    assert (rc, first) == expected()[command]


#: one command line per command and kind of failure, run through the real console scripts
SAMPLE = [
    "validate -f tests/data/nasty/alias-bomb.yaml",
    "validate -f tests/data/nasty/trailing-comma.json",
    "validate -f tests/data/nasty/no-such-file.yaml",
    f"validate --feature-gates DRAPrioritizedList=maybe -f {SLICES}",
    f"cel device.driver== -f {SLICES}",
    f"allocate --node n1 --kubernetes-version 1.2 -f {SLICES}",
    "topology --profile tiny --node no-such-node",
    "cluster --backend sim --profile no-such-profile up",
    "experiment run --fleet tiny --policy no-such-policy --trace synthetic",
    "fake_gpus slices --profile dgx-a100 --node n1 --mig sometimes",
]


@pytest.mark.parametrize("command", SAMPLE)
def test_the_console_scripts_answer_like_the_forked_runs(command: str) -> None:
    """The fast path (tests/cliserver.py) gives exactly what a user's shell gives."""
    rc, first, stdout, stderr = _run_console_script(command)
    assert "Traceback" not in stdout + stderr
    assert (rc, first, stdout) == results()[command][:3]


def test_counts_for_the_report() -> None:
    """The numbers the issue asks for: inputs tried, outcomes, tracebacks (must be 0)."""
    res = results()
    tracebacks = sum("Traceback" in out + err for _, _, out, err in res.values())
    refused = sum(rc != 0 for rc, *_ in res.values())
    print(f"\nbad inputs tried: {len(res)}; refused with one line: {refused}; "
          f"accepted as Kubernetes does: {len(res) - refused}; tracebacks: {tracebacks}")
    assert tracebacks == 0
    assert refused == len(res) - len(ACCEPTED)


if __name__ == "__main__" and sys.argv[1:] == ["--regenerate"]:
    rows = ["# command\texit code\tfirst line the user sees (python -m tests.cli.test_bad_input --regenerate)"]
    rows += [f"{c}\t{rc}\t{first}" for c, (rc, first, _o, _e) in results().items()]
    EXPECTED.write_text("\n".join(rows) + "\n")
    print(f"wrote {EXPECTED} ({len(rows) - 1} commands)")
