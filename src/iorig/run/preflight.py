"""The pre-flight: every job file of a plan, rendered by the function the run
renders it with, read by ``fio --parse-only`` before the run row exists.

A value iorig's renderer refuses (an option out of fio's range) or fio's own
parser refuses would otherwise surface only when its phase starts, after the
run was stored and earlier phases ran. Here it is a UserError naming the
phase, the host and fio's complaint. fio is started through ``FioProcess``,
the one supervised way, so an interrupt cannot leave it running; it does no
I/O and opens no file. A job text already parsed (another phase with the
same options, only the comments naming it differ) is not parsed again, and
one fio parses them all.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from iorig.errors import UserError
from iorig.fio.runner import FioProcess
from iorig.machine.leftovers import temporary_directory
from iorig.model import PhaseKind
from iorig.run.collect import tail
from iorig.run.plan import Plan, PlannedPhase

PREFLIGHT_RUN = "preflight"  # stands in for the run id, which only a comment shows
PARSE_TIMEOUT_S = 30.0

JobTexts = Callable[[Plan, str, PlannedPhase], Mapping[str, str]]


def preflight(fio: str, plan: Plan, host_jobs: JobTexts) -> None:
    """Render each phase's job text per host (``host_jobs``, what the backend
    runs) and have fio parse them. Raises UserError for the first refusal."""
    parsed: set[str] = set()
    jobs: list[tuple[str, Path]] = []  # (which phase and host, its job file)
    with temporary_directory("iorig-preflight-") as tmp:
        for phase in plan.phases:
            if phase.kind is PhaseKind.IDLE:
                continue
            try:
                texts = host_jobs(plan, PREFLIGHT_RUN, phase)
            except UserError as exc:
                raise UserError(
                    f"phase {phase.name!r}: {exc.message}",
                    hint=exc.hint or "change the scenario value behind that fio option",
                ) from None
            for number, (host, text) in enumerate(texts.items()):
                if (options := _options(text)) in parsed:
                    continue
                parsed.add(options)
                job = Path(tmp) / f"{phase.seq:03d}-{number}.fio"
                job.write_text(text)
                where = f" on {host}" if len(texts) > 1 else ""
                jobs.append((f"phase {phase.name!r}{where}", job))
        # one fio parses them all (each file's [global] is its own): every
        # fio start calibrates its clock, 0.15 s of CPU, once per phase was
        # most of a short run's start. Refused, each alone names the phase.
        together = _parse(fio, [job for _, job in jobs], Path(tmp)) if jobs else None
        if together is None:
            return
        for where, job in jobs:
            refusal = together if len(jobs) == 1 else _parse(fio, [job], Path(tmp))
            if refusal is not None:
                raise UserError(
                    f"{where}: fio refuses its job file: {refusal}",
                    hint="nothing was run or stored; change the value fio names",
                )
        raise UserError(  # together timed out, or fio judged the files together
            "fio refuses the run's job files together, though each alone parses",
            hint="nothing was run or stored; run the phases as separate scenarios",
        )


def _parse(fio: str, jobs: list[Path], tmp: Path) -> str | None:
    """fio's complaint about the job files ``jobs``, or None if it parses them."""
    workdir = Path(tempfile.mkdtemp(prefix="parse-", dir=tmp))
    done = FioProcess(
        fio,
        jobs[-1],
        workdir,
        status=False,
        extra_args=("--parse-only", *(str(job) for job in jobs[:-1])),
    ).run(timeout_s=PARSE_TIMEOUT_S)
    if done.returncode == 0 and done.stopped_by is None:
        return None
    return tail(done.stderr) or f"exit code {done.returncode}"


def _options(text: str) -> str:
    """A job text without its comment lines: what fio's parser judges."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith((";", "#")))
