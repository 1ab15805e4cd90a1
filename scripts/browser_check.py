"""Check the built chapter pages in a real browser (headless Chromium driven by Selenium): `make browser-check`.

    python scripts/browser_check.py [PAGE ...]    (default: every chapter, _build/html/notebooks/*.html)

Chromium (the Debian packages `chromium` and `chromium-driver`; .ci/run installs them when missing) is driven with
Selenium (requirements/browser.txt; `make browser-check` installs it). For each page the check fails unless

* the page shows at least one figure among its cell outputs that the browser loaded (complete, at least
  100 x 100 pixels), and every output image the page shows is loaded; a PNG figure file is not blank;
* no cell output is an error (a traceback block, an error output, or "Traceback (most recent call last)");
* the launch buttons open this chapter's twin ``notebooks/<slug>.ipynb`` of the repository and branch named in
  _config.yml, in Colab (and on Binder when configured);
* the download menu offers the executed notebook (``_sources/notebooks/<slug>.ipynb``, a notebook with outputs)
  and the page's source;
* the screenshots are not blank (their pixels vary);
* every formula is typeset: MathJax (shipped with the site in ``_static/mathjax``, see
  book/api/_ext/rfm_mathjax.py) loads from the site itself, not from a CDN, finishes typesetting, and no formula,
  and no text outside code, is left as raw TeX (``\\(...\\)``, ``\\[...\\]``, ``$$...$$``, ``\\begin{...}``).

It writes two screenshots per page to _build/screenshots/: ``<page>.png``, the top of the page as a reader first
sees it, and ``<page>-figure.png``, the page scrolled to the chapter's first figure.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
WIDTH, HEIGHT = 1280, 1600
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
         "--disable-background-networking", "--disable-component-update", "--no-first-run", "--mute-audio",
         f"--window-size={WIDTH},{HEIGHT}"]

# Runs in the page: what a reader would see of the cell outputs, and where the header buttons point.
INSPECT_JS = r"""return JSON.stringify((() => {
  const outputs = [...document.querySelectorAll('.cell_output')];
  const imgs = outputs.flatMap(o => [...o.querySelectorAll('img')]);
  const errors = [...document.querySelectorAll(
      '.cell_output .traceback, .cell_output .highlight-ipythontb, .cell_output .output.error')];
  const text = outputs.map(o => o.innerText).join('\n');
  const tb = text.indexOf('Traceback (most recent call last)');
  const links = sel => [...document.querySelectorAll(sel)].map(a => a.href);
  return {
    title: document.title,
    n_outputs: outputs.length,
    images: imgs.map(i => ({src: i.currentSrc || i.src, complete: i.complete,
                            width: i.naturalWidth, height: i.naturalHeight})),
    errors: errors.map(e => e.className),
    traceback: tb < 0 ? null : text.slice(Math.max(0, tb - 200), tb + 400),
    colab: links('a.btn-launch-colab-button, a[href*="colab.research.google.com"]'),
    binder: links('a.btn-launch-binder-button, a[href*="mybinder.org"]'),
    notebook_download: links('a.btn-download-notebook-button'),
    source_download: links('a.btn-download-source-button'),
  };
})())"""
# MathJax's state on the page: 'none' (no MathJax), 'loading', 'waiting', 'done' or 'failed'.
MATHJAX_READY_JS = r"""(() => {
  if (!window.MathJax) return 'none';
  if (!(MathJax.startup && MathJax.startup.promise)) return 'loading';
  if (window.__rfmTypeset === undefined) {
    window.__rfmTypeset = 'waiting';
    MathJax.startup.promise.then(() => { window.__rfmTypeset = 'done'; }, () => { window.__rfmTypeset = 'failed'; });
  }
  return window.__rfmTypeset;
})()"""
# What a reader sees of the formulas: Sphinx's math elements, those MathJax typeset, where MathJax came from, and raw
# TeX left in the text outside code (TeX delimiters in visible text mean a formula was not typeset).
MATH_JS = r"""return JSON.stringify((() => {
  const math = [...document.querySelectorAll('.math')];
  const untypeset = math.filter(m => !m.querySelector('mjx-container') && !m.closest('mjx-container'));
  const scripts = [...document.querySelectorAll('script[src]')].map(s => s.src).filter(s => /mathjax/i.test(s));
  const raw = [];
  const walker = document.createTreeWalker(document.querySelector('main') || document.body, NodeFilter.SHOW_TEXT, {
    acceptNode: n => n.parentElement.closest('pre, code, script, style, textarea, mjx-container, .highlight')
                     ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
  const tex = /\\\(|\\\)|\\\[|\\\]|\$\$|\\begin\{/;
  for (let n = walker.nextNode(); n && raw.length < 5; n = walker.nextNode()) {
    if (tex.test(n.textContent) && n.parentElement.offsetParent !== null) raw.push(n.textContent.trim().slice(0, 120));
  }
  return {n_math: math.length, untypeset: untypeset.slice(0, 5).map(m => m.textContent.trim().slice(0, 120)),
          n_untypeset: untypeset.length, n_typeset: document.querySelectorAll('mjx-container').length,
          scripts: scripts, raw_tex: raw};
})())"""
SCROLL_JS = r"""
  const img = [...document.querySelectorAll('.cell_output img')].find(i => i.complete && i.naturalWidth >= 100);
  if (!img) return false;
  img.scrollIntoView({block: 'center'});
  return true;"""


def wait_for_mathjax(browser, seconds: float) -> str:
    """Wait until MathJax has typeset the page (or failed, or is absent); returns its state."""
    state, deadline = "none", time.monotonic() + seconds
    while True:
        state = browser.execute_script("return " + MATHJAX_READY_JS)
        if state in ("done", "failed") or time.monotonic() > deadline:
            return state
        if state == "none" and not browser.execute_script("return document.querySelector('.math') !== null"):
            return state  # a page without formulas: Sphinx adds no MathJax
        time.sleep(0.2)


def check_math(browser, page: Path, seconds: float = 30.0) -> tuple[list[str], dict]:
    """Problems with the page's formulas: MathJax missing, from a CDN, failing, or raw TeX left on the page."""
    state = wait_for_mathjax(browser, seconds)
    info = json.loads(browser.execute_script(MATH_JS))
    info["state"] = state
    problems = []
    remote = [s for s in info["scripts"] if not s.startswith("file:")]
    if remote and page.resolve().as_uri().startswith("file:"):
        problems.append(f"MathJax is loaded from {remote}, not from the site: offline the formulas stay TeX "
                        f"(mathjax_path in _config.yml)")
    if info["n_math"] and state != "done":
        problems.append(f"{info['n_math']} formula(s) but MathJax is {state!r} after {seconds:.0f} s "
                        f"(scripts: {info['scripts'] or 'none'})")
    if info["n_untypeset"]:
        problems.append(f"{info['n_untypeset']} formula(s) not typeset, shown as TeX: {info['untypeset']}")
    if info["raw_tex"]:
        problems.append(f"raw TeX in the page's text: {info['raw_tex']}")
    return problems, info


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit("browser-check: no Chromium found; install the Debian package: apt-get install -y chromium")


def driver(timeout: float = 120.0):
    """A headless Chromium under Selenium (chromedriver from PATH when there is one, else Selenium Manager's)."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise SystemExit("browser-check: Selenium is missing: pip install -r requirements/browser.txt "
                         "(make browser-check does it)") from None
    options = webdriver.ChromeOptions()
    options.binary_location = find_chromium()
    for flag in FLAGS:
        options.add_argument(flag)
    chromedriver = shutil.which("chromedriver")
    service = Service(executable_path=chromedriver) if chromedriver else Service()
    d = webdriver.Chrome(options=options, service=service)
    d.set_page_load_timeout(timeout)
    d.set_script_timeout(timeout)
    return d


def repository() -> tuple[str, str, dict]:
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    repo = config["repository"]
    return str(repo["url"]).rstrip("/"), str(repo.get("branch", "main")), config.get("launch_buttons") or {}


def png_stats(path: Path) -> tuple[int, int, float]:
    import matplotlib.image as mpimg

    img = mpimg.imread(path)
    rgb = img[..., :3] if img.ndim == 3 else img
    return img.shape[0], img.shape[1], float(np.std(rgb))


def check_links(info: dict, page: Path) -> list[str]:
    """Launch buttons lead to this chapter's twin in the configured repository; downloads exist."""
    problems = []
    slug = page.stem
    url, branch, launch = repository()
    owner_repo = url.removeprefix("https://github.com/")
    want = f"notebooks/{slug}.ipynb"
    if launch.get("colab_url"):
        expected = f"{launch['colab_url'].rstrip('/')}/github/{owner_repo}/blob/{branch}/{want}"
        if info["colab"] != [expected]:
            problems.append(f"Colab link {info['colab']} is not [{expected}]")
    if launch.get("binderhub_url"):
        expected = f"{launch['binderhub_url'].rstrip('/')}/v2/gh/{owner_repo}/{branch}?urlpath=tree/{want}"
        if info["binder"] != [expected]:
            problems.append(f"Binder link {info['binder']} is not [{expected}]")
    if (ROOT / "notebooks" / f"{slug}.py").exists() and not (ROOT / want).exists():
        problems.append(f"the launch buttons open {want}, which is not in the repository")
    for kind in ("notebook_download", "source_download"):
        if len(info[kind]) != 1:
            problems.append(f"the download menu has {len(info[kind])} {kind.replace('_', ' ')} link(s)")
            continue
        target = Path(unquote(urlparse(info[kind][0]).path))
        if not target.is_file():
            problems.append(f"{kind.replace('_', ' ')} {target} does not exist")
        elif kind == "notebook_download":
            nb = json.loads(target.read_text())
            outputs = sum(len(c.get("outputs", [])) for c in nb.get("cells", []) if c.get("cell_type") == "code")
            if target.name != f"{slug}.ipynb" or outputs == 0:
                problems.append(f"the downloadable notebook {target.name} has {outputs} outputs (not executed?)")
    return problems


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def check_page(page: Path, browser, mathjax_wait: float = 30.0) -> list[str]:
    if not page.exists():
        return [f"{page} does not exist: run `make book` first"]
    t0 = time.perf_counter()
    SHOTS.mkdir(parents=True, exist_ok=True)
    top, fig_shot = SHOTS / f"{page.stem}.png", SHOTS / f"{page.stem}-figure.png"
    for old in (top, fig_shot):
        old.unlink(missing_ok=True)
    browser.get(page.resolve().as_uri())
    time.sleep(0.5)  # let the theme's scripts settle
    problems, math = check_math(browser, page, mathjax_wait)
    info = json.loads(browser.execute_script(INSPECT_JS))
    browser.save_screenshot(str(top))
    if browser.execute_script(SCROLL_JS):
        time.sleep(0.3)
        browser.save_screenshot(str(fig_shot))

    figures = []
    for img in info["images"]:
        src = img["src"]
        if not (img["complete"] and img["width"] > 0):
            problems.append(f"output image not loaded by the browser: {img}")
            continue
        if img["width"] < 100 or img["height"] < 100:
            continue  # a small image output is fine, but not the figure we look for
        if src.startswith("data:image/png"):
            figures.append("inline PNG")
            continue
        path = Path(unquote(urlparse(src).path))
        if not path.exists():
            problems.append(f"output image {src} does not exist")
            continue
        if path.read_bytes()[:8] != b"\x89PNG\r\n\x1a\n":
            figures.append(path.name)  # an SVG or JPEG figure the browser loaded
            continue
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
    problems += check_links(info, page)
    for shot in (top, fig_shot):
        if not shot.exists():
            problems.append(f"no screenshot {_rel(shot)}")
            continue
        h, w, std = png_stats(shot)
        if std < 0.02:
            problems.append(f"the screenshot {_rel(shot)} is blank (pixel std {std:.4f})")
    print(f"browser-check: {_rel(page)}: '{info['title']}', {info['n_outputs']} outputs, {len(figures)} figure(s) "
          f"shown, {len(info['errors'])} error outputs, {math['n_typeset']}/{math['n_math']} formula(s) typeset; "
          f"screenshots {_rel(top)}, {_rel(fig_shot)} "
          f"({time.perf_counter() - t0:.1f} s)")
    return problems


def default_pages() -> list[Path]:
    return sorted(HTML / "notebooks" / f"{p.stem}.html" for p in (ROOT / "notebooks").glob("*.py")
                  if not p.name.startswith((".", "_")))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pages", nargs="*", type=Path, help="built pages to check (default: every chapter)")
    ap.add_argument("--screenshots", type=Path, default=None, help="where the screenshots go (default: "
                                                                    "_build/screenshots)")
    ap.add_argument("--mathjax-wait", type=float, default=30.0,
                    help="seconds to wait for MathJax to typeset a page's formulas (default 30)")
    args = ap.parse_args(argv)
    global SHOTS
    SHOTS = (args.screenshots or SHOTS).resolve()
    pages = [p if p.is_absolute() else Path.cwd() / p for p in args.pages] or default_pages()
    failed = False
    browser = driver()
    try:
        for page in pages:
            for problem in check_page(page.resolve(), browser, args.mathjax_wait):
                print(f"browser-check: {page.name}: {problem}", file=sys.stderr)
                failed = True
    finally:
        browser.quit()
    print("browser-check: FAILED" if failed else f"browser-check: {len(pages)} page(s) OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
