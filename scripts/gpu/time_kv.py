"""Time one product K(X, X)·v on the fly at n = 1e5, 3e5, 1e6 (d = 100, Laplace L = 10, float32): the fused
Triton kernel (a few tile configurations at the smallest n, the fastest kept; precisions ieee / tf32x3 / tf32) against
the blocked torch path (KernelOperator(store=False, fused=False)). CUDA events, one warm-up, median of the repeats;
the accuracy of each precision against float64 on 1,000 rows. Writes <out>/kv.json.

    python scripts/gpu/time_kv.py OUT [--sizes 100000 300000 1000000] [--blocked-max 300000]
"""
import argparse
import json
import statistics
import time

import torch

import rfm
from rfm.core import fused
from rfm.core.cg import KernelOperator
from rfm.core.kernels import kernel_matrix

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
ap.add_argument("--blocked-max", type=int, default=300_000)
ap.add_argument("--budget", type=float, default=150.0, help="seconds; later measurements are skipped past it")
ap.add_argument("--precisions", nargs="+", default=["tf32x3", "tf32+fp32", "tf32", "ieee"],
                help="ieee is timed at the first size only (3 s at n = 1e5 on an H200)")
ap.add_argument("--no-sweep", action="store_true", help="use rfm.core.fused.CONFIG, no tile sweep")
ap.add_argument("--file", default="kv.json")
args = ap.parse_args()
T0 = time.perf_counter()
dev = "cuda"
k = rfm.LaplaceKernel(10.0)
res = {"gpu": torch.cuda.get_device_name(0), "d": 100, "kernel": "laplace L=10", "rows": []}


def save():
    res["seconds"] = time.perf_counter() - T0
    json.dump(res, open(f"{args.out}/{args.file}", "w"), indent=1)


def timed(fn, reps, warm=True):
    if warm:
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        timed.last = fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    return statistics.median(ts), ts


CONFIGS = [dict(BM=128, BN=64, BD=128, num_warps=8, num_stages=2),
           dict(BM=128, BN=64, BD=32, num_warps=8, num_stages=2),
           dict(BM=64, BN=64, BD=128, num_warps=4, num_stages=2),
           dict(BM=128, BN=128, BD=128, num_warps=8, num_stages=2),
           dict(BM=256, BN=64, BD=128, num_warps=8, num_stages=2)]
best = dict(fused.CONFIG) if args.no_sweep else None
if best is not None:
    res["config"] = best
    fused.kernel_product(k, torch.randn(1000, 100, device=dev), torch.randn(1000, 100, device=dev),
                         torch.randn(1000, 1, device=dev))  # compile before timing
for N in args.sizes:
    g = torch.Generator(device="cpu").manual_seed(N)
    X = torch.randn(N, 100, generator=g).to(dev)
    v = torch.randn(N, 1, generator=g).to(dev)
    rows = torch.arange(1000, device=dev)
    ref = (kernel_matrix(k, X[rows].double(), X.double(), transformed=True,
                         pairs=(torch.arange(1000, device=dev), rows)) @ v.double())
    diag = torch.arange(N, device=dev)
    ids = fused.pair_ids((diag, diag), N, N, dev)
    if best is None:  # the tile sweep at the first size
        sweep = []
        for cfg in CONFIGS:
            try:
                fn = lambda X=X, v=v, cfg=cfg, ids=ids: fused.kernel_product(k, X, X, v, ids=ids, config=cfg)
                med, ts = timed(fn, 3)
                sweep.append({"config": cfg, "s": med})
                print(f"sweep n={N} {cfg}: {med:.4f} s", flush=True)
            except Exception as e:  # a config the compiler refuses (shared memory, registers)
                sweep.append({"config": cfg, "error": f"{type(e).__name__}: {e}"[:300]})
                print(f"sweep n={N} {cfg}: {type(e).__name__}", flush=True)
        res["sweep"] = sweep
        ok = [s for s in sweep if "s" in s]
        best = min(ok, key=lambda s: s["s"])["config"]
        res["config"] = best
        save()
    for prec in args.precisions:
        if time.perf_counter() - T0 > args.budget:
            break
        if prec == "ieee" and N != args.sizes[0]:
            continue
        reps = 3 if N < 1_000_000 else 1
        fn = lambda X=X, v=v, prec=prec, ids=ids, best=best: fused.kernel_product(k, X, X, v, ids=ids, config=best,
                                                                                  precision=prec)
        med, ts = timed(fn, reps, warm=N < 1_000_000)
        o = timed.last
        rel = float((o[:1000].double() - ref).norm() / ref.norm())
        res["rows"].append({"n": N, "path": "fused", "precision": prec, "s": med, "times": ts, "relerr_1000_rows": rel,
                            "entries_per_s": N * N / med})
        print(f"K v n={N} fused {prec}: {med:.3f} s  relerr {rel:.2e}", flush=True)
        save()
    if N <= args.blocked_max and time.perf_counter() - T0 < args.budget:
        op = KernelOperator(k, X, store=False, fused=False)
        med, ts = timed(lambda op=op, v=v: op.matmul(v), 1)
        o = op.matmul(v)
        rel = float((o[:1000].double() - ref).norm() / ref.norm())
        res["rows"].append({"n": N, "path": "blocked", "precision": "fp32", "s": med, "times": ts,
                            "relerr_1000_rows": rel, "entries_per_s": N * N / med})
        print(f"K v n={N} blocked: {med:.3f} s  relerr {rel:.2e}", flush=True)
        save()
    del X, v, ref
    torch.cuda.empty_cache()
save()
