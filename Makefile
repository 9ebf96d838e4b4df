# Two entry points for a fresh machine with python3, git and make: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install demo demo-multi-version test check lint chromium ray-oldest

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,local]'
	touch $@

demo: install
	@$(call run_demo,quickstart)

demo-multi-version: install
	@$(call run_demo,multi-version)

# A demo runs on a copy of its example whose cluster.yaml names the dashboard port chosen here:
# $ARGUS_DEMO_PORT, else 8265 while it is free, else any free port; `argus local up` reads ARGUS_LOCAL_PORT.
run_demo = port=$$($(BIN)/python -m reconcile.commands.local) && \
	copy=$$(mktemp -d "$${TMPDIR:-/tmp}/argus-demo.XXXXXX") && trap 'rm -rf "$$copy"' EXIT && \
	cp -R examples/$(1)/. "$$copy/" && \
	sed "s|http://127.0.0.1:8265|http://127.0.0.1:$$port|" examples/$(1)/cluster.yaml >"$$copy/cluster.yaml" && \
	grep -q "127.0.0.1:$$port" "$$copy/cluster.yaml" && \
	echo "The demo's Ray dashboard: http://127.0.0.1:$$port" && \
	ARGUS_LOCAL_PORT=$$port PATH="$(CURDIR)/$(BIN):$$PATH" "$$copy/demo.sh"

lint: install
	$(BIN)/ruff check .

# argus's own modules compiled first: the tests start argus (and Ray starts its jobs) in hundreds of
# processes, and where PYTHONDONTWRITEBYTECODE is set each would compile them again (~0.3 s each).
test: lint chromium ray-oldest
	$(BIN)/python -m compileall -q specs state reconcile >/dev/null
	$(BIN)/python -m pytest -q

# The inner loop: lint and every test that needs no Ray cluster (tests/support/inner_loop.py skips those), on
# both cores; property tests draw a quarter of their examples. `make test` runs everything; CI runs `make test`.
# Bytecode is kept between runs (PYTHONDONTWRITEBYTECODE unset for it): otherwise each xdist worker compiles
# argus and rewrites every test module's asserts again, ~12 s of CPU each before the first test.
# Measured 2026-11-28 on the shared 2-core machine, load average 6 to 10 from other engineers' work meanwhile (so the
# wall times are 2 to 3 times what an idle machine gives; CPU is user+sys of pytest, its workers and children):
#   before: 7:18 wall, 304 s CPU (load 1.1 at the start, 9.6 at the end)
#   after:  6:50 wall, 244 s CPU (load 7.0 -> 8.2); a second run 7:24, 248 s (6.0 -> 9.4). -19% CPU
# On an idle machine that is ~3 minutes (the ~3.5 before scaled by CPU). Not 2: verl's real Hydra compositions are
# ~45% of the tests' time (tests/state/verl/test_verl_scripts.py, test_verl_limits.py), each case one composition
# or more; then property tests, hostile files, the layering walk; collecting takes ~4 s of CPU per worker.
check: lint
	PYTHONDONTWRITEBYTECODE= ARGUS_TESTS_WITHOUT_RAY=1 $(BIN)/python -m pytest -q -p no:cacheprovider -n 2

# The status page's tests look at it in a real headless browser: Debian's chromium.
chromium:
	@test -x /usr/bin/chromium || { \
	  echo "make test: installing Debian's chromium for the status page's browser tests"; \
	  SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 || { \
	    $$SUDO apt-get update -qq && \
	    $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }; }

# The oldest Ray head argus supports (state/ray/versions.py), in a virtualenv of its own under
# .cache/ (kept between runs: a second `make test` skips this), for tests/state/ray/test_oldest_head.py.
RAY_OLDEST := 2.9.3
RAY_OLDEST_VENV := .cache/ray-$(RAY_OLDEST)
ray-oldest: $(RAY_OLDEST_VENV)/.installed

$(RAY_OLDEST_VENV)/.installed:
	$(PYTHON) -m venv $(RAY_OLDEST_VENV)
	$(RAY_OLDEST_VENV)/bin/pip install --quiet 'ray[default]==$(RAY_OLDEST)'
	touch $@
