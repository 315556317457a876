# Two commands do everything: `make book` builds the site, `make test` runs every test (what CI runs).
# `make test-fast` runs the tests not marked slow (the unit tests and a sample of the bank: under a minute) while you work.
# Each creates .venv and installs the pinned requirements and this project when needed, and compiles the
# project's modules when one changed.
# `make book` also fetches MathJax (npm's mathjax package, es5/ only) into _vendor/mathjax, which the
# site serves itself.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
COMPILED := $(VENV)/.compiled
SOURCES := $(shell find autograder course benchmarks -name '*.py')

MATHJAX_VERSION := 3.2.2
MATHJAX := _vendor/mathjax/tex-mml-chtml.js

.PHONY: book test test-fast release chapter benchmarks bench-sdpa clean

$(INSTALLED): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

# This project's own modules compiled once, like an installed package's (an editable install's are not, and
# where PYTHONDONTWRITEBYTECODE is set every process would compile them again: the grader, its workers, each
# sandbox); each .pyc is checked against its source's hash, so an edited module is never run from a stale one.
$(COMPILED): $(INSTALLED) $(SOURCES)
	$(BIN)/python -m compileall -q --invalidation-mode checked-hash autograder course benchmarks
	touch $@

# npm checks the package against the registry's integrity hash; only es5/ (the browser build) is kept.
$(MATHJAX):
	rm -rf _vendor/mathjax _vendor/.mathjax && mkdir -p _vendor/.mathjax
	cd _vendor/.mathjax && npm pack --silent mathjax@$(MATHJAX_VERSION) >/dev/null \
		&& tar -xzf mathjax-$(MATHJAX_VERSION).tgz package/es5
	mv _vendor/.mathjax/package/es5 _vendor/mathjax && rm -rf _vendor/.mathjax

book: $(COMPILED) $(MATHJAX)
	$(BIN)/jupyter-book build . -W -n --keep-going

test: $(COMPILED) $(MATHJAX)
	$(BIN)/python -m pytest

# The fast tier spreads single tests over the cores (the bank is one file of independent answers).
test-fast: $(COMPILED)
	$(BIN)/python -m pytest -m "not slow" --dist load

release: $(COMPILED)
	$(BIN)/python -m autograder release

# A new chapter, scaffolded and registered (CONTRIBUTING.md):
#   make chapter NAME=09_name TITLE="The title" [LIBRARY=PyTorch] [FUNCTIONS="f g"] [LEARN="one line"]
chapter: $(INSTALLED)
	$(BIN)/python -m course new $(NAME) --title "$(TITLE)" $(if $(LIBRARY),--library $(LIBRARY)) \
		$(if $(FUNCTIONS),--functions $(FUNCTIONS)) $(if $(LEARN),--learn "$(LEARN)")

# Speed and memory are measured here, not in tests: each script prints its figures.
BENCH_OUT ?= _build/benchmarks
benchmarks: $(COMPILED)
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
