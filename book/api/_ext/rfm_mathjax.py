"""Sphinx extension: the site carries its own MathJax, so formulas render offline and in the PDF.

Sphinx loads MathJax from ``mathjax_path``, by default a CDN (jsDelivr): offline, or where the CDN is blocked, a
reader sees raw TeX (``\\(\\nabla f(x)\\)``). The book sets ``mathjax_path: mathjax/tex-svg.js`` in _config.yml, a
path relative to the site's ``_static/``, and this extension copies MathJax there at the start of every HTML build
(html, singlehtml, dirhtml; when the builder starts) from an installed package:

* `django-static-mathjax <https://pypi.org/project/django-static-mathjax/>`_ (MathJax 3.2.2; the ``book`` extra of
  pyproject.toml pins it): its ``mathjax/static/mathjax/es5`` folder is MathJax's own ``es5`` distribution.

Only what the pages load is copied (about 7 MB): the combined component named by ``mathjax_path`` (``tex-svg.js``:
TeX input, SVG output, which needs no web fonts, so ``file://`` pages and printing work), the TeX extensions it
loads on demand, the menu and accessibility components, and MathJax's licence (Apache-2.0). A copy is only redone
when the MathJax version changes. A ``mathjax_path`` that is a URL (``https://...``) is left alone.

Without the package the build fails with an error saying what to install (under ``-W`` a warning would do the same,
but a site whose formulas silently depend on a CDN is what this extension exists to prevent).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from sphinx.errors import ExtensionError

# what is copied from MathJax's es5/ besides the combined component named by mathjax_path
PARTS = ("input/tex/extensions", "ui", "a11y", "sre", "adaptors")
STAMP = ".rfm-mathjax-version"
PACKAGE = "django-static-mathjax"


def is_local(path: str) -> bool:
    return bool(path) and "://" not in path and not path.startswith("/")


def mathjax_source() -> tuple[Path, str]:
    """MathJax's es5/ folder in the installed package, and the package's version."""
    from importlib import metadata, util

    spec = util.find_spec("mathjax")
    es5 = Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax" / "es5" if spec and \
        spec.submodule_search_locations else None
    if es5 is None or not (es5 / "tex-svg.js").is_file():
        raise ExtensionError(f"rfm_mathjax: MathJax is not installed, so the site's formulas would not render "
                             f"offline: pip install {PACKAGE} (the book extra: pip install -e '.[book]')")
    try:
        version = metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        version = "unknown"
    return es5, version


def copy_mathjax(outdir: Path, mathjax_path: str) -> Path:
    """Copy MathJax into ``outdir/_static/<folder of mathjax_path>``; returns the script's path."""
    es5, version = mathjax_source()
    script = Path(mathjax_path)
    if not (es5 / script.name).is_file():
        raise ExtensionError(f"rfm_mathjax: mathjax_path {mathjax_path!r}: MathJax has no component {script.name} "
                             f"(e.g. tex-svg.js, tex-chtml.js)")
    target = outdir / "_static" / script.parent
    stamp = target / STAMP
    if stamp.is_file() and stamp.read_text() == f"{version} {script.name}" and (target / script.name).is_file():
        return target / script.name
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(es5 / script.name, target / script.name)
    for part in PARTS:
        if (es5 / part).is_dir():
            shutil.copytree(es5 / part, target / part, dirs_exist_ok=True)
    licence = es5.parent / "LICENSE"
    if licence.is_file():
        shutil.copy2(licence, target / "LICENSE")
    stamp.write_text(f"{version} {script.name}")
    return target / script.name


def _copy(app) -> None:
    # before any page is read or written: a missing package fails at once, and the pages' script tags get the
    # file's checksum (?v=...) from the first build on
    if app.builder.format == "html" and is_local(app.config.mathjax_path):
        copy_mathjax(Path(app.outdir), app.config.mathjax_path)


def setup(app):
    app.connect("builder-inited", _copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
