# pytfrt developer loop. `make help` lists the targets.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
# pytest-xdist: two workers (the reference machine has 2 cores; each worker holds its own
# TensorFlow, so more workers cost memory more than they save time); work-stealing evens out
# files of very different lengths.  PYTEST_WORKERS= runs in one process.
PYTEST_WORKERS ?= -n 2 --dist worksteal
PIP     = $(VENV)/bin/pip
# pipefail: a failing pip is not hidden by the filter its output goes through.
SHELL  := /bin/bash
.SHELLFLAGS := -o pipefail -c

.PHONY: help venv install install-test demo test lint typecheck bench clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	touch $@

$(VENV)/.installed: $(VENV)/.created pyproject.toml setup.py src/pytfrt/_eager_fast.c src/pytfrt/serving/_json_scan.c
	@echo "== installing pytfrt[tf] into $(VENV) (about 3 minutes on a fresh machine)"
	$(PIP) install -e '.[tf]' | sed '/^Requirement already satisfied/d'  # the demo compiles a Keras model
	touch $@

$(VENV)/.installed-test: $(VENV)/.created pyproject.toml setup.py src/pytfrt/_eager_fast.c src/pytfrt/serving/_json_scan.c tests/plugins/pytfrt_example_plugin/pyproject.toml
	@echo "== installing pytfrt[test] into $(VENV): TensorFlow, ONNX, torch, JAX, Ray (about 3-5 minutes on a fresh machine)"
	$(PIP) install -e '.[test]' | sed '/^Requirement already satisfied/d'
	$(PIP) install --quiet --no-deps 'tensorflow-serving-api>=2.16'  # TF Serving's client, for the gRPC tests (see pyproject.toml)
	$(PIP) install --quiet -e tests/plugins/pytfrt_example_plugin  # entry-point plugin fixture
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed  ## create .venv and install pytfrt (with the tf extra)

install-test: $(VENV)/.installed-test  ## create .venv and install pytfrt with the test extra

demo: install  ## run the main job: compile Keras ResNet-50 with pytfrt and run it against TensorFlow
	$(VENV)/bin/pytfrt demo

test: install-test  ## run the whole test suite (pytest, including the lit suite), one worker per core
	$(PY) -m pytest -q $(PYTEST_WORKERS)

lint: install-test  ## ruff (rules in pyproject.toml), then mypy
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

bench: install  ## install the bench extra and run the benchmarks
	$(PIP) install --quiet -e '.[bench]'
	$(PY) benchmarks/host.py

clean:  ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build
