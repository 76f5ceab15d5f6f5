"""Loading the recorded fio fixtures in tests/data (see record_fixtures.sh)."""

from __future__ import annotations

from pathlib import Path

from iorig.fio import parse
from iorig.fio.assemble import JobLogs, SectionData

DATA = Path(__file__).resolve().parent / "data"


def output_text(name: str) -> str:
    return (DATA / name / "output.json").read_text()


def job_logs(name: str) -> tuple[JobLogs, ...]:
    """Per fio job number, its parsed logs."""
    by_job: dict[int, dict[str, list]] = {}
    for log in parse.find_logs(DATA / name):
        text = log.path.read_text()
        if log.kind == "clat_hist":
            content = parse.parse_hist_log(text)
        else:
            content = parse.parse_series_log(text)
        by_job.setdefault(log.job, {})[log.kind] = content
    return tuple(
        JobLogs(
            iops=tuple(kinds.get("iops", ())),
            bw=tuple(kinds.get("bw", ())),
            hist=tuple(kinds.get("clat_hist", ())),
        )
        for _, kinds in sorted(by_job.items())
    )


def section(name: str, workload: str | None = None) -> SectionData:
    output = parse.parse_final(output_text(name))
    jobname = output.jobs[0].name
    return SectionData(workload or jobname, "local", output.jobs, job_logs(name))
