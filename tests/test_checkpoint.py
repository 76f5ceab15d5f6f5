"""Checkpointing (MLPerf Storage-like, docs/methodology.md §11): the
scenario's phases, the figures of the processes' times, what is stored."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from iorig.analyze.checkpoint import analyze_checkpoints, checkpoint_figures
from iorig.errors import UserError
from iorig.fio.jobfile import workload_options
from iorig.model.checkpoint import CheckpointModel, CheckpointRecord, ProcessTime
from iorig.scenario.checkpoint import MODELS, planned_record
from iorig.scenario.loading import load
from iorig.store import codecs

MODEL = CheckpointModel("llama3-8b", 4, 4000, 105 << 30, 3, 0.001, False, True)


def _record(op: str, repetition: int, times: list[float], host: str = "h1") -> CheckpointRecord:
    """Each process moved its whole shard of the 4,000-byte checkpoint."""
    shard = MODEL.checkpoint_bytes // len(times)
    processes = tuple(ProcessTime(host, i, shard, t) for i, t in enumerate(times))
    return CheckpointRecord(MODEL, op, repetition, processes)  # type: ignore[arg-type]


def test_the_checkpoint_section_writes_every_checkpoint_then_reads_them_back():
    resolved = load("checkpoint", overrides={"scale": "0.001", "repetitions": "3"})
    names = [p.name for p in resolved.scenario.phases]
    assert names == ["write-1", "write-2", "write-3", "read-1", "read-2", "read-3"]
    w1, r1 = resolved.scenario.phases[0], resolved.scenario.phases[3]
    (shard,) = w1.workloads
    size, processes = MODELS["llama3-8b"]
    assert shard.jobs == processes == 8
    assert shard.file_size >= size / 8 * 0.001 and shard.file_size % shard.bs == 0
    assert (shard.fsync_at_end, r1.workloads[0].fsync_at_end) == (True, False)
    assert shard.fileset == r1.workloads[0].fileset == "ckpt1"  # read back what was written
    assert w1.until == "done" and w1.kind == "measure"
    record = planned_record(resolved.scenario.checkpoint, "read-2")
    assert (record.op, record.repetition, record.model.processes) == ("read", 2, 8)
    assert planned_record(resolved.scenario.checkpoint, "read-4") is None


def test_processes_per_host_keep_each_shard_of_mlperfs_checkpoint():
    spec = load("checkpoint", overrides={"model": "llama3-70b", "processes": "8"}).scenario
    (shard,) = spec.phases[0].workloads
    assert shard.jobs == 8
    assert shard.file_size == pytest.approx(912 * 2**30 / 64, rel=1e-3)  # 70B: 64 shards


def test_a_bad_checkpoint_section_is_refused_by_name():
    with pytest.raises(UserError, match="expected one of llama3-8b"):
        load("checkpoint", overrides={"model": "gpt"})
    with pytest.raises(UserError, match="multiple of 4096"):
        load("checkpoint", overrides={"transfer": "1000"})


def test_fsync_at_the_end_is_in_the_job_file():
    options = workload_options(
        engine="psync", rw="write", bs=1 << 20, filename="/x", size=1 << 20, offset=0,
        iodepth=1, jobs=2, direct=False, read_pct=None, rate_iops=None, runtime_s=60,
        log_prefix="shard", end_fsync=True, time_based=False,
    )  # fmt: skip
    assert options["end_fsync"] is True and "time_based" not in options
    assert options["runtime"] == 60_000  # a limit, not a length


def test_the_figure_is_the_checkpoint_over_its_slowest_process():
    f = checkpoint_figures("write-1", _record("write", 1, [1.0, 2.0, 4.0, 2.0]))
    assert f.bytes_per_s == 4000 / 4.0
    assert (f.slowest, f.median_s, f.fastest_s) == ("h1/2", 2.0, 1.0)
    assert f.complete


def test_repetitions_give_a_mean_and_an_interval_per_direction():
    records = [
        ("write-1", _record("write", 1, [1.0, 2.0])),
        ("write-2", _record("write", 2, [1.0, 2.5])),
        ("write-3", _record("write", 3, [1.0, 1.5])),
        ("read-1", _record("read", 1, [1.0, 1.0])),
    ]
    c = analyze_checkpoints(records)
    assert c.write.levels == [4000 / 2.0, 4000 / 2.5, 4000 / 1.5]
    assert c.write.mean_bytes_per_s == pytest.approx(sum(c.write.levels) / 3)
    low, high = c.write.interval
    assert 0 <= low < c.write.mean_bytes_per_s < high
    assert c.read.interval is None  # one checkpoint: no interval
    assert c.hosts == 1


def test_a_process_short_of_its_shard_marks_the_checkpoint_incomplete():
    record = _record("read", 1, [1.0, 1.0])
    short = replace(
        record, processes=(record.processes[0], replace(record.processes[1], io_bytes=10))
    )
    assert not checkpoint_figures("read-1", short).complete
    assert analyze_checkpoints([("read-1", short)]).read is None  # no complete checkpoint


def test_a_checkpoint_record_round_trips_and_nonsense_is_refused():
    record = _record("write", 2, [1.5, 2.0])
    assert codecs.CHECKPOINT.decode(codecs.CHECKPOINT.encode(record)) == record
    data = json.loads(codecs.CHECKPOINT.encode(record))
    bad = [
        {**data, "op": "trim"},
        {**data, "repetition": 4},  # more than the model's repetitions
        {**data, "model": {**data["model"], "model": "gpt"}},
        {**data, "model": {**data["model"], "scale": 0}},
        {**data, "processes": [{**data["processes"][0], "duration_s": -1}]},
        {**data, "processes": [{**data["processes"][0], "io_bytes": 1.5}]},
    ]
    for payload in bad:
        with pytest.raises(codecs.PayloadError, match="checkpoint"):
            codecs.CHECKPOINT.decode(json.dumps(payload))
