# Both entry points bootstrap their own virtual environment (.venv) on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SHARED ?= ../shared

.PHONY: demo test test-fast bench venv clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m atlascat.demo

PYTEST := OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m pytest -n 2 -q

# two passes: every test not marked slow first (a failure shows in minutes), then the slow ones
# (README and docs examples run as written, long fits), handed out one by one so that the
# longest, which run first (tests/conftest.py), spread over both workers; CI (.ci/run) runs both
test: test-fast
	$(PYTEST) -m slow --maxschedchunk 1 tests

test-fast: $(STAMP)
	$(PYTEST) -m "not slow" tests

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
