"""Sphinx extension: each chapter page offers its *executed* notebook for download.

For each chapter page (``notebooks/*``) this extension writes the executed notebook, outputs included, next to the
page's source in the site (``_sources/<docname>.ipynb``) and sets ``ipynb_source`` in the page's context, which
sphinx-book-theme turns into a ".ipynb" entry of the page's download menu (beside the ".py" source and the print
button). It runs before the theme builds its buttons (priority 500 < 501). The theme does the same itself for MyST
Markdown notebooks, but not for other notebook formats such as the chapters' jupytext ``.py``.

Where the executed notebook comes from: with ``execute_notebooks: cache`` the record in the execution cache (the
chapter's source merged with the cached outputs, as myst-nb renders it). myst-nb 1.x also writes a notebook to
``_build/jupyter_execute/<docname>.ipynb``, but on a cache hit that copy has no outputs (it writes the notebook it
read, not the merged one), so it is used only when it has outputs (``force`` mode) and the cache has no record.
"""
from __future__ import annotations

from pathlib import Path


def _has_outputs(nb) -> bool:
    return any(c.get("outputs") for c in nb.cells if c.cell_type == "code")


def _read_source(path: Path):
    import jupytext
    import nbformat

    if path.suffix == ".ipynb":
        return nbformat.read(path, as_version=4)
    return jupytext.reads(path.read_text(encoding="utf-8"), fmt="py:percent" if path.suffix == ".py" else None)


def executed_notebook(app, docname: str):
    """The executed notebook of ``docname`` (an nbformat notebook with outputs), or None."""
    import nbformat

    source = Path(app.env.doc2path(docname))
    cache_path = getattr(getattr(app.env, "mystnb_config", None), "execution_cache_path", None)
    if cache_path and Path(cache_path).is_dir() and source.exists():
        from jupyter_cache import get_cache

        try:
            _, merged = get_cache(str(cache_path)).merge_match_into_notebook(_read_source(source))
            if _has_outputs(merged):
                return merged
        except KeyError:  # no record for this source
            pass
    written = Path(app.outdir).parent / "jupyter_execute" / f"{docname}.ipynb"
    if written.is_file():
        nb = nbformat.read(written, as_version=4)
        if _has_outputs(nb):
            return nb
    return None


def add_executed_notebook(app, pagename, templatename, context, doctree):
    if doctree is None or not pagename.startswith("notebooks/"):
        return
    nb = executed_notebook(app, pagename)
    if nb is None:
        return
    import nbformat

    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def setup(app):
    app.connect("html-page-context", add_executed_notebook, priority=500)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
