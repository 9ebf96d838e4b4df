# Two entry points for a fresh machine with python3, git and make: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install demo demo-multi-version test lint

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

demo: install
	PATH="$(CURDIR)/$(BIN):$$PATH" examples/quickstart/demo.sh

demo-multi-version: install
	PATH="$(CURDIR)/$(BIN):$$PATH" examples/multi-version/demo.sh

lint: install
	$(BIN)/ruff check .

test: lint
	$(BIN)/python -m pytest -q
