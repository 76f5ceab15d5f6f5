"""Faults on hosts reached over SSH (issue 25): real sshd on 127.0.0.20, …
(tests/sshd.py), a paced run on two hosts, then one of: the SSH connection
to host 2 killed mid-phase, Ctrl-C, host 2's fio killed on the host.

What must hold: the run ends (within 5 s of Ctrl-C), the healthy host's
results are kept and the broken one is named, and afterwards no process
iorig started runs on any host and nothing it laid out remains there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import REPO
from tests.faults.watch import processes_with, stored_hosts
from tests.fioservers import paced_scenario
from tests.sshd import SshLab, ssh_hosts
from tests.waiting import wait_for_phase

from iorig.fio.ssh import CONFIG_ENV

# Ctrl-C within seconds is a timing bound: the machine to itself
pytestmark = [pytest.mark.fio, pytest.mark.system, pytest.mark.timing]

PACED = paced_scenario(1000, duration="10s")


@contextlib.contextmanager
def _run(tmp_path: Path, lab: SshLab) -> Iterator[tuple[subprocess.Popen, Path]]:
    db = tmp_path / "results.sqlite"
    scenario = tmp_path / "paced.yaml"
    scenario.write_text(PACED)
    env = dict(os.environ, IORIG_DB=str(db), COLUMNS="200", **{CONFIG_ENV: str(lab.config)})
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "iorig",
            "run",
            str(scenario),
            "--hosts",
            ",".join(h.label for h in lab.hosts),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # the measured phase under way: fio reads on each host (the healthy
        # one's figures are kept; the broken one's fio and connection exist)
        labels = [h.label for h in lab.hosts]
        wait_for_phase(db, "random-read", io_seconds=1, hosts=labels, timeout_s=60, proc=proc)
        yield proc, db
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _healthy_kept(db: Path, lab: SshLab) -> str:
    """The healthy host (1) kept its figures; the run's error."""
    (status, error), hosts = stored_hosts(db)
    healthy = lab.hosts[0].label
    assert hosts[healthy][0] == "ok" and (hosts[healthy][1] or 0) > 0, hosts
    return f"{status}: {error}"


def test_the_ssh_connection_killed_mid_phase_keeps_the_healthy_host(tmp_path):
    with ssh_hosts(2, tmp_path) as lab:
        with _run(tmp_path, lab) as (proc, db):
            broken = lab.hosts[1]
            masters = processes_with(b"ControlMaster=yes", f"-p\0{broken.port}\0".encode())
            assert len(masters) == 1, masters
            os.kill(masters[0], signal.SIGKILL)  # the connection is gone, as on a lost link
            out, err = proc.communicate(timeout=60)
        left = lab.leftovers()
    assert proc.returncode == 1, out + err
    assert "Traceback" not in err
    outcome = _healthy_kept(db, lab)
    assert outcome.startswith("failed") and broken.label in outcome, outcome
    assert left == [], left


def test_ctrl_c_over_ssh_ends_in_seconds_keeps_results_and_leaves_nothing(tmp_path):
    with ssh_hosts(2, tmp_path) as lab:
        with _run(tmp_path, lab) as (proc, db):
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
            took = time.monotonic() - sent
        left = lab.leftovers()
    assert proc.returncode == 130, out + err
    assert took < 5.0, f"the run took {took:.1f} s to end after Ctrl-C"
    assert "Traceback" not in err
    assert _healthy_kept(db, lab).startswith("aborted")
    assert left == [], left


def test_the_remote_fio_killed_keeps_the_healthy_host_and_leaves_nothing(tmp_path):
    with ssh_hosts(2, tmp_path) as lab:
        with _run(tmp_path, lab) as (proc, db):
            broken = lab.hosts[1]
            fio = [p for p in lab.sessions(1) if b"fio" in Path(f"/proc/{p}/cmdline").read_bytes()]
            assert fio, "no fio under host 2's sshd"
            for pid in fio:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            out, err = proc.communicate(timeout=60)
        left = lab.leftovers()
    assert proc.returncode == 1, out + err
    outcome = _healthy_kept(db, lab)
    assert outcome.startswith("failed") and broken.label in outcome, outcome
    assert left == [], left
