"""What comes from outside, checked where it comes in: a file the user
names is read as one bounded regular file (``read_input``), the command
line must be UTF-8 (``check_argv``), and text a terminal would act on
instead of showing is found (``first_unsafe``, ``check_text``) or shown as
escapes (``visible``: every text iorig prints goes through it)."""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from collections.abc import Sequence

from iorig.errors import UserError

# Characters a terminal acts on instead of showing: C0 and C1 controls and
# DEL (ESC starts CSI and OSC sequences — clear the screen, move the cursor,
# a hyperlink —, CR and backspace overwrite, U+009B is a one-byte CSI), the
# bidirectional embeddings, overrides, isolates and marks that reorder what
# is shown, line and paragraph separators (a viewer breaks the line there,
# fio does not), and lone surrogates: bytes that were not UTF-8, which
# Python keeps as U+DC80-U+DCFF and no output can encode.
_OTHERS = "\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff"
_ANY = re.compile(f"[\x00-\x1f{_OTHERS}]")
_BUT_NEWLINE = re.compile(f"[\x00-\x09\x0b-\x1f{_OTHERS}]")
_C0_NAMES = {
    "\t": "TAB",
    "\n": "NEWLINE",
    "\r": "CARRIAGE RETURN",
    "\x08": "BACKSPACE",
    "\x1b": "ESC",
    "\x07": "BELL",
    "\x0b": "VERTICAL TAB",
    "\x0c": "FORM FEED",
    "\x00": "NUL",
    "\x7f": "DELETE",
    "\x85": "NEXT LINE",
    "\x9b": "CSI",
}


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, *, lines: bool = False) -> str:
    """``text`` with every character a terminal would act on shown as an
    escape (``\\x1b``, ``\\u202e``); ``lines``: newlines kept (a job file,
    a description, a message of several lines), else shown as ``\\x0a``."""
    pattern = _BUT_NEWLINE if lines else _ANY
    return pattern.sub(_escape, text) if pattern.search(text) else text


def first_unsafe(text: str, allow: str = "") -> tuple[int, str] | None:
    """The index and character of the first character ``visible`` would
    escape, except those in ``allow``; None when there is none."""
    for match in _ANY.finditer(text):
        if match.group() not in allow:
            return match.start(), match.group()
    return None


def describe(char: str) -> str:
    """``U+001B (ESC)``, ``U+202E (RIGHT-TO-LEFT OVERRIDE)``."""
    code = ord(char)
    name = _C0_NAMES.get(char) or unicodedata.name(char, "control character")
    return f"U+{code:04X} ({name})"


def check_text(text: str, what: str, *, allow: str = "") -> str:
    """``text`` unchanged, or UserError naming the first character a
    terminal would act on and its position (counted from 1)."""
    found = first_unsafe(text, allow)
    if found is None:
        return text
    index, char = found
    raise UserError(
        f"{what} {_quoted(text)}: {describe(char)} at position {index + 1} is a control or "
        "text-direction character, which a terminal would act on instead of showing",
        hint="write plain text",
    )


def _quoted(text: str, limit: int = 120) -> str:
    shown = visible(text)
    return f"'{shown if len(shown) <= limit else shown[: limit - 1] + '…'}'"


def check_argv(argv: Sequence[str]) -> None:
    """Refuse, before anything is read or created, an argument that was not
    UTF-8 (fio's job files are text, and so are the database and every
    output: such a path or label could not be written) or that holds a
    control or text-direction character other than newline and tab (error
    messages quote arguments)."""
    for number in range(len(argv)):
        option, value = _option_of(argv, number)
        found = first_unsafe(value, allow="\n\t")
        if found is None:
            continue
        index, char = found
        where = f"{option or 'argument'} {_quoted(value)}"
        if 0xDC80 <= ord(char) <= 0xDCFF:
            raise UserError(
                f"{where} is not valid UTF-8: byte 0x{ord(char) - 0xDC00:02x} at position "
                f"{index + 1}",
                hint="iorig takes paths and text in UTF-8 only: rename the file, or give the text "
                "in UTF-8",
            )
        raise UserError(
            f"{where}: {describe(char)} at position {index + 1} is a control or text-direction "
            "character, which a terminal would act on instead of showing",
            hint="write plain text",
        )


