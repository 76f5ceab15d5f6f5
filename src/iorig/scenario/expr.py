"""Arithmetic in scenario templates: ``${mailboxes * iops_per_mailbox}``.

Scenario files are data, not code, so this is not Python's eval: the
expression is parsed with ``ast`` and only numbers, parameter names, the
operators + − × / // % and the functions min, max, round, ceil and floor are
accepted; anything else is refused with a message naming it.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

MAX_LENGTH = 200

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "round": round,
    "ceil": math.ceil,
    "floor": math.floor,
}


def evaluate(text: str, names: Mapping[str, Any]) -> int | float:
    """The value of an arithmetic expression over numeric ``names``.

    Raises ValueError naming what is wrong (unknown name, unsupported syntax,
    division by zero, a non-numeric parameter).
    """
    if len(text) > MAX_LENGTH:
        raise ValueError(f"expression longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"{text!r} is not an arithmetic expression") from None
    try:
        value = _eval(tree.body, names)
    except ZeroDivisionError:
        raise ValueError(f"{text!r} divides by zero") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    return value


def _eval(node: ast.AST, names: Mapping[str, Any]) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise ValueError(f"unknown parameter {node.id!r} in an expression")
        value = names[node.id]
        if isinstance(value, bool):
            return int(value)  # true/false count as 1/0, e.g. ${create * min(1, databases - 1)}
        if not isinstance(value, int | float):
            raise ValueError(f"parameter {node.id!r} is not a number ({value!r})")
        return value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_eval(node.left, names), _eval(node.right, names))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, names))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
        and node.args
    ):
        args = [_eval(a, names) for a in node.args]
        return _FUNCTIONS[node.func.id](*args)
    raise ValueError(
        f"{ast.unparse(node)!r} is not allowed in a scenario expression "
        f"(use numbers, parameters, + - * / // %, {', '.join(_FUNCTIONS)})"
    )
