"""Re-record the /proc samples of fio on io_uring that tests/test_cputime.py
reads: four io_uring jobs at QD 32 on a tmpfs file, pinned to one CPU
(taskset -c 0), fio's process tree read by iorig's own ``read_tree`` at
about 1 s and 3 s, each with every task's stat beside it (which thread is
an io_uring worker, and what it used), and fio's JSON output of the run.

    PYTHONPATH=. .venv/bin/python tests/data/proc-iouring/record.py

Needs fio, two CPUs and /dev/shm. Writes sample-1.txt, sample-2.txt (blocks
of ``==> path <==`` then its text, after a ``# t_s`` line: unix seconds of
the sample) and output.json here.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

from iorig.fio.cputime import read_tree

HERE = Path(__file__).resolve().parent


def _sample(leader: int) -> str:
    t_s = time.time()
    files = read_tree(leader)
    for path in [p for p in files if p.endswith("/stat")]:
        pid = path.split("/")[2]
        for tid in sorted(os.listdir(f"/proc/{pid}/task")):
            task = Path(f"/proc/{pid}/task/{tid}/stat")
            if task.exists():
                files[str(task)] = task.read_text()
    blocks = [f"==> {path} <==\n{text.rstrip()}\n" for path, text in sorted(files.items())]
    return f"# t_s {t_s:.3f}\n" + "".join(blocks)


def main() -> None:
    with tempfile.TemporaryDirectory(dir="/dev/shm") as memory:
        data = Path(memory) / "data"
        data.write_bytes(os.urandom(64 << 20))
        fio = subprocess.Popen(
            [
                "taskset",
                "-c",
                "0",
                "fio",
                "--name=uring",
                f"--filename={data}",
                "--rw=randread",
                "--bs=4k",
                "--numjobs=4",
                "--iodepth=32",
                "--ioengine=io_uring",
                "--direct=0",
                "--time_based",
                "--runtime=4",
                "--output-format=json",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        samples = []
        started = time.monotonic()
        for at in (1.0, 3.0):
            time.sleep(max(0.0, at - (time.monotonic() - started)))
            samples.append(_sample(fio.pid))
        output, _ = fio.communicate(timeout=60)
    for n, text in enumerate(samples, start=1):
        (HERE / f"sample-{n}.txt").write_text(text)
    (HERE / "output.json").write_text(output)
    print(f"recorded {HERE}")


if __name__ == "__main__":
    main()
