"""`labkit experiment new-policy NAME --from BUILTIN`: a policy file of one's own, started from a
built-in's code.

The file holds the built-in's class source (inspect.getsource), renamed to NAME, with the imports
its code needs (every module-level name it uses, imported from where it lives), so it runs as it
is: `labkit experiment inflation|run|sweep --policies FILE` gives the built-in's numbers until you
change it. The file imports LabKit's helpers rather than copying them (FGD's arithmetic stays in
labkit.experiments.inflation).
"""

from __future__ import annotations

import builtins
import inspect
import io
import re
import sys
import textwrap
import tokenize
from pathlib import Path

from labkit.experiments.policies import BUILTINS, PolicyError, builtin_class
from labkit.fileio import cannot_write, write_text

#: a policy name: what Kubernetes label values and DNS labels allow (it names claims and pods' labels)
NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?$")


def class_name(name: str) -> str:
    """my-best-fit -> MyBestFit."""
    out = "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", name) if part)
    return out if out[:1].isalpha() else f"Policy{out}"


def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise PolicyError(f"new-policy {name!r}: not a policy name",
                          fix="use lower-case letters, digits and '-', 1 to 42 characters, e.g. my-best-fit")
    if name in BUILTINS:
        raise PolicyError(f"new-policy {name!r}: a built-in has that name", fix="give your policy another name")
    return name


def policy_source(name: str, builtin: str) -> str:
    """The text of a policy file named `name` that starts from the built-in `builtin`'s code."""
    if builtin not in BUILTINS:
        raise PolicyError(f"--from {builtin!r}: not a built-in policy", fix=f"use one of {', '.join(BUILTINS)}")
    check_name(name)
    cls = builtin_class(builtin)
    module = sys.modules[cls.__module__]
    src = textwrap.dedent(inspect.getsource(cls))
    new_cls = class_name(name)
    src = re.sub(rf"^class {cls.__name__}\b", f"class {new_cls}", src, count=1, flags=re.M)
    named = re.subn(r'^(\s+)name = "[^"]*"', rf'\g<1>name = "{name}"', src, count=1, flags=re.M)
    src = named[0] if named[1] else src.replace(":\n", f':\n    name = "{name}"\n', 1)
    froms: dict[str, set[str]] = {}
    plain: set[str] = set()
    for ident in sorted(_code_names(src)):
        if ident in (cls.__name__, new_cls) or ident not in vars(module) or hasattr(builtins, ident):
            continue
        obj = vars(module)[ident]
        if inspect.ismodule(obj):
            plain.add(f"import {obj.__name__}" + (f" as {ident}" if obj.__name__ != ident else ""))
        elif (inspect.isclass(obj) or inspect.isfunction(obj)) and getattr(obj, "__module__", None) \
                and getattr(sys.modules.get(obj.__module__), ident, None) is obj:
            froms.setdefault(obj.__module__, set()).add(ident)
        else:
            froms.setdefault(module.__name__, set()).add(ident)
    imports = sorted(plain) + [f"from {m} import {', '.join(sorted(names))}" for m, names in sorted(froms.items())]
    head = (f'"""Policy {name!r}: a policy of one\'s own, started from the built-in {builtin!r}\n'
            f"(labkit experiment new-policy {name} --from {builtin}). As written it gives {builtin}'s numbers;\n"
            "change score() (one integer per candidate node, higher wins; None = kube-scheduler's default) and\n"
            "gpus() (the GPU indices on the chosen node; None = the default) - or, for a `run` policy, the DRA\n"
            "objects it writes. The protocol: the module text of labkit.experiments.policies.\n\n"
            f"    labkit experiment inflation --policies THIS_FILE.py,{builtin} --fleet openb:40 --no-sim\n"
            '"""\n\n')
    return head + "from __future__ import annotations\n\n" + "\n".join(imports) + "\n\n\n" + src


def write_policy(name: str, builtin: str, path: str | Path, *, force: bool = False) -> Path:
    """Write the file (atomically); an existing file is refused unless `force`."""
    text = policy_source(name, builtin)
    out = Path(path)
    if out.suffix != ".py":
        raise PolicyError(f"-o {str(path)!r}: a policy file ends in .py", fix=f"e.g. -o {name.replace('-', '_')}.py")
    if out.exists() and not force:
        raise PolicyError(f"-o {str(path)!r}: the file exists", fix="give another file, or --force to overwrite it")
    try:
        return write_text(out, text)
    except OSError as exc:
        raise PolicyError(cannot_write(f"-o {path}", exc)) from None


def _code_names(src: str) -> set[str]:
    """The names the code reads (NAME tokens, not in strings or comments, not after a dot)."""
    out: set[str] = set()
    prev = ""
    for t in tokenize.generate_tokens(io.StringIO(src).readline):
        if t.type == tokenize.NAME and prev != ".":
            out.add(t.string)
        if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            prev = t.string
    return out
