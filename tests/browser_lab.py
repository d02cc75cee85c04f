"""Start a throw-away JupyterLab on 127.0.0.1 and drive it with Debian's Chromium (never a downloaded
browser). Shared by the real-browser tests.

Every wait here waits for a state a person would wait for (the server answering, JupyterLab loaded
with its theme, the kernel idle, a cell's output), never for a fixed time. Each has one hang guard,
HANG: long enough that only a hung browser, server or kernel reaches it, never a slow machine.

What a person would see go wrong is reported, not retried or dismissed: a JupyterLab dialog (e.g.
"Error Loading Theme") fails the test with its title and text, with the requests that failed and
the server log's warnings (`Watch`). The one exception is the host's doing, not the page's: Chromium
drops every open request when the machine's network interfaces change (`once_more_if_network_changed`).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.paths import REPO, TESTS

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                 "--disable-quic"]
ARTIFACTS = REPO / "test-artifacts" / "browser"
#: s: the one hang guard of every wait in the browser tests (server start, page load, kernel, outputs,
#: Playwright's actions and expect()). Not a performance limit: on 2 loaded cores (stress-ng on both,
#: plus ~8 other test runs) the server took up to 60 s to answer (the old guard's limit), and a page
#: with the renderer throttled 20x 3.3 min from load to kernel idle; 10 minutes only ends a hang.
HANG = 600.0
#: what Chromium gives every open request, 127.0.0.1's included, when it dropped them because the host's
#: network interfaces changed; make test's kind lanes create and delete container networks (veth pairs,
#: bridges) while the browser lanes run (seen in the site lane: Pyodide's wheels "Failed to fetch")
NETWORK_CHANGED = "net::ERR_NETWORK_CHANGED"
#: s: one HTTP request to the test's own server (it answers in ms; a loaded machine, seconds)
REQUEST = 60.0


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


@dataclass
class Lab:
    """A running JupyterLab: its URL and its log."""

    base: str
    log: Path

    def log_problems(self, lines: int = 15) -> list[str]:
        """The server log's last warnings and errors ([W ...], [E ...], [C ...] and tracebacks)."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return []
        keep = [line for line in text.splitlines() if line.startswith(("[W", "[E", "[C", "Traceback", "    "))]
        return keep[-lines:]


def _die_with_parent() -> None:
    """In the server's process, before exec: SIGTERM when the test process dies, even by SIGKILL or a
    CI timeout (the server has a session of its own, so it gets no terminal signal)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _server_port(runtime: Path) -> int | None:
    """The port the server chose (jupyter_server writes jpserver-<pid>.json once it has one)."""
    for info in runtime.glob("jpserver-*.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            return int(json.loads(info.read_text())["port"])
    return None


def _start(root: Path, state: Path) -> tuple[subprocess.Popen, Lab]:
    """Start the server and wait until it answers; port 0 (the server picks a free one itself) and
    no port retries, so it can never listen on another port than the one it reports."""
    settings = state / "settings"
    overrides = state / "app-settings"
    overrides.mkdir(parents=True, exist_ok=True)
    (overrides / "overrides.json").write_text(json.dumps({
        "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
        # every cell stays in the DOM (no virtual scrolling), so a test can find cell i and measure it
        "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"}}))
    runtime = Path(tempfile.mkdtemp(prefix="runtime-", dir=state))
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
           "--ServerApp.port=0", "--ServerApp.port_retries=0", "--IdentityProvider.token=", "--ServerApp.password=",
           "--ServerApp.disable_check_xsrf=True",  # the tests shut kernels down through the REST API
           f"--ServerApp.root_dir={root}", "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--LabApp.extension_manager=readonly", f"--LabApp.workspaces_dir={state / 'ws'}",
           f"--LabApp.user_settings_dir={settings}", f"--LabServerApp.app_settings_dir={overrides}"]
    log = Path(tempfile.mkstemp(prefix="lab-", suffix=".log", dir=state)[1])
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_die_with_parent, env={**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime)})
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return proc, Lab("", log)
        port = _server_port(runtime)
        if port is not None:
            base = f"http://127.0.0.1:{port}"
            try:
                urllib.request.urlopen(base + "/api/status", timeout=REQUEST).read()
                return proc, Lab(base, log)
            except (OSError, ValueError):  # not listening yet (it binds once its event loop runs)
                pass
        time.sleep(0.25)
    return proc, Lab("", log)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=REQUEST)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def jupyter_lab(root: Path) -> Iterator[Lab]:
    """A JupyterLab server on `root` with no token, no news, no PyPI extension manager."""
    state = Path(tempfile.mkdtemp(prefix="labkit-lab-"))
    proc = None
    try:
        for _ in range(3):
            proc, lab = _start(root, state)
            if lab.base:
                break
            text = lab.log.read_text(errors="replace")
            _stop(proc)
            # the one start that is tried again: another process took the free port the server had
            # picked before it listened on it (the server says so and exits)
            if "is already in use" not in text:
                raise RuntimeError("jupyter lab did not start: " + text[-2000:])
        else:
            raise RuntimeError("jupyter lab did not start (its port was taken 3 times): " + text[-2000:])
        yield lab
    finally:
        if proc is not None:
            _stop(proc)
        shutil.rmtree(state, ignore_errors=True)


#: what the session started once for every module that asks (`shared`): name -> the value; closed when pytest ends
_SHARED: dict[str, object] = {}


def shared(config, name: str, start: Callable[[contextlib.ExitStack], object]) -> object:
    """One ``start(stack)`` per session for every module that asks by ``name`` (a JupyterLab, a browser, the
    Playwright driver), closed (``stack``) when the session ends: a module-scoped fixture started one per
    module, and each JupyterLab server and Chromium start is seconds of CPU. ``config``: pytest's."""
    if name not in _SHARED:
        stack = contextlib.ExitStack()
        try:
            _SHARED[name] = start(stack)
        except BaseException:
            stack.close()
            raise
        config.add_cleanup(stack.close)
        config.add_cleanup(lambda: _SHARED.pop(name, None))
    return _SHARED[name]


