# One entry point for newcomers and CI: `make demo`, `make test`.
# Everything is installed into .venv (Python packages) and, where missing,
# from Debian packages (redis-server), so a fresh machine needs only python3.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install system-deps test lint format demo bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

system-deps:
	@bash scripts/install-system-deps.sh

install: $(BIN)/python system-deps
	$(BIN)/python -m pip install -q -e ".[test]"

test: install
	$(BIN)/python -m pytest

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
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
