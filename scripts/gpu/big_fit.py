"""One RFM fit at large n on the GPU (d = 100, y = x1 x2, Laplace L = 10, reg 1e-3, 20,000 AGOP points), timed,
with a record after each solve (time, solver, CG iterations, test MSE of the iterate) written as it goes, so that a
fit stopped by its time cap still leaves its progress. Appends to <out>/big.json under the key "<solver>_<n>_<iters>".

    python scripts/gpu/big_fit.py OUT N SOLVER [--iters 5] [--rank 1000] [--device cpu]
    SOLVER: ep3 (EigenPro3Solver, 20,000 centres, 3 epochs), cg-fused (CGSolver on the fly, fused), auto

``--device cpu`` runs the same fit on the CPU (peak memory then is the process's maximum resident set).
"""
import argparse
import json
import os
import resource
import time

import torch

import rfm
from rfm.core.cg import CGSolver
from rfm.core.eigenpro import EigenPro3Solver
from rfm.data import low_rank_polynomial

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("n", type=int)
ap.add_argument("solver")
ap.add_argument("--iters", type=int, default=5)
ap.add_argument("--rank", type=int, default=None)
ap.add_argument("--tol", type=float, default=1e-3)
ap.add_argument("--n-test", type=int, default=10_000)
ap.add_argument("--device", default="cuda")
args = ap.parse_args()
dev = args.device
CUDA = dev.startswith("cuda")


def sync():
    if CUDA:
        torch.cuda.synchronize()


def peak_gb():
    if CUDA:
        return torch.cuda.max_memory_allocated() / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kilobytes on Linux
path = os.path.join(args.out, "big.json")
kv = os.path.join(args.out, "kv.json")
if os.path.exists(kv) and "config" in json.load(open(kv)):  # the tile configuration time_kv.py found fastest
    from rfm.core import fused
    fused.CONFIG.update(json.load(open(kv))["config"])
key = f"{args.solver}_{args.n}_{args.iters}"


def save(rec):
    allrec = json.load(open(path)) if os.path.exists(path) else {}
    allrec[key] = rec
    json.dump(allrec, open(path, "w"), indent=1)


t0 = time.perf_counter()
X, y = low_rank_polynomial(args.n + args.n_test, 100, "x1x2", generator=0, dtype="float32")
X, y = X.to(dev), y.to(dev)
Xtr, ytr, Xte, yte = X[:args.n], y[:args.n], X[args.n:], y[args.n:]
rec = {"n": args.n, "solver": args.solver, "iters": args.iters, "gpu": torch.cuda.get_device_name(0) if CUDA else None,
       "device": dev, "threads": torch.get_num_threads(),
       "data_s": time.perf_counter() - t0, "progress": [], "status": "running"}
if args.solver == "ep3":
    solver = EigenPro3Solver(centers=20_000, epochs=3)
elif args.solver == "cg-fused":
    solver = CGSolver(store=False, fused=True, rank=args.rank, tol=args.tol)
else:
    solver = "auto"
save(rec)
T = time.perf_counter()


CB = [0.0]


def callback(model, r):
    sync()
    c0 = time.perf_counter()
    fit_so_far = c0 - T - CB[0]
    p = model.predict(Xte)
    keep = {k: v for k, v in r.items() if isinstance(v, (int, float, str, bool)) or v is None}
    keep["elapsed_s"] = time.perf_counter() - T
    keep["test_mse"] = float(((p.ravel() - yte) ** 2).mean())
    rec["progress"].append(keep)
    sync()
    CB[0] += time.perf_counter() - c0
    keep["fit_s_so_far"] = fit_so_far
    rec["peak_gb"] = peak_gb()
    save(rec)
    print("PROGRESS", json.dumps(keep), flush=True)
    return False


try:
    m = rfm.RFMRegressor(iters=args.iters, bandwidth=10.0, reg=1e-3, solver=solver, callback=callback,
                         device=dev, dtype="float32").fit(Xtr, ytr)
    sync()
    rec["fit_s_with_callbacks"] = time.perf_counter() - T
    rec["callback_s"] = CB[0]
    rec["fit_s"] = rec["fit_s_with_callbacks"] - CB[0]  # the fit alone: the test predictions after each solve out
    p = m.predict(Xte)
    rec["test_mse"] = float(((p.ravel() - yte) ** 2).mean())
    rec["best_iter"] = m.best_iter_
    rec["status"] = "ok"
except Exception as e:
    rec["status"] = "failed"
    rec["error"] = f"{type(e).__name__}: {e}"[:500]
rec["peak_gb"] = peak_gb()
save(rec)
print("BIG", json.dumps({k: v for k, v in rec.items() if k != "progress"}), flush=True)
