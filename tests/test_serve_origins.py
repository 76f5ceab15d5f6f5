"""``iorig serve`` and its metrics answer only for their own address
(issue 48): a page of another site that reached them by DNS rebinding
names its own domain in Host and is refused, as is a request another
site's page made; a token link never redirects to another site.

On main ``curl -H 'Host: evil.example' http://127.0.0.1:PORT/runs/ID``
returned the full report, /metrics likewise, and ``GET //evil.example/?token=T``
answered 303 to ``////evil.example/``.
"""

from __future__ import annotations

import http.client
import ssl
from urllib.parse import urlsplit

import pytest
from tests.serving import start_serve, token_serve

from iorig.errors import UserError
from iorig.serve.address import allowed_names, host_allowed, host_name

pytestmark = [pytest.mark.system]


def test_host_names_are_read_as_browsers_send_them():
    assert host_name("127.0.0.1:8642") == "127.0.0.1"
    assert host_name("[::1]:8642") == "::1"
    assert host_name("Evil.Example:80") == "evil.example"
    assert host_name("http://evil.example:8080") == "evil.example"  # an Origin
    assert host_allowed("127.0.0.1:8642") and host_allowed("[::1]:1") and host_allowed(None)
    assert host_allowed("localhost:8642") and host_allowed("LOCALHOST.")
    assert not host_allowed("evil.example:8642")
    assert not host_allowed("127.0.0.1.evil.example")
    assert not host_allowed("localhost.evil.example")
    assert host_allowed("lab.example", frozenset({"lab.example"}))
    assert "lab-1.example.com" in allowed_names(["Lab-1.Example.com."])
    for bad in ("evil example", "-x", "a/b", "x" * 300, ""):
        with pytest.raises(UserError, match="not a host name"):
            allowed_names([bad])


def _get(url: str, path: str, **headers: str) -> tuple[int, dict, bytes]:
    parts = urlsplit(url)
    if parts.scheme == "https":
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=10, context=context)
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.putrequest("GET", path, skip_host="Host" in headers)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def test_serve_and_its_metrics_refuse_another_sites_host_and_origin(tmp_path):
    proc, url = start_serve(
        tmp_path / "r.sqlite", tmp_path / "serve.log",
        "--address", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--allow-host", "lab.example",
    )  # fmt: skip
    try:
        port = urlsplit(url).port
        own = f"127.0.0.1:{port}"
        assert _get(url, "/", Host=own)[0] == 200
        assert _get(url, "/", Host=f"localhost:{port}")[0] == 200
        assert _get(url, "/", Host=f"lab.example:{port}")[0] == 200  # --allow-host
        status, _, body = _get(url, "/", Host=f"evil.example:{port}")
        assert status == 421 and b"its own address only" in body
        assert _get(url, "/runs/abc", Host="evil.example")[0] == 421
        assert _get(url, "/", Host=own, Origin="http://evil.example")[0] == 403
        assert _get(url, "/", Host=own, Origin="null")[0] == 403
        assert _get(url, "/", Host=own, Origin=f"http://{own}")[0] == 200
        fetched = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}
        assert _get(url, "/static/live.js", Host=own, **fetched)[0] == 403
        followed = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}
        assert _get(url, "/", Host=own, **followed)[0] == 200  # the user following a link
        log = (tmp_path / "serve.log").read_text()
        metrics = log.split("metrics at ", 1)[1].split()[0]
        mport = urlsplit(metrics).port
        assert _get(metrics, "/metrics", Host=f"127.0.0.1:{mport}")[0] == 200
        status, _, body = _get(metrics, "/metrics", Host=f"evil.example:{mport}")
        assert status == 403 and b"own address only" in body
        assert _get(metrics, "/metrics", Host=f"127.0.0.1:{mport}", Origin="http://x.y")[0] == 403
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_token_link_never_redirects_to_another_site(tmp_path):
    with token_serve(tmp_path) as (url, token):
        for path in ("//evil.example/", "///evil.example/x", "/\\evil.example/", "/%2Fevil/"):
            status, headers, _ = _get(url, f"{path}?token={token}&a=1")
            location = headers["Location"]
            assert status == 303 and "iorig_session" in headers.get("Set-Cookie", "")
            assert location.startswith("/") and location[1:2] not in ("/", "\\"), location
            assert "token" not in location and "a=1" in location
