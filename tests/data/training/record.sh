#!/bin/sh
# Records tests/data/training/results.sqlite (tests/test_training_report.py):
# an accelerators search, two runs of one accelerator and two checkpoint runs,
# all quick, on a scratch directory. Run from the repository's root.
set -eu
db="$(pwd)/tests/data/training/results.sqlite"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
rm -f "$db"
run() { IORIG_DB="$db" .venv/bin/iorig run "$@" --target "$scratch/" >/dev/null || [ $? -eq 3 ]; }
run train --quick --set epochs=1 --accelerators auto --label search
run train --quick --label one-a
run train --quick --label one-b
run checkpoint --quick --set repetitions=3 --label ckpt-a
run checkpoint --quick --set repetitions=3 --label ckpt-b
