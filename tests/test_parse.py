"""Parsing fio's json+ output (with status snapshots) and its log files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tests.fixtures import DATA, output_text

from iorig.fio import parse
from iorig.model import histogram


def test_status_snapshots_then_final_document():
    docs = parse.split_documents(output_text("randread-2jobs"))
    assert len(docs) == 4  # three one-second snapshots and the final result
    totals = [sum(j["read"]["total_ios"] for j in d["jobs"]) for d in docs]
    assert totals == sorted(totals) and totals[-1] == max(totals)


def test_reading_a_growing_file_in_chunks_yields_the_same_documents():
    text = output_text("randread-2jobs")
    expected = parse.split_documents(text)
    for chunk in (997, 4096, 50_000):
        buffer, seen = "", []
        for start in range(0, len(text), chunk):
            buffer += text[start : start + chunk]
            docs, consumed = parse.scan_documents(buffer)
            seen += docs
            buffer = buffer[consumed:]
        assert seen == expected


def test_noise_and_truncation_are_skipped():
    final = parse.split_documents(output_text("randread-2jobs"))[-1]
    text = "fio: some warning {not json}\n" + json.dumps(final, indent=1) + "\n"
    assert parse.split_documents(text) == [final]
    cut = text[: len(text) // 2]
    assert parse.split_documents(cut) == []
    assert parse.scan_documents(cut)[1] == 0


def test_parse_final_keeps_fios_figures():
    text = output_text("randread-2jobs")
    raw = parse.split_documents(text)[-1]
    out = parse.parse_final(text)
    assert out.version == raw["fio version"] == "fio-3.33"
    assert [j.name for j in out.jobs] == ["randread-2jobs", "randread-2jobs"]
    for job, rj in zip(out.jobs, raw["jobs"], strict=True):
        d = job.dirs["read"]
        assert set(job.dirs) == {"read"}
        assert d.ios == rj["read"]["total_ios"]
        assert d.io_bytes == rj["read"]["io_bytes"]
        assert d.iops == rj["read"]["iops"]
        assert d.clat_mean_ns == rj["read"]["clat_ns"]["mean"]
        assert int(d.hist.sum()) == rj["read"]["clat_ns"]["N"]
        assert job.usr_cpu_pct == rj["usr_cpu"] and job.host == "local"


def test_mixed_job_has_both_directions():
    (job,) = parse.parse_final(output_text("randrw-mixed")).jobs
    assert set(job.dirs) == {"read", "write"}
    share = job.dirs["read"].ios / (job.dirs["read"].ios + job.dirs["write"].ios)
    assert share == pytest.approx(0.7, abs=0.03)


def test_client_server_documents_drop_the_all_clients_entry():
    raw = parse.split_documents(output_text("randread-2jobs"))[-1]
    job = dict(raw["jobs"][0], hostname="127.0.0.2", port=8765)
    v6 = dict(job, hostname="::1", port=18706)
    doc = {"fio version": "fio-3.33", "client_stats": [job, v6, dict(job, jobname="All clients")]}
    out = parse.parse_document(doc)
    # a server is its address and port: loopback servers share one hostname
    assert [(j.name, j.host) for j in out.jobs] == [
        ("randread-2jobs", "127.0.0.2:8765"),
        ("randread-2jobs", "[::1]:18706"),
    ]


def test_garbage_is_a_clear_error():
    with pytest.raises(parse.FioOutputError, match="no JSON result"):
        parse.parse_final("fio: engine io_uring not loadable\n")
    with pytest.raises(parse.FioOutputError, match="neither"):
        parse.parse_document({"something": 1})


def test_series_logs():
    samples = parse.parse_series_log((DATA / "randread-2jobs" / "rr_iops.2.log").read_text())
    assert [s.t_ms for s in samples] == [1000, 2001, 3000]
    assert all(s.ddir == "read" and s.bs == 0 and s.value > 1000 for s in samples)
    mixed = parse.parse_series_log((DATA / "randrw-mixed" / "rr_iops.1.log").read_text())
    assert {s.ddir for s in mixed} == {"read", "write"}


def test_hist_logs_have_1856_bins_per_line():
    entries = parse.parse_hist_log((DATA / "randread-2jobs" / "rr_clat_hist.1.log").read_text())
    assert len(entries) >= 2
    for e in entries:
        assert e.counts.shape == e.bins.shape and e.counts.all() and e.ddir == "read"
        assert (np.diff(e.bins.astype(int)) > 0).all() and e.bins.max() < histogram.NR_BINS
    assert len(parse.parse_hist_log("")) == 0
    with pytest.raises(parse.FioOutputError, match="coarseness"):
        parse.parse_hist_log("1000, 0, 4096, 1, 2, 3\n")


def test_a_long_hist_log_is_read_in_chunks_from_its_file_keeping_every_count(tmp_path):
    lines = (DATA / "randread-2jobs" / "rr_clat_hist.1.log").read_text().splitlines()
    text = "".join(
        f"{1000 * (i + 1)}, {i % 2}, 4096, {lines[i % len(lines)].split(', ', 3)[3]}\n"
        for i in range(2500)
    )  # past two chunks; reads and writes
    log = tmp_path / "rr_clat_hist.1.log"
    log.write_text(text)
    with log.open() as lines_in:
        entries = parse.parse_hist_log(lines_in)
    dense = np.loadtxt(text.splitlines(), delimiter=",", dtype=np.uint64)
    assert [(e.t_ms, e.ddir) for e in entries] == [
        (int(t), "read" if code == 0 else "write") for t, code in dense[:, :2]
    ]
    for entry, row in zip(entries, dense[:, 3:], strict=True):
        back = np.zeros(histogram.NR_BINS, np.uint64)
        back[entry.bins] = entry.counts
        assert np.array_equal(back, row)


def test_find_logs_recognises_names_and_host_suffixes(tmp_path):
    for name in ("w1_iops.1.log", "w1_clat_hist.2.log", "w1_bw.1.log.127.0.0.2", "notes.txt"):
        (tmp_path / name).write_text("")
    found = {(f.prefix, f.kind, f.job, f.host) for f in parse.find_logs(tmp_path)}
    assert found == {
        ("w1", "iops", 1, None),
        ("w1", "clat_hist", 2, None),
        ("w1", "bw", 1, "127.0.0.2"),
    }


def test_an_averaged_log_is_read_as_columns_that_read_back_as_its_samples():
    text = (
        "1000, 500, 0, 4096, 0\n"
        "1000, 7, 1, 8192, 0\n"
        "junk\n"
        "2001, 510, 0, 4096, 0, 0\n"
        "3000, 1234567890123456789, 0, 4096\n"  # 19 digits: no line of fio's
        "3000, 9, 7, 4096\n"  # no direction fio has
    )
    log = parse.parse_series_log(text)
    assert list(log) == [
        parse.LogSample(1000, 500.0, "read", 4096),
        parse.LogSample(1000, 7.0, "write", 8192),
        parse.LogSample(2001, 510.0, "read", 4096),
    ]
    assert log[1] == parse.LogSample(1000, 7.0, "write", 8192) and len(log[1:]) == 2
    assert list(log.of_ddir("read").shifted(1000).t_ms) == [0, 1001]
    assert parse.SampleLog.of(list(log)) == log


def test_a_hist_log_gives_each_seconds_first_line_of_a_direction():
    def line(t_ms: int, ddir: int, bin_: int, count: int) -> str:
        row = [0] * histogram.NR_BINS
        row[bin_] = count
        return f"{t_ms}, {ddir}, 4096, {', '.join(map(str, row))}\n"

    log = parse.parse_hist_log(
        line(1000, 0, 10, 1)
        + line(1000, 1, 11, 2)  # another direction
        + line(1499, 0, 12, 3)  # rounds to second 1 again: the first line wins
        + line(2500, 0, 13, 4)  # 2.5 s rounds half to even: second 2
        + line(4000, 0, 14, 5)
    )
    rows = log.by_second("read", np.array([1, 2, 3, 4]))
    assert [r.nonzero()[0].tolist() for r in rows.dense()] == [[10], [13], [], [14]]
    assert rows.totals().tolist() == [1, 4, 0, 5]
    assert len(parse.HistLog.empty().by_second("read", np.array([1, 2]))) == 2
    assert [e.t_ms for e in parse.HistLog.of(list(log))] == [1000, 1000, 1499, 2500, 4000]
