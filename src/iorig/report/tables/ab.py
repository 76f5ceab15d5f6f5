"""What an interleaved A/B (``iorig ab``, or ``compare`` of its two runs)
adds to a comparison: the rounds with their order and the ratio of each,
and one verdict line per measured phase from the paired rounds."""

from __future__ import annotations

from typing import Any

from iorig.analyze.ab import AbComparison, verdict_line
from iorig.analyze.analysis import Comparison
from iorig.model import Change
from iorig.report.tables.metrics import metric
from iorig.report.tables.run import TableModel

DRIFT_NOTE = (
    "these runs were not interleaved: drift of the system between them cannot be told "
    "apart from a difference (iorig ab runs A and B in alternating rounds)"
)


def _side_labels(cmp: Comparison, ab: AbComparison) -> dict[str, str]:
    return {ab.sides[0]: cmp.labels[0], ab.sides[1]: cmp.labels[1]}


def rounds_table(cmp: Comparison) -> TableModel | None:
    """Per measured phase and round: which side ran first, each side's
    median per second, and their ratio."""
    ab = cmp.ab
    if ab is None:
        return None
    a, b = cmp.labels[0], cmp.labels[1]
    names = _side_labels(cmp, ab)
    headline = {p.name: p.headline for p in cmp.phases}
    rows = []
    for phase in ab.phases:
        fmt = metric(headline[phase.name]) if phase.name in headline else None
        for r, x, y in zip(phase.rounds, phase.a, phase.b, strict=True):
            first = ab.first[r] if r < len(ab.first) else None
            order = (
                "-"
                if first is None
                else (f"{names[first]} then {names['b' if first == 'a' else 'a']}")
            )
            shown = (fmt.format(x), fmt.format(y)) if fmt else (f"{x:.4g}", f"{y:.4g}")
            rows.append((phase.name, str(r + 1), order, *shown, f"{y / x:.3f}" if x else "-"))
    return TableModel(
        f"Interleaved rounds (A/B {ab.id})",
        ("Test", "Round", "Order", f"{a} median", f"{b} median", f"{b}/{a}"),
        tuple(rows),
        ("l", "c", "l", "c", "c", "c"),
        ("median per second of each round; each side's phases are a fresh fio run per round",),
    )


def ab_lines(cmp: Comparison) -> list[str]:
    """One verdict per measured phase of an A/B; for runs that were not
    interleaved, the one line that says what that leaves open."""
    if cmp.ab is None:
        return [DRIFT_NOTE]
    labels = (cmp.labels[0], cmp.labels[1])
    return [verdict_line(p.name, p.test, labels) for p in cmp.ab.phases]


def ab_dict(cmp: Comparison) -> dict[str, Any] | None:
    """The A/B part of ``--format json``: rounds, order and each phase's test."""
    ab = cmp.ab
    if ab is None:
        return None
    phases = []
    for p in ab.phases:
        t = p.test
        phases.append(
            {
                "phase": p.name,
                "rounds": [r + 1 for r in p.rounds],
                "a": list(p.a),
                "b": list(p.b),
                "verdict": t.verdict if t else Change.UNTESTABLE,
                "ratio": t.ratio if t else None,
                "ci_low": t.ci_low if t else None,
                "ci_high": t.ci_high if t else None,
                "p_value": t.p_value if t else None,
                "method": "paired t on log ratios of round medians",
                "sentence": verdict_line(p.name, t, (cmp.labels[0], cmp.labels[1])),
            }
        )
    return {"id": ab.id, "sides": list(ab.sides), "first": list(ab.first), "phases": phases}
