"""The course in a browser tab, as a learner meets it: the static JupyterLite site (notebooks/site.py)
built clean, served on 127.0.0.1, every notebook run in Debian's Chromium (Playwright) with Python in
the page (Pyodide) and no request allowed to leave 127.0.0.1 (the browser resolves no other host; each
request to one is counted and fails the test).

The site is built with ``--pyodide verified`` (the official Pyodide 0.27.7 core and its numpy/matplotlib
wheels, each checked against the official lock: tools/pyodide-deps.sh) and ``--solutions`` (each exercise
followed by its solution, the instructor's copy), once per session. One browser context, a persistent one
with a fresh profile (a learner's Chromium, with its disk cache, who opens one notebook after the other: the
first visit fetches Pyodide, the next ones find it in the HTTP cache, and the server sends none of Pyodide's
core files or wheels again; ``LABKIT_SITE_FIRST_VISIT=1`` gives each notebook a fresh context instead, to
measure first visits). Per notebook, in a page of its own (its own JupyterLab and kernel): Run All, clicked as soon as
the notebook is on the page (before its kernel is up: the site runs it once the kernel is, as a server
kernel does; `test_run_all_clicked_before_the_kernel_is_up_runs_once_it_is` holds the kernel back to prove
it), then

- it ran to the end (every code cell numbered), no Traceback in any output, no warning on stderr;
- every drawing cell shows a picture (an <img> with pixels), every widget rendered and answers a click;
- every exercise cell (the open exercise, as the learner gets it) shows ❌ with a hint, every solution
  cell ✅;
- 0 requests to another host (each is aborted and counted), no JupyterLab dialog (its text fails the test).

In one notebook (RUN_TWICE) Run All runs a second time in the same kernel, with the same checks.

Notebook 11 (kind/local) runs on sim too, and its first cell says that kind and local need the full kit.
Screenshots go to test-artifacts/site/, what each page and its workers printed to test-artifacts/site/<notebook>.log
(a failed wait prints its end), every cell's stderr to test-artifacts/site/stderr.txt, and the measured times and
bytes to test-artifacts/site/metrics.json (numbers for docs/browser-course.md, not limits).
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.browser_lab import (
    CHROMIUM,
    CHROMIUM_ARGS,
    HANG,
    READY_JS,
    WATCH_JS,
    Lab,
    Watch,
    launch,
    missing_requirements,
    once_more_if_network_changed,
    playwright_driver,
    shared,
)
from tests.course.test_browser_notebooks import DRAWS, WIDGETS, _click_widget
from tests.paths import REPO

ROOT = REPO
NOTEBOOKS = ROOT / "notebooks"
NAMES = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.md"))
ARTIFACTS = ROOT / "test-artifacts" / "site"
CACHE = Path(os.environ.get("LABKIT_CACHE", Path.home() / ".cache" / "dra-labkit"))
SITE_PYTHON = CACHE / "site-venv-pyodide-0.27" / "bin" / "python"  # the kernel that fits Pyodide 0.27 (Makefile)
WIDGET_CELL = re.compile(r"^(ClaimBuilder|InventoryExplorer|CelPlayground|TopologyView)\(|^builder$", re.M)

pytestmark = [pytest.mark.browser, pytest.mark.site, pytest.mark.skipif(missing_requirements() is not None,
                                                      reason=missing_requirements() or "")]


class _Handler(http.server.SimpleHTTPRequestHandler):
    """A static server (what make site-serve runs) that counts the bytes it sends and notes what it did not have."""

    sent = 0
    missing: list[str] = []
    #: the path of each response the server sent with a body (a 304 has none), in order
    bodies: list[str] = []
    root: Path  # the site it serves

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        if code == 404:
            type(self).missing.append(self.path)
        super().send_error(code, message, explain)

    def copyfile(self, source, outputfile) -> None:  # noqa: ANN001 - http.server's signature
        type(self).bodies.append(self.path)
        while chunk := source.read(64 * 1024):
            outputfile.write(chunk)
            type(self).sent += len(chunk)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's signature
        pass


@functools.cache
def _site_deps() -> None:
    """The site's build environment and Pyodide (cached: a second run does nothing)."""
    out = subprocess.run(["make", "--no-print-directory", "site-venv", "pyodide-deps"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]


#: developers only: serve this already built site instead of building one (to time two builds against each
#: other, e.g. before and after a change: docs/browser-course.md)
PREBUILT = os.environ.get("LABKIT_SITE_PREBUILT")


#: the site this session built (`_built_site`): the modules that serve it (this one, tests/site/test_site_landing.py)
#: share one build
BUILT: list[Path] = []


def _built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once per session (``--pyodide verified --solutions``) and checked; each module's `site`
    fixture serves it."""
    _site_deps()
    if PREBUILT:
        out = Path(PREBUILT)
        assert (out / "index.html").is_file(), f"LABKIT_SITE_PREBUILT={PREBUILT}: no site there"
        return out
    if BUILT:
        return BUILT[0]
    out = tmp_path_factory.mktemp("site") / "site"
    build = subprocess.run([str(SITE_PYTHON), "notebooks/site.py", "--pyodide", "verified", "--solutions",
                            "--out", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert build.returncode == 0, (build.stdout + build.stderr)[-3000:]
    assert "site: bytecode for " in build.stdout, build.stdout  # compiled by the site's Pyodide under Node.js
    # the tab loads the site's standard library (with bytecode), not the distribution's; no jupytext extension
    config = json.loads((out / "jupyter-lite.json").read_text())["jupyter-config-data"]
    options = config["litePluginSettings"]["@jupyterlite/pyodide-kernel-extension:kernel"]["loadPyodideOptions"]
    assert options["stdLibURL"] == "./static/pyodide/python_stdlib_pyc.zip", options
    assert (out / "static/pyodide/python_stdlib_pyc.zip").is_file()
    assert not (out / "static/pyodide/python_stdlib.zip").exists()
    assert "jupyterlab-jupytext" not in {e["name"] for e in config["federated_extensions"]}
    assert not (out / "extensions/jupyterlab-jupytext").exists()
    # every file the site's lock names is there with the sha256 it gives (Pyodide checks it on load); the
    # distribution's numpy and matplotlib carry bytecode too; pytz (not imported by matplotlib) is left out
    lock = json.loads((out / "static/pyodide/pyodide-lock.json").read_text())["packages"]
    stale = [e["file_name"] for e in lock.values() if (out / "static/pyodide" / e["file_name"]).is_file()
             and hashlib.sha256((out / "static/pyodide" / e["file_name"]).read_bytes()).hexdigest() != e["sha256"]]
    assert stale == [], f"the lock gives another sha256 for {stale}"
    for name, module in (("numpy", "numpy/__init__.pyc"), ("matplotlib", "matplotlib/pyplot.pyc")):
        with zipfile.ZipFile(out / "static/pyodide" / lock[name]["file_name"]) as zf:
            assert module in zf.namelist(), f"{name}: no bytecode in the site's wheel"
    assert "pytz" not in lock["matplotlib"]["depends"] and not list((out / "static/pyodide").glob("pytz-*"))
    BUILT.append(out)
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, type[_Handler]]]:
    """The session's site (`_built_site`) on 127.0.0.1, with a request handler of this module's own."""
    out = _built_site(tmp_path_factory)
    handler = type("Handler", (_Handler,), {"sent": 0, "missing": [], "bodies": [], "root": out})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(out)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()  # bound and listening already: the browser's first request waits in the backlog
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


#: Chromium resolves no host but 127.0.0.1: a request to any other fails at once (and is counted, EXTERNAL)
OFFLINE_ARGS = ("--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",)
#: the size of each lesson's page
VIEWPORT = {"width": 1280, "height": 1000}


@pytest.fixture(scope="module")
def browser(request):
    """The session's Chromium of the site tests (this module's and tests/site/test_site_landing.py's): a hard offline
    check under the request handler, no other host even resolves."""
    def start(stack):
        chromium = launch(playwright_driver(request.config), OFFLINE_ARGS)
        stack.callback(chromium.close)
        return chromium
    return shared(request.config, "site-browser", start)


#: the status bar's kernel item ("Python (Pyodide) | Idle"), for KERNEL_READY and a failure's report
STATUS_BAR_KERNEL = '.jp-StatusBar-TextItem[title^="Change kernel"]'
#: the notebook's kernel is up, as the status bar tells a learner ("Python (Pyodide) | Idle"): the kernel has
#: answered (JupyterLite's kernel says idle only once Pyodide is loaded). Not the notebook toolbar's execution
#: indicator: it reads 'idle' before the notebook has a kernel at all, and a Run All sent then is dropped
#: without a word (JupyterLab clears each cell whose session has no kernel yet).
KERNEL_READY = """() => {
  const item = document.querySelector('""" + STATUS_BAR_KERNEL + """');
  const text = item ? item.textContent.trim() : '';
  return text.endsWith('| Idle') && !text.startsWith('No Kernel') && text;
}"""
#: the first output of any code cell is on the page
FIRST_OUTPUT = "() => !!document.querySelector('.jp-NotebookPanel .jp-CodeCell .jp-OutputArea-output')"

#: Run All is over: no cell queued or running, every code cell numbered, or a cell that raised
RUN_ALL_DONE = """n => {
  const prompts = [...document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell .jp-InputPrompt')]
    .map(p => p.innerText);
  const numbered = prompts.filter(p => /\\[\\d+\\]/.test(p)).length;
  const error = document.querySelector('.jp-NotebookPanel .jp-OutputArea-output[data-mime-type*="error"]');
  return !prompts.some(p => p.includes('*')) && (numbered === n || (error && numbered > 0));
}"""

METRICS: dict[str, dict] = {}


@functools.cache
def _build_module():
    """notebooks/build.py (a script beside the notebooks, not a package; `build` is also PyPA's name)."""
    spec = importlib.util.spec_from_file_location("labkit_notebooks_build", NOTEBOOKS / "build.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _code_cells(name: str) -> list[tuple[str, list[str]]]:
    """(source, tags) of each code cell of the site's notebook (the learner copy with its solutions)."""
    nb = _build_module().learner(name, solutions=True)
    return [(c.source, c.metadata.get("tags", [])) for c in nb.cells if c.cell_type == "code"]


#: the notebook whose Run All runs twice (a cluster, a widget, an exercise: what a second run could break)
RUN_TWICE = "04_claiming_by_attributes"
FIRST_VISIT = os.environ.get("LABKIT_SITE_FIRST_VISIT") == "1"

#: the second Run All is over: the last code cell's prompt reads [2n], or a cell raised
RUN_AGAIN_DONE = """n => {
  const prompts = [...document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell .jp-InputPrompt')]
    .map(p => p.innerText);
  const error = document.querySelector('.jp-NotebookPanel .jp-OutputArea-output[data-mime-type*="error"]');
  return prompts.length > 0 && !prompts.some(p => p.includes('*'))
    && (prompts[prompts.length - 1].includes(`[${2 * n}]`) || !!error);
}"""


STDERR = "application/vnd.jupyter.stderr"
#: the text on stderr under each cell, of every notebook so far (test-artifacts/site/stderr.txt)
STDERR_SEEN: list[str] = []

#: every request to another host the pages and their workers made (each aborted), in order
EXTERNAL: list[str] = []


def _offline_context(browser):
    """A fresh browser context (a first visit) that records (EXTERNAL) each request to another host."""
    return _offline(browser.new_context(viewport=VIEWPORT))


def _offline(context):
    """``context``, recording (EXTERNAL) each request to another host, the kernel's Web Worker's included (the
    context sees those). The browser resolves no other host (``--host-resolver-rules``), so each such request
    fails at once. No Playwright route here: routing turns the HTTP cache off, and the notebooks after the
    first one would fetch Pyodide again instead of finding it in the cache."""
    context.set_default_timeout(HANG * 1000)
    context.on("request", lambda r: None if urlsplit(r.url).hostname in ("127.0.0.1", None)
               or r.url.startswith(("data:", "blob:")) else EXTERNAL.append(r.url))
    return context


@pytest.fixture(scope="module")
def shared_context(request):
    """The browser context the notebooks share (one learner, one HTTP cache), unless FIRST_VISIT: a persistent
    one (a Chromium of its own, with a fresh profile, removed at the end), as a learner's browser is. An
    off-the-record context (browser.new_context()) keeps its HTTP cache in memory, and that one does not keep
    Pyodide's 10 MB pyodide.asm.wasm: every later lesson fetched it again (measured)."""
    if FIRST_VISIT:
        yield None
        return
    profile = Path(tempfile.mkdtemp(prefix="labkit-site-profile-"))
    try:
        context = playwright_driver(request.config).chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=[*CHROMIUM_ARGS, *OFFLINE_ARGS],
            viewport=VIEWPORT)
        try:
            yield _offline(context)
        finally:
            context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


#: the page's state in one line, for a failure: each code cell's prompt, the status bar's kernel, outputs so far
PAGE_STATE_JS = """() => {
  const q = s => [...document.querySelectorAll(s)];
  const prompts = q('.jp-NotebookPanel .jp-CodeCell .jp-InputPrompt').map(p => p.innerText.trim() || '[ ]');
  const kernel = document.querySelector('""" + STATUS_BAR_KERNEL + """');
  return `prompts ${prompts.join(' ')}; status bar "${kernel ? kernel.textContent.trim() : ''}"; `
    + `outputs ${q('.jp-NotebookPanel .jp-OutputArea-output').length}`;
}"""


class PageLog:
    """What a page, its workers (the kernel's) and the site's service worker printed, and the requests
    still open, each with its time since the page opened: what a hung Run All leaves to read."""

    def __init__(self, page, context) -> None:
        self.t0 = time.monotonic()
        self.lines: list[str] = []
        self.open: dict[object, str] = {}
        page.on("console", lambda m: self._note(f"page {m.type}: {m.text}"))
        page.on("pageerror", lambda e: self._note(f"page error: {e}"))
        page.on("crash", lambda _: self._note("the page crashed"))
        page.on("worker", self._worker)
        self._context = context
        self._handlers = [("request", self._request), ("requestfinished", self._finished),
                          ("requestfailed", self._failed),
                          ("serviceworker", functools.partial(self._worker, console=True))]
        for event, handler in self._handlers:
            context.on(event, handler)

    def _note(self, text: str) -> None:
        self.lines.append(f"{time.monotonic() - self.t0:7.1f} s  {text[:300]}")

    def _worker(self, worker, *, console: bool = False) -> None:
        name = worker.url.rsplit("/", 1)[-1]
        self._note(f"worker {name} started")
        if console:  # a dedicated worker's console (the kernel's) reaches the page's already
            worker.on("console", lambda m: self._note(f"worker {name} {m.type}: {m.text}"))
        worker.on("close", lambda _: self._note(f"worker {name} closed"))

    def _request(self, request) -> None:
        self.open[request] = f"{time.monotonic() - self.t0:7.1f} s  {request.method} {request.url[:160]}"

    def _finished(self, request) -> None:
        self.open.pop(request, None)

    def _failed(self, request) -> None:
        self.open.pop(request, None)
        self._note(f"request failed: {request.method} {request.url[:160]}: {request.failure}")

    def close(self) -> None:
        for event, handler in self._handlers:
            self._context.remove_listener(event, handler)

    @contextmanager
    def explain(self, page) -> Iterator[None]:
        """A wait that failed (a Run All that never ended, say) says what the page and its kernel did."""
        try:
            yield
        except Exception as exc:
            raise AssertionError(f"{exc or type(exc).__name__}\n{self.report(page)}") from exc

    def report(self, page, last: int = 40) -> str:
        try:
            state = page.evaluate(PAGE_STATE_JS)
        except Exception as exc:  # a crashed or closed page: say so, the rest of the report still helps
            state = f"(the page could not be read: {exc})"
        return "\n".join([f"the page at {time.monotonic() - self.t0:.1f} s: {state}",
                          f"requests still open ({len(self.open)}):", *list(self.open.values())[-15:],
                          f"console and events ({len(self.lines)}, the last {last}):", *self.lines[-last:]])


def _run_all(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()


def _output_problems(page, cells: list[tuple[str, list[str]]], run: str) -> list[str]:
    """What the outputs of a finished Run All show wrong (`run`: which run, for the messages)."""
    problems: list[str] = []
    dom = page.locator(".jp-NotebookPanel .jp-CodeCell")
    assert dom.count() == len(cells)
    for i, (source, tags) in enumerate(cells):
        cell = dom.nth(i)
        text = cell.locator(".jp-OutputArea").inner_text()
        if "Traceback" in text or cell.locator(".jp-OutputArea-output[data-mime-type*='error']").count():
            problems.append(f"{run}: code cell {i}: {text.strip()[-300:]!r}")
        # a warning under a cell is noise the learner cannot act on (tqdm's "can't start new thread" was one)
        for err in cell.locator(f".jp-OutputArea-output[data-mime-type='{STDERR}']").all_inner_texts():
            STDERR_SEEN.append(f"{run}: code cell {i}: {err.strip()[:300]}")
            if "Warning" in err:
                problems.append(f"{run}: code cell {i} shows a warning: {err.strip()[:300]!r}")
        if DRAWS.search(source):  # Run All is over: a picture is on the page now or never
            picture = cell.locator(".jp-OutputArea-output img, .jp-RenderedSVG svg").first
            ok = picture.count() > 0 and picture.evaluate(
                "e => e.getBoundingClientRect().width > 100 && (e.tagName !== 'IMG' || (e.complete && e.naturalWidth > 100))")
            if not ok:
                problems.append(f"{run}: code cell {i} draws but shows no picture: {source.strip().splitlines()[-1]}")
        if WIDGET_CELL.search(source):
            found = [cls for cls in WIDGETS if cell.locator(f".{cls}").count()]
            if not found:
                problems.append(f"{run}: code cell {i}: no widget rendered ({text[:120]!r})")
            elif why := _click_widget(found[0], cell.locator(f".{found[0]}").first, page):
                problems.append(f"{run}: code cell {i}: {found[0]} did not answer a click: {why}")
        if "exercise" in tags and "checks." in source and not (text.lstrip().startswith("❌") and "hint:" in text):
            problems.append(f"{run}: exercise (code cell {i}) does not show ❌ with a hint: {text[:200]!r}")
        if "solution" in tags and "✅" not in text:
            problems.append(f"{run}: solution (code cell {i}): {text[:200]!r}")
    return problems


@pytest.mark.parametrize("name", NAMES)
def test_notebook_in_the_site(site, browser, shared_context, name: str) -> None:
    """The lesson in the site, Run All as a learner does it; once more, in a fresh page, only when the
    page's log shows Chromium dropped its requests because the host's network changed under it."""
    log = ARTIFACTS / f"{name}.log"
    if once_more_if_network_changed(
            lambda: _notebook_in_the_site(site, browser, shared_context, name),
            evidence=lambda: log.read_text(encoding="utf-8") if log.exists() else "",
            set_aside=lambda: log.rename(ARTIFACTS / f"{name}.network-changed.log")):
        METRICS[name]["retried_after_network_change"] = True
        (ARTIFACTS / "metrics.json").write_text(json.dumps(METRICS, indent=1))


def _notebook_in_the_site(site, browser, shared_context, name: str) -> None:
    base, handler = site
    cells = _code_cells(name)
    context = shared_context or _offline_context(browser)
    seen = len(EXTERNAL)
    page = context.new_page()
    watch = Watch(Lab(base, Path(os.devnull)))
    page.expose_function("labkitDialog", watch.dialog)
    page.add_init_script(WATCH_JS)
    sent0, missing0, stderr0, bodies0 = handler.sent, len(handler.missing), len(STDERR_SEEN), len(handler.bodies)
    problems: list[str] = []
    log = PageLog(page, context)
    try:
        with log.explain(page), watch.explain():
            t0 = time.monotonic()
            page.goto(f"{base}/lab/index.html?path=notebooks/{name}.ipynb", wait_until="commit")
            state = page.wait_for_function(READY_JS, arg=".jp-NotebookPanel .jp-CodeCell", polling=250).json_value()
            assert not state["dialogs"], f"JupyterLab showed a dialog: {state['dialogs']}"
            lab = time.monotonic() - t0
            early = not page.evaluate(KERNEL_READY)  # a learner clicks Run All at once, not after the kernel
            _run_all(page)
            page.wait_for_function(FIRST_OUTPUT, polling=100)
            first = time.monotonic() - t0
            page.wait_for_function(RUN_ALL_DONE, arg=len(cells), polling=250)
            done = time.monotonic() - t0
            dom = page.locator(".jp-NotebookPanel .jp-CodeCell")
            prompts = [p.strip() for p in dom.locator(".jp-InputPrompt").all_inner_texts()]
            if prompts[-1] != f"[{len(cells)}]:":
                problems.append(f"Run All stopped: the prompts read {' '.join(prompts)}")
            problems += _output_problems(page, cells, "Run All")
            # Pyodide's "Failed to load <package>": the kernel asked for a package the site leaves out (an optional
            # import of a library, loaded on import: labkit.browser loads only the drawing library)
            if failed := [line.strip() for line in log.lines if " log: Failed to load " in line]:
                problems.append(f"the kernel asked for packages it does not use: {failed}")
            if name.startswith("11_") and "full kit" not in dom.nth(0).locator(".jp-OutputArea").inner_text():
                problems.append("notebook 11 does not say that kind and local need the full kit")
            if name == RUN_TWICE and not problems:
                _run_all(page)
                page.wait_for_function(RUN_AGAIN_DONE, arg=len(cells), polling=250)
                problems += _output_problems(page, cells, "Run All again")
    finally:  # what the page showed, also when a wait failed
        (ARTIFACTS / f"{name}.log").write_text(log.report(page, last=len(log.lines)) + "\n", encoding="utf-8")
        log.close()
        try:  # a crashed page has no picture: that must not hide why the test failed
            page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        except Exception as exc:
            problems.append(f"no screenshot of the page: {exc}")
        page.close()
        if context is not shared_context:
            context.close()
    external = EXTERNAL[seen:]
    # Pyodide's files that the server sent with a body (a 304 has none) for this lesson
    pyodide_sent = sorted({b for b in handler.bodies[bodies0:] if _file(b) in PYODIDE_CORE or _file(b).endswith(".whl")})
    # the kernel's start is in first_output_s: Run All was clicked before it (run_all_before_kernel)
    METRICS[name] = {"lab_s": round(lab, 1), "run_all_before_kernel": early,
                     "first_output_s": round(first, 1),
                     "done_s": round(done, 1),
                     "bytes_fetched": handler.sent - sent0, "external_requests": len(external),
                     "wasm_bytes_fetched": sum(1 for b in handler.bodies[bodies0:] if _file(b) == "pyodide.asm.wasm")
                     * (handler.root / "static/pyodide/pyodide.asm.wasm").stat().st_size,
                     "pyodide_files_sent": pyodide_sent,
                     "load_average": round(os.getloadavg()[0], 1), "first_visit": FIRST_VISIT or name == NAMES[0],
                     "passed": not problems and not external}
    (ARTIFACTS / "metrics.json").write_text(json.dumps(METRICS, indent=1))
    STDERR_SEEN[stderr0:] = [f"{name}: {line}" for line in STDERR_SEEN[stderr0:]]
    (ARTIFACTS / "stderr.txt").write_text("".join(line + "\n" for line in STDERR_SEEN), encoding="utf-8")
    assert external == [], f"{name}: {len(external)} requests to other hosts: {external[:5]}"
    # the site leaves out the legacy copies of JupyterLab's fonts (notebooks/site.py): the browser asks for none
    fonts = [p for p in handler.missing[missing0:] if p.split("?")[0].endswith((".woff2", ".woff", ".ttf", ".eot", ".svg"))]
    assert fonts == [], f"{name}: the site lacks font files the page asked for: {fonts}"
    assert problems == [], f"{name}:\n" + "\n".join(problems)
    if context is shared_context:
        # a later lesson of the same learner: what an earlier lesson fetched of Pyodide (its core, the wheels)
        # comes from the browser's HTTP cache (at most revalidated: a 304 has no body), as in a learner's
        # Chromium with its disk cache; a wheel no earlier lesson loaded (matplotlib's) is fetched once
        again = [f for f in pyodide_sent if f in SHARED_SENT]
        SHARED_SENT.update(pyodide_sent)
        assert again == [], f"{name}: the server sent these again, to the same browser: {again}"


#: Pyodide's files the server sent with a body to the shared context so far (the lessons before)
SHARED_SENT: set[str] = set()
#: the files of the site's Pyodide a tab loads at each start (the wheels aside)
PYODIDE_CORE = ("pyodide.asm.wasm", "pyodide.asm.js", "python_stdlib_pyc.zip")


def _file(path: str) -> str:
    """The file name of a request's path (its query left out)."""
    return urlsplit(path).path.rsplit("/", 1)[-1]


#: the notebook of the Run All test below (short, prints in its first cell)
EARLY_RUN_ALL = "01_why_dra"


def test_run_all_clicked_before_the_kernel_is_up_runs_once_it_is(site, browser) -> None:
    """A learner opens a lesson by its stable link and clicks Run All at once. JupyterLab alone clears each
    cell whose session has no kernel yet (it ran nothing, without a word: the prompts stay `[ ]`); the site's
    run-when-ready script (notebooks/site_static/run-when-ready.js) makes it wait for the kernel. Here the
    session cannot have a kernel at the click: the kernel extension's module that creates the kernel (the one
    chunk of @jupyterlite/pyodide-kernel-extension that defines `initWorker`, loaded when the notebook starts
    its kernel) is held back until Run All has been clicked; the status bar reads "Python (Pyodide) |
    Initializing" meanwhile. Then every cell runs, in order, with its outputs."""
    base, handler = site
    cells = _code_cells(EARLY_RUN_ALL)
    static = handler.root / "extensions" / "@jupyterlite" / "pyodide-kernel-extension" / "static"
    chunks = [f.name for f in static.glob("*.js") if "initWorker(" in f.read_text(encoding="utf-8", errors="replace")
              and not f.name.startswith("remoteEntry")]
    assert len(chunks) == 1, f"the kernel extension's kernel chunk: {chunks}"
    context = _offline_context(browser)  # its own: a route turns the HTTP cache off
    held: list = []
    released: list[bool] = []
    context.route(lambda url: urlsplit(url).path.endswith("/" + chunks[0]),
                  lambda route: route.continue_() if released else held.append(route))
    page = context.new_page()
    log = PageLog(page, context)
    try:
        with log.explain(page):
            page.goto(f"{base}/lab/index.html?path=notebooks/{EARLY_RUN_ALL}.ipynb", wait_until="commit")
            page.wait_for_function(READY_JS, arg=".jp-NotebookPanel .jp-CodeCell", polling=250)
            status = page.evaluate(f"() => document.querySelector('{STATUS_BAR_KERNEL}')?.textContent.trim()")
            assert not page.evaluate(KERNEL_READY), f"the kernel is up before it could be created: {status}"
            _run_all(page)
            released.append(True)
            for route in held:
                route.continue_()
            page.wait_for_function(RUN_ALL_DONE, arg=len(cells), polling=250)
            prompts = [p.strip() for p in page.locator(".jp-NotebookPanel .jp-CodeCell .jp-InputPrompt").all_inner_texts()]
            assert prompts == [f"[{i}]:" for i in range(1, len(cells) + 1)], prompts
            problems = _output_problems(page, cells, "Run All before the kernel")
            assert problems == [], "\n".join(problems)
            assert page.locator(".jp-NotebookPanel .jp-CodeCell").first.locator(".jp-OutputArea-output").count() > 0
    finally:
        (ARTIFACTS / "run-all-early.log").write_text(log.report(page, last=len(log.lines)) + "\n", encoding="utf-8")
        log.close()
        page.close()
        context.close()


def test_the_default_site_takes_pyodide_from_the_official_cdn(site, browser, tmp_path: Path) -> None:
    """``notebooks/site.py`` with no --pyodide (what a user builds): the kernel asks the official CDN for the
    Pyodide of the npm core's version (aborted here, and it is the only host it asks), and the site's lock
    points the official packages at that CDN and the kit's wheels at the site. The kit loads with the same
    packages as on the site the notebooks ran on above (the CDN has more: protobuf and rich came along)."""
    _site_deps()
    out = tmp_path / "site"
    build = subprocess.run([str(CACHE / "site-venv" / "bin" / "python"), "notebooks/site.py", "--out", str(out)],
                           cwd=ROOT, capture_output=True, text=True)
    assert build.returncode == 0, (build.stdout + build.stderr)[-3000:]
    version = json.loads((CACHE / "pyodide" / "node_modules" / "pyodide" / "package.json").read_text())["version"]
    cdn = f"https://cdn.jsdelivr.net/pyodide/v{version}/full/"
    lock = json.loads((out / "static" / "labkit" / "pyodide-lock.json").read_text())["packages"]
    assert lock["numpy"]["file_name"] == cdn + json.loads(
        (CACHE / "pyodide" / "node_modules" / "pyodide" / "pyodide-lock.json").read_text())["packages"]["numpy"]["file_name"]
    assert (out / "static" / "labkit" / lock["dra-labkit"]["file_name"]).is_file()
    # the kernel's packages and the kit load while Pyodide starts, in one loadPackage; the drawing library
    # only when the kit's drawing code imports it (labkit.browser)
    kernel = json.loads((out / "jupyter-lite.json").read_text())["jupyter-config-data"]["litePluginSettings"][
        "@jupyterlite/pyodide-kernel-extension:kernel"]
    assert {"piplite", "ipykernel", "pyodide-kernel", "ipython", "dra-labkit"} <= set(
        kernel["loadPyodideOptions"]["packages"]), kernel
    assert all((out / "static" / "labkit" / lock[n]["file_name"]).is_file() for n in ("piplite", "pyodide-kernel"))
    assert "matplotlib" not in lock["dra-labkit"]["depends"] and "matplotlib" in lock
    tested = json.loads((site[1].root / "static/pyodide/pyodide-lock.json").read_text())["packages"]
    assert lock["dra-labkit"]["depends"] == tested["dra-labkit"]["depends"]
    # the kit's wheel carries bytecode of the CDN's Pyodide, beside its source (notebooks/wheel_bytecode.py)
    python = json.loads((CACHE / "pyodide" / "node_modules" / "pyodide" / "pyodide-lock.json").read_text())["info"]["python"]
    with zipfile.ZipFile(out / "static" / "labkit" / lock["dra-labkit"]["file_name"]) as zf:
        assert {"labkit/cluster/base.py", f"labkit/cluster/__pycache__/base.cpython-{''.join(python.split('.')[:2])}.pyc"
                } <= set(zf.namelist())
    assert not (out / "static" / "pyodide").exists()
    # the CDN Pyodide's standard library with its bytecode, from the site (the kernel resolves the URL)
    assert kernel["loadPyodideOptions"]["stdLibURL"] == "./static/labkit/python_stdlib_pyc.zip"
    with zipfile.ZipFile(out / "static" / "labkit" / "python_stdlib_pyc.zip") as zf:
        assert "dataclasses.pyc" in zf.namelist()

    handler = type("Handler", (_Handler,), {"sent": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(out)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    context = browser.new_context()
    context.set_default_timeout(HANG * 1000)
    external: list[str] = []

    # recorded from the request event (the route's handler may run after the wait below is over)
    context.on("request", lambda r: None if urlsplit(r.url).hostname in ("127.0.0.1", None)
               or r.url.startswith(("data:", "blob:")) else external.append(r.url))
    context.route("**/*", lambda r: r.continue_() if urlsplit(r.request.url).hostname == "127.0.0.1" else r.abort())
    page = context.new_page()
    try:
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/lab/index.html?path=notebooks/01_why_dra.ipynb",
                  wait_until="commit")
        page.wait_for_function(READY_JS, arg=".jp-NotebookPanel .jp-CodeCell", polling=250)
        with context.expect_event("request", predicate=lambda r: urlsplit(r.url).hostname != "127.0.0.1",
                                  timeout=HANG * 1000) as first:
            _run_all(page)
    finally:
        context.close()
        server.shutdown()
        server.server_close()
    assert first.value.url == cdn + "pyodide.mjs", external
    assert external and all(url.startswith(cdn) for url in external), external
