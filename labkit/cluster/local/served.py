"""The run state of a detached local server (``python -m labkit.cluster.local.serve``), read by the
server itself and by the processes that look for it (``connect``, ``labkit cluster status``).

Its own module because ``serve`` runs as ``__main__``: a client importing ``serve`` would load it a
second time (and runpy warns), and ``serve`` imports the cluster module that reads this state.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from typing import Any

from labkit.cluster import runstate
from labkit.cluster.local.procs import pid_alive

BACKEND = "local"


def running_state(profile_name: str) -> dict[str, Any] | None:
    """The run state of the live server for this profile, or None (stale state is removed)."""
    state = runstate.read_state(BACKEND, profile_name)
    if state is None:
        return None
    if not pid_alive(int(state.get("pid", 0))):
        kill_components(state)
        if state.get("stateDir"):
            shutil.rmtree(state["stateDir"], ignore_errors=True)
        runstate.clear(BACKEND, profile_name)
        return None
    return state


def kill_components(state: dict[str, Any]) -> None:
    """Last resort for a server that died without down(): its children's process groups."""
    for pgid in state.get("componentGroups") or []:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(pgid), signal.SIGKILL)
