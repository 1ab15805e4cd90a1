"""Sphinx extension: each chapter page offers its *executed* notebook for download.

myst-nb writes every executed chapter (outputs included, from the execution cache) to
``_build/jupyter_execute/<docname>.ipynb``. For each page that has one, this extension copies it next to the page's
source in the site (``_sources/<docname>.ipynb``) and sets ``ipynb_source`` in the page's context, which
sphinx-book-theme turns into a ".ipynb" entry of the page's download menu (beside the ".py" source and the print
button). Runs before the theme builds its buttons (priority 500 < 501). The theme does the same itself for MyST
Markdown notebooks, but not for other notebook formats such as the chapters' jupytext ``.py``.

The whole book as a PDF is added to the same menu by scripts/book_pdf.py after it has printed the PDF.
"""
from __future__ import annotations

import shutil
from pathlib import Path


def _executed_notebook(app, docname: str) -> Path | None:
    path = Path(app.outdir).parent / "jupyter_execute" / f"{docname}.ipynb"
    return path if path.is_file() else None


def add_executed_notebook(app, pagename, templatename, context, doctree):
    if doctree is None or not pagename.startswith("notebooks/"):
        return
    executed = _executed_notebook(app, pagename)
    if executed is None:
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(executed, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def setup(app):
    app.connect("html-page-context", add_executed_notebook, priority=500)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
