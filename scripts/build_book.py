"""Build the book: `make book` runs this.

1. Clear the execution cache when rfm/ or pyproject.toml changed (jupyter-cache keys on the chapters' code cells
   only, so it would otherwise show outputs of an older package): scripts/_bookcache.py.
2. With ``--jobs N`` (or BOOK_JOBS=N), execute the chapters that are not cached yet, N at a time, into the cache.
3. ``jupyter-book build -W -n --keep-going .``: warnings are errors; chapters found in the cache are not executed
   again ("Using cached notebook"), the others are executed one after the other and cached.
4. Exit non-zero on failure, after printing the failing chapters' logs (_build/html/reports/**/*.err.log).

Usage: python scripts/build_book.py [--jobs N] [--force]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _bookcache as bc  # noqa: E402


LOG = bc.BUILD / "logs" / "book.log"


def toc_files() -> set[str]:
    import yaml

    toc = yaml.safe_load((bc.ROOT / "_toc.yml").read_text())
    found: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                found.add(str(node["file"]))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(toc)
    return found


def _execute_worker(path: str, threads: int):
    # Each kernel inherits this environment: share the cores instead of oversubscribing them.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, str(threads))
    import nbformat

    ex = bc.execute(Path(path))
    return path, nbformat.writes(ex.notebook), ex.seconds, ex.error


def preexecute(jobs: int) -> bool:
    """Execute the chapters of the toc that the cache lacks, ``jobs`` at a time. False when one failed."""
    import nbformat

    wanted = toc_files()
    todo = [p for p in bc.chapters() if f"notebooks/{p.stem}" in wanted and bc.cached_notebook(p) is None]
    if not todo:
        print("book: every chapter is cached")
        return True
    threads = max(1, (os.cpu_count() or 1) // jobs)
    print(f"book: executing {len(todo)} chapter(s), {jobs} at a time ({threads} thread(s) each)", flush=True)
    ok = True
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_execute_worker, str(p), threads) for p in todo]
        for fut in as_completed(futures):
            path, text, seconds, error = fut.result()
            rel = Path(path).relative_to(bc.ROOT)
            if error is None:
                bc.store(bc.Execution(Path(path), nbformat.reads(text, as_version=4), seconds, None))
                print(f"book: executed {rel} in {seconds:.1f} s", flush=True)
            else:
                ok = False
                print(f"book: {rel} FAILED after {seconds:.1f} s\n{error}", flush=True)
    return ok


def print_reports() -> None:
    reports = sorted((bc.BUILD / "html" / "reports").rglob("*.err.log"))
    for log in reports:
        print(f"\n===== {log.relative_to(bc.ROOT)} =====")
        print(log.read_text(errors="replace"))



def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("BOOK_JOBS", "1")),
                    help="execute up to N uncached chapters at once before the build (default: BOOK_JOBS or 1)")
    ap.add_argument("--force", action="store_true", help="clear the execution cache first: re-execute everything")
    args = ap.parse_args(argv)
    os.chdir(bc.ROOT)
    t0 = time.perf_counter()
    if args.force:
        bc.HASH_FILE.unlink(missing_ok=True)
    bc.ensure_fresh_cache()
    shutil.rmtree(bc.BUILD / "html" / "reports", ignore_errors=True)
    if args.jobs > 1 and not preexecute(args.jobs):
        print("book: build skipped, a chapter failed (traceback above)")
        return 1
    t1 = time.perf_counter()

    jb = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", "-W", "-n", "--keep-going", "."]
    print("book:", " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    executed, cached, failed = [], 0, []
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with open(LOG, "w") as log:
        for line in proc.stdout:
            sys.stdout.write(line)
            log.write(line)
            plain = bc._strip_ansi(line)
            if "Using cached notebook" in plain:
                cached += 1
            m = re.search(r"Executed notebook in ([\d.]+) seconds", plain)
            if m:
                executed.append(float(m.group(1)))
            m = re.match(r"^(\S+): WARNING: Executing notebook failed", plain)
            if m:
                failed.append(m.group(1))
    rc = proc.wait()
    t2 = time.perf_counter()
    print(f"book: {len(executed)} chapter(s) executed during the build ({sum(executed):.1f} s), {cached} from the "
          f"cache; pre-execution {t1 - t0:.1f} s, jupyter-book {t2 - t1:.1f} s")
    if rc != 0:
        print_reports()
        for path in failed:
            print(f"book: chapter FAILED: {path} (its traceback is above, and in {LOG.relative_to(bc.ROOT)})")
        print(f"book: FAILED (jupyter-book exit code {rc}); full log: {LOG.relative_to(bc.ROOT)}")
        return rc
    print(f"book: built {bc.BUILD / 'html' / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
