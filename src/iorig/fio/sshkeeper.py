"""The keeper iorig runs on a host it reaches over SSH (see fio/ssh.py and
docs/guide/hosts.md). Sent as text through the SSH session's standard input and
run by the host's ``python3`` with nothing but the standard library: it is
never imported by iorig itself.

It makes a private directory (mode 0700, under $TMPDIR when the SSH
user's environment sets one, else /var/tmp), starts
``fio --server`` there on a Unix socket in its own process group, says
``IORIG-SSH 1 READY <dir>`` and then serves one line
per request on the same channel::

    PING          -> OK
    TIME          -> OK 1764000000.123456  (this host's clock)
    STOP <max_s>  -> OK stopped N processes (SIGSTOP to the fio server and
                                      all it forked; resumed after max_s)
    CONT          -> OK resumed after 12.3 s
    JOBS          -> OK 0.84 (seconds since the newest fio job started; the
                     jobs lead sessions of their own) or OK none
    IO            -> OK 1764000000.123456 R W NR NW (this host's clock, bytes
                     the fio server and all it forked read and wrote so far,
                     their reads and writes: as iorig.fio.hostio)
    KEEP          -> OK keeping <dir> (--keep-files: the data files stay)
    LOCK <paths>  -> OK locked N, BUSY <i> <holder> or ERR <why> (iorig.fio.hostlock):
                     the run's targets, locked until the session ends
    RUN <id>      -> OK (the run's id, written into its locks)
    UNLOCK        -> OK (the locks freed: the run cleaned up its targets)

When its input ends (iorig ended or its connection was lost), when iorig
has been silent for LOST_S, or on SIGHUP/SIGTERM, it kills the fio server
and every process it forked and removes its directory: nothing it started
outlives the session and nothing it laid out remains.

Target locks are iorig.machine.locks' on this host (the same directory,
the same identities, flock), so a run here and a run over SSH on one target
exclude each other; a test holds the two to the same keys.
"""

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import queue
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

MAGIC = "IORIG-SSH 1"
LOST_S = 30.0  # iorig pings every few seconds; this long without a line: gone
START_S = 10.0
PREFIX = "iorig."  # the private directory: PREFIX and 8 random characters
SOCKET = "fio.sock"  # fio's server socket in it
SOCKET_PATH_MAX = 107  # bytes a Unix socket's path may hold (sun_path, less its NUL)


