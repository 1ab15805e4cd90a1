"""pytest plugin: nbmake tests the chapters' .ipynb twins through the book's execution cache.

``pytest --nbmake notebooks`` (part of ``make test``; ``make chapters`` alone) collects one nbmake item per chapter
twin, ``notebooks/<slug>.ipynb``. Every chapter is executed at most once per change of itself, ``rfm/``,
``pyproject.toml`` or ``results/`` (scripts/_bookcache.py):

* when the book's execution cache holds a successful run of the chapter (``make book`` made it, or an earlier test
  run), the nbmake item checks that record instead of executing again;
* otherwise the uncached chapters among the selected items are executed first, two at a time (``BOOK_JOBS``), each by
  nbmake's own executor on its twin, and stored in the cache where ``make book`` finds them.

On top of nbmake's rule (no cell raises), an item fails when the executed chapter printed a traceback or lacks its
Checks summary line (``rfm.book.summary``): a chapter whose Checks fail raises in its last cell.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "scripts"))
import _bookcache as bc  # noqa: E402

_state = {"prepared": False, "failures": {}}


def _chapter_of(item) -> Path | None:
    """The chapter source (notebooks/<slug>.py) behind an nbmake item, or None for other items and notebooks."""
    if not getattr(item, "nbmake", False):
        return None
    path = Path(str(item.path)).resolve()
    source = bc.twin(path)
    return source if source.parent == bc.NOTEBOOKS.resolve() and source.exists() else None


def _cached_run_class():
    from nbmake.nb_result import NotebookError, NotebookResult
    from nbmake.nb_run import NotebookRun

    class CachedNotebookRun(NotebookRun):
        """nbmake's NotebookRun that answers from the book's execution cache (executing into it when needed)."""

        def execute(self) -> NotebookResult:
            source = bc.twin(Path(self.filename).resolve())
            if not source.exists() or source.parent != bc.NOTEBOOKS.resolve():
                return super().execute()  # a notebook that is not a chapter: plain nbmake
            if source in _state["failures"]:
                error = _state["failures"][source]
                return NotebookResult(nb=None, error=NotebookError(summary=error.splitlines()[0] if error else "failed",
                                                                 trace=error, failing_cell_index=-1))
            nb = bc.cached_notebook(source)
            if nb is None:  # not prepared (e.g. an item run on its own): execute and cache it now
                execution = bc.execute_into_cache(source, timeout=self.default_timeout)
                if execution.error is not None:
                    return NotebookResult(nb=execution.notebook, error=NotebookError(
                        summary=execution.error.splitlines()[0], trace=execution.error, failing_cell_index=-1))
                nb, how = execution.notebook, f"executed in {execution.seconds:.1f} s and cached"
            else:
                seconds = nb.metadata["_cache_record"].get("execution_seconds") or 0
                how = f"cached run ({seconds:.1f} s) reused"
            print(f"{source.name}: {how}")
            found = bc.problems(nb, chapter=source.stem)
            if found:
                return NotebookResult(nb=nb, error=NotebookError(
                    summary=f"{source.name} ({how}): {found[0].splitlines()[0]}",
                    trace="\n".join(found), failing_cell_index=-1))
            return NotebookResult(nb=nb, error=None)

    return CachedNotebookRun


def pytest_configure(config):
    try:
        import nbmake.pytest_items as items
    except ImportError:  # nbmake is a test dependency; without it there are no notebook items to serve
        return
    if getattr(config.option, "overwrite", False):
        raise SystemExit("conftest: --overwrite would write outputs into the committed .ipynb twins, which stay "
                         "outputs-free; the executed chapters are in the book's cache (_build/.jupyter_cache)")
    items.NotebookRun = _cached_run_class()


def pytest_runtest_setup(item):
    """Before the first chapter item: clear a stale cache, then execute the selected uncached chapters together."""
    if _state["prepared"] or _chapter_of(item) is None:
        return
    _state["prepared"] = True
    bc.ensure_fresh_cache(log=print)
    selected = [c for c in (_chapter_of(i) for i in item.session.items) if c is not None]
    if not selected:
        return
    timeout = item.config.option.nbmake_timeout
    failures = bc.execute_many_into_cache(selected, timeout=timeout, log=print)
    _state["failures"].update(failures)