def playwright_driver(config):
    """The session's Playwright driver (one per session: the sync API runs one at a time in a thread)."""
    def start(stack: contextlib.ExitStack):
        from playwright.sync_api import sync_playwright  # lazy: a test extra (missing_requirements())

        return stack.enter_context(sync_playwright())
    return shared(config, "playwright", start)


#: the claim builder's notebook (tests/course/test_browser.py), in the course's JupyterLab beside notebooks/
CLAIM_BUILDER = TESTS / "browser" / "claim_builder.ipynb"


def course_lab(config) -> tuple[Path, Lab, object]:
    """The session's JupyterLab and Chromium of the course tests (tests/course/test_browser.py,
    tests/course/test_browser_notebooks.py): (its root folder, the server, the browser). The root is laid out as the
    repository around the notebooks (notebooks/, and examples/ and clusters/ that they read as ../examples), with
    the claim builder's notebook at its top. Each test opens its own page and shuts its kernels down."""
    def start(stack: contextlib.ExitStack):
        root = Path(tempfile.mkdtemp(prefix="labkit-course-"))
        stack.callback(shutil.rmtree, root, ignore_errors=True)
        (root / "notebooks").mkdir()
        repo = REPO
        for folder in ("examples", "clusters"):
            if (repo / folder).is_dir():
                (root / folder).symlink_to(repo / folder)
        shutil.copy(CLAIM_BUILDER, root / CLAIM_BUILDER.name)
        lab = stack.enter_context(jupyter_lab(root))
        browser = launch(playwright_driver(config))
        stack.callback(browser.close)
        return root, lab, browser
    return shared(config, "course-lab", start)  # type: ignore[return-value]


def shutdown_kernels(base: str) -> None:
    """Shut every kernel of the server down, as JupyterLab's "Shut Down All Kernels" does (REST)."""
    for s in json.loads(urllib.request.urlopen(base + "/api/sessions", timeout=REQUEST).read()):
        req = urllib.request.Request(f"{base}/api/sessions/{s['id']}", method="DELETE")
        urllib.request.urlopen(req, timeout=REQUEST).read()


