"""fio users' own job files (``iorig run JOB.fio``): the parser on hostile
files, the option policy, the translation into a scenario, and a job file's
run on the fake backend (stored verbatim, shown by ``show --jobs``). fio's
own examples run with fio in tests/test_fio_jobfiles_e2e.py."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from pydantic import ValidationError
from tests.fake_backend import FakeBackend

from iorig.analyze.analysis import analyse
from iorig.errors import UserError
from iorig.fio.jobfile import WHITELIST, render_options
from iorig.model import Metric, PhaseKind
from iorig.report.tables.run import run_tables
from iorig.report.writers.disclosure import disclosure_context
from iorig.run.jobtext import job_text
from iorig.run.request import RunRequest
from iorig.run.session import execute
from iorig.scenario.fiofile import MAX_LINE_CHARS, parse_job_file
from iorig.scenario.fiojobs import SIZED_STARTUP_S, sized_limit_s
from iorig.scenario.fiopolicy import PASSED, ValueProblem, fio_size, fio_time_us
from iorig.scenario.loading import ScenarioSource, is_job_file, read_source, resolve
from iorig.scenario.schema import Workload
from iorig.store import Store

EXAMPLES = Path(__file__).resolve().parent / "data" / "fio-examples"
TIMED = "time_based\nruntime=10\nsize=16m\nfilename=/srv/iorig-test.dat\n"


def _source(tmp_path: Path, text: str, name: str = "job.fio") -> ScenarioSource:
    path = tmp_path / name
    path.write_text(text)
    return read_source(str(path))


def _refusal(tmp_path: Path, text: str) -> str:
    with pytest.raises(UserError) as caught:
        _source(tmp_path, text)
    return str(caught.value)


# ------------------------------------------------------------------ the parser


def test_sections_options_flags_comments_and_their_lines():
    text = (
        "; a comment\n# another\n[global]\r\nrw = randread ; inline comment\n  time_based\n\n"
        "[job one]\nbs=4k# no space needed\nnumjobs=4\t; a tab first\n"
    )
    job = parse_job_file(text, "x.fio")
    assert [(s.name, s.line) for s in job.sections] == [("global", 3), ("job one", 7)]
    (rw, flag), (bs, jobs) = (s.options for s in job.sections)
    assert (rw.name, rw.value, rw.line) == ("rw", "randread", 4)
    assert (flag.name, flag.value, flag.line) == ("time_based", None, 5)
    assert (bs.value, jobs.value, jobs.line) == ("4k", "4", 9)


def test_comments_may_say_anything():
    text = "; include /etc/x $HOME exec_prerun=/bin/sh\n[j]\n# $(reboot)\nrw=read ; include y\n"
    (job,) = parse_job_file(text, "x.fio").sections
    assert [o.text for o in job.options] == ["rw=read"]


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("[job]\ninclude /etc/fio/extra.fio\n", 2, "include reads another file"),
        ("[job]\nincludes=x\n", 2, "include reads another file"),  # fio's own test: a prefix
        ("[job]\nfilename=${HOME}/x\n", 2, "'$': fio would expand it"),
        ("[job]\nsize=$mb_memory\n", 2, "'$'"),
        ("[job]\nbs=($pagesize*2)\n", 2, "'$'"),
        ("[job]\nsize=1" + "0" * 5000 + "\n", 2, "characters long"),
        ("[globalx]\nrw=read\n", 1, "begins with 'global'"),
        ("[Global2]\nrw=read\n", 1, "begins with 'global'"),
        ("[ job]\n", 1, "section name"),
        ("[]\n", 1, "section name"),
        ("[../../etc/passwd]\n", 1, "section name"),
        ("[" + "j" * 200 + "]\n", 1, "section name"),
        ("[a]b]\n", 1, "is not a section header"),
        ("[job\n", 1, "is not a section header"),
        ("[job;x]\n", 1, "is not a section header"),  # fio cuts the line at ';'
        ("rw=read\n[job]\n", 1, "outside any [section]"),
        ("[job]\nrw=read\x00\n", 2, "control character"),
        ("[job]\nrw=read\x1b[2J\n", 2, "control character"),
        ("[job]\n=5\n", 2, "is not an option"),
        ("[job]\nrw read\n", 2, "is not an option"),
    ],
)
def test_hostile_files_are_refused_naming_the_line(text, line, fragment):
    with pytest.raises(UserError) as caught:
        parse_job_file(text, "evil.fio")
    assert f"evil.fio:{line}:" in str(caught.value) and fragment in str(caught.value)


def test_files_with_no_job_too_many_sections_or_too_large_are_refused():
    for text, fragment in (
        ("[global]\nrw=read\n", "no job section"),
        ("".join(f"[j{i}]\n" for i in range(300)), "more than 256 sections"),
        ("[j]\n" + "; x\n" * 300_000, "larger than"),
    ):
        with pytest.raises(UserError, match=fragment):
            parse_job_file(text, "x.fio")


def test_a_line_up_to_the_limit_is_read():
    line = "description=" + "d" * (MAX_LINE_CHARS - len("description="))
    (job,) = parse_job_file(f"[j]\n{line}\n", "x.fio").sections
    assert len(job.options[0].value or "") == MAX_LINE_CHARS - len("description=")


def test_what_is_a_job_file():
    assert is_job_file("any.fio", "name: x\n")
    assert is_job_file("tiobench.job", "; tiobench\n\n[global]\nsize=1g\n")
    assert not is_job_file("mine.yaml", "[global]\n")  # a YAML name is a scenario
    assert not is_job_file("mine", "name: x\ntitle: y\n")


# ------------------------------------------------------------------ values


def test_sizes_and_times_are_read_as_fio_reads_them():
    # kb_base=1024, fio's default and compatibility mode: k and kb are 1024,
    # kib is 1000 (the reverse of IEC, as fio documents)
    assert [fio_size(t) for t in ("512", "4k", "4K", "4kb", "4KiB", "10G", "1m")] == [
        512,
        4096,
        4096,
        4096,
        4000,
        10 << 30,
        1 << 20,
    ]
    assert fio_time_us("900") == 900_000_000  # runtime: seconds by default
    assert fio_time_us("10ms") == 10_000 and fio_time_us("2m") == 120_000_000
    assert fio_time_us("250", default_unit="us") == 250  # thinktime: microseconds
    for text in ("1.5g", "0x10", "(1+2)", "10%", "4 k", "4kk", "", "kb"):
        with pytest.raises(ValueProblem):
            fio_size(text)
    for text in ("10min", "1.5s", "-3", "(60)"):
        with pytest.raises(ValueProblem):
            fio_time_us(text)


def test_every_passed_option_is_on_the_renderers_whitelist():
    samples = {
        "sync": "dsync",
        "thinktime_blocks_type": "issue",
        "random_generator": "lfsr",
        "rate_process": "poisson",
        "nice": "-5",
        "thinktime": "10ms",
    }
    for name, parse in PASSED.items():
        assert name in WHITELIST, name
        value = parse(samples.get(name, "1"))
        (line,) = render_options({name: value})
        assert line.startswith(name), line


@pytest.mark.parametrize(
    "option",
    [
        ("filename", "/etc/passwd"),
        ("exec_prerun", "/bin/sh"),
        ("write_lat_log", "x"),
        ("runtime", 5),
        ("ioengine", "exec"),
        ("size", 1),
    ],
)
def test_a_scenario_cannot_pass_what_a_job_file_may_not(option):
    name, value = option
    with pytest.raises(ValidationError, match="not an option iorig passes"):
        Workload(rw="randread", bs=4096, fio_options={name: value})


def test_a_scenarios_passed_options_are_read_like_a_job_files():
    w = Workload(rw="randread", bs=4096, fio_options={"thinktime": "2ms", "norandommap": 0})
    assert w.fio_options == {"thinktime": 2000, "norandommap": False}
    with pytest.raises(ValidationError, match="thinktime"):
        Workload(rw="randread", bs=4096, fio_options={"thinktime": "2 weeks"})


# ------------------------------------------------------------------ the policy


@pytest.mark.parametrize(
    ("option", "fragment"),
    [
        ("exec_prerun=/bin/touch /tmp/x", "runs a program before the job"),
        ("exec_postrun=/usr/bin/reboot", "runs a program after the job"),
        ("ioscheduler=none", "I/O scheduler"),
        ("read_iolog=/tmp/trace", "reads or writes a file"),
        ("write_iolog=/etc/cron.d/x", "reads or writes a file"),
        ("replay_redirect=/dev/sda", "reads or writes a file"),
        ("opendir=/", "every file under a directory"),
        ("cgroup=evil", "cgroups"),
        ("uid=0", "another user"),
        ("trigger=/bin/sh", "runs a program"),
        ("write_lat_log=/tmp/lat", "writes a log file where the job file says"),
        ("write_bw_log=bw", "writes a log file"),
        ("log_avg_msec=500", "per-second figures"),
        ("per_job_logs=0", "per-second figures"),
        ("fill_device=1", "until the device is full"),
        ("startdelay=5", "starts the job late"),
        ("wait_for=other", "use stonewall"),
        ("steadystate=iops:5%", "steady-state"),
        ("latency_target=5ms", "queue depth"),
        ("verify=md5", "verify phases"),
        ("do_verify=1", "verify phases"),
        ("stats=0", "stop measuring"),
        ("gtod_reduce=1", "stop measuring"),
        ("cpus_allowed=0-1", "taskset"),
        ("kb_base=1000", "kb_base=1024"),
        ("ioengine=external:/tmp/evil.so", "loads a library"),
        ("ioengine=exec", "runs a program"),
        ("ioengine=/tmp/evil.so", "loads a library"),
        ("ioengine=net", "engines"),
        ("filename=/tmp/a:/tmp/b", "several files"),
        ("filename=-", "standard input"),
        ("rw=randread:8", "offset modifier"),
        ("bs=4k,64k", "block size per direction"),
        ("bsrange=4k-64k", "range of block sizes"),
        ("size=50%", "share of the device"),
        ("rwmixwrite=30\nrwmixread=50", "do not add up to 100"),
        ("frobnicate=1", "not among the options iorig checks"),
        ("numjobs=5000", "out of range"),
        ("bs=1000", "multiple of 512"),
    ],
)
def test_each_refused_option_is_named_with_its_line_reason_and_fix(tmp_path, option, fragment):
    text = f"[global]\n{TIMED}rw=randrw\n\n[job]\n{option}\n"
    message = _refusal(tmp_path, text)
    assert fragment in message, message
    assert "job.fio:8:" in message or "job.fio:9:" in message, message  # the option's line


def test_every_problem_is_listed_at_once_with_the_section_it_came_from(tmp_path):
    message = _refusal(
        tmp_path,
        "[global]\nexec_prerun=/bin/touch /tmp/x\nstartdelay=2\n"
        + TIMED
        + "[a]\n[b]\nread_iolog=t\n",
    )
    lines = message.splitlines()
    assert "(3 problems)" in lines[0]
    assert any("job.fio:2: [global] exec_prerun=" in line for line in lines)
    assert any("job.fio:3: [global] startdelay=2" in line for line in lines)
    assert any("job.fio:10: [b] read_iolog=t" in line for line in lines)
    assert all(" — " in line for line in lines[1:4])  # each with its fix


def test_an_option_no_job_uses_is_refused_all_the_same(tmp_path):
    message = _refusal(
        tmp_path,
        f"[global]\n{TIMED}exec_prerun=/bin/a\n[j]\nexec_prerun=/bin/b\n[global]\nstartdelay=2\n",
    )
    assert "(3 problems)" in message  # overridden by [j]'s, in a trailing [global]: each named
    assert "job.fio:6: [global] exec_prerun=/bin/a" in message
    assert "job.fio:8: [j] exec_prerun=/bin/b" in message
    assert "job.fio:10: [global] startdelay=2" in message


def test_a_timed_job_needs_its_runtime_in_whole_milliseconds(tmp_path):
    message = _refusal(tmp_path, "[job]\nsize=16m\nfilename=/x\ntime_based\n")
    assert "time_based without runtime" in message and "add runtime=" in message, message
    message = _refusal(tmp_path, "[job]\nsize=16m\nfilename=/x\ntime_based\nruntime=1500us\n")
    assert "job.fio:5: [job] runtime=1500us: iorig times phases in whole milliseconds" in message
    message = _refusal(tmp_path, "[a]\nsize=16m\nfilename=/x\ntime_based\nruntime=2\n[b]\n")
    assert "some are time_based and some end after their size" in message, message


def test_jobs_run_together_share_their_runtime_and_their_target(tmp_path):
    message = _refusal(tmp_path, f"[global]\n{TIMED}[a]\n[b]\nruntime=20\n")
    assert "have different runtimes" in message and "stonewall" in message
    message = _refusal(tmp_path, f"[global]\n{TIMED}[a]\n[b]\nstonewall\nfilename=/srv/other\n")
    assert "the jobs name different files" in message and "[b] /srv/other" in message


# ------------------------------------------------------------------ the scenario


def test_fios_examples_become_scenarios():
    """fio's examples/fio-rand-read.fio, fio-seq-write.fio and fio-rand-RW.fio
    (copied with their commit): one measured phase of their one job, fio's
    options iorig's fields, the file's target, shrunk by --size and --set."""
    found = {}
    for name in ("fio-rand-read", "fio-seq-write", "fio-rand-RW"):
        source = read_source(str(EXAMPLES / f"{name}.fio"))
        assert source.origin == f"fio:{EXAMPLES / name}.fio"
        assert source.text == (EXAMPLES / f"{name}.fio").read_text()  # stored as given
        assert source.target == os.path.abspath(name)  # fio's own: relative to where it runs
        assert any(n.startswith(f"name={name} (line 6)") for n in source.notes), source.notes
        resolved = resolve(source, None, {"size": "64MiB", "duration": "2s"})
        phases = resolved.scenario.phases
        assert phases[-1].name == "file1" and phases[-1].duration == 2.0
        found[name] = (phases, phases[-1].workloads[0])
    phases, w = found["fio-rand-read"]
    assert [p.kind for p in phases] == [PhaseKind.PREFILL, PhaseKind.MEASURE]
    assert (w.rw, w.bs, w.iodepth, w.jobs, w.engine, w.direct, w.size) == (
        "randread",
        4096,
        16,
        1,
        "libaio",
        False,
        64 << 20,
    )
    phases, w = found["fio-seq-write"]
    assert [p.kind for p in phases] == [PhaseKind.MEASURE]  # writes: nothing to fill first
    assert (w.rw, w.bs, phases[0].headline) == ("write", 256 << 10, Metric.BYTES_PER_S)
    phases, w = found["fio-rand-RW"]
    assert (w.rw, w.read_pct, w.jobs, phases[-1].headline) == ("randrw", 60, 4, Metric.IOPS)
    # without --size and --set: the file's own 10 GiB and 900 s
    default = resolve(read_source(str(EXAMPLES / "fio-rand-RW.fio")))
    assert default.params["size"] == 10 << 30 and default.scenario.phases[-1].duration == 900


def test_stonewall_groups_are_phases_and_a_global_applies_to_the_jobs_after_it(tmp_path):
    text = (
        f"[global]\n{TIMED}rw=randread\n[a]\n[b]\nrw=randwrite\n[a]\nstonewall\nruntime=20\n"
        "[global]\niodepth=8\n[d]\nruntime=20\n"
    )
    resolved = resolve(_source(tmp_path, text))
    assert [p.name for p in resolved.scenario.phases] == ["prefill", "a", "a-2"]
    _, first, second = resolved.scenario.phases
    assert [(w.name, w.rw, w.iodepth) for w in first.workloads] == [
        ("a", "randread", 1),
        ("b", "randwrite", 1),
    ]
    assert [(w.name, w.iodepth) for w in second.workloads] == [("a-2", 1), ("d", 8)]
    assert (first.duration, second.duration) == (10, 20)
    shorter = resolve(_source(tmp_path, text), None, {"duration": "15s"})
    assert [p.duration for p in shorter.scenario.phases[1:]] == [10, 15]


def test_what_the_file_leaves_out_is_fios_default(tmp_path):
    resolved = resolve(_source(tmp_path, f"[j]\n{TIMED}"))
    (w,) = resolved.scenario.phases[-1].workloads
    assert (w.rw, w.bs, w.iodepth, w.jobs, w.engine, w.direct) == (
        "read",
        4096,
        1,
        1,
        "psync",
        False,
    )


def test_mapped_options_become_iorigs_fields(tmp_path):
    text = (
        f"[global]\n{TIMED}ramp_time=2\n[mix]\nrw=randrw\nrwmixwrite=30\nbssplit=4k/50:64k/50\n"
        "random_distribution=zipf:1.2\nbuffer_compress_percentage=50\ncontinue_on_error=1\n"
        "rate=1m\nbuffered=0\nioengine=io_uring\n[trims]\nrw=randtrim\nioengine=falloc\n"
    )
    (phase,) = resolve(_source(tmp_path, text)).scenario.measured
    mix, trims = phase.workloads
    assert (mix.read_pct, mix.bssplit, mix.distribution, mix.compress) == (
        70,
        "4096/50:65536/50",
        "zipf:1.2",
        50,
    )
    assert (mix.continue_on_error, mix.rate, mix.direct, mix.engine) == (
        "all",
        1 << 20,
        True,
        "io_uring",
    )
    assert phase.ramp == 2 and trims.engine == "auto"  # a file's trims: falloc, iorig's pick


def test_sizes_are_cut_to_the_target_and_offsets_kept(tmp_path):
    text = f"[global]\n{TIMED}[a]\n[b]\noffset=8m\nsize=4m\n"
    source = _source(tmp_path, text)
    assert resolve(source).params["size"] == 16 << 20  # the largest extent
    a, b = resolve(source, None, {"size": "10MiB"}).scenario.phases[-1].workloads
    assert (a.size, b.offset, b.size) == (10 << 20, 8 << 20, 2 << 20)


def test_the_target_is_the_files_own(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    timed = "time_based\nruntime=5\nsize=1m\n"
    assert _source(tmp_path, f"[j]\n{timed}filename=data.bin\n").target == str(
        tmp_path / "data.bin"
    )
    assert _source(tmp_path, f"[j]\n{timed}").target is None  # then --target is needed
    inside = _source(tmp_path, f"[j]\n{timed}directory=/mnt/ssd\nfilename=t.dat\n")
    assert inside.target == "/mnt/ssd/t.dat"
    folder = _source(tmp_path, f"[j]\n{timed}directory=/mnt/ssd\n")
    assert folder.target == "/mnt/ssd/" and "its own file in /mnt/ssd/" in " ".join(folder.notes)


def test_a_sized_job_runs_until_it_is_through_with_a_limit(tmp_path):
    """Without time_based a job ends after its size (io_size, number_ios,
    loops), as fio runs it: an until-done phase whose duration is a limit,
    the job's own runtime or iorig's (its bytes at 1 MiB/s, plus 10 s)."""
    sized = "filename=/srv/x.dat\nrw=randread\nsize=16m\n"

    def phase(options: str, **overrides: str):
        resolved = resolve(_source(tmp_path, f"[j]\n{sized}{options}"), None, overrides)
        return resolved.scenario.phases[-1]

    plain = phase("")
    assert (plain.kind, plain.until, plain.duration) == ("measure", "done", 16 + SIZED_STARTUP_S)
    assert sized_limit_s(16 << 20) == 16 + SIZED_STARTUP_S
    assert (phase("runtime=5\n").until, phase("runtime=5\n").duration) == ("done", 5)
    assert phase("", duration="2s").duration == 2  # --set duration, --quick: cut to time
    looped = phase("loops=3\nnumjobs=2\n")
    assert (looped.workloads[0].loops, looped.duration) == (3, 2 * 3 * 16 + SIZED_STARTUP_S)
    amount = phase("io_size=64m\n")
    assert amount.workloads[0].fio_options["io_size"] == 64 << 20
    assert amount.duration == 64 + SIZED_STARTUP_S
    counted = phase("number_ios=1000\n")  # 1000 × 4 KiB before its 16 MiB
    assert counted.workloads[0].fio_options["number_ios"] == 1000
    assert counted.duration == math.ceil(1000 * 4096 / (1 << 20)) + SIZED_STARTUP_S
    # a job without a size of its own: the limit follows the target's (--size)
    whole = resolve(
        _source(tmp_path, "[j]\nfilename=/srv/x.dat\nrw=read\n"), None, {"size": "100MiB"}
    )
    assert whole.scenario.phases[-1].duration == 100 + SIZED_STARTUP_S
    assert phase("", size="4MiB").workloads[0].size == 4 << 20  # cut to the target as ever


def test_a_sized_job_is_rendered_without_time_based_its_limit_fios_runtime(tmp_path, db_path):
    text = "[j]\nfilename=/srv/x.dat\nrw=randread\nsize=16m\nio_size=32m\n"
    plan, stored, _ = _fake_run(db_path, _source(tmp_path, text))
    lines = job_text(plan, stored.run.id, plan.phases[-1]).splitlines()
    assert "io_size=33554432" in lines and f"runtime={(32 + SIZED_STARTUP_S) * 1000}ms" in lines
    assert not any(line.startswith("time_based") for line in lines)
    assert plan.phases[-1].until_done
    # reported as a timed phase too: its data, how long it took, its rate
    with Store(db_path) as store:
        analysis = analyse(store.load_run(stored.run.id), store.job_texts(stored.run.id))
    (timed,) = [t for t in run_tables(analysis) if t.title == "Timed phases"]
    assert [row[:2] for row in timed.rows] == [("prefill", "prefill"), ("j", "measure")]


def _rules_rendered(plan, run_id: str) -> set[str]:
    lines = job_text(plan, run_id, plan.phases[-1]).splitlines()
    return {line for line in lines if line.partition("=")[0] in DATA_RULE_OPTIONS}


DATA_RULE_OPTIONS = {"norandommap", "randrepeat", "refill_buffers", "buffer_compress_chunk"}


def test_a_job_file_gets_fios_data_defaults_and_iorigs_rules_when_asked(tmp_path, db_path):
    """By default none of iorig's data rules is rendered; with the parameter
    (``--iorig-data-rules``) each is, where the file says nothing of it, and
    each is a finding of the run; the file's own setting wins either way."""
    text = f"[global]\n{TIMED}rw=randrw\nbuffer_compress_percentage=40\n[j]\n"
    plan, stored, _ = _fake_run(db_path, _source(tmp_path, text))
    assert _rules_rendered(plan, stored.run.id) == set()
    assert not any("data rules" in w.message for w in stored.run.warnings)
    plan, stored, _ = _fake_run(db_path, _source(tmp_path, text), iorig_data_rules="true")
    assert _rules_rendered(plan, stored.run.id) == {
        "norandommap=1",
        "randrepeat=0",
        "refill_buffers=1",
        "buffer_compress_chunk=4096",
    }
    disclosed = [w for w in stored.run.warnings if w.code == "not-as-fio"]
    for option in ("norandommap=1", "randrepeat=0", "refill_buffers=1"):
        (finding,) = [w for w in disclosed if w.message.startswith(f"[j] {option} where")]
        assert "iorig's data rules (--iorig-data-rules)" in finding.message
        assert f"fio's default {option[:-1]}" in finding.message
    assert stored.run.params["iorig_data_rules"]["origin"] == "--set"
    own = text + "norandommap=0\n"
    plan, stored, _ = _fake_run(db_path, _source(tmp_path, own), iorig_data_rules="true")
    assert "norandommap=0" in _rules_rendered(plan, stored.run.id)


