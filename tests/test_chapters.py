"""Every chapter (notebooks/*.py) runs in its default, smoke profile and passes its Checks.

The chapters are executed once per change, shared with the book build (scripts/_bookcache.py): when the book's
execution cache holds a successful run of the chapter's current source, made with the current rfm/ and
pyproject.toml, the test checks that record instead of executing again. Otherwise the chapter is executed exactly as
the book does (working directory notebooks/, 900 s per cell; the selected uncached chapters two at a time, as
`make book` does, BOOK_JOBS to change) and the run is stored in the cache, so that a later `make book` reuses it.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import _bookcache as bc  # noqa: E402

CHAPTERS = bc.chapters()


@pytest.fixture(scope="module")
def failures(request):
    """Clear a stale cache, then execute the selected chapters that are not cached: {path: error} of failures."""
    bc.ensure_fresh_cache(log=print)
    selected = [item.callspec.params["path"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")]
    return bc.execute_many_into_cache(selected, log=print)


@pytest.mark.skipif(not CHAPTERS, reason="no chapters in notebooks/ yet")
@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_runs_and_passes_its_checks(path, failures):
    if path.resolve() in failures:
        pytest.fail(f"{path.name} failed:\n{failures[path.resolve()]}", pytrace=False)
    nb = bc.cached_notebook(path)
    if nb is None:  # not expected after the fixture; kept so that the test never passes without a run
        execution = bc.execute_into_cache(path)
        if execution.error is not None:
            pytest.fail(f"{path.name} failed after {execution.seconds:.1f} s:\n{execution.error}", pytrace=False)
        nb = execution.notebook
        how = f"executed in {execution.seconds:.1f} s and cached"
    else:
        how = f"cached run ({nb.metadata['_cache_record']['execution_seconds'] or 0:.1f} s) reused"
    print(f"{path.name}: {how}")
    problems = bc.problems(nb, chapter=path.stem)
    assert not problems, f"{path.name} ({how}):\n" + "\n".join(problems)
