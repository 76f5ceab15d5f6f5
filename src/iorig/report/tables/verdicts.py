"""What compare adds for application workloads: every run's
verdict, overall and per host, and each requirement its verdicts are made
of — the limit, each run's figure and result, the change against the
baseline and whether it exceeds the noise; and the same as JSON."""

from __future__ import annotations

from typing import Any

from iorig.analyze.analysis import Comparison
from iorig.analyze.compare import percent, significance_text
from iorig.analyze.criteria import Verdict
from iorig.analyze.integrity import DataCheck
from iorig.analyze.verdictcmp import (
    DATA,
    ONE_FIGURE,
    FigureChange,
    RequirementRow,
    VerdictComparison,
)
from iorig.report.tables.run import TableModel, criterion_value

NO_VERDICT = "no verdict"  # a run without criteria or a data check


def verdicts_table(cmp: Comparison) -> TableModel | None:
    """Each run's verdict, then each host's where requirements are per host."""
    vc = cmp.verdicts
    if vc is None:
        return None
    rows = [("overall", *(r.verdict or NO_VERDICT for r in vc.runs))]
    hosts = list(dict.fromkeys(h for r in vc.runs for h, _ in r.hosts))
    for host in hosts:
        rows.append((host, *(dict(r.hosts).get(host, "-") for r in vc.runs)))
    notes = ("a host's verdict: the requirements judged on its own share",) if hosts else ()
    return TableModel(
        "Verdicts",
        ("verdict of", *cmp.labels),
        tuple(rows),
        ("l", *("l" for _ in cmp.labels)),
        notes,
    )


def change_text(change: FigureChange | None) -> str:
    """Whether a figure's change exceeds the noise, in the metric's own
    direction: "worse, significant (CI −61.2…−58.3%, p=1e-09)"."""
    if change is None:
        return "-"
    if change.test is None:
        return f"not testable: {change.why}"
    text = significance_text(change.test, change.verdict, change.below_threshold)
    return f"{change.verdict}, {text}" if change.significant else text


def _limit(row: RequirementRow, labels: tuple[str, ...]) -> str:
    """The limit, once when every run has the same one."""
    if row.metric == DATA:
        return "none lost"
    if row.bound == "info":
        return "-"
    sign = "≥ " if row.bound == "min" else "≤ "
    limits = [sign + criterion_value(row.metric, v.limit) if v else "-" for v in row.verdicts]
    if len(set(limits)) == 1:
        return limits[0]
    return "; ".join(f"{label}: {limit}" for label, limit in zip(labels, limits, strict=True))


def _data_cell(check: DataCheck | None) -> str:
    if check is None or not (check.complete or check.lost):
        return "-"
    if check.lost:
        return f"{check.at_least}{check.bad:,} lost"
    return f"all {check.blocks:,} blocks"


def _result(row: RequirementRow) -> str:
    results = ["-" if v is None else str(v.outcome) for v in row.verdicts]
    return " → ".join(results) if len(results) == 2 else " / ".join(results)


def requirements_table(cmp: Comparison) -> TableModel | None:
    """Each requirement: its limit, each run's figure, the change against the
    baseline with its significance, and each run's result."""
    vc = cmp.verdicts
    if vc is None or not vc.requirements:
        return None
    labels = cmp.labels
    two = len(labels) == 2
    # the data check's row names its check: a phase column only for several measured phases
    phased = len({r.phase for r in vc.requirements if r.metric != DATA}) > 1
    hosted = any(r.host for r in vc.requirements)
    headers = [
        "Requirement",
        *(["Phase"] if phased else []),
        *(["Host"] if hosted else []),
        "Limit",
        labels[0],
    ]
    align = ["l", *(["l"] if phased else []), *(["l"] if hosted else []), "r", "r"]
    for label in labels[1:]:
        headers += [label, "% change" if two else f"% vs {labels[0]}"]
        align += ["r", "r"]
    headers += ["Significance", "Result"]
    align += ["l", "c"]
    rows = []
    for row in vc.requirements:
        cells = [
            row.name,
            *([row.phase] if phased else []),
            *([row.host or "all"] if hosted else []),
            _limit(row, labels),
        ]
        for i, verdict in enumerate(row.verdicts):
            if row.metric == DATA:
                cells.append(_data_cell(vc.data[i]) if verdict else "-")
            else:
                cells.append(criterion_value(row.metric, verdict.value) if verdict else "-")
            if i:
                change = row.changes[i]
                cells.append(percent(change.change) if change else "-")
        cells.append(_significance(row, labels))
        cells.append(_result(row))
        rows.append(tuple(cells))
    # a narrow terminal keeps what each run achieved and its result, then the
    # significance; the limit and the % columns go first
    priority = (
        0,
        *([2] if phased else []),
        *([0] if hosted else []),
        3,
        1,
        *(p for _ in labels[1:] for p in (1, 4)),
        2,
        1,
    )
    return TableModel(
        "Requirements: each run's figure, its change and whether it exceeds the noise",
        tuple(headers),
        tuple(rows),
        tuple(align),
        _notes(vc, labels[0]),
        priority,
    )