def test_every_difference_from_bare_fio_is_a_finding_option_by_option(tmp_path, db_path):
    """fio's example, cut by --size and --set duration, on another target
    than its filename=, read after iorig's prefill: each change named with
    its reason; nothing else (iorig's logs are how it observes)."""
    source = read_source(str(EXAMPLES / "fio-rand-read.fio"))
    _, stored, _ = _fake_run(db_path, source, size="16MiB", duration="2s")
    found = [w for w in stored.run.warnings if w.code == "not-as-fio"]
    messages = sorted(w.message for w in found)
    assert len(found) == 4, messages
    assert any(
        m.startswith("[file1] filename=") and "the run's target (--target)" in m for m in messages
    )
    assert "[file1] size=16777216 (16MiB) where bare fio would run size=10G: the working set" in (
        " ".join(messages)
    )
    assert any(
        m.startswith("[file1] runtime=2000ms where bare fio would run runtime=900")
        for m in messages
    )
    assert any(
        m.startswith("iorig writes the target once before the jobs read it") for m in messages
    )
    assert all(w.severity == "info" for w in found)  # each asked for by the run's options
    # a sized job's limit and a directory's one file are iorig's own: warnings
    text = "[j]\ndirectory=/srv/dir\nrw=write\nsize=16m\nnumjobs=2\n"
    _, stored, _ = _fake_run(db_path, _source(tmp_path, text))
    imposed = {w.message.split(":")[0]: w for w in stored.run.warnings if w.code == "not-as-fio"}
    limit = next(w for k, w in imposed.items() if k.startswith("[j] runtime="))
    assert "iorig's limit on a sized job" in limit.message and limit.severity == "warning"
    place = next(w for k, w in imposed.items() if k.startswith("[j] filename="))
    assert "a file of its own per job in /srv/dir/" in place.message
    assert place.severity == "warning"


