"""`rewardlang report`'s page in a real browser: headless Chromium (Debian's ``chromium``) driven over the DevTools
protocol (``--remote-debugging-pipe``: JSON messages separated by NUL bytes on file descriptors 3 and 4, so no port
and no extra package). The page must load with no console message of level error and no uncaught exception, must
not ask for anything beyond its own file (every request is recorded; the page is self-contained, so offline), and
its figures must be visible: every histogram has a size on the page, and a screenshot of each of the first ones holds
the bars' colour where the SVG draws them (pixels counted, not just "not blank").

The harness is shown able to fail: a control page with a console error, an exception, a fetched image and a blank
"figure" is caught on each count. Under CI=true a missing chromium fails, never skips (scripts/install.sh --test
installs it).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "codepo_text.reward"
BAR = (0x44, 0x72, 0xC4)  # rewardlang/report.py's histogram bar fill (#4472c4)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI") == "true":
        pytest.fail("chromium is not installed (scripts/install.sh --test installs Debian's chromium)")
    pytest.skip("chromium is not installed (scripts/install.sh --test installs it)")


class Browser:
    """One headless Chromium and one page, spoken to over the DevTools protocol on a pipe."""

    def __init__(self) -> None:
        self.profile = tempfile.mkdtemp(prefix="rl-chromium-")
        # chromium reads fd 3 and writes fd 4; the pipes are first moved to fds >= 10 so that putting them on 3 and 4
        # cannot overwrite one with the other, then bash places them (a preexec dup2 would be closed again by
        # subprocess's close_fds). --no-sandbox: CI runs as root, where Chromium's own sandbox refuses to start.
        to_r, to_w, from_r, from_w = (self._high(fd) for fd in (*os.pipe(), *os.pipe()))
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{to_r} 4>&{from_w} {to_r}<&- {from_w}>&-', _chromium(), "--headless",
             "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             f"--user-data-dir={self.profile}", "--no-first-run", "--disable-extensions",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--window-size=1280,2000", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(to_r, from_w))
        os.close(to_r)
        os.close(from_w)
        self.w, self.r = os.fdopen(to_w, "wb", buffering=0), os.fdopen(from_r, "rb", buffering=0)
        self.buf = b""
        self.next_id = 0
        self.events: list[dict] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=True)

    @staticmethod
    def _high(fd: int) -> int:
        import fcntl

        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(fd)
        return high

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self.buf:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer from chromium")
            chunk = self.r.read(65536)
            if not chunk:
                raise RuntimeError(f"chromium closed the pipe (exit {self.proc.poll()})")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method: str, session: bool = False, timeout: float = 60, **params) -> dict:
        self.next_id += 1
        msg: dict = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        self.w.write(json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m["result"]
            self.events.append(m)

    def wait_for(self, method: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        for m in self.events:
            if m.get("method") == method:
                return m
        while True:
            m = self._read(deadline)
            self.events.append(m)
            if m.get("method") == method:
                return m

    def open(self, url: str) -> None:
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired")
        self.call("Runtime.evaluate", session=True, expression="1")  # drains what the load queued before it

    def problems(self) -> dict[str, list[str]]:
        """Console errors, uncaught exceptions, and every request other than the page itself."""
        errors, exceptions, requests = [], [], []
        for m in self.events:
            p = m.get("params", {})
            if m.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                errors.append(" ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif m.get("method") == "Log.entryAdded" and p["entry"]["level"] == "error":
                errors.append(p["entry"]["text"])
            elif m.get("method") == "Runtime.exceptionThrown":
                exceptions.append(p["exceptionDetails"].get("text", ""))
            elif m.get("method") == "Network.requestWillBeSent" and p.get("type") != "Document":
                requests.append(p["request"]["url"])
        return {"console errors": errors, "exceptions": exceptions, "requests": requests}

    def evaluate(self, expression: str):
        res = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        assert "exceptionDetails" not in res, res
        return res["result"]["value"]

    def screenshot(self, clip: dict):
        from PIL import Image  # Pillow comes with matplotlib, a dependency

        data = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True,
                         clip={**clip, "scale": 1})["data"]
        return Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a browser that already went: the wait/kill below settles it
            self.call("Browser.close", timeout=10)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.w.close()
        self.r.close()
        shutil.rmtree(self.profile, ignore_errors=True)


FIGURES = """Array.from(document.querySelectorAll('svg')).map(s => {
  const r = s.getBoundingClientRect();
  return {label: s.getAttribute('aria-label'), x: r.x + scrollX, y: r.y + scrollY, width: r.width,
          height: r.height, bars: s.querySelectorAll('rect').length,
          drawn: Array.from(s.querySelectorAll('rect')).filter(b => b.getBoundingClientRect().height >= 1).length};
})"""


def bar_pixels(img) -> int:
    """Pixels of the bars' colour (a small tolerance for anti-aliasing)."""
    import numpy as np

    px = np.asarray(img, dtype=int)
    return int((np.abs(px - np.array(BAR)) <= 8).all(axis=-1).sum())


