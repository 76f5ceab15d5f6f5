"""Load YAML while remembering where every key and value came from, so that
scenario errors can name the file and line.

A scenario file is untrusted input: before PyYAML composes it (recursively)
its event stream is scanned (iteratively) and refused, naming the line, when
it is too large, nested too deep, uses too many aliases, would expand past a
node count (an alias bomb: "billion laughs") or holds a number with too many
digits.

The limits are iorig's whatever parser PyYAML has: libyaml (fast) is tried
first, and any error it raises sends the document through PyYAML's
pure-Python parser, which has no limits of its own, so iorig's limit (or the
same syntax error) is what the user reads with or without libyaml and
whatever limits a libyaml release adds (PyYAML 6.0.4's stops flow nesting at
1,000 levels, looking ahead of iorig's scan).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from iorig.errors import UserError

Path_ = tuple[str | int, ...]
# libyaml's parser first where PyYAML has it (a large scalar takes seconds in
# pure Python); the pure-Python one last, for whatever libyaml refuses
LOADERS: tuple[type, ...] = (
    (yaml.CSafeLoader, yaml.SafeLoader) if hasattr(yaml, "CSafeLoader") else (yaml.SafeLoader,)
)

MAX_CHARS = 1_000_000  # a scenario is a page of YAML, not a data set
MAX_DEPTH = 32  # nested mappings and lists, aliases expanded
MAX_ALIASES = 100
MAX_NODES = 100_000  # values after alias expansion
MAX_DIGITS = 40  # a numeric scalar (2**64 has 20 digits)
_NUMERIC = re.compile(r"^[-+]?(\.?[0-9]|0x|0o)[0-9a-fA-F_.xoeE+-]*$")


@dataclass(frozen=True)
class YamlDoc:
    data: Any
    lines: dict[Path_, int]  # path -> 1-based line of the key (or list item)
    source: str  # file name for messages

    def line_of(self, path: Path_) -> int | None:
        """Line of the deepest known prefix of ``path``."""
        for cut in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:cut]))
            if line is not None:
                return line
        return None

    def where(self, path: Path_) -> str:
        line = self.line_of(path)
        return f"{self.source}:{line}" if line else self.source


def _convert(node: yaml.Node, path: Path_, lines: dict[Path_, int], source: str) -> Any:
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise UserError(
                    f"{source}:{key_node.start_mark.line + 1}: keys must be plain names"
                )
            key = key_node.value
            if key == "<<":
                raise UserError(
                    f"{source}:{key_node.start_mark.line + 1}: YAML merge keys are not supported"
                )
            if key in out:
                raise UserError(
                    f"{source}:{key_node.start_mark.line + 1}: {key!r} is given twice",
                    hint="remove one of the two entries",
                )
            child = (*path, key)
            lines[child] = key_node.start_mark.line + 1
            out[key] = _convert(value_node, child, lines, source)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            child = (*path, i)
            lines[child] = item.start_mark.line + 1
            items.append(_convert(item, child, lines, source))
        return items
    # Scalars: the safe constructor turns the resolved tag into int/float/bool/None/str.
    try:
        return yaml.SafeLoader("").construct_object(node, deep=True)
    except (ValueError, OverflowError, yaml.YAMLError) as exc:
        raise UserError(
            f"{source}:{node.start_mark.line + 1}: cannot read the value "
            f"{node.value[:40]!r}: {exc}",
            hint="write the value as plain text in quotes, or as a smaller number",
        ) from None


@dataclass
class _Open:
    """A mapping or list being scanned: values under it so far, aliases
    expanded, and how deep it goes below itself."""

    anchor: str | None
    mapping: bool
    nodes: int = 1
    height: int = 1
    key: str | None = None  # a mapping's latest key
    at_key: bool = True  # a mapping's next node is a key
    index: int = 0  # a list's items so far


def _field(stack: list[_Open]) -> str:
    """Where the node being scanned sits, as messages name fields
    (``phases[2].workloads[0].bs: ``)."""
    parts = [
        f"[{f.index}]" if not f.mapping else str(f.key)
        for f in stack
        if not f.mapping or (f.key is not None and not f.at_key)
    ]
    return ".".join(parts).replace(".[", "[") + ": " if parts else ""


def _done(stack: list[_Open], key: str | None = None) -> None:
    """A node ended inside the innermost collection: a mapping's key, then
    its value; a list's next item."""
    if not stack:
        return
    top = stack[-1]
    if not top.mapping:
        top.index += 1
        return
    if top.at_key:
        top.key = key
    top.at_key = not top.at_key


