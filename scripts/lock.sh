#!/usr/bin/env bash
# Refresh the locks from pyproject.toml's ranges: every package the demo and
# the test suite install, at the newest versions the ranges allow, pinned with
# the hashes of every file PyPI has for them. One resolution for every
# platform and Python from 3.11 (uv's --universal), so the same lock serves a
# fresh Debian machine whatever its Python. Upgrading: docs/guide/development.md.
# Usage: scripts/lock.sh UV   (UV: the uv binary, the locked one from make)
set -euo pipefail
uv=${1:?usage: scripts/lock.sh UV}
cd "$(dirname "$0")/.."
compile=("$uv" pip compile --universal --python-version 3.11 --generate-hashes --quiet
         --custom-compile-command "make lock")
# the runtime lock first; the development lock is held to its versions, so
# make demo and make test run iorig on the same packages
"${compile[@]}" pyproject.toml requirements/tools.in -o requirements/runtime.txt
"${compile[@]}" pyproject.toml --extra dev requirements/tools.in \
    -c requirements/runtime.txt -o requirements/dev.txt
echo "lock: requirements/runtime.txt and requirements/dev.txt refreshed; run make test, then commit them"
