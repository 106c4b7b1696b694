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

# The editable install is done once and recorded by this stamp; it is redone only when
# what it is built from changes (the dependencies in pyproject.toml, the C extensions).
STAMP          := $(VENV)/.installed
INSTALL_INPUTS := pyproject.toml $(wildcard scrapy_simhash/*/*.c scrapy_simhash/*/*.h)

$(BIN)/python:
	@echo "make: creating the virtual environment $(VENV) ..."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(INSTALL_INPUTS) | $(BIN)/python
	@echo "make: installing scrapy-simhash and its test tools into $(VENV) (the first time takes" \
		"up to a minute; later runs skip this until pyproject.toml or the C sources change) ..."
	$(BIN)/python -m pip install --disable-pip-version-check -e ".[test]"
	@touch $@

system-deps:
	@bash scripts/install-system-deps.sh

install: $(STAMP) system-deps

# pywb (the replay tool the CDXJ tests check our index against) pins redis==2.10.6, which this
# project cannot share a venv with (redis>=5): it gets a venv of its own.
PYWB_VENV ?= .venv-pywb

$(PYWB_VENV)/.installed:
	@echo "make: installing pywb into $(PYWB_VENV) (its own venv: it pins an old redis) ..."
	$(PYTHON) -m venv $(PYWB_VENV)
	$(PYWB_VENV)/bin/python -m pip install -q --disable-pip-version-check pywb
	@touch $@

test: install $(PYWB_VENV)/.installed
	SCRAPY_SIMHASH_PYWB_BIN=$(abspath $(PYWB_VENV))/bin SCRAPY_SIMHASH_REQUIRE_CHROMIUM=1 $(BIN)/python -m pytest

# The Scrapy tests again, against the oldest supported Scrapy (and its Twisted).
test-oldest-scrapy: system-deps
	test -x $(OLDEST_VENV)/bin/python || $(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/python -m pip install -q -e ".[test]" "scrapy==$(OLDEST_SCRAPY)" "twisted==$(OLDEST_TWISTED)"
	$(OLDEST_VENV)/bin/python -m pytest tests/test_scrapy_crawl.py tests/test_scrapy_components.py tests/test_warc_crawl.py

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# The demo needs no system packages (no Redis), only the package itself.
demo: $(STAMP)
	$(BIN)/python example_project/demo.py

bench: install
	$(BIN)/python -m pip install -q -e ".[bench]"
	$(BIN)/python bench/fingerprint.py

clean:
	rm -rf $(VENV) $(OLDEST_VENV) $(PYWB_VENV) build *.egg-info .pytest_cache .ruff_cache
