"""fio job rendering: only whitelisted, validated options; nothing fio would
expand, execute or include; and the result is valid fio syntax."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from iorig.fio.jobfile import JobFileError, Section, render, workload_options
from iorig.run.jobtext import flow_groups


def _options(**over: object) -> dict:
    args: dict = dict(
        engine="libaio",
        rw="randread",
        bs=4096,
        filename="/data/test file",
        size=1 << 26,
        offset=0,
        iodepth=32,
        jobs=4,
        direct=True,
        read_pct=None,
        rate_iops=None,
        runtime_s=30.0,
        log_prefix="rr",
    )
    args.update(over)
    return workload_options(**args)


def test_typical_random_workload():
    text = render({}, [Section("rr", _options())])
    lines = text.splitlines()
    for expected in (
        "[rr]",
        "ioengine=libaio",
        "rw=randread",
        "bs=4096",
        "iodepth=32",
        "numjobs=4",
        "direct=1",
        "norandommap=1",
        "randrepeat=0",
        "refill_buffers=1",
        "time_based=1",
        "runtime=30000ms",
        "write_hist_log=rr",
        "log_hist_msec=1000",
        "log_avg_msec=1000",
    ):
        assert expected in lines, expected
    assert "[global]" not in lines  # nothing global to say
    assert not any(line.startswith("rwmixread") or line.startswith("rate") for line in lines)


def test_sequential_mixed_and_rate_limited():
    seq = _options(rw="rw", read_pct=70.0, rate_iops=500, runtime_s=None)
    assert seq["rwmixread"] == 70
    assert "norandommap" not in seq and "time_based" not in seq
    assert (seq["rate_iops"], seq["rate_process"]) == (500, "poisson")


@pytest.mark.parametrize("rw", ["randread", "randwrite", "randrw", "write"])
def test_without_iorigs_data_rules_fio_keeps_its_own_defaults(rw):
    """A fio job file's jobs (data_rules=False): no option of iorig's data
    rules is rendered, so fio's defaults hold (a random map, the same
    sequence each run, one buffer of random data reused, 512-byte compress
    chunks); a skewed distribution and compressible data still reach fio."""
    ours = _options(rw=rw, distribution="zipf:1.2", compress_pct=50)
    fios = _options(rw=rw, distribution="zipf:1.2", compress_pct=50, data_rules=False)
    rules = {"norandommap", "randrepeat", "refill_buffers", "buffer_compress_chunk"}
    assert rules - ({"norandommap", "randrepeat"} if rw == "write" else set()) <= set(ours)
    assert not rules & set(fios), fios
    assert fios["buffer_compress_percentage"] == ours["buffer_compress_percentage"] == 50
    random = rw.startswith("rand")
    assert ("random_distribution" in fios) is random and ("random_distribution" in ours) is random
    # everything else is rendered alike
    assert {k: v for k, v in ours.items() if k not in rules} == fios


def test_a_replayable_writer_keeps_its_random_map_and_sequence_either_way():
    for data_rules in (True, False):
        options = _options(rw="randwrite", state="save", verify="crc32c", data_rules=data_rules)
        assert options["randrepeat"] is True and "norandommap" not in options


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("exec_prerun", "/bin/sh", "not on iorig's whitelist"),
        ("include", "/etc/passwd", "not on iorig's whitelist"),
        ("ioengine", "exec", "is not one of"),
        ("filename", "$HOME/x", "expands $VAR"),
        ("filename", "/tmp/a;b", "comment"),
        ("filename", "/tmp/a#b", "comment"),
        ("filename", "/tmp/a\nexec_prerun=/bin/sh", "newline"),
        ("filename", "/tmp/a\\b", "backslash"),
        ("filename", "../../etc/shadow", "without '..'"),
        ("filename", "data/../../x", "without '..'"),
        ("directory", ("/a:b/../c",), "without '..'"),
        ("filename_format", "x.$HOME", "only name characters"),
        ("write_iops_log", "../escape", "plain names"),
        ("iodepth", 0, "out of range"),
        ("iodepth", "32", "whole number"),
        ("direct", 1, "true or false"),
        ("random_distribution", "zipf", "needs a parameter"),
        ("random_distribution", "zipf:1.2;x", "comment"),
        ("new_group", False, "flag"),
    ],
)
def test_refused_options(option, value, message):
    with pytest.raises(JobFileError, match=message.replace("$", r"\$")):
        render({}, [Section("w", {option: value})])


def test_colons_in_file_names_are_escaped():
    text = render({}, [Section("w", {"filename": "/dev/disk/by-id/nvme-x:1"})])
    assert "filename=/dev/disk/by-id/nvme-x\\:1" in text


def test_section_names_and_comments():
    with pytest.raises(JobFileError, match="bad fio section name"):
        render({}, [Section("global", {})])
    with pytest.raises(JobFileError, match="bad fio section name"):
        render({}, [Section("a b]\n[x", {})])
    with pytest.raises(JobFileError, match="duplicate"):
        render({}, [Section("a", {}), Section("a", {})])
    # a workload's later jobs as sections of their own repeat its name, right after
    assert render({}, [Section("a", {}), Section("a", {}, job=1)]).count("[a]") == 2
    with pytest.raises(JobFileError, match="duplicate"):
        render({}, [Section("a", {}), Section("b", {}), Section("a", {}, job=1)])
    text = render({"direct": True}, [Section("a", {})], comment="line one\nexec_prerun=x")
    assert text.splitlines()[:2] == ["; line one", "; exec_prerun=x"]
    assert "[global]" in text


@pytest.mark.fio
@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_fio_accepts_the_rendered_job_including_an_escaped_colon(tmp_path):
    job = tmp_path / "job.fio"
    options = _options(filename=str(tmp_path / "dev:1"))
    job.write_text(render({}, [Section("rr", options), Section("seq", _options(rw="write"))]))
    done = subprocess.run(
        ["fio", "--parse-only", str(job)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    shown = subprocess.run(
        ["fio", "--showcmd", str(job)], capture_output=True, text=True, timeout=30
    )
    # fio read the escaped colon as part of one file name, not as two files
    assert "dev\\:1" in shown.stdout or "dev:1" in shown.stdout
    assert "--runtime=30000ms" in shown.stdout


def test_workloads_with_a_flow_pair_up_job_by_job():
    """fio holds each job of a flow group to its own share of the group: a
    workload's jobs in one group wait on each other (docs/methodology.md §4),
    so job k of every workload with a flow is flow group k + 1."""
    db = _options(rw="randrw", jobs=3, flow=1000)
    assert db["numjobs"] == 3 and db["flow_id"] == 1
    groups = flow_groups(db)
    assert [g["flow_id"] for g in groups] == [1, 2, 3]
    assert all(g["numjobs"] == 1 and g["flow"] == 1000 for g in groups)
    # each job's slice where fio's offset_increment would have put it
    log = _options(rw="write", jobs=3, flow=533, offset=4096, offset_increment=1 << 20)
    assert [g["offset"] for g in flow_groups(log)] == [4096, 4096 + (1 << 20), 4096 + (2 << 20)]
    assert not any("offset_increment" in g for g in flow_groups(log))
    # without a flow, or with one job, one section as before
    assert flow_groups(_options(jobs=3)) == [_options(jobs=3)]
    assert flow_groups(_options(jobs=1, flow=10)) == [_options(jobs=1, flow=10)]
