"""One run request, built once from the options every run command shares
(cli/options.py), and the ordered checks of run/request.py's ``prepare``,
in-process on the fake backend: what the request asks for reaches the plan,
and every refusal comes before the backend is even made."""

from __future__ import annotations

from typing import Annotated

import pytest
import typer
from tests.fake_backend import FakeBackend
from typer.testing import CliRunner

from iorig.cli.options import GROUPS, build_request, run_options
from iorig.errors import UserError
from iorig.fio.hosts import parse_entry
from iorig.run.request import RunRequest, prepare
from iorig.scenario.adhoc import adhoc_source
from iorig.scenario.loading import resolve
from iorig.scenario.schema import Scenario


def _resolved(rw: str = "randread"):
    return resolve(adhoc_source(rw), None, {"duration": "2s", "size": "1MiB"})


class _Made:
    """A backend factory that records whether it was asked for a backend."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __call__(self, hosts, fio):
        self.calls.append((tuple(hosts), fio))
        return FakeBackend()


def test_the_request_reaches_the_plan(tmp_path):
    made = _Made()
    request = RunRequest(
        targets=(str(tmp_path / "data.bin"),),
        repeats=3,
        min_bytes_per_s=5e6,
        events=("randread@1s=mark half way",),
        notes=("cache off",),
        fio="/opt/fio",
    )
    plan, backend = prepare(_resolved(), request, backend_for=made)
    assert made.calls == [((), "/opt/fio")]
    assert isinstance(backend, FakeBackend)
    assert plan.min_bytes_per_s == 5e6
    assert plan.repeats == 3
    (measure,) = [p for p in plan.resolved.scenario.phases if p.name == "randread"]
    assert [e.do for e in measure.events] == ["mark half way"]
    assert plan.sut is not None and plan.sut.notes == ("cache off",)


@pytest.mark.parametrize(
    ("request_", "refused"),
    [
        (RunRequest(events=("randread@1s=run wipe",)), "not granted|wipe"),
        (RunRequest(events=("nosuch@1s=mark x",)), "no phase 'nosuch'"),
        (RunRequest(events=("randread@9s=mark x",)), "randread"),
        (RunRequest(targets=("a=/x", "b=/y")), "target"),
    ],
    ids=["command-not-granted", "no-such-phase", "event-after-the-phase", "unknown-roles"],
)
def test_a_request_is_refused_before_any_backend_or_file(tmp_path, request_, refused):
    made = _Made()
    with pytest.raises(UserError, match=refused):
        prepare(_resolved(), request_, backend_for=made)
    assert made.calls == []  # nothing made, nothing laid out
    assert list(tmp_path.iterdir()) == []


def test_write_state_checks_are_refused_on_fio_servers():
    resolved = _resolved("randwrite")
    phases = [
        p.model_copy(
            update={
                "workloads": [
                    w.model_copy(update={"verify_state": True, "verify": "crc32c"})
                    for w in p.workloads
                ]
            }
        )
        for p in resolved.scenario.phases
    ]
    scenario = Scenario.model_validate(
        resolved.scenario.model_dump() | {"phases": [p.model_dump() for p in phases]}
    )
    resolved = type(resolved)(**{**resolved.__dict__, "scenario": scenario})
    made = _Made()
    request = RunRequest(hosts=(parse_entry("127.0.0.2"),))
    with pytest.raises(UserError, match="verify_state"):
        prepare(resolved, request, backend_for=made)
    assert made.calls == []


def test_overrides_merge_sets_size_and_ad_hoc_options_once():
    request = RunRequest(sets=("a=1",), size="1GiB", workload={"bs": "4k", "iodepth": 8})
    assert request.overrides() == {"a": "1", "size": "1GiB", "bs": "4k", "iodepth": "8"}
    # a command may replace an ad-hoc option (knee fixes the dimension it keeps)
    assert request.overrides(iodepth=1, duration="30s")["iodepth"] == "1"
    with pytest.raises(UserError, match="size is given twice"):
        RunRequest(sets=("size=1MiB",), size="1GiB").overrides()


def test_build_request_reads_every_shared_option():
    given = {o.name: o.default for group in GROUPS.values() for o in group}
    given |= {
        "quick": True,
        "profile": "other",
        "target": ["/x"],
        "bs": "8k",
        "iodepth": 4,
        "hosts": "127.0.0.2,127.0.0.3",
        "min_rate": "2MiB/s",
        "label": "A",
        "note": ["n"],
    }
    request = build_request(given)
    assert request.profile == "quick" and request.quick  # --quick wins, as before
    assert request.targets == ("/x",)
    assert dict(request.workload) == {"bs": "8k", "iodepth": 4}
    assert [h.label for h in request.hosts] == ["127.0.0.2:8765", "127.0.0.3:8765"]
    assert request.min_bytes_per_s == 2 * 1024 * 1024
    assert (request.label, request.notes) == ("A", ("n",))
    with pytest.raises(UserError, match="--min-rate"):
        build_request({"min_rate": "fast"})


def test_run_options_add_the_groups_options_after_the_commands_own():
    app = typer.Typer()
    seen: list[RunRequest] = []

    @app.command()
    @run_options("target", "record")
    def cmd(
        own: Annotated[int, typer.Option(help="the command's own")] = 1,
        *,
        request: RunRequest,
    ) -> None:
        seen.append(request)
        print(own)

    result = CliRunner().invoke(
        app, ["--own", "7", "--target", "/a", "--target", "/b", "--label", "x", "--keep-files"]
    )
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "7"
    (request,) = seen
    assert request.targets == ("/a", "/b") and request.keep_files and request.label == "x"
    refused = CliRunner().invoke(app, ["--hosts", "h1"])  # not one of its groups
    assert refused.exit_code == 2 and "No such option" in refused.output
