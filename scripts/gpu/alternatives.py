"""Alternatives to the fused Triton product, measured before choosing (issue 40): kermac (the fused kernel-machine
CUDA library xRFM uses: it writes kernel blocks, so K·v is a kermac block plus a matmul) and KeOps (a lazy
K·v reduction). Each at n = 1e5 (d = 100, Laplace L = 10, float32), checked against the float64 value on 1,000 rows;
failures recorded. Appends to <out>/kv.json under "alternatives".

    python scripts/gpu/alternatives.py OUT
"""
import json
import os
import statistics
import sys
import time

import torch

import rfm
from rfm.core.kernels import kernel_matrix

out = sys.argv[1]
N = int(os.environ.get("ALT_N", 100_000))
dev = "cuda"
g = torch.Generator(device="cpu").manual_seed(N)
X = torch.randn(N, 100, generator=g).to(dev)
v = torch.randn(N, 1, generator=g).to(dev)
k = rfm.LaplaceKernel(10.0)
rows = torch.arange(1000, device=dev)
ref = kernel_matrix(k, X[rows].double(), X.double(), transformed=True, pairs=(rows, rows)) @ v.double()
res = {}


def timed(fn, reps=3):
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


try:
    import kermac

    def kermac_kv():
        o = torch.empty(N, 1, device=dev)
        B = 8192
        for s in range(0, N, B):
            Kb = kermac.run_kernel(kermac.kernel_descriptor_laplace_l2, X[s:s + B], X, bandwidth=10.0)
            if Kb.shape[0] != min(B, N - s):
                Kb = Kb.T
            o[s:s + B] = Kb @ v
        return o

    s = timed(kermac_kv)
    o = kermac_kv()
    res["kermac"] = {"n": N, "s": s, "relerr_1000_rows": float((o[:1000].double() - ref).norm() / ref.norm()),
                     "version": getattr(kermac, "__version__", "0.1.4")}
except Exception as e:
    res["kermac"] = {"error": f"{type(e).__name__}: {e}"[:400]}
print("kermac", res["kermac"], flush=True)

try:
    from pykeops.torch import LazyTensor

    def keops_kv():
        xi = LazyTensor(X[:, None, :])
        xj = LazyTensor(X[None, :, :])
        D = ((xi - xj) ** 2).sum(-1)
        return (-(D.sqrt()) / 10.0).exp() @ v

    s = timed(keops_kv, 2)
    o = keops_kv()
    res["keops"] = {"n": N, "s": s, "relerr_1000_rows": float((o[:1000].double() - ref).norm() / ref.norm())}
except Exception as e:
    res["keops"] = {"error": f"{type(e).__name__}: {e}"[:400]}
print("keops", res["keops"], flush=True)
path = os.path.join(out, "kv.json")
allrec = json.load(open(path)) if os.path.exists(path) else {}
allrec["alternatives"] = res
json.dump(allrec, open(path, "w"), indent=1)
