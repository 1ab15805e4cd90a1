"""lin-RFM at the authors' repository setting (d = 500, r = 5, 10,000 observed entries) under four ridge schedules:
the authors' switch rule (svd_free_lin_rfm.py; oracle and held-out), the plateau rule and the chapter's geometric
one. Writes $OUT/authors_schedule.json (committed as results/linear_rfm_irls/authors_schedule.json, read by
notebooks/linear_rfm_irls.py). Usage, from the repository root: OUT=/tmp ITERS=3000 python
scripts/linear_rfm_authors_schedule.py (about a minute on one H200).
"""
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.getcwd())   # run from the repository root
from rfm.data import low_rank_completion
from rfm.models import linear as L

dev = "cuda" if torch.cuda.is_available() else "cpu"
print("device", dev, torch.__version__, flush=True)
N_OBS = int(round(10000 / 4975 * 5 * (2 * 500 - 5)))
out = {"n_obs": N_OBS, "runs": []}
iters = int(os.environ.get("ITERS", "3000"))
for t in range(3):
    Y, m = low_rank_completion(500, 5, N_OBS, generator=200 + t)   # the chapter's completion problems at seed 0
    Y, m = Y.to(dev), m.to(dev)
    for name, kw in [("authors, oracle switch", dict(reg=0.05, reg_min=1e-3, reg_schedule="switch", switch_on="eval")),
                     ("authors, held-out switch", dict(reg=0.05, reg_min=1e-3, reg_schedule="switch", holdout=0.1)),
                     ("plateau from 0.05", dict(reg=0.05, reg_schedule="plateau", holdout=0.1)),
                     ("geometric (chapter)", dict())]:
        t0 = time.perf_counter()
        r = L.lin_rfm_completion(Y, m, iters=iters if name != "geometric (chapter)" else 1000, Y_eval=Y, **kw)
        e = np.array(r["eval_error"])
        row = dict(problem=t, method=name, final=float(e[-1]), best=float(e.min()), chosen=float(e[r["iteration"]]),
                   chosen_iter=r["iteration"], switched_at=r["switched_at"], seconds=time.perf_counter() - t0,
                   at={k: float(e[min(k, len(e) - 1)]) for k in (100, 300, 1000, 2000, 3000)})
        out["runs"].append(row)
        print(json.dumps(row), flush=True)
        json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "authors_schedule.json"), "w"), indent=1)
