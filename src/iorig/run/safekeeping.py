"""A run's results kept safe when the database will not take them.

Every write waits out another writer's lock (``Store.write``). When the
database stays unwritable — locked past the wait, read-only, full — the run
so far (its record and every finished phase) goes to a recovery file next to
the database, an import bundle, and the run is stopped: no finished phase is
lost, and ``iorig import RECOVERY`` puts it in the database.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from pathlib import Path

from iorig.model import Finding, PhaseResult, RunRecord, RunStatus, StoredRun
from iorig.store import Store, Unwritable, write_recovery

QUICK_WAIT_S = 1.0  # a database that failed once is given one quick try at the end


class Keeper:
    """Stores one run's record and phases in ``store``, or in a recovery file."""

    def __init__(self, store: Store, record: RunRecord) -> None:
        self.store = store
        self.record = record
        self.recovery: Path | None = None
        self.problem: Unwritable | None = None

    def create(self) -> str:
        return self.store.create_run(self.record)

    def save_phase(self, result: PhaseResult, results: list[PhaseResult]) -> str | None:
        """Store ``result``; when the database will not take it, keep the run
        (``results``, ``result`` included) in the recovery file and return why
        the run must stop."""
        if self.recovery is None:
            try:
                self.store.save_phase(self.record.id, result)
                return None
            except Unwritable as exc:
                self.problem = exc
        self._keep(self.record, results)
        return (
            f"{self.problem.message}; phase {result.name!r} and the run so far are in "
            f"{self.recovery} (see below); the run was stopped"
        )

    def finish(
        self,
        status: RunStatus,
        error: str | None,
        findings: list[Finding],
        results: list[PhaseResult],
    ) -> None:
        """Store the run's final status and audit findings (or, once the run
        went to a recovery file, update that file and mark the run in the
        database as having its results there, if it can be written now)."""
        if self.recovery is None:
            try:
                self.store.add_warnings(self.record.id, findings)
                self.store.finish_run(self.record.id, status, error)
                return
            except Unwritable as exc:
                self.problem = exc
        final = replace(
            self.record,
            status=status,
            error=error,
            ended_at=time.time(),
            warnings=self.record.warnings + tuple(findings),
        )
        self._keep(final, results)
        # still locked: the run stays `running` there until the import completes it
        with contextlib.suppress(Unwritable):
            self.store.finish_run(
                self.record.id, status, error, recovery_file=self.recovery, wait_s=QUICK_WAIT_S
            )

    def _keep(self, record: RunRecord, results: list[PhaseResult]) -> None:
        self.recovery = write_recovery(self.store.path, StoredRun(record, tuple(results)))
