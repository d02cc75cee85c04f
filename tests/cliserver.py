"""Run many CLI command lines quickly: each in its own forked process, from a server that imported the CLI once.

A command run this way is a fresh process with the argv a user types, its own stdout and stderr,
stdin at /dev/null and its exit code; only the ~0.5 s of importing Python modules is shared. The
server is a separate single-threaded process (forking pytest itself, which has threads, is unsafe).
`tests/cli/test_bad_input.py` checks a sample against the real console scripts, so the two cannot drift.

It also runs `python -c CODE ARGS` (program "python") for code that loads a script which is not a package
with ``runpy.run_path`` (notebooks/site.py, whose imports cost ~2.4 CPU-s a process): a server started with
``scripts=[path]`` loads each once, and run_path of that path in a forked child returns what it loaded.

    server = CliServer(); server.run("labkit", ["validate", "-f", "x.yaml"]); server.close()
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import json
import os
import runpy
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import labkit.cli  # imported once by the server, shared by every forked command
from fake_gpus.cli import main as fake_main
from labkit.__main__ import entry
from tests.paths import REPO

ROOT = REPO


#: the scripts the server loaded (``scripts=``): resolved path -> the globals runpy.run_path gave
_LOADED: dict[str, dict[str, Any]] = {}
_run_path = runpy.run_path


def _loaded_run_path(path_name: str, init_globals: dict[str, Any] | None = None,
                     run_name: str | None = None) -> dict[str, Any]:
    """runpy.run_path, but a script the server loaded is not run again: a copy of its globals, as run_path returns."""
    key = str(Path(path_name).resolve())
    if key in _LOADED and init_globals is None and run_name is None:
        return dict(_LOADED[key])
    return _run_path(path_name, init_globals, run_name)


def _python_c(args: list[str]) -> None:
    """`python -c CODE ARGS`: CODE run as __main__ with sys.argv ["-c", *ARGS]."""
    assert args[:1] == ["-c"], args
    sys.argv = ["-c", *args[2:]]
    exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": builtins})


def _child(program: str, args: list[str], out_path: str, err_path: str) -> None:
    """In the forked child: become `labkit ARGS`, `python -m fake_gpus ARGS` or `python -c ...`, then exit."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(os.open(out_path, os.O_WRONLY | os.O_NOCTTY), 1)
    os.dup2(os.open(err_path, os.O_WRONLY | os.O_NOCTTY), 2)
    if os.isatty(1):  # what the interpreter does at start-up: a terminal's stdout is line-buffered
        sys.stdout.reconfigure(line_buffering=True)
    sys.argv = [program, *args]
    code: Any = 0
    try:
        if program == "python":
            _python_c(args)
        else:
            code = fake_main() if program == "fake_gpus" else entry()
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # what the interpreter does with an uncaught exception
        traceback.print_exc()
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed stream: nothing more to write
            stream.flush()
    os._exit(code & 0xFF)


#: modules the commands import on first use (their dependencies too: the kubernetes client, the
#: CEL engines); imported once here so no forked command pays for them. A warm-up only: a module
#: missing from this list is imported by the command itself, as in a user's shell.
WARM = ("labkit.cluster.backends.sim", "labkit.cluster.explain", "labkit.cel.engine_cpp", "labkit.cel.diagnose",
        "labkit.experiments.sweep", "fake_gpus.slices")


def serve(scripts: Sequence[str] = ()) -> None:
    """The server loop: one JSON request per stdin line, one JSON answer per stdout line."""
    for script in scripts:
        _LOADED[str(Path(script).resolve())] = _run_path(script)
    runpy.run_path = _loaded_run_path
    labkit.cli.build_parser()  # every command's module (labkit.cli.COMMANDS loads them on first use)
    for name in WARM:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    for line in sys.stdin:
        req = json.loads(line)
        with tempfile.TemporaryDirectory() as tmp:
            out, err = Path(tmp, "out"), Path(tmp, "err")
            out.touch()
            err.touch()
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                os.chdir(req["cwd"])
                os.environ.clear()
                os.environ.update(req["env"])
                tty = req.get("tty")  # a pseudo-terminal's slave: stdout (and stderr) on it
                _child(req["program"], req["args"], tty or str(out),
                       tty if tty and req.get("stderr_tty") else str(err))
            _, status = os.waitpid(pid, 0)
            rc = os.waitstatus_to_exitcode(status)
            answer = {"rc": rc, "stdout": out.read_text(errors="replace"), "stderr": err.read_text(errors="replace")}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


class CliServer:
    """A running server; `run()` one command line at a time (use one server per thread)."""

    def __init__(self, env: dict[str, str] | None = None, scripts: Sequence[Path] = ()) -> None:
        self.env = dict(env if env is not None else os.environ)
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.cliserver", "--serve", *map(str, scripts)],
                                     cwd=ROOT,
                                     env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def python(self, code: str, *args: str) -> subprocess.CompletedProcess[str]:
        """`python -c CODE ARGS` from the repository, in a process of its own, answered as subprocess.run does."""
        rc, stdout, stderr = self.run("python", ["-c", code, *args])
        return subprocess.CompletedProcess(["python", "-c", code, *args], rc, stdout, stderr)

    def run(self, program: str, args: list[str], cwd: Path = ROOT, *, env: dict[str, str] | None = None,
            tty: str | None = None, stderr_tty: bool = False) -> tuple[int, str, str]:
        """Run `labkit ARGS` (program "labkit"), `python -m fake_gpus ARGS` (program "fake_gpus") or
        `python -c CODE ARGS` (program "python", args ["-c", CODE, *ARGS]),
        with `env` (default: the server's). `tty`: the path of a pseudo-terminal's slave that the
        command's stdout (and with `stderr_tty` its stderr) is opened on; what it writes there is
        read from the master by the caller, not returned (the caller keeps the master drained while
        this waits: a full terminal would block the command)."""
        assert self.proc.stdin and self.proc.stdout
        req = {"program": program, "args": args, "cwd": str(cwd), "env": self.env if env is None else env,
               "tty": tty, "stderr_tty": stderr_tty}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the CLI server died (exit {self.proc.wait()}) on {program} {' '.join(args)}")
        answer = json.loads(line)
        return answer["rc"], answer["stdout"], answer["stderr"]

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


if __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    serve(sys.argv[2:])
