"""``iorig serve`` started for a test: its process and the URL it prints."""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tests.agents import make_token


def start_serve(
    db: Path, log: Path, *options: str, files_limit: int | None = None
) -> tuple[subprocess.Popen, str]:
    """``iorig --db DB serve OPTIONS`` (by default on any free loopback
    port), once it says where it listens; its output goes to ``log``;
    ``files_limit``: its descriptor limit (``ulimit -n``)."""
    out = open(log, "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "iorig", "--db", str(db), "serve",
         *(options or ("--address", "127.0.0.1:0"))],
        stdout=out,
        stderr=subprocess.STDOUT,
        env={**os.environ, "COLUMNS": "300", "NO_COLOR": "1"},
        start_new_session=True,
        preexec_fn=None if files_limit is None else _files_limit(files_limit),
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while "iorig serve: http" not in log.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    return proc, log.read_text().split("iorig serve: ", 1)[1].split()[0]


def _files_limit(count: int):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))


@contextlib.contextmanager
def token_serve(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """``iorig serve`` with a new token on 127.0.0.2 (HTTPS): its URL and
    the token; stopped at the end."""
    token_file = make_token(tmp_path / "agent.token")
    token = token_file.read_text().split()[-1]
    proc, url = start_serve(
        tmp_path / "r.sqlite", tmp_path / "serve.log",
        "--address", "127.0.0.2:0", "--token-file", str(token_file),
    )  # fmt: skip
    try:
        yield url, token
    finally:
        proc.terminate()
        proc.wait(10)
