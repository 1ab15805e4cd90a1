"""The whole book as one PDF: `make pdf` runs this after `make book`.

    python scripts/book_pdf.py [--book DIR] [--out PDF] [--no-build]

1. ``jupyter-book build -W -n --keep-going --builder singlehtml``: every page on one HTML page, into
   ``_build/singlehtml`` (the chapters come from the execution cache that `make book` filled; nothing is executed
   when the cache is fresh).
2. Headless Chromium under Selenium (as in scripts/browser_check.py) opens it, waits for MathJax to
   typeset the formulas (MathJax is loaded from its CDN, so offline the formulas stay as TeX source), and prints it
   to ``_build/html/rfm-book.pdf`` (A4, backgrounds, no browser header or footer).
3. Every page of ``_build/html`` gets a "book .pdf" entry in its download menu, pointing to that file (idempotent).
"""
from __future__ import annotations

import argparse
import base64
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import browser_check  # the Selenium-driven Chromium

ROOT = Path(__file__).resolve().parent.parent
PDF_NAME = "rfm-book.pdf"
MARKER = "btn-download-book-pdf-button"
PRINT_LI = re.compile(r'(<li>\s*<button onclick="window\.print\(\)")')
# Code and outputs wrap instead of running off the paper's edge.
PRINT_CSS_JS = r"""(() => {
  const style = document.createElement('style');
  style.textContent = '@media print { pre, .output pre, .highlight pre { white-space: pre-wrap !important; ' +
                      'word-break: break-word !important; overflow: visible !important; } }';
  document.head.appendChild(style);
  return true;
})()"""
MATHJAX_READY_JS = r"""(() => {
  if (!window.MathJax) return 'none';
  if (!(MathJax.startup && MathJax.startup.promise)) return 'loading';
  if (window.__rfmTypeset === undefined) {
    window.__rfmTypeset = 'waiting';
    MathJax.startup.promise.then(() => { window.__rfmTypeset = 'done'; }, () => { window.__rfmTypeset = 'failed'; });
  }
  return window.__rfmTypeset;
})()"""


def build_singlehtml(book: Path) -> Path:
    jb = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", "-W", "-n", "--keep-going", "--builder", "singlehtml",
           str(book)]
    print("pdf:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=book)
    return book / "_build" / "singlehtml" / "index.html"


def print_pdf(page: Path, pdf: Path, mathjax_wait: float = 30.0) -> dict:
    from selenium.webdriver.common.print_page_options import PrintOptions

    browser = browser_check.driver(timeout=300)
    try:
        browser.get(page.resolve().as_uri())
        state, deadline = "none", time.monotonic() + mathjax_wait
        while time.monotonic() < deadline:
            state = browser.execute_script("return " + MATHJAX_READY_JS)
            if state in ("none", "done", "failed"):
                break
            time.sleep(0.5)
        browser.execute_script("return " + PRINT_CSS_JS)
        options = PrintOptions()
        options.page_width, options.page_height = 21.0, 29.7  # A4, in cm
        options.margin_top = options.margin_bottom = options.margin_left = options.margin_right = 1.27
        options.background = True
        data = browser.print_page(options)
    finally:
        browser.quit()
    pdf.parent.mkdir(parents=True, exist_ok=True)
    pdf.write_bytes(base64.b64decode(data))
    pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf.read_bytes()))
    return {"mathjax": state, "pages": pages, "bytes": pdf.stat().st_size}


def link_pdf(html: Path, pdf: Path) -> int:
    """Add the book's PDF to the download menu of every page under ``html``; returns the pages changed."""
    changed = 0
    for page in sorted(html.rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        if MARKER in text or not PRINT_LI.search(text):
            continue
        href = os.path.relpath(pdf, page.parent).replace(os.sep, "/")
        entry = (f'<li><a href="{href}" download class="btn btn-sm {MARKER} dropdown-item" '
                 f'title="Download the whole book as a PDF" data-bs-placement="left" data-bs-toggle="tooltip">'
                 f'<span class="btn__icon-container"><i class="fas fa-book"></i></span>'
                 f'<span class="btn__text-container">book .pdf</span></a></li>\n')
        page.write_text(PRINT_LI.sub(lambda m, entry=entry: entry + m.group(1), text, count=1), encoding="utf-8")
        changed += 1
    return changed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--book", type=Path, default=ROOT, help="the book's folder (default: the repository)")
    ap.add_argument("--out", type=Path, default=None, help=f"the PDF (default: <book>/_build/html/{PDF_NAME})")
    ap.add_argument("--no-build", action="store_true", help="print the existing _build/singlehtml")
    ap.add_argument("--mathjax-wait", type=float, default=30.0, help="seconds to wait for MathJax (default 30)")
    args = ap.parse_args(argv)
    book = args.book.resolve()
    html = book / "_build" / "html"
    pdf = (args.out or html / PDF_NAME).resolve()
    t0 = time.perf_counter()
    page = book / "_build" / "singlehtml" / "index.html" if args.no_build else build_singlehtml(book)
    info = print_pdf(page, pdf, args.mathjax_wait)
    if info["mathjax"] != "done":
        print(f"pdf: MathJax {info['mathjax']} (offline?): formulas are printed as TeX source", file=sys.stderr)
    linked = link_pdf(html, pdf) if pdf.parent == html and html.is_dir() else 0
    print(f"pdf: {pdf} ({info['pages']} pages, {info['bytes'] / 1e6:.1f} MB) in {time.perf_counter() - t0:.0f} s; "
          f"linked from {linked} page(s)")
    return 0 if info["pages"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
