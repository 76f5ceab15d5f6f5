"""until: precise — the schema, --precision, the stored record and the live
watch (the interval and the stopping rule are tests/test_precision.py's)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from iorig.analyze.precision import LIVE_MARGIN, STOP_ARTIFACT_S, PrecisionWatch, precision_state
from iorig.errors import UserError
from iorig.model import AbLink
from iorig.scenario import loading as scenario
from iorig.scenario.precision import parse_precision, with_precision
from iorig.store import codecs

SCENARIO = """iorig: 1
name: p
version: 1
title: precise
targets:
  data:
    size: 16MiB
phases:
  - name: m
    kind: measure
    duration: 60s
    until: precise
    precision: 2%
    workloads:
      - {rw: randread, bs: 4KiB}
"""


def _load(tmp_path: Path, text: str) -> scenario.ResolvedScenario:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return scenario.load(str(path))


def test_a_precise_phase_keeps_its_settings(tmp_path):
    (phase,) = _load(tmp_path, SCENARIO).scenario.phases
    assert (phase.precision_pct, phase.min_s, phase.duration) == (2.0, 10.0, 60.0)
    bare = _load(tmp_path, SCENARIO.replace("    precision: 2%\n", ""))
    assert bare.scenario.phases[0].precision_pct == 2.0  # the default


@pytest.mark.parametrize(
    ("change", "line", "message"),
    [
        (("kind: measure", "kind: warmup"), 9, "until: precise applies to measure phases"),
        (("    until: precise\n", ""), 9, "'precision' and 'min' need until: precise"),
        (("precision: 2%", "precision: 0%"), 9, "above 0 % and at most 50 %"),
        (("precision: 2%", "precision: 2%\n    min: 5s"), 9, "min must be at least 8 s"),
        (("duration: 60s", "duration: 9s"), 9, "cannot be shorter than min (10 s)"),
        (
            ("precision: 2%", "precision: 2%\n    events: [{at: 5s, do: mark here}]"),
            9,
            "events happen at set times",
        ),
    ],
)
def test_bad_precise_phases_name_file_line_and_fix(tmp_path, change, line, message):
    with pytest.raises(UserError) as err:
        _load(tmp_path, SCENARIO.replace(*change))
    assert f"p.yaml:{line}:" in str(err.value) and message in str(err.value)


def test_precision_option_makes_measures_precise_and_warmups_steady():
    peak = with_precision(scenario.load("peak"), 2.0).scenario
    by_name = {p.name: p for p in peak.phases}
    for name in ("random-read", "sequential-read", "random-write", "sequential-write"):
        assert (by_name[name].until, by_name[name].precision_pct) == ("precise", 2.0)
        assert by_name[name].duration == 60.0  # now the maximum
    assert by_name["warmup"].until == "steady" and by_name["warmup"].duration == 300.0
    assert by_name["fill"].until == "duration" and by_name["pause-1"].duration == 60.0


def test_precision_option_says_which_phases_it_cannot_serve():
    # quick peak's 5 s phases are too short for any interval
    with pytest.raises(UserError, match="no measure phase of 'peak' can run until precise"):
        with_precision(scenario.load("peak", "quick"), 2.0)
    r = with_precision(scenario.load("peak", "quick", {"duration": "20s"}), 2.0)
    assert any("warm-up 'warmup' lasts 3 s" in n for n in r.notes)
    assert [p.min_s for p in r.scenario.phases if p.until == "precise"] == [10.0] * 4
    short = with_precision(scenario.load("peak", "quick", {"duration": "9s"}), 2.0)
    assert {p.min_s for p in short.scenario.phases if p.until == "precise"} == {9.0}


@pytest.mark.parametrize("text", ["0", "-1%", "51%", "two"])
def test_bad_precision_option_is_refused(text):
    with pytest.raises(UserError, match="--precision"):
        parse_precision(text)


def test_precision_state_round_trips_and_hostile_payloads_are_refused():
    rng = np.random.default_rng(3)
    state = precision_state(list(1000 + 10 * rng.standard_normal(40)), "iops", 2.0, 10, 60)
    assert state.precise and state.low < state.median < state.high
    assert codecs.PRECISION.decode(codecs.PRECISION.encode(state)) == state
    assert codecs.PRECISION.decode(codecs.PRECISION.encode(None)) is None
    good = json.loads(codecs.PRECISION.encode(state))
    for key, bad in [
        ("metric", "latency"),
        ("seconds", True),
        ("confidence", 2),
        ("low", "x"),
        ("precise", 1),
        ("why", "x" * 500),
    ]:
        doc = json.loads(json.dumps(good))
        doc[key] = bad
        with pytest.raises(codecs.PayloadError):
            codecs.PRECISION.decode(json.dumps(doc))
    doc = json.loads(json.dumps(good))
    doc["extra"] = 1
    with pytest.raises(codecs.PayloadError):
        codecs.PRECISION.decode(json.dumps(doc))


def test_ab_link_round_trips_and_hostile_payloads_are_refused():
    link = AbLink("ab-1", "a", "0123456789ab", ("a", "b", "b"))
    assert codecs.AB.decode(codecs.AB.encode(link)) == link
    for data in [
        {"id": "x", "side": "c", "peer": "p", "first": []},
        {"id": "", "side": "a", "peer": "p", "first": []},
        {"id": "x", "side": "a", "peer": "p", "first": ["a", "z"]},
        {"id": "x", "side": "a", "peer": "p"},
    ]:
        with pytest.raises(codecs.PayloadError):
            codecs.AB.decode(json.dumps(data))


def _feed(watch: PrecisionWatch, rates: list[float], start_s: float = 0.0) -> int | None:
    """Feed cumulative counters one second apart; the second it said stop."""
    ios = 0.0
    for i, rate in enumerate(rates):
        if watch.feed(int((start_s + i) * 1000), start_s + i, ios, ios * 4096):
            return i
        ios += rate
    return None


def test_the_live_watch_stops_a_steady_series_early_and_a_drift_never():
    rng = np.random.default_rng(5)
    steady = list(1000 * (1 + 0.01 * rng.standard_normal(120)))
    watch = PrecisionWatch(2.0, 10, 120, "iops")
    stopped = _feed(watch, steady)
    assert stopped is not None and stopped <= 20
    # not before the stored series, short of the seconds the stop distorts, holds the minimum
    assert len(watch.series) >= 10 + STOP_ARTIFACT_S
    # stopped at the margin: the live view is within LIVE_MARGIN of what was asked
    assert watch.decision.interval.half_width_pct <= 2.0 * LIVE_MARGIN
    drift = list(np.linspace(1000, 2000, 120))
    assert _feed(PrecisionWatch(2.0, 10, 120, "iops"), drift) is None


def test_the_live_watch_skips_the_ramp_and_reads_the_headline_metric():
    watch = PrecisionWatch(2.0, 10, 60, "bytes_per_s", skip_s=5)
    _feed(watch, [1.0] * 5 + [100.0] * 10)
    # ramp seconds are not measured; bytes (×4096) are, not I/Os
    assert watch.series and set(watch.series) == {100.0 * 4096}


@pytest.mark.parametrize("name", scenario.builtin_names())
def test_precision_option_applies_to_every_builtin_or_says_why_not(name):
    if name == "availability":  # its one measure phase stops a host at a set time
        with pytest.raises(UserError, match="'steady' has events at set times"):
            with_precision(scenario.load(name), 2.0)
        return
    if name in ("train", "checkpoint"):  # measured until their data is through
        with pytest.raises(UserError, match="runs until its workloads are through"):
            with_precision(scenario.load(name), 2.0)
        return
    r = with_precision(scenario.load(name), 2.0)
    precise = [p for p in r.scenario.phases if p.until == "precise"]
    assert precise and all(p.kind == "measure" and p.precision_pct == 2.0 for p in precise)
