"""The whole book as one PDF: `make pdf` runs this after `make book`.

    python scripts/book_pdf.py [--book DIR] [--out PDF] [--timeout S] [--mathjax-wait S] [--allow-tex]

1. The pages of the built site (``_build/html``), in the order of ``_toc.yml`` (the introduction, every chapter,
   the API reference, the appendix), are opened one by one in headless Chromium under Selenium (as in
   scripts/browser_check.py). Each page waits for MathJax, which ships with the site (``_static/mathjax``, see
   book/api/_ext/rfm_mathjax.py), to typeset its formulas; a page that still shows raw TeX fails the PDF
   (``--allow-tex`` prints it anyway).
2. Each page is printed on its own (DevTools' ``Page.printToPDF``: A4, backgrounds, code wrapped, no browser header
   or footer): one print of the whole book as a single HTML page took longer than the WebDriver connection's read
   timeout (120 s) on a 2-core machine. ``--timeout`` (default 600 s, or RFM_PDF_TIMEOUT) is the limit for one
   page; a page whose renderer times out (a loaded machine) is tried again, up to three times.
3. The pages are merged with pypdf into ``_build/html/rfm-book.pdf``, with one bookmark per page (its title).
4. Every page of ``_build/html`` gets a "book .pdf" entry in its download menu, pointing to that file (idempotent).

Needs Chromium and chromedriver (Debian: ``apt-get install chromium chromium-driver``; .ci/run installs them) and
requirements/browser.txt (Selenium, pypdf; ``make pdf`` installs them).
"""
from __future__ import annotations

import argparse
import base64
import io
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import browser_check  # the Selenium-driven Chromium, and the check of the formulas

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


def toc_pages(book: Path) -> list[Path]:
    """The built pages of the book's _toc.yml, in reading order (root first)."""
    import yaml

    toc = yaml.safe_load((book / "_toc.yml").read_text())
    docs: list[str] = [str(toc["root"])]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                docs.append(str(node["file"]))
            for key in ("parts", "chapters", "sections"):
                for child in node.get(key, []) or []:
                    walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk({k: v for k, v in toc.items() if k != "root"})
    html = book / "_build" / "html"
    return [html / f"{Path(d).with_suffix('')}.html" for d in dict.fromkeys(docs)]


# Chromium's DevTools printToPDF (what Selenium's print_page calls, without its option conversion): A4, margins
# 1.27 cm, backgrounds, no browser header or footer. Sizes in inches.
PRINT_PARAMS = {"paperWidth": 21.0 / 2.54, "paperHeight": 29.7 / 2.54, "marginTop": 0.5, "marginBottom": 0.5,
                "marginLeft": 0.5, "marginRight": 0.5, "printBackground": True, "displayHeaderFooter": False,
                "preferCSSPageSize": False}
TRIES = 3  # a loaded machine sometimes times a renderer out ("Timed out receiving message from renderer"): retry


def print_page(browser, page: Path, mathjax_wait: float, log=print) -> tuple[bytes, str, list[str], dict]:
    """One page as PDF bytes, its title, the problems with its formulas, and what was seen of them."""
    from selenium.common.exceptions import TimeoutException, WebDriverException

    for attempt in range(1, TRIES + 1):
        try:
            browser.get(page.resolve().as_uri())
            problems, math = browser_check.check_math(browser, page, mathjax_wait)
            title = browser.title.split(" \u2014 ")[0].strip() or page.stem
            browser.execute_script("return " + PRINT_CSS_JS)
            data = browser.execute_cdp_cmd("Page.printToPDF", PRINT_PARAMS)["data"]
            return base64.b64decode(data), title, problems, math
        except (TimeoutException, WebDriverException) as exc:
            if attempt == TRIES:
                raise
            log(f"pdf: {page.name}: {str(exc).splitlines()[0]} (try {attempt} of {TRIES}); again")
            time.sleep(2 * attempt)
    raise AssertionError("unreachable")


def print_book(pages: list[Path], pdf: Path, *, timeout: float = 600.0, mathjax_wait: float = 30.0,
               allow_tex: bool = False, log=print) -> dict:
    """Print ``pages`` one by one and merge them into ``pdf`` (one bookmark per page)."""
    try:
        from pypdf import PdfReader, PdfWriter
    except ImportError:
        raise SystemExit("pdf: pypdf is missing: pip install -r requirements/browser.txt (make pdf does it)") from None
    missing = [p for p in pages if not p.is_file()]
    if missing:
        raise SystemExit(f"pdf: {len(missing)} page(s) not built, e.g. {missing[0]}: run `make book` first")
    browser = browser_check.driver(timeout=timeout)
    browser.command_executor.client_config.timeout = timeout  # the HTTP read timeout of one WebDriver command
    writer, problems, typeset, formulas = PdfWriter(), [], 0, 0
    try:
        for page in pages:
            t0 = time.perf_counter()
            data, title, bad, math = print_page(browser, page, mathjax_wait, log)
            problems += [f"{page.name}: {b}" for b in bad]
            typeset, formulas = typeset + math["n_typeset"], formulas + math["n_math"]
            reader = PdfReader(io.BytesIO(data))
            writer.append(reader, outline_item=title)
            log(f"pdf: {page.parent.name}/{page.name} -> {len(reader.pages)} page(s), "
                f"{math['n_typeset']}/{math['n_math']} formula(s) typeset ({time.perf_counter() - t0:.1f} s)")
    finally:
        browser.quit()
    if problems and not allow_tex:
        for problem in problems:
            print(f"pdf: {problem}", file=sys.stderr)
        raise SystemExit("pdf: FAILED: formulas would be printed as TeX (--allow-tex prints anyway)")
    writer.add_metadata({"/Title": "Feature learning through the AGOP: an executable replication book"})
    pdf.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    writer.write(buffer)
    pdf.write_bytes(buffer.getvalue())
    return {"pages": len(writer.pages), "bytes": pdf.stat().st_size, "typeset": typeset, "formulas": formulas,
            "problems": problems}


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
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("RFM_PDF_TIMEOUT", 600)),
                    help="seconds one page may take to load and print (default 600, or RFM_PDF_TIMEOUT)")
    ap.add_argument("--mathjax-wait", type=float, default=30.0,
                    help="seconds to wait for MathJax on a page (default 30)")
    ap.add_argument("--allow-tex", action="store_true", help="print even when formulas are not typeset")
    args = ap.parse_args(argv)
    book = args.book.resolve()
    html = book / "_build" / "html"
    if not (html / "index.html").is_file():
        print("pdf: build the book first (make book)", file=sys.stderr)
        return 1
    pdf = (args.out or html / PDF_NAME).resolve()
    t0 = time.perf_counter()
    pages = toc_pages(book)
    info = print_book(pages, pdf, timeout=args.timeout, mathjax_wait=args.mathjax_wait, allow_tex=args.allow_tex)
    linked = link_pdf(html, pdf) if pdf.parent == html and html.is_dir() else 0
    print(f"pdf: {pdf} ({len(pages)} web pages, {info['pages']} PDF pages, {info['bytes'] / 1e6:.1f} MB, "
          f"{info['typeset']}/{info['formulas']} formulas typeset) in {time.perf_counter() - t0:.0f} s; "
          f"linked from {linked} page(s)")
    return 0 if info["pages"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
