"""Start a throw-away JupyterLab on 127.0.0.1 and drive it with Debian's Chromium (never a downloaded
browser). Shared by the real-browser tests."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                 "--disable-quic"]
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "browser"


def missing_requirements() -> str | None:
    if not Path(CHROMIUM).exists():
        return "Debian chromium not installed (bash tools/install-browser-deps.sh installs it)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "python playwright not installed (pip install -e '.[dev]')"
    if shutil.which("jupyter", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")) is None:
        return "jupyterlab not installed"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def jupyter_lab(root: Path):
    """A JupyterLab server on `root` with no token, no news, no PyPI extension manager."""
    port = _free_port()
    state = Path(tempfile.mkdtemp(prefix="labkit-lab-"))
    settings = state / "settings"
    overrides = state / "app-settings"
    overrides.mkdir(parents=True)
    (overrides / "overrides.json").write_text(json.dumps({
        "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
        # every cell stays in the DOM (no virtual scrolling), so a test can find cell i and measure it
        "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"}}))
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--IdentityProvider.token=", "--ServerApp.password=",
           "--ServerApp.disable_check_xsrf=True",  # the tests shut kernels down through the REST API
           f"--ServerApp.root_dir={root}", "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--LabApp.extension_manager=readonly", f"--LabApp.workspaces_dir={state / 'ws'}",
           f"--LabApp.user_settings_dir={settings}", f"--LabServerApp.app_settings_dir={overrides}"]
    log = open(state / "lab.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(base + "/api/status", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError("jupyter lab exited: " + (state / "lab.log").read_text()[-2000:]) from None
                time.sleep(0.25)
        else:
            raise RuntimeError("jupyter lab did not start: " + (state / "lab.log").read_text()[-2000:])
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        shutil.rmtree(state, ignore_errors=True)


def wait_kernel_idle(base: str, path: str, timeout: float = 90.0) -> None:
    """The DOM says 'idle' before the kernel is connected; ask the server instead."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            sessions = json.loads(urllib.request.urlopen(base + "/api/sessions", timeout=10).read())
        except (TimeoutError, urllib.error.URLError):  # the server is busy (a kernel starting on a loaded machine)
            continue
        for s in sessions:
            kernel = s.get("kernel") or {}
            if s.get("path") == path and kernel.get("execution_state") == "idle" and kernel.get("connections", 0) >= 1:
                return
        time.sleep(0.3)
    raise TimeoutError(f"kernel for {path} never became idle")


def launch(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
