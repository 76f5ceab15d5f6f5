"""A real Prometheus server for tests, on loopback, scraping the targets a
test names: started on a free port in its own process group, its data in the
test's directory, and stopped (the whole group) on every way out. Queried
through the HTTP API with the standard library alone."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

PROMETHEUS = "/usr/bin/prometheus"
READY_TIMEOUT_S = 20.0
STOP_GRACE_S = 5.0
PORT_ATTEMPTS = 5

# no proxy from the environment: everything here is on loopback
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def prometheus_or_skip() -> str:
    """The Prometheus server for metrics-endpoint tests: skipped without one,
    a failure when ``IORIG_REQUIRE_PROMETHEUS`` or ``IORIG_REQUIRE_TRUTH`` is
    set (CI installs it)."""
    for candidate in (PROMETHEUS, shutil.which("prometheus")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    for variable in ("IORIG_REQUIRE_PROMETHEUS", "IORIG_REQUIRE_TRUTH"):
        if os.environ.get(variable):
            pytest.fail(f"prometheus is required ({variable}) but not installed")
    pytest.skip("prometheus is not installed (make test installs it)")


class PrometheusError(RuntimeError):
    """Prometheus answered a query with an error (bad expression, timeout)."""


def _duration(seconds: float) -> str:
    """``seconds`` as a Prometheus duration: whole milliseconds."""
    return f"{max(1, round(seconds * 1000))}ms"


@dataclass
class Prometheus:
    """A running Prometheus: its base ``url`` and the targets of job
    ``iorig`` (``host:port``)."""

    url: str
    targets: list[str]
    process: subprocess.Popen = field(repr=False)
    log: Path = field(repr=False)
    timeout_s: float = 10.0

    def _get(self, path: str, params: list[tuple[str, str]]) -> Any:
        address = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with _OPENER.open(address, timeout=self.timeout_s) as answer:
                body = json.load(answer)
        except urllib.error.HTTPError as error:  # 400/422/503 carry the error in JSON
            text = error.read().decode(errors="replace")
            try:
                body = json.loads(text)
            except ValueError:
                raise PrometheusError(f"GET {path} {params}: HTTP {error.code}: {text}") from None
        if body.get("status") != "success":
            raise PrometheusError(
                f"GET {path} {params}: {body.get('errorType')}: {body.get('error')}"
            )
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        """``data.result`` of an instant query (``at``: Unix seconds)."""
        params = [("query", expr)] + ([("time", f"{at:.3f}")] if at is not None else [])
        return self._get("/api/v1/query", params)["result"]

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> list[dict]:
        """``data.result`` of a range query (matrix) from ``start`` to ``end``."""
        params = [
            ("query", expr),
            ("start", f"{start:.3f}"),
            ("end", f"{end:.3f}"),
            ("step", f"{step_s:g}"),
        ]
        return self._get("/api/v1/query_range", params)["result"]

    def series(self, match: str) -> list[dict]:
        """The label sets of the series ``match`` selects (``/api/v1/series``)."""
        return self._get("/api/v1/series", [("match[]", match)])

    def wait_for_scrape(
        self, job: str = "iorig", timeout_s: float = 10, *, attempted: bool = False
    ) -> None:
        """Until every target of ``job`` has been scraped successfully
        (``up == 1``), or with ``attempted`` only tried (``up`` has a sample:
        Prometheus hands new targets to its scrapers up to 5 s after it
        starts, so a test that starts the target later waits for this
        first); TimeoutError naming the targets still missing."""
        deadline = time.monotonic() + timeout_s
        expr = f"up{{job={json.dumps(job)}}}"
        while True:
            up = {s["metric"].get("instance"): s["value"][1] for s in self.query(expr)}
            missing = [t for t in self.targets if t not in up or (up[t] != "1" and not attempted)]
            if not missing:
                return
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"prometheus did not scrape {missing} in {timeout_s:g} s (up: {up}); "
                    f"its log:\n{_tail(self.log)}"
                )
            time.sleep(0.2)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the whole group, SIGKILL after STOP_GRACE_S."""
    for sig, wait_s in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, STOP_GRACE_S)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    # whatever else the group held (prometheus forks nothing, but be sure)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def _write_config(path: Path, targets: list[str], scrape_interval_s: float) -> None:
    # JSON is YAML: no yaml dependency needed
    interval = _duration(scrape_interval_s)
    timeout = _duration(min(scrape_interval_s * 0.8, scrape_interval_s - 0.05))
    config = {
        "global": {
            "scrape_interval": "1s",
            "evaluation_interval": "1s",
            "scrape_timeout": _duration(0.8),
        },
        "scrape_configs": [
            {
                "job_name": "iorig",
                "scrape_interval": interval,
                "scrape_timeout": timeout,
                "static_configs": [{"targets": list(targets)}],
            }
        ],
    }
    path.write_text(json.dumps(config, indent=2) + "\n")


def _ready(url: str) -> bool:
    try:
        with _OPENER.open(f"{url}/-/ready", timeout=1) as answer:
            return answer.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def prometheus_server(
    tmp_path: Path,
    targets: list[str],
    *,
    address: str = "127.0.0.1",
    scrape_interval_s: float = 1.0,
) -> Iterator[Prometheus]:
    """A Prometheus scraping ``targets`` (``host:port``) as job ``iorig``,
    ready (``/-/ready`` answers 200) when yielded, stopped on exit."""
    binary = prometheus_or_skip()
    base = tmp_path / "prometheus"
    base.mkdir(parents=True, exist_ok=True)
    config = base / "prometheus.yml"
    _write_config(config, targets, scrape_interval_s)
    for attempt in range(1, PORT_ATTEMPTS + 1):
        port = _free_port(address)
        url = f"http://{address}:{port}"
        log = base / f"prometheus-{attempt}.log"
        with log.open("wb") as log_file:
            process = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={base / f'data-{attempt}'}",
                    f"--web.listen-address={address}:{port}",
                    "--web.enable-lifecycle",
                    "--log.level=info",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
                start_new_session=True,  # its own process group: stopped as a whole
            )
        try:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while process.poll() is None and not _ready(url):
                if time.monotonic() >= deadline:
                    raise TimeoutError(
                        f"prometheus was not ready at {url} in {READY_TIMEOUT_S:g} s; "
                        f"its log:\n{_tail(log)}"
                    )
                time.sleep(0.1)
            if process.poll() is not None:
                text = _tail(log)
                if "address already in use" in text and attempt < PORT_ATTEMPTS:
                    continue  # another process took the port between probe and bind
                raise RuntimeError(
                    f"prometheus exited with {process.returncode} before it was ready; "
                    f"its log:\n{text}"
                )
            yield Prometheus(url=url, targets=list(targets), process=process, log=log)
            return
        finally:
            _stop(process)
