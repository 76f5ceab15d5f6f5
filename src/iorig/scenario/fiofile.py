"""fio's job-file format read as data: sections, options and their lines.

A user's job file is untrusted input. It is read here the way fio reads it
(init.c ``__parse_jobs_ini``, parse.c ``strip_blank_end``) so that iorig
sees the options fio would see, and what fio would do beyond reading
options is refused, naming the line: ``include`` (fio reads every option
line that begins with "include" as one: another file), ``$`` (fio expands
``${VAR}`` from the environment and ``$pagesize``, ``$mb_memory`` and
``$ncpus``, then hands arithmetic to ``bc`` in a shell), lines longer than
fio reads at once (it would take the rest of a longer line as another
option), control characters, and section names fio would take for
``[global]``. Which options may run is ``iorig.scenario.fiopolicy``'s decision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from iorig.errors import UserError

MAX_CHARS = 1_000_000  # a job file is a page of options
# fio reads a line with fgets() into OPT_LEN_MAX (8192) bytes: the rest of a
# longer line would become an option line of its own
MAX_LINE_CHARS = 4096
MAX_SECTIONS = 256
MAX_NAME_CHARS = 128
_SECTION_RE = re.compile(r"^\[([^\[\]]*)\]$")
_NAME_CHARS_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.:+@-]*$")
_OPTION_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_COMMENT_RE = re.compile(r"[;#]")


class JobFileSyntaxError(UserError):
    """A job file iorig does not read (with the file and line)."""


@dataclass(frozen=True)
class JobOption:
    name: str  # as written (an alias is resolved by iorig.scenario.fiopolicy)
    value: str | None  # None for a bare flag such as ``time_based``
    line: int

    @property
    def text(self) -> str:
        return self.name if self.value is None else f"{self.name}={self.value}"


@dataclass(frozen=True)
class JobSection:
    name: str
    line: int
    options: tuple[JobOption, ...]

    @property
    def is_global(self) -> bool:
        return self.name == "global"


@dataclass(frozen=True)
class JobFile:
    origin: str  # the path, for messages
    sections: tuple[JobSection, ...]

    def where(self, line: int) -> str:
        return f"{self.origin}:{line}"

    @property
    def jobs(self) -> tuple[JobSection, ...]:
        return tuple(s for s in self.sections if not s.is_global)


def _content(raw: str) -> str:
    """A line without its comment and surrounding blanks: fio cuts a line at
    its first ';' or '#' wherever it is (a value cannot hold either)."""
    return _COMMENT_RE.split(raw, maxsplit=1)[0].strip()


def looks_like_job_file(text: str) -> bool:
    """Whether ``text`` reads as a fio job file: its first line that is not
    blank or a comment is a ``[section]`` header (a scenario is a YAML
    mapping, which never starts with '[')."""
    for raw in text.splitlines()[:1000]:
        content = _content(raw)
        if content:
            return content.startswith("[")
    return False


def _fail(origin: str, line: int, message: str, hint: str | None = None) -> JobFileSyntaxError:
    return JobFileSyntaxError(f"{origin}:{line}: {message}", hint=hint)


def _check_line(origin: str, number: int, raw: str) -> None:
    if len(raw) > MAX_LINE_CHARS:
        raise _fail(
            origin,
            number,
            f"the line is {len(raw):,} characters long; fio reads at most 8,191 at once and "
            "would take the rest for another option line",
            hint=f"keep lines under {MAX_LINE_CHARS:,} characters",
        )
    bad = next((c for c in raw if (ord(c) < 32 and c != "\t") or ord(c) == 127), None)
    if bad is not None:
        raise _fail(origin, number, f"control character {bad!r} in the line")


def _section_name(origin: str, number: int, content: str) -> str:
    match = _SECTION_RE.match(content)
    if not match:
        raise _fail(origin, number, f"{content[:80]!r} is not a section header like [job]")
    name = match.group(1)
    if not _NAME_CHARS_RE.match(name) or name != name.strip() or len(name) > MAX_NAME_CHARS:
        raise _fail(
            origin,
            number,
            f"section name {name[:80]!r}: use letters, digits, spaces and - _ . : + @ "
            f"(at most {MAX_NAME_CHARS} characters, starting with a letter or digit)",
        )
    if name.lower().startswith("global") and name != "global":
        # fio compares the first six characters: [global-x] would be [global]
        raise _fail(
            origin,
            number,
            f"section [{name}]: fio takes every section whose name begins with 'global' for "
            "[global]",
            hint="rename the job",
        )
    return name


def _option(origin: str, number: int, content: str) -> JobOption:
    if content.startswith("include"):
        raise _fail(
            origin,
            number,
            "include reads another file into the job file: iorig runs the file it was given, "
            "as given",
            hint="copy the included options into the job file",
        )
    name, sep, value = content.partition("=")
    name, value = name.strip(), value.strip()
    if not _OPTION_RE.match(name):
        raise _fail(origin, number, f"{content[:80]!r} is not an option (name or name=value)")
    return JobOption(name, value if sep else None, number)


def parse_job_file(text: str, origin: str) -> JobFile:
    """The sections of a fio job file in order, each with its options and
    lines; raises JobFileSyntaxError naming the line of the first problem."""
    if len(text) > MAX_CHARS:
        raise JobFileSyntaxError(f"{origin}: larger than {MAX_CHARS:,} characters")
    sections: list[JobSection] = []
    name: str | None = None
    start = 0
    options: list[JobOption] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        raw = raw.removesuffix("\r")
        _check_line(origin, number, raw)
        content = _content(raw)
        if not content:
            continue
        if "$" in content:
            raise _fail(
                origin,
                number,
                "'$': fio would expand it (${VAR} from the environment; $pagesize, "
                "$mb_memory and $ncpus, with arithmetic done by running bc), so the job "
                "would depend on where it runs",
                hint="write the value itself",
            )
        if content.startswith("["):
            if name is not None:
                sections.append(JobSection(name, start, tuple(options)))
            if len(sections) >= MAX_SECTIONS:
                raise _fail(origin, number, f"more than {MAX_SECTIONS} sections")
            name, start, options = _section_name(origin, number, content), number, []
            continue
        if name is None:
            raise _fail(
                origin,
                number,
                f"{content[:80]!r} is outside any [section]",
                hint="options belong under [global] or a [job] header",
            )
        options.append(_option(origin, number, content))
    if name is not None:
        sections.append(JobSection(name, start, tuple(options)))
    if not any(not s.is_global for s in sections):
        raise JobFileSyntaxError(
            f"{origin}: no job section: a job file runs its [job] sections ([global] only "
            "sets their defaults)"
        )
    return JobFile(origin, tuple(sections))
