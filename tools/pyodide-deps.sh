#!/usr/bin/env bash
# Fetches, once, what the kit needs to run in WebAssembly CPython (Pyodide) into
# $LABKIT_CACHE/pyodide: the official Pyodide core from npm (`pyodide`, wasm + stdlib + pyodide-lock.json,
# no package wheels) and the pure-Python wheels of the sim path's dependencies from PyPI (PyYAML has no
# wasm wheel: its sdist, whose lib/yaml is pure Python). Versions are pinned; a second run does nothing.
# Used by tests/test_pyodide_node.py (Pyodide under Node.js) and by the JupyterLite site.
set -euo pipefail
PYODIDE_VERSION=314.0.7
# the sim path's pure-Python imports: yaml, celpy (+ lark, pendulum, dateutil, six, jmespath, tzdata:
# Pyodide has no system time-zone database, and cel-python looks up UTC), networkx, tqdm
WHEELS="cel-python==0.5.0 lark==1.3.1 pendulum==3.3.0 python-dateutil==4.0.0 six==1.17.0 jmespath==1.1.0
        tzdata==2026.6 networkx==3.7 tqdm==4.70.1"
SDISTS="PyYAML==6.0.4"
CACHE=${LABKIT_CACHE:-$HOME/.cache/dra-labkit}/pyodide
PY=${PYTHON:-python3}
STAMP="$CACHE/.done-$PYODIDE_VERSION-$(echo "$WHEELS $SDISTS" | md5sum | cut -c1-12)"
[ -f "$STAMP" ] && { echo "$CACHE"; exit 0; }
command -v npm >/dev/null || { echo "pyodide-deps: npm not found (apt-get install npm)" >&2; exit 2; }
mkdir -p "$CACHE/dist"
npm install --silent --no-audit --no-fund --prefix "$CACHE" "pyodide@$PYODIDE_VERSION" >&2
# shellcheck disable=SC2086
"$PY" -m pip download -q --only-binary=:all: --no-deps --platform any --python-version 3.13 \
  --implementation py -d "$CACHE/dist" $WHEELS >&2
# shellcheck disable=SC2086
"$PY" -m pip download -q --no-binary=:all: --no-deps --no-build-isolation -d "$CACHE/dist" $SDISTS >&2
touch "$STAMP"
echo "$CACHE"
