# Two commands do everything: `make book` builds the site, `make test` runs every test (what CI runs).
# `make test-fast` runs the unit tests only (those not marked slow: about a minute) while you work.
# Each creates .venv and installs the pinned requirements and this project when needed.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: book test test-fast release chapter benchmarks bench-sdpa clean

$(INSTALLED): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

book: $(INSTALLED)
	$(BIN)/jupyter-book build . -W -n --keep-going

test: $(INSTALLED)
	$(BIN)/python -m pytest

test-fast: $(INSTALLED)
	$(BIN)/python -m pytest -m "not slow"

release: $(INSTALLED)
	$(BIN)/python -m autograder release

# A new chapter, scaffolded and registered (CONTRIBUTING.md):
#   make chapter NAME=09_name TITLE="The title" [LIBRARY=PyTorch] [FUNCTIONS="f g"] [LEARN="one line"]
chapter: $(INSTALLED)
	$(BIN)/python -m course new $(NAME) --title "$(TITLE)" $(if $(LIBRARY),--library $(LIBRARY)) \
		$(if $(FUNCTIONS),--functions $(FUNCTIONS)) $(if $(LEARN),--learn "$(LEARN)")

# Speed and memory are measured here, not in tests: each script prints its figures.
BENCH_OUT ?= _build/benchmarks
benchmarks: $(INSTALLED)
	$(BIN)/python -m benchmarks.notebooks
	$(BIN)/python -m benchmarks.kv_cache
	$(BIN)/python -m benchmarks.gqa
	$(BIN)/python -m benchmarks.sdpa --out $(BENCH_OUT)
	$(BIN)/python -m benchmarks.grading

# On a GPU machine: every SDPA backend, dtype and length, as CSV and JSON in $(BENCH_OUT).
bench-sdpa: $(INSTALLED)
	$(BIN)/python -m benchmarks.sdpa --out $(BENCH_OUT)

clean:
	rm -rf _build
