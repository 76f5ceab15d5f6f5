"""Searches that decide their next phase from what they measured: the knee
(concurrency search, docs/methodology.md §7) and the load-point curve (vdbench
"curve", SPEC load points, docs/methodology.md §5 and §7).

Both run inside one RunSession, so every point is a stored phase with its
coordinates (``PhaseResult.point``), an interrupted search keeps what it
measured, and the analysis is recomputed from the stored phases by
``iorig.analyze.search`` — nothing here is needed to read the answer later.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from iorig.analyze.compare import pool_phases
from iorig.analyze.criteria import Verdict, evaluate
from iorig.analyze.knee import (
    KneeRule,
    Point,
    doubling_stop,
    next_doubling,
    refine_between,
    stops_on_throughput,
)
from iorig.analyze.knee import top_candidates as knee_top_candidates
from iorig.analyze.kneesteps import knee_steps, stop_is_uncertain
from iorig.analyze.search import latency_stat
from iorig.analyze.training import analyze_training
from iorig.errors import UserError
from iorig.model import ALL, Outcome, PhaseKind
from iorig.model.depth import ROUNDING_NOTE, honoured, kept_iodepth
from iorig.run.plan import Plan, PlannedPhase, build_plan
from iorig.run.session import RunSession
from iorig.scenario.loading import ScenarioSource, resolve


def template_phase(plan: Plan) -> PlannedPhase:
    """The one measured phase a search varies (single workload)."""
    measured = [p for p in plan.phases if p.kind is PhaseKind.MEASURE]
    if len(measured) != 1 or len(measured[0].workloads) != 1:
        raise UserError("a search varies one measured phase with one workload")
    return measured[0]


def _run_before(session: RunSession, template: PlannedPhase) -> bool:
    """Run the plan's phases before the varied one (prefill, warm-up) once;
    False when the run must stop."""
    for phase in (p for p in session.plan.phases if p.seq < template.seq):
        session.run_phase(phase)
        if session.stopped:
            return False
    return True


def _variant(
    template: PlannedPhase, seq: int, name: str, point: dict, **spec: int | None
) -> PlannedPhase:
    (w,) = template.workloads
    return replace(
        template,
        seq=seq,
        name=name,
        point=point,
        workloads=(replace(w, spec=w.spec.model_copy(update=spec)),),
        scenario_phase=template.scenario_name,
    )


# ------------------------------------------------------------------ knee


@dataclass(frozen=True)
class KneeSettings:
    scale: Literal["iodepth", "jobs"]
    rule: KneeRule  # max_concurrency counts jobs × iodepth
    confirm: int = 3  # measurements of each top candidate, the first included
    top: int = 3  # candidates re-measured
    refine: int = 1  # points tried between the last two of the doubling stage
    # more fio runs of a concurrency whose readings disagree beyond their
    # noise (analyze.readings): to tell a glitch from the device, boundedly
    settle: int = 2

    def as_dict(self) -> dict:
        return {
            "kind": "knee",
            "scale": self.scale,
            "min_gain": self.rule.min_gain,
            "slo_p99_ns": self.rule.slo_p99_ns,
            "max_concurrency": self.rule.max_concurrency,
            "confirm": self.confirm,
            "top": self.top,
            "refine": self.refine,
            "settle": self.settle,
        }


def knee_name(scale: str, value: int) -> str:
    return f"{scale}={value}"


def check_knee(plan: Plan, settings: KneeSettings) -> None:
    """Refuse, before any run, a search whose fixed depth the engine would
    not keep: every point would measure more I/O in flight than its label."""
    (w,) = template_phase(plan).workloads
    depth = w.spec.iodepth
    if settings.scale == "jobs" and not honoured(w.engine, plan.fio_version, depth):
        kept = kept_iodepth(w.engine, plan.fio_version, depth)
        raise UserError(
            f"iodepth={depth} on {w.engine} with {plan.fio_version}: fio keeps {kept} in flight "
            f"per job ({ROUNDING_NOTE}), so every point would measure more than its label",
            hint=f"give --iodepth {kept} or {kept // 2}, or --engine libaio",
        )


def run_knee(session: RunSession, settings: KneeSettings) -> None:  # noqa: C901, PLR0912, PLR0915
    """Double the scaled variable until throughput stops paying, refine,
    then re-measure the best candidates (each measurement a fresh fio).
    Only depths the engine keeps are run; a concurrency whose readings
    disagree beyond their noise is measured again, ``settle`` times at most."""
    plan = session.plan
    template = template_phase(plan)
    if not _run_before(session, template):
        return
    (w,) = template.workloads
    fixed = w.spec.jobs if settings.scale == "iodepth" else w.spec.iodepth
    phases: dict[int, PlannedPhase] = {}  # by concurrency
    runs: dict[int, int] = {}  # fio runs so far, by concurrency
    extra: dict[int, int] = {}  # of them, to settle disagreeing readings
    seq = max(p.seq for p in plan.phases) + 1

    def kept(value: int) -> bool:
        """Whether fio keeps this value of the scaled variable as asked."""
        return settings.scale == "jobs" or honoured(w.engine, plan.fio_version, value)

    def run_once(concurrency: int) -> None:
        nonlocal seq
        if concurrency not in phases:
            value = concurrency // fixed
            point = {
                "concurrency": concurrency,
                settings.scale: value,
                "jobs" if settings.scale == "iodepth" else "iodepth": fixed,
            }
            phases[concurrency] = _variant(
                template,
                seq,
                knee_name(settings.scale, value),
                point,
                **{settings.scale: value},
            )
            seq += 1
        runs[concurrency] = runs.get(concurrency, 0) + 1
        session.run_phase(phases[concurrency], runs[concurrency] - 1)

    def measure(concurrency: int) -> None:
        """One more fresh fio run at ``concurrency``; more while its readings
        disagree beyond their noise and another may settle them."""
        run_once(concurrency)
        while not session.stopped and extra.get(concurrency, 0) < settings.settle:
            step = knee_steps(session.results).get(concurrency)
            if step is None or step.settled.state != "disagree":
                return
            extra[concurrency] = extra.get(concurrency, 0) + 1
            run_once(concurrency)

    def points() -> list[Point]:
        return [s.point for s in knee_steps(session.results).values()]

    def doubled(nxt: int | None) -> int | None:
        """The next doubling as fio can run it: whole multiples of the fixed
        factor, depths the engine keeps (a capped last doubling may not be
        one); None where there is none or it was measured."""
        value = None if nxt is None else max(1, nxt // fixed)
        while value is not None and value > 1 and not kept(value):
            value -= 1
        concurrency = None if value is None else value * fixed
        return None if concurrency is None or concurrency in phases else concurrency

    rule = settings.rule
    concurrency: int | None = fixed
    rechecked: set[int] = set()
    while concurrency is not None:  # a doubling stage, then refine and confirm
        while concurrency is not None:
            measure(concurrency)
            if session.stopped:
                return
            steps = knee_steps(session.results)
            measured = [s.point for s in steps.values()]
            if stops_on_throughput(measured, rule) and concurrency not in rechecked:
                # a fall or a flat step may be one noisy point: both ends of the
                # step once more before the search believes it
                rechecked.add(concurrency)
                previous = max(p.concurrency for p in measured if p.concurrency < concurrency)
                for c in (previous, concurrency):
                    measure(c)
                    if session.stopped:
                        return
                steps = knee_steps(session.results)
                measured = [s.point for s in steps.values()]
            if doubling_stop(measured, rule) is None:
                nxt = next_doubling(measured, rule)
            elif stops_on_throughput(measured, rule) and stop_is_uncertain(steps, rule):
                # readings too far apart to tell a plateau from noise: one more
                # doubling (the maximum concurrency always ends the stage)
                nxt = min(2 * concurrency, rule.max_concurrency)
            else:
                break
            concurrency = doubled(nxt)
        measured = sorted(points(), key=lambda p: p.concurrency)
        if settings.refine and len(measured) >= 2:
            lo, hi = measured[-2].concurrency, measured[-1].concurrency
            done = set(phases)
            for c in refine_between(
                lo // fixed, hi // fixed, {x // fixed for x in done}, settings.refine
            ):
                if not kept(c):
                    continue  # io_uring before fio 3.39 would run the next power of two
                measure(c * fixed)
                if session.stopped:
                    return
        candidates = knee_top_candidates(points(), settings.top, rule)
        while candidates and min(runs[c] for c in candidates) < settings.confirm:
            for c in candidates:
                if runs[c] < settings.confirm:
                    measure(c)
                    if session.stopped:
                        return
        # confirmation's readings may show the last step still paying, where
        # the doubling's had not: double on rather than call the knee beyond
        # a point below the maximum (issue 49: "beyond 8", 16 never measured)
        final = points()
        concurrency = doubled(next_doubling(final, rule)) if final else None


# ------------------------------------------------------------------ curve


@dataclass(frozen=True)
class CurveSettings:
    fractions: tuple[float, ...]  # of the maximum, ascending
    tolerance: float = 0.05  # a point is valid when it achieved ≥ (1 − tolerance) × requested
    max_iops: float | None = None  # known maximum: skip the uncontrolled phase
    cap: tuple[str, float] | None = None  # ("p99", ns): stop once a point exceeds it

    def as_dict(self) -> dict:
        return {
            "kind": "curve",
            "fractions": list(self.fractions),
            "tolerance": self.tolerance,
            "max_iops": self.max_iops,
            "cap": list(self.cap) if self.cap else None,
        }


MAX_PHASE = "max"


def load_name(fraction: float) -> str:
    return f"load={fraction * 100:g}%"


def run_curve(session: RunSession, settings: CurveSettings) -> None:
    """Find the uncontrolled maximum, then run at each fraction of it with
    Poisson arrivals at a fixed rate, lowest load first; stop past the cap."""
    plan = session.plan
    template = template_phase(plan)
    if not _run_before(session, template):
        return
    (w,) = template.workloads
    seq = max(p.seq for p in plan.phases) + 1
    maximum = settings.max_iops
    if maximum is None:
        phase = replace(
            template,
            seq=seq,
            name=MAX_PHASE,
            point={"max": True},
            scenario_phase=template.scenario_name,
        )
        seq += 1
        result = session.run_phase(phase)
        if session.stopped:
            return
        totals = result.aggregate.totals.get(ALL) if result.aggregate else None
        if totals is None or totals.iops <= 0:
            session.fail("the uncontrolled run did no I/O: no maximum to take fractions of")
            return
        maximum = totals.iops
    jobs = w.spec.jobs
    for fraction in settings.fractions:
        per_job = max(1, math.floor(fraction * maximum / jobs))
        point = {"fraction": fraction, "requested_iops": per_job * jobs, "max_iops": maximum}
        phase = _variant(template, seq, load_name(fraction), point, rate_iops=per_job)
        seq += 1
        session.run_phase(phase)
        if session.stopped:
            return
        if settings.cap:
            stat, limit = settings.cap
            ran = pool_phases(session.results).get(phase.name)
            if ran is not None and latency_stat(ran, stat) > limit:
                return  # the curve went past the latency cap: higher loads only queue


# ------------------------------------------------------------------ threads


@dataclass(frozen=True)
class ThreadsSettings:
    """``--threads auto``: the fewest threads whose run passes every criterion."""

    max_threads: int = 64

    def as_dict(self) -> dict:
        return {"kind": "threads", "axes": ["threads"], "max_threads": self.max_threads}


def run_threads_auto(  # noqa: C901
    session: RunSession,
    stretch_for: Callable[[int, int], list[PlannedPhase]],
    settings: ThreadsSettings,
) -> int | None:
    """Double the threads until the verdict passes, then bisect down to the
    fewest that pass. Stops early when a latency limit fails while the rate
    target is not met: more threads only add queueing (seed 001, test 4).

    ``stretch_for(threads, first_seq)`` gives the measured phases for a
    thread count. The plan's phases before the measured stretch run first,
    those after it (a checksum) last. Returns the answer, or None.
    """
    plan = session.plan
    measured = [i for i, p in enumerate(plan.phases) if p.kind is PhaseKind.MEASURE]
    if not measured:
        raise UserError("--threads auto needs a scenario with a measured phase")
    before, after = plan.phases[: measured[0]], plan.phases[measured[-1] + 1 :]
    criteria = list(plan.resolved.scenario.criteria)
    if not criteria:
        raise UserError(
            "--threads auto searches for the fewest threads that pass the scenario's criteria, "
            "and this scenario has none",
            hint="give a thread count or a list (--threads 4,8,12)",
        )
    for phase in before:
        session.run_phase(phase)
        if session.stopped:
            return None
    seq = max(p.seq for p in plan.phases) + 1
    outcome: dict[int, list[Verdict]] = {}

    def attempt(threads: int) -> list[Verdict] | None:
        nonlocal seq
        phases = stretch_for(threads, seq)
        seq += len(phases)
        results = []
        for phase in phases:
            results.append(session.run_phase(phase))
            if session.stopped:
                return None
        outcome[threads] = evaluate(criteria, results)
        return outcome[threads]

    answer = None
    threads, failed_below = 1, 0
    while threads <= settings.max_threads:
        verdicts = attempt(threads)
        if verdicts is None:
            return None
        if verdicts and all(v.passed for v in verdicts):
            answer = threads
            break
        if any(not v.passed for v in verdicts if v.bound == "max"):
            break  # latency already over its limit: more threads cannot help
        failed_below = threads
        threads *= 2
    if answer is not None:
        lo, hi = failed_below, answer
        while hi - lo > 1:
            mid = (lo + hi) // 2
            verdicts = attempt(mid)
            if verdicts is None:
                return None
            if all(v.passed for v in verdicts):
                hi = mid
            else:
                lo = mid
        answer = hi
    for phase in after:
        session.run_phase(phase)
        if session.stopped:
            break
    return answer


def chosen_engines(plan: Plan) -> dict[tuple[str, bool], str]:
    """The engine the plan chose for each (target, direct) left to it: a
    replanned stretch uses the same, on the same prepared targets."""
    return {
        (w.spec.target, w.spec.direct): w.engine
        for p in plan.phases
        for w in p.workloads
        if w.spec.engine == "auto"
    }


def stretch_builder(
    plan: Plan, source: ScenarioSource, profile: str | None, overrides: dict[str, str]
) -> Callable[[int, int], list[PlannedPhase]]:
    """Measured phases for any thread count, on the plan's prepared targets."""
    engines = chosen_engines(plan)

    def build(threads: int, seq: int) -> list[PlannedPhase]:
        resolved = resolve(source, profile, overrides | {"threads": str(threads)})
        replanned = build_plan(resolved, plan.targets, engines, plan.fio, plan.fio_version)
        measured = [i for i, p in enumerate(replanned.phases) if p.kind is PhaseKind.MEASURE]
        stretch = replanned.phases[measured[0] : measured[-1] + 1]
        return [
            replace(
                p,
                seq=seq + i,
                name=f"{p.name}:threads={threads}",
                point={"threads": str(threads)},
                scenario_phase=p.scenario_name,
            )
            for i, p in enumerate(stretch)
        ]

    return build


