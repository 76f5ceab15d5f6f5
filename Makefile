# Two entry points (see README): `make demo` and `make test`.
VENV ?= .venv
SCRATCH ?= ./iorig-scratch/
BIN := $(VENV)/bin

.PHONY: demo test setup setup-test lint format bench clean

setup:
	VENV=$(VENV) scripts/bootstrap.sh

setup-test:
	VENV=$(VENV) scripts/bootstrap.sh --test

demo: setup
	mkdir -p $(SCRATCH)
	$(BIN)/iorig run peak --quick --target $(SCRATCH)

test: setup-test
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/pytest

lint:
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

format:
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

bench: setup
	$(BIN)/python bench/overhead.py

clean:
	rm -rf $(VENV) $(SCRATCH) .pytest_cache .ruff_cache
