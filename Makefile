# DRA LabKit. Two commands matter to a newcomer:  make lab   and   make test
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LAB_PORT ?= 8888
# CI sets CI=true; the full test run then also builds the Go oracle and the local control plane
export LABKIT_CACHE ?= $(HOME)/.cache/dra-labkit
# the CEL tests compare with Kubernetes' own CEL code when this binary exists (make oracle builds it)
export LABKIT_CEL_ORACLE ?= $(LABKIT_CACHE)/cel-oracle/cel-oracle

.PHONY: lab test setup lint unit notebooks notebooks-local oracle controlplane browser-deps clean help

help:
	@echo "make lab    - set up and open JupyterLab on notebooks/ (sim backend)"
	@echo "make test   - set up and run every test (lint, unit, differential, local, notebooks, browser)"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

# JupyterLab refuses to run as root without --allow-root (containers, CI machines)
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks --ServerApp.port=$(LAB_PORT) $(ROOT_FLAG) $(LAB_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check labkit fake_gpus tests tools benchmarks notebooks
	$(VENV)/bin/lint-imports --no-cache
	$(PY) tools/check_imports.py

# the allocator oracles of every release the profiles offer (cached: a build is skipped when up to date)
oracle:
	bash tools/build-oracle.sh 0.37 0.36 0.35 0.34
	bash tools/build-cel-oracle.sh

controlplane:
	bash tools/build-controlplane.sh

browser-deps:
	bash tools/install-browser-deps.sh

unit: $(STAMP)
	$(VENV)/bin/pytest tests

notebooks: $(STAMP)
	$(VENV)/bin/pytest -p no:cacheprovider --nbval-lax --nbval-current-env notebooks

# the notebooks that must also pass on the real control plane (needs `make controlplane`)
LOCAL_NOTEBOOKS := $(wildcard notebooks/03_*.ipynb notebooks/04_*.ipynb notebooks/05_*.ipynb notebooks/06_*.ipynb notebooks/07_*.ipynb)
notebooks-local: $(STAMP)
	LABKIT_BACKEND=local $(VENV)/bin/pytest -p no:cacheprovider --nbval-lax --nbval-current-env $(LOCAL_NOTEBOOKS)

test: $(STAMP) lint oracle controlplane browser-deps
	$(VENV)/bin/pytest tests
	$(VENV)/bin/pytest -p no:cacheprovider --nbval-lax --nbval-current-env notebooks
	LABKIT_BACKEND=local $(VENV)/bin/pytest -p no:cacheprovider --nbval-lax --nbval-current-env $(LOCAL_NOTEBOOKS)

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
