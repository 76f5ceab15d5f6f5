"""What a killed run leaves, and taking it back: its working directories in
TMPDIR (``iorig-*``) and the data files (or file-set directories) it laid
out in directory targets to remove after the run.

Only what iorig provably made goes, and only once its maker is dead:

* a directory in TMPDIR named ``iorig-*`` holding iorig's owner stamp
  (``.iorig-owner``: pid, process start time, boot id) written when it was
  made, whose process no longer runs;
* a data file or file-set directory a run recorded (in this user's state
  directory, before making it) as its own to remove after it, that still
  carries iorig's mark (the extended attribute ``user.iorig``), the token
  its run put beside it (``user.iorig.laid``: an inode number alone is
  reused at once by a file made in its place) and the device and inode it
  had, whose run's process is dead, that no live run has locked, and that
  its run was not asked to keep (``--keep-files``).

Nothing else is touched: a user's file or directory, whatever its name, and
anything of a live run stay.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from iorig.errors import UserError
from iorig.machine.locks import Claim, path_keys
from iorig.machine.statedir import Stamp, private, read_record, write_record
from iorig.targets import MARK_XATTR

STAMP = ".iorig-owner"
TOKEN_XATTR = "user.iorig.laid"
TMP_PREFIX = "iorig-"
RECORD_PREFIX = "laid-"


# ------------------------------------------------------------ TMPDIR


def stamp(directory: Path) -> None:
    """Write this process's stamp into ``directory`` (just made by it)."""
    path = directory / STAMP
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"owner": Stamp.mine().as_dict(), "made": time.time()}, f)


@contextlib.contextmanager
def temporary_directory(prefix: str = TMP_PREFIX) -> Iterator[Path]:
    """``tempfile.TemporaryDirectory`` with this process's stamp in it, so
    that what a kill leaves there is known to be a dead run's."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        stamp(Path(tmp))
        yield Path(tmp)


def _dead_stamp(directory: Path) -> Stamp | None:
    """The stamp of a dead process in ``directory``; None when there is no
    stamp, it is not iorig's form, or its process lives."""
    path = directory / STAMP
    try:
        st_dir, st = os.lstat(directory), os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_uid != st_dir.st_uid:
        return None
    data = read_record(path)
    found = Stamp.of(data.get("owner")) if data is not None else None
    return found if found is not None and not found.alive else None


def dead_tempdirs(base: Path | None = None) -> list[tuple[Path, Stamp]]:
    """Directories ``iorig-*`` in TMPDIR (or ``base``) made by dead
    processes, each with its maker's stamp."""
    base = base or Path(tempfile.gettempdir())
    found = []
    with contextlib.suppress(OSError):
        for entry in sorted(base.iterdir()):
            if not entry.name.startswith(TMP_PREFIX):
                continue
            with contextlib.suppress(OSError):
                maker = _dead_stamp(entry) if stat.S_ISDIR(os.lstat(entry).st_mode) else None
                if maker is not None:
                    found.append((entry, maker))
    return found


# ------------------------------------------------------------ data files


def _record_path(path: Path) -> Path:
    digest = hashlib.sha256(os.fsencode(str(path))).hexdigest()[:24]
    return private() / f"{RECORD_PREFIX}{digest}.json"


def _marked(path: Path) -> bool:
    try:
        return os.getxattr(path, MARK_XATTR, follow_symlinks=False) == b"1"
    except OSError:
        return False


class LaidOut:
    """The records of what one run lays out in its targets and removes after
    it: written before each is made, removed once it is (or kept as asked)."""

    def __init__(self) -> None:
        self._records: dict[Path, dict] = {}

    def planned(self, path: Path, kind: str) -> None:
        """``path`` (a ``file`` or a ``fileset`` directory) does not exist and
        this run will make it, to remove after the run."""
        data = {
            "version": 1,
            "owner": Stamp.mine().as_dict(),
            "path": str(path),
            "kind": kind,
            "node": None,
            "run": None,
            "keep": False,
            "since": time.time(),
        }
        write_record(_record_path(path), data)
        self._records[path] = data

    def made(self, path: Path) -> None:
        """``path`` exists now: its identity and a token put on it go into
        its record."""
        if path in self._records:
            st = os.lstat(path)
            token = secrets.token_hex(8)
            try:
                os.setxattr(path, TOKEN_XATTR, token.encode(), follow_symlinks=False)
            except OSError:
                token = None  # no user xattrs here: it cannot be proved iorig's later
            self._update(path, node=[st.st_dev, st.st_ino], token=token)

    def begin(self, run_id: str, *, keep: bool) -> None:
        """The run started: its id, and whether its files are to be kept. A
        record that cannot say "keep" goes: a file its run was asked to keep
        must never look like a leftover."""
        for path in list(self._records):
            try:
                self._update(path, run=run_id, keep=keep)
            except OSError:
                self.done(path)

    def _update(self, path: Path, **changes: object) -> None:
        self._records[path] |= changes
        write_record(_record_path(path), self._records[path])

    def done(self, path: Path) -> None:
        """``path`` was removed (or kept as asked): its record goes."""
        if self._records.pop(path, None) is not None:
            with contextlib.suppress(OSError, UserError):
                _record_path(path).unlink(missing_ok=True)

    def forget(self) -> None:
        for path in list(self._records):
            self.done(path)