def wait_kernel_idle(base: str, path: str, timeout: float = HANG) -> None:
    """The DOM says 'idle' before the kernel is connected; ask the server instead."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            sessions = json.loads(urllib.request.urlopen(base + "/api/sessions", timeout=REQUEST).read())
        except OSError:  # the server is busy (a kernel starting on a loaded machine): ask again
            sessions = []
        for s in sessions:
            kernel = s.get("kernel") or {}
            if s.get("path") == path and kernel.get("execution_state") == "idle" and kernel.get("connections", 0) >= 1:
                return
        time.sleep(0.3)  # the interval between two questions, not a wait for the kernel
    raise TimeoutError(f"kernel for {path} never became idle in {timeout:.0f} s")


def launch(playwright, extra_args: tuple[str, ...] = ()):
    from playwright.sync_api import expect  # lazy: playwright is a test extra (missing_requirements())

    expect.set_options(timeout=HANG * 1000)
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=[*CHROMIUM_ARGS, *extra_args])


#: JupyterLab's dialogs on screen, as "title — text", once their title is rendered (it can come after
#: the body: a dialog read too early has none). Its "Loading…" dialog is not one: JupyterLab shows it
#: while it is still loading after 12 s and closes it itself when loading is done.
DIALOGS_JS = """() => [...document.querySelectorAll('.jp-Dialog')]
    .map(d => ['.jp-Dialog-header', '.jp-Dialog-body']
         .map(c => ((d.querySelector(c) || {}).textContent || '').replace(/\\s+/g, ' ').trim()))
    .filter(([title]) => title && !title.startsWith('Loading'))
    .map(([title, body]) => title + ' — ' + body)"""

#: every dialog that ever opened, even one closed again before a test looked (a MutationObserver)
WATCH_JS = """(() => {
  const seen = new WeakSet();
  const look = () => {
    for (const d of document.querySelectorAll('.jp-Dialog')) {
      if (seen.has(d)) continue;
      const [title, body] = ['.jp-Dialog-header', '.jp-Dialog-body']
        .map(c => ((d.querySelector(c) || {}).textContent || '').replace(/\\s+/g, ' ').trim());
      if (!title) continue;  // not rendered yet: the next mutation looks again
      seen.add(d);
      if (!title.startsWith('Loading')) window.labkitDialog(title + ' — ' + body);
    }
  };
  new MutationObserver(look).observe(document, {childList: true, subtree: true, characterData: true});
})();"""

#: JupyterLab has loaded as a person sees it: the splash screen gone, the theme applied, and `sel` on
#: the page; or the dialogs that stand in the way. Like every wait_for_function predicate here it must hold
#: for any page state, a page still loading too (no <body> yet): a predicate that throws ends the wait at once
READY_JS = ("sel => {\n  const dialogs = (" + DIALOGS_JS + """)();
  if (dialogs.length) return {dialogs};
  const ready = document.body && !document.getElementById('jupyterlab-splash') && document.body.dataset.jpThemeName
                && document.querySelector(sel);
  return ready ? {dialogs: []} : false;
}""")


@dataclass
class Watch:
    """What a person would have seen go wrong in a page: JupyterLab's dialogs, failed requests."""

    lab: Lab
    dialogs: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def dialog(self, text: str) -> None:
        self.dialogs.append(text)

    def response(self, response) -> None:
        """A server error, or a stylesheet or script the server refused (JupyterLab needs each)."""
        refused = response.status >= 400 and response.request.resource_type in ("stylesheet", "script")
        if response.status >= 500 or refused:
            self.failed.append(f"{response.request.method} {response.url}: HTTP {response.status}")

    def report(self) -> str:
        lines = [f"JupyterLab showed a dialog: {d}" for d in self.dialogs]
        if self.failed:
            lines.append("requests that failed: " + "; ".join(self.failed[-10:]))
        if problems := self.lab.log_problems():
            lines.append("server log:\n  " + "\n  ".join(problems))
        return "\n".join(lines)

    @contextmanager
    def explain(self) -> Iterator[None]:
        """A failure inside says what JupyterLab showed (a dialog in the way of a click, say)."""
        try:
            yield
        except Exception as exc:
            report = self.report()
            if not report:
                raise
            raise AssertionError(f"{exc or type(exc).__name__}\n{report}") from exc
        if self.dialogs:
            raise AssertionError(self.report())


def new_page(browser, lab: Lab, **kwargs):
    """A page whose every action waits up to HANG, with a Watch on it."""
    page = browser.new_page(**kwargs)
    page.set_default_timeout(HANG * 1000)
    page.set_default_navigation_timeout(HANG * 1000)
    watch = Watch(lab)
    page.expose_function("labkitDialog", watch.dialog)
    page.add_init_script(WATCH_JS)
    page.on("requestfailed", lambda r: watch.failed.append(f"{r.method} {r.url}: {r.failure}"))
    page.on("response", watch.response)
    return page, watch


def open_lab(page, watch: Watch, url: str, selector: str) -> None:
    """Go to `url` and wait until JupyterLab has loaded with `selector` on the page (what a person
    waits for before clicking); a dialog in the way (an error) fails with its text."""
    page.goto(url, wait_until="commit")
    state = page.wait_for_function(READY_JS, arg=selector, polling=250).json_value()
    if state["dialogs"]:
        watch.dialogs.extend(d for d in state["dialogs"] if d not in watch.dialogs)
        raise AssertionError(watch.report())


def dialogs_on_screen(page) -> list[str]:
    return page.evaluate(DIALOGS_JS)


def once_more_if_network_changed(run: Callable[[], None], evidence: Callable[[], str],
                                 set_aside: Callable[[], None] = lambda: None) -> bool:
    """Run `run` (a test's whole body); when it fails and `evidence()` (what the page logged) holds
    NETWORK_CHANGED, call `set_aside()` (keep the first run's log) and run it once more, which must pass
    on its own. Any other failure fails at once. True when the second run was needed."""
    try:
        run()
        return False
    except AssertionError:
        if NETWORK_CHANGED not in evidence():
            raise
    set_aside()
    run()
    return True
