"""A relative target that already exists in a fio server's directory: iorig
did not create it and cannot look inside it, so it is not overwritten
without --allow-destroy (the rule local files follow)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from tests.conftest import REPO
from tests.fioservers import fio_server, server_dir

pytestmark = pytest.mark.fio


def test_an_existing_relative_remote_file_is_not_overwritten(tmp_path):
    db = tmp_path / "results.sqlite"
    with fio_server(tmp_path) as server:
        existing = server_dir(tmp_path, server.address) / "precious.dat"
        content = b"the user's data\n" * 4096
        existing.write_bytes(content)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "iorig",
                "run",
                "--rw",
                "randwrite",
                "--size",
                "16MiB",
                "--duration",
                "1s",
                "--hosts",
                server.address.label,
                "--target",
                "precious.dat",
            ],
            cwd=REPO,
            env=dict(os.environ, IORIG_DB=str(db), COLUMNS="200"),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "refusing to overwrite" in done.stderr and "precious.dat" in done.stderr
    assert existing.read_bytes() == content
    assert not db.exists() or b"precious" not in db.read_bytes()
