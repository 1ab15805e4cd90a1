"""Ten-seed calibrations and knob runs of many chapters at once, on a machine with many cores (the lent GPU
machine's 16 CPU cores), as plain scripts: the device image has no Jupyter, so each chapter runs as its jupytext
source with the parameters set after its parameters cell (:func:`gpu_queue.script_source`), one BLAS thread per
run, as many runs side by side as ``--jobs``.

    python scripts/gpu/device_calibrate.py TASKS.json OUT [--jobs 14] [--budget 500]

TASKS.json::

    {"calibrate": {"<slug>": {"params": {...}, "seeds": 10}, ...},
     "runs": [{"chapter": "<slug>", "name": "seed11", "profile": "smoke", "params": {"seed": 11}}, ...]}

Each run's record (what ``rfm.book.Checks.finish`` writes, with its seconds) is added to ``OUT/records.json``
(``{"<slug>/<name>": record}``) as soon as it ends, so a run cut short by the budget loses only itself; one file,
because the device tool brings back only a few files and folders of little depth. At the end each chapter whose
seeds all ran is merged (:func:`rfm.book.checks.calibration_from_records`) into ``OUT/calibration/<slug>.json``, the
file that ``scripts/calibrate.py`` writes to ``results/calibration/``; ``OUT/summary.json`` lists every run with its
status, seconds and, for a failure, the end of its output. The longest runs start first (expected times from the
committed calibrations). Set ``RFM_BOOK_COMMIT`` to the commit the tree was copied from when it travels without
``.git``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
from gpu_queue import script_source  # noqa: E402

_LOCK = threading.Lock()


def expected_seconds(slug: str) -> float:
    """The median seconds of a seed in the committed calibration (120 when there is none)."""
    path = ROOT / "results" / "calibration" / f"{slug}.json"
    try:
        secs = [float(v) for v in json.loads(path.read_text()).get("seconds", {}).values()]
        return statistics.median(secs) if secs else 120.0
    except (OSError, ValueError):
        return 120.0


def tasks_from(spec: dict) -> list[dict]:
    """One task per (chapter, seed) of the calibrations and one per knob run, longest first."""
    tasks = []
    for slug, cal in spec.get("calibrate", {}).items():
        for seed in range(int(cal.get("seeds", 10))):
            tasks.append(dict(chapter=slug, name=f"seed{seed}", profile=cal.get("profile", "smoke"),
                              params={**cal.get("params", {}), "seed": seed}, calibration=True))
    for run in spec.get("runs", []):
        tasks.append(dict(chapter=run["chapter"], name=run["name"], profile=run.get("profile", "smoke"),
                          params=dict(run.get("params", {})), calibration=False))
    for t in tasks:
        t["expected"] = expected_seconds(t["chapter"]) * (1 if t["profile"] == "smoke" else 5)
    return sorted(tasks, key=lambda t: -t["expected"])


def run_task(task: dict, out: Path, deadline: float) -> dict:
    slug, name = task["chapter"], task["name"]
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "device-calibrate" / slug / name
    work.mkdir(parents=True, exist_ok=True)
    params = {"profile": task["profile"], "device": "cpu", "output_dir": str(work), **task["params"]}
    script = work / f"{slug}_script.py"
    script.write_text(script_source(ROOT / "notebooks" / f"{slug}.py", params))
    env = dict(os.environ, RFM_BOOK_CHECKS="record", RFM_BOOK_OUTPUT=str(work), MPLBACKEND="Agg",
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    rec = dict(chapter=slug, name=name, profile=task["profile"], params=task["params"],
               calibration=task["calibration"])
    left = deadline - time.time()
    if left < 20:
        return {**rec, "status": "not started"}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, str(script)], cwd=ROOT / "notebooks", env=env, capture_output=True,
                              text=True, timeout=left)
        code, tail = proc.returncode, (proc.stdout + proc.stderr)[-3000:]
    except subprocess.TimeoutExpired:
        code, tail = "timeout", ""
    rec["seconds"] = round(time.perf_counter() - t0, 1)
    found = work / f"{slug}_{task['profile']}.json"
    if code == 0 and found.exists():
        dest = work.parent.parent / "records" / slug / f"{name}.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        record = json.loads(found.read_text())
        record["seconds"] = rec["seconds"]
        dest.write_text(json.dumps(record, indent=1) + "\n")
        with _LOCK:
            path = out / "records.json"
            allrec = json.loads(path.read_text()) if path.exists() else {}
            allrec[f"{slug}/{name}"] = record
            path.write_text(json.dumps(allrec) + "\n")
        rec["status"] = "ok"
    else:
        rec["status"], rec["tail"] = ("timeout" if code == "timeout" else "failed"), tail
    print(f"{slug} {name}: {rec['status']} in {rec['seconds']} s", flush=True)
    return rec


def merge(out: Path, spec: dict, runs: list[dict]) -> None:
    """Write OUT/calibration/<slug>.json for each chapter whose seeds all ran."""
    from rfm.book.checks import calibration_from_records, write_json

    for slug in spec.get("calibrate", {}):
        mine = [r for r in runs if r["chapter"] == slug and r["calibration"]]
        if not mine or any(r["status"] != "ok" for r in mine):
            print(f"{slug}: calibration incomplete ({sum(r['status'] == 'ok' for r in mine)}/{len(mine)} seeds)")
            continue
        allrec = json.loads((out / "records.json").read_text())
        records = [allrec[f"{slug}/{r['name']}"] for r in mine]
        calib = calibration_from_records(records, {r["params"]["seed"]: r["seconds"] for r in mine})
        calib["jobs"] = "device_calibrate (one thread a run)"
        write_json(out / "calibration" / f"{slug}.json", calib)
        bad = [n for n, c in calib["checks"].items() if not all(c["passed"])]
        print(f"{slug}: calibration written; checks failing at some seed: {bad or 'none'}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tasks", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--budget", type=float, default=500.0, help="seconds for everything")
    args = ap.parse_args(argv)
    spec = json.loads(args.tasks.read_text())
    deadline = time.time() + args.budget
    tasks = tasks_from(spec)
    print(f"device_calibrate: {len(tasks)} runs, {args.jobs} side by side, {args.budget:.0f} s", flush=True)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        runs = list(pool.map(lambda t: run_task(t, args.out, deadline), tasks))
    (args.out / "summary.json").write_text(json.dumps(runs, indent=1) + "\n")
    merge(args.out, spec, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
