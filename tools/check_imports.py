"""`make lint`'s import rules that import-linter cannot see (run after lint-imports).

1. No ``importlib`` loading of our own modules, except the places listed in DYNAMIC_ALLOWED,
   each with the reason in one line.
2. A function-local import of our own modules says why it is not at module level, on the line
   above it, in one fixed form (a run of imports right below shares it)::

       # lazy: start-up (the kind backend is not needed by labkit --help)
       # lazy: optional dependency (cel-expr-python; a pure-Python install lacks it)

   Those are the only two reasons (an import cycle is fixed, not annotated). One without the
   comment, or with another reason, fails, named file:line.
3. Their number may only go down: it may not grow beyond LOCAL_IMPORTS_BUDGET (a ratchet; lower
   it as they are hoisted).
4. No module imports another module's private name (``from labkit.topology.draw import _rows``):
   what two modules share is public, in one home (a private *module*, ``from labkit.cel import
   _proto``, is a package's own business and allowed).

    .venv/bin/python tools/check_imports.py        # one line per violation (exit 1), then the count
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from count_imports import (  # noqa: E402
    REASON_KINDS,
    ROOT,
    importlib_loads,
    local_import_reasons,
    python_files,
)

#: (file, loaded name as written) -> why importlib is needed there
DYNAMIC_ALLOWED = {
    ("labkit/cluster/backends/__init__.py", "MODULES[name]"):
        "start-up time: the local and kind backends load only when asked for (kwok-style registry)",
    ("labkit/cli.py", "module"):
        "start-up time: a command's module (and what it needs: the sim, the allocator, networkx) loads only "
        "when that command runs or is completed (labkit.cli.COMMANDS, `module:function`)",
    ("fake_gpus/cli.py", "mod_name"):
        "optional part: the plugin subcommand needs grpc, the other subcommands do not",
    ("labkit/experiments/policies.py", "module"):
        "the paper's six live in labkit.experiments.inflation, which imports policies.py: loaded by name when asked for",
    ("labkit/experiments/policies.py", "mod_name"):
        "a user's policy given as module:Class (--policies): the module is the user's, named at run time",
}

#: (file, module.name) -> why it still imports another module's private name (rule 4); only shrinks
PRIVATE_ALLOWED = {
    ("labkit/experiments/crosscheck.py", "labkit.experiments.inflation._arrivals"):
        "older than rule 4: to be made public in labkit.experiments.inflation",
}

#: function-local imports of labkit/fake_gpus modules allowed: 98 when the rule came in on the
#: architecture branch; 144 after the same session merged the kind, attach and upstream work; 130 after
#: the CEL engines were untangled (issue 15.2); 125 with one home per concept (15.3); 42 once every
#: import without a reason was hoisted (15.1); 35 after the sim split and the sweep merged; 30 with no
#: cycle and nothing left "to hoist" (only start-up and optional dependencies remain); 22 once the
#: CLI asked the backend registry instead of importing local/kind itself (issue 29); 20 once the CLI imported
#: a command's module only when that command runs (labkit.cli.COMMANDS). A ratchet:
#: lower it as they are moved to module level
#: (issue 15), never raise it.
LOCAL_IMPORTS_BUDGET = 20


def private_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, ``module.name``) of each ``from <our module> import _name`` where ``_name`` is not a module."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] in ("labkit", "fake_gpus"):
            base = ROOT.joinpath(*node.module.split("."))
            for alias in node.names:
                name = alias.name
                if not name.startswith("_") or name.startswith("__"):
                    continue
                if (base / f"{name}.py").exists() or (base / name / "__init__.py").exists():
                    continue  # a private module of the package
                out.append((node.lineno, f"{node.module}.{name}"))
    return out


def main() -> int:
    problems: list[str] = []
    kinds: list[str] = []
    missing = 0
    for path in python_files():
        rel = path.relative_to(ROOT).as_posix()
        source = path.read_text()
        tree = ast.parse(source)
        for line, mod, kind in local_import_reasons(source, tree):
            if kind is None:
                missing += 1
                problems.append(f"{rel}:{line}: function-local import of {mod} without a reason: import it at "
                                "module level, or say why on the line above, e.g. "
                                "'# lazy: start-up (<what it would load>)'")
            else:
                kinds.append(kind)
        for line, name in private_imports(tree):
            if (rel, name) in PRIVATE_ALLOWED:
                continue
            problems.append(f"{rel}:{line}: imports the private name {name} from another module: make it public "
                            "(no leading underscore) in the one module that owns it")
        for line, name in importlib_loads(tree):
            if (rel, name) not in DYNAMIC_ALLOWED:
                problems.append(f"{rel}:{line}: importlib loads {name}; import it (or add it to "
                                "DYNAMIC_ALLOWED in tools/check_imports.py with the reason)")
    local = len(kinds) + missing
    if local > LOCAL_IMPORTS_BUDGET:
        problems.append(f"{local} function-local imports of our own modules, budget "
                        f"{LOCAL_IMPORTS_BUDGET}: import at module level (tools/count_imports.py --list "
                        "shows them)")
    for p in problems:
        print(p)
    print(f"{local} function-local imports of our own modules (budget {LOCAL_IMPORTS_BUDGET}): "
          + ", ".join([f"{kinds.count(k)} {k}" for k in REASON_KINDS if k in kinds]
                      + ([f"{missing} without a reason"] if missing else [])))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
