"""Load YAML while remembering where every key and value came from, so that
scenario errors can name the file and line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from iorig.errors import UserError

Path_ = tuple[str | int, ...]


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
    return yaml.SafeLoader("").construct_object(node, deep=True)


def load_yaml(text: str, source: str) -> YamlDoc:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise UserError(f"{where}: not valid YAML: {problem}") from None
    if root is None:
        raise UserError(f"{source}: the file is empty")
    lines: dict[Path_, int] = {(): root.start_mark.line + 1}
    return YamlDoc(_convert(root, (), lines, source), lines, source)
