"""What headless Chromium drew, read from the page itself: a script evaluated
through the DevTools protocol over a pipe (``--remote-debugging-pipe``: fd 3
in, fd 4 out, JSON messages ending in a NUL byte), no port opened. The
page's Content-Security-Policy binds its own scripts, not DevTools'."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

# Waits for the report's charts (data-charts-drawn), then gives each chart's
# title and toolbar (plotly's modebar) boxes in px from the chart's corner.
CHART_BOXES = r"""
new Promise(function (done) {
  (function poll() {
    if (!document.body || !document.body.dataset.chartsDrawn) { return setTimeout(poll, 100); }
    var out = [];
    document.querySelectorAll(".js-plotly-plot").forEach(function (chart) {
      var corner = chart.getBoundingClientRect();
      var box = function (el) {
        if (!el) { return null; }
        var r = el.getBoundingClientRect();
        return [r.left - corner.left, r.top - corner.top, r.right - corner.left,
                r.bottom - corner.top];
      };
      var title = chart.querySelector(".gtitle");
      out.push({id: chart.id, title: box(title), text: title ? title.textContent : null,
                modebar: box(chart.querySelector(".modebar")),
                width: corner.width, height: corner.height});
    });
    done(out);
  })();
})
"""


def evaluate(
    browser: str,
    page: Path,
    expression: str,
    profile: Path,
    *,
    window: str = "1200,3000",
    timeout_s: float = 60,
) -> Any:
    """The value of ``expression`` (a promise is awaited) in ``page``."""
    to_browser, from_browser = os.pipe(), os.pipe()

    def as_fds_3_and_4() -> None:
        ins, outs = os.dup(to_browser[0]), os.dup(from_browser[1])
        os.dup2(ins, 3)
        os.dup2(outs, 4)

    proc = subprocess.Popen(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--remote-debugging-pipe",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            f"--window-size={window}",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"file://{page}",
        ],
        pass_fds=(3, 4),
        preexec_fn=as_fds_3_and_4,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(to_browser[0])
    os.close(from_browser[1])
    deadline = time.monotonic() + timeout_s
    pending = b""
    sent = 0

    def call(method: str, params: dict, session: str | None = None) -> dict:
        nonlocal pending, sent
        sent += 1
        message = {"id": sent, "method": method, "params": params}
        os.write(
            to_browser[1],
            json.dumps(message | ({"sessionId": session} if session else {})).encode() + b"\0",
        )
        while True:
            while b"\0" in pending:
                raw, pending = pending.split(b"\0", 1)
                answer = json.loads(raw)
                if answer.get("id") == sent:
                    return answer
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([from_browser[0]], [], [], left)[0]:
                raise TimeoutError(f"Chromium did not answer {method} in {timeout_s:g} s")
            chunk = os.read(from_browser[0], 1 << 16)
            if not chunk:
                raise RuntimeError(f"Chromium closed its DevTools pipe during {method}")
            pending += chunk

    try:
        targets = call("Target.getTargets", {})["result"]["targetInfos"]
        target = next(t["targetId"] for t in targets if t["type"] == "page")
        attached = call("Target.attachToTarget", {"targetId": target, "flatten": True})
        session = attached["result"]["sessionId"]
        while True:
            answer = call(
                "Runtime.evaluate",
                {"expression": expression, "awaitPromise": True, "returnByValue": True},
                session,
            )
            if "result" in answer:  # else the page was still loading: its context went
                result = answer["result"]
                assert "exceptionDetails" not in result, result["exceptionDetails"]
                return result["result"]["value"]
            time.sleep(0.2)
    finally:
        proc.kill()
        proc.wait()
        os.close(to_browser[1])
        os.close(from_browser[0])


def dump_dom(
    browser: str,
    page: Path,
    profile: Path,
    *,
    window: str | None = None,
    budget_ms: int = 15000,
    extra: tuple[str, ...] = (),
    timeout_s: float = 120,
) -> tuple[str, list[str], str]:
    """The DOM headless Chromium made of ``page`` after ``budget_ms`` of
    virtual time, the lines its console logged (errors, CSP violations), and
    its whole error output; no request leaves the machine."""
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            *extra,
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            *([f"--window-size={window}"] if window else []),
            f"--virtual-time-budget={budget_ms}",
            "--dump-dom",
            f"file://{page}",
        ],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done.stdout, console, done.stderr