def _significance(row: RequirementRow, labels: tuple[str, ...]) -> str:
    if row.metric == DATA:
        return "no noise: one lost block fails"
    parts = [(labels[i], change_text(c)) for i, c in enumerate(row.changes) if i]
    if len(parts) == 1:
        return parts[0][1]
    return " / ".join(f"{label}: {text}" for label, text in parts)


def _notes(vc: VerdictComparison, baseline: str) -> tuple[str, ...]:
    notes = [
        f"each figure as the run's verdict judged it; % change and significance against "
        f"{baseline}: higher is better for a rate, lower for a latency (better / worse say "
        "which)",
        f"'n.s.': the confidence interval of the figure's change includes zero, or the change "
        f"is under the {vc.threshold * 100:g}% threshold",
    ]
    methods = vc.methods
    if "repeats" in methods:
        notes.append(
            "Significance by Welch's t-test on the figure of each repeat (fresh fio runs)."
        )
    if "batch means" in methods:
        notes.append(
            "Significance by Welch's t-test on batch means of the figure's per-second "
            "values within each run; --repeat N adds run-to-run variation."
        )
    if any(c is not None and c.why == ONE_FIGURE for r in vc.requirements for c in r.changes):
        notes.append(
            "A percentile, a maximum or the worst second is one figure per run: "
            "without --repeat N on both runs it is not testable."
        )
    if any(r.metric == DATA for r in vc.requirements):
        notes.append(
            "The data check counts blocks that did not read back as last written: "
            "there is no noise to test, and one lost block fails the run."
        )
    return tuple(notes)


def verdicts_dict(cmp: Comparison) -> dict[str, Any] | None:
    """The JSON of a comparison's verdicts (NaN becomes null as every
    document is written): every run's verdict, overall and per host, and
    each requirement with every run's limit, figure and result and the
    figure's change against the baseline with its test."""
    vc = cmp.verdicts
    if vc is None:
        return None
    ids = [r.run.id for r in cmp.runs]

    def side(i: int, v: Verdict | None, change: FigureChange | None, data: bool) -> dict:
        test = change.test if change else None
        check = vc.data[i] if data else None
        return {
            "label": cmp.labels[i],
            "run_id": ids[i],
            "limit": v.limit if v else None,
            "value": v.value if v else None,
            "passed": v.passed if v else None,
            **(
                {"blocks": check.blocks if check else None, "lost": check.bad if check else None}
                if data
                else {}
            ),
            "change": change.change if change else None,
            "verdict": change.verdict if change else None,
            "method": change.method if change else None,
            "not_testable": (change.why or None) if change else None,
            "ratio": test.ratio if test else None,
            "ci_low": test.ci_low if test else None,
            "ci_high": test.ci_high if test else None,
            "p_value": test.p_value if test else None,
        }

    return {
        "runs": [
            {
                "label": label,
                "run_id": run_id,
                "verdict": r.verdict,
                "hosts": [{"host": h, "verdict": hv} for h, hv in r.hosts],
            }
            for label, run_id, r in zip(cmp.labels, ids, vc.runs, strict=True)
        ],
        "requirements": [
            {
                "name": row.name,
                "phase": row.phase,
                "host": row.host,
                "metric": row.metric,
                "bound": row.bound,
                "higher_is_better": row.higher_is_better,
                "runs": [
                    side(i, v, c, row.metric == DATA)
                    for i, (v, c) in enumerate(zip(row.verdicts, row.changes, strict=True))
                ],
            }
            for row in vc.requirements
        ],
        "threshold": vc.threshold,
    }
