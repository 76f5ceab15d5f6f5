"""The tier guard of tests/conftest.py: a test without a system-tier marker
cannot start fio (or any process), open a socket or see root, so `make
check` stays fast and runs anywhere; a test marked system can. (The guard
raises conftest.TierViolation, an AssertionError: conftest is imported
under two names, so the class is not matched by identity.)"""

from __future__ import annotations

import os
import socket
import subprocess

import pytest


def test_a_unit_tier_test_cannot_start_fio_open_a_socket_or_be_root():
    with pytest.raises(AssertionError, match="started a process"):
        subprocess.run(["fio", "--version"], capture_output=True)
    with socket.socket() as sock, pytest.raises(AssertionError, match=r"socket\.bind"):
        sock.bind(("127.0.0.1", 0))
    with socket.socket() as sock, pytest.raises(AssertionError, match=r"socket\.connect"):
        sock.connect(("127.0.0.1", 9))
    assert os.geteuid() != 0


@pytest.mark.system
def test_a_system_tier_test_may():
    assert subprocess.run(["true"]).returncode == 0
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
