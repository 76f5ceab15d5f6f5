"""fio client/server helpers: host addresses, the version probe and check,
the managed fio server, log naming and the shared time axis."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest
from tests.fake_fio_server import FakeFioServer
from tests.fioservers import fio_server, fio_servers, server_dir
from tests.fixtures import DATA

from iorig.errors import UserError
from iorig.fio import parse, remote
from iorig.fio.remote import FioServer, HostAddress, ProbeFailure, ServerInfo, parse_host

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
    assert address.fio_key() == (host, port)


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
    hosts = remote.parse_hosts("a,b:9000,[::1]", default_port=18700)
    assert [h.label for h in hosts] == ["a:18700", "b:9000", "[::1]:18700"]
    with pytest.raises(UserError, match="twice"):
        remote.parse_hosts("a:8765,A")
    with pytest.raises(UserError, match="empty entry"):
        remote.parse_hosts("a,,b")


# ---------------------------------------------------------------- log names and time axis


def test_hosts_on_one_address_get_distinct_log_prefixes():
    hosts = [HostAddress("127.0.0.2", 18701), HostAddress("127.0.0.2", 18704)]
    prefixes = remote.host_log_prefixes("p3", hosts)
    assert len(set(prefixes.values())) == 2
    for host, prefix in prefixes.items():
        assert remote.host_of_log_prefix("p3", hosts, prefix, "127.0.0.2") == host
    assert remote.host_of_log_prefix("p3", hosts, prefixes[hosts[0]], "127.0.0.9") is None


def test_host_start_is_the_tightest_window_bound():
    assert remote.host_start_ms([5000 + 1004, 5000 + 2001, 5000 + 3003]) == 5001
    assert remote.host_start_ms([3000, 1000, 2000]) == 0
    assert remote.host_start_ms([1004, 2004, 3003, 3004]) == 3  # last window repeated


def test_wallclock_offsets_put_each_window_on_its_nearest_shared_second():
    starts = {"a": 10_000, "b": 10_300, "c": 10_600}
    offsets = remote.wallclock_offsets_ms(starts)
    # The first window of each host ends at start + 1000; relative to the axis:
    assert {k: starts[k] + 1000 - offsets[k] for k in starts} == {"a": 1000, "b": 1000, "c": 2000}
    assert remote.wallclock_offsets_ms({}) == {}


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


def test_probe_of_a_fake_server_with_another_fio_version():
    with FakeFioServer((FAKE_IP, 18750), fio_version="fio-3.99") as fake:
        host = HostAddress(*fake.address)
        info = remote.probe_server(host, protocol=97, timeout_s=3)
    assert info == ServerInfo("fio-3.99", 97, "fakehost", "Linux", "x86-64", 64, 4, False)
    with pytest.raises(UserError) as err:
        remote.check_versions("fio-3.33", {host: info}, local_protocol=97)
    text = str(err.value)
    assert f"{FAKE_IP}:18750" in text and "fio-3.99" in text and "fio-3.33" in text


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


def test_a_refused_port_fails_at_once_and_is_named():
    host = HostAddress(FAKE_IP, 18753)  # nothing listens there
    started = time.monotonic()
    results = remote.server_versions(FIO, [host], 2.0, local_protocol=97)
    assert time.monotonic() - started < 1.0
    assert results[host].reason == "refused"
    with pytest.raises(UserError, match=rf"{FAKE_IP}:18753: connection refused") as err:
        remote.check_versions("fio-3.33", results)
    assert "iorig agent" in err.value.hint


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


@pytest.mark.parametrize("host", ["0.0.0.0", "::", ""])
def test_fio_server_refuses_all_addresses_unless_allowed(tmp_path, host):
    with pytest.raises(UserError, match="no authentication") as err:
        FioServer(FIO, HostAddress(host, 18757), tmp_path)
    assert "--bind" in err.value.hint
    assert FioServer(FIO, HostAddress(host, 18757), tmp_path, allow_any=True).pid is None


def test_fio_server_on_a_foreign_address_is_refused(tmp_path):
    server = FioServer(FIO, HostAddress("192.0.2.1", 18757), tmp_path)  # TEST-NET-1
    with pytest.raises(UserError, match=r"cannot start a fio server on 192\.0\.2\.1:18757"):
        server.start()
    assert server.pid is None


def test_fio_server_that_exits_at_start_is_reported(tmp_path):
    log = tmp_path / "false.log"
    server = FioServer("/bin/false", HostAddress("127.0.0.2", 18758), tmp_path, log_path=log)
    with pytest.raises(UserError, match="exited at start"):
        server.start(timeout_s=5)


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


@pytest.mark.fio
def test_stop_ends_the_server_and_the_jobs_it_runs(tmp_path):
    """fio's job processes call setsid: stopping only the server's process
    group would leave them running."""
    job = tmp_path / "idle.fio"
    job.write_text("[idle]\nioengine=null\nsize=1m\nrw=read\ntime_based=1\nruntime=60\n")
    with fio_server(tmp_path) as server:
        client = subprocess.Popen(
            [FIO, "--eta=never", f"--client={server.address.fio_client_arg()}", str(job)],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            # listener, connection, backend and the job process (own session)
            assert _wait(lambda: len(remote.process_tree(server.pid)) >= 4, 10)
            tree = remote.process_tree(server.pid)
            server.stop()
            assert client.wait(timeout=10) is not None  # the client notices and ends
        finally:
            if client.poll() is None:
                client.kill()
                client.wait()
    assert not [pid for pid in tree if remote._alive(pid)]


@pytest.mark.fio
def test_jobs_outlive_a_killed_listener_and_stop_still_ends_them(tmp_path):
    """SIGTERM to the listening process alone (what `kill PID` does) leaves the
    running session and its job alive; stop() finds them by their session."""
    job = tmp_path / "idle.fio"
    job.write_text("[idle]\nioengine=null\nsize=1m\nrw=read\ntime_based=1\nruntime=60\n")
    with fio_server(tmp_path) as server:
        client = subprocess.Popen(
            [FIO, "--eta=never", f"--client={server.address.fio_client_arg()}", str(job)],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert _wait(lambda: len(remote.process_tree(server.pid)) >= 4, 10)
            os.kill(server.pid, signal.SIGTERM)
            assert _wait(lambda: not server.running, 5)
            time.sleep(0.5)
            assert client.poll() is None  # the session goes on without its listener
            survivors = [p for p in remote.process_tree(server.pid) if p != server.pid]
            assert len(survivors) >= 3 and all(remote._alive(p) for p in survivors)
            server.stop()
            assert not [p for p in survivors if remote._alive(p)]
            assert client.wait(timeout=10) is not None
        finally:
            if client.poll() is None:
                client.kill()
                client.wait()


@pytest.mark.fio
def test_servers_helper_uses_distinct_addresses_ports_and_directories(tmp_path):
    with fio_servers(3, tmp_path) as hosts:
        assert [h.host for h in hosts] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
        assert len({h.port for h in hosts}) == 3
        dirs = [server_dir(tmp_path, h) for h in hosts]
        assert all(d.is_dir() for d in dirs) and len(set(dirs)) == 3
        pids = [_listener_pid(h) for h in hosts]
    assert not [pid for pid in pids if remote._alive(pid)]


def _listener_pid(host: HostAddress) -> int:
    """The fio process listening at ``host`` (by the inode of its socket)."""
    fios = subprocess.run(["pgrep", "-x", "fio"], capture_output=True, text=True).stdout.split()
    for pid in map(int, fios):
        if remote._listens(pid, host.port):
            return pid
    raise AssertionError(f"no fio listens at {host.label}")


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
    by_key = remote.hosts_by_fio_key(hosts)
    doc = parse.split_documents((FIXTURE / "output.json").read_text())[-1]
    entries = [e for e in doc["client_stats"] if e["jobname"] != "All clients"]
    assert {by_key[(e["hostname"], e["port"])] for e in entries} == set(hosts)
    assert len(entries) == 2 * len(hosts)  # numjobs=2: one entry per job per host
    for entry in entries:  # per-host latency bins are there, to be merged by iorig
        assert sum(entry["read"]["clat_ns"]["bins"].values()) == entry["read"]["total_ios"]


def test_fixture_logs_map_back_to_their_hosts():
    hosts = [parse_host(line) for line in (FIXTURE / "hosts.txt").read_text().split()]
    logs = parse.find_logs(FIXTURE)
    owners = {remote.host_of_log_prefix("cs", hosts, log.prefix, log.host) for log in logs}
    assert owners == set(hosts)
    kinds = {(log.kind, log.host) for log in logs}
    assert {k for k, _ in kinds} >= {"iops", "bw", "clat", "clat_hist"}


def test_fixture_logs_share_one_wallclock_axis():
    hosts = [parse_host(line) for line in (FIXTURE / "hosts.txt").read_text().split()]
    starts = {}
    for log in parse.find_logs(FIXTURE):
        if log.kind == "iops":
            host = remote.host_of_log_prefix("cs", hosts, log.prefix, log.host)
            samples = parse.parse_series_log(Path(log.path).read_text())
            starts[host] = remote.host_start_ms([s.t_ms for s in samples])
    assert set(starts) == set(hosts)
    assert max(starts.values()) - min(starts.values()) < 1000  # one client started them all
    offsets = remote.wallclock_offsets_ms(starts)
    assert all(abs(starts[h] - offsets[h]) < 1000 for h in hosts)
