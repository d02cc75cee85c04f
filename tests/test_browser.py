"""Real browser: JupyterLab + Debian Chromium + Playwright build a claim with the ClaimBuilder, click
Allocate, read the placement and save a screenshot (test-artifacts/browser/)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.browser_lab import ARTIFACTS, jupyter_lab, launch, missing_requirements, wait_kernel_idle

HERE = Path(__file__).resolve().parent
pytestmark = [pytest.mark.browser, pytest.mark.skipif(missing_requirements() is not None,
                                                      reason=missing_requirements() or "")]


def _run_all_cells(page, count: int) -> None:
    for i in range(count):
        page.locator(".jp-NotebookPanel .jp-Cell").nth(i).click()
        page.keyboard.press("Shift+Enter")


def test_claim_builder_allocates_in_a_real_browser(tmp_path: Path):
    from playwright.sync_api import expect, sync_playwright

    shutil.copy(HERE / "browser" / "claim_builder.ipynb", tmp_path / "claim_builder.ipynb")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with jupyter_lab(tmp_path) as base, sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1600})
        page.goto(f"{base}/lab/workspaces/claim-builder/tree/claim_builder.ipynb?reset")
        page.wait_for_selector(".jp-NotebookPanel .jp-CodeCell", timeout=60_000)
        wait_kernel_idle(base, "claim_builder.ipynb")
        _run_all_cells(page, 3)
        builder = page.locator(".labkit-claim-builder")
        expect(builder).to_be_visible(timeout=60_000)

        # two GPUs with at least 40Gi each
        count = builder.locator(".labkit-count input")
        count.fill("2")
        count.press("Enter")
        builder.locator(".labkit-add-filter").click()
        builder.locator(".labkit-filter-name input").fill("memory")
        builder.locator(".labkit-filter-name input").press("Enter")
        builder.locator(".labkit-filter-value input").fill("40Gi")
        builder.locator(".labkit-filter-value input").press("Enter")
        expect(builder.locator(".labkit-preview")).to_contain_text("8 of 16 devices", timeout=30_000)

        builder.locator(".labkit-allocate").click()
        result = builder.locator(".labkit-result-text")
        expect(result).to_contain_text("allocated on dgx-a100-0: gpu-0, gpu-1", timeout=60_000)
        # the placement picture really rendered (a broken <img> is visible too, with no pixels)
        page.wait_for_function(
            "() => { const i = document.querySelector('.labkit-claim-builder img');"
            " return i && i.complete && i.naturalWidth > 600; }", timeout=60_000)
        page.locator(".labkit-claim-builder img").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "claim_builder.png"), full_page=True)
        browser.close()
    assert (ARTIFACTS / "claim_builder.png").stat().st_size > 20_000
