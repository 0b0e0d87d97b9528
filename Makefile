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

# Every test once: the fast tier first, so a broken unit stops the run before any engine is built, then
# the rest (the two marker expressions split the suite in two).
test: env
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q -m "$(FAST)"
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q -m "not ($(FAST))"

test-fast: env
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q -m "$(FAST)"

# ruff (lint, import order, format) on every Python file, and Snakemake's own linter on the workflow (CI runs both: .ci/run).
lint: env
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --lint

clean:
	rm -rf results logs report/draft_sweep .snakemake
