"""The AI image training scenario on real fio: a small data set created once,
load points low to high with validity and SPEC's overall response time, and
a clear refusal where fio has no filestat. (Which points are invalid is
checked against a known answer in tests/truth/test_aiimage.py.)"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _show(iorig) -> dict:
    return json.loads(iorig("show", "last", "--json", check=True).stdout)


@pytest.mark.fio
def test_quick_ai_image_runs_load_points_with_validity_and_ort(iorig, scratch):
    result = iorig("run", "ai-image", "--quick", "--target", f"{scratch}/")
    assert result.returncode == 0, result.stdout + result.stderr
    shown = _show(iorig)
    search = shown["search"]
    assert search["kind"] == "loadpoints" and search["metric"] == "AI_Jobs"
    assert [p["load"] for p in search["points"]] == [1, 2, 3, 4, 5]
    for point in search["points"]:
        # about 435 ops/s per job, the four components' op types all present
        assert point["requested_ops_per_s"] == pytest.approx(437 * point["load"], rel=0.02)
        assert point["achieved_ops_per_s"] > 0 and point["lat_mean_ns"] > 0
        ops = {o["workload"] for o in point["ops"]}
        assert ops == {"sf-read", "sf-stat", "tf-write", "tr-read", "tr-stat", "cp-write"}
    assert search["ort_ms"] > 0
    (create,) = shown["timed_phases"]
    assert create["phase"] == "create" and create["status"] == "ok" and create["io_bytes"] > 0
    for text in (
        "Load points (AI_Jobs)",
        "overall response time",
        "largest valid load",
        "Latency and rate per op type",
    ):
        assert text in result.stdout
    # the data set was made inside the directory given, and removed after the run
    assert not (scratch / "iorig-data").exists()


@pytest.mark.fio
def test_a_fio_without_filestat_is_refused_with_the_fix(scratch, db_path, tmp_path):
    fake = tmp_path / "fio"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$*" in *enghelp=filestat*) echo "IO engine filestat not found"; exit 1;; esac\n'
        'exec fio "$@"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = dict(os.environ, IORIG_DB=str(db_path), IORIG_FIO=str(fake), COLUMNS="200")
    done = subprocess.run(
        [sys.executable, "-m", "iorig", "run", "ai-image", "--quick", "--target", f"{scratch}/"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if "fio is not installed" in done.stderr:
        pytest.skip("fio is not installed")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "has no filestat engine" in done.stderr and "stat_ops=false" in done.stderr
    assert not db_path.exists()
    assert not (scratch / "iorig-data").exists()
