"""Where the tests' files are, for a test module in any folder (tests/<area>/, issue 44 item 5): use these
instead of climbing from `__file__`, which changes with the folder."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
TEST_DATA = TESTS / "data"
