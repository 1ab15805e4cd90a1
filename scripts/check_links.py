"""Check the links of the built site: `make linkcheck` (after `make book`), run by .ci/run.

    python scripts/check_links.py [--html DIR] [--external] [--timeout S]

Every page of the site (``_build/html/**/*.html``; the theme templates in ``_static/`` aside) is read, and every
link of it (``href`` of ``<a>`` and ``<link>``, ``src`` of ``<img>``, ``<script>``, ``<source>``, ``<iframe>``) is
classified:

* **internal** (a relative path, ``#anchor`` or ``file:``): the target file must exist in the site, and an anchor
  (``page.html#section``) must be an ``id`` (or ``<a name>``) of that page. A broken internal link fails the check.
* **external** (``http(s)://``, ``mailto:``): listed with their count. They are only fetched with ``--external``
  (a HEAD, then a GET, request each, ``--timeout`` seconds), and a failing one is reported as a warning, never as
  a failure: the CI machine may be offline, and a site elsewhere may be down for a while.

Sphinx's own ``linkcheck`` builder would re-read every page (minutes for this book) and checks external links only;
this reads the built HTML in seconds. Exit status 1 when an internal link is broken.
"""
from __future__ import annotations

import argparse
import sys
import time
import urllib.error
import urllib.request
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

ROOT = Path(__file__).resolve().parent.parent
LINK_ATTRS = {"a": "href", "link": "href", "img": "src", "script": "src", "source": "src", "iframe": "src"}
SKIP_DIRS = ("_static/",)  # theme templates and MathJax: not pages of the book (links into _static/ are checked)
IGNORED_SCHEMES = ("javascript:", "data:", "tel:")


class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        attr = LINK_ATTRS.get(tag)
        if attr and attrs.get(attr):
            if tag == "link" and (attrs.get("rel") or "") in ("preconnect", "dns-prefetch"):
                return
            self.links.append(attrs[attr].strip())


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    return page


def pages(html: Path) -> list[Path]:
    return sorted(p for p in html.rglob("*.html")
                  if not any(p.relative_to(html).as_posix().startswith(d) for d in SKIP_DIRS))


def check_site(html: Path) -> tuple[list[str], dict[str, list[str]]]:
    """(broken internal links as messages, external URL -> the pages linking to it)."""
    html = html.resolve()
    parsed: dict[Path, Page] = {}

    def page_of(path: Path) -> Page:
        if path not in parsed:
            parsed[path] = parse(path)
        return parsed[path]

    broken, external = [], defaultdict(list)
    for source in pages(html):
        rel = source.relative_to(html).as_posix()
        for link in page_of(source).links:
            if link.startswith(IGNORED_SCHEMES):
                continue
            scheme = urlparse(link).scheme
            if scheme in ("http", "https", "mailto", "ftp"):
                external[link].append(rel)
                continue
            url, fragment = urldefrag(link)
            if scheme == "file":
                target = Path(unquote(urlparse(url).path))
            elif url:
                target = (source.parent / unquote(urlparse(url).path)).resolve()
            else:
                target = source
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{rel}: {link} -> {target} does not exist")
                continue
            if not target.is_relative_to(html):
                broken.append(f"{rel}: {link} points outside the site ({target})")
                continue
            if fragment and target.suffix == ".html" and unquote(fragment) not in page_of(target).ids:
                broken.append(f"{rel}: {link} -> no anchor #{fragment} in {target.relative_to(html).as_posix()}")
    return broken, dict(external)


def fetch(url: str, timeout: float) -> str | None:
    """None when the URL answers, else why not."""
    if url.startswith("mailto:"):
        return None
    headers = {"User-Agent": "rfm-book-linkcheck/1.0"}
    last = None
    for method in ("HEAD", "GET"):
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method=method, headers=headers),
                                        timeout=timeout) as resp:
                if resp.status < 400:
                    return None
                last = f"HTTP {resp.status}"
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
    return last


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--html", type=Path, default=ROOT / "_build" / "html", help="the built site (default: _build/html)")
    ap.add_argument("--external", action="store_true", help="also fetch the external links (failures are warnings)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per external link (default 10)")
    args = ap.parse_args(argv)
    if not (args.html / "index.html").is_file():
        print(f"linkcheck: no site at {args.html}: build the book first (make book)", file=sys.stderr)
        return 1
    t0 = time.perf_counter()
    broken, external = check_site(args.html)
    n_pages = len(pages(args.html.resolve()))
    for problem in broken:
        print(f"linkcheck: BROKEN {problem}", file=sys.stderr)
    if args.external:
        failed = 0
        for url in sorted(external):
            why = fetch(url, args.timeout)
            if why:
                failed += 1
                more = f" and {len(external[url]) - 1} more page(s)" if len(external[url]) > 1 else ""
                print(f"linkcheck: warning: {url} ({why}), linked from {external[url][0]}{more}", file=sys.stderr)
        ext = f"{len(external)} external link(s) fetched, {failed} did not answer (warnings only)"
    else:
        ext = f"{len(external)} external link(s) not fetched (--external to fetch them)"
    print(f"linkcheck: {n_pages} page(s), {len(broken)} broken internal link(s); {ext} "
          f"({time.perf_counter() - t0:.1f} s)")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
