"""The course site's front door (issue #43, item 4): the landing page that notebooks/site.py writes lists
every lesson by its title, with what it teaches and its minutes, grouped (basics, scheduling, hardware,
platform, research), each linked by its stable address `lab/index.html?path=notebooks/<file>.ipynb`; plain
HTML and a small stylesheet; no warning about Run All (the lab runs a Run All clicked before the kernel is
up once it is: tests/site/test_browser_site.py). All of it comes from the lessons' front matter
(tools/lessons.py: `group`, `learn`, `minutes`; the title is the lesson's first heading).

The page's HTML is checked here from the builder's own function; in the `site` lane the built site is
served on 127.0.0.1 and opened in Chromium: the stylesheet applies, a link opens its notebook in the lab,
and a screenshot goes to test-artifacts/site/landing.png.
"""

from __future__ import annotations

import html.parser
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from tests.browser_lab import READY_JS, missing_requirements
from tests.paths import REPO
from tests.site import test_browser_site
from tests.site.test_browser_site import ARTIFACTS, _offline_context

ROOT = REPO
NOTEBOOKS = ROOT / "notebooks"
GROUP_ORDER = ["basics", "scheduling", "hardware", "platform", "research"]
site = test_browser_site.site  # the site lane's fixtures: the built site on 127.0.0.1, Chromium
browser = test_browser_site.browser


@cache
def _site_module():
    """notebooks/site.py (a script beside the notebooks, not a package)."""
    spec = importlib.util.spec_from_file_location("labkit_notebooks_site", NOTEBOOKS / "site.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _lessons() -> list[dict]:
    out = subprocess.run([sys.executable, str(ROOT / "tools/lessons.py"), "json"], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


class _Page(html.parser.HTMLParser):
    """Sections (h2 id -> heading) and, per section, each list item's link, text and paragraphs."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[tuple[str, str]] = []
        self.items: dict[str, list[dict]] = {}
        self.stylesheets: list[str] = []
        self.text: list[str] = []
        self._h2: str | None = None
        self._item: dict | None = None
        self._in: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "link" and a.get("rel") == "stylesheet":
            self.stylesheets.append(str(a.get("href")))
        if tag == "h2":
            self._h2 = str(a.get("id") or "")
            self.sections.append((self._h2, ""))
        if tag == "li" and self._h2 is not None:
            self._item = {"href": None, "title": "", "p": []}
            self.items.setdefault(self._h2, []).append(self._item)
        if tag == "a" and self._item is not None and self._item["href"] is None:
            self._item["href"] = a.get("href")
        if tag == "p" and self._item is not None:
            self._item["p"].append("")
        self._in.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "li":
            self._item = None
        while self._in and self._in.pop() != tag:
            pass

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if "h2" in self._in and self.sections:
            self.sections[-1] = (self.sections[-1][0], self.sections[-1][1] + data)
        if self._item is None:
            return
        if "p" in self._in:
            self._item["p"][-1] += data
        elif "a" in self._in:
            self._item["title"] += data


def _parsed() -> _Page:
    page = _Page()
    page.feed(_site_module().landing_page(""))
    return page


def test_the_landing_page_lists_every_lesson_by_group_with_title_what_it_teaches_and_minutes() -> None:
    page = _parsed()
    lessons = _lessons()
    groups = [g for g in GROUP_ORDER if any(x["group"] == g for x in lessons)]
    assert [s for s, _ in page.sections if s in GROUP_ORDER] == groups == GROUP_ORDER
    assert [h.strip() for s, h in page.sections if s in GROUP_ORDER] == [g.capitalize() for g in GROUP_ORDER]
    for x in lessons:
        item = [i for i in page.items[x["group"]] if i["href"] == f"lab/index.html?path=notebooks/{x['name']}.ipynb"]
        assert len(item) == 1, (x["name"], page.items[x["group"]])
        heading = next(ln for ln in (NOTEBOOKS / f"{x['name']}.md").read_text().splitlines() if ln.startswith("# "))
        assert " ".join(item[0]["title"].split()) == f"{x['number']}" + heading.split("·", 1)[1].strip()
        learn, meta = (" ".join(p.split()) for p in item[0]["p"][:2])
        assert learn == x["learn"].replace("`", ""), learn
        assert meta.startswith(f"{x['minutes']} min"), meta
        assert (NOTEBOOKS / f"{x['name']}.ipynb").is_file()
    # every lesson once, in number order within its group
    assert sum(len(v) for k, v in page.items.items() if k in GROUP_ORDER) == len(lessons)
    for group in GROUP_ORDER:
        numbers = [re.search(r"notebooks/(\d\d)_", i["href"])[1] for i in page.items[group]]
        assert numbers == sorted(numbers)


def test_the_landing_page_is_plain_html_with_a_stylesheet_and_no_run_all_warning() -> None:
    page = _parsed()
    builder = _site_module()
    assert page.stylesheets == [f"{builder.SITE_STATIC_DIR}/landing.css"]
    assert (builder.SITE_STATIC / "landing.css").is_file()
    text = " ".join("".join(page.text).split())
    assert "Run All" not in text and "Idle" not in text and "drops it" not in text
    assert "<script" not in builder.landing_page("").replace('<script id="jupyter-config-data"', "")


def test_a_lesson_without_a_known_group_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    shutil.copy(ROOT / "tools/lessons.py", tmp_path / "tools/lessons.py")
    shutil.copytree(NOTEBOOKS, tmp_path / "notebooks", ignore=shutil.ignore_patterns("*.ipynb", "solutions"))
    src = tmp_path / "notebooks/05_sharing.md"
    src.write_text(src.read_text().replace("  group: hardware\n", "  group: gpus\n", 1))
    out = subprocess.run([sys.executable, str(tmp_path / "tools/lessons.py"), "json"], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr == ("tools/lessons.py: 05_sharing.md: lesson.group: 'gpus'; use one of basics, scheduling, "
                          "hardware, platform, research\n")


@pytest.mark.browser
@pytest.mark.site
@pytest.mark.skipif(missing_requirements() is not None, reason=missing_requirements() or "")
def test_the_built_site_opens_on_its_landing_page_and_a_lesson_link_opens_the_lesson(site, browser) -> None:
    """The built site (tests/site/test_browser_site.py's `site`: notebooks/site.py, served on 127.0.0.1) in
    Chromium: the landing page is styled by its stylesheet, has no script of its own, and a lesson's link
    opens that notebook in the lab. Screenshot: test-artifacts/site/landing.png."""
    base, _ = site
    context = _offline_context(browser)
    page = context.new_page()
    try:
        page.goto(f"{base}/index.html")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "landing.png"), full_page=True)
        assert page.evaluate("() => getComputedStyle(document.querySelector('ol.lessons')).display") == "grid"
        assert [h.lower() for h in page.locator("main h2").all_inner_texts()] == GROUP_ORDER
        link = page.locator('a[href="lab/index.html?path=notebooks/14_rack_scale_nvlink.ipynb"]')
        assert "Rack-scale NVLink" in link.inner_text()
        link.click()
        page.wait_for_function(READY_JS, arg=".jp-NotebookPanel .jp-CodeCell", polling=250)
        heading = page.locator(".jp-NotebookPanel .jp-MarkdownCell h1").first
        heading.wait_for()
        assert heading.inner_text().startswith("14 · Rack-scale NVLink"), heading.inner_text()
    finally:
        page.close()
        context.close()
