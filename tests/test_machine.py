"""What iorig holds or changes on the machine beyond one process (issue 27):
the machine-wide directory, target locks, throttle records and what a dead
run left. The processes here are this one and pid 1 (alive, not iorig's);
a dead owner is a stamp of another boot, as after a reboot. Real killed runs
are in tests/faults/ (test_target_locks, test_throttle_left, test_leftovers).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import threading
from pathlib import Path

import pytest

from iorig.errors import UserError
from iorig.fio import hostlock
from iorig.fio import process as fio_process
from iorig.fio.control import MAGIC, AgentLock, ControlServer
from iorig.machine import leftovers, locks, statedir, throttle, throttles
from iorig.machine.statedir import Stamp
from iorig.store import owner
from iorig.targets import MARK_XATTR

DEAD = {"pid": os.getpid(), "started": "1", "boot": "another-boot"}  # gone with its boot


# ------------------------------------------------------------ the directory


def test_the_state_directory_is_the_first_sticky_world_writable_base(tmp_path, monkeypatch):
    plain, sticky = tmp_path / "plain", tmp_path / "sticky"
    plain.mkdir(mode=0o755)
    sticky.mkdir()
    sticky.chmod(0o1777)
    monkeypatch.delenv("IORIG_STATE_DIR")
    monkeypatch.setattr(statedir, "BASES", (tmp_path / "missing", plain, sticky))
    chosen = statedir.shared()
    assert chosen == sticky / "iorig" and chosen.stat().st_mode & 0o7777 == 0o1777
    mine = statedir.private()
    assert mine.parent == chosen and mine.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("spoil", ["mode", "link"])
def test_a_state_directory_others_could_not_use_is_refused(tmp_path, monkeypatch, spoil):
    target = tmp_path / "state"
    if spoil == "mode":
        target.mkdir(mode=0o755)
    else:
        (tmp_path / "elsewhere").mkdir()
        target.symlink_to(tmp_path / "elsewhere")
    monkeypatch.setenv("IORIG_STATE_DIR", str(target))
    with pytest.raises(UserError, match="mode 1777"):
        statedir.shared()


def test_a_private_directory_others_may_read_is_refused(machine_state):
    (machine_state / f"user-{os.getuid()}").mkdir(mode=0o755)
    with pytest.raises(UserError, match="not a private directory"):
        statedir.private()


def test_records_are_read_back_only_as_written(tmp_path):
    path = tmp_path / "r.json"
    statedir.write_record(path, {"a": 1})
    assert statedir.read_record(path) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary left
    (tmp_path / "big.json").write_text(json.dumps({"a": "x" * statedir.RECORD_LIMIT}))
    (tmp_path / "list.json").write_text("[1]")
    (tmp_path / "link.json").symlink_to(path)
    for name in ("big.json", "list.json", "link.json", "missing.json"):
        assert statedir.read_record(tmp_path / name) is None, name


def test_a_stamp_is_alive_only_for_the_same_process_and_boot():
    me = Stamp.mine()
    assert me.alive and me.is_me
    assert not Stamp.of(DEAD).alive  # type: ignore[union-attr]
    init = Stamp(1, owner.start_time(1), owner.boot_id())
    assert init.alive and not init.is_me
    for junk in (None, [], {"pid": "1"}, {"pid": True}, {"pid": -4}, {"pid": 1, "boot": 7}):
        assert Stamp.of(junk) is None, junk


def test_a_process_whose_name_is_not_utf8_is_still_alive():
    """A process may name itself with any bytes (/proc/<pid>/stat shows them
    between parentheses): its owner's run must not be reaped as dead, nor
    its fio's processes taken for gone. A thread named so stands in for it."""
    named, done = threading.Event(), threading.Event()

    def rename_and_wait() -> None:
        Path(f"/proc/self/task/{threading.get_native_id()}/comm").write_bytes(b"\xff\xfe)x (")
        named.set()
        done.wait(10)

    thread = threading.Thread(target=rename_and_wait)
    thread.start()
    try:
        assert named.wait(10)
        tid = thread.native_id
        assert b"\xff" in Path(f"/proc/{tid}/stat").read_bytes()
        started = owner.start_time(tid)
        assert started is not None and started.isdigit()
        assert owner.alive(tid, started, owner.boot_id())
        assert fio_process.start_time(tid) == started
    finally:
        done.set()
        thread.join()


