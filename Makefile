# One entry point for newcomers and CI: `make demo`, `make test`.
# Everything is installed into .venv (Python packages) and, where missing,
# from Debian packages (redis-server), so a fresh machine needs only python3.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install system-deps test test-oldest-scrapy lint format demo bench clean

# The oldest Scrapy this package supports (pyproject: scrapy>=2.13), with a Twisted
# of its time: Scrapy 2.13.0 does not start with Twisted >= 25.5.
OLDEST_SCRAPY  ?= 2.13.0
OLDEST_TWISTED ?= 24.11.0
OLDEST_VENV   ?= .venv-scrapy-oldest

# The editable installs are done once and recorded by stamps; each is redone only when what it is
# built from changes (the dependencies in pyproject.toml, the C extensions). The demo needs only the
# package (no test tools, no pyspark); the tests need the [test] extra, built after the system
# packages so that the C extensions are compiled (a compiler is one of them).
CORE_STAMP     := $(VENV)/.installed-core
STAMP          := $(VENV)/.installed
INSTALL_INPUTS := pyproject.toml setup.py $(wildcard scrapy_simhash/*/*.c scrapy_simhash/*/*.h)

$(BIN)/python:
	@echo "make: creating the virtual environment $(VENV) ..."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check --upgrade pip

$(CORE_STAMP): $(INSTALL_INPUTS) | $(BIN)/python
	@echo "make: installing scrapy-simhash into $(VENV) (the first time takes about a minute; later runs" \
		"skip this until pyproject.toml or the C sources change) ..."
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -e .
	@touch $@

$(STAMP): $(INSTALL_INPUTS) | $(BIN)/python system-deps
	@echo "make: installing scrapy-simhash and its test tools into $(VENV) (pyspark among them: the first" \
		"time takes a few minutes; later runs skip this until pyproject.toml or the C sources change) ..."
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -e ".[test]"
	@touch $@ $(CORE_STAMP)

system-deps:
	@bash scripts/install-system-deps.sh

install: system-deps $(STAMP)

# pywb (the replay tool the CDXJ tests check our index against) pins redis==2.10.6, which this
# project cannot share a venv with (redis>=5): it gets a venv of its own.
PYWB_VENV ?= .venv-pywb

$(PYWB_VENV)/.installed:
	@echo "make: installing pywb into $(PYWB_VENV) (its own venv: it pins an old redis) ..."
	$(PYTHON) -m venv $(PYWB_VENV)
	$(PYWB_VENV)/bin/python -m pip install -q --disable-pip-version-check pywb
	@touch $@

# The Spark tests run in a second pytest process beside the rest (scripts/run-tests.sh says why).
test: install $(PYWB_VENV)/.installed
	SCRAPY_SIMHASH_PYWB_BIN=$(abspath $(PYWB_VENV))/bin SCRAPY_SIMHASH_REQUIRE_CHROMIUM=1 \
		bash scripts/run-tests.sh $(BIN)/python --durations=30

# The Scrapy tests again, against the oldest supported Scrapy (and its Twisted).
test-oldest-scrapy: system-deps
	test -x $(OLDEST_VENV)/bin/python || $(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/python -m pip install -q -e ".[test]" "scrapy==$(OLDEST_SCRAPY)" "twisted==$(OLDEST_TWISTED)"
	$(OLDEST_VENV)/bin/python -m pytest tests/test_scrapy_crawl.py tests/test_scrapy_components.py tests/test_warc_crawl.py

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# The demo needs no system packages (no Redis), only the package itself.
demo: $(CORE_STAMP)
	$(BIN)/python example_project/demo.py

bench: install
	$(BIN)/python -m pip install -q -e ".[bench]"
	$(BIN)/python bench/fingerprint.py

clean:
	rm -rf $(VENV) $(OLDEST_VENV) $(PYWB_VENV) build *.egg-info .pytest_cache .ruff_cache
