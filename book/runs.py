# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Runs: execution times, calibrations and paper-scale runs
#
# Every chapter of this site was executed when the site was built, in its **smoke** profile (the settings a 2-core
# CPU runs in about two minutes). The first table is Jupyter Book's own record of that build: when each chapter was
# executed and how long it took.
#
# ```{nb-exec-table}
# ```
#
# Two more kinds of run are committed with the repository and read here from their JSON files:
#
# * the **calibration** of each chapter's Checks: its smoke profile over seeds 0–9 (`make calibrate
#   CHAPTER=<slug>`, `results/calibration/<slug>.json`); each chapter's Checks section shows the table per check;
# * the **full profile**, the paper's scale, run once (`make full CHAPTER=<slug>`, `results/<slug>/full.json`),
#   with the device it ran on and whether each check held there.

# %% tags=["remove-input"]
from IPython.display import Markdown, display

import rfm.book

chapters = sorted(p.stem for p in (rfm.book.ROOT / "notebooks").glob("*.py"))
rows = []
for slug in chapters:
    calib = rfm.book.load_calibration(slug)
    full = rfm.book.load_results(slug, "full")
    row = {"chapter": slug}
    if calib:
        secs = sorted(calib.get("seconds", {}).values())
        checks = calib["checks"].values()
        row.update({"calibration": f"seeds {calib['seeds'][0]}–{calib['seeds'][-1]}, {calib['date'][:10]}",
                    "smoke run (median s)": f"{secs[len(secs) // 2]:.0f}" if secs else "",
                    "checks (claims / sanity)": f"{sum(c['kind'] == 'claim' for c in checks)} / "
                                                f"{sum(c['kind'] == 'sanity' for c in checks)}"})
    if full:
        fc = full.get("checks", {})
        row.update({"full profile": f"{full['device']}, {full['date'][:10]}",
                    "full run (min)": f"{full['seconds'] / 60:.0f}" if full.get("seconds") else "",
                    "full checks passing": f"{sum(c['passed'] for c in fc.values())}/{len(fc)}" if fc else ""})
    rows.append(row)
cols = list(dict.fromkeys(k for r in rows for k in r))
display(Markdown("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n" +
                 "\n".join("| " + " | ".join(str(r.get(c, "—")) for c in cols) + " |" for r in rows)))
