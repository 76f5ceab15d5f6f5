"""Targets on fio servers: binding --target values to hosts and roles, what
iorig refuses to write remotely, and --hosts-file errors with their line."""

from __future__ import annotations

from pathlib import Path

import pytest

from iorig.errors import UserError
from iorig.fio.hosts import HostAddress
from iorig.run.request import host_list
from iorig.targets import bind_host_targets, bind_targets, remote_target

A, B = HostAddress("10.0.0.1", 8765), HostAddress("10.0.0.2", 9000)


def test_one_path_for_all_hosts_or_one_per_host():
    assert bind_host_targets(["data"], ["bench.dat"], [A, B]) == {
        A: {"data": "bench.dat"},
        B: {"data": "bench.dat"},
    }
    per_host = bind_host_targets(["data"], ["10.0.0.1=/dev/sdb,10.0.0.2:9000=/dev/sdc"], [A, B])
    assert per_host == {A: {"data": "/dev/sdb"}, B: {"data": "/dev/sdc"}}
    roles = bind_host_targets(["db", "log"], ["db=d/", "log@10.0.0.2=/mnt/log/"], [A, B])
    assert roles == {A: {"db": "d/"}, B: {"db": "d/", "log": "/mnt/log/"}}
    with pytest.raises(UserError, match="neither a host of --hosts nor a target"):
        bind_host_targets(["db", "log"], ["10.0.0.9=/dev/sdb"], [A, B])


def test_local_targets_bind_roles():
    assert bind_targets(["data"], ["/mnt/x/"]) == {"data": "/mnt/x/"}
    assert bind_targets(["db", "log"], ["db=/a/", "log=/b/"]) == {"db": "/a/", "log": "/b/"}
    with pytest.raises(UserError, match="several targets"):
        bind_targets(["db", "log"], ["/a/"])
    with pytest.raises(UserError, match="given twice"):
        bind_targets(["data"], ["/a", "data=/b"])


def test_remote_targets_default_to_the_servers_directory():
    t = remote_target(
        None, host=A.label, role="data", size=1 << 20, size_explicit=False, allow_destroy=False
    )
    assert str(t.path) == "iorig-data.dat" and t.remove_after and t.host == A.label
    kept = remote_target(
        "runs/bench.dat",
        host=A.label,
        role="data",
        size=1 << 20,
        size_explicit=False,
        allow_destroy=False,
    )
    assert str(kept.path) == "runs/bench.dat" and not kept.remove_after


@pytest.mark.parametrize(
    ("given", "explicit", "destroy", "message"),
    [
        ("/mnt/nvme/x.dat", False, False, "cannot see what a remote path holds"),
        ("/dev/nvme0n1", False, True, "cannot read a remote device's size"),
        ("../../etc/x", False, True, "'..' is not allowed"),
    ],
)
def test_what_iorig_will_not_write_on_a_server(given, explicit, destroy, message):
    with pytest.raises(UserError, match=message):
        remote_target(
            given,
            host=A.label,
            role="data",
            size=1 << 20,
            size_explicit=explicit,
            allow_destroy=destroy,
        )
    if given.startswith("/dev/"):
        device = remote_target(
            given, host=A.label, role="data", size=1 << 30, size_explicit=True, allow_destroy=True
        )
        assert str(device.path) == given and not device.remove_after


def test_hosts_file_errors_name_the_line(tmp_path: Path):
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("# lab\n10.0.0.1\n10.0.0.2:9000  # second\n\n")
    assert host_list("10.0.0.3", hosts) == [HostAddress("10.0.0.3"), A, B]
    hosts.write_text("10.0.0.1\nnot a host\n")
    with pytest.raises(UserError, match=r"hosts.txt:2: 'not a host' is not a host"):
        host_list(None, hosts)
    hosts.write_text("10.0.0.1\n10.0.0.1:8765\n")
    with pytest.raises(UserError, match=r"hosts\.txt:2: host 10\.0\.0\.1:8765 is listed twice"):
        host_list(None, hosts)
