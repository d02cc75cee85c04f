"""The type checker's config holds (issue 44 item 4): `mypy`, as `make lint` runs it, passes on labkit
and fake_gpus, and labkit.api, labkit.cel, labkit.model and labkit.allocator are checked strictly - every flag of
`mypy --strict` that can be set per module is on for each of their modules, none of their error codes
is turned off, and it bites there and only there.

mypy reads pyproject.toml's [tool.mypy]; a per-module `strict = true` would turn strict mode on for
every module (mypy applies it globally), so the config spells the flags out and this test compares
them with the ones `--strict` sets.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="mypy is a dev dependency: pip install -e '.[dev]'")

from mypy.main import process_options  # noqa: E402
from mypy.options import PER_MODULE_OPTIONS, Options  # noqa: E402

from tests.paths import REPO

ROOT = REPO
CONFIG = ROOT / "pyproject.toml"
#: the packages that must stay strict
STRICT = ("labkit.api", "labkit.cel", "labkit.model", "labkit.allocator")


def _options(*args: str) -> Options:
    """mypy's options as its command line sets them (one file named: the config's `files` are not read)."""
    _, options = process_options([*args, str(ROOT / "labkit/model/kinds.py")])
    return options


def _modules(package: str) -> list[str]:
    """Every module of ``package`` (its files, so a new one is covered too)."""
    base = ROOT / package.replace(".", "/")
    out = []
    for f in sorted(base.rglob("*.py")):
        parts = f.relative_to(ROOT).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def _strict_flags(tmp_path: Path) -> dict[str, object]:
    """The per-module options `mypy --strict` changes from mypy's defaults, with --strict's values."""
    empty = tmp_path / "empty.ini"
    empty.write_text("[mypy]\n")
    default, strict = _options("--config-file", str(empty)), _options("--strict", "--config-file", str(empty))
    flags = {name: getattr(strict, name) for name in sorted(PER_MODULE_OPTIONS)
             if getattr(strict, name) != getattr(default, name)}
    assert "disallow_untyped_defs" in flags and "disallow_any_generics" in flags, flags
    return flags


@pytest.mark.parametrize("package", STRICT)
def test_the_lower_layers_are_strict(package: str, tmp_path: Path) -> None:
    flags = _strict_flags(tmp_path)
    options = _options("--config-file", str(CONFIG))
    modules = _modules(package)
    assert package in modules and len(modules) > 3
    for module in modules:
        per_module = options.clone_for_module(module)
        missing = {name: value for name, value in flags.items() if getattr(per_module, name) != value}
        assert not missing, f"{module}: pyproject.toml [tool.mypy] leaves out --strict's {missing}"
        assert not per_module.ignore_errors, f"{module}: ignore_errors"
        assert not per_module.disabled_error_codes, f"{module}: disable_error_code {per_module.disabled_error_codes}"


def _mypy(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=cwd, capture_output=True, text=True,
                          check=False)


def test_strict_bites_in_its_layers_only(tmp_path: Path) -> None:
    """The same unannotated function is an error in labkit.model and passes in labkit.sim (lenient)."""
    for pkg in ("labkit", "labkit/model", "labkit/sim"):
        (tmp_path / pkg).mkdir(exist_ok=True)
        (tmp_path / pkg / "__init__.py").write_text("")
    probe = "def double(x):\n    return x * 2\n"
    (tmp_path / "labkit/model/probe.py").write_text(probe)
    (tmp_path / "labkit/sim/probe.py").write_text(probe)
    result = _mypy("--config-file", str(CONFIG), "--cache-dir", str(tmp_path / "cache"),
                   "labkit/model/probe.py", "labkit/sim/probe.py", cwd=tmp_path)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert errors == ["labkit/model/probe.py:1: error: Function is missing a type annotation  [no-untyped-def]"], out


@pytest.mark.slow  # the whole tree: ~30 CPU-seconds with a cold cache (`make lint` runs the same)
def test_mypy_passes_as_make_lint_runs_it() -> None:
    result = _mypy()
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert "Success: no issues found" in result.stdout
