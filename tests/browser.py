"""What headless Chromium drew, read from the page itself: a script evaluated
through the DevTools protocol over a pipe (``--remote-debugging-pipe``: fd 3
in, fd 4 out, JSON messages ending in a NUL byte), no port opened. The
page's Content-Security-Policy binds its own scripts, not DevTools'.

``evaluate`` answers one expression in a fresh browser; ``BrowserSession``
keeps one open to navigate, wait, go back and take screenshots while it
records the page's errors and every request it made."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
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


class DevToolsError(RuntimeError):
    """Chromium answered a DevTools call with an error (e.g. the page's
    execution context went away while it navigated)."""


class JavaScriptError(RuntimeError):
    """The evaluated expression threw (or its promise was rejected)."""


def _host_rules(reachable: tuple[str, ...]) -> str:
    """Every host name (an IP literal too) resolves to nothing, but those
    ``reachable`` (patterns like ``127.0.0.*``)."""
    return "--host-resolver-rules=" + ", ".join(
        ["MAP * ~NOTFOUND", *(f"EXCLUDE {host}" for host in reachable)]
    )


class _DevTools:
    """A headless Chromium on a DevTools pipe, in its own process group:
    calls answered by id, and every event (a message without an id) that
    arrives meanwhile kept in ``events`` and handed to ``on_event``."""

    def __init__(
        self,
        browser: str,
        profile: Path,
        url: str,
        *,
        window: str,
        reachable: tuple[str, ...] = (),
        on_event: Callable[[dict], None] | None = None,
    ) -> None:
        self.events: list[dict] = []
        self.on_event = on_event
        self._answers: dict[int, dict] = {}
        self._pending = b""
        self._sent = 0
        self._tmp = tempfile.mkdtemp(prefix="iorig-chromium-")
        to_browser, from_browser = os.pipe(), os.pipe()

        def as_fds_3_and_4() -> None:
            ins, outs = os.dup(to_browser[0]), os.dup(from_browser[1])
            os.dup2(ins, 3)
            os.dup2(outs, 4)

        try:
            self.proc = subprocess.Popen(
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
                    _host_rules(reachable),
                    url,
                ],
                pass_fds=(3, 4),
                preexec_fn=as_fds_3_and_4,
                env=_own_tmp(self._tmp),
                start_new_session=True,  # its renderers and helpers go with it
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except BaseException:
            for fd in (*to_browser, *from_browser):
                os.close(fd)
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise
        os.close(to_browser[0])
        os.close(from_browser[1])
        self._out, self._in = to_browser[1], from_browser[0]

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self._sent += 1
        message = {"id": self._sent, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        return self._sent

    def read(self, timeout_s: float) -> bool:
        """Whatever Chromium sent within ``timeout_s``: answers put by,
        events recorded. False when nothing came."""
        if timeout_s < 0 or not select.select([self._in], [], [], timeout_s)[0]:
            return False
        chunk = os.read(self._in, 1 << 16)
        if not chunk:
            raise RuntimeError("Chromium closed its DevTools pipe")
        self._pending += chunk
        while b"\0" in self._pending:
            raw, self._pending = self._pending.split(b"\0", 1)
            message = json.loads(raw)
            if "id" in message:
                self._answers[message["id"]] = message
            else:
                self.events.append(message)
                if self.on_event:
                    self.on_event(message)
        return True

    def call(
        self,
        method: str,
        params: dict | None = None,
        session: str | None = None,
        *,
        deadline: float,
    ) -> dict:
        """Chromium's whole answer (``result`` or ``error``) to one call."""
        sent = self.send(method, params, session)
        while sent not in self._answers:
            try:
                got = self.read(deadline - time.monotonic())
            except RuntimeError as closed:
                raise RuntimeError(f"{closed} during {method}") from None
            if not got and time.monotonic() >= deadline:
                raise TimeoutError(f"Chromium did not answer {method} in time")
        return self._answers.pop(sent)

    def close(self, grace_s: float = 0) -> None:
        """Stops the browser: asked to close (it reaps its helpers) for up to
        ``grace_s``, then the whole process group killed."""
        if grace_s > 0 and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.send("Browser.close")
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace_s)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        with contextlib.suppress(ProcessLookupError):  # a helper that outlived it
            os.killpg(self.proc.pid, signal.SIGKILL)
        os.close(self._out)
        os.close(self._in)
        shutil.rmtree(self._tmp, ignore_errors=True)


