"""Resolve ``--target`` into the file or device fio will use, and refuse
anything that would destroy data the user did not offer.

A block device is refused when it is mounted, holds partitions, is used by
another device (LVM, RAID, dm-crypt), or carries a partition table or
filesystem signature — the last three unless ``--allow-destroy`` is given;
a mounted device is always refused. An existing regular file that iorig did
not create is treated the same way: iorig marks the files it creates with
the extended attribute ``user.iorig`` so that later runs may reuse them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import resource
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from iorig.errors import UserError
from iorig.targets.block import check_block_device, device_size
from iorig.units import format_bytes

MARK_XATTR = "user.iorig"
DATA_FILE_NAME = "iorig-{role}.dat"
FILESET_DIR_NAME = "iorig-{role}"
TargetKind = Literal["file", "directory", "block", "fileset", "remote"]


@dataclass(frozen=True)
class Target:
    role: str  # the scenario's name for it, e.g. "data"
    given: str  # what the user typed
    kind: TargetKind
    path: Path  # the file or device fio does I/O on
    size_bytes: int  # region iorig uses
    device_size_bytes: int | None  # whole device (block targets)
    created: bool  # iorig created the data file in this run
    remove_after: bool  # a data file iorig placed in a directory target
    # a file-set target: ``path`` is the directory iorig made for its files
    host: str = ""  # a fio server's label for a remote target; "" on this machine
    fileset: bool = False  # a remote file set: ``path`` is its files' name prefix


# ------------------------------------------------------------------ files


def _is_marked(path: Path) -> bool:
    try:
        return os.getxattr(path, MARK_XATTR, follow_symlinks=False) == b"1"
    except OSError:
        return False


def _mark(path: Path) -> None:
    with contextlib.suppress(
        OSError
    ):  # filesystems without user xattrs: reuse needs --allow-destroy
        os.setxattr(path, MARK_XATTR, b"1", follow_symlinks=False)  # never a link's target


def _existing_ancestor(path: Path) -> Path:
    probe = path
    while not probe.exists():
        probe = probe.parent
    return probe


def _check_space(path: Path, needed: int, existing: int) -> None:
    # past the shell's limit (ulimit -f) SIGXFSZ would kill fio part way
    # through its layout
    limit, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if limit != resource.RLIM_INFINITY and needed > limit:
        raise UserError(
            f"{path} would be {format_bytes(needed)}, past this shell's file-size limit "
            f"(ulimit -f) of {format_bytes(limit)}",
            hint="raise the limit (`ulimit -f unlimited`) or use --size to test a smaller "
            "working set",
        )
    free_at = _existing_ancestor(path.parent)
    vfs = os.statvfs(free_at)
    available = vfs.f_bavail * vfs.f_frsize
    growth = max(0, needed - existing)
    if growth > available:
        raise UserError(
            f"not enough free space for {path}: the working set needs {format_bytes(needed)}, "
            f"{format_bytes(available)} is free on {free_at}",
            hint="use --size to test a smaller working set, or choose a target on a larger "
            "filesystem",
        )


def _no_link(path: Path) -> None:
    """Refuse a symbolic link where iorig writes a file it names itself:
    following it would write wherever the link points."""
    if path.is_symlink():
        raise UserError(
            f"{path} is a symbolic link (to {os.readlink(path)}): iorig does not write through "
            "a link it did not create",
            hint="remove the link, or give the file it points to as the target",
        )


def _prepare_file(path: Path, size: int, allow_destroy: bool) -> bool:
    """Create (or vet) the data file; True when iorig created it now."""
    _no_link(path)
    if path.exists():
        if not path.is_file():
            raise UserError(f"{path} exists and is neither a regular file nor a block device")
        current = path.stat().st_size
        if current and not _is_marked(path) and not allow_destroy:
            raise UserError(
                f"refusing to overwrite {path}: it holds {format_bytes(current)} that iorig did "
                "not create",
                hint="choose a new path or a directory, or pass --allow-destroy to overwrite it",
            )
        if not os.access(path, os.R_OK | os.W_OK):
            raise UserError(f"cannot read and write {path}: permission denied")
        _check_space(path, size, current)
        _allocate(path, size)
        _mark(path)
        return False
    _check_space(path, size, 0)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        os.close(fd)
    except OSError as exc:
        reason = "permission denied" if exc.errno in (errno.EACCES, errno.EPERM) else exc.strerror
        raise UserError(
            f"cannot create {path}: {reason}",
            hint="choose a directory you can write to, e.g. --target ./iorig-scratch/",
        ) from None
    _allocate(path, size)
    _mark(path)
    return True


def _allocate(path: Path, size: int) -> None:
    """Give the file its full size before fio opens it.

    A write job that finds its file too small makes fio unlink and recreate
    it, which would drop iorig's mark; and reserving the space now turns a
    full filesystem into an error before the run instead of during it.
    """
    if path.stat().st_size >= size:
        return
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)  # a link swapped in since: ELOOP
    try:
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise UserError(
                    f"not enough free space to allocate {format_bytes(size)} for {path}",
                    hint="use --size to test a smaller working set",
                ) from None
            os.ftruncate(fd, size)  # no fallocate here (e.g. some network filesystems)
    finally:
        os.close(fd)


# ------------------------------------------------------------------ remote


def remote_target(
    given: str | None,
    *,
    host: str,
    role: str,
    size: int,
    size_explicit: bool,
    allow_destroy: bool,
    fileset: bool = False,
) -> Target:
    """A target on a fio server. iorig cannot look at the server's disks
    through fio's protocol, so it only writes where it cannot destroy data
    unasked: by default a file ``iorig-<role>.dat`` in the server's working
    directory (``iorig agent --dir``), or another relative path there; an
    absolute path (a device, a mounted filesystem) needs ``--allow-destroy``.
    A file set's files are named ``iorig-<role>.<set>.<job>.<file>`` in that
    directory (``jobtext.fileset_layout``): no directory to make or remove."""
    name = (FILESET_DIR_NAME if fileset else DATA_FILE_NAME).format(role=role)
    if fileset and (given or "").strip() and not (given or "").strip().endswith("/"):
        raise UserError(
            f"target {given!r} on {host}: a file set's target is a directory (end it with /)",
            hint=f"e.g. --target {role}=data/ (relative to the server's directory)",
        )
    text = (given or "").strip()
    if not text or text.endswith("/"):
        path, remove = (PurePosixPath(text) / name if text else PurePosixPath(name)), True
    else:
        path, remove = PurePosixPath(text), False
    if ".." in path.parts:
        raise UserError(f"target {text!r} on {host}: '..' is not allowed in a remote path")
    if path.is_absolute():
        if not allow_destroy:
            raise UserError(
                f"refusing to write to {path} on {host}: iorig cannot see what a remote path "
                "holds (fio's server has no way to check for a filesystem or data)",
                hint="use a path relative to the server's working directory (iorig agent --dir), "
                "or pass --allow-destroy if everything at that path may be overwritten",
            )
        if path.parts[:2] == ("/", "dev") and not size_explicit:
            raise UserError(
                f"{path} on {host}: iorig cannot read a remote device's size",
                hint="give the region to test with --size",
            )
    if size <= 0:
        raise UserError(f"the working set of target {role!r} is 0 bytes", hint="give --size")
    return Target(
        role,
        text or "(server directory)",
        "remote",
        Path(path),
        size,
        None,
        False,
        remove or fileset,
        host,
        fileset,
    )


# ------------------------------------------------------------------ binding


def bind_targets(roles: list[str], given: list[str]) -> dict[str, str]:
    """Map ``--target`` values to a scenario's target roles.

    ``PATH`` binds the only role; ``ROLE=PATH`` binds a named one (a scenario
    with database and log volumes takes ``--target db=/mnt/db/ --target
    log=/mnt/log/``). A value whose part before ``=`` is not a role is a path.
    """
    bound: dict[str, str] = {}
    for value in given:
        name, sep, path = value.partition("=")
        if sep and name in roles:
            role = name
        elif len(roles) == 1:
            role, path = roles[0], value
        else:
            raise UserError(
                f"--target {value}: this scenario has several targets ({', '.join(roles)})",
                hint=f"name each: --target {roles[0]}=PATH --target {roles[1]}=PATH",
            )
        if role in bound:
            raise UserError(f"target {role!r} is given twice ({bound[role]} and {path})")
        bound[role] = path
    return bound


def bind_host_targets(
    roles: list[str], given: list[str], hosts: list[Any]
) -> dict[Any, dict[str, str]]:
    """``--target`` values for fio servers: ``PATH`` (every host, the only
    role), ``ROLE=PATH`` (every host), ``HOST=PATH`` (one host, the only
    role), ``ROLE@HOST=PATH``; several may be given comma-separated, e.g.
    ``--target 10.0.0.1=/dev/sdb,10.0.0.2=/dev/sdc``. ``hosts`` are
    ``HostAddress``es or ``SshHost``s; a host is named as listed or by any
    of its ``aliases``."""
    names = {}
    for h in hosts:
        for alias in h.aliases:
            names.setdefault(alias, h)
    bound: dict[Any, dict[str, str]] = {h: {} for h in hosts}
    everywhere: dict[str, str] = {}
    for value in given:
        for item in value.split(","):
            name, sep, path = item.partition("=")
            role_name, at, host_name = name.partition("@")
            if sep and at and role_name in roles and host_name in names:
                bound[names[host_name]][role_name] = path
            elif sep and name in names and len(roles) == 1:
                bound[names[name]][roles[0]] = path
            elif sep and name in roles:
                everywhere[name] = path
            elif len(roles) == 1 and not (sep and "/" not in name and name):
                everywhere[roles[0]] = item
            else:
                raise UserError(
                    f"--target {item}: {name!r} is neither a host of --hosts nor a target of the "
                    f"scenario ({', '.join(roles)})",
                    hint="write PATH, ROLE=PATH, HOST=PATH or ROLE@HOST=PATH",
                )
    return {h: everywhere | per_host for h, per_host in bound.items()}


# ------------------------------------------------------------------ entry


def _prepare_fileset(directory: Path, role: str, size: int, allow_destroy: bool) -> Target:
    """The directory of a file-set target: ``iorig-<role>/`` inside the one given,
    made and marked by iorig; an earlier run's (kept) files are reused."""
    if directory.exists() and not directory.is_dir():
        raise UserError(
            f"a file-set target needs a directory, and {directory} is not one",
            hint="give a directory on the filesystem to test, e.g. --target /mnt/nfs/",
        )
    home = directory.resolve() / FILESET_DIR_NAME.format(role=role)
    _no_link(home)
    created = not home.exists()
    if not created:
        if not home.is_dir():
            raise UserError(f"{home} exists and is not a directory")
        if not _is_marked(home) and any(home.iterdir()) and not allow_destroy:
            raise UserError(
                f"refusing to use {home}: it holds files that iorig did not create",
                hint="choose another directory, or pass --allow-destroy to overwrite them",
            )
    if not created and (link := linked_entry(home)):
        _no_link(link)
    used = sum(f.stat().st_size for f in home.rglob("*") if f.is_file()) if not created else 0
    _check_space(home / "x", size, used)
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"cannot create {home}: {exc.strerror}",
            hint="choose a directory you can write to",
        ) from None
    _mark(home)
    return Target(role, str(directory), "fileset", home, size, None, created, created)


