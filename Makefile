# The two commands that matter: `make run` and `make test`. Both set everything up first.
PYTHON ?= python3
# Jobs in the runner's sandbox get a fresh /tmp, which would hide a virtual environment
# living under /tmp; a checkout there keeps its venv in ~/.cache instead.
VENV ?= $(if $(filter /tmp/%,$(CURDIR)),$(HOME)/.cache/coursebot/$(notdir $(CURDIR))-venv,.venv)
PY := $(VENV)/bin/python
PYBABEL := $(VENV)/bin/pybabel
INSTALLED := $(VENV)/.installed
POT := locales/messages.pot
CATALOGS := $(wildcard locales/*/LC_MESSAGES/messages.po)

.PHONY: run test check setup catalogs extract update lint bench bench-peers clean

run: setup
	$(PY) -m bot run

# The lessons are proven in the real runner first (cached by content hash in .cache/coursebot/proofs).
# The suite runs in TEST_WORKERS processes (pytest-xdist), each test file whole in one of them
# (tests/conftest.py ONE_ENGINE: the files that reconfigure the Docker engine take turns): its module
# fixtures (a runner pool, a compose stack) are built once, and much of a test's time is waiting on a subprocess,
# a container or a socket, which the other process fills. Files go out in collection order, the slowest first
# (tests/conftest.py SLOWEST_FILES), so neither process ends alone in a long file. TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
test: setup check
	$(PY) -m bot lint lessons --run --strict
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

setup: $(INSTALLED) catalogs

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,runner]'
	touch $@

# Compiled anew from the .po files every time (fuzzy entries left out), so no stale .mo is ever used;
# the bot itself compiles its catalogs in memory at start for the same reason.
catalogs: $(INSTALLED)
	$(PYBABEL) compile -d locales -D messages --statistics

# Translator workflow: extract the strings from the code, then merge them into every catalog.
extract: $(INSTALLED)
	$(PYBABEL) extract --no-location --sort-output --omit-header -o $(POT) bot

update: extract
	$(PYBABEL) update --no-fuzzy-matching -i $(POT) -d locales -D messages

lint: $(INSTALLED)
	$(PY) -m bot lint lessons

bench: setup
	$(PY) bench/bot.py

# epicbox, a container per job and this runner, side by side (builds the job image and epicbox's venv first).
bench-peers: setup
	$(PY) bench/peers.py

clean:
	rm -rf $(VENV) locales/*/LC_MESSAGES/*.mo

# Code checks: ruff (lint and format), mypy (strict on bot/ and runner/), and the import contracts (the layers of
# bot/, no cycles, the runner reached only through runner.client: pyproject.toml's [tool.importlinter]).
check: $(INSTALLED)
	$(VENV)/bin/ruff check bot runner tests bench
	$(VENV)/bin/ruff format --check bot runner tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache --no-logo
