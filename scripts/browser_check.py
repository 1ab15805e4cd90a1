"""Check a built chapter page in a real browser (headless Chromium): `make browser-check` runs this.

    python scripts/browser_check.py [PAGE ...]    (default: _build/html/notebooks/kernels_and_agop.html)

For each page: Chromium renders it and dumps the DOM (so what is checked is what a browser shows, after the theme's
scripts ran), and takes a screenshot into _build/screenshots/<page>.png. The check fails unless

* the page has at least one image from the chapter's outputs (an <img> inside a cell output) whose file exists and
  is a real PNG figure: at least 100 x 100 pixels and not blank;
* no cell output is an error (a traceback block, or "Traceback (most recent call last)" in an output);
* the screenshot itself is not blank (its pixels vary).

Chromium is the Debian package `chromium` (`apt-get install -y chromium`); .ci/run installs it when missing.
"""
from __future__ import annotations

import argparse
import html.parser
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
DEFAULT_PAGES = [HTML / "notebooks" / "kernels_and_agop.html"]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--hide-scrollbars", "--disable-sync",
         "--disable-dev-shm-usage", "--mute-audio"]


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit("browser-check: no Chromium found; install the Debian package: apt-get install -y chromium")


def chromium(args: list[str], timeout: int = 120) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        cmd = [find_chromium(), *FLAGS, f"--user-data-dir={profile}", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


class PageParser(html.parser.HTMLParser):
    """Collects the <img> tags inside cell outputs and the text and classes of the outputs."""

    def __init__(self):
        super().__init__()
        self.stack: list[tuple[str, bool]] = []  # (tag, opens an output area)
        self.output_depth = 0
        self.output_images: list[str] = []
        self.all_images: list[str] = []
        self.error_blocks: list[str] = []
        self.output_text: list[str] = []

    VOID = {"img", "br", "hr", "meta", "link", "input", "source", "col", "area", "base", "wbr", "embed", "track"}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "img":
            src = attrs.get("src", "")
            self.all_images.append(src)
            if self.output_depth:
                self.output_images.append(src)
            return
        if tag in self.VOID:
            return
        opens = "cell_output" in classes or "output" in classes
        if self.output_depth and any(c in ("traceback", "error") or c.endswith("-traceback") for c in classes):
            self.error_blocks.append(" ".join(classes))
        if "highlight-ipythontb" in classes:
            self.error_blocks.append(" ".join(classes))
        self.stack.append((tag, opens))
        if opens:
            self.output_depth += 1

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        # pop to the matching tag (tolerates sloppy HTML)
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                for _, opens in self.stack[i:]:
                    if opens:
                        self.output_depth -= 1
                del self.stack[i:]
                break

    def handle_data(self, data):
        if self.output_depth:
            self.output_text.append(data)


def png_stats(path: Path) -> tuple[int, int, float]:
    import matplotlib.image as mpimg

    img = mpimg.imread(path)
    rgb = img[..., :3] if img.ndim == 3 else img
    return img.shape[0], img.shape[1], float(np.std(rgb))


def check_page(page: Path) -> list[str]:
    problems = []
    if not page.exists():
        return [f"{page} does not exist: run `make book` first"]
    url = page.resolve().as_uri()

    t0 = time.perf_counter()
    dom = chromium(["--virtual-time-budget=5000", "--dump-dom", url])
    if dom.returncode != 0 or "<html" not in dom.stdout:
        return [f"chromium --dump-dom failed (exit {dom.returncode}):\n{dom.stderr[-2000:]}"]
    parser = PageParser()
    parser.feed(dom.stdout)

    figures = []
    for src in parser.output_images:
        if src.startswith("data:image/png"):
            figures.append(src[:40])
            continue
        path = (page.parent / src.split("?")[0].split("#")[0]).resolve()
        if not path.exists():
            problems.append(f"output image {src} -> {path} does not exist")
            continue
        if path.suffix.lower() != ".png" or path.read_bytes()[:8] != b"\x89PNG\r\n\x1a\n":
            continue
        h, w, std = png_stats(path)
        if h >= 100 and w >= 100 and std > 0.01:
            figures.append(str(path.relative_to(ROOT)))
        else:
            problems.append(f"output image {path.name} looks trivial: {w}x{h} pixels, std {std:.4f}")
    if not figures:
        problems.append(f"no figure among the page's cell outputs (images in outputs: {parser.output_images}; "
                        f"all images: {parser.all_images[:10]})")
    if parser.error_blocks:
        problems.append(f"error output blocks on the page: {parser.error_blocks[:5]}")
    text = " ".join(parser.output_text)
    if "Traceback (most recent call last)" in text or "Error Traceback" in text:
        i = text.find("Traceback")
        problems.append(f"a traceback in the outputs: ...{text[max(0, i - 200):i + 300]}...")

    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / f"{page.stem}.png"
    shot.unlink(missing_ok=True)
    res = chromium(["--window-size=1280,2200", "--virtual-time-budget=5000", f"--screenshot={shot}", url])
    if not shot.exists():
        problems.append(f"no screenshot written (exit {res.returncode}):\n{res.stderr[-2000:]}")
    else:
        h, w, std = png_stats(shot)
        if std < 0.02:
            problems.append(f"the screenshot {shot} is blank (pixel std {std:.4f})")
        print(f"browser-check: {page.relative_to(ROOT)}: {len(figures)} figure(s) {figures[:3]}, "
              f"screenshot {shot.relative_to(ROOT)} ({w}x{h}, pixel std {std:.3f}), {time.perf_counter() - t0:.1f} s")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pages", nargs="*", type=Path, help="built pages to check")
    args = ap.parse_args(argv)
    pages = args.pages or DEFAULT_PAGES
    failed = False
    for page in pages:
        problems = check_page(page if page.is_absolute() else Path(os.getcwd()) / page)
        for p in problems:
            print(f"browser-check: {page}: {p}", file=sys.stderr)
        failed |= bool(problems)
    print("browser-check: FAILED" if failed else f"browser-check: {len(pages)} page(s) OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