# ------------------------------------------------------------ target locks


def test_one_file_has_the_same_identities_by_every_path(tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "dir")
    before = locks.target_keys(str(tmp_path / "dir" / "data.bin"), "data")
    assert before == locks.target_keys(str(tmp_path / "link" / "data.bin"), "data")
    assert len(before) == 1  # not there yet: its place only
    (tmp_path / "dir" / "data.bin").write_bytes(b"x")
    os.link(tmp_path / "dir" / "data.bin", tmp_path / "other-name")
    now = locks.target_keys(str(tmp_path / "link" / "data.bin"), "data")
    assert now[0] == before[0] and len(now) == 2  # the same place, and now the file itself
    assert now[1] in locks.target_keys(str(tmp_path / "other-name"), "data")  # a hard link


def test_a_directory_target_made_by_one_run_is_the_one_the_next_run_claims(tmp_path):
    """The first run's directory did not exist when it claimed it (make
    demo's iorig-scratch/); the second finds it made, with the data file in
    it: on main their claims shared nothing and both ran on one file."""
    given = f"{tmp_path}/scratch/deeper/"
    first = locks.target_keys(given, "data")
    (tmp_path / "scratch" / "deeper").mkdir(parents=True)
    (tmp_path / "scratch" / "deeper" / "iorig-data.dat").write_bytes(b"x")
    second = locks.target_keys(given, "data")
    assert set(first) & set(second)
    assert set(first) & set(locks.target_keys(f"{tmp_path}/scratch/deeper/iorig-data.dat", "x"))


def test_a_directory_target_and_its_data_file_share_an_identity(tmp_path):
    as_dir = locks.target_keys(f"{tmp_path}/", "data")
    as_file = locks.target_keys(str(tmp_path / "iorig-data.dat"), "data")
    assert as_dir[0] == locks.node_key(os.stat(tmp_path))
    assert set(as_dir) & set(as_file)
    fileset = locks.target_keys(str(tmp_path), "images", fileset=True)
    assert fileset[0] == as_dir[0]  # the same directory


def test_a_locked_target_is_refused_naming_the_run_and_freed_on_release(tmp_path):
    keys = locks.target_keys(str(tmp_path / "t.dat"), "data")
    first = locks.Claim(shared=False)
    first.take("t.dat", keys)
    first.name_run("0123456789ab")
    with pytest.raises(locks.Busy) as refused:
        locks.Claim(shared=False).take("t.dat", keys)
    assert "t.dat is in use by iorig run 0123456789ab (pid " in refused.value.message
    files = list(statedir.shared().glob("*.lock"))
    assert len(files) == 1
    first.release()
    assert not files[0].exists()  # removed while still locked: nothing left behind
    again = locks.Claim(shared=False)
    again.take("t.dat", keys)  # free
    again.release()


def test_claims_of_one_process_share_a_lock_until_the_last_lets_go(tmp_path):
    keys = locks.target_keys(str(tmp_path / "t.dat"), "data")
    a, b = locks.Claim(), locks.Claim()  # the two sides of `iorig ab` on one target
    a.take("t.dat", keys)
    b.take("t.dat", keys)
    a.name_run("aaaaaaaaaaaa")
    b.name_run("bbbbbbbbbbbb")
    (path,) = statedir.shared().glob("*.lock")
    assert json.loads(path.read_text())["runs"] == ["aaaaaaaaaaaa", "bbbbbbbbbbbb"]
    with pytest.raises(locks.Busy):
        locks.Claim(shared=False).take("t.dat", keys)  # another run (an agent's driver)
    a.release()
    assert json.loads(path.read_text())["runs"] == ["bbbbbbbbbbbb"]
    b.release()
    assert not path.exists()


def test_a_stale_lock_file_is_no_lock(tmp_path):
    keys = locks.target_keys(str(tmp_path / "t.dat"), "data")
    stale = statedir.shared() / f"{keys[0]}.lock"
    stale.write_text(json.dumps({"runs": ["0123456789ab"], "owner": DEAD}))
    claim = locks.Claim(shared=False)
    claim.take("t.dat", keys)  # its holder died: flock was dropped with it
    claim.release()


