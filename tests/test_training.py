"""AI training (MLPerf Storage-like, docs/methodology.md §11): the scenario's
phases, when batches arrived from the readers' completions, accelerator
utilisation and its verdict, on series whose answer is known."""

from __future__ import annotations

import heapq
import json
from dataclasses import replace

import numpy as np
import pytest

from iorig.analyze.training import analyze_training, epoch_au, simulate
from iorig.errors import UserError
from iorig.fio.parse import SampleLog
from iorig.model import Change, Outcome
from iorig.model.training import AcceleratorModel, AcceleratorTrace, TrainingRecord
from iorig.run.training import accelerator_ready_ms, traces
from iorig.scenario.loading import load
from iorig.scenario.training import accelerator_model, mlperf_dataset
from iorig.store import codecs

MODEL = AcceleratorModel(
    workload="resnet50",
    accelerator="h100",
    accelerators=1,
    epochs=2,
    batch=4,
    sample_bytes=1000.0,
    nominal_sample_bytes=1000,
    samples_per_file=1,
    files_per_job=10,
    reader_threads=2,
    compute_s=0.1,
    au_floor=0.9,
    loader="tensorflow",
    scale=1.0,
    direct=True,
    phase="train",
    workload_label="loader",
)  # 2 readers × 10 files = 20 samples an epoch: 5 steps of 4


def _reads(times_ms: list[float], size: int = 1000) -> SampleLog:
    n = len(times_ms)
    return SampleLog(np.array(times_ms), np.zeros(n), np.zeros(n), np.full(n, size))


def _line(model: AcceleratorModel, step_ms: float, start_ms: float = 0.0) -> np.ndarray:
    """Batches arriving one every ``step_ms``, the first at start + step."""
    steps = model.epochs * model.steps_per_epoch
    return (start_ms + step_ms * np.arange(1, steps + 1)).reshape(model.epochs, -1)


# ------------------------------------------------------------ the scenario


def test_a_training_section_becomes_a_data_set_and_a_paced_training_phase():
    resolved = load("train", profile="quick", overrides={"accelerators": "2"})
    datagen, train = resolved.scenario.phases
    assert (datagen.kind, train.kind, train.until) == ("prefill", "measure", "done")
    (w,) = train.workloads
    model = accelerator_model(resolved.scenario.training)
    assert w.jobs == 2 * model.reader_threads == 8
    assert (w.loops, w.whole_files, w.completions, w.engine) == (2, True, True, "psync")
    # each reader at its share of its accelerator's demand: batch × sample ÷ compute
    assert w.rate == pytest.approx(7 * model.sample_bytes / 0.323 / 4, abs=1)
    assert w.file_size == model.sample_bytes  # unet3d: one sample a file
    assert w.file_size % w.bs == 0  # a file is whole reads
    assert datagen.workloads[0].files == w.files == model.files_per_job
    assert model.files_per_job % 7 == 0  # a PyTorch worker builds whole batches


def test_mlperf_data_set_rule_and_sizes():
    spec = load("train", overrides={"workload": "resnet50", "accelerators": "4"}).scenario.training
    memory = 24 << 30
    # 5 × memory beats 500 steps × 400 samples × 4 accelerators × 114,660 bytes (92 GB)
    assert mlperf_dataset(replace_spec(spec, dataset=0), memory) == 5 * memory
    assert mlperf_dataset(replace_spec(spec, accelerators=64), memory) > 5 * memory
    model = accelerator_model(replace_spec(spec, dataset=10**9))
    # 1,251 samples of 114,660 bytes a file, rounded up to whole 256 KiB reads
    assert model.sample_bytes * 1251 % (256 << 10) == 0
    assert 0 < model.sample_bytes / 114_660 - 1 < 0.002
    assert model.compute_s == 0.224 and model.batch == 400 and model.au_floor == 0.9


def replace_spec(spec, **changes):
    return spec.model_copy(update=changes)


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        ({"workload": "bert"}, "expected one of unet3d, resnet50, cosmoflow"),
        ({"transfer": "6000"}, "multiple of 4096"),
        ({"scale": "0"}, "greater than 0"),
        ({"accelerators": "0"}, "greater than or equal to 1"),
    ],
)
def test_bad_training_settings_are_refused_by_name(sets, message):
    with pytest.raises(UserError, match=message):
        load("train", overrides=sets)


