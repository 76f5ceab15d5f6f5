"""How the command line names runs: a full id, a unique prefix of one,
``last`` (the newest), ``last~N`` (N runs before it), or a run's label
(``--label``) when one run has it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from iorig.errors import UserError

if TYPE_CHECKING:
    from iorig.store import Store

_LAST = re.compile(r"^last(?:~([0-9]{1,9}))?$")
_ID = re.compile(r"^[0-9a-f]+$")


def resolve_run_id(store: Store, ref: str) -> str:
    text = ref.strip()
    if match := _LAST.match(text):
        back = int(match[1] or 0)
        found = store.run_ids(limit=1, offset=back)
        if not found:
            raise UserError(
                f"no run matches {ref!r}: the database {store.path} has "
                f"{'no' if back == 0 else 'too few'} runs"
            )
        return found[0]
    # a label before anything else: "last-week" or "cafe" may be labels too
    labelled = store.run_ids_labelled(text)
    if len(labelled) == 1:
        return labelled[0]
    if len(labelled) > 1:
        raise UserError(
            f"{len(labelled)} runs are labelled {ref!r} ({', '.join(labelled[:5])})",
            hint="name the run by its id",
        )
    if text.startswith("last"):
        raise UserError(
            f"{ref!r} is not a run reference: after last~ comes a count of runs back",
            hint="use last, last~1 (the run before the last), last~2 …, a run id or a label",
        )
    if not _ID.match(text.lower()):
        raise UserError(
            f"{ref!r} is neither a run id nor a run's label",
            hint="use an id or a label from `iorig runs`, or last",
        )
    found = store.run_ids(prefix=text.lower(), limit=6)
    if not found:
        raise UserError(f"no run with id {ref!r} in {store.path}", hint="see `iorig runs`")
    if len(found) > 1:
        listed = ", ".join(found[:5])
        raise UserError(
            f"{ref!r} matches {len(found) if len(found) < 6 else 'several'} runs ({listed})",
            hint="type more characters of the id",
        )
    return found[0]


def resolve_runs(store: Store, refs: list[str], baseline: str | None = None) -> list[str]:
    """The run ids of ``refs`` in order; with ``baseline`` (``--as-percent-of``)
    that run first. Runs are matched by id, not by how they were named, so
    ``compare last~1 last --as-percent-of host`` works when host is last~1."""
    ids = [resolve_run_id(store, r) for r in refs]
    if len(set(ids)) != len(ids):
        twice = [r for r, i in zip(refs, ids, strict=True) if ids.count(i) > 1]
        raise UserError(
            f"the same run is given twice ({', '.join(twice)})", hint="compare different runs"
        )
    if baseline is None:
        return ids
    first = resolve_run_id(store, baseline)
    return [first, *(i for i in ids if i != first)]
