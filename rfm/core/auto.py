"""``solver="auto"``: the solver picked by size and memory, with the choice recorded in each solve's record.

Cholesky while small, preconditioned CG on a stored K while K fits, then (:data:`AUTO_BEYOND_MEMORY`) CG with
products on the fly or EigenPro 3, as measured (benchmarks/README.md, results/gpu/).
"""
from __future__ import annotations

import torch

from .._checks import check_number
from . import fused
from .cg import CGSolver, available_memory
from .direct import DirectSolver, SolveResult
from .eigenpro import EigenPro3Solver

__all__ = ["AUTO_BEYOND_MEMORY", "AUTO_CROSSOVER", "AutoSolver"]


#: Training-set sizes above which ``solver="auto"`` uses CG instead of Cholesky. CPU: measured on the project's
#: 2-core machine (the benchmark task, best of 3 fits, 2026-11-23): CG / Cholesky fit time 0.97, 1.06, 0.75, 0.98 at
#: n = 1000, 1500, 2000, 3000 (no consistent gain, so the exact solve stays), and CG faster from n = 4000 on
#: (benchmarks/README.md). CUDA: on one H200 (../shared/measurements/h200-2026-11-27, commit 274fc58) n = 8,000 fits
#: in 0.12 s either way and at n = 32,000 CG (0.99 s) beats Cholesky (2.73 s); 20,000 lies between.
AUTO_CROSSOVER = {"cpu": 3000, "cuda": 20000}

#: The solver ``solver="auto"`` uses once K no longer fits in memory, per (device type, fused kernel available),
#: "cg" (preconditioned CG with products on the fly, by the fused Triton kernel where it is available, else in
#: blocks) or "eigenpro3" (:class:`rfm.core.eigenpro.EigenPro3Solver`, on centres). CUDA, measured on one H200
#: (results/gpu/2026-11-27-h200, commits ca5b71d and 68e16d8): one on-the-fly K·v at n = 10^6, d = 100 takes
#: 18.9 s with the fused kernel at float32 accuracy (tf32x3; 21.0 s blocked, ../shared/measurements/h200-2026-11-27),
#: so a CG solve of ~50 products takes ~16 min, while EigenPro 3 fits n = 10^6 with five feature updates in 189 s
#: (test MSE 4.6e-4). Hence EigenPro 3 on CUDA, fused or not. CPU: no EigenPro 3 measurement at scale; CG stays.
AUTO_BEYOND_MEMORY = {("cpu", False): "cg", ("cpu", True): "cg", ("cuda", True): "eigenpro3",
                      ("cuda", False): "eigenpro3"}


