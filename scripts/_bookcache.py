"""The book's execution cache, shared by the book build (scripts/build_book.py) and the chapter tests.

Each chapter is executed once per change: by whichever of ``make book`` and ``make test`` comes first, into the
jupyter-cache that Jupyter Book's ``execute_notebooks: cache`` mode reads (``_build/.jupyter_cache``). The other one
finds the record and reuses it.

jupyter-cache keys a record on the code cells and the kernelspec of a chapter only, so on its own it would serve
outputs computed with an older ``rfm`` package, or Checks tables read from older committed results. We therefore
store a hash of ``rfm/**/*.py``, ``pyproject.toml`` and ``results/**/*.json`` (the calibrations and paper-scale runs
the chapters show)
inside the cache folder and clear the cache (and Sphinx's environment, which otherwise keeps the old pages) whenever
the hash differs: :func:`ensure_fresh_cache`, called by both entry points before they look at the cache.

One executor runs every chapter: nbmake's (``nbmake.nb_run.NotebookRun``), on the chapter's committed ``.ipynb``
twin, with the book's settings (cwd = the chapter's folder, ``timeout`` 900 s per cell, errors not allowed). The
outputs are then laid onto the notebook exactly as myst-nb reads the ``.py`` source (``jupytext.reads(text,
fmt="py:percent")``, see ``nb_custom_formats`` in _config.yml), whose code cells must equal the twin's, and that
notebook is stored; so the book build and the tests (``pytest --nbmake notebooks``, through the plugin in the root
``conftest.py``) produce and find the same record.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
CACHE_DIR = BUILD / ".jupyter_cache"
HASH_FILE = CACHE_DIR / "rfm_source_hash.txt"
# What Sphinx keeps between builds: without it, a cleared cache is not even looked at for unchanged pages.
SPHINX_STATE = [BUILD / ".doctrees", BUILD / "jupyter_execute", BUILD / "html"]
NOTEBOOKS = ROOT / "notebooks"
TIMEOUT = 900  # seconds per cell, as `execute.timeout` in _config.yml
# The line rfm.book.summary prints at the end of a chapter's Checks: "[<chapter> | profile=<p> | <device>] k=v, ..."
SUMMARY_RE = re.compile(r"^\[(?P<chapter>[\w.-]+) \| profile=(?P<profile>\w+) \| [^\]\n]*\]", re.M)


def chapters() -> list[Path]:
    """The chapter sources, notebooks/*.py, sorted by name."""
    return sorted(p for p in NOTEBOOKS.glob("*.py") if not p.name.startswith((".", "_")))


def source_hash(root: Path = ROOT) -> str:
    """sha256 of the package sources the chapters run (rfm/**/*.py), of pyproject.toml (its dependencies) and of the
    committed results the chapters read (results/**/*.json)."""
    h = hashlib.sha256()
    files = [*sorted((root / "rfm").rglob("*.py")), root / "pyproject.toml",
             *sorted((root / "results").rglob("*.json"))]
    for f in files:
        if f.is_file() and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(root)).encode())
            h.update(b"\0")
            h.update(f.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def stored_hash() -> str | None:
    try:
        return HASH_FILE.read_text().strip() or None
    except OSError:
        return None


def ensure_fresh_cache(log=print) -> bool:
    """Clear the execution cache and Sphinx's state when rfm/ or pyproject.toml changed. True when cleared."""
    current, stored = source_hash(), stored_hash()
    if current == stored:
        return False
    if stored is None and not CACHE_DIR.exists():
        log("book cache: none yet")
    else:
        log(f"book cache: rfm/, pyproject.toml or results/ changed ({(stored or 'no hash')[:12]} -> {current[:12]}); "
            "clearing the execution cache and the built pages")
    for path in [CACHE_DIR, *SPHINX_STATE]:
        shutil.rmtree(path, ignore_errors=True)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    get_cache()  # create the database before writing the hash next to it
    HASH_FILE.write_text(current + "\n")
    return True


