"""Check a built chapter page in a real browser (headless Chromium): `make browser-check` runs this.

    python scripts/browser_check.py [PAGE ...]    (default: _build/html/notebooks/kernels_and_agop.html)

Chromium (the Debian package `chromium`; .ci/run installs it when missing) loads each page and is driven over the
DevTools protocol on a pipe (no network port). The check fails unless

* the page has at least one image among its cell outputs that the browser loaded (complete, at least 100 x 100
  pixels) and whose file exists and is a PNG figure that is not blank;
* no cell output is an error (a traceback block, an error output, or "Traceback (most recent call last)");
* the screenshots are not blank (their pixels vary).

It writes two screenshots to _build/screenshots/: ``<page>.png``, the top of the page as a reader first sees it, and
``<page>-figure.png``, the page scrolled to the chapter's first figure.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
DEFAULT_PAGES = [HTML / "notebooks" / "kernels_and_agop.html"]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--hide-scrollbars", "--disable-sync",
         "--disable-dev-shm-usage", "--mute-audio"]
WIDTH, HEIGHT = 1280, 1600

# Runs in the page: what a reader would see of the cell outputs.
INSPECT_JS = r"""(() => {
  const outputs = [...document.querySelectorAll('.cell_output')];
  const imgs = outputs.flatMap(o => [...o.querySelectorAll('img')]);
  const errors = [...document.querySelectorAll(
      '.cell_output .traceback, .cell_output .highlight-ipythontb, .cell_output .output.error')];
  const text = outputs.map(o => o.innerText).join('\n');
  const tb = text.indexOf('Traceback (most recent call last)');
  return JSON.stringify({
    title: document.title,
    n_outputs: outputs.length,
    images: imgs.map(i => ({src: i.currentSrc || i.src, complete: i.complete,
                            width: i.naturalWidth, height: i.naturalHeight})),
    errors: errors.map(e => e.className),
    traceback: tb < 0 ? null : text.slice(Math.max(0, tb - 200), tb + 400),
  });
})()"""
SCROLL_JS = r"""(() => {
  const img = [...document.querySelectorAll('.cell_output img')].find(i => i.complete && i.naturalWidth >= 100);
  if (!img) return false;
  img.scrollIntoView({block: 'center'});
  return true;
})()"""


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit("browser-check: no Chromium found; install the Debian package: apt-get install -y chromium")


class Chromium:
    """A headless Chromium driven over the DevTools protocol on a pipe (fds 3 and 4, messages ending in NUL)."""

    def __init__(self, timeout: float = 60.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()

        def child_fds():
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        cmd = [find_chromium(), *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-pipe",
               f"--window-size={WIDTH},{HEIGHT}", "about:blank"]
        self.proc = subprocess.Popen(cmd, pass_fds=(3, 4), preexec_fn=child_fds, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.w = os.fdopen(to_chrome_w, "wb", buffering=0)
        self.r = os.fdopen(from_chrome_r, "rb", buffering=0)
        self.buf, self.next_id, self.events, self.session = b"", 0, [], None

    def _read(self) -> dict:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.r], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = self.r.read(1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method: str, params: dict | None = None, *, page: bool = True) -> dict:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if page and self.session:
            msg["sessionId"] = self.session
        self.w.write(json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, event: str) -> dict:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for i, e in enumerate(self.events):
                if e.get("method") == event:
                    return self.events.pop(i)
            self.events.append(self._read())
        raise TimeoutError(f"no {event} from chromium")

    def open(self, url: str):
        target = self.send("Target.createTarget", {"url": "about:blank"}, page=False)
        self.session = self.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True},
                                 page=False)["sessionId"]
        self.send("Page.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
        self.send("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")
        time.sleep(0.5)  # let the theme's scripts settle

    def evaluate(self, js: str):
        res = self.send("Runtime.evaluate", {"expression": js, "returnByValue": True})
        if "exceptionDetails" in res:
            raise RuntimeError(f"script failed in the page: {res['exceptionDetails']}")
        return res["result"].get("value")

    def screenshot(self, path: Path):
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self):
        try:
            self.send("Browser.close", page=False)
        except Exception:  # noqa: BLE001 - closing anyway
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def png_stats(path: Path) -> tuple[int, int, float]:
    import matplotlib.image as mpimg

    img = mpimg.imread(path)
    rgb = img[..., :3] if img.ndim == 3 else img
    return img.shape[0], img.shape[1], float(np.std(rgb))


def check_page(page: Path) -> list[str]:
    if not page.exists():
        return [f"{page} does not exist: run `make book` first"]
    t0 = time.perf_counter()
    problems: list[str] = []
    SHOTS.mkdir(parents=True, exist_ok=True)
    top, fig_shot = SHOTS / f"{page.stem}.png", SHOTS / f"{page.stem}-figure.png"
    for old in (top, fig_shot):
        old.unlink(missing_ok=True)
    browser = Chromium()
    try:
        browser.open(page.resolve().as_uri())
        info = json.loads(browser.evaluate(INSPECT_JS))
        browser.screenshot(top)
        if browser.evaluate(SCROLL_JS):
            time.sleep(0.3)
            browser.screenshot(fig_shot)
    finally:
        browser.close()

    figures = []
    for img in info["images"]:
        src = img["src"]
        if not (img["complete"] and img["width"] >= 100 and img["height"] >= 100):
            problems.append(f"output image not shown by the browser: {img}")
            continue
        if src.startswith("data:image/png"):
            figures.append("inline PNG")
            continue
        path = Path(unquote(urlparse(src).path))
        if not path.exists():
            problems.append(f"output image {src} does not exist")
            continue
        if path.read_bytes()[:8] != b"\x89PNG\r\n\x1a\n":
            continue  # an SVG or JPEG output is fine, but not the figure we look for
        h, w, std = png_stats(path)
        if std > 0.01:
            figures.append(str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path))
        else:
            problems.append(f"output image {path.name} is blank ({w}x{h} pixels, std {std:.4f})")
    if not figures:
        problems.append(f"no figure among the page's {info['n_outputs']} cell outputs (images: {info['images']})")
    if info["errors"]:
        problems.append(f"{len(info['errors'])} error output(s) on the page: {info['errors'][:5]}")
    if info["traceback"]:
        problems.append(f"a traceback in the outputs: ...{info['traceback']}...")
    for shot in (top, fig_shot):
        if not shot.exists():
            problems.append(f"no screenshot {shot.relative_to(ROOT)}")
            continue
        h, w, std = png_stats(shot)
        if std < 0.02:
            problems.append(f"the screenshot {shot.relative_to(ROOT)} is blank (pixel std {std:.4f})")
    print(f"browser-check: {page.relative_to(ROOT) if page.is_relative_to(ROOT) else page}: "
          f"'{info['title']}', {info['n_outputs']} outputs, {len(figures)} figure(s) shown, "
          f"{len(info['errors'])} error outputs; screenshots {top.relative_to(ROOT)}, "
          f"{fig_shot.relative_to(ROOT)} ({time.perf_counter() - t0:.1f} s)")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pages", nargs="*", type=Path, help="built pages to check (default: the first chapter)")
    args = ap.parse_args(argv)
    pages = [p if p.is_absolute() else Path.cwd() / p for p in args.pages] or DEFAULT_PAGES
    failed = False
    for page in pages:
        for problem in check_page(page.resolve()):
            print(f"browser-check: {page.name}: {problem}", file=sys.stderr)
            failed = True
    print("browser-check: FAILED" if failed else f"browser-check: {len(pages)} page(s) OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
