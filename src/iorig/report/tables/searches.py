"""Tables for search runs (sweep, knee, load-point curve, load points) as
plain TableModels, rendered by the terminal, Markdown and HTML front ends."""

from __future__ import annotations

import math
from collections.abc import Callable

from iorig.analyze.analysis import Comparison
from iorig.analyze.generator import GeneratorLoad
from iorig.analyze.kneesteps import KneeStep
from iorig.analyze.loadpoints import LoadRow, spec_rules
from iorig.analyze.search import (
    AcceleratorsResult,
    BusinessPoint,
    CurveResult,
    KneeResult,
    LoadPointResult,
    SearchResult,
    SweepPoint,
    SweepResult,
)
from iorig.analyze.sweepcmp import SweepComparison
from iorig.report.tables.metrics import metric
from iorig.report.tables.run import TableModel
from iorig.report.tables.training import au_text, mb_s, mib_s, samples_text
from iorig.units import format_bytes, format_latency, format_si


def _integer(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def sweep_table(sweep: SweepResult) -> TableModel:
    """One row per point: its coordinates, throughput both ways, latency; for a
    count on the x axis (threads, jobs, mailboxes), IOPS per unit and how
    linear the scaling is against the first point. The figure that scales is
    the phase's IOPS, or the scenario's required rate (e.g. Exchange's
    transactional IOPS)."""
    title = "Threads" if sweep.kind == "threads" else "Sweep"
    scaled = sweep.scaled
    label = scaled.label if scaled else "IOPS"

    def scale_of(p: SweepPoint) -> float:
        return scaled.by_phase.get(p.phase.name, math.nan) if scaled else p.phase.iops

    with_test = len({p.test for p in sweep.points}) > 1
    repeats = any(len(p.phase.repeat_levels) > 1 for p in sweep.points)
    counts = [_integer(p.coords.get(sweep.x_axis, "")) for p in sweep.points]
    per_unit = all(c for c in counts)
    headers = [*(("test",) if with_test else ()), *sweep.axes, "IOPS", "MB/s"]
    if per_unit:
        if scaled:
            headers.append(label)
        headers += [f"{label} per {sweep.x_axis.rstrip('s')}", "scaling"]
    headers += ["mean lat", "p99", *(f.label for f in sweep.latencies)]
    if repeats:
        headers.append("repeats")
    headers.append("status")
    first: dict[str, tuple[int, float]] = {}  # per test and group: the first point
    rows = []
    for p, count in zip(sweep.points, counts, strict=True):
        ph = p.phase
        row = [*((p.test,) if with_test else ()), *(p.coords.get(a, "") for a in sweep.axes)]
        row += [format_si(ph.iops), metric("bytes_per_s").format(ph.bytes_per_s)]
        if per_unit and count:
            value = scale_of(p)
            key = p.test + "|" + ",".join(p.coords.get(a, "") for a in sweep.axes[1:])
            base_count, base_value = first.setdefault(key, (count, value))
            linear = base_value * count / base_count
            if scaled:
                row.append(format_si(value))
            row += [format_si(value / count), f"{value / linear * 100:.0f}%" if linear else "-"]
        row += [format_latency(ph.lat_mean_ns), format_latency(ph.lat_p99_ns)]
        row += [format_latency(f.by_phase.get(ph.name, math.nan)) for f in sweep.latencies]
        if repeats:
            row.append(str(len(ph.repeat_levels)))
        row.append(ph.status)
        rows.append(tuple(row))
    lead = len(sweep.axes) + (1 if with_test else 0)
    align = ("l",) * lead + ("r",) * (len(headers) - lead - 1) + ("l",)
    notes = [
        "IOPS and MB/s are whole-phase means (over all repeats); latency is fio's completion "
        "latency, p99 from the merged histograms"
    ]
    if per_unit:
        notes.append(
            f"scaling: {label} against a linear extrapolation of the first point "
            f"(100 % = twice the {sweep.x_axis}, twice the {label})"
        )
    if sweep.kind == "threads":
        notes.insert(
            0,
            f"fewest threads that pass every criterion: {sweep.fewest_passing}"
            if sweep.fewest_passing is not None
            else "no thread count tried passes every criterion (see the verdicts)",
        )
    return TableModel(title, tuple(headers), tuple(rows), align, tuple(notes))


def knee_tables(result: KneeResult) -> list[TableModel]:
    """The measured curve with per-step efficiency and Little's law, then the verdict."""
    scale = result.settings.get("scale", "iodepth")
    knee_c = result.knee.point.concurrency if result.knee.point else None
    steps = {s.c2: s for s in result.knee.efficiency}
    states = {s.concurrency: s.settled.state for s in result.remeasured}
    kept = result.kept or (None,) * len(result.points)
    rows = []
    for p, little, really in zip(result.points, result.little, kept, strict=True):
        step = steps.get(p.concurrency)
        mark = []
        if p.concurrency == knee_c and result.knee.beyond:
            mark.append("highest measured: the knee lies beyond")
        elif p.concurrency == knee_c and result.uncertain is None:
            mark.append("knee")
        elif p.concurrency == knee_c:
            mark.append("knee of the pooled readings")
        if result.knee.slo_best and p.concurrency == result.knee.slo_best.concurrency:
            mark.append("best within SLO")
        if little.short:
            mark.append("queue not kept")
        if really is not None:
            mark.append(f"fio kept {really} in flight")
        elif little.deeper:
            mark.append("queue deeper than asked")
        if p.concurrency in states:
            mark.append(_STATE_MARK[states[p.concurrency]])
        rows.append(
            (
                str(p.concurrency),
                metric(result.headline).number(p.throughput),
                "-" if step is None else f"{step.gain_per_doubling * 100:+.1f}%",
                "-" if step is None else metric(result.headline).number(step.added_per_unit),
                format_latency(p.lat_mean_ns),
                format_latency(p.lat_p99_ns),
                f"{little.outstanding:.1f}",
                ", ".join(mark),
            )
        )
    curve = TableModel(
        f"Concurrency search (jobs × iodepth, raising {scale})",
        (
            "concurrency",
            metric(result.headline).unit,
            "gain/doubling",
            "added/unit",
            "mean lat",
            "p99",
            "in flight",
            "note",
        ),
        tuple(rows),
        ("r", "r", "r", "r", "r", "r", "r", "l"),
        (
            "concurrency = jobs × iodepth; gain/doubling: the step's throughput ratio "
            "normalised to a doubling of concurrency; added/unit: throughput added per added "
            "unit of concurrency; in flight: IOPS × mean time in flight (Little's law), which "
            "should be close to the concurrency",
        ),
    )
    return [curve, knee_verdict_table(result)]


_STATE_MARK = {
    "glitch": "a reading left out",
    "disagree": "readings disagree",
    "unknown": "readings differ",
}


def _levels(levels: list[float], fmt: Callable[[float], str]) -> str:
    return ", ".join(fmt(v) for v in levels)


def _remeasured_text(step: KneeStep, fmt: Callable[[float], str]) -> str:
    """What a concurrency's readings said together, in words."""
    settled = step.settled
    n = len(settled.readings)
    widths = [r.half_width_pct for r in settled.readings if r.half_width_pct is not None]
    noise = f"each run's seconds ±{max(widths):.1f} % at most" if widths else ""
    if settled.state == "glitch":
        out = [r for r in settled.readings if r.repeat in settled.left_out]
        kept = [r.level for r in settled.kept_readings]
        which = ", ".join(f"run {r.repeat + 1} of {n} ({fmt(r.level)})" for r in out)
        return (
            f"at {step.concurrency}: {which} left out as a glitch, apart beyond the noise "
            f"({noise}) from the {len(kept)} others ({_levels(kept, fmt)}), which agree"
        )
    levels = _levels([r.level for r in settled.readings], fmt)
    if settled.state == "disagree":
        return (
            f"at {step.concurrency}: its {n} runs ({levels}) disagree beyond the noise "
            f"({noise}), none apart from others that agree: uncertain between "
            f"{fmt(settled.lowest.level)} and {fmt(settled.highest.level)}"
        )
    why = next(r.why for r in settled.readings if not r.known)
    return (
        f"at {step.concurrency}: its {n} runs ({levels}) differ, and their seconds give no "
        f"estimate of their noise ({why}): uncertain between them"
    )


def knee_verdict_table(result: KneeResult) -> TableModel:
    rows: list[tuple[str, str]] = []
    knee = result.knee
    rule = result.rule
    throughput = metric(result.headline).with_unit
    if knee.point is not None:
        p = knee.point
        at = (
            f"{'beyond ' if knee.beyond else ''}concurrency {p.concurrency}"
            + (f" (at {p.concurrency}:" if knee.beyond else ":")
            + f" {throughput(p.throughput)}, "
            f"mean {format_latency(p.lat_mean_ns)}, p99 {format_latency(p.lat_p99_ns)}"
            + (")" if knee.beyond else "")
        )
        if result.uncertain is not None:
            lo, hi = result.uncertain
            at = (
                f"uncertain between concurrency {lo} and {hi}: readings that cannot be "
                f"settled allow either (see re-measured); with them pooled, {at}"
            )
        rows.append(("knee", at))
    rows.append(("why", knee.reason))
    said = [
        _remeasured_text(s, throughput)
        for s in result.remeasured
        if s.settled.state != "unknown" or result.uncertain is not None
    ]
    if said:
        rows.append(("re-measured", "; ".join(said)))
    if result.rounding is not None or any(result.kept):
        ran = [
            f"{p.concurrency} kept {k}"
            for p, k in zip(result.points, result.kept, strict=True)
            if k
        ]
        text = "; ".join(
            filter(
                None,
                [
                    f"powers of two only: {result.rounding}" if result.rounding else "",
                    f"in flight: {', '.join(ran)}, more than their labels" if ran else "",
                ],
            )
        )
        rows.append(("depths", text))
    if rule.slo_p99_ns is not None:
        best = knee.slo_best
        rows.append(
            (
                f"best within p99 ≤ {format_latency(rule.slo_p99_ns)}",
                "no point meets the SLO"
                if best is None
                else f"concurrency {best.concurrency}: "
                f"{throughput(best.throughput)}, "
                f"p99 {format_latency(best.lat_p99_ns)}",
            )
        )
    if result.plateau is not None:
        rows.append(("peak", result.plateau.describe(throughput)))
    odd = [c for c in result.little if c.short or c.deeper]
    if odd:
        rows.append(("Little's law", "; ".join(f"{c.requested}: {c.message}" for c in odd)))
    if result.usl is not None:
        fit = result.usl
        peak = (
            f", predicted peak {throughput(fit.peak_throughput)} at concurrency "
            f"{fit.peak_concurrency:.0f}"
            if fit.peak_concurrency
            else ", no predicted peak (no coherency cost)"
        )
        rows.append(
            (
                "USL fit",
                f"λ {throughput(fit.lam)} per unit, σ {fit.sigma:.4f}, "
                f"κ {fit.kappa:.6f}, r² {fit.r2:.3f}{peak}",
            )
        )
    return TableModel(
        "Knee",
        ("", ""),
        tuple(rows),
        ("l", "l"),
        (
            f"a doubling pays when it gains at least {rule.min_gain * 100:g}% throughput; "
            "the peak band comes from re-measuring the best points (each a fresh fio run)",
        ),
    )


def curve_tables(result: CurveResult) -> list[TableModel]:
    rows = []
    for p in result.points:
        lp = p.load
        rows.append(
            (
                f"{p.fraction * 100:g}%",
                format_si(lp.requested_ops_per_s or 0),
                format_si(lp.achieved_ops_per_s),
                f"{p.validity.achieved_fraction * 100:.1f}%",
                format_latency(lp.lat_mean_ns),
                format_latency(lp.lat_p99_ns),
                "valid"
                if p.validity.valid
                else "INVALID: the generator fell behind"
                if p.generator_bound
                else "INVALID: fell behind",
            )
        )
    notes = [
        f"maximum (uncontrolled) {format_si(result.max_iops)} IOPS; each point runs at a fixed "
        f"rate with Poisson arrivals; valid when it achieves at least "
        f"{(1 - float(result.settings.get('tolerance', 0.05))) * 100:g}% of its rate"
    ]
    if result.ort_ms is not None:
        notes.append(
            f"overall response time (SPEC's ORT: area under latency vs achieved IOPS, divided "
            f"by the IOPS range, no origin point): {result.ort_ms:.3f} ms"
        )
    if not result.valid:
        notes.append(
            "the curve is not valid: at an invalid point the requested rate was not kept and "
            "fio's latency, measured from issue, hides the queueing (coordinated omission)"
        )
    notes += _generator_notes(
        [(f"{p.fraction * 100:g}%", p.generator) for p in result.points if p.generator_bound]
    )
    if result.capped_at:
        notes.append(f"stopped after {result.capped_at}: it exceeded the latency cap")
    return [
        TableModel(
            "Load points",
            ("load", "requested IOPS", "achieved IOPS", "achieved", "mean lat", "p99", "validity"),
            tuple(rows),
            ("r", "r", "r", "r", "r", "r", "l"),
            tuple(notes),
        )
    ]


def _generator_notes(points: list[tuple[str, GeneratorLoad | None]]) -> list[str]:
    """Invalid points the load generator, not the storage, could not keep up with."""
    if not points:
        return []
    worst = max((g for _, g in points if g is not None), key=lambda g: g.busy_fraction)
    return [
        f"the run is NOT valid: at {', '.join(name for name, _ in points)} the load generator "
        f"fell behind ({worst.describe()}): whether the storage could carry these loads is "
        "not known; give fio more CPUs (or more hosts) and run them again"
    ]


def loadpoint_tables(result: LoadPointResult) -> list[TableModel]:
    """Seed 004's table (load, latency, ops/s, MB/s) with requested rates and
    validity, then the latency of each op type."""
    rows = []
    for p in result.points:
        rows.append(
            (
                str(p.load),
                f"{p.lat_mean_ns / 1e6:.2f}",
                f"{p.achieved_ops_per_s:,.0f}",
                f"{p.bytes_per_s / 1e6:,.1f}",
                f"{p.requested_ops_per_s:,.0f}",
                "valid" if p.valid else "INVALID: " + "; ".join(p.problems),
            )
        )
    notes = []
    if result.points:
        best = result.max_valid_load
        notes.append(
            f"largest valid load: {best} {result.metric}"
            if best is not None
            else "no load point is valid"
        )
        if result.ort_ms is not None:
            notes.append(
                f"overall response time {result.ort_ms:.2f} ms (SPEC's rule: area under latency "
                "against achieved ops/s over the measured points, no origin, divided by the "
                "ops/s range)"
            )
        storage = [
            f"{p.load} {result.metric}"
            for p in result.points
            if not p.valid and not p.generator_bound and not p.contended
        ]
        contended = [f"{p.load} {result.metric}" for p in result.points if p.contended]
        generator = [
            (f"{p.load} {result.metric}", p.generator) for p in result.points if p.generator_bound
        ]
        if result.valid:
            notes.append("the run is valid: every point kept its requested rate")
        if storage:
            notes.append(
                f"the run is NOT valid: {', '.join(storage)} fell behind (a load the storage "
                "cannot carry; its latency hides the queueing)"
            )
        notes += _generator_notes(generator)
        if contended:
            notes.append(
                f"the run is NOT valid: at {', '.join(contended)} other processes kept the CPUs "
                "fio may use busy and its I/Os waited for a CPU: whether the storage could "
                "carry these loads is not known; run nothing else on fio's CPUs and run them again"
            )
        problems = spec_rules([p.load for p in result.points])
        notes += [f"SPEC's load-point rules: {problem}" for problem in problems]
        cap = (
            f"; average latency under {format_latency(result.latency_cap_ns)}"
            if (result.latency_cap_ns)
            else ""
        )
        notes.append(
            f"a point is valid when it and each op type achieve at least "
            f"{(1 - result.tolerance) * 100:g} % of their requested ops/s (or stay within "
            f"Poisson noise of it){cap}"
        )
    main = TableModel(
        f"Load points ({result.metric})",
        (result.metric, "latency ms", "ops/s", "MB/s", "requested ops/s", "validity"),
        tuple(rows),
        ("r", "r", "r", "r", "r", "l"),
        tuple(notes),
    )
    ops = list(dict.fromkeys(o.workload for p in result.points for o in p.ops))
    per_op = TableModel(
        "Latency and rate per op type",
        (result.metric, *(f"{op} latency" for op in ops), *(f"{op} ops/s" for op in ops)),
        tuple(
            (
                str(p.load),
                *(_op_cell(p, op, "lat") for op in ops),
                *(_op_cell(p, op, "rate") for op in ops),
            )
            for p in result.points
        ),
        ("r",) * (1 + 2 * len(ops)),
        ("ops/s: achieved/requested; * marks an op type that fell behind",),
    )
    return [main, per_op]


def _op_cell(point: BusinessPoint, op: str, what: str) -> str:
    found = next((o for o in point.ops if o.workload == op), None)
    if found is None:
        return "-"
    if what == "lat":
        # a unit that fits the figure: a fast op type read 0.000 in fixed milliseconds
        return format_latency(found.lat_mean_ns)
    mark = "" if found.valid else "*"
    return f"{found.achieved_ops_per_s:,.0f}/{found.requested_ops_per_s:,.0f}{mark}"


def _ops(value: float) -> str:
    """An ops/s figure as a table gives it: in full, grouped, never 1.01212e+06."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def ort_table(rows: list[LoadRow]) -> TableModel:
    return TableModel(
        "Load points",
        ("load", "latency ms", "ops/s"),
        tuple(
            ("-" if r.load is None else f"{r.load:g}", f"{r.lat_mean_ms:g}", _ops(r.ops_per_s))
            for r in rows
        ),
        ("r", "r", "r"),
    )


def search_tables(result: SearchResult | None) -> list[TableModel]:
    """The tables that say what a search run found (empty for other runs)."""
    match result:
        case SweepResult() if result.points:
            return [sweep_table(result)]
        case KneeResult():
            return knee_tables(result)
        case CurveResult() if result.points:
            return curve_tables(result)
        case LoadPointResult() if result.points:
            return loadpoint_tables(result)
        case AcceleratorsResult():
            return [accelerators_table(result)]
    return []


def accelerators_table(result: AcceleratorsResult) -> TableModel:
    """Every count of accelerators per host the search trained with, and the answer."""
    rows = tuple(
        (
            str(p.accelerators),
            str(p.accelerators * result.hosts),
            format_bytes(p.training.model.dataset_bytes),
            au_text(p.training.au_mean),
            au_text(p.au_min),
            samples_text(p.training.samples_per_s),
            mb_s(p.training.bytes_per_s),
            mib_s(p.training.bytes_per_s),
            str(p.training.outcome),
        )
        for p in result.points
    )
    answer = (
        f"the most accelerators per host that keep AU at or above {result.au_floor:.0%} in "
        f"every epoch: {'at least ' if result.at_least else ''}{result.most}"
        + (f" ({result.most * result.hosts} on {result.hosts} hosts)" if result.hosts > 1 else "")
        if result.most
        else f"not even one accelerator per host kept AU at or above {result.au_floor:.0%}"
    )
    if result.generator_limited:
        answer += (
            "; the first count that fell short did so with the load generator, not the "
            "storage, setting the pace (see the audit): more client CPUs may keep more"
        )
    elif result.at_least:
        answer += f"; the search's limit ({result.limit} a host: 32 reader jobs a CPU)"
    return TableModel(
        "Accelerators search",
        (
            "per host",
            "in all",
            "data set",
            "AU",
            "lowest epoch",
            "samples/s",
            "throughput",
            "throughput",
            "verdict",
        ),
        rows,
        ("r", "r", "r", "r", "r", "r", "r", "r", "l"),
        (
            answer,
            "doubling while every epoch passes, then halving the gap to the first count "
            "that did not; each count writes its data set (per host) and trains on it",
        ),
    )


def sweep_comparison_table(sc: SweepComparison) -> TableModel:
    """Per point, A and B side by side; first the point's other coordinates,
    headed by what they are (a column only when there are any)."""
    grouped = bool(sc.group_title)
    rows = []
    for pair, verdict in zip(sc.pairs, sc.verdicts, strict=True):
        rows.append(
            (
                *((pair.group or "-",) if grouped else ()),
                pair.point.split("=", 1)[1],
                metric(pair.headline).with_unit(pair.throughput_a),
                metric(pair.headline).with_unit(pair.throughput_b),
                f"{pair.throughput_b / pair.throughput_a * 100:.0f}%",
                format_latency(pair.lat_mean_ns_a),
                format_latency(pair.lat_mean_ns_b),
                f"{pair.lat_mean_ns_b / pair.lat_mean_ns_a * 100:.0f}%",
                verdict,
            )
        )
    a, b = sc.label_a, sc.label_b
    lead = (sc.group_title,) if grouped else ()
    return TableModel(
        f"{b} against {a} across the sweep",
        (
            *lead,
            sc.x_axis,
            f"{a}",
            f"{b}",
            f"{b}/{a}",
            f"{a} lat",
            f"{b} lat",
            f"{b}/{a} lat",
            "significance",
        ),
        tuple(rows),
        ("l",) * (len(lead) + 1) + ("r",) * 6 + ("l",),
        tuple(sc.sentences()),
    )


def _side_by_side(title: str, labels: tuple[str, ...], rows: list[tuple[str, ...]]) -> TableModel:
    return TableModel(title, ("", *labels), tuple(rows), ("l", *("r" for _ in labels)))


def _knee_cell(k: KneeResult) -> str:
    if k.uncertain is not None:
        return f"uncertain: {k.uncertain[0]}–{k.uncertain[1]}"
    return k.knee.where


def comparison_search_tables(cmp: Comparison) -> list[TableModel]:
    """What compare adds for search runs: per-point ratios of sweeps, the knees
    or the load-point curves side by side."""
    tables = [sweep_comparison_table(sc) for sc in cmp.sweeps]
    results = [r.search for r in cmp.runs]
    knees = [k for k in results if isinstance(k, KneeResult)]
    if len(knees) == len(results):
        rows = [
            ("knee concurrency", *(_knee_cell(k) for k in knees)),
            (
                "throughput at the knee",
                *(
                    metric(k.headline).with_unit(k.knee.point.throughput) if k.knee.point else "-"
                    for k in knees
                ),
            ),
            (
                "p99 at the knee",
                *(format_latency(k.knee.point.lat_p99_ns) if k.knee.point else "-" for k in knees),
            ),
            (
                "peak",
                *(
                    k.plateau.describe(metric(k.headline).with_unit) if k.plateau else "-"
                    for k in knees
                ),
            ),
        ]
        tables.append(_side_by_side("Knees", cmp.labels, rows))
    loads = [lp for lp in results if isinstance(lp, LoadPointResult)]
    if len(loads) == len(results):
        rows = [
            (
                "largest valid load",
                *(str(lp.max_valid_load) if lp.max_valid_load else "-" for lp in loads),
            ),
            (
                "overall response time",
                *(f"{lp.ort_ms:.2f} ms" if lp.ort_ms else "-" for lp in loads),
            ),
            ("valid", *("yes" if lp.valid else "no" for lp in loads)),
        ]
        tables.append(_side_by_side("Load points", cmp.labels, rows))
    curves = [c for c in results if isinstance(c, CurveResult)]
    if len(curves) == len(results):
        rows = [
            ("maximum IOPS", *(format_si(c.max_iops) for c in curves)),
            ("overall response time", *(f"{c.ort_ms:.3f} ms" if c.ort_ms else "-" for c in curves)),
            ("valid", *("yes" if c.valid else "no" for c in curves)),
        ]
        tables.append(_side_by_side("Load-point curves", cmp.labels, rows))
    return tables