@pytest.fixture(scope="module")
def browser():
    b = Browser()
    yield b
    b.close()


@pytest.fixture(scope="module")
def report_page(tmp_path_factory) -> Path:
    good = "<reasoning>Step 1: a. Step 2: b. Thus c.</reasoning><answer>```python\ndef f(x):\n    return x\n```</answer>"
    short = "<reasoning>short</reasoning><answer>x</answer>"
    rows = [{"prompt": f"problem {p}", "completion": [good, short, "no tags", short][(p + k) % 4]}
            for p in range(8) for k in range(4)]
    d = tmp_path_factory.mktemp("report-browser")
    (d / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = subprocess.run([sys.executable, "-m", "rewardlang", "report", str(SPEC), "-i", str(d / "rows.jsonl"),
                          "-o", str(d / "report.html")], check=False, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stderr
    return d / "report.html"


def test_report_renders_without_errors_or_requests(browser, report_page):
    browser.open(report_page.as_uri())
    assert browser.problems() == {"console errors": [], "exceptions": [], "requests": []}
    assert browser.evaluate("document.title").startswith("rewardlang report: codepo_text")


def test_report_figures_are_visible(browser, report_page):
    browser.open(report_page.as_uri())
    figures = browser.evaluate(FIGURES)
    labels = [f["label"] for f in figures]
    # the total, each of codepo_text's three components and the advantage distribution each have a histogram
    assert labels == ["total", "format", "reason", "rep", "advantage"]
    for f in figures:
        assert f["width"] >= 300 and f["height"] >= 100, f  # laid out at its size, not collapsed or hidden
        assert f["bars"] == 20 and f["drawn"] >= 1, f
    for f in figures[:3]:
        img = browser.screenshot({"x": f["x"], "y": f["y"], "width": f["width"], "height": f["height"]})
        # the bars cover part of the figure: drawn, not blank, and not a solid block of one colour either
        share = bar_pixels(img) / (img.width * img.height)
        assert 0.02 < share < 0.9, (f, share)


def test_the_harness_catches_what_it_looks_for(browser, tmp_path):
    """A page with each fault the tests above look for: every one is reported."""
    page = tmp_path / "bad.html"
    page.write_text("<!doctype html><html><head><title>bad</title></head><body>"
                    '<img src="http://192.0.2.1/x.png">'
                    '<svg aria-label="blank" width="320" height="120"></svg>'
                    "<script>console.error('broken figure'); undefined_function();</script></body></html>")
    browser.open(page.as_uri())
    found = browser.problems()
    assert "broken figure" in found["console errors"]
    assert found["exceptions"]
    assert found["requests"] == ["http://192.0.2.1/x.png"]
    f = browser.evaluate(FIGURES)[0]
    img = browser.screenshot({"x": f["x"], "y": f["y"], "width": f["width"], "height": f["height"]})
    assert f["bars"] == 0 and bar_pixels(img) == 0