def _option_of(argv: Sequence[str], index: int) -> tuple[str | None, str]:
    """The option an argument gives a value to, and the value: ``--label
    x`` and ``--label=x`` are (``--label``, ``x``)."""
    arg = argv[index]
    if arg.startswith("--") and "=" in arg:
        option, value = arg.split("=", 1)
        return (option, value) if first_unsafe(option) is None else (None, arg)
    previous = argv[index - 1] if index else ""
    if previous.startswith("-") and "=" not in previous and first_unsafe(previous) is None:
        return previous, arg
    return None, arg


# ------------------------------------------------------------------ files


def check_utf8_path(given: str, what: str = "the target") -> None:
    """Refuse a path whose full form is not UTF-8 though ``given`` is (the
    working directory's name, a link's target): fio's job files are text,
    and so are the database and every output."""
    full = os.path.realpath(os.path.expanduser(given))
    bad = next((c for c in full if 0xDC80 <= ord(c) <= 0xDCFF), None)
    if bad is not None:
        raise UserError(
            f"{what} {visible(given)} is {visible(full)}, which is not valid UTF-8 "
            f"(byte 0x{ord(bad) - 0xDC00:02x})",
            hint="iorig takes UTF-8 paths only: rename the directory",
        )


# What iorig reads from a file the user names (a scenario, --sut, --hosts-file,
# --allow-commands, a load-point table, a TLS certificate): text, never more
# than this. A scenario is then held to its own 1,000,000 characters.
INPUT_LIMIT_BYTES = 4 << 20

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFSOCK: "a socket",
}


def regular_file(path: str | os.PathLike[str], what: str) -> os.stat_result:
    """``path``'s status (links followed) when it is a regular file; else
    UserError naming ``what`` and what the path is. Looked at before it is
    opened: opening a FIFO waits for a writer, a device may act."""
    shown = visible(os.fspath(path))
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise UserError(f"{what} {shown} does not exist") from None
    except OSError as exc:
        raise UserError(f"cannot read {what} {shown}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a file")
        raise UserError(
            f"{what} {shown} is {kind}, not a regular file",
            hint="give the path of a file (devices, pipes and directories are not read)",
        )
    return info


def read_input(
    path: str | os.PathLike[str], what: str, *, limit_bytes: int = INPUT_LIMIT_BYTES
) -> str:
    """The UTF-8 text of the regular file ``path``, at most ``limit_bytes``:
    the one way iorig reads a file the user names. Anything else — missing,
    unreadable, a device, a FIFO, a directory, larger (also one that grows
    while it is read, as files on /proc do), not UTF-8 — is a UserError
    naming ``what`` (``--sut``, ``scenario file``) and the path."""
    shown = visible(os.fspath(path))
    regular_file(path, what)
    too_large = UserError(
        f"{what} {shown} is larger than {limit_bytes:,} bytes, more than iorig reads from it",
        hint="is it the right file?",
    )
    try:  # O_NONBLOCK: a FIFO put in the file's place since never blocks the open
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise UserError(f"cannot read {what} {shown}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"{what} {shown} was replaced while it was opened: not a regular file")
        if info.st_size > limit_bytes:
            raise too_large
        chunks, total = [], 0
        while chunk := os.read(fd, min(1 << 20, limit_bytes + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit_bytes:
                raise too_large
    except OSError as exc:
        raise UserError(f"cannot read {what} {shown}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UserError(
            f"{what} {shown} is not UTF-8 text (line {line}, byte {exc.start + 1})",
            hint="save the file as UTF-8",
        ) from None
