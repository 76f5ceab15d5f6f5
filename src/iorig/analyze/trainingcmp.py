"""Training and checkpoint runs compared (docs/methodology.md §11): which
storage keeps more accelerators at the floor, and whether the difference is
real; checkpoint throughput with its significance."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from iorig.analyze.checkpoint import CheckpointAnalysis
from iorig.analyze.search import AcceleratorsResult, SearchResult
from iorig.analyze.stats import mean_interval, welch_ratio
from iorig.analyze.training import TrainingAnalysis
from iorig.model import Change

CONFIDENCE = 0.95


@dataclass(frozen=True)
class TrainingFigures:
    """What one run says of the accelerators its storage keeps busy."""

    label: str
    training: TrainingAnalysis  # the search's answer, or the run's training phase
    accelerators: int  # per host: the most that passed (a search) or the count run
    searched: bool
    # a search's first count that fell short (None: none did, or no search)
    short: TrainingAnalysis | None = None


@dataclass(frozen=True)
class TrainingChange:
    """One run against the baseline."""

    label: str
    change: Change  # more accelerators (or AU at the same count) is better
    sentence: str


@dataclass(frozen=True)
class TrainingComparison:
    figures: tuple[TrainingFigures, ...]  # the baseline first
    changes: tuple[TrainingChange, ...]  # every run after the baseline


def _epoch_aus(t: TrainingAnalysis) -> list[float]:
    return [f.au for f in t.epochs if f.au is not None]


def _interval_text(t: TrainingAnalysis) -> tuple[tuple[float, float] | None, str]:
    aus = _epoch_aus(t)
    interval = mean_interval(aus, CONFIDENCE)
    mean = sum(aus) / len(aus) if aus else float("nan")
    if interval is None:
        return None, f"{mean:.1%} (one epoch: no interval)"
    return interval, f"{mean:.1%} ({interval[0]:.1%}–{interval[1]:.1%})"


def _figures(label: str, search: SearchResult | None, training: Sequence[TrainingAnalysis]):
    if isinstance(search, AcceleratorsResult) and search.points:
        best = search.best
        answer = best.training if best is not None else search.points[0].training
        short = next((p.training for p in search.points if not p.passed), None)
        return TrainingFigures(label, answer, search.most, True, short)
    if training:
        return TrainingFigures(label, training[-1], training[-1].model.accelerators, False)
    return None


def _searched(a: TrainingFigures, b: TrainingFigures) -> TrainingChange:
    """Two searches: the one that kept more accelerators, real when the other
    fell short at a count the first kept beyond the epochs' noise."""
    if a.accelerators == b.accelerators:
        return TrainingChange(
            b.label, Change.SAME, f"both keep {a.accelerators} accelerators per host"
        )
    more, fewer = (b, a) if b.accelerators > a.accelerators else (a, b)
    change = Change.BETTER if more is b else Change.WORSE
    floor = fewer.training.model.au_floor
    head = (
        f"{more.label} keeps {more.accelerators} accelerators per host, {fewer.label} "
        f"{fewer.accelerators}"
    )
    if fewer.short is None:
        return TrainingChange(b.label, Change.UNDECIDED, f"{head}; {fewer.label} tried no more")
    interval, text = _interval_text(fewer.short)
    count = fewer.short.model.accelerators
    if interval is not None and interval[1] < floor:
        return TrainingChange(
            b.label,
            change,
            f"{head}: real — at {count}, {fewer.label}'s AU {text} is below the floor "
            f"{floor:.0%} beyond its epochs' noise",
        )
    return TrainingChange(
        b.label,
        Change.UNDECIDED,
        f"{head}, within the noise: at {count}, {fewer.label}'s AU {text} does not clear "
        f"the floor {floor:.0%} either way; more epochs would tell",
    )


def _same_count(a: TrainingFigures, b: TrainingFigures, threshold: float) -> TrainingChange:
    """Two runs of the same accelerators: AU by epoch, Welch's test."""
    test = welch_ratio(_epoch_aus(a.training), _epoch_aus(b.training), CONFIDENCE)
    if test is None:
        return TrainingChange(b.label, Change.UNTESTABLE, "too few epochs to test (two each)")
    au_a, au_b = a.training.au_mean or 0.0, b.training.au_mean or 0.0
    count = f"{a.accelerators} accelerator{'s' if a.accelerators != 1 else ''}"
    text = f"AU {au_b:.1%} against {au_a:.1%} at {count} per host"
    if test.excludes_no_change() and abs(test.change) >= threshold:
        change = Change.BETTER if test.ratio > 1 else Change.WORSE
        return TrainingChange(b.label, change, f"{text}: {change}, beyond the epochs' noise")
    return TrainingChange(b.label, Change.SAME, f"{text}: no difference beyond the noise")


def compare_training(
    labels: Sequence[str],
    searches: Sequence[SearchResult | None],
    trainings: Sequence[Sequence[TrainingAnalysis]],
    threshold: float,
) -> TrainingComparison | None:
    """None unless every run trained."""
    figures = [
        _figures(label, s, t) for label, s, t in zip(labels, searches, trainings, strict=True)
    ]
    if len(figures) < 2 or any(f is None for f in figures):
        return None
    found: list[TrainingFigures] = [f for f in figures if f is not None]
    base = found[0]
    changes = []
    for other in found[1:]:
        if base.searched and other.searched:
            changes.append(_searched(base, other))
        elif base.accelerators == other.accelerators and not (base.searched or other.searched):
            changes.append(_same_count(base, other, threshold))
        else:
            changes.append(
                TrainingChange(
                    other.label,
                    Change.UNTESTABLE,
                    f"{base.label} and {other.label} trained different numbers of accelerators "
                    "without both searching: run both with --accelerators auto",
                )
            )
    return TrainingComparison(tuple(found), tuple(changes))


@dataclass(frozen=True)
class CheckpointChange:
    label: str
    op: str
    ratio: float | None  # mean of the other ÷ the baseline's
    change: Change
    interval: tuple[float, float] | None  # of the ratio


def compare_checkpoints(
    labels: Sequence[str], checkpoints: Sequence[CheckpointAnalysis | None], threshold: float
) -> tuple[CheckpointChange, ...]:
    """Each run's write and read throughput against the baseline's, over
    their checkpoints (Welch's test on the logarithms)."""
    if len(checkpoints) < 2 or any(c is None for c in checkpoints):
        return ()
    base = checkpoints[0]
    assert base is not None
    out = []
    for label, other in zip(labels[1:], checkpoints[1:], strict=True):
        assert other is not None
        for op in ("write", "read"):
            a, b = getattr(base, op), getattr(other, op)
            if a is None or b is None:
                continue
            test = welch_ratio(a.levels, b.levels, CONFIDENCE)
            if test is None:
                ratio = b.mean_bytes_per_s / a.mean_bytes_per_s if a.mean_bytes_per_s else None
                out.append(CheckpointChange(label, op, ratio, Change.UNTESTABLE, None))
                continue
            significant = test.excludes_no_change() and abs(test.change) >= threshold
            change = (
                (Change.BETTER if test.ratio > 1 else Change.WORSE) if significant else Change.SAME
            )
            out.append(CheckpointChange(label, op, test.ratio, change, (test.ci_low, test.ci_high)))
    return tuple(out)