def test_iorigs_data_rules_are_asked_of_a_job_file_only(tmp_path, refused, db_path):
    request = RunRequest(data_rules=True)
    assert request.overrides()["iorig_data_rules"] == "true"
    request.check_data_rules(_source(tmp_path, f"[j]\n{TIMED}"))
    with pytest.raises(UserError, match="applies to fio job files"):
        request.check_data_rules(read_source("peak"))
    for command in ("run", "ab"):
        done = refused(command, "peak", "--iorig-data-rules", "--target", f"{tmp_path}/")
        out = done.stdout + done.stderr
        assert done.returncode == 2 and "applies to fio job files" in out, out
    assert not db_path.exists()


# ------------------------------------------------------------------ a run of one


def _fake_run(db_path: Path, source: ScenarioSource, **overrides: str):
    backend = FakeBackend()
    resolved = resolve(source, None, overrides)
    plan = backend.prepare(resolved, {}, allow_destroy=False, repeats=1)
    with Store(db_path) as store:
        outcome = execute(plan, store, backend, command="iorig run job.fio")
        return plan, store.load_run(outcome.run_id), store.job_texts(outcome.run_id)


def test_every_job_logs_on_the_unix_clock_a_slow_paced_one_every_completion(tmp_path, db_path):
    # a slow paced job logs every completion, a faster one one-second
    # windows; both on the unix clock, which the phase's second 0 and every
    # job's seconds are read from (iorig.run.collect._host_starts)
    text = f"[global]\n{TIMED}rw=randread\n[slow]\nrate_iops=20\n[fast]\nrate_iops=500\n"
    plan, stored, _ = _fake_run(db_path, _source(tmp_path, text))
    sections = job_text(plan, stored.run.id, plan.phases[-1]).split("\n[")
    slow, fast = (next(s for s in sections if s.startswith(f"{n}]")) for n in ("slow", "fast"))
    assert "write_lat_log=slow" in slow and "log_unix_epoch=1" in slow
    assert "write_iops_log=fast" in fast and "log_unix_epoch=1" in fast
    assert "write_lat_log" not in fast and "write_iops_log" not in slow


