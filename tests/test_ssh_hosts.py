"""Hosts reached over SSH (issue 25): real OpenSSH servers on 127.0.0.20, …
started by the tests (tests/sshd.py), real fio behind them.

What must hold: a run through SSH gives the figures of a run through direct
fio servers (a paced workload: the expected figure is its rate); nothing it
starts on a host listens on a network address, and nothing it started or
laid out remains there afterwards; stop-host/start-host work over the same
connection; a host that will not let iorig in fails at once, naming it; a
hostile host entry is refused before any connection.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from tests.conftest import REPO, cli_in_process, run_iorig
from tests.fake_fio_server import FakeFioServer
from tests.fioservers import (
    TOLERANCE_PCT,
    check_on_time,
    check_watched_job,
    fio_servers,
    paced_scenario,
    paced_shortfall,
    stopped_for_s,
    tcp_listeners,
    watched_read_job,
)
from tests.sshd import SshLab, ssh_hosts

from iorig.errors import UserError
from iorig.fio.hosts import HostAddress, SshHost, parse_entry, parse_hosts
from iorig.fio.server import process_tree
from iorig.fio.ssh import CONFIG_ENV, ssh_command
from iorig.store import Store

PACED_IOPS = 2000
PACED = paced_scenario(PACED_IOPS)

# ---------------------------------------------------------------- unit: parsing


def test_ssh_entries_parse_to_user_host_and_port():
    assert parse_entry("ssh://db1") == SshHost("db1")
    assert parse_entry("SSH://Alice@DB1.lab:2222") == SshHost("db1.lab", "Alice", 2222)
    assert parse_entry("ssh://[::1]:22").label == "ssh://[::1]:22"
    hosts = parse_hosts("ssh://a,b:9000,ssh://root@10.0.0.3")
    assert [h.label for h in hosts] == ["ssh://a", "b:9000", "ssh://root@10.0.0.3"]
    assert isinstance(hosts[1], HostAddress)


@pytest.mark.parametrize(
    "entry",
    [
        "ssh://-oProxyCommand=touch${IFS}/tmp/pwned",  # an option as the host
        "ssh://a@-oProxyCommand=x",
        "ssh://-oProxyCommand=x@host",  # an option as the user
        "ssh://-l@host",
        "ssh://host\n-oProxyCommand=x",  # a second line
        "ssh://host -oProxyCommand=x",
        "ssh://host\t-p",
        "ssh://user name@host",
        "ssh://host/path",
        "ssh://'host'",
        "ssh://host;id",
        "ssh://$(id)@host",
        "ssh://host:0",
        "ssh://host:99999",
        "ssh://",
        "ssh://u@",
        "telnet://host",
    ],
)
def test_a_hostile_host_entry_is_refused(entry):
    with pytest.raises(UserError, match="is not a host"):
        parse_entry(entry)


def test_ssh_gets_the_host_after_a_double_dash_and_options_only_from_iorig(tmp_path):
    command = ssh_command(SshHost("db1", "alice", 2222), tmp_path / "cm", "-T")
    assert command[-2:] == ["--", "db1"]  # nothing after -- is read as an option
    assert command[command.index("-p") + 1] == "2222"
    assert command[command.index("-l") + 1] == "alice"
    assert "BatchMode=yes" in command and "ForwardAgent=no" in command


def test_a_hostile_hosts_file_is_refused_naming_its_line_before_any_connection(tmp_path):
    # the unit tier refuses any process or socket: reaching ssh would fail the test
    hosts = tmp_path / "hosts"
    hosts.write_text("ssh://good.lab\n# a comment\nssh://-oProxyCommand=sh${IFS}-c${IFS}id\n")
    done = cli_in_process(
        tmp_path / "r.sqlite", "run", "peak", "--quick", "--hosts-file", str(hosts)
    )
    assert done.returncode != 0
    assert f"{hosts}:3:" in done.stderr and "is not a host" in done.stderr
    assert not (tmp_path / "r.sqlite").exists()


# ---------------------------------------------------------------- real sshd


def _private_ssh_sockets(lab: SshLab) -> dict[str, int]:
    """The Unix sockets the lab's ssh clients listen on, by path: the mode of
    the directory that holds each (who else may connect). Other labs run
    beside this one: their clients are not ours."""
    ours = set(lab.ssh_clients())
    done = subprocess.run(["ss", "-Hlxp"], capture_output=True, text=True, check=True)
    found = {}
    for line in done.stdout.splitlines():
        fields = line.split()
        pids = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        if '"ssh"' in line and pids & ours and fields[4].startswith("/"):
            with contextlib.suppress(OSError):
                found[fields[4]] = Path(fields[4]).parent.stat().st_mode & 0o777
    return found


def _shown(db: Path) -> dict:
    return json.loads(run_iorig(db, "show", "last", "--json", check=True).stdout)


def _aggregate_iops(db: Path) -> float:
    phase = next(p for p in _shown(db)["phases"] if p["name"] == "random-read")
    return float(phase["iops"])


@pytest.mark.fio
@pytest.mark.system
# timing: a paced rate (beside the first stage's busiest minute the hosts
# together did 3,779 IOPS of their 4,000)
@pytest.mark.timing
def test_a_paced_run_over_ssh_matches_direct_servers_and_leaves_nothing(tmp_path, monkeypatch):
    scenario = tmp_path / "paced.yaml"
    scenario.write_text(PACED)
    with ssh_hosts(2, tmp_path) as lab:
        monkeypatch.setenv(CONFIG_ENV, str(lab.config))
        db = tmp_path / "ssh.sqlite"
        labels = ",".join(h.label for h in lab.hosts)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "iorig",
                "--db",
                str(db),
                "run",
                str(scenario),
                "--hosts",
                labels,
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        seen: list[tuple[str, str]] = []
        sockets: dict[str, int] = {}
        keepers: set[Path] = set()
        while proc.poll() is None:  # what this run's processes listen on, here and on the hosts
            ours = {*process_tree(proc.pid), *(p for i in range(2) for p in lab.sessions(i))}
            seen += [ln for ln in tcp_listeners(ours) if ln not in seen]
            sockets.update(_private_ssh_sockets(lab))
            keepers |= set(lab.remote_tmp.glob("iorig.*"))
            time.sleep(0.5)
        out, err = proc.communicate()
        assert proc.returncode == 0, out + err
        left = lab.leftovers(wait_s=0.5)
    over_ssh = _aggregate_iops(db)
    doc = json.loads(run_iorig(db, "show", "last", "--json", check=True).stdout)
    assert doc["run"]["hosts"] == [h.label for h in lab.hosts]
    assert left == [], left
    assert len(keepers) == 2, keepers  # each host's keeper under its session's TMPDIR
    # fio's client reaches each host through a Unix socket in a directory
    # only this user may enter: neither ssh nor fio listens on TCP, and
    # iorig itself only on loopback (learning the local fio's protocol)
    assert [(a, p) for a, p in seen if re.search(r'"(ssh|fio)"', p)] == []
    assert all(a.startswith("127.") for a, _ in seen), seen
    forwarded = {path: mode for path, mode in sockets.items() if path.endswith("/fio.sock")}
    assert len(forwarded) == 2, sockets
    assert set(forwarded.values()) == {0o700}, forwarded
    with fio_servers(2, tmp_path) as servers:
        direct_db = tmp_path / "direct.sqlite"
        run_iorig(
            direct_db,
            "run",
            str(scenario),
            "--hosts",
            ",".join(s.label for s in servers),
            check=True,
        )
    direct = _aggregate_iops(direct_db)
    print(f"paced 2 × {PACED_IOPS} IOPS: over SSH {over_ssh:.0f}, direct {direct:.0f}")
    # the expected figure is the workload's own rate, on both paths; a path
    # the machine kept from its pace (a soak beside the first stage: direct
    # servers 3,736 IOPS) must say so, and the other path must then hold it
    short = [paced_shortfall(_shown(d), 2, PACED_IOPS) for d in (db, direct_db)]
    assert not all(short), f"neither path held the pace: {short}"


@pytest.mark.fio
@pytest.mark.system
def test_a_host_that_asks_for_a_password_fails_at_once_naming_it(tmp_path, monkeypatch):
    with ssh_hosts(2, tmp_path) as lab:
        monkeypatch.setenv(CONFIG_ENV, str(lab.config))
        (lab.base / "authorized_keys").write_text("")  # our key no longer lets us in
        db = tmp_path / "r.sqlite"
        began = time.monotonic()
        done = run_iorig(
            db,
            "run",
            "peak",
            "--quick",
            "--hosts",
            ",".join(h.label for h in lab.hosts),
            timeout=60,
        )
        took = time.monotonic() - began
        left = lab.leftovers(wait_s=0)
    assert done.returncode != 0
    assert "could not be reached over SSH" in done.stderr
    for host in lab.hosts:
        assert host.label in done.stderr
    assert "Permission denied" in done.stderr
    assert took < 10, f"{took:.1f} s to give up"
    assert not db.exists() or "running" not in run_iorig(db, "runs").stdout
    assert left == []


# paced rates and a host stopped for seconds: measured figures a busy machine bends
@pytest.mark.fio
@pytest.mark.system
@pytest.mark.timing
def test_stop_host_and_start_host_work_over_ssh(tmp_path, monkeypatch):
    quick_iops = 500  # the availability scenario's quick profile, per host
    with ssh_hosts(2, tmp_path) as lab:
        monkeypatch.setenv(CONFIG_ENV, str(lab.config))
        db = tmp_path / "r.sqlite"
        done = run_iorig(
            db,
            "run",
            "availability",
            "--quick",
            "--set",
            "fail_host=2",
            "--set",
            f"tolerance={TOLERANCE_PCT}",
            "--hosts",
            ",".join(h.label for h in lab.hosts),
            timeout=180,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        left = lab.leftovers(wait_s=0.5)
    doc = json.loads(run_iorig(db, "show", "last", "--json", check=True).stdout)
    stop, start = doc["events"]
    assert (stop["action"], stop["status"], start["action"], start["status"]) == (
        "stop-host",
        "done",
        "start-host",
        "done",
    )
    # held for the 3 s asked, as the host tells it
    assert start["at_s"] - stop["at_s"] == 3.0
    stopped_for_s(stop, start)
    # the server, its connection and the job: fio's jobs lead sessions of
    # their own, so a process-group stop would miss them and the host went on
    stopped = int(re.search(r"stopped (\d+) processes", stop["detail"])[1])
    assert stopped >= 3, stop["detail"]
    with Store(db) as store:
        steady = next(p for p in store.load_run(doc["run"]["id"]).phases if p.name == "steady")
    # at fail_at (5 s) of the hosts' I/O (the keepers tell when their jobs
    # began) and start-host 3 s later: on time, or named late or early
    warnings = doc["run"]["warnings"]
    check_on_time(stop, 5.0, stop["started_at"] - steady.origin, warnings)
    check_on_time(start, 8.0, start["started_at"] - steady.origin, warnings)
    impact = stop["impact"]
    print(f"availability --quick over SSH, stop-host 2 of 2: {impact}")
    # two hosts at quick_iops each; one stopped leaves half: 50 % is the expected dip
    assert impact["baseline"] == pytest.approx(2 * quick_iops, rel=0.15)
    assert 35 <= impact["dip_pct"] <= 60
    assert impact["recovery_s"] is not None and impact["recovery_s"] >= 3  # stopped for 3 s
    assert doc["verdict"].startswith("PASS"), doc["verdict"]
    assert left == []


@pytest.mark.fio
@pytest.mark.system
def test_the_keeper_tells_how_many_bytes_its_fio_processes_read_so_far(
    tmp_path, scratch, monkeypatch
):
    """IO over the SSH session (the keeper's copy of fio.hostio's counter):
    the figures rise while fio's jobs run and end at fio's own count."""
    from iorig.fio.ssh import SshControl, close_all, connect_all

    with ssh_hosts(1, tmp_path) as lab:
        monkeypatch.setenv(CONFIG_ENV, str(lab.config))
        workdir, connections = connect_all(lab.hosts)
        try:
            (connection,) = connections.values()
            assert connection.endpoint is not None
            job = watched_read_job(connection.endpoint, scratch, SshControl(connection).io)
        finally:
            close_all(workdir, connections)
        left = lab.leftovers()
    check_watched_job(job)
    assert left == []


# ---------------------------------------------------------------- hosts check


@pytest.mark.fio
@pytest.mark.system
def test_hosts_check_reports_each_host_and_names_those_that_would_spoil_a_run(tmp_path):
    local_version = subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout
    other_fio = FakeFioServer(("127.0.0.3", 18797), fio_version="fio-3.99")
    with ssh_hosts(2, tmp_path) as lab, other_fio:
        env = lab.env | {"COLUMNS": "250"}
        good = ",".join(h.label for h in lab.hosts)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "iorig",
                "hosts",
                "check",
                good,
                "--json",
                "--target",
                f"{lab.hosts[1].label}=/dev/null",
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        facts = {f["host"]: f for f in json.loads(done.stdout)["hosts"]}
        spoiled = subprocess.run(
            [
                sys.executable,
                "-m",
                "iorig",
                "hosts",
                "check",
                f"{lab.hosts[0].label},127.0.0.3:18797,127.0.0.9:18999",
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        left = lab.leftovers(wait_s=0)
    first, second = (facts[h.label] for h in lab.hosts)
    # the same machine behind both sshd: its own fio, CPUs and clock
    assert first["fio_version"] == second["fio_version"] == local_version.strip()
    assert first["cpus"] == os.cpu_count()
    assert "libaio" in first["engines"] and first["engines"] == second["engines"]
    assert abs(first["clock_offset_s"]) <= first["clock_error_s"] + 0.05
    assert second["target"] == "/dev/null" and second["target_kind"] == "character special file"
    assert first["target_kind"] == "directory" and first["free_bytes"] > 0  # the keeper's
    assert first["problems"] == second["problems"] == []
    assert spoiled.returncode != 0
    assert "2 of 3 hosts would spoil a run" in spoiled.stderr
    assert "127.0.0.3:18797: runs fio-3.99" in spoiled.stderr
    assert "127.0.0.9:18999: its fio server did not answer" in spoiled.stderr
    assert lab.hosts[0].label in spoiled.stdout  # the table shows the good host too
    assert left == []


# ---------------------------------------------------------------- the keeper


def test_the_keeper_works_under_tmpdir_unless_fios_socket_would_not_fit(tmp_path, monkeypatch):
    from iorig.fio import sshkeeper

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert sshkeeper.private_base() == str(tmp_path)
    # a socket's path holds 107 bytes: DIR/iorig.XXXXXXXX/fio.sock must fit
    assert sshkeeper.SOCKET_PATH_MAX == 107
    under = len("/iorig.12345678/fio.sock")
    deep = tmp_path / ("d" * (107 - len(str(tmp_path)) - 1 - under))
    deep.mkdir()
    monkeypatch.setenv("TMPDIR", str(deep))
    assert sshkeeper.private_base() == str(deep)
    deeper = tmp_path / (deep.name + "d")
    deeper.mkdir()
    monkeypatch.setenv("TMPDIR", str(deeper))
    assert sshkeeper.private_base() == "/var/tmp"
    monkeypatch.setenv("TMPDIR", str(tmp_path / "missing"))
    assert sshkeeper.private_base() == "/var/tmp"
    monkeypatch.delenv("TMPDIR")
    assert sshkeeper.private_base() == "/var/tmp"


def test_sockets_here_go_where_their_path_fits(monkeypatch):
    """SSH forwards, agent relays and an agent's fio server listen in
    fio.sockdir's directories: under $TMPDIR when a socket's path fits the
    kernel's 107 bytes, else /tmp, else a clear error (a traceback before)."""
    from iorig.fio import sockdir

    longest = "t2.control.sock"
    base = Path(tempfile.mkdtemp(prefix="s", dir="/tmp"))  # short: room to grow
    try:
        # exactly 107 bytes fits; one more does not
        room = sockdir.SOCKET_PATH_MAX - len(f"/iorig-test-12345678/{longest}")
        exact = base / ("d" * (room - len(str(base)) - 1))
        exact.mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(exact))
        made = sockdir.socket_dir("iorig-test-", longest)
        assert made.parent == exact and len(str(made / longest)) == sockdir.SOCKET_PATH_MAX
        assert stat.S_IMODE(made.stat().st_mode) == 0o700  # only this user reaches a socket
        deeper = base / (exact.name + "d")
        deeper.mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(deeper))
        made = sockdir.socket_dir("iorig-test-", longest)
        assert made.parent == Path("/tmp")
        made.rmdir()
        monkeypatch.setattr(sockdir, "FALLBACKS", (str(deeper), str(base / "missing")))
        with pytest.raises(UserError, match="too long for a socket's path") as refused:
            sockdir.socket_dir("iorig-test-", longest)
        assert "TMPDIR" in (refused.value.hint or "")
    finally:
        shutil.rmtree(base)
