#!/usr/bin/env bash
# Set up what iorig needs on a Debian/Ubuntu machine: fio (and, for the test
# suite, the tools that build test block devices) from the distribution, and
# a Python virtual environment.
# Usage: scripts/bootstrap.sh [--test]
set -euo pipefail

want_test=0
[ "${1:-}" = "--test" ] && want_test=1
venv=${VENV:-.venv}
python=${PYTHON:-python3}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo "$@"
    else
        echo "bootstrap: need root to run: $*" >&2
        echo "bootstrap: install the packages yourself, then re-run" >&2
        exit 1
    fi
}

missing=()
command -v fio >/dev/null 2>&1 || missing+=(fio)
# util-linux's blkid lets iorig recognise filesystems on block devices.
command -v blkid >/dev/null 2>&1 || [ -x /usr/sbin/blkid ] || missing+=(util-linux)
if ! "$python" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    missing+=(python3-venv)
fi
if [ "$want_test" -eq 1 ]; then
    # The HTML report is checked in a real headless browser.
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    # sfdisk and mkfs.ext4 let the tests build devices that hold data.
    command -v sfdisk >/dev/null 2>&1 || [ -x /usr/sbin/sfdisk ] || missing+=(fdisk)
    command -v mkfs.ext4 >/dev/null 2>&1 || [ -x /usr/sbin/mkfs.ext4 ] || missing+=(e2fsprogs)
    # The truth tests make loop devices (losetup) and pin fio to a CPU (taskset).
    command -v losetup >/dev/null 2>&1 || [ -x /usr/sbin/losetup ] || missing+=(mount)
    command -v taskset >/dev/null 2>&1 || missing+=(util-linux)
    # Hosts over SSH are tested against real OpenSSH servers the tests start.
    command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
    [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
    # Authenticated agents: certificates made with openssl as docs/guide/hosts.md
    # shows, listeners checked with ss, an address beyond loopback in a
    # network namespace made with ip.
    command -v openssl >/dev/null 2>&1 || missing+=(openssl)
    command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || missing+=(iproute2)
    # --metrics is scraped by a real Prometheus server the tests start.
    command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
fi
if [ "${#missing[@]}" -gt 0 ]; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "bootstrap: please install: ${missing[*]} (no apt-get on this machine)" >&2
        exit 1
    fi
    echo "bootstrap: installing ${missing[*]} from the distribution"
    # A package's service (sshd) is not started by the installation: the
    # tests start their own servers on loopback, nothing listens on port 22.
    # policy-rc.d is Debian's switch for that; one already there is kept.
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then
        trap 'as_root rm -f /usr/sbin/policy-rc.d' EXIT
        as_root sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"
    fi
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "bootstrap: iorig needs Python 3.11 or newer ($python is $("$python" --version 2>&1))" >&2
    exit 1
fi

# Exactly the lock (docs/guide/development.md): every package pinned with its
# hashes, pip refusing any file whose hash differs or is missing; iorig itself
# then without dependencies or build isolation, so nothing unlocked comes in.
lock=requirements/runtime.txt
[ "$want_test" -eq 1 ] && lock=requirements/dev.txt
stamp="$venv/.iorig-installed"
want="$(cat "$lock" pyproject.toml | sha256sum | cut -d' ' -f1) $lock"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
    export PIP_DISABLE_PIP_VERSION_CHECK=1
    install=("$venv/bin/python" -m pip install --quiet)
    uv_pin=$(awk '/^uv==/ { keep = 1 } keep { print } keep && !/\\$/ { exit }' "$lock")
    if [ -n "$uv_pin" ]; then
        # the development lock holds uv: pip installs it (its hashes checked),
        # and uv the rest, with the same hash checking, in seconds, not half a
        # minute (a fresh clone's make test)
        printf '%s\n' "$uv_pin" > "$venv/.uv-pin.txt"
        "${install[@]}" --require-hashes --no-deps -r "$venv/.uv-pin.txt"
        install=("$venv/bin/uv" pip install --quiet --python "$venv/bin/python")
    fi
    if ! "${install[@]}" --require-hashes --no-deps -r "$lock"; then
        echo "bootstrap: installing the lock $lock failed (see the installer's message above)." >&2
        echo "bootstrap: a missing or different hash means the lock was edited by hand or a" >&2
        echo "bootstrap: file on the index changed: refresh it with 'make lock' (docs/guide/development.md)." >&2
        exit 1
    fi
    "${install[@]}" --no-deps --no-build-isolation -e .
    echo "$want" > "$stamp"
fi
# Bytecode for iorig's sources, read by every later start even where
# PYTHONDONTWRITEBYTECODE keeps Python from writing it: without it each
# `iorig` compiles its 130 modules again (0.3-0.5 s of CPU a start).
"$venv/bin/python" -m compileall -q src
