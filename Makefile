# Two commands do everything: `make book` builds the site, `make test` runs every test.
# Each creates .venv and installs the pinned requirements and this project when needed.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: book test release clean

$(INSTALLED): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

book: $(INSTALLED)
	$(BIN)/jupyter-book build . -W -n --keep-going

test: $(INSTALLED)
	$(BIN)/python -m pytest

release: $(INSTALLED)
	$(BIN)/python -m autograder release

clean:
	rm -rf _build
