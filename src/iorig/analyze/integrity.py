"""Whether the data read back as written: the verdict of a run's verify
phases, beside (and above) any performance criteria. Pure: from the stored
phases (the error a verify phase stored, naming the bad blocks; the bytes
each workload read) and the resolved scenario (each workload's verify
granularity).

A block that a verify phase found different from what was written is lost
data, and that is the run's verdict ("FAIL: data lost …") whatever its
figures say; with every verify phase complete and clean the verdict names
what was checked ("all 12,800 blocks (50.0 MiB) read back as last written").
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from iorig.analyze.criteria import Judgement, Verdict
from iorig.model import Outcome, PhaseKind, PhaseResult, PhaseStatus
from iorig.units import format_bytes

SHOWN = 10  # bad blocks named in a phase's error; the rest are counted
_FAILED = "data verification failed: "
_LOST = re.compile(
    re.escape(_FAILED) + r"(?P<n>\d+) block\(s\) did not read back as written: (?P<listed>.*)$",
    re.S,
)


def lost_message(total: int, listed: Sequence[str]) -> str:
    """A verify phase's error naming its bad blocks: ``listed`` (each by file
    and offset, with what fio expected and found there) of ``total``."""
    more = f"; … and {total - len(listed)} more" if total > len(listed) else ""
    return f"{_FAILED}{total} block(s) did not read back as written: {'; '.join(listed)}{more}"


def lost_blocks(error: str | None) -> tuple[int, str] | None:
    """How many blocks a verify phase's error (``lost_message``) names as
    bad, and its listing of them; None for any other error."""
    match = _LOST.match(error or "")
    return (int(match["n"]), match["listed"]) if match else None


@dataclass(frozen=True)
class DataCheck:
    """What the verify phases of a run found."""

    phases: tuple[str, ...]  # the verify phases that ran, in order
    blocks: int  # blocks read back and checked (verify granularity: verify_interval or bs)
    io_bytes: int
    bad: int  # blocks that did not read back as written
    listing: str  # the first of them by file and offset, what fio expected and found
    complete: bool  # every verify phase ran to its end (no other failure, no interrupt)
    # verify_state writers that wrote more blocks than their working set has:
    # (workload, times over). Their blocks then had several generations, and
    # the check cannot tell the last from an earlier one.
    rewritten: tuple[tuple[str, float], ...] = ()
    # some checks read several blocks at a time, and fio stops checking a
    # read at its first bad block: ``bad`` is then a lower bound
    coarse: bool = False

    @property
    def lost(self) -> bool:
        return self.bad > 0

    @property
    def verdict(self) -> Judgement | None:
        """ "FAIL: data lost …", "PASS: all N blocks … read back as last
        written", or None when the checks did not all complete (the phases'
        own failure then speaks)."""
        if self.lost:
            n = self.bad
            return Judgement.of(
                Outcome.FAIL,
                f": data lost: {self.at_least}{n:,} block{'s' * (n != 1)} did not read "
                "back as last written",
            )
        if self.complete:
            return Judgement.of(
                Outcome.PASS,
                f": all {self.blocks:,} blocks ({format_bytes(self.io_bytes)}) read back "
                f"as last written{self.caveat}",
            )
        return None

    @property
    def at_least(self) -> str:
        return "at least " if self.coarse else ""

    @property
    def caveat(self) -> str:
        """What a pass could not see: writers that went over their blocks again."""
        if not self.rewritten:
            return ""
        over = ", ".join(f"{name} {times:.1f} times" for name, times in self.rewritten)
        return (
            f" (but the writes went over their blocks again: {over}; an overwrite lost with "
            "an earlier write of the block left in place cannot be seen: raise size or "
            "lower write_iops)"
        )


def _granularity(resolved: dict[str, Any]) -> dict[tuple[str, str], int]:
    """(phase, workload label) -> the size of the blocks its checksums cover."""
    out = {}
    for phase in resolved.get("phases", []):
        for w in phase.get("workloads", []):
            label = w.get("name") or w.get("rw")
            size = w.get("verify_interval") or w.get("bs")
            if label and isinstance(size, int) and size > 0:
                out[(phase.get("name", ""), label)] = size
    return out


def _coarse(resolved: dict[str, Any]) -> bool:
    """A verify phase reads more than one checksummed block at a time."""
    return any(
        isinstance(w.get("bs"), int)
        and isinstance(w.get("verify_interval"), int)
        and w["bs"] > w["verify_interval"]
        for phase in resolved.get("phases", [])
        if phase.get("kind") == PhaseKind.VERIFY.value
        for w in phase.get("workloads", [])
    )


def _blocks(phase: PhaseResult, sizes: dict[tuple[str, str], int]) -> tuple[int, int]:
    """Blocks and bytes a verify phase read back, over its workloads."""
    blocks = total = 0
    for scope in phase.workload_scopes():
        read = scope.totals.get("read")
        if read is None:
            continue
        size = sizes.get((phase.name, scope.scope.workload or ""))
        blocks += read.io_bytes // size if size else read.ios
        total += read.io_bytes
    return blocks, total


def _rewritten(phases: Sequence[PhaseResult], resolved: dict[str, Any]) -> list[tuple[str, float]]:
    """verify_state writers that wrote more blocks than they have, with how
    many times over. Repeats of the phase add up: each replays the same
    sequence over the same blocks (fio's fixed seed), so a block one repeat
    wrote is written again by the next."""
    blocks: dict[tuple[str, str], int] = {}
    for phase in resolved.get("phases", []):
        if phase.get("kind") == PhaseKind.VERIFY.value:
            continue
        for w in phase.get("workloads", []):
            size, bs = w.get("size"), w.get("bs")
            if w.get("verify_state") and isinstance(size, int) and isinstance(bs, int) and bs > 0:
                label = w.get("name") or w.get("rw")
                blocks[(phase.get("name", ""), label)] = size // bs * int(w.get("jobs", 1))
    times: dict[str, float] = {}
    for phase in phases:
        for scope in phase.workload_scopes():
            key = (phase.name, scope.scope.workload or "")
            written = scope.totals.get("write")
            if key in blocks and written is not None and blocks[key] > 0:
                times[key[1]] = times.get(key[1], 0.0) + written.ios / blocks[key]
    return sorted((label, n) for label, n in times.items() if n > 1)


def data_check(phases: Sequence[PhaseResult], resolved: dict[str, Any]) -> DataCheck | None:
    """The verify phases' findings; None when no verify phase ran."""
    checks = [p for p in phases if p.kind is PhaseKind.VERIFY]
    if not checks:
        return None
    sizes = _granularity(resolved)
    blocks = total = bad = 0
    listings = []
    for phase in checks:
        b, t = _blocks(phase, sizes)
        blocks, total = blocks + b, total + t
        if (found := lost_blocks(phase.error)) is not None:
            bad += found[0]
            listings.append(found[1])
    complete = all(p.status is PhaseStatus.OK for p in checks)
    rewritten = tuple(_rewritten(phases, resolved))
    names = tuple(p.name for p in checks)
    return DataCheck(
        names, blocks, total, bad, "; ".join(listings), complete, rewritten, _coarse(resolved)
    )


def data_verdict(check: DataCheck) -> Verdict | None:
    """The data check as one row of the verdicts (its figures are in the
    requirement's name: a block count is neither a rate nor a latency)."""
    if check.lost:
        first = check.listing.split("; ")[0]
        name = (
            f"Every block reads back as last written: {check.at_least}{check.bad:,} did not "
            f"(first: {first})"
        )
    elif check.complete:
        name = (
            f"Every block reads back as last written: {check.blocks:,} blocks "
            f"({format_bytes(check.io_bytes)}) did{check.caveat}"
        )
    else:
        return None
    return Verdict(
        name=name,
        phase=", ".join(dict.fromkeys(check.phases)),
        metric="data",
        bound="max",
        limit=math.nan,
        value=math.nan,
        passed=not check.lost,
        margin=math.nan,
    )
