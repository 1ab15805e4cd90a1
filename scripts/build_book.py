"""Build the book: `make book` runs this.

1. Clear the execution cache when rfm/ or pyproject.toml changed (jupyter-cache keys on the chapters' code cells
   only, so it would otherwise show outputs of an older package): scripts/_bookcache.py.
2. Execute the chapters that are not cached yet, N at a time (``--jobs N`` or BOOK_JOBS=N; default 2 on a machine
   with 2 or more cores, each kernel then gets its share of the cores), into the same cache. On the 2-core CI
   machine this is about 1.4x faster than executing them one by one. A failing chapter's traceback is printed and
   the build is skipped.
3. ``jupyter-book build -W -n --keep-going .``: warnings are errors; chapters found in the cache are not executed
   again ("Using cached notebook"); with ``--jobs 1`` jupyter-book executes and caches them itself.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _bookcache as bc

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


def preexecute(jobs: int) -> bool:
    """Execute the chapters of the toc that the cache lacks, ``jobs`` at a time. False when one failed."""
    wanted = toc_files()
    chapters = [p for p in bc.chapters() if f"notebooks/{p.stem}" in wanted]
    failures = bc.execute_many_into_cache(chapters, jobs, log=lambda msg: print(f"book: {msg}", flush=True))
    for path, error in failures.items():
        print(f"\nbook: chapter FAILED: {path.relative_to(bc.ROOT)}\n{error}", flush=True)
    return not failures


def print_reports() -> None:
    reports = sorted((bc.BUILD / "html" / "reports").rglob("*.err.log"))
    for log in reports:
        print(f"\n===== {log.relative_to(bc.ROOT)} =====")
        print(log.read_text(errors="replace"))



def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=bc.default_jobs(),
                    help="execute up to N uncached chapters at once before the build; 1: let jupyter-book execute "
                         "them one by one (default: BOOK_JOBS, else 2 when there are 2 cores)")
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
