# DRA LabKit. Two commands matter to a newcomer:  make lab   and   make test
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# a learner's install: the kit + the `notebooks` extra only (no test tools); a dev install covers it
LAB_STAMP := $(VENV)/.installed-lab
LAB_PORT ?= 8888
# CI sets CI=true; the full test run then also builds the Go oracle and the local control plane
export LABKIT_CACHE ?= $(HOME)/.cache/dra-labkit
# the CEL tests compare with Kubernetes' own CEL code when this binary exists (make oracle builds it)
export LABKIT_CEL_ORACLE ?= $(LABKIT_CACHE)/cel-oracle/cel-oracle

.PHONY: lab test test-suites setup lint check unit notebooks notebooks-local oracle controlplane helm actionlint browser-deps shell-deps pyodide-deps site site-venv site-serve \
        kind-engine kind-engine-stop kind-images notebooks-kind reliability clean help

help:
	@echo "make lab    - set up and open JupyterLab on notebooks/ (sim backend)"
	@echo "make test   - set up and run every test (lint, unit, differential, local, notebooks, browser)"
	@echo "make check  - the quick check before a commit: lint, types and the fast tests (about 2 min)"

# installs go through uv (from PyPI, into the venv): a warm dev install takes ~7 s where pip took
# ~60 s; pip does it when uv cannot be had. tools/uv-excludes.txt: what uv leaves out, and why
INSTALL = $(PY) -m pip install -q uv && $(VENV)/bin/uv pip install -q --python $(PY) \
            --excludes tools/uv-excludes.txt -e '.[$(1)]' \
          && $(VENV)/bin/uv pip uninstall -q --python $(PY) -r tools/uv-excludes.txt \
          || $(PY) -m pip install -q -e '.[$(1)]'

$(STAMP): pyproject.toml tools/uv-excludes.txt
	$(PYTHON) -m venv $(VENV)
	$(call INSTALL,dev)
	touch $(STAMP)

setup: $(STAMP)

$(LAB_STAMP): pyproject.toml tools/uv-excludes.txt
	@if [ -f $(STAMP) ] && [ ! pyproject.toml -nt $(STAMP) ]; then \
	  echo "$(VENV) has the dev install, which includes the lab"; \
	else \
	  $(PYTHON) -m venv $(VENV) && { $(call INSTALL,notebooks); }; \
	fi
	touch $(LAB_STAMP)

