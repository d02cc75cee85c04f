"""The fake GPU DRA kubelet plugin: registration + DRA gRPC service, CDI specs, checkpoint.

Imports nothing from labkit. ``fake_gpus.plugin.cdi.container_env`` is the pure function
the embedded simulator uses; ``main(argv)`` runs the plugin (``python -m fake_gpus plugin``).
"""

from __future__ import annotations

import threading

from .cli import main as _main


def main(argv: list[str] | None = None, stop: threading.Event | None = None) -> int:
    """Run the plugin (argv as for `python -m fake_gpus plugin`) until SIGTERM/SIGINT or ``stop``."""
    return _main(argv, stop)


__all__ = ["main"]
