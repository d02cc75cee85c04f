"""The fake_gpus driver image, built as a plain directory.

Without a container engine we cannot run `docker build`, but we can still prove what the image
would contain: this module reads the Dockerfile and carries out the instructions that shape the
file tree (WORKDIR, COPY, ENV, `RUN pip install`) into a directory, recording the rest
(FROM, CMD, ENTRYPOINT, other RUN lines). Tests then run the driver from that tree.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from labkit.cluster.runstate import cache_dir

REPO_ROOT = Path(__file__).resolve().parents[4]
DOCKERFILE = REPO_ROOT / "fake_gpus" / "deploy" / "Dockerfile"
DEFAULT_IMAGE = "labkit/fake-gpus:dev"


@dataclass
class ImageTree:
    root: Path
    base: str = ""
    workdir: str = "/"
    env: dict[str, str] = field(default_factory=dict)
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    pip_installs: list[list[str]] = field(default_factory=list)
    skipped_runs: list[str] = field(default_factory=list)

    def path(self, inside: str) -> Path:
        return self.root / inside.lstrip("/")

    def site_packages(self) -> Path:
        """Where `pip install` inside the image puts packages (the tree's own site-packages)."""
        return self.path("/usr/local/lib/python3/site-packages")

    def run_env(self) -> dict[str, str]:
        """Environment to run the image's entrypoint from the tree with this machine's Python."""
        paths = [str(self.path(p)) for p in self.env.get("PYTHONPATH", "").split(":") if p]
        paths.append(str(self.site_packages()))
        return {**os.environ, **self.env, "PYTHONPATH": os.pathsep.join(paths)}

    def files(self) -> list[str]:
        return sorted("/" + str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file())


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append((current + stripped).strip())
        current = ""
    if current.strip():
        lines.append(current.strip())
    return lines


def _expand(word: str, args: dict[str, str]) -> str:
    """``${NAME}`` / ``$NAME`` of a FROM line, replaced by the build args' defaults."""
    for name, value in args.items():
        word = word.replace("${" + name + "}", value).replace("$" + name, value)
    return word


def _json_or_shell(arg: str) -> list[str]:
    arg = arg.strip()
    if arg.startswith("["):
        return [str(x) for x in json.loads(arg)]
    return ["/bin/sh", "-c", arg]


def build_image_tree(
    dest: Path,
    *,
    dockerfile: Path = DOCKERFILE,
    context: Path = REPO_ROOT,
    run_pip: bool = True,
    pip_no_deps: bool = False,
) -> ImageTree:
    """Carry out the Dockerfile's file-tree instructions into ``dest``."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    tree = ImageTree(root=dest)
    build_args: dict[str, str] = {}
    for line in _logical_lines(Path(dockerfile).read_text()):
        instr, _, arg = line.partition(" ")
        instr = instr.upper()
        if instr == "ARG" and not tree.base:  # an ARG before FROM: its default names the base
            name, _, default = arg.strip().partition("=")
            build_args[name] = default
        elif instr == "FROM":
            tree.base = _expand(arg.split()[0], build_args)
        elif instr == "WORKDIR":
            tree.workdir = arg if arg.startswith("/") else os.path.join(tree.workdir, arg)
            tree.path(tree.workdir).mkdir(parents=True, exist_ok=True)
        elif instr == "ENV":
            words = shlex.split(arg)
            if words and "=" not in words[0]:  # legacy form: ENV KEY value with spaces
                tree.env[words[0]] = " ".join(words[1:])
            else:
                tree.env.update(w.split("=", 1) for w in words if "=" in w)
        elif instr in ("COPY", "ADD"):
            parts = [p for p in shlex.split(arg) if not p.startswith("--")]
            *sources, target = parts
            target_abs = target if target.startswith("/") else os.path.join(tree.workdir, target)
            for src in sources:
                matches = sorted(glob.glob(str(context / src))) or [str(context / src)]
                for match in matches:
                    _copy_into(Path(match), tree.path(target_abs), many=len(sources) > 1 or target.endswith("/"))
        elif instr == "RUN":
            words = shlex.split(arg)
            if run_pip and "pip" in " ".join(words[:4]) and "install" in words:
                _pip_install_into(tree, words, pip_no_deps)
            else:
                tree.skipped_runs.append(arg)
        elif instr == "ENTRYPOINT":
            tree.entrypoint = _json_or_shell(arg)
        elif instr == "CMD":
            tree.cmd = _json_or_shell(arg)
    return tree


def _copy_into(src: Path, target: Path, many: bool) -> None:
    if src.is_dir():
        shutil.copytree(src, target, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"))
    else:
        dest = target / src.name if many or target.is_dir() else target
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)


def _pip_install_into(tree: ImageTree, words: list[str], no_deps: bool) -> None:
    """`pip install X` inside the image becomes `pip install --target <tree>/site-packages X`.

    What pip installed is kept under the kit's cache, keyed by the command and the content of its
    requirement files (and this Python): the same instruction again is a copy (hard links), not a
    ~15 CPU-second resolve, download and unpack."""
    args = words[words.index("install") + 1:]
    site = tree.site_packages()
    site.mkdir(parents=True, exist_ok=True)
    opts = ["install", "-q", "--no-compile"] + (["--no-deps"] if no_deps else [])
    resolved: list[str] = []
    files: list[Path] = []
    for i, a in enumerate(args):
        prev = args[i - 1] if i else ""
        if a.startswith("-"):
            if a in ("-r", "--requirement", "-e", "--editable"):
                resolved.append(a)
            continue
        is_path = prev in ("-r", "--requirement") or a.startswith((".", "/"))
        if is_path:
            files.append(tree.path(a if a.startswith("/") else os.path.join(tree.workdir, a)))
        resolved.append(str(files[-1]) if is_path else a)
    key = hashlib.sha256(json.dumps([sys.version, opts, args, [f.read_bytes().hex() if f.is_file() else None
                                                              for f in files]]).encode()).hexdigest()[:24]
    cached = cache_dir() / "image-tree-pip" / key
    if not cached.is_dir():
        partial = cached.with_name(f"{key}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        cmd = [sys.executable, "-m", "pip", *opts, "--target", str(partial), *resolved]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            raise RuntimeError(f"image tree: `pip install {' '.join(args)}` failed: {result.stderr.strip()[-500:]}")
        try:
            partial.rename(cached)
        except OSError:  # another run cached it first
            shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(cached, site, dirs_exist_ok=True, copy_function=_link_or_copy)
    tree.pip_installs.append(args)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system
        shutil.copy2(src, dst)
