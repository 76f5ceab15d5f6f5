"""Comparison statistics on constructed runs: seed 000's +2.26 %, verdicts,
winners, Welch's test and batch means."""

from __future__ import annotations

import math

import numpy as np
import pytest
from tests import builders

from iorig.analyze.analysis import analyse
from iorig.analyze.analysis import compare as compare_analyses
from iorig.analyze.compare import (
    NO_DIFFERENCE,
    compare_phases,
    phase_limit_share,
    pool_phases,
    verdict_text,
)
from iorig.analyze.precision import limit_share
from iorig.analyze.stats import batch_means, t_cdf, t_quantile, welch_ratio
from iorig.model import Metric, PhaseResult, StoredRun
from iorig.report.options import Limit, RenderOptions
from iorig.report.tables.compare import comparison_notes, comparison_tables, run_limit_table
from iorig.report.tables.run import to_markdown
from iorig.report.writers.fit import fit


def _phase(name: str, headline: str, per_second: np.ndarray, repeat: int = 0) -> PhaseResult:
    return builders.phase(name, per_second, Metric(headline), repeat=repeat)


def _run(run_id: str, label: str, phases: list[PhaseResult], **over: object) -> StoredRun:
    return builders.stored(run_id, label, phases, **over)


def compare(runs: list[StoredRun], job_texts: list[dict] | None = None, **options: float):
    texts = job_texts or [None] * len(runs)
    return compare_analyses([analyse(r, t) for r, t in zip(runs, texts, strict=True)], **options)


