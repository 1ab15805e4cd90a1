"""MLP(vec) trained ten times longer than in notebooks/in_context_scaling.py (30,000 steps instead of 3,000) at the
shortest and longest prompts, and MLP(psi) and one SGPT block with the linear and the l1 normalisation of psi.
Writes $OUT/icl.json (committed, wrapped, as results/in_context_scaling/long_training.json). Usage, from the
repository root: OUT=/tmp python scripts/in_context_long_training.py (about four minutes on one H200).
"""
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.getcwd())   # run from the repository root
from rfm.data.icl import LinearTasks
from rfm.nets import icl

dev = "cuda" if torch.cuda.is_available() else "cpu"
d, noise = 2, 0.25
grid = [4, 8, 16, 32]
tasks = lambda: LinearTasks(d, n_tasks=None, noise=noise, generator=0)
tests = {n: tasks().sample(2000, n, generator=10000 + n) for n in grid}
out = {}


def run(key, net, sampler, steps, lr, ns):
    t0 = time.time()
    icl.train_online(net.to(dev), sampler, steps=steps, batch_size=64, lr=lr, schedule="cosine", generator=7)
    out[key] = {n: icl.evaluate(net, tests[n]) for n in ns}
    out[key]["seconds"] = time.time() - t0
    print(key, json.dumps(out[key]), flush=True)
    json.dump(out, open(os.path.join(os.environ["OUT"], "icl.json"), "w"), indent=1)


for n in grid:
    out[f"zero n={n}"] = float((tests[n].y_query.double() ** 2).mean())
for steps in (3000, 30000):
    for n in (4, 32):
        run(f"MLP(vec) n={n} steps={steps}", icl.PromptMLP(d, n, ("vec",), widths=(1024,), attention="linear",
            generator=5, dtype="float32"), tasks().sampler(n), steps, 3e-3, [n])
for att in ("linear", "l1"):
    for n in (4, 32):
        run(f"MLP(psi {att}) n={n}", icl.PromptMLP(d, n, ("psi",), widths=(1024,), attention=att, generator=5,
            dtype="float32"), tasks().sampler(n), 3000, 3e-3, [n])
    run(f"SGPT {att}", icl.SGPT(d, generator=900, attention=att, width=256), tasks().sampler(grid), 3000, 2e-3, grid)
