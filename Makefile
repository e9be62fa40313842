# Two entry points that do all set-up on a fresh machine (stock image, Python 3.11+):
#   make demo   runs a scripted stack_blocks episode on the twin and prints its outcome
#   make test   runs the linters (make lint), then the test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

export MUJOCO_GL ?= egl

.PHONY: demo lint test test-fast venv clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[all]"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/pyrua-dojo demo

# ruff (pyproject.toml [tool.ruff]) and the layer contract (.importlinter)
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

test: lint
	$(PY) -m pytest -q $(PYTEST_ARGS)

# the inner loop: everything but the tests marked slow (whole twin episodes, benchmarks)
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow" $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info
