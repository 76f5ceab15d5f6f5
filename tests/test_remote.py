"""fio client/server: host addresses, the version probe and check, the
managed fio server, and the collection step on a recorded client/server run
(hosts told apart and put on one time axis, as production does it)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.fake_fio_server import FakeFioServer
from tests.fioservers import fio_server, fio_servers, server_dir
from tests.fixtures import DATA
from tests.waiting import wait_until

from iorig.errors import UserError
from iorig.fio import hosts as remote_hosts
from iorig.fio import parse
from iorig.fio import protocol as remote
from iorig.fio import server as server_mod
from iorig.fio.hosts import HostAddress, parse_host
from iorig.fio.process import proc_table
from iorig.fio.protocol import ProbeFailure, ServerInfo
from iorig.fio.runner import FioExit
from iorig.fio.server import FioServer
from iorig.model import AGGREGATE, ALL, Scope, ScopeKind
from iorig.run.backend import HostLogs, RawPhase
from iorig.run.collect import collect, host_start_ms
from iorig.run.plan import PlannedPhase

FIO = shutil.which("fio") or "fio"
FAKE_IP = "127.0.0.20"  # fakes live apart from the real servers (127.0.0.2, …)
PROTOCOL_PORT = 18739  # the listener that learns the local fio's protocol

# ---------------------------------------------------------------- addresses


@pytest.mark.parametrize(
    ("text", "host", "port", "label", "fio_arg"),
    [
        ("server1", "server1", 8765, "server1:8765", "ip:server1,8765"),
        ("Server1.Lab.example:9000", "server1.lab.example", 9000, "server1.lab.example:9000", None),
        ("127.0.0.2:18701", "127.0.0.2", 18701, "127.0.0.2:18701", "ip:127.0.0.2,18701"),
        (" 10.1.2.3 ", "10.1.2.3", 8765, "10.1.2.3:8765", "ip:10.1.2.3,8765"),
        ("[::1]:18706", "::1", 18706, "[::1]:18706", "ip6:::1,18706"),
        ("[0:0::1]", "::1", 8765, "[::1]:8765", "ip6:::1,8765"),
        ("fe80::1", "fe80::1", 8765, "[fe80::1]:8765", "ip6:fe80::1,8765"),
    ],
)
def test_parse_host_accepts(text, host, port, label, fio_arg):
    address = parse_host(text)
    assert address == HostAddress(host, port)
    assert address.label == label == str(address)
    if fio_arg:
        assert address.fio_client_arg() == fio_arg


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("host:", "port"),
        ("host:0", "port"),
        ("host:65536", "port"),
        ("host:http", "port"),
        (":8765", "host part is empty"),
        ("300.1.1.1", "IPv4"),
        ("under_score", "letters, digits"),
        ("-bad.example", "letters, digits"),
        ("[::1", "without ']'"),
        ("[::1]8765", "after ']'"),
        ("[server]:1", "IPv6"),
        ("fe80::1:8765:x", "[address]:port"),
        ("ip:10.0.0.1,8765", "fio's syntax"),
        ("a b", "spaces"),
        ("fe80::1%eth0", "scoped"),
    ],
)
def test_parse_host_rejects_junk_with_a_reason(text, words):
    with pytest.raises(UserError) as err:
        parse_host(text)
    assert words in err.value.message
    assert err.value.hint


def test_local_is_reserved():
    with pytest.raises(UserError, match="this machine"):
        parse_host("LOCAL")


def test_parse_hosts_list():
    hosts = remote_hosts.parse_hosts("a,b:9000,[::1]", default_port=18700)
    assert [h.label for h in hosts] == ["a:18700", "b:9000", "[::1]:18700"]
    with pytest.raises(UserError, match="twice"):
        remote_hosts.parse_hosts("a:8765,A")
    with pytest.raises(UserError, match="empty entry"):
        remote_hosts.parse_hosts("a,,b")


def test_an_empty_or_endless_host_list_is_refused_naming_the_option(tmp_path):
    # found by issue 27's campaign: `--hosts ''` ran on this machine, and a
    # 100,000-line hosts file ran past 90 s (a quadratic duplicate check)
    from iorig.run.request import host_list

    for empty in ("", "  "):
        with pytest.raises(UserError, match="names no host"):
            host_list(empty, None)
    limit = remote_hosts.MAX_HOSTS
    assert len(host_list(",".join(f"h{i}" for i in range(limit)), None)) == limit
    with pytest.raises(UserError, match=f"--hosts lists more than {limit} hosts"):
        host_list(",".join(f"h{i}" for i in range(limit + 1)), None)
    listed = tmp_path / "h.txt"
    listed.write_text("".join(f"ssh://h{i}\n" for i in range(100_000)))
    with pytest.raises(UserError, match=f"h.txt lists more than {limit} hosts"):
        host_list(None, listed)
    listed.write_text("".join(f"ssh://h{i}\n" for i in range(limit - 1)))
    with pytest.raises(UserError, match=r"h.txt \(with --hosts\) lists more than"):
        host_list("a,b", listed)


# ---------------------------------------------------------------- time axis


def test_host_start_is_the_tightest_window_bound():
    assert host_start_ms([5000 + 1004, 5000 + 2001, 5000 + 3003]) == 5001
    assert host_start_ms([3000, 1000, 2000]) == 0
    assert host_start_ms([1004, 2004, 3003, 3004]) == 3  # last window repeated


# ---------------------------------------------------------------- protocol (no fio needed)


def test_checksums_match_a_probe_captured_from_fio_3_33():
    # The header and payload a real fio 3.33 client sent to a listener.
    head = bytes.fromhex("61000a000000000050faadaa4956000088000000bd989edf")
    pdu = struct.pack("<Q128s", 1, b"127.0.0.5")  # asks for zlib, names the server
    version, opcode, _, _, pdu_len, pdu_crc = remote.decode_header(head)
    assert (version, opcode, pdu_len) == (97, 10, len(pdu))
    assert remote.crc16(pdu) == pdu_crc
    ours = remote.probe_command("127.0.0.5", version=97)
    assert remote.decode_header(ours[:24])[:3] == (97, 10, 0) and len(ours) == 24 + len(pdu)


@pytest.mark.system
def test_probe_of_a_fake_server_with_another_fio_version():
    with FakeFioServer((FAKE_IP, 18750), fio_version="fio-3.99") as fake:
        host = HostAddress(*fake.address)
        info = remote.probe_server(host, protocol=97, timeout_s=3)
    assert info == ServerInfo("fio-3.99", 97, "fakehost", "Linux", "x86-64", 64, 4, False)
    with pytest.raises(UserError) as err:
        remote.check_versions("fio-3.33", {host: info}, local_protocol=97)
    text = str(err.value)
    assert f"{FAKE_IP}:18750" in text and "fio-3.99" in text and "fio-3.33" in text


@pytest.mark.system
def test_probe_learns_the_version_of_a_server_speaking_another_protocol():
    with FakeFioServer((FAKE_IP, 18751), fio_version="fio-3.99", protocol=98) as fake:
        host = HostAddress(*fake.address)
        info = remote.probe_server(host, protocol=97, timeout_s=3)
        assert fake.seen_versions == [97, 98]  # refused once, then asked in its protocol
    assert isinstance(info, ServerInfo)
    assert (info.fio_version, info.protocol) == ("fio-3.99", 98)
    with pytest.raises(
        UserError, match=r"(?s)fio-3\.33 \(protocol 97\).*fio-3\.99 \(protocol 98\)"
    ):
        remote.check_versions("fio-3.33", {host: info}, local_protocol=97)


def test_a_protocol_mismatch_without_a_second_answer_is_still_named():
    failure = ProbeFailure("protocol", "it speaks another fio protocol", server_protocol=104)
    host = HostAddress("10.0.0.7", 8765)
    with pytest.raises(UserError, match=r"10\.0\.0\.7:8765 speaks fio protocol 104") as err:
        remote.check_versions("fio-3.33", {host: failure}, local_protocol=97)
    assert "fio-3.33" in str(err.value)


@pytest.mark.system
@pytest.mark.parametrize(
    ("behaviour", "reason"), [("drop", "closed"), ("garbage", "not_fio"), ("silent", "timeout")]
)
def test_servers_that_do_not_answer_fail_within_the_timeout(behaviour, reason):
    with FakeFioServer((FAKE_IP, 18752), behaviour=behaviour) as fake:
        started = time.monotonic()
        result = remote.probe_server(HostAddress(*fake.address), protocol=97, timeout_s=1.0)
        elapsed = time.monotonic() - started
    assert isinstance(result, ProbeFailure) and result.reason == reason
    assert elapsed < 1.5


@pytest.mark.system
def test_a_refused_port_fails_at_once_and_is_named():
    host = HostAddress(FAKE_IP, 18753)  # nothing listens there
    started = time.monotonic()
    results = remote.server_versions(FIO, [host], 2.0, local_protocol=97)
    assert time.monotonic() - started < 1.0
    assert results[host].reason == "refused"
    with pytest.raises(UserError, match=rf"{FAKE_IP}:18753: connection refused") as err:
        remote.check_versions("fio-3.33", results)
    assert "iorig agent" in err.value.hint


@pytest.mark.system
def test_version_check_of_many_hosts_is_bounded_by_one_timeout():
    with (
        FakeFioServer((FAKE_IP, 18754), behaviour="silent") as silent,
        FakeFioServer((FAKE_IP, 18755), behaviour="silent") as silent2,
        FakeFioServer((FAKE_IP, 18756)) as good,
    ):
        hosts = [HostAddress(*s.address) for s in (silent, silent2, good)]
        started = time.monotonic()
        results = remote.server_versions(FIO, hosts, 1.0, local_protocol=97)
        elapsed = time.monotonic() - started
    assert elapsed < 1.5
    assert [type(results[h]).__name__ for h in hosts] == ["ProbeFailure"] * 2 + ["ServerInfo"]
    with pytest.raises(UserError) as err:
        remote.check_versions("fio-3.33", results)
    assert str(err.value).count("never answered") == 2


# ---------------------------------------------------------------- FioServer (no fio needed)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "10.0.0.11", "192.0.2.1", "storage01"])
def test_fio_server_refuses_beyond_loopback_unless_allowed(tmp_path, host):
    with pytest.raises(UserError, match="no authentication") as err:
        FioServer(FIO, HostAddress(host, 18757), tmp_path)
    assert "SSH tunnel" in err.value.hint and "--insecure-no-auth" in err.value.hint
    allowed = FioServer(FIO, HostAddress(host, 18757), tmp_path, insecure_no_auth=True)
    assert allowed.pid is None  # made, not started


@pytest.mark.system
def test_fio_server_on_a_foreign_address_is_refused(tmp_path):
    # TEST-NET-1: allowed beyond loopback, but no address of this machine
    server = FioServer(FIO, HostAddress("192.0.2.1", 18757), tmp_path, insecure_no_auth=True)
    with pytest.raises(UserError, match=r"cannot start a fio server on 192\.0\.2\.1:18757"):
        server.start()
    assert server.pid is None


@pytest.mark.system
def test_fio_server_that_exits_at_start_is_reported(tmp_path):
    log = tmp_path / "false.log"
    server = FioServer("/bin/false", HostAddress("127.0.0.2", 18758), tmp_path, log_path=log)
    with pytest.raises(UserError, match="exited at start"):
        server.start(timeout_s=5)


@pytest.mark.system
def test_port_held_by_another_program_is_a_clear_error(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.2", 18759))
        holder.listen(1)
        with pytest.raises(UserError, match="already in use") as err:
            FioServer(FIO, HostAddress("127.0.0.2", 18759), tmp_path).start()
    assert "--port" in err.value.hint


# ---------------------------------------------------------------- real fio


@pytest.mark.fio
def test_real_server_reports_the_local_fio_version(tmp_path):
    from iorig.fio.runner import fio_version

    local_version = fio_version(FIO)
    protocol = remote.local_protocol_version(FIO, port=PROTOCOL_PORT)
    with fio_server(tmp_path) as server:
        info = remote.probe_server(server.address, protocol=protocol, timeout_s=5)
        results = remote.server_versions(FIO, [server.address], 5, local_protocol=protocol)
    assert isinstance(info, ServerInfo)
    assert info.fio_version == local_version and info.protocol == protocol
    assert results == {server.address: info}
    remote.check_versions(local_version, results, local_protocol=protocol)  # no error


@pytest.mark.fio
def test_second_server_on_a_busy_port_is_refused(tmp_path):
    with fio_server(tmp_path) as first:
        second = FioServer(FIO, first.address, tmp_path / "second")
        with pytest.raises(UserError, match="already in use") as err:
            second.start()
        assert "share the port" in err.value.hint
        assert second.pid is None and first.running


@contextlib.contextmanager
def _idle_client(tmp_path: Path, server: FioServer) -> Iterator[subprocess.Popen]:
    """A fio client running a minute of null I/O on ``server``; killed on exit."""
    job = tmp_path / "idle.fio"
    job.write_text("[idle]\nioengine=null\nsize=1m\nrw=read\ntime_based=1\nruntime=60\n")
    client = subprocess.Popen(
        [FIO, "--eta=never", f"--client={server.address.fio_client_arg()}", str(job)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield client
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()


@pytest.mark.fio
def test_stop_ends_the_server_and_the_jobs_it_runs(tmp_path):
    """fio's job processes call setsid: stopping only the server's process
    group would leave them running."""
    with fio_server(tmp_path) as server, _idle_client(tmp_path, server) as client:
        # listener, connection, backend and the job process (own session)
        assert _wait(lambda: len(server_mod.process_tree(server.pid)) >= 4, 10)
        tree = server_mod.process_tree(server.pid)
        server.stop()
        assert client.wait(timeout=10) is not None  # the client notices and ends
    assert not [pid for pid in tree if server_mod._alive(pid)]


@pytest.mark.fio
def test_jobs_outlive_a_killed_listener_and_stop_still_ends_them(tmp_path):
    """SIGTERM to the listening process alone (what `kill PID` does) leaves the
    running session and its job alive; stop() finds them by their session."""
    with fio_server(tmp_path) as server, _idle_client(tmp_path, server) as client:
        assert _wait(lambda: len(server_mod.process_tree(server.pid)) >= 4, 10)
        os.kill(server.pid, signal.SIGTERM)
        assert _wait(lambda: not server.running, 5)
        time.sleep(0.5)  # on purpose, from the listener's end: time for the session to fail
        assert client.poll() is None  # the session goes on without its listener
        survivors = [p for p in server_mod.process_tree(server.pid) if p != server.pid]
        # the connection's process, its job runner and the job; on a busy
        # machine the connection's process once went with its listener
        # (2 left): the job and its runner are what must go on, and stop
        assert len(survivors) >= 2 and all(server_mod._alive(p) for p in survivors)
        server.stop()
        assert not [p for p in survivors if server_mod._alive(p)]
        assert client.wait(timeout=10) is not None


@pytest.mark.fio
def test_stop_ends_a_job_whose_connection_process_died_with_its_listener(tmp_path):
    """On a busy machine a connection's process once went with its listener:
    the job it had started (its own session) then had init for a parent, and
    neither the listener's session nor its descendants held it, so stop()
    left it doing I/O until its runtime ended. The server knows its jobs
    from while they were attached."""
    with fio_server(tmp_path) as server, _idle_client(tmp_path, server):
        assert _wait(lambda: len(server_mod.process_tree(server.pid)) >= 4, 10)
        # the server has looked at its processes since: it knows each of them
        tree = wait_until(
            lambda: _known(server),
            10,
            "the server knowing every process under it",
            detail=lambda: (server_mod.process_tree(server.pid), server._forked.alive()),
        )
        table = proc_table()
        connections = [p for p in tree if p != server.pid and table[p][1] == server.pid]
        jobs = [p for p in tree if p != server.pid and p not in connections]
        assert connections and jobs, (tree, table)
        os.kill(server.pid, signal.SIGKILL)
        for pid in connections:
            os.kill(pid, signal.SIGKILL)
        assert _wait(lambda: not server.running, 5)
        assert _wait(lambda: not any(server_mod._alive(p) for p in connections), 5)
        assert [p for p in jobs if server_mod._alive(p)]  # the jobs go on, orphaned
        server.stop()
        assert _wait(lambda: not [p for p in jobs if server_mod._alive(p)], 5), jobs


@pytest.mark.fio
def test_servers_helper_uses_distinct_addresses_ports_and_directories(tmp_path):
    with fio_servers(3, tmp_path) as hosts:
        assert [h.host for h in hosts] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
        assert len({h.port for h in hosts}) == 3
        dirs = [server_dir(tmp_path, h) for h in hosts]
        assert all(d.is_dir() for d in dirs) and len(set(dirs)) == 3
        pids = [_listener_pid(h) for h in hosts]
    assert not [pid for pid in pids if server_mod._alive(pid)]


def _listener_pid(host: HostAddress) -> int:
    """The fio process listening at ``host`` (by the inode of its socket)."""
    fios = subprocess.run(["pgrep", "-x", "fio"], capture_output=True, text=True).stdout.split()
    for pid in map(int, fios):
        if server_mod._listens(pid, host.port):
            return pid
    raise AssertionError(f"no fio listens at {host.label}")


def _known(server: FioServer) -> list[int] | None:
    """The processes under ``server`` (its job among them) once it has
    recorded every one of them (``FioServer._watch``); None before."""
    assert server.pid is not None
    tree = server_mod.process_tree(server.pid)
    others = set(tree) - {server.pid}
    return tree if len(tree) >= 4 and others <= set(server._forked.alive()) else None


def _wait(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# ---------------------------------------------------------------- recorded fixture

FIXTURE = DATA / "clientserver-3hosts"


def test_fixture_hosts_are_told_apart_by_hostname_and_port():
    hosts = [parse_host(line) for line in (FIXTURE / "hosts.txt").read_text().split()]
    output = parse.parse_final((FIXTURE / "output.json").read_text())
    assert {j.host for j in output.jobs} == {h.label for h in hosts}
    assert len(output.jobs) == 2 * len(hosts)  # numjobs=2: one entry per job per host
    for job in output.jobs:  # per-host latency bins are there, to be merged by iorig
        assert int(job.dirs["read"].hist.sum()) == job.dirs["read"].ios


def _recorded_phase() -> tuple[RawPhase, PlannedPhase]:
    """The fixture as ServerBackend brings a phase back, and the planned phase."""
    from iorig.run.plan import build_plan
    from iorig.scenario.adhoc import adhoc_source
    from iorig.scenario.loading import resolve
    from iorig.targets import remote_target

    hosts = [parse_host(line) for line in (FIXTURE / "hosts.txt").read_text().split()]
    resolved = resolve(
        adhoc_source("randread", name="cs"),
        None,
        {"bs": "4k", "iodepth": "4", "jobs": "2", "duration": "3s", "size": "16MiB"},
    )
    target = remote_target(
        None,
        host=hosts[0].label,
        role="data",
        size=16 << 20,
        size_explicit=True,
        allow_destroy=False,
    )
    plan = build_plan(resolved, {"data": target}, {("data", True): "io_uring"}, "fio", "fio-3.33")
    (phase,) = [p for p in plan.phases if p.name == "randread"]
    raw = RawPhase(
        started_at=0.0,
        ended_at=3.0,
        job_text="",
        command=(),
        exit=FioExit(0, (FIXTURE / "output.json").read_text(), "", None, 3.0),
        logs=parse.read_logs(FIXTURE),
        hosts=tuple(HostLogs(h.label, f".h{i}") for i, h in enumerate(hosts)),
        wallclock_logs=True,
        exit_code_counts=False,
    )
    return raw, phase


def test_collection_tells_the_recorded_hosts_apart_and_aligns_them():
    raw, phase = _recorded_phase()
    collected = collect(raw, phase)
    assert collected.problem is None and collected.fio_version == "fio-3.33"
    kinds = [s.scope.kind for s in collected.scopes]
    assert kinds == [ScopeKind.AGGREGATE] + [ScopeKind.HOST] * 3 + [ScopeKind.WORKLOAD] * 3
    aggregate = collected.scopes[0]
    hosts = collected.scopes[1:4]
    labels = [h.label for h in raw.hosts]
    assert [h.scope for h in hosts] == [Scope(host=label) for label in labels]
    assert aggregate.scope == AGGREGATE and aggregate.jobs == 6
    assert aggregate.totals[ALL].ios == sum(h.totals[ALL].ios for h in hosts)
    for host in hosts:  # each host's logs were found by its own prefix
        assert len(host.series[ALL]) >= 2
    # one wall-clock axis: each host's start read from its own epoch-ms logs
    starts = {}
    for i, label in enumerate(labels):
        times = [
            s.t_ms
            for jobs in [raw.logs[(f"randread.h{i}", label.split(":")[0])]]
            for kinds in jobs.values()
            for s in kinds["iops"]
        ]
        starts[label] = host_start_ms(times)
    first = min(starts.values())
    assert max(starts.values()) - first < 1000  # one client started them all
    shifts = {h: round((s - first) / 1000) for h, s in starts.items()}
    # the aggregate second t holds the hosts' seconds t - shift, summed
    series = aggregate.series[ALL]
    for t, iops in zip(series.t_s.tolist(), series.iops.tolist(), strict=True):
        parts = [h.series[ALL].iops[h.series[ALL].t_s == t - shifts[h.scope.host]] for h in hosts]
        assert iops == pytest.approx(sum(float(p[0]) for p in parts))


def test_a_host_missing_from_the_output_fails_by_name_and_the_others_are_kept():
    raw, phase = _recorded_phase()
    gone = raw.hosts[2].label
    doc = parse.split_documents(raw.exit.output)[-1]
    address, port = gone.rsplit(":", 1)
    doc["client_stats"] = [
        e for e in doc["client_stats"] if (e.get("hostname"), str(e.get("port"))) != (address, port)
    ]
    import json
    from dataclasses import replace

    raw = replace(raw, exit=FioExit(0, json.dumps(doc), "fio: client 127.0.0.4 timed out", None, 3))
    collected = collect(raw, phase)
    assert collected.problem is not None and gone in collected.problem
    assert "the other hosts' figures are kept" in collected.problem
    failed = [s for s in collected.scopes if s.scope == Scope(host=gone)]
    assert len(failed) == 1 and failed[0].error and "timed out" in failed[0].error
    assert collected.scopes[0].jobs == 4  # the aggregate of the two that answered


def test_a_file_set_on_a_fio_server_is_named_files_in_its_directory():
    """fio's servers cannot be asked to make or remove a directory: a remote
    file set's files are named after the target, the set, the job and the
    file, and removed by fio's unlink (never created by the removal)."""
    from iorig.fio.jobfile import render
    from iorig.run.jobtext import fileset_layout
    from iorig.run.plan import PlannedWorkload
    from iorig.run.servers import _exists_probe, _fileset_removal
    from iorig.scenario.schema import Workload
    from iorig.targets import remote_target

    target = remote_target(
        "data/", host="h", role="data", size=1 << 20, size_explicit=False,
        allow_destroy=False, fileset=True,
    )  # fmt: skip
    assert (str(target.path), target.fileset, target.remove_after) == (
        "data/iorig-data",
        True,
        True,
    )
    spec = Workload(rw="read", bs="4k", fileset="samples", files=3, file_size="64k")
    layout = fileset_layout(PlannedWorkload("loader", spec, target, 3 << 16, 0, "psync"))
    assert layout.directories == ("data",) and layout.name == "iorig-data.samples"
    removal = render({}, [_fileset_removal(layout, 8, 0)])
    assert "filename_format=iorig-data.samples.$jobnum.$filenum" in removal
    assert "numjobs=8" in removal and "unlink=1" in removal and "allow_file_create=0" in removal
    probe = render({}, [_exists_probe("data", target, "samples")])
    assert "filename=data/iorig-data.samples.0.0" in probe
    spread = Workload(rw="read", bs="4k", fileset="samples", files=3, file_size="64k", dirs=2)
    with pytest.raises(UserError, match="cannot make"):
        fileset_layout(PlannedWorkload("x", spread, target, 3 << 16, 0, "psync"))
    with pytest.raises(UserError, match="a file set's target is a directory"):
        remote_target(
            "data", host="h", role="data", size=1, size_explicit=False, allow_destroy=False,
            fileset=True,
        )  # fmt: skip