def _refuse(source: str, mark: yaml.Mark | None, what: str, hint: str) -> UserError:
    where = f"{source}:{mark.line + 1}" if mark is not None else source
    return UserError(f"{where}: {what}", hint=hint)


def check_limits(text: str, source: str, loader: type = yaml.SafeLoader) -> None:  # noqa: C901
    """Scan the YAML event stream (no recursion, no expansion) and refuse a
    document that is too large, too deep, alias-heavy or holds an oversized
    number, naming the line. Raises UserError."""
    if len(text) > MAX_CHARS:
        raise UserError(
            f"{source}: the file has {len(text):,} characters, more than a scenario may "
            f"({MAX_CHARS:,})",
            hint="a scenario describes phases and workloads; keep data out of it",
        )
    anchors: dict[str, tuple[int, int]] = {}  # name -> (nodes, height) once complete
    stack: list[_Open] = []
    aliases = 0

    def add(nodes: int, height: int, mark: yaml.Mark) -> None:
        if stack:
            top = stack[-1]
            top.nodes += nodes
            top.height = max(top.height, height + 1)
            if len(stack) + height > MAX_DEPTH:
                raise _refuse(
                    source, mark, f"nesting deeper than {MAX_DEPTH} levels", "flatten the structure"
                )
        if sum(f.nodes for f in stack) > MAX_NODES:
            raise _refuse(
                source,
                mark,
                f"the document expands to more than {MAX_NODES:,} values (aliases included)",
                "write the values out instead of repeating aliases",
            )

    for event in yaml.parse(text, Loader=loader):
        mark = event.start_mark
        if isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise _refuse(
                    source,
                    mark,
                    f"more than {MAX_ALIASES} YAML aliases",
                    "write the values out instead of using *aliases",
                )
            if event.anchor not in anchors:
                raise _refuse(
                    source,
                    mark,
                    f"alias *{event.anchor} refers to no finished anchor",
                    "define &name before using *name (and not inside itself)",
                )
            add(*anchors[event.anchor], mark)
            _done(stack)
        elif isinstance(event, yaml.ScalarEvent):
            value = event.value
            if not event.style and len(value) > MAX_DIGITS and _NUMERIC.match(value):
                raise _refuse(
                    source,
                    mark,
                    f"{_field(stack)}a number with {len(value)} characters (at most {MAX_DIGITS})",
                    "use a value fio can take; quote it if it is meant as text",
                )
            if event.anchor:
                anchors[event.anchor] = (1, 0)
            add(1, 0, mark)
            _done(stack, value[:60])
        elif isinstance(event, yaml.CollectionStartEvent):
            stack.append(_Open(event.anchor, isinstance(event, yaml.MappingStartEvent)))
            if len(stack) > MAX_DEPTH:
                raise _refuse(
                    source, mark, f"nesting deeper than {MAX_DEPTH} levels", "flatten the structure"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            done = stack.pop()
            if done.anchor:
                anchors[done.anchor] = (done.nodes, done.height)
            if stack:
                add(done.nodes, done.height, mark)
                _done(stack)


def load_yaml(text: str, source: str, loaders: tuple[type, ...] = LOADERS) -> YamlDoc:
    """Parse ``text`` within iorig's limits with the first of ``loaders``
    that reads it; an error of any but the last is read again by the next."""
    root: yaml.Node | None = None
    for loader in loaders:
        try:
            check_limits(text, source, loader)
            root = yaml.compose(text, Loader=loader)
            break
        except yaml.YAMLError as exc:
            if loader is not loaders[-1]:
                continue
            mark = getattr(exc, "problem_mark", None)
            where = f"{source}:{mark.line + 1}" if mark else source
            problem = getattr(exc, "problem", None) or str(exc)
            raise UserError(f"{where}: not valid YAML: {problem}") from None
    if root is None:
        raise UserError(f"{source}: the file is empty")
    lines: dict[Path_, int] = {(): root.start_mark.line + 1}
    return YamlDoc(_convert(root, (), lines, source), lines, source)