def get_cache():
    from jupyter_cache import get_cache as _get_cache

    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    return _get_cache(str(CACHE_DIR))


def read_chapter(path: Path):
    """The notebook as the book reads it (myst-nb's nb_custom_formats reader for .py)."""
    import jupytext

    return jupytext.reads(Path(path).read_text(encoding="utf-8"), fmt="py:percent")


def cached_notebook(path: Path):
    """The executed notebook from the cache for the current source of ``path``, or None."""
    cache = get_cache()
    nb = read_chapter(path)
    try:
        record = cache.match_cache_notebook(nb)
    except KeyError:
        return None
    _, merged = cache.merge_match_into_notebook(nb)
    merged.metadata["_cache_record"] = {"pk": record.pk, "execution_seconds": record.data.get("execution_seconds")}
    return merged


@dataclass
class Execution:
    path: Path
    notebook: object
    seconds: float
    error: str | None  # the formatted traceback of the failing cell, or None


def twin(path: Path) -> Path:
    """The committed outputs-free ``.ipynb`` twin of a chapter's ``.py`` source (and the other way round)."""
    path = Path(path)
    return path.with_suffix(".ipynb" if path.suffix == ".py" else ".py")


def _outputs_onto(source_nb, executed_nb, what: str):
    """Copy the outputs and execution counts of ``executed_nb`` (the twin) onto ``source_nb`` (the .py as read)."""
    src = [c for c in source_nb.cells if c.cell_type == "code"]
    done = [c for c in executed_nb.cells if c.cell_type == "code"]
    if len(src) != len(done) or any(a.source.strip() != b.source.strip() for a, b in zip(src, done)):
        raise ValueError(f"{what}: the .ipynb twin's code cells differ from the .py source's; run `make sync`")
    for a, b in zip(src, done):
        a.outputs = b.get("outputs", [])
        a.execution_count = b.get("execution_count")  # cell metadata stays the source's: the cache hashes it
    return source_nb


def execute(path: Path, timeout: int = TIMEOUT) -> Execution:
    """Execute a chapter as the book does, with nbmake's executor on its .ipynb twin (the chapter's folder as cwd, no
    errors allowed), its outputs laid onto the .py source as the book reads it; nothing is cached."""
    import time

    from nbmake.nb_run import NotebookRun

    path = Path(path).resolve()
    if path.suffix != ".py":
        path = twin(path)
    nb = read_chapter(path)
    if not twin(path).exists():
        raise FileNotFoundError(f"{twin(path)}: the chapter's .ipynb twin is missing; run `make sync`")
    env_backup = os.environ.pop("RFM_BOOK_OUTPUT", None)  # the book's run writes no files
    t0 = time.perf_counter()
    try:
        result = NotebookRun(twin(path), timeout).execute()
    finally:
        if env_backup is not None:
            os.environ["RFM_BOOK_OUTPUT"] = env_backup
    seconds = time.perf_counter() - t0
    nb = _outputs_onto(nb, result.nb, str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path))
    # nbmake's error: the failing cell's source and its traceback
    error = None if result.error is None else _strip_ansi(f"{result.error.summary}\n{result.error.trace}")
    return Execution(path, nb, seconds, error)


def store(execution: Execution):
    """Put a successful execution into the cache, where the book build finds it ("Using cached notebook")."""
    from jupyter_cache.base import CacheBundleIn

    if execution.error is not None:
        raise ValueError(f"{execution.path} failed; failed executions are not cached")
    cache = get_cache()
    record = cache.cache_notebook_bundle(
        CacheBundleIn(execution.notebook, str(execution.path), data={"execution_seconds": execution.seconds}),
        check_validity=False, overwrite=True)
    return record


def execute_into_cache(path: Path, timeout: int = TIMEOUT) -> Execution:
    execution = execute(path, timeout)
    if execution.error is None:
        store(execution)
    return execution


