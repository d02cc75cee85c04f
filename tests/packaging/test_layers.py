"""`make lint` keeps the layers one-way: it passes on the tree and fails on an upward import.

The lint commands run exactly as the Makefile runs them, on a copy of the packages with one
import added, so the test shows the rule bites (not just that today's tree is clean).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

pytestmark = pytest.mark.slow  # heavy: `make check` leaves it out, `make test` runs it

ROOT = REPO
BIN = Path(sys.executable).parent


def _copy(tmp_path: Path) -> Path:
    for pkg in ("labkit", "fake_gpus"):
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.csv"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    shutil.copytree(ROOT / "tools", tmp_path / "tools", ignore=shutil.ignore_patterns("__pycache__", "oracle*"))
    return tmp_path


def _lint_imports(where: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(where)}
    return subprocess.run([str(BIN / "lint-imports"), "--no-cache"], cwd=where, env=env,
                          capture_output=True, text=True, check=False)


def _add_line(path: Path, line: str) -> None:
    text = path.read_text()
    marker = "from __future__ import annotations\n"
    assert marker in text
    path.write_text(text.replace(marker, marker + line + "\n", 1))


def test_the_tree_keeps_every_contract() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout[-2000:]
    assert "Contracts: 8 kept, 0 broken." in result.stdout


#: (module, the upward import added to it, what import-linter says): every contract's rule, one each
UPWARD = [
    ("labkit/api/quantity.py", "from labkit.cluster import base as _up  # noqa: F401",
     "labkit.api is not allowed to import labkit.cluster"),
    ("labkit/cel/typenames.py", "import labkit.sim.names  # noqa: F401",
     "labkit.cel is not allowed to import labkit.sim"),
    ("fake_gpus/slices.py", "import labkit.errors  # noqa: F401",
     "fake_gpus imports nothing from labkit BROKEN"),
    # the cluster model sits below the simulator
    ("labkit/model/kinds.py", "import labkit.sim.names  # noqa: F401",
     "labkit.model is not allowed to import labkit.sim"),
    # the backends are siblings over labkit.cluster's shared base (issue 29), even through a lazy import
    ("labkit/cluster/backends/kind/config.py", "def _late():\n    from labkit.cluster.backends.local import binaries  # noqa: F401",
     "labkit.cluster.backends.kind is not allowed to import labkit.cluster.backends.local"),
    ("labkit/cluster/backends/local/nodes.py", "import labkit.cluster.backends.sim  # noqa: F401",
     "labkit.cluster.backends.local is not allowed to import labkit.cluster.backends.sim"),
    ("labkit/cluster/backends/kubeapi.py", "import labkit.cluster.backends.kind  # noqa: F401",
     "labkit.cluster.backends.kubeapi is not allowed to import labkit.cluster.backends.kind"),
    ("labkit/cluster/cli.py", "import labkit.cluster.backends.local  # noqa: F401",
     "labkit.cluster.cli is not allowed to import labkit.cluster.backends.local"),
    # the CEL circle of issue 15.2: engines and the cost estimator stay apart, the facade composes
    ("labkit/cel/engine_celpy.py", "def _check():\n    from labkit.cel.facade import compile_selector  # noqa: F401",
     "labkit.cel.engine_celpy is not allowed to import labkit.cel.facade"),
    ("labkit/cel/engine_cpp.py", "import labkit.cel.engine_celpy  # noqa: F401",
     "labkit.cel.engine_cpp is not allowed to import labkit.cel.engine_celpy"),
    ("labkit/cel/cost/estimator.py", "import labkit.cel.engine_cpp  # noqa: F401",
     "labkit.cel.cost is not allowed to import labkit.cel.engine_cpp"),
]


def _imported(module_line: str) -> str:
    """The module an added line imports, as import-linter names it (``from a import b``: ``a.b`` when b is a module)."""
    m = re.search(r"from (\S+) import (\w+)|import (\S+)", module_line)
    assert m
    if m.group(3):
        return m.group(3)
    base, name = m.group(1), m.group(2)
    return f"{base}.{name}" if (ROOT.joinpath(*base.split("."), f"{name}.py")).is_file() else base


@pytest.fixture(scope="module")
def upward_lint(tmp_path_factory: pytest.TempPathFactory) -> str:
    """`lint-imports` once, on one copy of the packages with every line of UPWARD added (each to its own
    module): import-linter reports every broken contract and, under each 'X is not allowed to import Y',
    every import that breaks it, so each case below finds its own import under its own rule (one
    lint run and one copy instead of eleven). Returns the output, its wrapping undone."""
    tree = _copy(tmp_path_factory.mktemp("upward"))
    assert len({module for module, _, _ in UPWARD}) == len(UPWARD)  # one added line per module
    for module, line, _ in UPWARD:
        _add_line(tree / module, line)
    result = _lint_imports(tree)
    assert result.returncode == 1, result.stdout[-2000:]
    return " ".join(result.stdout.split())  # import-linter wraps long module names


@pytest.mark.parametrize(("module", "line", "message"), UPWARD)
def test_an_upward_import_fails_lint(upward_lint: str, module: str, line: str, message: str) -> None:
    assert message in upward_lint
    # this module's added import is listed as breaking a rule: under the nearest 'X is not allowed to import
    # Y:' above it (chain lines hold no colon), the one of `message` where that is such a line
    importer = module.removesuffix(".py").replace("/", ".")
    heading = re.escape(message) if " is not allowed to import " in message else r"\S+ is not allowed to import \S+"
    edge = re.escape(f"{importer} -> {_imported(line)} (l.")
    assert re.search(rf"{heading}: [^:]*- {edge}", upward_lint), upward_lint[-3000:]


def test_importlib_loading_of_our_modules_fails_lint(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    _add_line(tree / "labkit/sim/clock.py", 'import importlib\n_x = importlib.import_module("labkit.cluster")')
    result = subprocess.run([sys.executable, "tools/check_imports.py"], cwd=tree, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 1
    assert result.stdout.startswith("labkit/sim/clock.py:")
    assert "importlib loads labkit.cluster; import it" in result.stdout


def test_user_mistakes_through_the_python_api_raise_labkit_errors():
    """Mistakes a notebook user can make through the Python API raise the kit's error kinds (one
    root, a message that says the fix), still catchable as the built-in they replace."""
    from fake_gpus.catalog import load_node_profile
    from fake_gpus.errors import FakeGpusError
    from labkit.api import dump
    from labkit.errors import InputError, NotFoundError
    from labkit.sim.clock import Clock
    from labkit.widgets.logic import class_expressions

    with pytest.raises(InputError, match="fix: pass 0 or more") as e1:
        Clock().advance(-5)
    assert isinstance(e1.value, ValueError)
    with pytest.raises(InputError, match="fix: use 'yaml' or 'json'"):
        dump({"kind": "Pod"}, "toml")
    with pytest.raises(NotFoundError, match="fix: use one of gpu.nvidia.com") as e2:
        class_expressions([{"metadata": {"name": "gpu.nvidia.com"}, "spec": {}}], "gpu.example.com")
    assert isinstance(e2.value, KeyError) and not str(e2.value).startswith("'")
    a100 = load_node_profile("dgx-a100").gpus[0].model
    with pytest.raises(FakeGpusError, match="unknown MIG profile '9g.1gb'; fix: use one of 1g.10gb"):
        a100.mig_profile("9g.1gb")


def _check_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "tools/check_imports.py"], cwd=tree, capture_output=True,
                          text=True, check=False)


def _line_of(path: Path, text: str) -> int:
    return path.read_text().splitlines().index(text) + 1


@pytest.fixture(scope="module")
def root_check() -> subprocess.CompletedProcess[str]:
    """tools/check_imports.py on the tree as it is, once for the two tests that read it."""
    return _check_imports(ROOT)


def test_the_tree_gives_every_local_import_a_reason(root_check: subprocess.CompletedProcess[str]) -> None:
    result = root_check
    assert result.returncode == 0, result.stdout
    assert "function-local imports of our own modules (budget " in result.stdout
    assert " start-up" in result.stdout


def test_a_local_import_without_a_reason_fails_lint(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    clock = tree / "labkit/sim/clock.py"
    _add_line(clock, "def _late():\n    from labkit.sim import names\n    return names\n")
    line = _line_of(clock, "    from labkit.sim import names")
    result = _check_imports(tree)
    assert result.returncode == 1
    assert result.stdout.startswith(f"labkit/sim/clock.py:{line}: function-local import of labkit.sim "
                                    "without a reason")
    assert "1 without a reason" in result.stdout.splitlines()[-1]


MISFORMED = [
    "# lazy: because",                      # no kind
    "# lazy: speed (it is faster)",         # not one of the kinds
    "# start-up (the sim is large)",        # not the fixed form
]


@pytest.fixture(scope="module")
def misformed(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict[str, int]]:
    """tools/check_imports.py once on one copy where each comment of MISFORMED stands above a local import of
    its own: (the result, the line of each comment's import). Each import is judged by the comment above it
    alone, so each case below finds its own line."""
    tree = _copy(tmp_path_factory.mktemp("misformed"))
    clock = tree / "labkit/sim/clock.py"
    _add_line(clock, "".join(f"def _late{i}():\n    {comment}\n    from labkit.sim import names as names{i}\n"
                             f"    return names{i}\n\n" for i, comment in enumerate(MISFORMED)))
    lines = {comment: _line_of(clock, f"    from labkit.sim import names as names{i}")
             for i, comment in enumerate(MISFORMED)}
    return _check_imports(tree), lines


@pytest.mark.parametrize("comment", MISFORMED)
def test_a_reason_not_in_the_fixed_form_fails_lint(
        misformed: tuple[subprocess.CompletedProcess[str], dict[str, int]], comment: str) -> None:
    result, lines = misformed
    assert result.returncode == 1
    assert f"labkit/sim/clock.py:{lines[comment]}: " in result.stdout


def test_a_reason_covers_the_run_of_imports_below_it_and_the_budget_still_bites(
        tmp_path: Path, root_check: subprocess.CompletedProcess[str]) -> None:
    """One reason covers the imports under it up to a blank line; and imports with reasons still
    count: as many as it takes to pass the budget (whatever today's count is) fail the check."""
    before = root_check.stdout.splitlines()[-1]
    count, started = int(before.split()[0]), int(re.search(r"(\d+) start-up", before).group(1))
    budget = int(re.search(r"\(budget (\d+)\)", before).group(1))
    extra = max(budget - count + 1, 2)  # with reasons, all but the last (below the blank line)
    tree = _copy(tmp_path)
    clock = tree / "labkit/sim/clock.py"
    covered = "".join(f"    from labkit.sim import names as n{i}\n" for i in range(extra))
    _add_line(clock, f"def _late():\n    # lazy: start-up (a test)\n{covered}\n    from labkit.sim import store\n"
                     "    return store\n")
    result = _check_imports(tree)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    # the blank line ends the run: only the last import lacks its reason
    assert [ln.split(":")[1] for ln in lines if ln.startswith("labkit/")] == \
        [str(_line_of(clock, "    from labkit.sim import store"))]
    assert any("function-local imports of our own modules, budget" in ln for ln in lines)
    assert lines[-1].startswith(f"{count + extra + 1} function-local imports")
    assert f"{started + extra} start-up" in lines[-1] and "1 without a reason" in lines[-1]
