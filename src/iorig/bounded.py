"""A call that may never return (a frozen filesystem, name resolution with
no timeout of its own), waited for a bounded time in a daemon thread: the
caller says what a late call means instead of hanging with it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Returned(Generic[T]):
    """What a call that ended in time gave: its value, or what it raised."""

    value: T | None = None
    error: BaseException | None = None


def within(call: Callable[[], T], timeout_s: float) -> Returned[T] | None:
    """``call()`` waited for at most ``timeout_s``; None when it had not
    returned by then (it goes on in its daemon thread, which the process
    does not wait for at exit)."""
    box: list[Returned[T]] = []

    def run() -> None:
        try:
            box.append(Returned(value=call()))
        except BaseException as exc:  # handed to the caller, who decides
            box.append(Returned(error=exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(max(0.0, timeout_s))
    return box[0] if box else None
