"""iorig serve's doors: loopback without authentication, beyond it only
with the agent's token or certificates; the token opens pages once and a
cookie keeps them open; errors and pages carry a strict policy."""

from __future__ import annotations

import http.cookiejar
import ssl
import urllib.error
import urllib.request

import pytest
from tests.agents import iorig, make_token
from tests.serving import start_serve

pytestmark = [pytest.mark.system]


def test_serve_refuses_an_address_beyond_loopback_without_authentication(tmp_path):
    done = iorig("--db", str(tmp_path / "r.sqlite"), "serve", "--address", "10.11.12.13:8642")
    assert done.returncode == 2
    assert "loopback only" in done.stderr and "10.11.12.13" in done.stderr
    done = iorig("--db", str(tmp_path / "r.sqlite"), "run", "--metrics", "0.0.0.0:9464")
    assert done.returncode == 2 and "loopback only" in done.stderr
    assert not (tmp_path / "r.sqlite").exists()  # refused before anything


def test_with_the_token_serve_speaks_https_and_asks_for_the_token(tmp_path):
    token_file = make_token(tmp_path / "agent.token")
    token = token_file.read_text().split()[-1]
    proc, url = start_serve(
        tmp_path / "r.sqlite", tmp_path / "serve.log",
        "--address", "127.0.0.2:0", "--token-file", str(token_file),
    )  # fmt: skip
    try:
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
    finally:
        proc.terminate()
        proc.wait(10)


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
