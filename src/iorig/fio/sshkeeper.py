"""The keeper iorig runs on a host it reaches over SSH (see fio/ssh.py and
docs/hosts.md). Sent as text through the SSH session's standard input and
run by the host's ``python3`` with nothing but the standard library: it is
never imported by iorig itself.

It makes a private directory (mode 0700, under /var/tmp), starts
``fio --server`` there on a Unix socket in its own process group, says
``IORIG-SSH 1 READY <dir> <pid> <fio version>`` and then serves one line
per request on the same channel::

    PING          -> OK
    STOP <max_s>  -> OK stopped      (SIGSTOP to the fio server's group; a
                                      timer resumes it after max_s)
    CONT          -> OK resumed after 12.3 s
    KEEP          -> OK keeping <dir> (--keep-files: the data files stay)

When its input ends (iorig ended or its connection was lost), when iorig
has been silent for LOST_S, or on SIGHUP/SIGTERM, it resumes, stops and
kills the fio server's whole process group and removes its directory:
nothing it started outlives the session and nothing it laid out remains.
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


def say(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def signal_group(pgid, sig):
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def lines(into):
    for line in sys.stdin:
        into.put(line.strip())
    into.put(None)


def version(fio):
    try:
        done = subprocess.run([fio, "--version"], capture_output=True, text=True, timeout=10)
        return done.stdout.strip().split()[0] if done.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main():
    fio = shutil.which("fio")
    if fio is None:
        say(MAGIC + " ERROR fio is not installed on this host (or not on the SSH user's PATH)")
        return 3
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else None
    home = tempfile.mkdtemp(prefix="iorig.", dir=base)
    keep = False
    proc = None
    stopped = {}
    ended = threading.Event()

    def finish(*_):
        ended.set()

    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGHUP, finish)
    try:
        sock = os.path.join(home, "fio.sock")
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
        say(f"{MAGIC} READY {home} {proc.pid} {version(fio)}")
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
            elif words[:1] == ["STOP"] and len(words) == 2 and "at" not in stopped:
                max_s = min(max(float(words[1]), 0.0), 86400.0)
                signal_group(proc.pid, signal.SIGSTOP)
                timer = threading.Timer(max_s, signal_group, (proc.pid, signal.SIGCONT))
                timer.daemon = True
                timer.start()
                stopped.update(at=time.monotonic(), timer=timer)
                say("OK stopped")
            elif words[:1] == ["CONT"] and "at" in stopped:
                stopped["timer"].cancel()
                signal_group(proc.pid, signal.SIGCONT)
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
            signal_group(proc.pid, signal.SIGCONT)
            signal_group(proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + 2.0
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            signal_group(proc.pid, signal.SIGKILL)  # and whatever it forked
            if proc.poll() is None:
                proc.wait()
        if keep:
            for name in ("fio.sock", "server.log"):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(home, name))
        else:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
