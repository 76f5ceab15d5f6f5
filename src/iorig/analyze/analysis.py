"""One analysis of a stored run, and one comparison of several, that every
renderer consumes: nothing under ``report/`` or ``cli/`` recomputes a
verdict, a knee or a curve.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from iorig.analyze.ab import AbComparison, ab_comparison, linked, with_paired_verdicts
from iorig.analyze.checkpoint import CheckpointAnalysis, analyze_checkpoints
from iorig.analyze.compare import (
    PhaseComparison,
    RunPhase,
    compare_phases,
    definition_differences,
    pool_phases,
    unique_labels,
)
from iorig.analyze.criteria import (
    Judgement,
    Verdict,
    criteria_of,
    evaluate,
    figure,
    latency_columns,
    overall,
)
from iorig.analyze.impact import EventImpact, run_impacts
from iorig.analyze.integrity import DataCheck, data_check, data_verdict
from iorig.analyze.search import (
    GENERATOR_FINDINGS,
    AcceleratorsResult,
    SearchResult,
    search_result,
)
from iorig.analyze.summary import PhaseSummary, summarize_phase
from iorig.analyze.sweepcmp import SweepComparison, sweep_comparisons
from iorig.analyze.training import TrainingAnalysis, analyze_training
from iorig.analyze.trainingcmp import (
    CheckpointChange,
    TrainingComparison,
    compare_checkpoints,
    compare_training,
)
from iorig.analyze.verdictcmp import VerdictComparison, verdict_comparison
from iorig.model import (
    Finding,
    Outcome,
    PhaseKind,
    PhaseStatus,
    RunRecord,
    RunStatus,
    StoredRun,
)


@dataclass(frozen=True)
class RunAnalysis:
    stored: StoredRun
    summaries: tuple[PhaseSummary, ...]  # every phase, in run order
    pooled: Mapping[str, RunPhase]  # measured phases by name, repeats pooled
    verdicts: tuple[Verdict, ...]  # the scenario's criteria on each measured phase
    judgement: Judgement | None  # overall: PASS, FAIL, PASS at …; None without criteria
    search: SearchResult | None  # what a sweep, knee or curve found
    job_texts: Mapping[str, str] = field(default_factory=dict)  # phase name -> job file
    # multi-host runs: measured phase (with its repeat) -> host -> the criteria's
    # mean latencies on that host ("db read lat" …), as Jetstress reports per instance
    host_latencies: Mapping[str, Mapping[str, Mapping[str, float]]] = field(default_factory=dict)
    data: DataCheck | None = None  # what the verify phases found, when there were any
    events: tuple[EventImpact, ...] = ()  # what was done during the run, with its impact
    # each training phase (MLPerf Storage-like), repeats included, in run order
    training: tuple[TrainingAnalysis, ...] = ()
    checkpoint: CheckpointAnalysis | None = None  # a checkpoint run's write and read figures

    @property
    def data_lost(self) -> bool:
        """A verify phase found blocks that did not read back as written."""
        return self.data is not None and self.data.lost

    @property
    def run(self) -> RunRecord:
        return self.stored.run

    @property
    def measured(self) -> list[PhaseSummary]:
        return [s for s in self.summaries if s.kind is PhaseKind.MEASURE]

    @property
    def verdict(self) -> str | None:
        """The overall verdict as printed: "PASS", "FAIL on h2", "PASS at …"."""
        return None if self.judgement is None else self.judgement.text

    @property
    def passed(self) -> bool:
        """Some measured phase met every criterion and nothing failed (True
        without criteria)."""
        return self.judgement is None or self.judgement.outcome is Outcome.PASS


def analyse(stored: StoredRun, job_texts: Mapping[str, str] | None = None) -> RunAnalysis:
    pooled = pool_phases(stored.phases, job_texts)
    verdicts = tuple(evaluate(criteria_of(stored.run.resolved), stored.phases))
    data = data_check(stored.phases, stored.run.resolved)
    row = data_verdict(data) if data is not None else None
    training = tuple(analyze_training(p.training, p.name) for p in stored.phases if p.training)
    search = search_result(stored, pooled, verdicts, training)
    return RunAnalysis(
        stored=stored,
        summaries=tuple(summarize_phase(p) for p in stored.phases),
        pooled=pooled,
        verdicts=verdicts + ((row,) if row is not None else ()),
        judgement=_verdict(stored, verdicts, data, training, search),
        search=search,
        job_texts=dict(job_texts or {}),
        host_latencies=_host_latencies(stored),
        data=data,
        events=tuple(run_impacts(stored.phases, stored.run.resolved)),
        training=training,
        checkpoint=analyze_checkpoints(
            [(p.name, p.checkpoint) for p in stored.phases if p.checkpoint is not None]
        ),
    )


def _host_latencies(stored: StoredRun) -> dict[str, dict[str, dict[str, float]]]:
    columns = latency_columns(criteria_of(stored.run.resolved))
    out: dict[str, dict[str, dict[str, float]]] = {}
    if len(stored.run.hosts) < 2 or not columns:
        return out
    for phase in stored.phases:
        if phase.kind is PhaseKind.MEASURE and phase.host_scopes:
            label = phase.name + (f" #{phase.repeat + 1}" if phase.repeat else "")
            out[label] = {
                host.scope.host or "": {
                    name: figure(c, [phase], host.scope.host) for name, c in columns
                }
                for host in phase.host_scopes
            }
    return out


def _generator_limited(t: TrainingAnalysis, warnings: Sequence[Finding]) -> str:
    """What a training phase's verdict adds when the audit found the load
    generator, not the storage, setting its pace."""
    if any(f.code in GENERATOR_FINDINGS and f.phase == t.phase for f in warnings):
        return "; the load generator was the limit, not the storage (see the audit)"
    return ""


def _training_verdict(
    training: tuple[TrainingAnalysis, ...],
    search: SearchResult | None = None,
    warnings: Sequence[Finding] = (),
) -> Judgement | None:
    """A training run's verdict: its first training phase that did not pass
    (FAIL before INCOMPLETE), else PASS; an accelerators search's is its
    answer (counts that fell short are what it looks for)."""
    if isinstance(search, AcceleratorsResult):
        if not search.most:
            return Judgement.of(Outcome.FAIL, ": not even one accelerator per host kept the floor")
        bound = (
            " (at least: the load generator fell short first)"
            if search.generator_limited
            else " (at least: the search's limit)"
            if search.at_least
            else ""
        )
        return Judgement.of(Outcome.PASS, f" at accelerators={search.most} per host{bound}")
    if not training:
        return None
    for outcome in (Outcome.FAIL, Outcome.INCOMPLETE):
        if t := next((t for t in training if t.outcome is outcome), None):
            return Judgement.of(outcome, f": {t.why}{_generator_limited(t, warnings)}")
    return Judgement.of(Outcome.PASS, f": {training[0].why}")


def _verdict(
    stored: StoredRun,
    verdicts: tuple[Verdict, ...],
    data: DataCheck | None = None,
    training: tuple[TrainingAnalysis, ...] = (),
    search: SearchResult | None = None,
) -> Judgement | None:
    """Lost data first: blocks a verify phase found changed fail the run
    ("FAIL: data lost …") whatever else it shows. Then the criteria's
    verdict, unless the run itself did not complete: a failed phase (a host
    that dropped out, a check that could not run) fails the run whatever its
    figures say, and an interrupted run proves nothing either way. Without
    criteria, a run whose verify phases all read back clean passes on that
    ("PASS: all N blocks … read back as last written")."""
    if data is not None and data.lost:
        return data.verdict
    verdict = overall(verdicts) or _training_verdict(training, search, stored.run.warnings)
    if verdict is None and data is not None:
        verdict = data.verdict or Judgement.of(Outcome.FAIL, ": the data could not be checked")
    if verdict is None:
        return None
    failed = [p.name for p in stored.phases if p.status is PhaseStatus.FAILED]
    if failed:
        return Judgement.of(Outcome.FAIL, f": phase {', '.join(dict.fromkeys(failed))} failed")
    if stored.run.status is RunStatus.FAILED:
        return Judgement.of(Outcome.FAIL, ": the run failed")
    if stored.run.status is RunStatus.ABORTED:
        return Judgement.of(Outcome.INCOMPLETE, ": the run was interrupted")
    return verdict


@dataclass(frozen=True)
class Comparison:
    runs: tuple[RunAnalysis, ...]  # the first is the baseline
    labels: tuple[str, ...]  # unique, in the runs' order
    phases: tuple[PhaseComparison, ...]
    only_in: tuple[tuple[str, str], ...]  # (phase, label) present in one run only
    definition_differences: tuple[str, ...]
    threshold: float
    confidence: float
    sweeps: tuple[SweepComparison, ...]  # per-point ratios when the runs are sweeps
    # the two runs of one interleaved A/B (iorig ab): the rounds and their paired
    # verdicts, which replace the unpaired ones; None for runs that were not interleaved
    ab: AbComparison | None = None
    # application workloads: each requirement's figure run by run and every
    # run's verdict; None when no run has criteria or a data check
    verdicts: VerdictComparison | None = None
    # training runs: which storage keeps more accelerators, and is it real
    training: TrainingComparison | None = None
    checkpoints: tuple[CheckpointChange, ...] = ()  # checkpoint runs: each against the baseline


def compare(
    runs: Sequence[RunAnalysis], *, threshold: float = 0.02, confidence: float = 0.95
) -> Comparison:
    """Compare analysed runs (the first is the baseline)."""
    if len(runs) < 2:
        raise ValueError("a comparison needs at least two runs")
    labels = unique_labels([r.run.name for r in runs])
    per_run = [r.pooled for r in runs]
    phases, only_in = compare_phases(per_run, labels, threshold, confidence)
    stored = [r.stored for r in runs]
    ab = None
    if len(stored) == 2 and linked(stored[0], stored[1]):
        ab = ab_comparison(stored[0], stored[1], confidence=confidence, threshold=threshold)
        phases = with_paired_verdicts(phases, ab)
    return Comparison(
        runs=tuple(runs),
        labels=labels,
        phases=tuple(phases),
        only_in=tuple(only_in),
        definition_differences=tuple(definition_differences(stored, per_run, labels)),
        threshold=threshold,
        confidence=confidence,
        sweeps=tuple(sweep_comparisons(labels, phases, [r.search for r in runs])),
        ab=ab,
        verdicts=verdict_comparison(runs, threshold, confidence),
        training=compare_training(
            labels, [r.search for r in runs], [r.training for r in runs], threshold
        ),
        checkpoints=compare_checkpoints(labels, [r.checkpoint for r in runs], threshold),
    )