def _noisy(level: float, n: int = 60, spread: float = 0.01, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return level * (1 + spread * rng.standard_normal(n))


def _centered(median: float, n: int = 61, spread: float = 0.01, seed: int = 0) -> np.ndarray:
    """Noisy seconds whose median is exactly ``median`` (symmetric noise)."""
    half = np.abs(np.random.default_rng(seed).standard_normal(n // 2)) * spread
    return (
        median
        * np.concatenate([1 + half, 1 - half, [1.0]])[np.random.default_rng(seed).permutation(n)]
    )


def test_seed_000_median_random_read_gain_is_plus_2_26_percent():
    without = _run(
        "a1", "Without HBA PCI Passthrough", [_phase("random-read", "iops", _centered(117.55e3))]
    )
    with_ = _run(
        "b2",
        "With HBA PCI Passthrough",
        [_phase("random-read", "iops", _centered(120.21e3, seed=2))],
    )
    cmp = compare([without, with_])
    (phase,) = cmp.phases
    diff = phase.differences[1]
    assert round(diff.change_median * 100, 2) == 2.26
    median_table = comparison_tables(cmp, RenderOptions())[0]
    row = median_table.rows[0]
    assert row[:4] == ("random-read (IOPS)", "117.55K", "120.21K", "+2.26%")
    markdown = to_markdown(median_table)
    assert "| random-read (IOPS) | 117.55K | 120.21K | +2.26% |" in markdown
    assert markdown.splitlines()[2].startswith("| Test | Without HBA PCI Passthrough (Median)")


def test_clear_difference_names_the_winner():
    a = _run("a1", "A", [_phase("random-read", "iops", _noisy(100e3, seed=3))])
    b = _run("b2", "B", [_phase("random-read", "iops", _noisy(110e3, seed=4))])
    cmp = compare([a, b])
    phase = cmp.phases[0]
    assert phase.differences[1].verdict == "better"
    assert phase.winner(cmp.labels, "median") == "B"
    assert verdict_text(phase.differences[1]).startswith("significant (CI +")


def test_small_difference_is_no_significant_difference():
    a = _run("a1", "A", [_phase("random-read", "iops", _noisy(100e3, spread=0.0005, seed=5))])
    b = _run("b2", "B", [_phase("random-read", "iops", _noisy(101e3, spread=0.0005, seed=6))])
    cmp = compare([a, b], threshold=0.02)
    diff = cmp.phases[0].differences[1]
    assert diff.test is not None and diff.test.excludes_no_change()  # real but tiny
    assert diff.verdict == "same" and diff.below_threshold
    assert cmp.phases[0].winner(cmp.labels, "median") == NO_DIFFERENCE
    assert "under threshold" in verdict_text(diff)


def test_noise_is_no_significant_difference():
    a = _run("a1", "A", [_phase("random-read", "iops", _noisy(100e3, spread=0.2, n=10, seed=7))])
    b = _run("b2", "B", [_phase("random-read", "iops", _noisy(104e3, spread=0.2, n=10, seed=8))])
    cmp = compare([a, b])
    diff = cmp.phases[0].differences[1]
    assert diff.method == "batch means"
    assert diff.verdict == "same" and not diff.below_threshold
    assert cmp.phases[0].winner(cmp.labels, "max") == NO_DIFFERENCE


def test_repeats_are_used_when_both_runs_have_them():
    a = _run("a1", "A", [_phase("rr", "iops", _noisy(100e3, seed=s), repeat=s) for s in range(4)])
    b = _run(
        "b2", "B", [_phase("rr", "iops", _noisy(120e3, seed=10 + s), repeat=s) for s in range(4)]
    )
    cmp = compare([a, b])
    diff = cmp.phases[0].differences[1]
    assert diff.method == "repeats" and diff.test is not None
    assert (diff.test.n_a, diff.test.n_b) == (4, 4)
    assert diff.verdict == "better"
    assert cmp.phases[0].entries[0].per_second.size == 4 * 60  # seconds of all repeats pooled


def test_phase_only_in_one_run_is_listed_and_definitions_are_diffed():
    a = _run("a1", "A", [_phase("rr", "iops", _noisy(1e5)), _phase("extra", "iops", _noisy(1e5))])
    b = _run(
        "b2",
        "B",
        [_phase("rr", "iops", _noisy(1e5, seed=9))],
        fio_version="fio-3.36",
        targets=[{"role": "data", "kind": "file", "path": "/x", "size_bytes": 1}],
    )
    cmp = compare([a, b], [{"rr": "[rr]\nrw=randread\n"}, {"rr": "; run x\n[rr]\nrw=randwrite\n"}])
    assert [p.name for p in cmp.phases] == ["rr"]
    assert cmp.only_in == (("extra", "A"),)
    text = "\n".join(cmp.definition_differences)
    assert "fio version differs" in text and "fio-3.36" in text
    assert "target kind differs" in text
    assert "rr: fio option [rr] rw differs — A: randread; B: randwrite" in text


def test_compare_names_the_fio_options_that_differ_once_for_every_phase():
    """Two runs on different targets: the path differs in every phase's job
    file, said once; what differs in one phase only is said for that phase."""
    names = ("rr", "sw")
    a = _run("a1", "A", [_phase(n, "iops", _noisy(1e5)) for n in names])
    b = _run("b2", "B", [_phase(n, "iops", _noisy(1e5, seed=4)) for n in names])
    texts = [
        {n: f"; run {r}\n[{n}]\nfilename=/{r}/data.dat\nrw=randread\niodepth={d}\n" for n in names}
        for r, d in (("a", 4), ("b", 4))
    ]
    texts[1]["sw"] = texts[1]["sw"].replace("iodepth=4", "iodepth=8\nnorandommap")
    notes = compare([a, b], texts).definition_differences
    assert notes == (
        "every phase: fio option filename differs — A: /a/data.dat; B: /b/data.dat",
        "sw: fio option [sw] iodepth differs — A: 4; B: 8",
        "sw: fio option [sw] norandommap differs — A: (not set); B: (set)",
    ), notes


def test_job_text_comments_do_not_count_as_a_difference():
    a = _run("a1", "A", [_phase("rr", "iops", _noisy(1e5))])
    b = _run("b2", "B", [_phase("rr", "iops", _noisy(1e5, seed=3))])
    cmp = compare(
        [a, b], [{"rr": "; run a1\n[rr]\nrw=randread\n"}, {"rr": "; run b2\n[rr]\nrw=randread\n"}]
    )
    assert cmp.definition_differences == ()


def test_welch_ratio_matches_known_values():
    # Reference: scipy.stats.ttest_ind(log a, log b, equal_var=False) gives p = 0.000166
    test = welch_ratio([100, 102, 98, 101], [110, 111, 109, 112])
    assert test is not None
    assert test.ratio == pytest.approx(1.10231, rel=1e-4)
    assert test.p_value == pytest.approx(1.66e-4, rel=0.02)
    assert test.ci_low < test.ratio < test.ci_high
    assert welch_ratio([1.0], [2.0, 3.0]) is None


def test_repeats_without_spread_are_tested_at_the_rates_resolution():
    # storage held to an exact cap repeats its figure to the I/O: a 27 % drop
    # is certain, not untestable; the same figure on both sides is no change
    drop = welch_ratio([4000.0, 4000.0], [2929.7, 2929.7])
    assert drop is not None and drop.p_value < 1e-6
    assert drop.ci_low == pytest.approx(0.7324, rel=0.01) and drop.ci_high < 0.74
    same = welch_ratio([4000.0, 4000.0], [4000.0, 4000.0])
    assert same is not None and same.p_value == pytest.approx(1.0)
    # a one-I/O difference stays within the resolution: not significant
    assert welch_ratio([4000.0, 4000.0], [4000.0, 4001.0]).p_value > 0.05


def test_t_distribution_quantiles():
    assert t_quantile(0.975, 10) == pytest.approx(2.228139, abs=1e-5)
    assert t_quantile(0.975, 1) == pytest.approx(12.7062, abs=1e-3)
    assert t_quantile(0.95, 1e6) == pytest.approx(1.644854, abs=1e-4)
    assert t_cdf(0.0, 7) == pytest.approx(0.5)


def test_batch_means_use_equal_batches_and_drop_nan():
    values = [float(v) for v in range(30)] + [math.nan]
    means = batch_means(values, batches=10, min_batch=2)
    assert means == [1.0, 4.0, 7.0, 10.0, 13.0, 16.0, 19.0, 22.0, 25.0, 28.0]
    assert batch_means([1.0, 2.0, 3.0], batches=10, min_batch=2) == []
    # three batches of 2 s give too poor a variance to test anything: untestable
    assert batch_means([float(v) for v in range(7)], batches=10, min_batch=2) == []
    assert len(batch_means([float(v) for v in range(8)], batches=10, min_batch=2)) == 4


def test_a_big_change_that_cannot_be_tested_is_not_testable_not_no_difference():
    """5 s phases without repeats: batch means cannot judge even −52 %."""
    a = _run("a1", "A", [_phase("rr", "iops", _noisy(100e3, n=5, seed=1))])
    b = _run("b2", "B", [_phase("rr", "iops", _noisy(48e3, n=5, seed=2))])
    cmp = compare([a, b])
    diff = cmp.phases[0].differences[1]
    assert diff.verdict == "untestable" and round(diff.change_median * 100) == -52
    for figure in ("median", "max", "min"):
        assert cmp.phases[0].winner(cmp.labels, figure) == "not testable"
    row = comparison_tables(cmp, RenderOptions())[0].rows[0]
    assert row[-2:] == ("not testable", "not testable: too few samples")


# ------------------------------------------------------------ % of a limit


def _ar1(level: float, n: int, cov: float, rng: np.random.Generator, phi: float = 0.5):
    """Seconds around ``level`` with autocorrelation ``phi`` (a slow second
    is followed by slow seconds, as on real storage), CoV about ``cov``."""
    noise = np.empty(n)
    noise[0] = rng.standard_normal()
    for i in range(1, n):
        noise[i] = phi * noise[i - 1] + math.sqrt(1 - phi * phi) * rng.standard_normal()
    return level * (1 + cov * noise)


def test_a_phase_at_the_limit_is_called_above_it_rarely_and_one_above_it_almost_always():
    """60 autocorrelated seconds (X-Ray's phase): at exactly the limit (true
    share 100 %) "above" is the interval's one-sided error, 2.5 % if it
    covers as tests/test_precision.py measures; 5 % above with a 3 % CoV is
    found nearly every time."""
    rng = np.random.default_rng(26)
    trials = 2000

    def above(true_share: float) -> float:
        hits = 0
        for _ in range(trials):
            seconds = _ar1(1e4 * true_share, 60, 0.03, rng)
            (phase,) = pool_phases([_phase("rr", "iops", seconds)]).values()
            share = phase_limit_share(phase, 1e4, Metric.IOPS)
            hits += share is not None and share.above
        return hits / trials

    at, over = above(1.0), above(1.05)
    print(f"called above the limit: {at:.1%} at it, {over:.1%} at 105 %")
    assert at <= 0.05  # 2.5 % expected; 2,000 trials put 5 % beyond chance
    assert over >= 0.95


def test_a_device_at_its_cap_whose_first_second_overshot_is_not_above_it():
    """Issue 49: a throttled device is exactly at its cap every second (to
    fio's logged units) but lets the phase's first second through 7.5 %
    over (its first slice), which moves the phase mean (the share) and not
    the median: over 15 s the mean is 100.5 % of the cap, and the median
    second's narrow interval was entirely above it. Judged by the mean's
    own interval it is above as rarely as the interval errs; a device 3 %
    over its limit with the same first second is still found."""
    rng = np.random.default_rng(49)
    trials = 300  # the old rule called every one above; the new none

    def above(true_share: float, seconds_n: int) -> float:
        hits = 0
        for _ in range(trials):
            seconds = 1e4 * true_share * (1 + 0.0005 * rng.standard_normal(seconds_n))
            seconds[0] *= 1.075
            (phase,) = pool_phases([_phase("rr", "iops", seconds)]).values()
            share = phase_limit_share(phase, 1e4, Metric.IOPS)
            hits += share is not None and share.above
        return hits / trials

    for seconds_n in (15, 60):
        at, over = above(1.0, seconds_n), above(1.03, seconds_n)
        print(
            f"{seconds_n} s at the cap, first second +7.5 %: above {at:.1%}; 3 % over: {over:.1%}"
        )
        assert at <= 0.05
        assert over >= 0.95


def _at(level: float, seconds: np.ndarray) -> np.ndarray:
    return seconds * (level / seconds.mean())


def test_the_limit_table_says_whether_a_phase_is_above_it_beyond_its_noise():
    rng = np.random.default_rng(8)
    run = _run(
        "a1",
        "A",
        [
            _phase("random-read", "iops", _at(10_010, _ar1(1, 30, 0.02, rng))),  # 100.1 %: noise
            _phase("cached-read", "iops", _at(15_000, _ar1(1, 30, 0.02, rng))),  # a cache answered
            _phase("short-read", "iops", np.array([10_500.0, 9_600.0, 10_400.0])),  # cannot tell
            _phase("quick-read", "iops", np.array([30_000.0, 31_000.0, 29_000.0])),  # every second
            _phase("sequential-read", "bytes_per_s", _at(2e9, _ar1(1, 30, 0.02, rng))),
        ],
    )
    analysis = analyse(run)
    table = run_limit_table(analysis, Limit(10_000, Metric.IOPS, "--limit"))
    cells = {row[0]: row[1] for row in table.rows}
    assert cells["random-read"] == "100.1%" and cells["sequential-read"] == "-"
    notes = " ".join(table.notes)
    assert "random-read: A at 100.1% is within its noise of the limit" in notes
    assert "random-read: A is above" not in notes
    assert "cached-read: A is above the limit beyond its noise" in notes
    assert "a cache or data reduction answered" in notes
    assert "short-read: A at 101.7% is within its noise of the limit (96.0–" in notes
    assert "quick-read: A is above the limit beyond its noise (290.0–310.0% by the range" in notes
    assert "sequential-read: scored in bytes/s, not held to an IOPS limit" in notes
    # a bandwidth limit holds every phase to it
    table = run_limit_table(analysis, Limit(1e9, Metric.BYTES_PER_S, "--limit"))
    assert all(row[1] != "-" for row in table.rows)


def test_a_hair_over_the_limit_is_never_above_it_however_steady():
    """Identical repeats, or seconds all 0.05 % over a cap (a throttle's
    slices), are within what one logged second is known to (0.1 %)."""
    assert not limit_share(10_005, [], 10_000, repeat_levels=(10_005, 10_005)).above
    assert not limit_share(10_005, [10_005.0] * 5, 10_000).above
    assert not limit_share(10_005, [10_005.0] * 30, 10_000).above
    assert limit_share(10_500, [10_500.0] * 30, 10_000).above


# ------------------------------------------------------------ item 10: compare's wording


def _figure_rows(cmp) -> list[tuple[str, tuple[str, ...]]]:
    """(table, row) of the Median, Maximum and Minimum tables."""
    return [(t.title, row) for t in comparison_tables(cmp, RenderOptions())[:3] for row in t.rows]


def _contradicts(winner: str, significance: str) -> bool:
    """'no significant difference' beside a significance cell that calls a
    difference significant."""
    return winner == NO_DIFFERENCE and "significant (" in significance


def test_a_minimum_against_a_significant_throughput_is_not_called_no_difference():
    """Issue 26 item 10: B's throughput is 20 % above A's beyond the noise,
    but one slow second put B's minimum below A's. The Minimum row said "no
    significant difference" beside "significant (CI …)": the winner of a
    minimum needs the throughput test and the minimum to agree, and when
    they did not the decision fell back to a claim the test contradicts."""
    a = _run("a1", "A", [_phase("random-read", "iops", _noisy(100e3, seed=3))])
    slow_second = _noisy(120e3, seed=4)
    slow_second[30] = 50e3
    b = _run("b2", "B", [_phase("random-read", "iops", slow_second)])
    cmp = compare([a, b])
    assert cmp.phases[0].differences[1].verdict == "better"
    rows = dict(_figure_rows(cmp))
    assert rows["Median"][-2] == "B" and rows["Maximum"][-2] == "B"
    winner, significance = rows["Minimum"][-2:]
    assert significance.startswith("significant (CI +")
    assert not _contradicts(winner, significance), (winner, significance)
    assert winner == "none: the minimum moved against the throughput"


def test_winner_and_significance_never_contradict():
    """Over many constructed comparisons of two and three runs (levels apart
    or not, noisy or steady, with and without a slow or fast second), no
    row's winner says "no significant difference" where its significance
    column calls a difference significant."""
    rng = np.random.default_rng(2610)
    checked = 0
    for _ in range(100):
        runs = []
        for _i in range(int(rng.integers(2, 4))):
            level = 100e3 * (1 + rng.choice([0.0, 0.01, 0.05, 0.2, -0.2]))
            seconds = _noisy(
                level,
                n=int(rng.integers(10, 60)),
                spread=rng.choice([0.002, 0.05]),
                seed=int(rng.integers(1 << 30)),
            )
            if rng.random() < 0.5:
                seconds[int(rng.integers(seconds.size))] *= rng.choice([0.4, 1.6])
            runs.append(pool_phases([_phase("rr", "iops", seconds)]))
        labels = tuple(f"R{i}" for i in range(len(runs)))
        (phase,), _ = compare_phases(runs, labels, 0.02, 0.95)
        significance = " / ".join(verdict_text(d) for d in phase.differences if d is not None)
        for figure in ("median", "max", "min"):
            winner = phase.winner(labels, figure)
            assert not _contradicts(winner, significance), (figure, winner, significance)
            checked += 1
    assert checked == 300


def test_the_footer_of_an_untestable_comparison_is_a_sentence():
    """Issue 26 item 10: "significance by too few samples to test"."""
    a = _run("a1", "A", [_phase("rr", "iops", _noisy(100e3, n=5, seed=1))])
    b = _run("b2", "B", [_phase("rr", "iops", _noisy(48e3, n=5, seed=2))])
    notes = comparison_notes(compare([a, b]))
    (why,) = [n for n in notes if "too few" in n]
    assert why[0].isupper() and why.endswith("."), why
    assert "significance by too few" not in why.lower()
    assert "--repeat" in why and "8 seconds" in why, why  # what to do about it


def test_a_narrow_terminal_keeps_the_winner_and_the_significance():
    """Issue 26 item 10: at 80 columns compare left the winner out first.
    The % column goes before them (the significance carries the change's
    interval, and the two figures beside each other show it)."""
    a = _run("01c0ffee0001", None, [_phase("sequential-read", "bytes_per_s", _noisy(2.6e9))])
    b = _run(
        "05c0ffee0005",
        "with passthrough, cache off",
        [_phase("sequential-read", "bytes_per_s", _noisy(2.75e9, seed=5))],
    )
    cmp = compare([a, b])
    for table in comparison_tables(cmp, RenderOptions())[:3]:
        kept = fit(table, 80).model.headers
        assert "Winner" in kept and "Significance" in kept, (table.title, kept)
        # every run's figure stays too: what the winner won with
        assert sum(h.endswith(f"({table.title})") for h in kept) == 2, kept
