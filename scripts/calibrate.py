"""Calibrate a chapter's Checks over seeds: run its smoke profile once per seed and commit the table.

    python scripts/calibrate.py <slug> [--seeds 10] [--jobs 2] [-p NAME VALUE ...]
    make calibrate CHAPTER=<slug> SEEDS=10

Each seed is a headless rerun of ``notebooks/<slug>.py`` (``scripts/rerun.py``, papermill, as a reader reruns it)
with ``RFM_BOOK_CHECKS=record``: every check is recorded, none raised. ``--jobs`` runs go side by side (two on
the book's 2-core machine), each with its share of the cores as threads, as the book build runs them. The per-seed
records are merged into ``results/calibration/<slug>.json``: the settings,
machine, date, commit, every check's rule and its value at each seed, and the scalar measured values. The table of
min / median / max beside each rule is printed; a rule that fails at some seed is marked and the exit status is 1.
``--rule NAME BOUND VALUE`` (BOUND: at_least or at_most) runs nothing: it moves a rule of the committed calibration
to the chapter's new threshold and judges the recorded values again (the values are the runs'; only the rule
changes), noting the change in the file's ``rules_moved``. ``--update-from RECORD`` runs nothing either: when a
chapter was relabelled without changing what it computes, a fresh record of its seed 0 (``RFM_BOOK_CHECKS=record``)
whose every check value equals the calibration's seed-0 value bit for bit (or within ``--tolerance REL ABS``) shows
that the ten seeds' values still hold; the calibration then takes the record's kinds, rules and settings, drops the
checks the chapter no longer has, and notes it in ``updated_from``. A new check, or any value that differs, refuses:
run the calibration.
``-p`` overrides a parameter for every seed
(calibrating other settings than the profile's defaults writes the file all the same: the chapter compares its
settings with it).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def chapter_source(arg: str) -> Path:
    """The chapter a command names: a slug (notebooks/<slug>.py) or the path of a chapter's .py; SystemExit if none."""
    given = Path(arg)
    src = given.resolve() if given.suffix == ".py" and given.exists() else ROOT / "notebooks" / f"{given.stem}.py"
    if not src.exists():
        raise SystemExit(f"no chapter {src}")
    return src


def run_seed(src: Path, seed, profile, extra, out: Path, timeout, threads=1):
    slug = src.stem
    cmd = [sys.executable, str(ROOT / "scripts" / "rerun.py"), str(src),
           "-p", "profile", profile, "-p", "seed", str(seed), "--out", str(out)]
    for name, value in extra:
        cmd += ["-p", name, value]
    env = dict(os.environ, RFM_BOOK_CHECKS="record", MPLBACKEND="Agg")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):  # share the cores, as the book does
        env.setdefault(var, str(threads))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    seconds = time.perf_counter() - t0
    path = out / f"{slug}_{profile}.json"
    if proc.returncode != 0 or not path.exists():
        raise RuntimeError(f"seed {seed} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
                           f"{proc.stderr[-3000:]}")
    record = json.loads(path.read_text())
    if record.get("seed") != seed:
        raise RuntimeError(f"seed {seed}: the chapter wrote seed={record.get('seed')!r}; pass seed=seed to "
                           "rfm.book.Checks")
    if "checks" not in record:
        raise RuntimeError(f"seed {seed}: the record has no checks; the chapter must use rfm.book.Checks")
    return record, seconds


def move_rules(path: Path, rules) -> int:
    """Set each (name, bound, value) rule in the calibration at ``path`` and judge its recorded values again."""
    sys.path.insert(0, str(ROOT))
    from rfm.book.checks import Check, write_json

    calib = json.loads(path.read_text())
    for name, bound, value in rules:
        if bound not in ("at_least", "at_most"):
            raise SystemExit(f"--rule {name}: BOUND must be at_least or at_most, not {bound!r}")
        entry = calib["checks"].get(name)
        if entry is None:
            raise SystemExit(f"--rule {name}: no such check in {path}")
        old = entry["rule"]
        entry[bound] = float(value)
        rule = Check(name, entry["kind"], None, entry["at_least"], entry["at_most"])
        entry["rule"] = rule.rule
        entry["passed"] = [rule.passes(v) for v in entry["values"]]
        calib.setdefault("rules_moved", []).append(f"{name}: {old} -> {rule.rule} (values as recorded)")
        print(f"{name}: {old} -> {rule.rule}; passes at {sum(entry['passed'])}/{len(entry['passed'])} seeds")
    write_json(path, calib)
    return 0