class AutoSolver:
    """The solver picked by size and memory (``solver="auto"`` in the estimators), the choice recorded:

    1. Cholesky while n is at most the crossover (``AUTO_CROSSOVER``) and K + reg I fits twice in memory;
    2. preconditioned CG on a stored K while K fits in half the available memory;
    3. beyond that, :data:`AUTO_BEYOND_MEMORY`: CG with products on the fly (fused where available) or EigenPro 3.

    Each solve's record (``history_``) holds ``auto`` (the choice: "cholesky", "cg/stored", "cg/fused",
    "cg/blocks" or "eigenpro3") and ``auto_reason``.

    Parameters
    ----------
    crossover : int or None, default None
        The size above which CG is used (None: ``AUTO_CROSSOVER`` for the device).
    tol : float, default 1e-3
        CG's relative residual (see :class:`CGSolver`).
    beyond_memory : {"cg", "eigenpro3"} or None, default None
        Override :data:`AUTO_BEYOND_MEMORY`.
    """

    def __init__(self, crossover=None, tol=1e-3, beyond_memory=None):
        if crossover is not None:
            check_number("crossover", crossover, low=0, integer=True)
        if beyond_memory not in (None, "cg", "eigenpro3"):
            raise ValueError(f"beyond_memory must be None, 'cg' or 'eigenpro3', got {beyond_memory!r}")
        self.crossover, self.tol, self.beyond_memory = crossover, tol, beyond_memory
        self.last_plan = None

    def plan(self, n: int, reg: float, device, itemsize: int = 4, kernel=None, available=None) -> dict:
        """The choice for a problem of n points, with the reason.

        Parameters
        ----------
        n : int
            The number of training points.
        reg : float
            The ridge; 0 always chooses the exact (Cholesky) solve.
        device : torch.device or str
            Where the solve runs (sets the crossover and the free memory).
        itemsize : int, default 4
            Bytes per kernel entry.
        kernel : Kernel, optional
            The kernel, to know whether the fused GPU matrix-vector product is available for it.
        available : int, optional
            Free memory in bytes, overriding the measured one (tests).

        Returns
        -------
        dict
            ``{"solver", "auto", "reason"}``: the solver ("cholesky", "cg" or "eigenpro3"), the same with the way CG
            forms K ("cg/stored", "cg/fused", "cg/blocks"), and why, as text.
        """
        if not reg > 0:
            return {"solver": "cholesky", "auto": "cholesky", "reason": "reg = 0: interpolation needs the exact solve"}
        dev = torch.device(device).type
        limit = AUTO_CROSSOVER.get(dev, AUTO_CROSSOVER["cpu"]) if self.crossover is None else self.crossover
        free = available_memory(device) if available is None else int(available)
        gb = n * n * itemsize / 2**30
        if n <= limit and 2 * n * n * itemsize <= free:
            return {"solver": "cholesky", "auto": "cholesky", "reason": f"n = {n} <= {limit} ({dev})"}
        if n * n * itemsize <= free // 2:
            return {"solver": "cg", "auto": "cg/stored", "reason": f"K ({gb:.1f} GiB) fits in half of "
                    f"{free / 2**30:.1f} GiB free"}
        fused_ok = kernel is not None and fused.available(kernel, device)
        which = self.beyond_memory or AUTO_BEYOND_MEMORY.get((dev, fused_ok), "cg")
        why = f"K ({gb:.1f} GiB) does not fit in half of {free / 2**30:.1f} GiB free"
        if which == "eigenpro3":
            return {"solver": "eigenpro3", "auto": "eigenpro3", "reason": why}
        return {"solver": "cg", "auto": "cg/fused" if fused_ok else "cg/blocks", "reason": why}

    def choose(self, n: int, reg: float, device, itemsize: int = 4, kernel=None) -> str:
        """"cholesky", "cg" or "eigenpro3" for a problem of n points.

        Parameters
        ----------
        n, reg, device, itemsize, kernel
            As in :meth:`plan`.

        Returns
        -------
        str
            ``plan(...)["solver"]``.
        """
        return self.plan(n, reg, device, itemsize, kernel)["solver"]

    def solve(self, kernel, Xt, Y, reg, *, pairs=None, mem_bytes=None) -> SolveResult:
        """Solve (K + reg I) alpha = Y with the solver that :meth:`plan` chooses (recorded in ``last_plan``).

        Parameters
        ----------
        kernel : Kernel
            The kernel.
        Xt : torch.Tensor, shape (n, r)
            The transformed training points.
        Y : torch.Tensor, shape (n, c)
            The targets.
        reg : float
            The ridge.
        pairs : tuple of index tensors, optional
            Coincident pairs of the training points.
        mem_bytes : int, optional
            Working-memory budget of the kernel blocks.

        Returns
        -------
        SolveResult
            The chosen solver's result, whose ``info`` also holds ``"auto"`` and ``"auto_reason"``.
        """
        plan = self.plan(Xt.shape[0], reg, Xt.device, Xt.element_size(), kernel)
        self.last_plan = plan
        if plan["solver"] == "cholesky":
            solver = DirectSolver("cholesky")
        elif plan["solver"] == "eigenpro3":
            solver = EigenPro3Solver()
        else:
            solver = CGSolver(tol=self.tol, store=plan["auto"] == "cg/stored")
        res = solver.solve(kernel, Xt, Y, reg, pairs=pairs, mem_bytes=mem_bytes)
        return res._replace(info={**(res.info or {}), "auto": plan["auto"], "auto_reason": plan["reason"]})

    def __repr__(self):
        return f"AutoSolver(crossover={self.crossover!r}, tol={self.tol!r}, beyond_memory={self.beyond_memory!r})"
