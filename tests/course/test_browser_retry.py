"""The browser tests' one retry (tests/browser_lab.py once_more_if_network_changed): only for Chromium's
dropped requests after a host network change, once, and the second run must pass on its own."""

from __future__ import annotations

import pytest

from tests.browser_lab import NETWORK_CHANGED, once_more_if_network_changed


def _runs(*outcomes: str | None):
    """A test body that fails with each outcome's text in turn (None: passes); the calls it got."""
    calls: list[int] = []

    def run() -> None:
        calls.append(1)
        outcome = outcomes[len(calls) - 1]
        if outcome is not None:
            raise AssertionError(outcome)
    return run, calls


def test_a_run_that_passes_runs_once() -> None:
    run, calls = _runs(None)
    assert once_more_if_network_changed(run, evidence=lambda: NETWORK_CHANGED) is False
    assert len(calls) == 1


def test_a_failure_without_the_network_change_fails_at_once() -> None:
    run, calls = _runs("no picture in cell 4", None)
    set_aside: list[int] = []
    with pytest.raises(AssertionError, match="no picture in cell 4"):
        once_more_if_network_changed(run, evidence=lambda: "GET /lab: HTTP 500", set_aside=lambda: set_aside.append(1))
    assert len(calls) == 1 and not set_aside


def test_a_failure_after_the_network_changed_runs_once_more_and_keeps_the_first_log() -> None:
    run, calls = _runs("Failed to fetch", None)
    set_aside: list[int] = []
    log = f"GET http://127.0.0.1:8123/pyodide/yaml.whl: {NETWORK_CHANGED}"
    assert once_more_if_network_changed(run, evidence=lambda: log, set_aside=lambda: set_aside.append(1)) is True
    assert len(calls) == 2 and set_aside == [1]


def test_the_second_run_must_pass_on_its_own() -> None:
    run, calls = _runs("Failed to fetch", "Failed to fetch again")
    with pytest.raises(AssertionError, match="again"):
        once_more_if_network_changed(run, evidence=lambda: NETWORK_CHANGED)
    assert len(calls) == 2