@dataclass(frozen=True)
class Leftover:
    """A dead run's record of a data file, and what it says."""

    record: Path
    path: Path
    kind: str
    node: tuple[int, int] | None
    token: str | None
    keep: bool
    run: str | None
    pid: int


def _leftover(record: Path) -> Leftover | bool | None:
    """The record's leftover; None for a live run's; False for a record that
    is not iorig's form."""
    data = read_record(record)
    if data is None:
        return False
    found = Stamp.of(data.get("owner"))
    path, kind, node = data.get("path"), data.get("kind"), data.get("node")
    run, keep, token = data.get("run"), data.get("keep"), data.get("token")
    if (
        found is None
        or not isinstance(path, str)
        or not path.startswith("/")
        or kind not in ("file", "fileset")
        or not isinstance(keep, bool)
        or not (run is None or isinstance(run, str))
        or not (token is None or isinstance(token, str))
    ):
        return False
    if node is not None and not (
        isinstance(node, list) and len(node) == 2 and all(isinstance(n, int) for n in node)
    ):
        return False
    if found.alive:
        return None
    return Leftover(
        record, Path(path), kind, tuple(node) if node else None, token, keep, run, found.pid
    )


def dead_data() -> list[Leftover]:
    """Data files and file-set directories dead runs recorded and did not remove."""
    try:
        directory = private()
    except (UserError, OSError):
        return []
    out = []
    for record in sorted(directory.glob(f"{RECORD_PREFIX}*.json")):
        found = _leftover(record)
        if found is False:
            with contextlib.suppress(OSError):
                record.unlink()
        elif isinstance(found, Leftover):
            out.append(found)
    return out


def _provably_laid(item: Leftover) -> str | None:
    """Why ``item.path`` is not the file its run laid out, or None when it is."""
    try:
        st = os.lstat(item.path)
    except FileNotFoundError:
        return "gone"
    except OSError as exc:
        return exc.strerror or str(exc)
    wanted = stat.S_ISREG if item.kind == "file" else stat.S_ISDIR
    if not wanted(st.st_mode):
        return "not what the run made there (a link or another kind of file)"
    if item.node is not None and (st.st_dev, st.st_ino) != item.node:
        return "another file is at that path now"
    if not _marked(item.path):
        return f"it has no {MARK_XATTR} mark"
    if item.token is None:  # killed before it was recorded as made, or no user xattrs here
        return f"not provably the file its run made (no {TOKEN_XATTR} token recorded)"
    try:
        token = os.getxattr(item.path, TOKEN_XATTR, follow_symlinks=False)
    except OSError:
        token = b""
    if token != item.token.encode():
        return "another file is at that path now"
    return None


def _remove(item: Leftover) -> str | None:
    """Remove one leftover data file; what was done (None: nothing to say)."""
    who = f"killed iorig run {item.run}" if item.run else "an iorig run killed before it began"
    if item.keep:  # --keep-files: it stays, as that run was asked
        item.record.unlink(missing_ok=True)
        return None
    why = _provably_laid(item)
    if why == "gone":
        item.record.unlink(missing_ok=True)
        return None
    if why is not None:
        item.record.unlink(missing_ok=True)
        return f"left {item.path} (recorded by {who}, pid {item.pid}): {why}"
    claim = Claim(shared=False)
    try:
        claim.take(str(item.path), path_keys(item.path))
    except UserError:
        return None  # a live run uses it now: not a leftover
    try:
        if item.kind == "fileset":
            shutil.rmtree(item.path)
        else:
            os.unlink(item.path)
    except OSError as exc:
        return f"could not remove {item.path} (left by {who}, pid {item.pid}): {exc.strerror}"
    finally:
        claim.release()
    item.record.unlink(missing_ok=True)
    what = "data file" if item.kind == "file" else "file set"
    return f"removed {item.path}, the {what} of {who} (pid {item.pid})"


def clean(*, remove: bool = True) -> list[str]:
    """Remove what dead runs left (``remove``), or only list it; one line each."""
    said = []
    for item in dead_data():
        if not remove:
            if not item.keep and _provably_laid(item) is None:
                said.append(f"left by a killed iorig run (pid {item.pid}): {item.path}")
            continue
        with contextlib.suppress(OSError):
            if (text := _remove(item)) is not None:
                said.append(text)
    for directory, maker in dead_tempdirs():
        who = f"a killed iorig run (pid {maker.pid})"
        if not remove:
            said.append(f"left by {who}: {directory}")
            continue
        shutil.rmtree(directory, ignore_errors=True)
        if directory.exists():
            said.append(f"could not remove {directory}, left by {who}")
        else:
            said.append(f"removed {directory}, the working directory of {who}")
    return said
