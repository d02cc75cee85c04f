#!/usr/bin/env bash
# The full-size reliability runs of issue 17 (driver faults on kind with 200 claims, 20 up/down
# cycles of local and kind, interrupted ups); counts in test-artifacts/reliability.json.
# Not part of `make test` (tests/e2e/test_kind_faults.py and tests/e2e/test_lifecycle_leaks.py run the
# same code, small). Arguments go to tools/reliability.py (e.g. --only faults --claims 300).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
cd "$ROOT"
exec bash tools/with-kind.sh "$PY" tools/reliability.py "$@"
