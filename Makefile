# Two entry points for a fresh machine with python3, git and make: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install demo demo-multi-version test lint chromium

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

test: lint chromium
	$(BIN)/python -m pytest -q

# The status page's tests look at it in a real headless browser: Debian's chromium.
chromium:
	@test -x /usr/bin/chromium || { \
	  echo "make test: installing Debian's chromium for the status page's browser tests"; \
	  SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 || { \
	    $$SUDO apt-get update -qq && \
	    $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }; }
