"""A training run's tables (MLPerf Storage-like, docs/methodology.md §11):
the result as MLPerf Storage states one, each epoch, each host and each
accelerator."""

from __future__ import annotations

from dataclasses import replace

from iorig.analyze.analysis import Comparison, RunAnalysis
from iorig.analyze.checkpoint import CheckpointSummary
from iorig.analyze.search import AcceleratorsResult
from iorig.analyze.training import WAIT_PERCENTILES, TrainingAnalysis
from iorig.report.tables.model import TableModel
from iorig.units import format_bytes, format_latency


def au_text(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def mb_s(bytes_per_s: float | None) -> str:
    """Decimal megabytes a second, as MLPerf Storage's reports label them."""
    return "-" if bytes_per_s is None else f"{bytes_per_s / 1e6:,.1f} MB/s"


def mib_s(bytes_per_s: float | None) -> str:
    """Binary mebibytes a second (DLIO's own "MB/s" figure is these)."""
    return "-" if bytes_per_s is None else f"{bytes_per_s / 2**20:,.1f} MiB/s"


def samples_text(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _ms(value: float | None) -> str:
    return format_latency(None if value is None else value * 1e6)


RESULT_NOTE = (
    "AU: accelerator utilisation, compute time ÷ wall time, the first step of each epoch "
    "left out (MLPerf Storage's rule), the mean over epochs; PASS needs every epoch at or "
    "above the floor, stricter than MLPerf Storage, which judges the mean"
)


def result_table(runs: list[tuple[str, TrainingAnalysis]]) -> TableModel:
    """MLPerf Storage's result table: one row per training phase (and run)."""
    rows = []
    for label, t in runs:
        m = t.model
        rows.append(
            (
                *((label,) if len(runs) > 1 or label else ()),
                m.workload,
                m.accelerator.upper(),
                f"{m.accelerators} × {t.hosts}" if t.hosts > 1 else str(m.accelerators),
                str(t.hosts),
                au_text(t.au_mean),
                f"{m.au_floor * 100:.0f}%",
                samples_text(t.samples_per_s),
                mb_s(t.bytes_per_s),
                mib_s(t.bytes_per_s),
                f"{t.outcome} (MLPerf's rule: {t.mlperf_outcome or '-'})",
            )
        )
    labelled = len(runs) > 1 or bool(runs and runs[0][0])
    return TableModel(
        "Training result (MLPerf Storage-like; not an MLPerf Storage result)",
        (
            *(("run",) if labelled else ()),
            "workload",
            "accelerator",
            "accelerators",
            "hosts",
            "AU",
            "floor",
            "samples/s",
            "throughput",
            "throughput",
            "verdict",
        ),
        tuple(rows),
        (*(("l",) if labelled else ()), "l", "l", "r", "r", "r", "r", "r", "r", "r", "l"),
        (
            RESULT_NOTE,
            "accelerators: per host × hosts; throughput: what the accelerators consumed, "
            "MB/s = 10^6 bytes/s and MiB/s = 2^20 bytes/s; samples of "
            + ", ".join(
                sorted({f"{t.model.sample_bytes:,.0f} bytes ({t.model.workload})" for _, t in runs})
            ),
        ),
    )


def epoch_table(t: TrainingAnalysis) -> TableModel:
    waits = tuple(f"wait p{p:g}" for p in WAIT_PERCENTILES)
    rows = tuple(
        (
            str(f.epoch),
            au_text(f.au),
            samples_text(f.samples_per_s),
            mb_s(f.bytes_per_s),
            mib_s(f.bytes_per_s),
            *(_ms(f.wait_p_ms.get(p)) for p in WAIT_PERCENTILES),
            _ms(f.wait_max_ms),
        )
        for f in t.epochs
    )
    return TableModel(
        f"Training epochs ({t.model.steps_per_epoch} steps of {t.model.batch} samples, "
        f"{t.model.compute_s * 1000:g} ms compute each)",
        ("epoch", "AU", "samples/s", "throughput", "throughput", *waits, "wait max"),
        rows,
        ("r", "r", "r", "r", "r", *("r" for _ in waits), "r"),
        (
            "wait: how long the accelerators waited for data before a step, every accelerator "
            "waiting for the slowest (MLPerf's barrier); the first step of each epoch left out",
        ),
    )


def host_table(t: TrainingAnalysis) -> TableModel | None:
    if t.hosts < 2:
        return None
    epochs = tuple(f"epoch {f.epoch}" for f in t.epochs)
    rows = tuple(
        (h.host, *(au_text(a) for a in h.au), samples_text(h.samples_per_s)) for h in t.host_figures
    )
    return TableModel(
        "Training AU per host",
        ("host", *epochs, "samples/s"),
        rows,
        ("l", *("r" for _ in epochs), "r"),
        ("each host's accelerators waiting for each other only, not for the other hosts'",),
    )


def accelerator_table(t: TrainingAnalysis) -> TableModel | None:
    if len(t.accelerators) < 2:
        return None
    epochs = tuple(f"epoch {f.epoch}" for f in t.epochs)
    rows = tuple(
        (f"{a.host}/{a.index}", *(au_text(x) for x in a.au), f"{a.wait_s:.2f} s")
        for a in t.accelerators
    )
    return TableModel(
        "Training AU per accelerator, each alone",
        ("accelerator", *epochs, "waited"),
        rows,
        ("l", *("r" for _ in epochs), "r"),
        (
            "each accelerator as if it waited for no other: what its own readers delivered; "
            "waited: its time waiting for data, first steps left out",
        ),
    )


def training_tables(analysis: RunAnalysis) -> list[TableModel]:
    if not analysis.training:
        return []
    several = len(analysis.training) > 1
    result = result_table([(t.phase if several else "", t) for t in analysis.training])
    if analysis.verdict:
        result = replace(result, notes=(f"verdict: {analysis.verdict}", *result.notes))
    # a search's details are its answer's (the search's own table has every count)
    search = analysis.search
    best = search.best.phase if isinstance(search, AcceleratorsResult) and search.best else None
    detailed = [t for t in analysis.training if best is None or t.phase == best]
    tables = [result]
    for t in detailed:
        tables.append(epoch_table(t))
        tables += [x for x in (host_table(t), accelerator_table(t)) if x is not None]
    return tables


# ------------------------------------------------------------ checkpoints


def _rate(s: CheckpointSummary | None) -> tuple[str, str, str]:
    if s is None:
        return "-", "-", "-"
    low, high = s.interval or (None, None)
    interval = "-" if low is None else f"{low / 1e9:.3f}–{high / 1e9:.3f} GB/s"
    return (
        f"{s.mean_bytes_per_s / 1e9:.3f} GB/s",
        f"{s.mean_bytes_per_s / 2**30:.3f} GiB/s",
        interval,
    )


def checkpoint_tables(analysis: RunAnalysis) -> list[TableModel]:
    c = analysis.checkpoint
    if c is None:
        return []
    m = c.model
    processes = f"{m.processes} × {c.hosts}" if c.hosts > 1 else str(m.processes)
    rows = tuple(
        (m.model, processes, format_bytes(m.checkpoint_bytes), s.op, *_rate(s),
         str(len(s.levels)))
        for s in c.summaries
    )  # fmt: skip
    result = TableModel(
        "Checkpoint result (MLPerf Storage-like; not an MLPerf Storage result)",
        ("model", "processes", "checkpoint", "", "throughput", "throughput", "95% interval",
         "checkpoints"),
        rows,
        ("l", "r", "r", "l", "r", "r", "r", "r"),
        (
            "throughput: the checkpoint over its slowest process's time (MLPerf Storage's rule), "
            "the mean over the checkpoints; GB/s = 10^9 bytes/s, GiB/s = 2^30 bytes/s"
            + ("; writes include each shard's fsync" if m.fsync else "; no fsync"),
            f"scaled to {m.scale:g} of MLPerf's {m.nominal_bytes / 2**30:,.0f} GiB"
            if m.scale < 1
            else "MLPerf's size",
        ),
    )  # fmt: skip
    each = tuple(
        (f.phase, f"{f.bytes_per_s / 1e9:.3f} GB/s", f"{f.bytes_per_s / 2**30:.3f} GiB/s",
         f"{f.slowest_s:.2f} s", f"{f.median_s:.2f} s", f"{f.fastest_s:.2f} s", f.slowest,
         f"{f.cov * 100:.1f}%", "" if f.complete else "incomplete")
        for s in c.summaries
        for f in s.checkpoints
    )  # fmt: skip
    per = TableModel(
        "Checkpoints",
        ("phase", "throughput", "throughput", "slowest", "median", "fastest", "slowest process",
         "CoV", ""),
        each,
        ("l", "r", "r", "r", "r", "r", "l", "r", "l"),
        ("slowest, median, fastest: the processes' times; CoV: their coefficient of variation",),
    )  # fmt: skip
    return [result, per]


# ------------------------------------------------------------ comparisons


def training_comparison_tables(cmp: Comparison) -> list[TableModel]:
    """Which storage keeps more accelerators, and checkpoints side by side."""
    tables = []
    if (t := cmp.training) is not None:
        rows = tuple(
            (
                f.label,
                f.training.model.workload,
                f.training.model.accelerator.upper(),
                f"{f.accelerators}" + (" (most)" if f.searched else ""),
                au_text(f.training.au_mean),
                samples_text(f.training.samples_per_s),
                mb_s(f.training.bytes_per_s),
                str(f.training.outcome),
            )
            for f in t.figures
        )
        tables.append(
            TableModel(
                "Training: accelerators kept at the floor",
                (
                    "run",
                    "workload",
                    "accelerator",
                    "per host",
                    "AU",
                    "samples/s",
                    "throughput",
                    "verdict",
                ),
                rows,
                ("l", "l", "l", "r", "r", "r", "r", "l"),
                tuple(f"{c.label}: {c.change} — {c.sentence}" for c in t.changes),
            )
        )
    if cmp.checkpoints:
        rows = tuple(
            (
                c.label,
                c.op,
                "-" if c.ratio is None else f"{c.ratio:.3f}",
                "-" if c.interval is None else f"{c.interval[0]:.3f}–{c.interval[1]:.3f}",
                str(c.change),
            )
            for c in cmp.checkpoints
        )
        tables.append(
            TableModel(
                f"Checkpoints against {cmp.labels[0]}",
                ("run", "", "ratio", "95% interval", "change"),
                rows,
                ("l", "l", "r", "r", "l"),
                (
                    "ratio: mean throughput over the checkpoints, the run's ÷ the baseline's; "
                    "Welch's test over the checkpoints",
                ),
            )
        )
    return tables