def say(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def tree(root):
    """``root`` and every process it forked, from /proc: fio's job
    processes start sessions of their own, so its process group is not
    enough."""
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as stat:
                    text = stat.read()
            except OSError:
                continue
            parent = int(text[text.rindex(")") + 2 :].split()[1])
            children.setdefault(parent, []).append(int(name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def jobs_age(root):
    """Seconds since the newest job process below ``root`` started (fio's
    jobs lead sessions of their own), or None while none runs; as
    iorig.fio.server.jobs_age_s, which this file cannot import."""
    starts = []
    for pid in tree(root):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        if pid != root and int(fields[3]) == pid:
            starts.append(int(fields[19]))
    if not starts:
        return None
    with open("/proc/uptime", "rb") as f:
        uptime = float(f.read().split()[0])
    return max(0.0, uptime - max(starts) / os.sysconf("SC_CLK_TCK"))


def signal_all(pids, sig):
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def freeze(root):
    """SIGSTOP to ``root``'s whole tree, again until no new process appears
    (one may fork while the first pass runs); the pids stopped."""
    stopped = []
    for _ in range(5):
        fresh = [pid for pid in tree(root) if pid not in stopped]
        if not fresh:
            break
        signal_all(fresh, signal.SIGSTOP)
        stopped += fresh
    return stopped


# ------------------------------------------------------------ I/O so far
# a copy of iorig.fio.hostio.TreeCounter, which this file cannot import (its
# docstrings say why a process gone counts in the parent that reaped it and
# why the server's own socket traffic is left out); a test holds the two to
# the same answers

NO_CALLS = (0, 0, 0, 0)  # rchar, wchar, syscr, syscw: where a socket's traffic counts


def proc_stat(proc, pid):
    """Start time and parent of ``pid``; (None, None) when unreadable."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            text = f.read()
        fields = text[text.rindex(b")") + 2 :].split()
        return fields[19].decode(), int(fields[1])
    except (OSError, ValueError, IndexError):
        return None, None


def io_fields(path):
    """read_bytes, rchar, write_bytes, wchar, syscr, syscw of a /proc io file."""
    fields = {}
    with open(path) as f:
        for line in f:
            name, _, value = line.partition(":")
            fields[name.strip()] = int(value)
    names = ("read_bytes", "rchar", "write_bytes", "wchar", "syscr", "syscw")
    return tuple(fields[name] for name in names)


def add_calls(*parts):
    return tuple(sum(part[i] for part in parts) for i in range(4))


def own_calls(proc, pid):
    """The socket-prone counters of ``pid``'s live threads."""
    try:
        tasks = os.listdir(f"{proc}/{pid}/task")
    except OSError:
        return NO_CALLS
    found = []
    for task in tasks:
        try:
            raw = io_fields(f"{proc}/{pid}/task/{task}/io")
        except (OSError, ValueError, KeyError):
            continue  # ended: its counters are the process's now
        found.append((raw[1], raw[3], raw[4], raw[5]))
    return add_calls(NO_CALLS, *found)


class Seen:
    """One process as last read: start, parent, raw (its io file), own (its
    threads' counters, left out: a server's) and left_out (those of the
    servers' processes it reaped)."""

    def __init__(self, start, parent, raw, own=NO_CALLS, left_out=NO_CALLS):
        self.start, self.parent, self.raw = start, parent, raw
        self.own, self.left_out = own, left_out

    def figures(self):
        read_bytes, rchar, write_bytes, wchar, syscr, syscw = self.raw
        out = add_calls(self.own, self.left_out)
        return (
            max(read_bytes, rchar - out[0], 0),
            max(write_bytes, wchar - out[1], 0),
            max(syscr - out[2], 0),
            max(syscw - out[3], 0),
        )


def same_process(before, after):
    """Both readings of one process: the same start time or, without one,
    no counter lower."""
    if before is None or after is None or before.start != after.start:
        return False
    # zip's strict= is Python 3.10's: the host's python3 may be 3.7
    return before.start is not None or all(
        a >= b
        for a, b in zip(after.raw, before.raw)  # noqa: B905
    )


def depths(parents):
    """Each pid's depth in the tree ``parents`` (pid -> parent) makes."""
    depth = {}
    for pid in parents:
        chain, at = [], pid
        while at in parents and at not in depth and at not in chain:
            chain.append(at)
            at = parents[at]
        base = depth.get(at, -1) if at is not None else -1
        for offset, each in enumerate(reversed(chain)):
            depth[each] = base + 1 + offset
    return depth


class IoCounter:
    """The sums of /proc/PID/io over a process tree, never going back."""

    def __init__(self, proc="/proc"):
        self.proc = proc
        self.seen = {}  # pid -> Seen, of the last read
        self.retired = [0, 0, 0, 0]
        self.high = [0, 0, 0, 0]

    def read(self, pids):
        """The answer to IO (after OK): ``t read_bytes write_bytes reads writes``."""
        pids = list(dict.fromkeys(pids))
        stats = {pid: proc_stat(self.proc, pid) for pid in pids}
        depth = depths({pid: parent for pid, (_, parent) in stats.items()})
        now = {}
        for pid in sorted(pids, key=depth.__getitem__):  # parents before their children
            start, parent = stats[pid]
            server = parent is not None and depth[pid] <= 1  # the root, its children
            own = own_calls(self.proc, pid) if server else NO_CALLS
            try:
                raw = io_fields(f"{self.proc}/{pid}/io")
            except (OSError, ValueError, KeyError):
                continue
            seen = Seen(start, parent, raw, own)
            before = self.seen.get(pid)
            if same_process(before, seen):
                seen.left_out = before.left_out
            now[pid] = seen
        for pid, before in list(self.seen.items()):
            if not same_process(before, now.get(pid)):
                self.gone(pid, before, now)
        self.seen = now
        for i in range(4):
            total = self.retired[i] + sum(seen.figures()[i] for seen in now.values())
            self.high[i] = max(self.high[i], total)
        return "{:.6f} {:d} {:d} {:d} {:d}".format(time.time(), *self.high)

    def gone(self, pid, before, now):
        start, parent = proc_stat(self.proc, pid) if pid not in now else (None, None)
        if before.start is not None and start == before.start:  # the same process, still here
            if parent is not None and parent in now:
                now.setdefault(pid, before)  # a child of the tree left out: kept as it was
            else:
                self.retire(before)  # running outside the tree: nobody here will reap it
            return
        ancestor, visited = before.parent, {pid}
        while ancestor is not None and ancestor not in visited:
            visited.add(ancestor)
            reaper = now.get(ancestor)
            if same_process(self.seen.get(ancestor), reaper):  # reaped: in its figures now
                reaper.left_out = add_calls(reaper.left_out, before.own, before.left_out)
                return
            older = self.seen.get(ancestor)
            ancestor = older.parent if older is not None else None
        self.retire(before)

    def retire(self, seen):
        for i, value in enumerate(seen.figures()):
            self.retired[i] += value


# ------------------------------------------------------------ target locks
# as iorig.machine.statedir and iorig.machine.locks, which this file cannot import

LOCK_BASES = ("/run/lock", "/var/lock", "/tmp")
RUN_ID = re.compile(r"[0-9a-f]{6,32}")


def lock_dir():
    chosen = os.environ.get("IORIG_STATE_DIR")
    if not chosen:
        for base in LOCK_BASES:
            try:
                mode = os.stat(base).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode) and mode & 0o1003 == 0o1003:
                chosen = os.path.join(base, "iorig")
                break
    if not chosen:
        raise OSError("no machine-wide directory for iorig's locks")
    try:
        os.mkdir(chosen, 0o1777)
        os.chmod(chosen, 0o1777)
    except FileExistsError:
        pass
    mode = os.lstat(chosen).st_mode
    if not (stat.S_ISDIR(mode) and mode & 0o1777 == 0o1777):
        raise OSError(chosen + " is not a directory every user may write (mode 1777)")
    return chosen


def name_key(path):
    # as iorig.machine.locks.name_key: the same whichever directories exist
    place = os.path.realpath(os.path.abspath(path))
    return "name-" + hashlib.sha256(os.fsencode(place)).hexdigest()[:16]


def disk_key(rdev):
    majmin = f"{os.major(rdev)}:{os.minor(rdev)}"
    sysfs = "/sys/dev/block/" + majmin
    if os.path.exists(os.path.join(sysfs, "partition")):
        with open(os.path.join(os.path.dirname(os.path.realpath(sysfs)), "dev")) as f:
            majmin = f.read().strip()
    return "disk-" + majmin.replace(":", "-")


def path_keys(path):
    try:
        st = os.stat(path)
    except OSError:
        return [name_key(path)]
    if stat.S_ISBLK(st.st_mode):
        return [disk_key(st.st_rdev)]
    return [name_key(path), f"node-{st.st_dev:x}-{st.st_ino:x}"]


def _stamp():
    with open("/proc/self/stat") as f:
        started = f.read().rsplit(")", 1)[1].split()[19]
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip() or None
    except OSError:
        boot = None
    return {"pid": os.getpid(), "started": started, "boot": boot}


class Locks:
    """The targets this session locked: key -> (fd, path)."""

    def __init__(self):
        self.held = {}
        self.runs = []
        self.since = time.time()

    def _write(self, fd):
        data = {
            "owner": _stamp(),
            "host": socket.gethostname(),
            "runs": self.runs,
            "since": self.since,
            "via": "ssh",
        }
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(data).encode(), 0)

    @staticmethod
    def _open(path):
        while True:
            try:
                return os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
            except FileNotFoundError:
                pass
            except PermissionError:
                return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                fd = os.open(path, flags, 0o666)
            except FileExistsError:
                continue
            with contextlib.suppress(OSError):
                os.fchmod(fd, 0o666)
            return fd

    @staticmethod
    def _holder(fd):
        for _ in range(10):
            with contextlib.suppress(ValueError, OSError):
                found = json.loads(os.pread(fd, 4096, 0))
                return found if isinstance(found, dict) else {}
            time.sleep(0.05)
        return {}

    def _lock(self, key, directory):
        """The key locked (True), or what its holder wrote (a dict)."""
        path = os.path.join(directory, key + ".lock")
        for _ in range(20):
            fd = self._open(path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = self._holder(fd)
                os.close(fd)
                return holder
            same = False
            with contextlib.suppress(OSError):
                a, b = os.fstat(fd), os.lstat(path)
                same = (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
            if same:
                self.held[key] = (fd, path)
                self._write(fd)
                return True
            os.close(fd)
        raise OSError("could not lock " + path + ": it keeps being replaced")

    def take(self, paths, base):
        """Lock every path's keys: None, or (index, holder) of one in use."""
        directory = lock_dir()
        for index, text in enumerate(paths):
            for key in path_keys(os.path.join(base, text)):
                if key not in self.held:
                    got = self._lock(key, directory)
                    if got is not True:
                        return index, got
        return None

    def name(self, run_id):
        if run_id not in self.runs:
            self.runs.append(run_id)
        for fd, _ in self.held.values():
            self._write(fd)

    def release(self):
        for fd, path in self.held.values():
            with contextlib.suppress(OSError):
                a, b = os.fstat(fd), os.lstat(path)
                if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
                    os.unlink(path)
            os.close(fd)
        self.held.clear()


def lock_request(locks, word, base):
    """The answer to ``LOCK word``; a refused request keeps nothing locked."""
    try:
        paths = json.loads(base64.urlsafe_b64decode(word.encode("ascii")))
        ok = isinstance(paths, list) and 0 < len(paths) <= 64
        if not ok or not all(
            isinstance(p, str) and 0 < len(p) <= 4096 and "\0" not in p for p in paths
        ):
            return "ERR a LOCK names 1 to 64 paths"
        busy = locks.take(paths, base)
    except (ValueError, OSError) as exc:
        locks.release()
        return "ERR " + " ".join(str(exc).split())[:200]
    if busy is not None:
        locks.release()
        holder = base64.urlsafe_b64encode(json.dumps(busy[1]).encode()).decode("ascii")
        return f"BUSY {busy[0]:d} {holder}"
    return f"OK locked {len(paths)}"


def lines(into):
    for line in sys.stdin:
        into.put(line.strip())
    into.put(None)


def private_base():
    """$TMPDIR when the host's user set one (a host whose /var/tmp is small
    or shared chose it), else /var/tmp, else Python's default. A $TMPDIR
    too long for fio's socket path (fio: "bind: Invalid argument") is
    passed over."""
    chosen = os.environ.get("TMPDIR")
    under = len(f"/{PREFIX}12345678/{SOCKET}")
    fits = chosen and len(os.fsencode(chosen)) + under <= SOCKET_PATH_MAX
    if fits and os.path.isdir(chosen) and os.access(chosen, os.W_OK):
        return chosen
    return "/var/tmp" if os.access("/var/tmp", os.W_OK) else None


def main():  # noqa: C901, PLR0912, PLR0915
    fio = shutil.which("fio")
    if fio is None:
        say(MAGIC + " ERROR fio is not installed on this host (or not on the SSH user's PATH)")
        return 3
    base = private_base()
    home = tempfile.mkdtemp(prefix=PREFIX, dir=base)
    keep = False
    proc = None
    stopped = {}
    locks = Locks()
    io = IoCounter()
    ended = threading.Event()

    def finish(*_):
        ended.set()

    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGHUP, finish)
    try:
        sock = os.path.join(home, SOCKET)
        with open(os.path.join(home, "server.log"), "wb") as log:
            proc = subprocess.Popen(
                [fio, "--server=sock:" + sock],
                cwd=home,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_S
        while not os.path.exists(sock):
            if proc.poll() is not None or time.monotonic() > deadline:
                with open(os.path.join(home, "server.log"), errors="replace") as log:
                    why = " ".join(log.read().split())[-200:] or "no message"
                say(MAGIC + " ERROR fio --server did not start: " + why)
                return 4
            time.sleep(0.01)
        say(f"{MAGIC} READY {home}")
        requests = queue.Queue()
        threading.Thread(target=lines, args=(requests,), daemon=True).start()
        while not ended.is_set():
            try:
                line = requests.get(timeout=LOST_S)
            except queue.Empty:
                break  # iorig went silent: its connection is gone
            if line is None:
                break
            words = line.split()
            if words[:1] == ["PING"]:
                say("OK")
            elif words[:1] == ["TIME"]:
                say(f"OK {time.time():.6f}")
            elif words[:1] == ["JOBS"]:
                age = jobs_age(proc.pid)
                say("OK none" if age is None else f"OK {age:.3f}")
            elif words[:1] == ["IO"]:
                say("OK " + io.read(tree(proc.pid)))
            elif words[:1] == ["STOP"] and len(words) == 2 and "at" not in stopped:
                max_s = min(max(float(words[1]), 0.0), 86400.0)
                pids = freeze(proc.pid)
                timer = threading.Timer(max_s, signal_all, (pids, signal.SIGCONT))
                timer.daemon = True
                timer.start()
                stopped.update(at=time.monotonic(), timer=timer, pids=pids)
                say(f"OK stopped {len(pids)} processes")
            elif words[:1] == ["CONT"] and "at" in stopped:
                stopped["timer"].cancel()
                signal_all(stopped["pids"], signal.SIGCONT)
                say(f"OK resumed after {time.monotonic() - stopped.pop('at'):.1f} s")
                stopped.clear()
            elif words[:1] == ["KEEP"]:
                keep = True
                say("OK keeping " + home)
            elif words[:1] == ["LOCK"] and len(words) == 2:
                say(lock_request(locks, words[1], home))
            elif words[:1] == ["RUN"] and len(words) == 2 and RUN_ID.fullmatch(words[1]):
                locks.name(words[1])
                say("OK")
            elif words[:1] == ["UNLOCK"]:
                locks.release()
                say("OK")
            else:
                say("ERR unknown or out-of-turn request")
        return 0
    finally:
        if proc is not None:
            # frozen first, so nothing forks or is orphaned while it is killed
            signal_all(freeze(proc.pid), signal.SIGKILL)
            proc.wait()
        locks.release()  # after fio: nothing of this run touches its targets any more
        if keep:
            for name in (SOCKET, "server.log"):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(home, name))
        else:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
