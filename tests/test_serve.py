"""iorig serve's doors: loopback without authentication, beyond it only
with the agent's token or certificates; the token opens pages once and a
cookie keeps them open; errors and pages carry a strict policy. Its
metrics end each run on the stored figures and keep them until scraped."""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from tests.agents import iorig
from tests.serving import start_serve, token_serve
from tests.waiting import wait_until

pytestmark = [pytest.mark.system]
DATA = Path(__file__).parent / "data"


def test_serve_refuses_an_address_beyond_loopback_without_authentication(tmp_path):
    done = iorig("--db", str(tmp_path / "r.sqlite"), "serve", "--address", "10.11.12.13:8642")
    assert done.returncode == 2
    assert "loopback only" in done.stderr and "10.11.12.13" in done.stderr
    done = iorig("--db", str(tmp_path / "r.sqlite"), "run", "--metrics", "0.0.0.0:9464")
    assert done.returncode == 2 and "loopback only" in done.stderr
    assert not (tmp_path / "r.sqlite").exists()  # refused before anything


def test_with_the_token_serve_speaks_https_and_asks_for_the_token(tmp_path):
    with token_serve(tmp_path) as (url, token):
        assert url.startswith("https://127.0.0.2:")
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=context), urllib.request.HTTPCookieProcessor(jar)
        )
        for wrong in ("", "?token=nope"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                opener.open(url + wrong, timeout=10)
            assert refused.value.code == 401
            assert refused.value.headers["Content-Security-Policy"] == "default-src 'none'"
        with opener.open(f"{url}?token={token}", timeout=10) as page:  # then the cookie
            assert page.status == 200 and page.url == url
        with opener.open(url, timeout=10) as page:
            assert b"<title>iorig: runs</title>" in page.read()
            assert "script-src 'self'" in page.headers["Content-Security-Policy"]
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        plain = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context))
        with plain.open(request, timeout=10) as page:
            assert page.status == 200


@pytest.mark.fio
def test_a_taken_metrics_port_refuses_the_run_and_releases_its_target(tmp_path):
    import socket

    db, scratch = tmp_path / "r.sqlite", tmp_path / "scratch"
    scratch.mkdir()
    # a directory: iorig makes its data file there and removes it after
    run = ["--db", str(db), "run", "--rw", "randread", "--duration", "2s", "--size", "8MiB",
           "--target", f"{scratch}/"]  # fmt: skip
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = iorig(*run, "--metrics", f"127.0.0.1:{taken.getsockname()[1]}")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "cannot listen" in done.stderr
    assert iorig("--db", str(db), "show", "last", "--json").returncode != 0  # no run stored
    assert list(scratch.iterdir()) == []  # nothing laid out is left
    again = iorig(*run)  # the target's lock went with the refused run
    assert again.returncode == 0, again.stdout + again.stderr


def _metrics(url: str) -> str:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as answer:
        return answer.read().decode()


def _value(text: str, name: str, *labels: str) -> float | None:
    """The value of the sample of ``name`` whose labels include ``labels``."""
    for line in text.splitlines():
        if line.startswith(name + "{") and all(label in line for label in labels):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.mark.fio
def test_serve_metrics_end_each_phase_on_its_stored_totals_and_keep_them_until_scraped(tmp_path):
    from iorig.store import Store

    db, scratch = tmp_path / "r.sqlite", tmp_path / "scratch"
    scratch.mkdir()
    proc, _ = start_serve(db, tmp_path / "serve.log", "--address", "127.0.0.1:0", "--metrics",
                          "127.0.0.1:0", "--metrics-linger", "1h")  # fmt: skip
    try:
        wait_until(lambda: "metrics at http" in (tmp_path / "serve.log").read_text(), 20,
                   "serve says where its metrics are", proc=proc)  # fmt: skip
        url = (tmp_path / "serve.log").read_text().split("metrics at ", 1)[1].split()[0]
        done = iorig("--db", str(db), "run", "--rw", "read", "--duration", "2s", "--size",
                     "8MiB", "--target", f"{scratch}/", "--label", "served")  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        with Store(db) as store:
            (run_id,) = store.run_ids(limit=1)
            fill, measured = store.load_run(run_id).phases
        read = measured.aggregate.totals["read"]
        written = fill.aggregate.totals["write"]
        run = f'run="{run_id}"'

        # serve reads the live file once a second: the run's end within a few
        def final() -> str | None:
            text = _metrics(url)
            moved = _value(text, "iorig_io_bytes_total", run, 'phase_index="1"')
            return text if moved == read.io_bytes else None

        text = wait_until(final, 10, "serve's metrics end on the stored total", proc=proc)
        # every phase's I/O, the fill's too, and the histogram's count: the stored ones
        assert _value(text, "iorig_io_bytes_total", run, 'phase="fill"') == written.io_bytes > 0
        assert _value(text, "iorig_io_operations_total", run, 'phase_index="1"') == read.ios
        count = _value(text, "iorig_io_latency_seconds_count", run, 'phase_index="1"')
        assert count == read.hist.sum() == read.ios
        assert _value(text, "iorig_run_info", run, 'label="served"', 'host="local"') == 1.0
        # each answer is a scrape after the end: the run goes once one was
        wait_until(lambda: run not in _metrics(url), 10, "the scraped run is dropped", proc=proc)
    finally:
        proc.terminate()
        proc.wait(10)


