"""A call waited for a bounded time (iorig.bounded)."""

from __future__ import annotations

import threading
import time

from iorig.bounded import Returned, within


def test_a_call_that_returns_in_time_gives_its_value():
    assert within(lambda: 42, 5.0) == Returned(value=42)


def test_a_call_that_raises_in_time_hands_over_what_it_raised():
    def fail() -> None:
        raise OSError(5, "Input/output error")

    returned = within(fail, 5.0)
    assert returned is not None and returned.value is None
    assert isinstance(returned.error, OSError) and returned.error.errno == 5


def test_a_call_that_does_not_return_is_given_up_on_at_the_timeout():
    release = threading.Event()
    started = time.monotonic()
    try:
        assert within(release.wait, 0.2) is None
        waited_s = time.monotonic() - started
    finally:
        release.set()  # the thread it left behind ends
    # given up on: not waited for until the call returned (never, without release)
    assert 0.2 <= waited_s < 5.0
