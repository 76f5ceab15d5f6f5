# Two entry points (see README): `make demo` and `make test`; `make check` is
# the one-minute tier for working on the code (docs/guide/development.md).
VENV ?= .venv
SCRATCH ?= ./iorig-scratch/
BIN := $(VENV)/bin

.PHONY: demo test check setup setup-test lint format bench lock clean durations docs soak \
	print-stage-args

setup:
	VENV=$(VENV) scripts/bootstrap.sh

setup-test:
	VENV=$(VENV) scripts/bootstrap.sh --test

demo: setup
	mkdir -p $(SCRATCH)
	$(BIN)/iorig run peak --quick --target $(SCRATCH)

# the unit tier: no fio, no root, no browser, no process or socket
UNIT := not (fio or blockdev or truth or browser or system)

# Everything, as CI runs it, in four stages that between them run every test
# once: those that may share the machine, on six workers (a fio phase runs
# its time whatever CPU it gets, so more workers than cores overlap waits:
# 204 s against 227 s at five and 206 s at seven, the CPUs 91 % busy);
# those that time seconds or pace rates, beside each other only, on six
# workers (they wait more than they compute: 85 s against 93 s at five);
# truth tests six at a time (their devices are in memory, so they share
# only the CPU, which their caps leave half idle: 89 s against 112 s at
# four; their bounds come from the devices' own counters, not the cap, so
# they hold beside stress-ng as well, docs/guide/development.md); alone,
# the tests that measure CPU or time against a busy one. Each worker starts
# on its share of the long tests (tests/ordering.py, from tests/durations.json).
# pytest keeps each test module's rewritten bytecode in __pycache__ unless
# Python may not write bytecode: every worker of every stage collects the
# whole suite (the truth stage only tests/truth, where every truth test is),
# 5 s of CPU each without that cache and 2.5 s with it
test check soak: export PYTHONDONTWRITEBYTECODE =

# each stage's pytest arguments, here only: make soak's scripts/soak.py reads
# them through print-stage-args
STAGES := first timing truth serial
STAGE_first := -n 6 --dist worksteal -m "not (serial or timing or truth)"
STAGE_timing := -n 6 --dist worksteal -m "timing"
STAGE_truth := -n 6 --dist worksteal -m "truth and not serial" tests/truth
STAGE_serial := -m serial

# each stage's JUnit XML, which .ci/run sums up (scripts/stages.py)
RESULTS := .test-results
JUNIT = --junitxml=$(RESULTS)/$(1).xml -o junit_family=xunit1

test: setup-test lint
	rm -rf $(RESULTS)
	$(BIN)/pytest $(STAGE_first) $(call JUNIT,first)
	$(BIN)/pytest $(STAGE_timing) $(call JUNIT,timing)
	$(BIN)/pytest $(STAGE_truth) $(call JUNIT,truth)
	$(BIN)/pytest $(STAGE_serial) $(call JUNIT,serial)

# one stage's arguments as shell words: make -s print-stage-args STAGE=truth
print-stage-args:
	$(if $(filter $(STAGE),$(STAGES)),,$(error STAGE must be one of: $(STAGES)))
	$(info $(STAGE_$(STAGE)))

# a selection of tests, again and again, beside a load if asked; a table of
# the tests that failed at least once (docs/guide/development.md, "Test tiers");
# by default the preset flaky, 5 rounds, or e.g.
# make soak SOAK_ARGS="--stage truth --rounds 3 --stress"
SOAK_ARGS ?=
soak: setup-test
	$(BIN)/python scripts/soak.py $(SOAK_ARGS)

# each test's seconds in a make test, for the order above (docs/guide/development.md)
durations:
	rm -f tests/durations.json
	IORIG_RECORD_DURATIONS=1 $(MAKE) test

check: setup-test lint
	$(BIN)/pytest -n 2 -m "$(UNIT)"

# the generated references (docs/architecture.md, "Generated references"),
# fio's examples among them: what iorig accepts and refuses, and why
docs: setup-test
	$(BIN)/python -m iorig.cli.reference docs/reference
	$(BIN)/python scripts/fio_examples.py docs/reference/fio-examples.md

lint:
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts

format:
	$(BIN)/ruff format src tests bench scripts
	$(BIN)/ruff check --fix src tests bench scripts

# refresh the locks from pyproject.toml's ranges (docs/guide/development.md)
lock: setup-test
	scripts/lock.sh $(BIN)/uv

bench: setup
	$(BIN)/python bench/overhead.py

clean:
	rm -rf $(VENV) $(SCRATCH) .pytest_cache .ruff_cache $(RESULTS)
