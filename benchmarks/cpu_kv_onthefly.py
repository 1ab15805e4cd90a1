"""One on-the-fly product K v on the CPU (blocked torch path, Laplace L = 10, d = 100, float32) at n = 20,000 and
40,000, best of 2 after a warm-up, to extrapolate the cost of RFM at n = 10^5 on this machine (issue 40). Prints JSON;
the committed runs are benchmarks/results/cpu_kv_onthefly_*.json.

    python benchmarks/cpu_kv_onthefly.py [--threads 2] [--sizes 20000 40000]
"""
import argparse
import datetime
import json
import os
import platform
import time

import torch

import rfm
import rfm.book
from rfm.core.cg import KernelOperator

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--sizes", type=int, nargs="+", default=[20000, 40000])
args = ap.parse_args()
torch.set_num_threads(args.threads)
k = rfm.LaplaceKernel(10.0)
res = []
for N in args.sizes:
    g = torch.Generator().manual_seed(N)
    X = torch.randn(N, 100, generator=g)
    v = torch.randn(N, 1, generator=g)
    op = KernelOperator(k, X, store=False, fused=False)
    op.matmul(v[:, :])
    ts = []
    for _ in range(2):
        t = time.perf_counter()
        op.matmul(v)
        ts.append(time.perf_counter() - t)
    res.append({"n": N, "s": min(ts), "times": ts, "entries_per_s": N * N / min(ts)})
    print(res[-1], flush=True)
print(json.dumps({"cpu": platform.processor(), "threads": args.threads, "load": os.getloadavg(), "rows": res,
                  "date": datetime.date.today().isoformat(), "torch": torch.__version__,
                  "build": rfm.book.cpu_build()}))
