"""Calibrate the Checks of notebooks/rfm_at_scale.py: run the chapter's measurements for several seeds.

    .venv/bin/python results/rfm_at_scale/calibrate.py                 # seeds 0-9, smoke profile
    .venv/bin/python results/rfm_at_scale/calibrate.py --seeds 0 1 2

For each seed, the code cells of the chapter up to its ``## Checks`` heading are executed (read from the jupytext
source, so the measurements are exactly the chapter's, without its assertions), with ``seed`` set in the parameters
cell. The measured values are written to ``results/rfm_at_scale/calibration_<profile>.json`` with the date, commit,
machine and parameters; the chapter shows that table in its Checks preamble.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")

import jupytext  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CHAPTER = ROOT / "notebooks" / "rfm_at_scale.py"


def measure(seed: int, profile: str) -> dict:
    nb = jupytext.read(CHAPTER)
    ns: dict = {"__name__": "__calibration__"}
    cwd = os.getcwd()
    os.chdir(CHAPTER.parent)  # the chapter runs with notebooks/ as its working directory
    try:
        t0 = time.perf_counter()
        for cell in nb.cells:
            if cell.cell_type == "markdown" and cell.source.lstrip().startswith("## Checks"):
                break
            if cell.cell_type != "code" or "remove-cell" in cell.metadata.get("tags", []):
                continue
            exec(compile(cell.source, f"<{CHAPTER.name}>", "exec"), ns)
            if "parameters" in cell.metadata.get("tags", []):
                ns.update(seed=seed, profile=profile)
            ns["plt"].close("all") if "plt" in ns else None
        seconds = time.perf_counter() - t0
    finally:
        os.chdir(cwd)
    fits = ns["fits"]
    return {
        "seed": seed,
        "plain_fail_last": ns["plain_fail_last"],
        "precond_res_max": max(ns["res_pre"]),
        "plain_res_first": ns["res_plain"][0],
        "ratio_last": ns["ratio_last"],
        "growth_plain": ns["growth_plain"],
        "rel_cg_max": ns["rel_cg_max"],
        "loose_excess": ns["loose_excess"],
        "rel_plain_max": ns["rel_plain_max"],
        "its_plain_first": ns["its_plain"][0],
        "its_plain_last": ns["its_plain"][-1],
        "its_precond_first": ns["its_pre"][0],
        "its_precond_last": ns["its_pre"][-1],
        "its_precond_max": max(ns["its_pre"]),
        "mse_cholesky_final": float(ns["ref"][-1]),
        "fit_s_cholesky": fits["Cholesky"]["seconds"],
        "fit_s_cg": fits["CG, tol 1e-3"]["seconds"],
        "cg_fallbacks": sum(r["solver"] != "cg" for label, f in fits.items() if label != "Cholesky"
                            for r in f["history"]),
        "measure_s": seconds,
    }, vars(ns["P"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    ap.add_argument("--profile", default="smoke")
    args = ap.parse_args(argv)

    import rfm.book

    rows, params = [], None
    for seed in args.seeds:
        row, params = measure(seed, args.profile)
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = {
        "chapter": "rfm_at_scale",
        "what": "the chapter's measurements (code cells before '## Checks') per seed; results/rfm_at_scale/"
                "calibrate.py",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": rfm.book.git_commit(),
        "machine": f"{rfm.book.device_name('cpu')}, {platform.platform()}, load average at end "
                   f"{os.getloadavg()[0]:.1f}",
        "params": params,
        "per_seed": rows,
    }
    path = HERE / f"calibration_{args.profile}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
