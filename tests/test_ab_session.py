"""Interleaved A/B without fio (run/ab.py on FakeBackend, a real SQLite
database): setup once per side, rounds in a seeded random order that is
recorded in both runs' links, the paired verdict in ``compare``, auto
stopping, Ctrl-C mid-round, the store's link update, and the CLI refusing
a bad side before any run or file exists."""

from __future__ import annotations

import random

import pytest
from tests.fake_backend import FakeBackend, Step

from iorig.analyze.ab import MIN_AUTO_ROUNDS
from iorig.analyze.analysis import analyse, compare
from iorig.model import AbLink, RunStatus
from iorig.report.tables.ab import DRIFT_NOTE, ab_lines
from iorig.report.tables.compare import comparison_notes
from iorig.run.ab import AbSettings, Side, run_ab
from iorig.scenario.loading import resolve, source_from_text
from iorig.store import Store

SCENARIO = """
name: s
title: A/B test
targets:
  data: {size: 16MiB}
phases:
  - {name: fill, kind: prefill, workloads: [{rw: write, bs: 1MiB}]}
  - {name: one, kind: measure, duration: 3s, workloads: [{name: rr, rw: randread, bs: 4k}]}
  - {name: rest, kind: idle, duration: 0.01s}
  - {name: two, kind: measure, duration: 3s, workloads: [{name: rr, rw: randread, bs: 4k}]}
  - {name: check, kind: verify, workloads: [{rw: read, bs: 1MiB}]}
"""


def _sides(step_b=lambda p, r: Step(scale=0.9), step_a=lambda p, r: Step()):
    resolved = resolve(source_from_text(SCENARIO, "s.yaml"))
    out = []
    for key, steps in (("a", step_a), ("b", step_b)):
        backend = FakeBackend(steps=steps)
        plan = backend.prepare(resolved, {}, allow_destroy=False, repeats=1)
        out.append(Side(key, plan, backend, key.upper()))
    return tuple(out)


def _ab(db_path, sides, **settings):
    with Store(db_path) as store:
        outcome = run_ab(sides, store, AbSettings(**settings), command="test")
        runs = (store.load_run(outcome.a.run_id), store.load_run(outcome.b.run_id))
    return outcome, runs


def test_rounds_run_in_a_seeded_random_order_recorded_in_both_links(db_path):
    sides = _sides()
    outcome, (ra, rb) = _ab(db_path, sides, rounds=6, seed=11)
    rng = random.Random(11)
    expected = tuple("a" if rng.random() < 0.5 else "b" for _ in range(6))
    assert outcome.first == expected and outcome.rounds == 6
    assert set(expected) == {"a", "b"}  # this seed draws both orders
    assert ra.run.ab == AbLink(outcome.id, "a", rb.run.id, expected)
    assert rb.run.ab == AbLink(outcome.id, "b", ra.run.id, expected)
    for side in sides:  # setup and the verify once, the round block per round
        ran = side.backend.ran
        assert ran[0] == ("fill", 0) and ran[-1] == ("check", 0)
        assert ran[1:-1] == [(n, r) for r in range(6) for n in ("one", "two")]
    assert [p.repeat for p in ra.phases if p.name == "rest"] == list(range(6))
    assert any("random.Random(11)" in w.message for w in ra.run.warnings)
    assert ra.run.status is rb.run.status is RunStatus.OK
    again, _ = _ab(db_path, _sides(), rounds=6, seed=11)
    assert again.first == expected  # the same seed, the same order


