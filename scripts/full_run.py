"""Run a chapter's full (paper-scale) profile once and commit its measured values and figures.

    python scripts/full_run.py <slug> [-p device cuda] [-p NAME VALUE ...]
    make full CHAPTER=<slug>

A headless rerun (``scripts/rerun.py``) with ``profile=full`` and ``RFM_BOOK_CHECKS=record``: every check is
recorded with its pass/fail and none is raised, so a failing check at paper scale is written down as a finding
(and printed here) instead of stopping the run. Writes ``results/<slug>/full.json`` (the chapter's record: device,
date, commit, parameters, every checked value; plus the wall time) and the chapter's saved figures into
``results/<slug>/full_figures/``. The executed notebook stays in ``out/<slug>-full/`` (``--out`` to put it elsewhere).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate import chapter_source  # noqa: E402 (one rule for naming a chapter)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("chapter", help="the chapter's slug (notebooks/<slug>.py), or the path of a chapter")
    ap.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    ap.add_argument("--results", type=Path, default=ROOT / "results", help="where results/<slug>/ is written")
    ap.add_argument("--out", type=Path, default=None,
                    help="where the executed notebook goes (default: out/<slug>-full; emptied first)")
    args = ap.parse_args(argv)
    src = chapter_source(args.chapter)
    slug = src.stem
    out = (args.out or ROOT / "out" / f"{slug}-full").resolve()
    if out.exists():
        shutil.rmtree(out)
    cmd = [sys.executable, str(ROOT / "scripts" / "rerun.py"), str(src), "-p", "profile", "full", "--out", str(out)]
    for name, value in args.parameter:
        cmd += ["-p", name, value]
    env = dict(os.environ, RFM_BOOK_CHECKS="record")
    t0 = time.perf_counter()
    rc = subprocess.run(cmd, env=env, cwd=ROOT).returncode
    seconds = time.perf_counter() - t0
    path = out / f"{slug}_full.json"
    if rc != 0 or not path.exists():
        print(f"full_run: the chapter did not run through (exit {rc}); nothing committed", file=sys.stderr)
        return 2
    record = json.loads(path.read_text())
    record["seconds"] = round(seconds, 1)
    dest = args.results / slug
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "full.json").write_text(json.dumps(record, indent=1) + "\n")
    figs = dest / "full_figures"
    if figs.exists():
        shutil.rmtree(figs)
    pngs = sorted(out.glob("*.png"))
    if pngs:
        figs.mkdir()
        for png in pngs:
            shutil.copy2(png, figs / png.name)
    failed = {n: c for n, c in record.get("checks", {}).items() if not c["passed"]}
    print(f"full_run: {slug} in {seconds / 60:.1f} min on {record['device']}; wrote {dest / 'full.json'}"
          f" and {len(pngs)} figure(s)")
    for name, c in failed.items():
        print(f"  FINDING: {c['kind']} {name} = {c['value']!r} fails {c['rule']} ({c['what']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
