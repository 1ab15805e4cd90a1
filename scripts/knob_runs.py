"""Run a chapter's smoke profile once per changed knob and commit the records as ``results/<slug>/knobs.json``.

    python scripts/knob_runs.py <slug> --run seed11 seed=11 --run d50 d=50 [--jobs 2] [--profile smoke]

Each ``--run NAME KNOB=VALUE ...`` is one headless rerun (``scripts/rerun.py`` through
:func:`calibrate.run_seed`, checks recorded and none raised) with those knobs of the parameters cell changed (the
seed too: ``seed=11``); values are parsed as the rerun parses ``-p`` values (``d=50``, ``n_sizes=[500,1000]``).
The file keeps, per run, its name, the changed knobs, seed, date, commit, device, the value of every check and the
scalar measured values, so a chapter can glue what it says about other settings from a committed run instead of a
typed number. Runs already in the file under another name are kept; a run of the same name is replaced.

``--from-records DIR`` writes the file from runs made elsewhere instead (``scripts/gpu/device_calibrate.py`` on a
many-core machine): ``DIR/<name>.json`` is the record of the run ``--run <name> ...`` names, nothing is run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate import chapter_source, run_seed  # noqa: E402 (one way of running a chapter headless)
from rerun import parse_value  # noqa: E402 (a knob's value as the rerun reads it)


def parse_run(items: list[str]) -> tuple[str, dict[str, str]]:
    """``["d50", "d=50", "seed=11"]`` -> ``("d50", {"d": "50", "seed": "11"})``."""
    name, knobs = items[0], {}
    for item in items[1:]:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--run {name}: {item!r} is not KNOB=VALUE")
        knobs[key] = value
    return name, knobs


def summary(name: str, knobs: dict[str, str], record: dict, seconds: float) -> dict:
    """One run's entry: what changed, where and when it ran, every check's value and the scalar measured values."""
    measured = record.get("measured", {})
    params = record.get("params", {})
    changed = {k: record.get("seed") if k == "seed" else params.get(k, parse_value(v)) for k, v in knobs.items()}
    return {"name": name, "changed": changed,
            "seed": record.get("seed"), "date": record.get("date"), "commit": record.get("commit"),
            "device": record.get("device"), "seconds": round(seconds, 1),
            "params": record.get("params", {}),
            "checks": {k: c.get("value") for k, c in record.get("checks", {}).items()},
            "passed": {k: c.get("passed") for k, c in record.get("checks", {}).items()},
            "measured": {k: v for k, v in measured.items() if isinstance(v, (int, float, str, list, dict))}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("chapter", help="the chapter's slug (notebooks/<slug>.py), or the path of a chapter")
    ap.add_argument("--run", nargs="+", action="append", required=True, metavar="NAME_OR_KNOB",
                    help="a run: its name, then KNOB=VALUE for each changed knob")
    ap.add_argument("--profile", default="smoke")
    ap.add_argument("--jobs", type=int, default=2, help="runs side by side (default 2)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per run (default 1800)")
    ap.add_argument("--out", type=Path, default=None, help="default results/<slug>/knobs.json")
    ap.add_argument("--from-records", type=Path, default=None,
                    help="read each run's record from DIR/<name>.json (runs made elsewhere) instead of running it")
    args = ap.parse_args(argv)
    src = chapter_source(args.chapter)
    slug = src.stem
    runs = [parse_run(items) for items in args.run]
    threads = max(1, (os.cpu_count() or 1) // max(1, args.jobs))
    entries, failed = {}, []
    if args.from_records is not None:
        for name, knobs in runs:
            path = args.from_records / f"{name}.json"
            if not path.exists():
                failed.append(name)
                print(f"{name}: no record {path}", file=sys.stderr)
                continue
            record = json.loads(path.read_text())
            entries[name] = summary(name, knobs, record, float(record.get("seconds") or 0.0))
        runs = []
    with tempfile.TemporaryDirectory(prefix=f"knobs-{slug}-") as tmp, ThreadPoolExecutor(args.jobs) as pool:
        futures = {}
        for name, knobs in runs:
            seed = int(knobs.get("seed", 0))
            extra = [(k, v) for k, v in knobs.items() if k != "seed"]
            futures[name] = (knobs, pool.submit(run_seed, src, seed, args.profile, extra, Path(tmp) / name,
                                                args.timeout, threads))
        for name, (knobs, fut) in futures.items():
            try:
                record, seconds = fut.result()
            except Exception as exc:  # a failed run is reported; the others are still written
                failed.append(name)
                print(f"{name}: {exc}", file=sys.stderr, flush=True)
                continue
            entries[name] = summary(name, knobs, record, seconds)
            bad = [k for k, ok in entries[name]["passed"].items() if ok is False]
            print(f"{name} ({seconds:.0f} s): " + ("all checks pass" if not bad else f"fail: {', '.join(bad)}"),
                  flush=True)
    path = args.out or ROOT / "results" / slug / "knobs.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    kept = [r for r in old.get("runs", []) if r.get("name") not in entries]
    out = {"chapter": slug, "profile": args.profile,
           "what": "one run per setting, each changing knobs of the parameters cell (or the seed); checks recorded, "
                   "not raised (scripts/knob_runs.py)",
           "runs": kept + list(entries.values())}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1, default=str) + "\n")
    print(f"wrote {path} ({len(entries)} new runs, {len(kept)} kept)")
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