# JupyterLab refuses to run as root without --allow-root (containers, CI machines)
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(LAB_STAMP)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks --ServerApp.port=$(LAB_PORT) $(ROOT_FLAG) $(LAB_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check labkit fake_gpus tests tools benchmarks notebooks
	$(VENV)/bin/lint-imports --no-cache
	$(PY) tools/check_imports.py
	$(VENV)/bin/mypy

# the allocator oracles of every release the profiles offer (cached: a build is skipped when up to date)
oracle:
	bash tools/build-oracle.sh 0.37 0.38 0.36 0.35 0.34
	bash tools/build-cel-oracle.sh

controlplane:
	bash tools/build-controlplane.sh

# Kubernetes 1.38 beside the default (issue 42 item 8): its control plane, for the `local` smoke test
# tests/local/test_local_138.py (skipped until built). Not part of `make test`, which runs the real-cluster lanes on
# the default version only: a cold build took 13.3 CPU-minutes (801 s user+sys; ~7 min on 2 quiet cores, measured
# 2026-12-05), over the issue's 3 minutes - Go 1.27 shares no build cache with the default's Go 1.26. Cached: 0 s.
# The 1.38 kind node image, after this: bash tools/kind-node/build-minor.sh 1.38 (tools/kind-node/README.md)
.PHONY: controlplane-138
controlplane-138:
	bash tools/build-controlplane.sh 1.38

# helm for the fake driver's chart tests, built from the Go module proxy (cached by version)
helm:
	bash tools/build-helm.sh

# actionlint for the workflow test (tests/packaging/test_workflows_actionlint.py), built from the Go module proxy
# (pinned, cached in $(LABKIT_CACHE)/bin)
actionlint:
	bash tools/build-actionlint.sh

browser-deps:
	bash tools/install-browser-deps.sh
# zsh and fish for the completion tests (Debian's packages; a few MB)
shell-deps:
	bash tools/install-shell-deps.sh

# the course as a static JupyterLite site (notebooks/site.py): build/site, served on 127.0.0.1 by site-serve.
# Its build environment (jupyterlite-core + pyodide kernel 0.8.6, widget extensions) lives in the cache.
SITE_VENV := $(LABKIT_CACHE)/site-venv
SITE_PORT ?= 8000
# tools/uv-excludes.txt: left out here too (rfc3987-syntax's Lark grammars: ~4.5 CPU-s at each jupyter lite
# build's import of jsonschema), and uninstalled from a venv made before (the stamp depends on the list)
SITE_INSTALL = $(1)/bin/python -m pip install -q uv \
  && $(1)/bin/uv pip install -q --python $(1)/bin/python --excludes tools/uv-excludes.txt $(2) \
  && $(1)/bin/uv pip uninstall -q --python $(1)/bin/python -r tools/uv-excludes.txt
$(SITE_VENV)/.installed: tools/uv-excludes.txt
	$(PYTHON) -m venv $(SITE_VENV)
	$(call SITE_INSTALL,$(SITE_VENV),jupyterlite-core==0.8.6 \
	  jupyterlite-pyodide-kernel==0.8.6 jupyter_server jupyterlab_widgets anywidget jupytext setuptools wheel)
	touch $@

# the JupyterLite kernel that fits Pyodide 0.27 (the verified local copy: `make site SITE_PYODIDE=verified`)
SITE_VENV_VERIFIED := $(LABKIT_CACHE)/site-venv-pyodide-0.27
$(SITE_VENV_VERIFIED)/.installed: tools/uv-excludes.txt
	$(PYTHON) -m venv $(SITE_VENV_VERIFIED)
	$(call SITE_INSTALL,$(SITE_VENV_VERIFIED),jupyterlite-core==0.5.1 \
	  jupyterlite-pyodide-kernel==0.5.2 jupyter_server jupyterlab_widgets anywidget jupytext packaging setuptools wheel)
	touch $@

site-venv: $(SITE_VENV)/.installed $(SITE_VENV_VERIFIED)/.installed

# SITE_PYODIDE: cdn (the official CDN, the default), verified (self-contained, drawing included: the official
# Pyodide 0.27.7 core and its wheels, each checked against its lock), or the folder of an official Pyodide
SITE_PYODIDE ?= cdn
site: site-venv pyodide-deps
	$(if $(filter verified,$(SITE_PYODIDE)),$(SITE_VENV_VERIFIED),$(SITE_VENV))/bin/python notebooks/site.py \
	  --pyodide $(SITE_PYODIDE) $(SITE_ARGS)

site-serve:
	@test -f build/site/index.html || { echo "no site yet: make site"; exit 2; }
	$(PY) -m http.server --directory build/site --bind 127.0.0.1 $(SITE_PORT)

# official Pyodide (npm) and the pure-Python wheels of the sim path, into $(LABKIT_CACHE)/pyodide (once)
pyodide-deps: $(STAMP)
	PYTHON=$(PY) bash tools/pyodide-deps.sh

unit: $(STAMP)
	$(VENV)/bin/pytest tests

# the quick check before a commit (issue 44): lint (ruff, import contracts, types) and the fast tests,
# two pytest workers; heavy modules carry `pytestmark = pytest.mark.slow` and wait for `make test`
CHECK_TESTS = not slow and not oracle and not local and not kind and not browser and not site
check: lint
	$(VENV)/bin/pytest tests -q -p no:cacheprovider -n 2 -m "$(CHECK_TESTS)" --junitxml=test-artifacts/check.xml

notebooks: $(STAMP)
	$(VENV)/bin/pytest -p no:cacheprovider --nbval-lax --nbval-current-env notebooks

# the notebooks that must also pass on the real control plane (needs `make controlplane`): the
# lessons whose front matter lists `local` in lesson.backends (tools/lessons.py)
# (a broken front matter gives a name no file has, so the lane fails instead of running nothing)
LOCAL_NOTEBOOKS := $(shell python3 tools/lessons.py notebooks --backend local || echo notebooks/LESSON-FRONT-MATTER-BROKEN)
notebooks-local: $(STAMP)
	LABKIT_BACKEND=local $(VENV)/bin/pytest -p no:cacheprovider --nbval-lax --nbval-current-env $(LOCAL_NOTEBOOKS)

# the kind tests' engine and images (make test does this itself through tools/with-kind.sh):
# a running Docker/Podman, else Debian's dockerd started under $(LABKIT_CACHE)/engine
kind-engine:
	bash tools/container-engine.sh start
	@bash tools/container-engine.sh env
kind-engine-stop:
	bash tools/container-engine.sh stop
# the offline kind node image (cached tarball: a docker load) + the driver and workload images
kind-images: kind-engine
	eval "$$(bash tools/container-engine.sh env)" && bash tools/build-kind-node-image.sh && bash tools/build-test-images.sh

# every suite runs inside tools/with-kind.sh: engine up (stopped again at the end, also on
# failure), kind node image loaded, DOCKER_HOST / LABKIT_KIND_NODE_IMAGE / PATH set for the kind tests
test: $(STAMP) lint oracle controlplane helm actionlint browser-deps shell-deps
	bash tools/with-kind.sh $(MAKE) --no-print-directory test-suites

# nine lanes at once (tools/test-lanes.sh): main (the library), shipped (packaging: the wheel, the lint rules;
# security: the fuzzers), cli (the CLI, experiments, course build), allocator (tests/allocator), local (the tests on the local control
# plane), course (browser, then the notebooks on sim and on local), site (the JupyterLite course in
# Chromium), kind (the e2e) and faults (driver faults on kind); LABKIT_TEST_LANES=serial
# runs them one after the other
test-suites: $(STAMP)
	bash tools/test-lanes.sh $(LOCAL_NOTEBOOKS)

# the notebooks that must also pass on a real kind cluster (one cluster per profile); make test runs
# them inside tests/e2e/test_cluster_kind_e2e.py, on the clusters that test already has up
notebooks-kind: $(STAMP)
	bash tools/with-kind.sh bash tools/kind-notebooks.sh

# issue 17's full-size runs (faults on kind with 200 claims, 20 up/down cycles); not part of test
reliability: $(STAMP)
	PYTHON=$(PY) bash tools/reliability.sh $(RELIABILITY_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
