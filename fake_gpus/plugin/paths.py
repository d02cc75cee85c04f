"""Kubelet plugin directories and socket paths."""

from __future__ import annotations

from pathlib import Path

from fake_gpus.errors import InputError

DEFAULT_REGISTRY_DIR = "/var/lib/kubelet/plugins_registry"
DEFAULT_PLUGINS_DIR = "/var/lib/kubelet/plugins"
DEFAULT_CDI_DIR = "/var/run/cdi"
MAX_SOCKET_PATH = 107  # sun_path is 108 bytes including the terminating NUL


class SocketPathError(InputError, ValueError):
    pass


def plugin_data_dir(plugins_dir: str | Path, driver: str) -> Path:
    return Path(plugins_dir).absolute() / driver


def dra_socket_path(plugins_dir: str | Path, driver: str) -> Path:
    return plugin_data_dir(plugins_dir, driver) / "dra.sock"


def registration_socket_path(registry_dir: str | Path, driver: str) -> Path:
    return Path(registry_dir).absolute() / f"{driver}-reg.sock"


def checkpoint_path(plugins_dir: str | Path, driver: str) -> Path:
    return plugin_data_dir(plugins_dir, driver) / "checkpoint.json"


def check_socket_path(path: Path, flag: str) -> None:
    n = len(str(path).encode())
    if n > MAX_SOCKET_PATH:
        raise SocketPathError(
            f"socket path {path} is {n} bytes, but unix socket paths must be at most "
            f"{MAX_SOCKET_PATH} bytes: pass a shorter {flag}")