def _execute_worker(path: str, threads: int, timeout: int):
    # Each kernel inherits this environment: share the cores instead of oversubscribing them.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, str(threads))
    import nbformat

    ex = execute(Path(path), timeout)
    return path, nbformat.writes(ex.notebook), ex.seconds, ex.error


def default_jobs() -> int:
    """BOOK_JOBS, else 2 on a machine with 2 or more cores."""
    return max(1, int(os.environ.get("BOOK_JOBS", min(2, os.cpu_count() or 1))))


def execute_many_into_cache(paths, jobs: int | None = None, timeout: int = TIMEOUT, log=print) -> dict:
    """Execute the chapters among ``paths`` that the cache lacks, ``jobs`` at a time, and cache the successes.

    Returns ``{path: formatted error}`` for the chapters that failed (failed runs are not cached)."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    import nbformat

    jobs = jobs or default_jobs()
    todo = [Path(p).resolve() for p in paths if cached_notebook(p) is None]
    if not todo:
        return {}
    threads = max(1, (os.cpu_count() or 1) // min(jobs, len(todo)))
    log(f"executing {len(todo)} chapter(s), {min(jobs, len(todo))} at a time ({threads} thread(s) each)")
    failures = {}
    with ProcessPoolExecutor(max_workers=min(jobs, len(todo))) as pool:
        futures = [pool.submit(_execute_worker, str(p), threads, timeout) for p in todo]
        for fut in as_completed(futures):
            path, text, seconds, error = fut.result()
            rel = Path(path).relative_to(ROOT) if Path(path).is_relative_to(ROOT) else path
            if error is None:
                store(Execution(Path(path), nbformat.reads(text, as_version=4), seconds, None))
                log(f"executed {rel} in {seconds:.1f} s")
            else:
                failures[Path(path)] = error
                log(f"{rel} FAILED after {seconds:.1f} s")
    return failures


def problems(nb, chapter: str | None = None) -> list[str]:
    """What is wrong with an executed chapter: error outputs, tracebacks on stderr, no Checks summary line."""
    found = []
    summary_lines = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            kind = out.get("output_type")
            if kind == "error":
                tb = "\n".join(out.get("traceback", []))
                found.append(f"cell {i} raised {out.get('ename')}: {out.get('evalue')}\n{_strip_ansi(tb)}")
            elif kind == "stream":
                text = out.get("text", "")
                if out.get("name") == "stderr" and "Traceback (most recent call last)" in text:
                    found.append(f"cell {i} printed a traceback on stderr:\n{text}")
                if out.get("name") == "stdout":
                    summary_lines += [m for m in SUMMARY_RE.finditer(text)]
    if not summary_lines:
        found.append("no Checks summary line (rfm.book.summary(...) prints '[<chapter> | profile=... | ...] ...') "
                     "in the outputs")
    elif chapter is not None and not any(m["chapter"] == chapter for m in summary_lines):
        names = sorted({m["chapter"] for m in summary_lines})
        found.append(f"the Checks summary names chapter {names}, expected {chapter!r} (the file's slug)")
    return found


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)


def main(argv=None):  # pragma: no cover - a small command line for people
    import argparse

    ap = argparse.ArgumentParser(description="Inspect the book's execution cache.")
    ap.add_argument("command", choices=["status", "clear"])
    args = ap.parse_args(argv)
    if args.command == "clear":
        for path in [CACHE_DIR, *SPHINX_STATE]:
            shutil.rmtree(path, ignore_errors=True)
        print("cleared", CACHE_DIR)
        return 0
    print(f"rfm hash: current {source_hash()[:12]}, stored {(stored_hash() or 'none')[:12]}")
    for path in chapters():
        nb = cached_notebook(path)
        state = "not cached" if nb is None else f"cached ({nb.metadata['_cache_record']['execution_seconds']:.1f} s)"
        print(f"  {path.relative_to(ROOT)}: {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
