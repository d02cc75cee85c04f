"""`labkit <command>` loads what that command needs, not the whole kit: `labkit validate` neither
the sim, the allocator nor networkx; `labkit --help` none of the commands (labkit.cli.COMMANDS
imports a command's module only when it runs). Each command runs as typed, through the installed
console script, with Python's own import log (PYTHONPROFILEIMPORTTIME) saying what it loaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

ROOT = REPO
LABKIT = str(Path(sys.executable).parent / "labkit")
PENDING = "examples/debugging/pending.yaml"
SLICES = "tests/data/api/slices.yaml"
ALLOC_CASE = "tests/data/allocator/consumable-capacity/input.yaml"

#: what no command but those that draw or run experiments needs (tqdm: only a progress bar on a
#: terminal; argcomplete: only `labkit completion` and a shell's completion)
ELSEWHERE = {"networkx", "matplotlib", "numpy", "tqdm", "argcomplete", "labkit.topology", "labkit.experiments"}

#: (command line, a module it must load (it did its work), the packages it must not load)
CASES = [
    (["--help"], "argparse", ELSEWHERE | {"yaml", "labkit.api", "labkit.cel", "labkit.allocator", "labkit.model",
                                          "labkit.sim", "labkit.cluster"}),
    (["validate", "-f", PENDING], "labkit.api.validate",
     ELSEWHERE | {"labkit.allocator", "labkit.model", "labkit.sim", "labkit.cluster"}),
    (["cel", 'device.driver == "gpu.nvidia.com"', "-f", SLICES], "labkit.cel.slices",
     ELSEWHERE | {"labkit.allocator", "labkit.model", "labkit.sim", "labkit.cluster"}),
    (["allocate", "-f", ALLOC_CASE, "--node", "node-1"], "labkit.allocator.allocator",
     ELSEWHERE | {"labkit.sim", "labkit.cluster"}),
    (["simulate", "-f", PENDING, "--profile", "workshop"], "labkit.sim.scheduler", ELSEWHERE | {"kubernetes"}),
]


def loaded_modules(argv: list[str]) -> set[str]:
    """The modules `labkit ARGV` imported (its stdout a pipe), read from Python's import log."""
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    p = subprocess.run([LABKIT, *argv], cwd=ROOT, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, (argv, p.returncode, p.stderr[-2000:])
    return {line.rsplit("|", 1)[1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize(("argv", "needed", "not_needed"), CASES, ids=[" ".join(c[0][:1]) for c in CASES])
def test_a_command_loads_only_what_it_needs(argv: list[str], needed: str, not_needed: set[str]) -> None:
    modules = loaded_modules(argv)
    assert needed in modules
    loaded = sorted(m for m in modules if m in not_needed or m.split(".")[0] in not_needed
                    or ".".join(m.split(".")[:2]) in not_needed)
    assert not loaded, f"labkit {' '.join(argv)} loaded {loaded}"