def test_idle_connections_past_the_descriptor_limit_do_not_stop_serve(tmp_path):
    # 300 connections that ask nothing, under a limit of 256 descriptors:
    # serve ran out, stopped accepting and answered no one (issue 48); now
    # it closes the oldest idle ones past its budget and answers
    proc, url = start_serve(tmp_path / "r.sqlite", tmp_path / "serve.log", files_limit=256)
    where = urllib.parse.urlsplit(url)
    idle: list[socket.socket] = []
    try:
        for _ in range(300):
            with contextlib.suppress(OSError):
                idle.append(socket.create_connection((where.hostname, where.port), timeout=2))
        with urllib.request.urlopen(url, timeout=10) as answer:
            status = answer.status
        # the oldest were closed for it: their reads end at once
        idle[0].settimeout(5)
        closed = idle[0].recv(1) == b""
    finally:
        for sock in idle:
            sock.close()
        proc.terminate()
        proc.wait(10)
    assert len(idle) == 300 and status == 200
    assert closed
    assert "Traceback" not in (tmp_path / "serve.log").read_text()


def test_a_served_report_links_back_loads_plotly_once_and_one_ticked_run_opens(tmp_path):
    # issue 50: run and comparison pages had no way back to the list nor any
    # download, each inlined plotly (4.9 MB a page), and comparing one ticked
    # run gave a bare-text 400 page
    db = tmp_path / "results.sqlite"
    db.write_bytes((DATA / "report-peak" / "results.sqlite").read_bytes())
    serve, url = start_serve(db, tmp_path / "serve.log")
    try:
        listed = urllib.request.urlopen(url, timeout=30).read().decode()
        run_id = listed.split('name="run" value="', 1)[1].split('"', 1)[0]
        # filtered by a target's path (issue 50: the list had no target filter)
        for text, runs in (("tmpd1z3dc33", 2), ("elsewhere", 0)):
            page = urllib.request.urlopen(f"{url}?target={text}", timeout=30).read().decode()
            assert page.count('name="run" value="') == runs, text
            assert f'name="target" value="{text}"' in page
        page = urllib.request.urlopen(f"{url}runs/{run_id}", timeout=60).read().decode()
        assert '<a href="/">&larr; all runs</a>' in page
        # picked from its own page for a comparison: the list opens with it ticked
        assert f'<a href="/?pick={run_id}">compare with other runs</a>' in page
        picking = urllib.request.urlopen(f"{url}?pick={run_id}", timeout=30).read().decode()
        assert f'value="{run_id}" aria-label="compare {run_id}" checked>' in picking
        assert picking.count(" checked>") == 1
        src = page.split('<script src="', 1)[1].split('"', 1)[0]
        assert src.startswith("/plotly-") and len(page) < 1_000_000, (src, len(page))
        assert "script-src 'self' 'sha256-" in page  # the page's own site, and its hashes
        plotly = urllib.request.urlopen(url + src.lstrip("/"), timeout=60)
        assert "immutable" in plotly.headers["Cache-Control"]
        assert len(plotly.read()) > 1_000_000
        # its files, as the command line writes them, named for the run
        for fmt, start in (("json", b"{"), ("bundle", b"SQLite format 3"), ("seconds", b"")):
            assert f'href="/runs/{run_id}/download/{fmt}"' in page
            got = urllib.request.urlopen(f"{url}runs/{run_id}/download/{fmt}", timeout=60)
            assert run_id in got.headers["Content-Disposition"]
            body = got.read()
            assert body.startswith(start) and len(body) > 100, (fmt, body[:80])
        doc = json.loads(urllib.request.urlopen(f"{url}runs/{run_id}/download/json").read())
        assert doc["run"]["id"] == run_id
        one = urllib.request.urlopen(f"{url}compare?run={run_id}", timeout=60)
        assert one.geturl() == f"{url}runs/{run_id}" and one.status == 200
        # errors: a page of the site to a browser, its text escaped, a way
        # home; plain text to anything else (issue 50: bare-text error pages)
        asked = f"{url}runs/<b>nope</b>"
        for accept, page_like in (("text/html,application/xhtml+xml", True), ("*/*", False)):
            request = urllib.request.Request(
                asked.replace("<b>", "%3Cb%3E").replace("</b>", "%3C/b%3E"),
                headers={"Accept": accept},
            )
            with pytest.raises(urllib.error.HTTPError) as caught:
                urllib.request.urlopen(request, timeout=30)
            body = caught.value.read().decode()
            assert caught.value.code in (400, 404), body
            assert ('<a href="/">&larr; all runs</a>' in body) == page_like, body
            assert "<b>nope" not in body
    finally:
        serve.terminate()
        serve.wait(10)
