"""Real browser: JupyterLab + Debian Chromium + Playwright build a claim with the ClaimBuilder, click
Allocate, read the placement and save a screenshot (test-artifacts/browser/). And a JupyterLab error
dialog fails a browser test with its text (tests/browser_lab.py)."""

from __future__ import annotations

import pytest

from tests.browser_lab import (
    ARTIFACTS,
    course_lab,
    missing_requirements,
    new_page,
    open_lab,
    shutdown_kernels,
    wait_kernel_idle,
)

pytestmark = [pytest.mark.browser, pytest.mark.skipif(missing_requirements() is not None,
                                                      reason=missing_requirements() or "")]


def _run_all_cells(page, count: int) -> None:
    for i in range(count):
        page.locator(".jp-NotebookPanel .jp-Cell").nth(i).click()
        page.keyboard.press("Shift+Enter")


@pytest.fixture(scope="module")
def lab_browser(request):
    """The session's JupyterLab (its root holds the claim builder notebook) and Chromium (browser_lab.course_lab)."""
    _, lab, browser = course_lab(request.config)
    yield lab, browser
    shutdown_kernels(lab.base)


def test_a_jupyterlab_error_dialog_fails_the_test_with_its_text(lab_browser):
    """What issue 28 met under load, made certain: the theme's stylesheet fails to load, JupyterLab
    shows "Error Loading Theme"; opening the notebook must fail saying so (not time out on a click)."""
    lab, browser = lab_browser
    page, watch = new_page(browser, lab)
    page.route("**/lab/api/themes/**/index.css", lambda route: route.abort())
    with pytest.raises(AssertionError) as failure:
        open_lab(page, watch, f"{lab.base}/lab/workspaces/broken-theme?reset", ".jp-Launcher")
    message = str(failure.value)
    assert "JupyterLab showed a dialog: Error Loading Theme — Stylesheet failed to load: " in message, message
    assert "theme-light-extension/index.css: net::ERR_FAILED" in message, message
    page.close()


def test_claim_builder_allocates_in_a_real_browser(lab_browser):
    from playwright.sync_api import expect

    lab, browser = lab_browser
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page, watch = new_page(browser, lab, viewport={"width": 1400, "height": 1600})
    with watch.explain():
        open_lab(page, watch, f"{lab.base}/lab/workspaces/claim-builder/tree/claim_builder.ipynb?reset",
                 ".jp-NotebookPanel .jp-CodeCell")
        wait_kernel_idle(lab.base, "claim_builder.ipynb")
        _run_all_cells(page, 3)
        builder = page.locator(".labkit-claim-builder")
        expect(builder).to_be_visible()

        # two GPUs with at least 40Gi each
        count = builder.locator(".labkit-count input")
        count.fill("2")
        count.press("Enter")
        builder.locator(".labkit-add-filter").click()
        builder.locator(".labkit-filter-name input").fill("memory")
        builder.locator(".labkit-filter-name input").press("Enter")
        builder.locator(".labkit-filter-value input").fill("40Gi")
        builder.locator(".labkit-filter-value input").press("Enter")
        expect(builder.locator(".labkit-preview")).to_contain_text("8 of 16 devices")

        builder.locator(".labkit-allocate").click()
        result = builder.locator(".labkit-result-text")
        expect(result).to_contain_text("allocated on dgx-a100-0: gpu-0, gpu-1")
        # the placement picture really rendered (a broken <img> is visible too, with no pixels)
        page.wait_for_function(
            "() => { const i = document.querySelector('.labkit-claim-builder img');"
            " return i && i.complete && i.naturalWidth > 600; }")
        page.locator(".labkit-claim-builder img").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "claim_builder.png"), full_page=True)
    page.close()
    assert (ARTIFACTS / "claim_builder.png").stat().st_size > 20_000
