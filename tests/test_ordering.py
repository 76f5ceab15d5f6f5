"""make test's order (tests/ordering.py): each worker's share of the tests
is worksteal's first split by count, its long tests first and balanced."""

from __future__ import annotations

from tests.ordering import shares


def _split(count: int, workers: int) -> list[int]:
    """The counts pytest-xdist's worksteal sends idle workers at the start."""
    sizes, left = [], count
    for worker in range(workers):
        sizes.append(left // (workers - worker))
        left -= sizes[-1]
    return sizes


def test_each_share_has_worksteals_count_and_every_test_once() -> None:
    seconds = [40.0, None, 3.0, None, 30.0, 0.6, None, 12.0, None, None, 20.0, None, None]
    held = shares(seconds, 5)
    assert [len(share) for share in held] == _split(len(seconds), 5)
    assert sorted(i for share in held for i in share) == list(range(len(seconds)))


def test_long_tests_go_longest_first_to_the_share_with_fewest_seconds() -> None:
    # longest first, each to the lighter share: 40+12 and 30+30 seconds,
    # where the consecutive halves would be 30+40 and 30+12
    seconds = [None, 30.0, None, 40.0, 30.0, None, 12.0, None]
    held = shares(seconds, 2)
    loads = sorted(sum(seconds[i] or 0 for i in share) for share in held)
    assert loads == [52.0, 60.0]
    for share in held:  # a share runs its timed tests longest first, then the quick ones
        timed = [seconds[i] for i in share if seconds[i] is not None]
        assert timed == sorted(timed, reverse=True)
        assert share[: len(timed)] == [i for i in share if seconds[i] is not None]


def test_quick_tests_keep_their_order_within_a_share() -> None:
    seconds: list[float | None] = [None] * 10
    assert shares(seconds, 3) == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
    assert shares(seconds, 1) == [list(range(10))]
