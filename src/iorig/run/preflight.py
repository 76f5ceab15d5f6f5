"""The pre-flight: every job file of a plan, rendered by the function the run
renders it with, read by ``fio --parse-only`` before the run row exists.

A value iorig's renderer refuses (an option out of fio's range) or fio's own
parser refuses would otherwise surface only when its phase starts, after the
run was stored and earlier phases ran. Here it is a UserError naming the
phase, the host and fio's complaint. fio is started through ``FioProcess``,
the one supervised way, so an interrupt cannot leave it running; it does no
I/O and opens no file. A job text already parsed (another phase with the
same options, only the comments naming it differ) is not parsed again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from iorig.errors import UserError
from iorig.fio.runner import FioProcess
from iorig.machine.leftovers import temporary_directory
from iorig.model import PhaseKind
from iorig.plan import Plan, PlannedPhase
from iorig.run.collect import tail

PREFLIGHT_RUN = "preflight"  # stands in for the run id, which only a comment shows
PARSE_TIMEOUT_S = 30.0

JobTexts = Callable[[Plan, str, PlannedPhase], Mapping[str, str]]


def preflight(fio: str, plan: Plan, host_jobs: JobTexts) -> None:
    """Render each phase's job text per host (``host_jobs``, what the backend
    runs) and have fio parse it. Raises UserError for the first refusal."""
    parsed: set[str] = set()
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
                workdir = Path(tmp) / f"{phase.seq:03d}-{number}"
                workdir.mkdir()
                job = workdir / "job.fio"
                job.write_text(text)
                done = FioProcess(
                    fio, job, workdir, status=False, extra_args=("--parse-only",)
                ).run(timeout_s=PARSE_TIMEOUT_S)
                if done.returncode != 0 or done.stopped_by is not None:
                    where = f" on {host}" if len(texts) > 1 else ""
                    raise UserError(
                        f"phase {phase.name!r}{where}: fio refuses its job file: "
                        f"{tail(done.stderr) or f'exit code {done.returncode}'}",
                        hint="nothing was run or stored; change the value fio names",
                    )


def _options(text: str) -> str:
    """A job text without its comment lines: what fio's parser judges."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith((";", "#")))