def _own_tmp(directory: str) -> dict[str, str]:
    """Chromium's environment with its temporary files in ``directory``, one
    removed when it ends: its singleton directory (org.chromium.Chromium.*)
    outlives a killed browser, and the suite left 95 in /tmp. Short (under
    /tmp, not the test's own directory): it holds a Unix socket, whose path
    may not pass 107 bytes."""
    return dict(os.environ, TMPDIR=directory)


def _attach(devtools: _DevTools, deadline: float) -> str:
    """The flat session of the browser's page."""
    targets = devtools.call("Target.getTargets", deadline=deadline)["result"]["targetInfos"]
    target = next(t["targetId"] for t in targets if t["type"] == "page")
    attached = devtools.call(
        "Target.attachToTarget", {"targetId": target, "flatten": True}, deadline=deadline
    )
    return attached["result"]["sessionId"]


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
    deadline = time.monotonic() + timeout_s
    devtools = _DevTools(browser, profile, f"file://{page}", window=window)
    try:
        session = _attach(devtools, deadline)
        while True:
            try:
                answer = devtools.call(
                    "Runtime.evaluate",
                    {"expression": expression, "awaitPromise": True, "returnByValue": True},
                    session,
                    deadline=deadline,
                )
            except TimeoutError:
                raise TimeoutError(f"Chromium did not answer in {timeout_s:g} s") from None
            if "result" in answer:  # else the page was still loading: its context went
                result = answer["result"]
                assert "exceptionDetails" not in result, result["exceptionDetails"]
                return result["result"]["value"]
            time.sleep(0.2)
    finally:
        devtools.close()


def _describe(remote: dict) -> str:
    """A console argument (a RemoteObject) as text."""
    if "value" in remote:
        value = remote["value"]
        return value if isinstance(value, str) else json.dumps(value)
    return str(remote.get("description") or remote.get("unserializableValue") or remote["type"])


# the servers a test starts listen here (Chromium maps IP literals too)
LOOPBACK = ("127.0.0.*", "localhost")