def update_from(path: Path, record_path: Path, tolerance=(0.0, 0.0)) -> int:
    """Relabel the calibration at ``path`` from a seed-0 record that reproduces its seed-0 values exactly, or within
    ``tolerance = (relative, absolute)`` (round-off of another BLAS or commit: the largest deviation is noted)."""
    sys.path.insert(0, str(ROOT))
    from rfm.book.checks import IGNORED_SETTINGS, Check, write_json

    calib, record = json.loads(path.read_text()), json.loads(Path(record_path).read_text())
    if record.get("seed") != 0 or 0 not in calib["seeds"]:
        raise SystemExit("--update-from needs a record of seed 0 and a calibration that has seed 0")
    i0 = calib["seeds"].index(0)
    new, old = record.get("checks", {}), calib["checks"]
    added = [n for n in new if n not in old]
    if added:
        raise SystemExit(f"new checks {added} have no calibrated values: run the calibration")
    def same(a, b):
        if a == b:
            return True
        num = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
        return num and abs(a - b) <= tolerance[1] + tolerance[0] * abs(a)

    differ = [n for n in new if not same(old[n]["values"][i0], new[n]["value"])]
    if differ:
        raise SystemExit(f"seed 0 gives other values for {differ}: the chapter computes something else; "
                         "run the calibration")
    dropped = [n for n in old if n not in new]
    checks = {}
    for name, spec in new.items():
        entry = dict(old[name])
        rule = Check(name, spec["kind"], None, spec["at_least"], spec["at_most"], spec.get("what", ""))
        entry.update(kind=spec["kind"], what=spec.get("what", ""), at_least=spec["at_least"],
                     at_most=spec["at_most"], rule=rule.rule, passed=[rule.passes(v) for v in entry["values"]])
        checks[name] = entry
    calib["checks"] = checks
    calib["settings"] = {k: v for k, v in record.get("params", {}).items() if k not in IGNORED_SETTINGS}
    deviation = max((abs(old[n]["values"][i0] - new[n]["value"]) / max(abs(old[n]["values"][i0]), 1e-300)
                     for n in new if old[n]["values"][i0] != new[n]["value"]), default=0.0)
    calib.setdefault("updated_from", []).append(dict(
        record_commit=record.get("commit"), record_date=record.get("date"), dropped=dropped,
        tolerance=list(tolerance), largest_relative_deviation=deviation,
        why="relabelled without a new computation: seed 0's every check value equals the calibrated one "
            + ("bit for bit" if deviation == 0 else f"within (relative, absolute) tolerance {tuple(tolerance)}")))
    write_json(path, calib)
    failing = [n for n, c in checks.items() if not all(c["passed"])]
    print(f"updated {path.name}: {len(checks)} checks, dropped {dropped or 'none'}; failing at some seed: "
          f"{failing or 'none'}")
    return 1 if failing else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("chapter", help="the chapter's slug (notebooks/<slug>.py), or the path of a chapter")
    ap.add_argument("--seeds", type=int, default=10, help="seeds 0..SEEDS-1 (default 10)")
    ap.add_argument("--jobs", type=int, default=2, help="runs side by side (default 2)")
    ap.add_argument("--profile", default="smoke")
    ap.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per seed (default 1800)")
    ap.add_argument("--out", type=Path, default=None, help="the calibration file (default results/calibration/"
                                                            "<slug>.json)")
    ap.add_argument("--rule", nargs=3, action="append", default=[], metavar=("NAME", "BOUND", "VALUE"),
                    help="move a rule of the committed calibration (BOUND at_least or at_most); runs nothing")
    ap.add_argument("--update-from", type=Path, default=None, metavar="RECORD",
                    help="take kinds, rules and settings from a seed-0 record that reproduces the calibration")
    ap.add_argument("--tolerance", nargs=2, type=float, default=[0.0, 0.0], metavar=("REL", "ABS"),
                    help="with --update-from: values that agree within abs + rel * |value| count as equal")
    args = ap.parse_args(argv)
    src = chapter_source(args.chapter)
    slug = src.stem
    if args.update_from:
        return update_from(args.out or ROOT / "results" / "calibration" / f"{slug}.json", args.update_from,
                           tuple(args.tolerance))
    if args.rule:
        return move_rules(args.out or ROOT / "results" / "calibration" / f"{slug}.json", args.rule)
    if args.seeds < 1 or args.jobs < 1:
        ap.error("--seeds and --jobs must be positive")
    sys.path.insert(0, str(ROOT))
    from rfm.book.checks import calibration_from_records, write_json

    threads = max(1, (os.cpu_count() or 1) // args.jobs)
    records, seconds = [], {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"calibrate-{slug}-") as tmp, \
            ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {s: pool.submit(run_seed, src, s, args.profile, args.parameter, Path(tmp) / f"seed{s}",
                                  args.timeout, threads) for s in range(args.seeds)}
        failed = []
        for s, fut in futures.items():
            try:
                record, secs = fut.result()
            except Exception as exc:  # any failure of a seed is reported, then the run fails
                failed.append(s)
                print(f"seed {s}: {exc}", file=sys.stderr, flush=True)
                continue
            records.append(record)
            seconds[s] = round(secs, 1)
            print(f"seed {s}: {secs:.0f} s", flush=True)
    if failed:
        print(f"calibrate: seeds {failed} did not run through; nothing written", file=sys.stderr)
        return 2
    calib = calibration_from_records(records, seconds)
    calib["wall_seconds"] = round(time.perf_counter() - t0, 1)
    calib["jobs"] = args.jobs
    path = args.out or ROOT / "results" / "calibration" / f"{slug}.json"
    write_json(path, calib)
    bad = 0
    print(f"\n{'check':34s} {'kind':7s} {'rule':>16s} {'min':>10s} {'median':>10s} {'max':>10s}  seeds passing")
    for name, c in calib["checks"].items():
        ok = sum(c["passed"])
        bad += ok < len(c["passed"])
        fmt = lambda v: f"{v:10.4g}" if isinstance(v, (int, float)) else f"{'-':>10s}"
        print(f"{name:34s} {c['kind']:7s} {c['rule']:>16s} {fmt(c.get('min'))} {fmt(c.get('median'))} "
              f"{fmt(c.get('max'))}  {ok}/{len(c['passed'])}" + ("" if ok == len(c["passed"]) else "  <- FAILS"))
    print(f"\nwrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} "
          f"({calib['wall_seconds']:.0f} s, {args.jobs} side by side)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
