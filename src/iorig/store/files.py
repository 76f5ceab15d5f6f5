"""iorig's own files: the results database and what lives beside it (its
write-ahead log and shared memory, the live file of a run in progress and
its own, recovery files). Nothing iorig writes as output or as a target may
land on one of them (docs/guide/running.md#safety): a report over the database
would lose every run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from iorig.errors import UserError
from iorig.store.connection import SQLITE_SIDECARS
from iorig.store.live import SUFFIX as LIVE_SUFFIX

RECOVERY_INFIX = ".recovery-"


def own_files(db: Path) -> list[Path]:
    """The database and the files SQLite and iorig keep beside it."""
    live = Path(f"{db}{LIVE_SUFFIX}")
    return [
        db,
        *(Path(f"{db}{s}") for s in SQLITE_SIDECARS),
        live,
        *(Path(f"{live}{s}") for s in SQLITE_SIDECARS),
    ]


def _same(a: Path, b: Path) -> bool:
    """One file by name (links followed) or by identity (a hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # either missing: not one file
        return False


def _is_recovery(path: Path, db: Path) -> bool:
    """A recovery file of ``db`` (repository.recovery_places): beside it or in TMPDIR."""
    real = Path(os.path.realpath(path))
    if not real.name.startswith(db.name + RECOVERY_INFIX):
        return False
    places = {os.path.realpath(db.parent), os.path.realpath(tempfile.gettempdir())}
    return os.path.realpath(real.parent) in places


def which_own(path: Path, db: Path) -> str | None:
    """What of iorig's ``path`` is ("the results database", "its write-ahead
    log"…), or None when it is none of them."""
    names = (
        "the results database",
        "the results database's write-ahead log",
        "the results database's shared memory",
        "the results database's rollback journal",
        "a run's live file",
        "a run's live file's write-ahead log",
        "a run's live file's shared memory",
        "a run's live file's rollback journal",
    )
    # SQLite keeps its files beside the database a link resolves to
    for base in (db, Path(os.path.realpath(db))):
        for name, own in zip(names, own_files(base), strict=True):
            if _same(path, own):
                return name
    if _is_recovery(path, db):
        return "a recovery file of the results database"
    return None


def refuse_own(path: Path, db: Path | None, what: str) -> None:
    """Raise UserError when ``path`` (an output, a target) is one of iorig's
    own files for ``db``."""
    if db is None:
        return
    own = which_own(path, db)
    if own is not None:
        raise UserError(
            f"{what} {path} is {own} ({db}): writing it would destroy stored runs",
            hint="choose another path",
        )


@contextlib.contextmanager
def private_dir(beside: Path) -> Iterator[Path]:
    """A new directory beside ``beside`` that only this user may enter, of
    an unpredictable name (mkdtemp), removed with all it holds at the end:
    a file built in it cannot be swapped for a link planted in advance."""
    parent = beside.parent
    try:
        made = Path(tempfile.mkdtemp(prefix=f".{beside.name}.", suffix=".partial", dir=parent))
    except OSError as exc:
        raise UserError(f"cannot write {beside}: {exc.strerror or exc}") from None
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text(path: Path, text: str, db: Path | None) -> None:
    """``text`` as the whole of ``path``, or nothing: written to a new file
    (O_EXCL, no link followed, an unpredictable name) and renamed over
    ``path``; never over one of iorig's own files for ``db``."""
    refuse_own(path, db, "output")
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            os.fchmod(out.fileno(), 0o666 & ~_umask())  # as an ordinary new file
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
