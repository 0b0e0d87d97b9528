# Two entry points for a fresh machine: `make draft_sweep` and `make test`.
# Each creates the analysis environment (.venv) first; the workflow builds the engine itself.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP_QUIET := 2>&1 | grep -v -e "is ignored: it is neither a file nor a directory" || true

.PHONY: env draft_sweep test test-fast lint clean
env: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip $(PIP_QUIET)
	$(BIN)/pip install -q -e '.[dev]' $(PIP_QUIET)
	$(BIN)/python -c "import bracket, snakemake, papermill, statsmodels, seaborn" 
	touch $@

draft_sweep: env
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --cores 1 draft_sweep

# Unit and property tests only (no engine, server, Snakemake, browser or install): under a minute.
FAST := not engine and not integration and not slow and not slurm
# pytest-xdist: one worker per core, at most 4 (each worker imports the package and collects the suite);
# `make test WORKERS=0` runs in one process. The fast tier hands out tests one by one; the rest a file to a
# worker, so a module's fixture (a workflow run, a server) is made once, the longest files first in the order
# tests/conftest.py's LONGEST_FIRST gives (--no-loadscope-reorder: xdist would order them by number of tests).
WORKERS ?= auto
PYTEST := PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q -n $(WORKERS) --maxprocesses 4

# Every test once: the fast tier first, so a broken unit stops the run before any engine is built, then the
# rest on every core but the tests marked serial (timed against a known truth), which run last, alone (the
# three marker expressions split the suite in three). llama.cpp's CPU build starts at once in the background at
# the lowest priority, and stops if make does (tests/prebuild.py): it takes the cores the tests leave idle, and
# the llama.cpp tests find it built or wait for it. Where it is cached it ends at once.
test: env
	$(BIN)/python tests/prebuild.py --while $$PPID &
	$(PYTEST) -m "$(FAST)" --dist load
	$(PYTEST) -m "not ($(FAST)) and not serial" --dist loadfile --no-loadscope-reorder
	$(PYTEST) -m "not ($(FAST)) and serial" -n 0

test-fast: env
	$(PYTEST) -m "$(FAST)" --dist load

# ruff (lint, import order, format) on every Python file, and Snakemake's own linter on the workflow (CI runs both: .ci/run).
lint: env
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --lint

clean:
	rm -rf results logs report/draft_sweep .snakemake