class BrowserSession:
    """One headless Chromium kept open over the DevTools pipe (no port, no
    request leaves the machine: every host name resolves to nothing), its
    page attached with Runtime, Log, Network and Page enabled. Only the
    ``reachable`` hosts resolve (loopback: the servers a test starts); every
    other name, an IP literal too, fails as not found.

    ``console_errors`` gathers, as text, uncaught exceptions, console.error
    and console.assert calls and error-level log entries (failed loads, CSP
    violations); ``requests`` every URL the page asked for; ``events`` every
    event. They are read while calls wait for their answers, or by
    ``pump``."""

    def __init__(
        self,
        browser: str,
        profile: Path,
        *,
        window: str = "1200,3000",
        reachable: tuple[str, ...] = LOOPBACK,
        timeout_s: float = 30,
    ) -> None:
        self.browser, self.profile, self.window = browser, profile, window
        self.reachable = reachable
        self.timeout_s = timeout_s
        self.console_errors: list[str] = []
        self.requests: list[str] = []
        self._devtools: _DevTools | None = None
        self._session = ""

    @property
    def events(self) -> list[dict]:
        return self._devtools.events if self._devtools else []

    def __enter__(self) -> BrowserSession:
        self._devtools = _DevTools(
            self.browser,
            self.profile,
            "about:blank",
            window=self.window,
            reachable=self.reachable,
            on_event=self._record,
        )
        try:
            self._session = _attach(self._devtools, time.monotonic() + self.timeout_s)
            for domain in ("Runtime", "Log", "Network", "Page"):
                self._call(f"{domain}.enable")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._devtools:
            devtools, self._devtools = self._devtools, None
            devtools.close(grace_s=5)

    def _record(self, event: dict) -> None:
        method, params = event["method"], event.get("params", {})
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            thrown = details.get("exception", {}).get("description") or details.get("text")
            self.console_errors.append(f"exception: {thrown}")
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            text = " ".join(_describe(arg) for arg in params.get("args", []))
            self.console_errors.append(f"console.{params['type']}: {text}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            entry = params["entry"]
            url = f" ({entry['url']})" if entry.get("url") else ""
            self.console_errors.append(f"log/{entry['source']}: {entry['text']}{url}")

    def _call(self, method: str, params: dict | None = None, timeout_s: float | None = None):
        if not self._devtools:
            raise RuntimeError("the browser session is not open")
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        answer = self._devtools.call(method, params, self._session, deadline=deadline)
        if "error" in answer:
            raise DevToolsError(f"{method}: {answer['error'].get('message')}")
        return answer["result"]

    def _await_event(self, matches: Callable[[dict], bool], since: int, timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        seen = since
        while True:
            events = self.events
            for event in events[seen:]:
                if event.get("sessionId") == self._session and matches(event):
                    return event
            seen = len(events)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no such event in {timeout_s:g} s")
            self._devtools.read(left)

    def _await_load(self, since: int, timeout_s: float, what: str) -> None:
        """Until the page loaded (or came back whole from the back/forward
        cache, which fires no load event) after event ``since``."""

        def loaded(event: dict) -> bool:
            if event["method"] == "Page.loadEventFired":
                return True
            frame = event.get("params", {}).get("frame", {})
            return (
                event["method"] == "Page.frameNavigated"
                and "parentId" not in frame
                and event["params"].get("type") == "BackForwardCacheRestore"
            )

        try:
            self._await_event(loaded, since, timeout_s)
        except TimeoutError:
            raise TimeoutError(f"{what} did not load in {timeout_s:g} s") from None

    def pump(self, seconds: float) -> None:
        """Reads (and records) events for ``seconds``."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self._devtools:
                self._devtools.read(left)

    def goto(self, url: str, timeout_s: float = 30) -> None:
        """Loads ``url`` and waits for its load event."""
        since = len(self.events)
        navigated = self._call("Page.navigate", {"url": url}, timeout_s)
        if navigated.get("errorText"):
            raise DevToolsError(f"{url}: {navigated['errorText']}")
        self._await_load(since, timeout_s, url)

    def evaluate(self, expression: str) -> Any:
        """The value of ``expression`` (a promise is awaited); JavaScriptError
        if it throws, DevToolsError if there was no page to run it in."""
        result = self._call(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            thrown = details.get("exception", {}).get("description") or details.get("text")
            raise JavaScriptError(f"{expression!r} threw: {thrown}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float) -> Any:
        """The first truthy value of ``expression``, evaluated every 0.1 s
        (a throw or a page between documents counts as not yet);
        TimeoutError with the last value otherwise."""
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while True:
            try:
                last = self.evaluate(expression)
                if last:
                    return last
            except (DevToolsError, JavaScriptError) as error:
                last = error
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{expression!r} was not true in {timeout_s:g} s: {last!r}")
            self.pump(0.1)

    def back(self, timeout_s: float = 30) -> None:
        """One step back in the page's history, waiting for it to load."""
        history = self._call("Page.getNavigationHistory")
        index = history["currentIndex"]
        if index == 0:
            raise DevToolsError("no page to go back to")
        since = len(self.events)
        entry = history["entries"][index - 1]
        self._call("Page.navigateToHistoryEntry", {"entryId": entry["id"]}, timeout_s)
        self._await_load(since, timeout_s, entry["url"])

    def current_url(self) -> str:
        """The URL of the page's current history entry."""
        history = self._call("Page.getNavigationHistory")
        return history["entries"][history["currentIndex"]]["url"]

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        """A PNG of the viewport, or of the whole page."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self._call("Page.getLayoutMetrics")["cssContentSize"]
            params["captureBeyondViewport"] = True
            params["clip"] = {
                "x": 0,
                "y": 0,
                "width": size["width"],
                "height": size["height"],
                "scale": 1,
            }
        data = self._call("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path


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
    with tempfile.TemporaryDirectory(prefix="iorig-chromium-") as own:
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
            env=_own_tmp(own),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done.stdout, console, done.stderr