# Filesystems whose files are the kernel's windows, not storage.
PSEUDO_FILESYSTEMS = frozenset(
    {
        "proc",
        "sysfs",
        "devpts",
        "debugfs",
        "tracefs",
        "securityfs",
        "cgroup",
        "cgroup2",
        "configfs",
        "bpf",
        "pstore",
        "efivarfs",
        "fusectl",
        "mqueue",
        "binfmt_misc",
        "autofs",
        "rpc_pipefs",
        "nsfs",
    }
)


def _filesystem_type(path: Path) -> str | None:
    """The type of the filesystem ``path`` is on (longest mount point)."""
    best, kind = -1, None
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            fields, _, rest = line.partition(" - ")
            parts = fields.split()
            if len(parts) < 5 or not rest:
                continue
            mount = Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), parts[4]))
            if (path == mount or mount in path.parents) and len(mount.parts) > best:
                best, kind = len(mount.parts), rest.split()[0]
    return kind


def check_kind(given: str) -> None:
    """Refuse what is no storage: a character device, pipe or socket, or a path
    on (or to be made on) a kernel pseudo-filesystem such as /proc or /sys."""
    _check_length(given)
    path = Path(given).expanduser()
    try:
        mode: int | None = path.stat().st_mode
    except OSError:
        mode = None  # not there yet: made where its nearest existing parent is
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISBLK(mode)):
        kind = (
            "a character device"
            if stat.S_ISCHR(mode)
            else "a pipe"
            if stat.S_ISFIFO(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "a special file"
        )
        raise UserError(
            f"{given} is {kind}, not a regular file, directory or block device",
            hint="give a file, a directory or a block device to test",
        )
    if mode is not None and stat.S_ISBLK(mode):
        return  # device nodes live on devtmpfs; the device is the storage
    where = next(p for p in (path.absolute(), *path.absolute().parents) if p.exists())
    fstype = _filesystem_type(where.resolve())  # /proc/x/ is no storage, not "too small"
    if fstype in PSEUDO_FILESYSTEMS:
        raise UserError(
            f"{given} is on the kernel's {fstype} filesystem, not on storage",
            hint="give a file, a directory or a block device to test",
        )
    if fstype == "devtmpfs":  # a mistyped device name would measure a file in memory
        raise UserError(
            f"{given} is not a block device, and {where} is the kernel's device filesystem "
            "(devtmpfs, in memory), not storage",
            hint="check the device's name (lsblk lists them), or give a file, a directory or "
            "a block device to test",
        )


# Linux's limits (NAME_MAX, PATH_MAX): past them every call fails with
# ENAMETOOLONG, which is the user's path, not an iorig fault
NAME_MAX_BYTES = 255
PATH_MAX_BYTES = 4095


def _check_length(given: str) -> None:
    raw = os.fsencode(given)
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > NAME_MAX_BYTES:
        raise UserError(
            f"{given!r:.100} has a name of {len(longest)} bytes; a file name holds at most "
            f"{NAME_MAX_BYTES}",
            hint="give a shorter path",
        )
    if len(raw) > PATH_MAX_BYTES:
        raise UserError(
            f"{given!r:.100} is {len(raw)} bytes long; a path holds at most {PATH_MAX_BYTES}",
            hint="give a shorter path",
        )


def resolve_target(
    given: str,
    *,
    role: str,
    size: int,
    size_explicit: bool,
    allow_destroy: bool,
    fileset: bool = False,
) -> Target:
    """Check and prepare one target. ``size`` is the scenario's working set;
    on a block device without an explicit size the whole device is used.
    A ``fileset`` target (many files, e.g. a training data set) needs a
    directory."""
    if not given:
        raise UserError(
            "no target given", hint="pass --target PATH (a file, directory or block device)"
        )
    check_kind(given)
    path = Path(given).expanduser()
    if fileset:
        if path.exists() and stat.S_ISBLK(path.stat().st_mode):
            raise UserError(
                f"target {role!r} holds a set of files and needs a directory, not the block "
                f"device {path}",
                hint="make a filesystem on the device, mount it and give the mount point",
            )
        return _prepare_fileset(path, role, size, allow_destroy)
    if path.exists() and stat.S_ISBLK(path.stat().st_mode):
        if not os.access(path, os.R_OK | os.W_OK):
            raise UserError(
                f"cannot open {path} for reading and writing: permission denied",
                hint="run as root or add your user to the disk group",
            )
        whole = device_size(path)
        if size_explicit and size > whole:
            raise UserError(
                f"--size {format_bytes(size)} is larger than {path} ({format_bytes(whole)})"
            )
        check_block_device(path, allow_destroy)
        region = size if size_explicit else whole
        return Target(role, given, "block", path.resolve(), region, whole, False, False)
    if size <= 0:
        raise UserError(f"the working set of target {role!r} is 0 bytes", hint="give --size")
    if given.endswith("/") or path.is_dir():
        if path.exists() and not path.is_dir():
            raise UserError(f"{given} ends with '/' but is not a directory")
        data = path.resolve() / DATA_FILE_NAME.format(role=role)
        created = _prepare_file(data, size, allow_destroy)
        return Target(role, given, "directory", data, size, None, created, created)
    created = _prepare_file(path.resolve(), size, allow_destroy)
    return Target(role, given, "file", path.resolve(), size, None, created, False)


Identity = tuple[int, ...]


def identity(target: Target) -> Identity | None:
    """What makes a local target the one iorig prepared: the device number
    of a block device; device and inode of a file set's directory; device,
    inode and size of a data file. None when nothing is at its path."""
    try:
        st = os.stat(target.path) if target.kind == "block" else os.lstat(target.path)
    except OSError:
        return None
    if target.kind == "block":
        return (st.st_rdev,)
    if target.kind == "fileset":
        return (st.st_dev, st.st_ino)
    return (st.st_dev, st.st_ino, st.st_size)


def linked_entry(directory: Path) -> Path | None:
    """The first symbolic link anywhere under ``directory`` (not followed),
    or None: fio opens a file set's files by name and would write through one."""
    for root, dirs, files in os.walk(directory, followlinks=False):
        for name in (*dirs, *files):
            if os.path.islink(os.path.join(root, name)):
                return Path(root, name)
    return None


def identity_change(target: Target, before: Identity, now: Identity | None) -> str | None:
    """How a target changed since ``before`` (None: it did not)."""
    if target.kind == "fileset" and now is not None and (link := linked_entry(target.path)):
        return (
            f"{link} in the file set of target {target.role!r} is a symbolic link now (to "
            f"{os.readlink(link)}): iorig does not write through a link it did not create"
        )
    if now == before:
        return None
    if now is None:
        return f"target {target.path} was removed during the run"
    if target.kind == "file" and now[:2] == before[:2]:
        return (
            f"target {target.path} changed size during the run "
            f"({format_bytes(before[2])} -> {format_bytes(now[2])})"
        )
    return f"target {target.path} was replaced during the run (another file is at its path now)"


def written_path(given: str, *, role: str, fileset: bool = False) -> Path:
    """What ``resolve_target`` makes of ``given`` for fio to write: the file
    or device itself, a directory's data file, or a file set's directory."""
    path = Path(given).expanduser().absolute()
    if fileset:
        return path / FILESET_DIR_NAME.format(role=role)
    if given.endswith("/") or path.is_dir():
        return path / DATA_FILE_NAME.format(role=role)
    return path


def new_paths(given: str, *, role: str, fileset: bool = False) -> list[Path]:
    """What ``resolve_target`` may create for ``given`` that does not exist
    now (the data file or file-set directory and missing parent
    directories), deepest first: what ``remove_new`` takes back when the
    run does not start."""
    if not given:
        return []
    path = written_path(given, role=role, fileset=fileset)
    return [p for p in (path, *path.parents) if not p.exists() and not p.is_symlink()]


def remove_new(paths: list[Path]) -> None:
    """Remove what ``new_paths`` listed and now exists: files, a file-set
    directory with what is in it, and parent directories left empty.
    Never raises."""
    for path in sorted(paths, key=lambda p: len(p.parts), reverse=True):
        try:
            if path.is_symlink() or path.is_file():
                path.unlink()
            elif path.is_dir() and _is_marked(path):  # a file-set directory iorig made
                shutil.rmtree(path, ignore_errors=True)
            elif path.is_dir():
                path.rmdir()  # only when empty
        except OSError:
            pass


def release(target: Target, keep: bool) -> None:
    """Remove a data file iorig placed in a directory target (unless kept);
    make sure a kept file still carries the mark for the next run."""
    if target.kind == "block":
        return
    if target.kind == "fileset":
        if target.remove_after and not keep:
            shutil.rmtree(target.path, ignore_errors=True)
        elif target.path.exists():
            _mark(target.path)
        return
    if target.remove_after and not keep:
        with contextlib.suppress(FileNotFoundError):
            target.path.unlink()
    elif target.path.exists():
        _mark(target.path)
