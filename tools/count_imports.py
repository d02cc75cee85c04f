"""Count the project's modules, its largest files and its function-local imports of its own modules.

    .venv/bin/python tools/count_imports.py [--list]

A function-local import is an ``import``/``from ... import`` of ``labkit`` or ``fake_gpus`` inside a
function body (module-level ``if TYPE_CHECKING``/``try`` blocks do not count). ``importlib``
loads of our own modules (``import_module("labkit...")`` or a name held in a variable) are
listed separately. Each local import carries its reason on the line above (``# lazy: <kind> (why)``,
see tools/check_imports.py); ``--list`` shows it. Exit code 0 always: this reports, ``make lint``
enforces.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("labkit", "fake_gpus")
GENERATED = ("fake_gpus/plugin/gen",)

#: why a function-local import of our own modules may be local, as the comment line above it says
#: (issue 15: only start-up time or an optional dependency; a cycle is fixed, not annotated)
REASON_KINDS = ("start-up", "optional dependency")
REASON = re.compile(r"^\s*# lazy: (" + "|".join(map(re.escape, REASON_KINDS)) + r") \(.+\)\s*$")


def _ours(name: str | None) -> bool:
    return bool(name) and name.split(".")[0] in PACKAGES


def python_files() -> list[Path]:
    files = []
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if not rel.startswith(GENERATED):
                files.append(p)
    return files


def local_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of imports of our packages inside function bodies."""
    return [(node.lineno, mod) for node, mod in local_import_nodes(tree)]


def local_import_nodes(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, str]]:
    """(statement, module) of imports of our packages inside function bodies."""
    found: list[tuple[ast.Import | ast.ImportFrom, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if in_function and isinstance(child, ast.Import):
                found.extend((child, a.name) for a in child.names if _ours(a.name))
            elif in_function and isinstance(child, ast.ImportFrom) and child.level == 0 and _ours(child.module):
                found.append((child, str(child.module)))
            elif in_function and isinstance(child, ast.ImportFrom) and child.level > 0:
                found.append((child, "." * child.level + (child.module or "")))
            visit(child, inner)

    visit(tree, False)
    return found


def local_import_reasons(source: str, tree: ast.AST | None = None) -> list[tuple[int, str, str | None]]:
    """(line, module, reason kind or None) of each function-local import of our packages.

    The reason is a ``# lazy: <kind> (<why>)`` comment on the line just above the import; a run
    of imports right below one reason (each starting where the one above ended) shares it.
    """
    lines = source.splitlines()
    nodes = local_import_nodes(tree if tree is not None else ast.parse(source))
    covered: dict[int, str] = {}  # last line of an import statement -> the reason kind over it
    out: list[tuple[int, str, str | None]] = []
    for node, mod in sorted(nodes, key=lambda nm: nm[0].lineno):
        above = node.lineno - 1
        m = REASON.match(lines[above - 1]) if above >= 1 else None
        kind = m.group(1) if m else covered.get(above)
        if kind is not None:
            covered[node.end_lineno or node.lineno] = kind
        out.append((node.lineno, mod, kind))
    return out


def importlib_loads(tree: ast.AST) -> list[tuple[int, str]]:
    """``importlib.import_module(x)`` calls whose argument is ours or not a literal."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "import_module" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                if _ours(arg.value):
                    out.append((node.lineno, arg.value))
            else:
                out.append((node.lineno, ast.unparse(arg)))
    return out


def main(argv: list[str]) -> int:
    files = python_files()
    sizes = sorted(((len(p.read_text().splitlines()), p.relative_to(ROOT).as_posix()) for p in files),
                   reverse=True)
    local: list[tuple[str, int, str, str | None]] = []
    dynamic: list[tuple[str, int, str]] = []
    for p in files:
        source = p.read_text()
        tree = ast.parse(source)
        rel = p.relative_to(ROOT).as_posix()
        local += [(rel, line, mod, kind) for line, mod, kind in local_import_reasons(source, tree)]
        dynamic += [(rel, line, mod) for line, mod in importlib_loads(tree)]
    print(f"modules: {len(files)} ({sum(1 for p in files if p.parts[len(ROOT.parts)] == 'labkit')} labkit, "
          f"{sum(1 for p in files if p.parts[len(ROOT.parts)] == 'fake_gpus')} fake_gpus)")
    print(f"lines: {sum(n for n, _ in sizes)}")
    print("largest files: " + ", ".join(f"{name} {n}" for n, name in sizes[:6]))
    kinds = {k: sum(1 for *_, kind in local if kind == k) for k in REASON_KINDS}
    kinds["no reason"] = sum(1 for *_, kind in local if kind is None)
    print(f"function-local imports of our own modules: {len(local)} ("
          + ", ".join(f"{n} {k}" for k, n in kinds.items() if n) + ")")
    print(f"importlib loads of our own modules (or of a computed name): {len(dynamic)}")
    if "--list" in argv:
        for rel, line, mod, kind in local:
            print(f"  local    {rel}:{line}: {mod} [{kind or 'NO REASON'}]")
        for rel, line, mod in dynamic:
            print(f"  dynamic  {rel}:{line}: {mod}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