def test_lock_files_nobody_holds_are_swept_and_held_ones_stay(tmp_path):
    held = locks.Claim(shared=False)
    held.take("a", locks.target_keys(str(tmp_path / "a"), "data"))
    stale = statedir.shared() / "name-0-0-0.lock"  # a killed run's: its flock went with it
    stale.write_text(json.dumps({"runs": ["0123456789ab"], "owner": DEAD}))
    locks.sweep()
    assert not stale.exists()
    assert len(list(statedir.shared().glob("*.lock"))) == 1
    held.release()


def test_what_a_lock_file_says_is_shown_only_in_iorigs_forms():
    hostile = {
        "runs": ["\x1b[2J", "0123456789ab", 7],
        "owner": {"pid": "\x1b]0;x"},
        "since": "yesterday",
        "via": "\x1b[31m",
    }
    text = locks.holder_text(hostile)
    assert text == "iorig run 0123456789ab" and "\x1b" not in text
    assert locks.holder_text({}) == "another iorig run (its id not yet known)"


# ------------------------------------------------------------ locks on hosts


def _keeper():
    path = Path(__file__).resolve().parent.parent / "src/iorig/fio/sshkeeper.py"
    spec = importlib.util.spec_from_file_location("sshkeeper_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_ssh_keeper_locks_the_keys_this_machine_locks(tmp_path):
    keeper = _keeper()
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(b"x")
    (tmp_path / "l").symlink_to(tmp_path / "d")
    for path in (
        tmp_path / "d" / "f",
        tmp_path / "l" / "f",
        tmp_path / "d" / "new",
        tmp_path / "gone" / "deeper" / "x",
    ):
        assert keeper.path_keys(str(path)) == locks.path_keys(path), path
    assert keeper.lock_dir() == str(statedir.shared())
    held = keeper.Locks()
    paths = [str(tmp_path / "d" / "f")]
    assert keeper.lock_request(held, hostlock.lock_request(paths).split()[1], "/").startswith("OK")
    held.name("0123456789ab")
    with pytest.raises(locks.Busy, match="in use by iorig run 0123456789ab"):
        locks.Claim(shared=False).take("f", locks.path_keys(tmp_path / "d" / "f"))
    other = keeper.Locks()
    answer = keeper.lock_request(other, hostlock.lock_request(paths).split()[1], "/")
    with pytest.raises(hostlock.LockBusy) as busy:
        hostlock.read_answer(answer)
    assert busy.value.index == 0 and busy.value.holder["runs"] == ["0123456789ab"]
    assert busy.value.holder["via"] == "ssh"
    held.release()
    assert not list(statedir.shared().glob("*.lock"))


def test_an_agent_holds_a_drivers_locks_while_its_connection_lives(tmp_path):
    from iorig.cli.agent import _locker

    server = ControlServer(None, list, locker=_locker(tmp_path))
    request = f"{MAGIC} {hostlock.lock_request(['iorig-data.dat'])}\n".encode()

    def connect() -> tuple[socket.socket, threading.Thread]:
        ours, theirs = socket.socketpair()
        thread = threading.Thread(target=server.handle, args=(theirs,), daemon=True)
        thread.start()
        ours.settimeout(10)
        return ours, thread

    first, serving = connect()
    first.sendall(request)
    reader = first.makefile("rb")
    assert reader.readline().strip() == b"OK locked"
    held = AgentLock("agent", first, reader)
    held.name_run("0123456789ab")
    # another driver through the agent, and a run on the agent's own machine
    second, _ = connect()
    second.sendall(request)
    with pytest.raises(hostlock.LockBusy) as busy:
        hostlock.read_answer(second.makefile("rb").readline().decode().strip())
    assert busy.value.holder["runs"] == ["0123456789ab"]
    with pytest.raises(locks.Busy, match="in use by iorig run 0123456789ab"):
        locks.Claim().take("here", locks.target_keys(f"{tmp_path}/", "data"))
    held.release()  # the driver ends: its connection closes
    serving.join(10)
    claim = locks.Claim()
    claim.take("here", locks.target_keys(f"{tmp_path}/", "data"))
    claim.release()


def test_a_lock_request_that_is_not_one_is_refused():
    for word in (
        "%%%",
        hostlock._encode({"a": 1}),
        hostlock._encode([]),
        hostlock._encode(["x\0y"]),
        hostlock._encode(["a"] * 65),
    ):
        with pytest.raises(ValueError):
            hostlock.request_paths(word)
    for answer in ("ERR no", "", "BUSY x y", "BUSY 1 %%%"):
        with pytest.raises(hostlock.LockRefused):
            hostlock.read_answer(answer)


# ------------------------------------------------------------ throttle records


@pytest.fixture
def blkio(tmp_path, monkeypatch) -> Path:
    """The block throttle's four files, as plain files; device 7:3 exists."""
    v1 = tmp_path / "blkio"
    v1.mkdir()
    for name in throttles.FILES:
        (v1 / f"blkio.throttle.{name}_device").write_text("")
    sys_dev = tmp_path / "sys-dev-block"
    (sys_dev / "7:3").mkdir(parents=True)
    monkeypatch.setattr(throttle, "V1", v1)
    monkeypatch.setattr(throttles, "SYS_DEV", sys_dev)
    return v1


OWNER = {"read_iops": 20_000, "write_iops": 0, "read_bps": 0, "write_bps": 0}
EVENT = throttle.caps(iops=500)


def _dead_record(**over: object) -> Path:
    path = statedir.private() / "throttle-7-3.json"
    statedir.write_record(
        path,
        {"version": 1, "owner": DEAD, "device": "7:3", "before": OWNER, "applied": EVENT} | over,
    )
    return path


def test_a_dead_runs_caps_are_put_back_exactly(blkio):
    throttle.restore("7:3", EVENT)  # what the killed run left
    record = _dead_record()
    said = throttles.recover()
    assert throttle.rules("7:3") == OWNER
    assert said == [
        "restored the block throttle of device 7:3 that a killed iorig run "
        f"(pid {os.getpid()}) had left capped: back to read_iops 20000"
    ]
    assert not record.exists() and throttles.recover() == []


def test_a_cap_changed_since_the_kill_is_left_as_found(blkio):
    throttle.restore("7:3", EVENT | {"read_iops": 700})  # its owner capped reads again
    _dead_record()
    (said,) = throttles.recover()
    assert throttle.rules("7:3") == {
        "read_iops": 700,
        "write_iops": 0,
        "read_bps": 0,
        "write_bps": 0,
    }
    assert "changed since: read_iops 700" in said


def test_a_record_whose_caps_were_never_set_says_nothing(blkio):
    throttle.restore("7:3", OWNER)  # killed between the record and the cap
    record = _dead_record()
    assert throttles.recover() == [] and not record.exists()
    assert throttle.rules("7:3") == OWNER


def test_a_live_runs_record_is_left_and_a_second_throttle_keeps_the_first_before(blkio):
    throttle.restore("7:3", OWNER)
    throttles.begin("7:3", EVENT)
    throttle.apply("7:3", iops=500)
    throttles.begin("7:3", throttle.caps(iops=900))  # a second event on the device
    assert throttles.recover() == []  # this process lives
    record = statedir.read_record(statedir.private() / "throttle-7-3.json")
    assert record is not None and record["before"] == OWNER
    throttles.end("7:3")
    assert not list(statedir.private().glob("throttle-*"))


def test_a_device_another_live_run_throttles_is_refused(blkio):
    init = Stamp(1, owner.start_time(1), owner.boot_id())  # alive, not this process
    _dead_record(owner=init.as_dict())
    with pytest.raises(UserError, match="another iorig run"):
        throttles.begin("7:3", EVENT)


# ------------------------------------------------------------ leftovers


def _marked(path: Path) -> None:
    try:
        os.setxattr(path, MARK_XATTR, b"1")
    except OSError as exc:
        pytest.skip(f"no user extended attributes here: {exc.strerror}")


def _kill(record: Path) -> None:
    """The record's run died (its owner is a stamp of another boot)."""
    data = json.loads(record.read_text())
    statedir.write_record(record, data | {"owner": DEAD})


def test_a_dead_runs_temporary_directories_go_and_nothing_else(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(leftovers.tempfile, "tempdir", None)
    dead, mine, plain = tmp_path / "iorig-dead", tmp_path / "iorig-mine", tmp_path / "iorig-x"
    for d in (dead, mine, plain, tmp_path / "other"):
        d.mkdir()
    (dead / leftovers.STAMP).write_text(json.dumps({"owner": DEAD}))
    (tmp_path / "other" / leftovers.STAMP).write_text(json.dumps({"owner": DEAD}))
    (tmp_path / "iorig-link").symlink_to(tmp_path / "other")
    leftovers.stamp(mine)
    with leftovers.temporary_directory() as live:
        said = leftovers.clean()
        assert live.exists()
    assert said == [
        f"removed {dead}, the working directory of a killed iorig run (pid {os.getpid()})"
    ]
    assert not dead.exists()
    assert mine.exists() and plain.exists() and (tmp_path / "other").exists()


def test_a_dead_runs_data_file_goes_if_it_is_provably_the_one_it_laid_out(tmp_path):
    run, keeping = leftovers.LaidOut(), leftovers.LaidOut()  # a run, and one with --keep-files
    files = {name: tmp_path / name for name in ("gone", "replaced", "unmarked", "kept", "used")}
    for name, path in files.items():
        laid = keeping if name == "kept" else run
        laid.planned(path, "file")
        path.write_bytes(b"x")
        _marked(path)
        laid.made(path)
    run.begin("0123456789ab", keep=False)
    keeping.begin("0123456789ac", keep=True)
    files["replaced"].unlink()
    files["replaced"].write_bytes(b"another")  # the user's file at that path since
    _marked(files["replaced"])
    os.removexattr(files["unmarked"], MARK_XATTR)
    for record in statedir.private().glob("laid-*.json"):
        _kill(record)
    in_use = locks.Claim(shared=False)  # a live run on that file now
    in_use.take("used", locks.path_keys(files["used"]))
    said = leftovers.clean()
    in_use.release()
    assert not files["gone"].exists()
    gone = f"removed {files['gone']}, the data file of killed iorig run 0123456789ab (pid "
    assert any(s.startswith(gone) for s in said), said
    for name in ("replaced", "unmarked", "kept", "used"):
        assert files[name].exists(), name
    assert any(f"left {files['replaced']}" in s and "another file" in s for s in said), said
    assert any(f"left {files['unmarked']}" in s and "no user.iorig mark" in s for s in said)
    assert not any("kept" in s or str(files["used"]) in s for s in said), said
    # only the live run's record stays, for later
    (left,) = statedir.private().glob("laid-*.json")
    assert json.loads(left.read_text())["path"] == str(files["used"])


def test_a_live_runs_data_file_and_a_finished_one_are_no_leftovers(tmp_path):
    laid = leftovers.LaidOut()
    path = tmp_path / "iorig-data.dat"
    laid.planned(path, "file")
    path.write_bytes(b"x")
    laid.made(path)
    assert leftovers.clean() == [] and path.exists()  # its run lives
    laid.done(path)
    assert not list(statedir.private().glob("laid-*.json"))


class _Held:
    def __init__(self) -> None:
        self.released = False

    def release(self) -> None:
        self.released = True


def test_a_host_whose_target_is_in_use_refuses_the_run_and_frees_the_others():
    from iorig.fio.hosts import HostAddress
    from iorig.run.hostlocks import lock_hosts
    from iorig.targets import remote_target

    hosts = [HostAddress(f"127.0.0.{i}", 8765) for i in (2, 3, 4)]
    targets = {
        h.label: {
            "data": remote_target(
                None,
                host=h.label,
                role="data",
                size=1 << 20,
                size_explicit=True,
                allow_destroy=False,
            )
        }
        for h in hosts
    }
    given: dict[str, _Held] = {}

    def lock_one(host: HostAddress, paths: list[str]) -> _Held:
        assert paths == ["iorig-data.dat"]
        if host is hosts[1]:
            raise hostlock.LockBusy(0, {"runs": ["0123456789ab"], "owner": {"pid": 42}})
        given[host.label] = _Held()
        return given[host.label]

    with pytest.raises(locks.Busy) as refused:
        lock_hosts(hosts, targets, lock_one)
    assert refused.value.message.startswith(
        "target iorig-data.dat on 127.0.0.3:8765 is in use by iorig run 0123456789ab (pid 42"
    )
    assert given and all(h.released for h in given.values())

    def cannot(host: HostAddress, paths: list[str]) -> _Held:
        if host is hosts[0]:
            raise hostlock.LockRefused("this fio server locks no targets")
        return _Held()

    held, notes = lock_hosts(hosts, targets, cannot)
    assert len(held) == 2
    assert notes == [
        "127.0.0.2:8765: its targets are not locked against other runs (this fio "
        "server locks no targets)"
    ]
