"""Running external commands, or recording them.

The kind backend never calls subprocess directly: it asks a Runner. `SubprocessRunner` runs
commands for real; `RecordingRunner` writes them down and answers from a script of canned
outputs, which is how the exact command sequence is tested on a machine without Docker.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from labkit.errors import EngineError

#: the lines of a failed command's output that say what went wrong: kind's `ERROR:`, kubeadm's
#: failed phase and waits (a kubeadm failure ends in a Go stack trace, which says nothing)
_SALIENT = re.compile(r"^ERROR:|error execution phase|\[ERROR|timed out|deadline exceeded|couldn't|"
                      r"unable to|failed to", re.IGNORECASE)


def salient_lines(text: str, limit: int = 6, width: int = 400) -> list[str]:
    """What a failed command's output says went wrong: the lines naming an error (at most `limit`,
    each cut to `width` characters), else its last lines."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    picked = list(dict.fromkeys(ln for ln in lines if _SALIENT.search(ln)))
    if len(picked) > limit:  # the first (what failed) and the last (the innermost cause) matter most
        picked = picked[:limit - 2] + picked[-2:]
    return [ln if len(ln) <= width else ln[:width] + " ..." for ln in (picked or lines[-5:])]


class CommandError(EngineError, RuntimeError):
    def __init__(self, cmd: Sequence[str], result: subprocess.CompletedProcess[str], note: str = ""):
        said = salient_lines(result.stderr or result.stdout or "")
        super().__init__(f"`{shlex.join(cmd)}` failed with exit code {result.returncode}"
                         + (f" ({note})" if note else "") + ": " + " | ".join(said))
        self.cmd = list(cmd)
        self.result = result

    @property
    def output(self) -> str:
        """All the command printed, stderr first."""
        return (self.result.stderr or "") + (self.result.stdout or "")


class Runner(ABC):
    #: True when the commands really run, so a real API server is there to talk to over HTTP (the
    #: kind backend then reads objects through one kept-alive connection instead of kubectl)
    live = True

    @abstractmethod
    def run(self, cmd: Sequence[str], *, input: str | None = None, check: bool = True,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run (or record) one command."""


class SubprocessRunner(Runner):
    """`timeout`: seconds per command (None: no limit); a command that overruns is reported as
    failed (exit code 124, like timeout(1)) instead of hanging the caller."""

    def __init__(self, log: Callable[[str], None] | None = None, timeout: float | None = None):
        self.log = log
        self.timeout = timeout

    def run(self, cmd, *, input=None, check=True, env=None):
        if self.log:
            self.log("$ " + shlex.join(cmd))
        try:
            result = subprocess.run(list(cmd), input=input, capture_output=True, text=True, env=env,
                                    timeout=self.timeout)
        except FileNotFoundError:
            result = subprocess.CompletedProcess(list(cmd), 127, "", f"{cmd[0]}: command not found")
        except subprocess.TimeoutExpired:
            result = subprocess.CompletedProcess(list(cmd), 124, "", f"{cmd[0]}: no answer after {self.timeout:.0f}s")
        if check and result.returncode != 0:
            raise CommandError(cmd, result)
        return result


@dataclass
class RecordingRunner(Runner):
    """Records commands; `responses` maps a command prefix (space-joined) to (exit code, stdout).
    Object reads and deletes go through it as kubectl commands (there is no API server to talk to)."""

    live = False
    responses: dict[str, tuple[int, str]] = field(default_factory=dict)
    commands: list[list[str]] = field(default_factory=list)
    inputs: list[str | None] = field(default_factory=list)

    def run(self, cmd, *, input=None, check=True, env=None):
        self.commands.append(list(cmd))
        self.inputs.append(input)
        joined = " ".join(cmd)
        code, out = 0, ""
        best = -1
        for prefix, answer in self.responses.items():
            if joined.startswith(prefix) and len(prefix) > best:
                code, out = answer
                best = len(prefix)
        result = subprocess.CompletedProcess(list(cmd), code, out, "" if code == 0 else out)
        if check and code != 0:
            raise CommandError(cmd, result)
        return result

    def lines(self) -> list[str]:
        return [shlex.join(c) for c in self.commands]