# ------------------------------------------------------------------ accelerators


@dataclass(frozen=True)
class AcceleratorsSettings:
    """``--accelerators auto``: the most accelerators per host whose training
    keeps AU at or above the floor in every epoch (MLPerf Storage's headline,
    found by hand there)."""

    max_accelerators: int = 1024

    @classmethod
    def for_plan(cls, plan: Plan, usable_cpus: float) -> AcceleratorsSettings:
        """At most 32 reader jobs a CPU of this machine (the one fio server runs
        on: it has no other figure): past that fio's own process count, not the
        storage, sets the pace (256 jobs on 2 CPUs stuck fio's stat lock)."""
        model = next((p.training for p in plan.phases if p.training is not None), None)
        readers = model.reader_threads if model is not None else 1
        return cls(max(1, int(JOBS_PER_CPU * max(1.0, usable_cpus)) // readers))

    def as_dict(self) -> dict:
        return {
            "kind": "accelerators",
            "axes": ["accelerators"],
            "max_accelerators": self.max_accelerators,
        }


JOBS_PER_CPU = 32


def accelerators_name(phase: str, count: int) -> str:
    return f"{phase}:accelerators={count}"


def run_accelerators_auto(
    session: RunSession,
    stretch_for: Callable[[int, int], list[PlannedPhase]],
    settings: AcceleratorsSettings,
) -> int | None:
    """Double the accelerators per host while every epoch keeps AU at or
    above the floor, then bisect between the last count that did and the
    first that did not. Each count writes its data set and trains on it
    (``stretch_for(count, first_seq)``), the same count on every host.
    Returns the most that passed (0: not even one), or None when stopped."""
    seq = max(p.seq for p in session.plan.phases) + 1

    def passes(count: int) -> bool | None:
        nonlocal seq
        phases = stretch_for(count, seq)
        seq += len(phases)
        outcome = None
        for phase in phases:
            result = session.run_phase(phase)
            if session.stopped:
                return None
            if result.training is not None:
                outcome = analyze_training(result.training).outcome
        return outcome is Outcome.PASS

    passed, failed = 0, None
    count = 1
    while passed < settings.max_accelerators:
        verdict = passes(count)
        if verdict is None:
            return None
        if not verdict:
            failed = count
            break
        passed, count = count, min(count * 2, settings.max_accelerators)
    if failed is None:
        return passed
    while failed - passed > 1:
        middle = (passed + failed) // 2
        verdict = passes(middle)
        if verdict is None:
            return None
        passed, failed = (middle, failed) if verdict else (passed, middle)
    return passed


def accelerators_builder(
    plan: Plan, source: ScenarioSource, profile: str | None, overrides: dict[str, str]
) -> Callable[[int, int], list[PlannedPhase]]:
    """A training scenario's phases (its data set and its training) for any
    number of accelerators per host, on the plan's prepared targets."""
    engines = chosen_engines(plan)

    def build(count: int, seq: int) -> list[PlannedPhase]:
        resolved = resolve(source, profile, overrides | {"accelerators": str(count)})
        replanned = build_plan(resolved, plan.targets, engines, plan.fio, plan.fio_version)
        return [
            replace(
                p,
                seq=seq + i,
                name=accelerators_name(p.name, count),
                point={"accelerators": str(count)},
                scenario_phase=p.scenario_name,
            )
            for i, p in enumerate(replanned.phases)
        ]

    return build