def test_compare_of_the_two_runs_uses_the_paired_rounds(db_path):
    _, (ra, rb) = _ab(db_path, _sides(), rounds=3, seed=2)
    cmp = compare([analyse(ra), analyse(rb)])
    assert cmp.ab is not None and [p.name for p in cmp.ab.phases] == ["one", "two"]
    for phase in cmp.phases:
        diff = phase.differences[1]
        assert diff.method == "paired rounds" and diff.verdict == "worse"
        assert diff.test.ratio == pytest.approx(0.9, abs=0.001)
    lines = ab_lines(cmp)
    assert lines[0].startswith("one: B is 10.0 % slower than A (95 % CI")
    assert DRIFT_NOTE not in comparison_notes(cmp)
    # the reverse order pairs them the other way round
    back = compare([analyse(rb), analyse(ra)])
    assert back.phases[0].differences[1].verdict == "better"
    # a run of the pair with an unrelated one is an ordinary comparison
    _, (other, _) = _ab(db_path, _sides(), rounds=2, seed=3)
    plain = compare([analyse(ra), analyse(other)])
    assert plain.ab is None and DRIFT_NOTE in comparison_notes(plain)


def test_auto_stops_at_three_rounds_when_the_answer_is_clear_and_at_the_maximum_if_never(db_path):
    outcome, _ = _ab(db_path, _sides(), seed=1)  # 10 % slower, the same every round
    assert outcome.rounds == MIN_AUTO_ROUNDS
    wobble = [1.0, 1.08, 0.95, 1.1, 0.9, 1.04, 0.97, 1.12]
    sides = _sides(step_b=lambda p, r: Step(scale=wobble[r % len(wobble)]))
    outcome, _ = _ab(db_path, sides, seed=1, max_rounds=5)
    assert outcome.rounds == 5


def test_ctrl_c_in_a_round_keeps_the_completed_rounds_and_aborts_both_runs(db_path):
    sides = _sides(step_b=lambda p, r: Step(scale=0.9, interrupt=r == 2 and p.name == "two"))
    outcome, (ra, rb) = _ab(db_path, sides, rounds=5, seed=4)
    assert ra.run.status is rb.run.status is RunStatus.ABORTED
    assert outcome.rounds == 2 and len(outcome.first) == 3
    assert ra.run.ab.first == outcome.first == rb.run.ab.first
    assert ("check", 0) not in sides[0].backend.ran
    cmp = compare([analyse(ra), analyse(rb)])
    two = next(p for p in cmp.ab.phases if p.name == "two")
    assert two.rounds == (0, 1)  # the interrupted phase is not paired
    assert sides[0].backend.cleaned and sides[1].backend.cleaned


def test_a_failed_side_fails_the_other(db_path):
    sides = _sides(step_a=lambda p, r: Step(fail="boom" if r == 1 and p.name == "one" else None))
    _, (ra, rb) = _ab(db_path, sides, rounds=4, seed=5)
    assert ra.run.status is rb.run.status is RunStatus.FAILED
    assert "side A failed" in (rb.run.error or "")


def test_the_store_rewrites_a_runs_ab_link(db_path):
    _, (ra, _) = _ab(db_path, _sides(), rounds=2, seed=6)
    link = AbLink("x1", "a", "peer1", ("b", "a", "a"))
    with Store(db_path) as store:
        store.set_ab(ra.run.id, link)
        assert store.load_run(ra.run.id).run.ab == link
        with pytest.raises(KeyError):
            store.set_ab("nosuchrun", link)


@pytest.mark.system
def test_the_cli_refuses_a_bad_side_before_any_run_or_file(refused, scratch, db_path):
    x, y = scratch / "x.dat", scratch / "y.dat"
    done = refused(
        "ab",
        "--rw",
        "randread",
        "--duration",
        "1s",
        "--size",
        "4MiB",
        "--a",
        f"target={x}",
        "--b",
        f"target={y},iodepth=zero",
    )
    assert done.returncode == 2 and "side B" in done.stderr, done.stderr
    assert not x.exists() and not y.exists()
    done = refused("ab", "--rw", "randread", "--a", f"target={x}", "--b", "nonsense")
    assert done.returncode == 2 and "--b 'nonsense': expected name=value" in done.stderr
    done = refused("ab", "--rw", "randread", "--a", f"target={x}")
    assert done.returncode == 2 and "side B is not given" in done.stderr
    if db_path.exists():
        with Store(db_path) as store:
            assert store.list_runs() == []
