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

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

system-deps:
	@bash scripts/install-system-deps.sh

install: $(BIN)/python system-deps
	$(BIN)/python -m pip install -q -e ".[test]"

test: install
	$(BIN)/python -m pytest

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

demo: install
	$(BIN)/python example_project/demo.py

bench: install
	$(BIN)/python -m pip install -q -e ".[bench]"
	$(BIN)/python bench/fingerprint.py

clean:
	rm -rf $(VENV) $(OLDEST_VENV) build *.egg-info .pytest_cache .ruff_cache