def test_passed_options_reach_fio_as_written_and_the_rest_as_iorig_renders_them(tmp_path, db_path):
    text = (
        f"[global]\nname=renamed\ngroup_reporting\n{TIMED}rw=randread\nioengine=libaio\n"
        "direct=1\niodepth=16\n[db]\nthinktime=100\nnorandommap=0\nfsync=8\nrate_iops=500\n"
    )
    plan, stored, _ = _fake_run(db_path, _source(tmp_path, text))
    lines = job_text(plan, stored.run.id, plan.phases[-1]).splitlines()  # as the run renders it
    for expected in (
        "[db]",
        "ioengine=libaio",
        "rw=randread",
        "direct=1",
        "iodepth=16",
        "thinktime=100",
        "norandommap=0",
        "fsync=8",
        "rate_iops=500",
        "rate_process=linear",
        "time_based=1",
        "runtime=10000ms",
        "write_hist_log=db",
    ):
        assert expected in lines, expected
    assert not any(line.startswith(("name=", "group_reporting")) for line in lines)
    assert any("group_reporting (line 3) is not passed" in n for n in plan.notes)


def test_a_job_files_run_stores_it_verbatim_and_show_jobs_prints_it(tmp_path, db_path, cli):
    source = read_source(str(EXAMPLES / "fio-rand-RW.fio"))
    _, stored, _ = _fake_run(db_path, source, size="64MiB", duration="3s")
    assert stored.run.job_file == (str(EXAMPLES / "fio-rand-RW.fio"), source.text)
    assert stored.run.scenario == "fio-rand-rw"
    shown = cli(db_path, "show", "last", "--jobs", check=True).stdout
    head = f"; the fio job file as given: {EXAMPLES / 'fio-rand-RW.fio'}"
    assert head in shown
    verbatim = shown[shown.index(head) + len(head) + 1 :]
    assert verbatim.startswith(source.text)  # every line, comments included
    assert "; phase file1" in verbatim  # then each phase's as run
    with Store(db_path) as store:
        analysis = analyse(store.load_run(stored.run.id), store.job_texts(stored.run.id))
    (first, text), *phases = disclosure_context(analysis)["jobs"]
    assert first.startswith("the fio job file as given") and text == source.text
    assert [name for name, _ in phases] == ["prefill", "file1"]


def test_a_refused_job_file_leaves_no_run_no_database_and_no_file(tmp_path, refused, db_path):
    target, marker = tmp_path / "data" / "target.dat", tmp_path / "ran"
    job = tmp_path / "prerun.fio"
    job.write_text(
        f"[global]\nrw=randread\nexec_prerun=/usr/bin/touch {marker}\nfilename={target}\n"
        "size=16m\ntime_based\nruntime=2\n\n[job]\n"
    )
    done = refused("run", str(job))
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert f"{job}:3: [global] exec_prerun=" in " ".join(out.split()), out
    assert not db_path.exists() and not target.parent.exists() and not marker.exists()


def test_a_null_engine_reads_nothing_so_nothing_is_written_first():
    """fio's examples/zipf.fio: 1280 MiB of random reads with ioengine=null,
    which touch no storage; fio lays nothing out, nor does iorig (it wrote
    the whole 1.25 GiB first)."""
    resolved = resolve(read_source(str(EXAMPLES / "zipf.fio")))
    assert [p.kind for p in resolved.scenario.phases] == [PhaseKind.MEASURE]
    assert resolved.scenario.phases[0].workloads[0].engine == "null"
