"""The keeper iorig runs on a host it reaches over SSH (see fio/ssh.py and
docs/hosts.md). Sent as text through the SSH session's standard input and
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
    KEEP          -> OK keeping <dir> (--keep-files: the data files stay)

When its input ends (iorig ended or its connection was lost), when iorig
has been silent for LOST_S, or on SIGHUP/SIGTERM, it kills the fio server
and every process it forked and removes its directory: nothing it started
outlives the session and nothing it laid out remains.
"""

import contextlib
import os
import queue
import shutil
import signal
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


def main():
    fio = shutil.which("fio")
    if fio is None:
        say(MAGIC + " ERROR fio is not installed on this host (or not on the SSH user's PATH)")
        return 3
    base = private_base()
    home = tempfile.mkdtemp(prefix=PREFIX, dir=base)
    keep = False
    proc = None
    stopped = {}
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
            else:
                say("ERR unknown or out-of-turn request")
        return 0
    finally:
        if proc is not None:
            # frozen first, so nothing forks or is orphaned while it is killed
            signal_all(freeze(proc.pid), signal.SIGKILL)
            proc.wait()
        if keep:
            for name in (SOCKET, "server.log"):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(home, name))
        else:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