def test_a_training_scenario_with_phases_of_its_own_is_refused(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(
        "name: t\ntitle: t\ntraining:\n  workload: unet3d\n  scale: 0.001\n"
        "  dataset: 1MiB\nphases:\n  - {name: x, kind: idle, duration: 1s}\n"
    )
    with pytest.raises(UserError, match=r"t\.yaml:7.*gets its phases from it"):
        load(str(path))
    path.write_text("name: t\ntitle: t\ntraining:\n  workload: unet3d\n  epochs: 0\n")
    with pytest.raises(UserError, match=r"t\.yaml:5.*training\.epochs"):
        load(str(path))


# ------------------------------------------------------------ batches


def test_pooled_readers_complete_a_batch_when_its_bytes_are_read():
    # two readers, each read one sample (1,000 bytes) at a time; batch = 4 samples
    a = _reads([10.0 * i for i in range(1, 21)])
    b = _reads([10.0 * i + 5 for i in range(1, 21)])
    ready = accelerator_ready_ms(MODEL, [a, b])
    # pooled in time order: 10 15 20 25 | 30 35 40 45 | …; epoch 2 from the 21st read
    assert ready.tolist() == [[25, 45, 65, 85, 105], [125, 145, 165, 185, 205]]


def test_pytorch_workers_build_their_own_batches_in_turn():
    model = replace(MODEL, loader="pytorch", files_per_job=8)  # 2 batches a worker an epoch
    fast = _reads([float(t) for t in range(1, 17)])  # worker 0: batches 0, 2 at 4, 8 ms …
    slow = _reads([float(10 * t) for t in range(1, 17)])  # worker 1: batches 1, 3
    ready = accelerator_ready_ms(model, [fast, slow])
    assert ready[0].tolist() == [4, 40, 8, 80]
    assert ready[1].tolist() == [12, 120, 16, 160]


def test_a_reader_that_stopped_leaves_its_batches_missing():
    ready = accelerator_ready_ms(MODEL, [_reads([1, 2, 3]), _reads([])])
    assert np.isnan(ready[0, 0]) and np.isnan(ready).all()
    (trace,) = traces(MODEL, {"h1": [_reads([5.0] * 20)]}, {"h1": 1000.0})
    assert trace.label == "h1/0" and trace.ready_ms[0, 0] == 1005.0  # the missing reader


# ------------------------------------------------------------ utilisation


def test_batches_in_time_keep_every_accelerator_busy():
    t = analyze_training(TrainingRecord(MODEL, (AcceleratorTrace("local", 0, _line(MODEL, 90)),)))
    assert [f.au for f in t.epochs] == [1.0, 1.0]
    assert t.outcome is Outcome.PASS and t.mlperf_outcome is Outcome.PASS
    assert all(f.wait_max_ms == 0 for f in t.epochs)
    assert t.samples_per_s == pytest.approx(4 / 0.1)
    assert t.bytes_per_s == pytest.approx(4 / 0.1 * 1000)


@pytest.mark.parametrize("step_ms", [125.0, 200.0, 1000.0])
def test_storage_slower_than_the_accelerator_sets_au_to_compute_over_arrival(step_ms):
    t = analyze_training(
        TrainingRecord(MODEL, (AcceleratorTrace("local", 0, _line(MODEL, step_ms)),))
    )
    for f in t.epochs:
        assert f.au == pytest.approx(100 / step_ms)
        assert f.wait_p_ms[50.0] == pytest.approx(step_ms - 100)
    assert t.outcome is Outcome.FAIL
    assert t.why.startswith("epoch 1: AU")


def test_the_slowest_accelerator_holds_every_one_and_is_named():
    model = replace(MODEL, accelerators=2)
    fast = AcceleratorTrace("h1", 0, _line(model, 90))
    slow = AcceleratorTrace("h2", 0, _line(model, 100 / 0.8))
    t = analyze_training(TrainingRecord(model, (fast, slow)))
    assert [f.au for f in t.epochs] == pytest.approx([0.8, 0.8])  # the barrier
    alone = {a.host: a.au for a in t.accelerators}
    assert alone["h1"] == (1.0, 1.0) and alone["h2"] == pytest.approx((0.8, 0.8))
    assert {h.host: h.au for h in t.host_figures}["h1"] == (1.0, 1.0)
    assert t.outcome is Outcome.FAIL and "h2/0" in t.why and "epoch 1" in t.why
    assert t.hosts == 2 and t.accelerators_total == 4


def test_an_epoch_that_did_not_finish_has_no_verdict():
    ready = _line(MODEL, 90)
    ready[1, 3:] = np.nan
    t = analyze_training(TrainingRecord(MODEL, (AcceleratorTrace("local", 0, ready),)))
    assert t.epochs[0].au == 1.0 and t.epochs[1].au is None
    assert t.outcome is Outcome.INCOMPLETE and "epoch 2" in t.why


def test_the_first_step_of_every_epoch_is_left_out():
    ready = _line(MODEL, 90)
    ready[1, 0] += 5000  # a long wait for epoch 2's first batch
    steps = simulate(MODEL, [ready])
    assert np.isnan(steps.wait_ms[:, 0]).all()
    assert epoch_au(MODEL, steps).tolist() == [1.0, 1.0]


# ------------------------------------------------------------ the statistic


def _emulated_run(
    rng: np.random.Generator, ratio: float, accelerators: int = 2, steps: int = 60
) -> float:
    """The lowest epoch AU of a TensorFlow loader's emulation on a simulated
    device: each accelerator's 4 readers paced at their share of its demand
    (fio's linear rate: a read goes out at its place on the line, or at once
    when behind), one queue serving reads in turn with exponential service
    times whose mean gives ``ratio`` = demand ÷ capacity."""
    model = replace(
        MODEL, accelerators=accelerators, reader_threads=4, files_per_job=steps, epochs=1
    )
    per_reader = model.demand_bytes_per_s / 4 / 1000  # bytes a ms
    mean_service = model.sample_bytes / (accelerators * model.demand_bytes_per_s / ratio) * 1000
    readers = accelerators * 4
    done: list[list[float]] = [[] for _ in range(readers)]
    queue = [(0.0, r) for r in range(readers)]  # when each reader issues its next read
    free_at = 0.0
    while queue:
        issued, r = heapq.heappop(queue)
        start = max(issued, free_at)
        free_at = start + rng.exponential(mean_service)
        done[r].append(free_at)
        if len(done[r]) < steps:
            line = len(done[r]) * model.sample_bytes / per_reader
            heapq.heappush(queue, (max(free_at, line), r))
    logs = [_reads(d) for d in done]
    record = TrainingRecord(model, traces(model, {"h": logs}, {}))
    aus = [f.au for f in analyze_training(record).epochs]
    return min(a for a in aus if a is not None)


def test_au_and_its_verdict_on_simulated_devices_of_known_capacity():
    """Demand ÷ capacity ρ sets AU to min(1, 1/ρ) (docs/methodology.md §11);
    over 150 emulated runs each: the error of AU past the knee, and how often
    the verdict is wrong well on either side of the floor."""
    rng = np.random.default_rng(2026)
    trials = 150
    below = [_emulated_run(rng, 0.75) for _ in range(trials)]  # AU 1: PASS
    past = [_emulated_run(rng, 1.25) for _ in range(trials)]  # AU 0.8: FAIL
    far = [_emulated_run(rng, 2.0) for _ in range(trials)]  # AU 0.5
    false_fail = sum(a < 0.9 for a in below) / trials
    false_pass = sum(a >= 0.9 for a in past) / trials
    print(
        f"AU at ρ 0.75: mean {np.mean(below):.3f} (false FAIL {false_fail:.1%}); ρ 1.25: "
        f"mean {np.mean(past):.3f} (false PASS {false_pass:.1%}); ρ 2: mean {np.mean(far):.3f}"
    )
    assert false_fail <= 0.02 and false_pass <= 0.02
    assert np.mean(below) > 0.97
    assert np.mean(past) == pytest.approx(0.8, abs=0.02)
    assert np.mean(far) == pytest.approx(0.5, abs=0.02)


# ------------------------------------------------------------ stored


def test_a_training_record_round_trips_and_nonsense_is_refused():
    ready = _line(MODEL, 90)
    ready[1, 4] = np.nan
    record = TrainingRecord(MODEL, (AcceleratorTrace("h1", 0, ready),))
    back = codecs.TRAINING.decode(codecs.TRAINING.encode(record))
    assert back.model == MODEL
    np.testing.assert_array_equal(back.traces[0].ready_ms, ready)
    data = json.loads(codecs.TRAINING.encode(record))
    bad = [
        {**data, "model": {**data["model"], "workload": "bert"}},
        {**data, "model": {**data["model"], "batch": -1}},
        {**data, "model": {**data["model"], "batch": 0}},
        {**data, "model": {**data["model"], "reader_threads": 0}},
        {**data, "model": {**data["model"], "au_floor": 2.0}},
        {**data, "model": {**data["model"], "extra": 1}},
        {**data, "traces": [{**data["traces"][0], "ready_ms": [[1.0]]}]},
        {**data, "traces": [{**data["traces"][0], "ready_ms": [["x"] * 5, [1.0] * 5]}]},
        {**data, "traces": [{**data["traces"][0], "host": ""}]},
    ]
    for payload in bad:
        with pytest.raises(codecs.PayloadError, match="training"):
            codecs.TRAINING.decode(json.dumps(payload))
    assert codecs.TRAINING.decode("null") is None


# ------------------------------------------------------------ compared


def _analysis(model: AcceleratorModel, step_ms: list[float]) -> object:
    """A training phase whose epoch e's batches arrive every step_ms[e]."""
    ready = np.vstack(
        [(e * 10_000 + s * np.arange(1, model.steps_per_epoch + 1)) for e, s in enumerate(step_ms)]
    )
    return analyze_training(TrainingRecord(model, (AcceleratorTrace("h", 0, ready),)))


def _search(count_steps: dict[int, list[float]]):
    from iorig.analyze.search import AcceleratorPoint, AcceleratorsResult

    points = tuple(
        AcceleratorPoint(
            n, f"train:accelerators={n}", _analysis(replace(MODEL5, accelerators=n), s)
        )
        for n, s in sorted(count_steps.items())
    )
    most = max((p.accelerators for p in points if p.passed), default=0)
    return AcceleratorsResult(points, most, 0.9, 1)


MODEL5 = replace(MODEL, epochs=5)


def test_a_search_that_keeps_more_accelerators_is_better_when_the_other_fell_short_for_sure():
    from iorig.analyze.trainingcmp import compare_training

    a = _search({1: [90] * 5, 2: [90] * 5, 3: [150, 155, 160, 150, 152]})  # 3: AU ~0.65
    b = _search({1: [90] * 5, 2: [90] * 5, 4: [90] * 5, 5: [200] * 5})
    cmp = compare_training(["a", "b"], [a, b], [(), ()], 0.02)
    (change,) = cmp.changes
    assert change.change is Change.BETTER and "real" in change.sentence
    assert [f.accelerators for f in cmp.figures] == [2, 4]


def test_a_count_short_of_the_floor_only_by_noise_leaves_the_difference_undecided():
    from iorig.analyze.trainingcmp import compare_training

    # at 3, a's epochs swing around the floor: 100 / 90..125 ms
    a = _search({1: [90] * 5, 2: [90] * 5, 3: [125, 90, 118, 92, 121]})
    b = _search({1: [90] * 5, 2: [90] * 5, 4: [90] * 5, 5: [200] * 5})
    (change,) = compare_training(["a", "b"], [a, b], [(), ()], 0.02).changes
    assert change.change is Change.UNDECIDED and "within the noise" in change.sentence


def test_runs_of_the_same_accelerators_compare_their_epochs_au():
    from iorig.analyze.trainingcmp import compare_training

    slow = _analysis(MODEL5, [125, 126, 124, 125, 127])  # AU 0.8
    fast = _analysis(MODEL5, [90] * 5)  # AU 1
    cmp = compare_training(["a", "b"], [None, None], [(slow,), (fast,)], 0.02)
    assert cmp.changes[0].change is Change.BETTER
    same = compare_training(["a", "b"], [None, None], [(fast,), (fast,)], 0.02)
    assert same.changes[0].change is Change.SAME
    assert compare_training(["a", "b"], [None, None], [(fast,), ()], 0.02) is None


def test_a_phase_whose_readers_logged_nothing_has_no_verdict():
    t = analyze_training(TrainingRecord(MODEL, ()))
    assert t.outcome is Outcome.INCOMPLETE and all(f.au is None for f in t.epochs)
    assert t.au_mean is None and t.samples_per_s is None and t.hosts == 0
