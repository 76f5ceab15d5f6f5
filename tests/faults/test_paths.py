"""Every path reaches a job file through one escaping function.

fio splits ``filename=`` and ``directory=`` on ``:``; a path with a colon
rendered raw made fio write into another directory (a relative one, in its
working directory) and replace a file there. Each option that takes a path
gets a case here, rendered by the production code and then run by fio.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from iorig.fio.jobfile import FileSetLayout, JobFileError, Section, render, workload_options

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")


def _options(**over):
    base = dict(
        engine="psync",
        rw="write",
        bs=65536,
        filename="",
        size=1 << 20,
        offset=0,
        iodepth=1,
        jobs=1,
        direct=False,
        read_pct=None,
        rate_iops=None,
        runtime_s=None,
        log_prefix="t",
    )
    return workload_options(**(base | over))


def _run_fio(job_text: str, cwd) -> None:
    job = cwd / "job.fio"
    job.write_text(job_text)
    done = subprocess.run(
        ["fio", "--output=/dev/null", str(job)], cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def _files(root) -> set[str]:
    return {
        os.path.relpath(os.path.join(d, f), root)
        for d, _, names in os.walk(root)
        for f in names
        if not f.startswith("t_") and f != "job.fio"
    }


@pytest.mark.fio
def test_a_file_set_directory_with_a_colon_is_one_directory(tmp_path):
    colon = tmp_path / "a:b"
    colon.mkdir()
    (tmp_path / "a").mkdir()
    victim = tmp_path / "b"  # where the split made fio write (relative to its cwd)
    victim.mkdir()
    (victim / "set.0.0").write_text("someone's data")
    layout = FileSetLayout("set", (str(colon),), files=1, file_size=1 << 20)
    text = render({}, [Section("w", _options(fileset=layout))])
    assert f"directory={tmp_path}/a\\:b\n" in text
    _run_fio(text, tmp_path)
    assert _files(tmp_path) == {"a:b/set.0.0", "b/set.0.0"}
    assert (victim / "set.0.0").read_text() == "someone's data"


@pytest.mark.fio
def test_several_directories_each_escaped(tmp_path):
    first, second = tmp_path / "x:1", tmp_path / "y"
    first.mkdir()
    second.mkdir()
    layout = FileSetLayout("set", (str(first), str(second)), files=1, file_size=1 << 20)
    text = render({}, [Section("w", _options(fileset=layout, jobs=2))])
    _run_fio(text, tmp_path)
    assert _files(tmp_path) == {"x:1/set.0.0", "y/set.1.0"}


@pytest.mark.fio
def test_a_file_name_with_a_colon_is_one_file(tmp_path):
    target = tmp_path / "dev:1"
    text = render({}, [Section("w", _options(filename=str(target)))])
    assert f"filename={tmp_path}/dev\\:1\n" in text
    _run_fio(text, tmp_path)
    assert _files(tmp_path) == {"dev:1"}


def test_a_joined_directory_string_is_refused():
    # a ':'-joined string cannot say whether a colon separates or belongs to a name
    with pytest.raises(JobFileError, match="list of directories"):
        render({}, [Section("w", {"directory": "/a:/b"})])
