# amp-pipeline: `make run` trains and promotes on the embedded digits, `make test` runs every test.
# Both create .venv with Python 3.10 and install the pinned lock file first, when needed.

PYTHON310 ?= $(shell command -v python3.10 >/dev/null 2>&1 && python3.10 -c 'import sys' >/dev/null 2>&1 \
	&& echo python3.10 || ls -d $$HOME/.pyenv/versions/3.10.*/bin/python3.10 /usr/bin/python3.10 2>/dev/null | tail -n 1)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JAX_STAMP := $(VENV)/.installed-jax
OUTPUT ?= output
ARGS ?=

.PHONY: run test test-fast lint install clean distclean docs docs-cli

$(STAMP): requirements.lock pyproject.toml
	@test -n "$(PYTHON310)" || { echo "error: python3.10 not found (TFX 1.16 needs Python 3.10)"; exit 2; }
	@test -x $(PY) || $(PYTHON310) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip==26.3"
	$(PY) -m pip install --quiet -r requirements.lock
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(PY) -m pip check
	@touch $(STAMP)

install: $(STAMP)

# The bench's optional JAX backend: the tests run it; a pipeline user does not need it.
$(JAX_STAMP): $(STAMP) requirements-jax.lock
	$(PY) -m pip install --quiet -r requirements-jax.lock
	$(PY) -m pip check
	@touch $(JAX_STAMP)

run: $(STAMP)
	$(VENV)/bin/amp-pipeline run --output $(OUTPUT) $(ARGS)

# Three workers on two cores, a test file each at a time (a file's module fixtures, such as a
# shared pipeline run, stay in one worker): a pipeline run waits on servers, child processes
# and one-threaded imports, and a third file fills those gaps. --no-loadscope-reorder keeps
# tests/conftest.py's longest-first order: by default pytest-xdist hands out the files with the
# most tests first, which left 1-3-test e2e files (a whole run each) for the end. Measured on a
# 2-core Zen 4, 575 tests: 1,242.67 s of pytest in xdist's order, 1,176.10 s in this one
# (benchmarks/RESULTS.md, "The test suite's time").
test: $(JAX_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/mkdocs build --strict --quiet --site-dir $(OUTPUT_SITE)
	$(PY) -m pytest -q -p no:cacheprovider -n 3 --dist loadfile --no-loadscope-reorder --durations=15 $(ARGS)

# The inner loop: lint, types and the unit tier (no pipeline run, no server, no training past a
# few steps, no conversion), on two workers.
test-fast: $(JAX_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -p no:cacheprovider -n 2 -m "not e2e" --durations=10 $(ARGS)

# The docs site (mkdocs-material): a broken link, anchor or missing page fails the build.
OUTPUT_SITE ?= site
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict --site-dir $(OUTPUT_SITE)

# The CLI reference page, regenerated from the parsers (tests/test_cli_docs.py checks it).
docs-cli: $(STAMP)
	$(PY) -m amp_pipeline.cli_docs > docs/cli.md

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# The environment and build outputs only: $(OUTPUT) holds the pushed models (serving/) and the
# run history (mlflow.db), which `make clean` never deletes.
clean:
	rm -rf $(VENV) site .mypy_cache .ruff_cache

# `make clean`, and $(OUTPUT) with the pushed models and the run history: only after a typed
# "yes" (anything else, or no terminal, deletes nothing and exits 1).
distclean:
	@printf 'This deletes %s: the pushed models (serving/) and the MLflow run history (mlflow.db), then the venv. Type yes to go on: ' "$(OUTPUT)"; \
	read answer || answer=; \
	if [ "$$answer" != yes ]; then echo "nothing deleted"; exit 1; fi
	rm -rf $(OUTPUT)
	$(MAKE) --no-print-directory -f $(firstword $(MAKEFILE_LIST)) clean
