r"""Preconditioned conjugate gradients for kernel ridge regression, without factoring K.

Solves (K + reg I) alpha = Y for all columns of Y at once (one kernel pass serves every output), with

* :class:`KernelOperator` -- K(X~, X~) as an operator: a stored matrix when it fits the memory budget, else blocks
  computed on the fly (:func:`rfm.core.kernels.kernel_blocks`, the one place kernel values are made); its columns
  and diagonal for the preconditioner;
* :func:`rpcholesky` -- a rank-k Nystrom factor F (K ~ F F^T) by block randomly pivoted Cholesky (Chen, Epperly,
  Tropp & Webber, 2023; pivots drawn in proportion to the residual diagonal);
* :class:`NystromPreconditioner` -- P = F F^T + reg I, applied in the orthonormal form
  P^{-1} v = v / reg + U ((S^2 + reg)^{-1} - 1/reg) U^T v with F = U S V^T (thin SVD in float64): the Woodbury form
  (v - F (reg I + F^T F)^{-1} F^T v) / reg diverges in float32;
* :func:`lanczos_condition` -- the condition number of K + reg I estimated by Lanczos (what CG's iteration count
  depends on);
* :func:`pcg` -- block-diagonal PCG (each column its own step sizes, one matmul for all), stopping on the *true*
  relative residual ``|Y - (K + reg I) alpha|_F / |Y|_F``, with mixed-precision iterative refinement: K's products
  in the working dtype, the true residual with float64 accumulation.

:class:`CGSolver` packages them as a solver strategy for the estimators (``solver="cg"``; ``solver="auto"`` picks
it above a measured size). An inexact solve does not give the training predictions for free: they are
f(X) = K alpha = Y - reg alpha - R with R the final true residual.
"""
from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import torch

from .._checks import check_number
from ..utils import make_generator
from .blocks import iter_blocks
from .coincident import subset_pairs
from .direct import SolveResult, solve_krr
from .kernels import Kernel, kernel_blocks, kernel_matrix, pairwise_


def available_memory(device) -> int:
    """Bytes that can still be allocated: free GPU memory, or MemAvailable of /proc/meminfo on a CPU (4 GiB when
    it cannot be read).

    Parameters
    ----------
    device : torch.device or str
        The device.

    Returns
    -------
    int
        Bytes.
    """
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 4 * 2**30


class KernelOperator:
    """K = K(X~, X~) as a linear operator, for transformed points ``Xt`` (n, r).

    Parameters
    ----------
    kernel : Kernel
    Xt : torch.Tensor, shape (n, r)
        Transformed training points x~ = L^T x.
    pairs : tuple of index tensors, optional
        Coincident pairs of the training points (the diagonal and duplicated rows): their distance is exactly 0.
    mem_bytes : int, optional
        Working-memory budget for one block of kernel values.
    store : bool or None, default None
        Keep K in memory (one n x n matrix) or recompute blocks at every product; None stores K when it fits in
        ``store_bytes``.
    store_bytes : int, optional
        Memory allowed for a stored K (default: half the available memory of the device).
    fused : bool or None, default None
        Products on the fly by the fused Triton kernel (``rfm.core.fused``: no block of K in memory) instead of
        blocks of :func:`rfm.core.kernels.kernel_blocks`. None uses it when K is not stored and the fused path is
        available (triton installed, a CUDA device or the Triton interpreter, a Laplace or Gaussian kernel);
        True requires it (an error when unavailable); False never uses it.
    """

    def __init__(self, kernel: Kernel, Xt: torch.Tensor, *, pairs=None, mem_bytes=None, store=None,
                 store_bytes=None, fused=None):
        if not isinstance(kernel, Kernel):
            raise TypeError(f"kernel must be an rfm.Kernel instance (use rfm.get_kernel(name)), got {kernel!r}")
        if not isinstance(Xt, torch.Tensor) or Xt.ndim != 2 or not Xt.is_floating_point():
            raise TypeError("Xt must be a 2-D floating torch tensor of transformed points (n, r), got "
                            f"{type(Xt).__name__} {tuple(getattr(Xt, 'shape', ()))}")
        if not bool(torch.isfinite(Xt).all()):  # one pass over the points; NaN would make every product NaN
            raise ValueError(f"Xt contains {int((~torch.isfinite(Xt)).sum())} NaN or infinite value(s)")
        self.kernel, self.Xt, self.pairs, self.mem_bytes = kernel, Xt, pairs, mem_bytes
        n = Xt.shape[0]
        if pairs is None and kernel.radial:
            diag = torch.arange(n, device=Xt.device)
            self.pairs = (diag, diag)
        if store is None and fused:
            store = False
        if store is None:
            if store_bytes is None:
                store_bytes = available_memory(Xt.device) // 2
            store = n * n * Xt.element_size() <= store_bytes
        self.K = kernel_matrix(kernel, Xt, transformed=True, pairs=self.pairs, mem_bytes=mem_bytes) if store else None
        self.n_matmuls = 0
        from . import fused as _fused
        can = _fused.available(kernel, Xt.device, Xt.dtype)
        if fused and not can:
            raise RuntimeError(f"fused=True, but the fused kernel product is not available for {kernel!r} on "
                               f"{Xt.device} ({Xt.dtype}): it needs triton (the 'gpu' extra) and a CUDA device, "
                               "or TRITON_INTERPRET=1 on a CPU")
        self.fused = bool(can and not store and fused is not False)
        self._ids = (_fused.pair_ids(self.pairs, n, n, Xt.device) if self.fused and kernel.radial else None)

    @property
    def shape(self):
        return (self.Xt.shape[0], self.Xt.shape[0])

    @property
    def stored(self) -> bool:
        return self.K is not None

    def matmul(self, V: torch.Tensor) -> torch.Tensor:
        """K @ V for V of shape (n, c), in V's dtype.

        Parameters
        ----------
        V : torch.Tensor, shape (n, c)
            The vectors.

        Returns
        -------
        torch.Tensor, shape (n, c)
        """
        return self._product(V, V.dtype)

    def matmul_accurate(self, V: torch.Tensor) -> torch.Tensor:
        """K @ V with float64 accumulation (the same K entries as :meth:`matmul`), returned in float64.

        Parameters
        ----------
        V : torch.Tensor, shape (n, c)
            The vectors.

        Returns
        -------
        torch.Tensor, float64, shape (n, c)
        """
        return self._product(V, torch.float64)

    def _product(self, V, dtype):
        """K @ V computed in ``dtype``: from the stored K (converted block by block when its dtype differs) or from
        kernel blocks made on the fly."""
        self.n_matmuls += 1
        if self.fused:
            return self._fused_product(V, dtype)
        V = V.to(dtype)
        n = self.Xt.shape[0]
        if self.K is not None and self.K.dtype == dtype:
            return self.K @ V
        if self.K is not None:
            rows = max(1, (64 * 2**20) // (8 * n))
            blocks = ((sl, self.K[sl]) for sl in iter_blocks(n, rows))
        else:
            extra = V.shape[1] if dtype == self.Xt.dtype else 2 * n  # room for the converted block
            blocks = kernel_blocks(self.kernel, self.Xt, self.Xt, pairs=self.pairs, mem_bytes=self.mem_bytes,
                                   extra_cols=extra)
        out = torch.empty(n, V.shape[1], dtype=dtype, device=V.device)
        for sl, block in blocks:
            torch.mm(block.to(dtype), V, out=out[sl])
        return out

    def _fused_product(self, V, dtype):
        """K @ V by the fused kernel; with float64 asked of float32 points, V is split into two float32 parts
        (V = hi + lo, exact to ~2^-48) multiplied in one launch, so that the product is K's float32 entries times
        V with float64 accumulation, as the blocked path gives."""
        from . import fused as _fused
        c = V.shape[1]
        if dtype == torch.float64 and self.Xt.dtype == torch.float32:
            V64 = V.to(torch.float64)
            hi = V64.to(torch.float32)
            lo = (V64 - hi.to(torch.float64)).to(torch.float32)
            out = _fused.kernel_product(self.kernel, self.Xt, self.Xt, torch.cat([hi, lo], 1), ids=self._ids,
                                        out_dtype=torch.float64)
            return out[:, :c] + out[:, c:]
        return _fused.kernel_product(self.kernel, self.Xt, self.Xt, V.to(self.Xt.dtype), ids=self._ids,
                                     out_dtype=dtype)

    def columns(self, idx: torch.Tensor) -> torch.Tensor:
        """K[:, idx], shape (n, len(idx)).

        Parameters
        ----------
        idx : torch.Tensor of int64, shape (b,)
            Column indices.

        Returns
        -------
        torch.Tensor, shape (n, b)
            In the points' dtype.
        """
        if self.K is not None:
            return self.K[:, idx]
        # the columns' points against all points, K[idx, :]^T, with exact zeros where idx meets a duplicate
        idx = idx.to(self.Xt.device)
        B = pairwise_(self.kernel, self.Xt[idx], self.Xt, pairs=subset_pairs(self.pairs, idx, self.Xt.shape[0]))
        if self.kernel.uses_norms:
            xx = self.Xt.square().sum(1)
            return self.kernel.norm_values_(B, xx[idx], xx).T
        return self.kernel.values_(B).T

    def diagonal(self) -> torch.Tensor:
        """diag(K): k(x, x), 1 for the Laplace and Gaussian kernels.

        Returns
        -------
        torch.Tensor, shape (n,)
        """
        return self.kernel.diagonal_values(self.Xt.square().sum(1))


def rpcholesky(op: KernelOperator, rank: int, *, block: int = 100, generator=None, dtype=torch.float64):
    """Rank-``rank`` Nystrom factor F (n, k) with K ~ F F^T by block randomly pivoted Cholesky.

    Each round draws ``block`` pivots without replacement with probability proportional to the residual diagonal
    diag(K - F F^T), adds the block's Cholesky columns, and updates the diagonal. Columns whose pivot has vanished
    (numerically dependent) are dropped, so k may come out smaller than ``rank``.
    At ``rank = n`` the factor reproduces K (to round-off).

    Parameters
    ----------
    op : KernelOperator
        K.
    rank : int
        The target rank, 1 <= rank <= n.
    block : int, default 100
        Pivots drawn per round.
    generator : int or torch.Generator, optional
        Seed or generator of the pivot draws (0 when None).
    dtype : torch.dtype, default torch.float64
        The dtype of F.

    Returns
    -------
    F : torch.Tensor, shape (n, k)
        The factor, k <= rank.
    pivots : torch.Tensor of int64, shape (p,)
        The pivots drawn, in order.
    """
    n = op.shape[0]
    rank = int(check_number("rank", rank, low=1, high=n, integer=True))
    g = make_generator(0 if generator is None else generator)
    dev = op.Xt.device
    F = torch.zeros(n, rank, dtype=dtype, device=dev)
    d = op.diagonal().to(dtype).clone()
    scale = float(d.max()) if n else 1.0
    k, pivots = 0, []
    while k < rank:
        b = min(block, rank - k)
        weights = d.clamp_min(0).cpu()
        if not float(weights.sum()) > 1e-14 * scale * n:
            break  # the residual is numerically zero: K has rank k
        avail = int((weights > 0).sum())
        S = torch.multinomial(weights, min(b, avail), replacement=False, generator=g).to(dev)
        G = op.columns(S).to(dtype) - F[:, :k] @ F[S, :k].T  # residual columns (n, b)
        H = G[S]
        H = 0.5 * (H + H.T)
        evals, evecs = torch.linalg.eigh(H)
        keep = evals > 1e-12 * max(float(evals.max()), 1e-300) * len(S)
        if not bool(keep.any()):
            break
        # F_new = G H^{-1/2} restricted to the well-conditioned part of H (a robust block Cholesky)
        W = evecs[:, keep] / evals[keep].sqrt()
        Fn = G @ W
        m = min(Fn.shape[1], rank - k)
        F[:, k:k + m] = Fn[:, :m]
        d -= Fn[:, :m].square().sum(1)
        d.clamp_min_(0)
        d[S] = 0
        pivots.append(S)
        k += m
    return F[:, :k], (torch.cat(pivots) if pivots else torch.empty(0, dtype=torch.long, device=dev))


class NystromPreconditioner:
    """P = F F^T + reg I, applied as P^{-1} v = v / reg + U ((S^2 + reg)^{-1} - 1 / reg) U^T v (F = U S V^T).

    The SVD is computed and applied in float64: with the kernel's largest eigenvalues near n and reg = 1e-3, the
    correction U diag(coef) U^T cancels 1/reg to within reg / S^2 ~ 1e-7, below float32 round-off, so a float32 U
    makes P^{-1} indefinite (CG then diverges).

    Parameters
    ----------
    F : torch.Tensor, shape (n, k)
        A Nystrom factor (:func:`rpcholesky`); directions with S^2 <= 1e-8 reg are dropped.
    reg : float
        The ridge (> 0).

    Raises
    ------
    ValueError
        If ``reg`` is not positive.
    """

    def __init__(self, F: torch.Tensor, reg: float):
        if not reg > 0:
            raise ValueError("the Nystrom preconditioner needs reg > 0 (P = F F^T + reg I must be invertible)")
        F = F.to(torch.float64)
        # thin SVD through the k x k Gram matrix (2 n k^2 flops instead of a full SVD); directions whose singular
        # value is below sqrt(reg) * 1e-4 change P by less than 1e-8 relative and are dropped
        evals, V = torch.linalg.eigh(F.T @ F)
        keep = evals > 1e-8 * reg
        S2, V = evals[keep], V[:, keep]
        self.U = (F @ V) / S2.sqrt()
        self.reg = float(reg)
        self.coef = (S2 + reg).reciprocal() - 1.0 / reg
        self.rank = int(keep.sum())

    def apply(self, R: torch.Tensor) -> torch.Tensor:
        """P^{-1} R, computed in float64.

        Parameters
        ----------
        R : torch.Tensor, shape (n, c)
            Residuals.

        Returns
        -------
        torch.Tensor, shape (n, c)
            In R's dtype.
        """
        R64 = R.to(torch.float64)
        return (R64 / self.reg + self.U @ (self.coef[:, None] * (self.U.T @ R64))).to(R.dtype)


class ConditionEstimate(NamedTuple):
    """Extreme Ritz values of a symmetric positive definite operator after ``steps`` Lanczos steps, and their
    ratio: ``lam_max`` converges first (from below); ``lam_min`` approaches the smallest eigenvalue from above, so
    ``cond`` is a lower bound on the true condition number (exact once ``steps`` reaches the operator's size).

    Parameters
    ----------
    lam_min : float
        The smallest Ritz value (an upper bound on the smallest eigenvalue).
    lam_max : float
        The largest Ritz value (a lower bound on the largest eigenvalue).
    cond : float
        ``lam_max / lam_min``, a lower bound on the condition number.
    steps : int
        The Lanczos steps taken.
    """

    lam_min: float
    lam_max: float
    cond: float
    steps: int


def lanczos_condition(op, reg: float = 0.0, *, steps: int = 80, generator=0) -> ConditionEstimate:
    """Estimate the condition number of ``A + reg I`` by the Lanczos method (Golub & Van Loan, *Matrix
    Computations*, section 10.1), with full reorthogonalisation in float64.

    Parameters
    ----------
    op : KernelOperator or torch.Tensor
        The symmetric PSD operator A (n, n): a :class:`KernelOperator` (its products in the working dtype, as CG
        makes them) or a dense tensor.
    reg : float, default 0.0
        Ridge added to the diagonal.
    steps : int, default 80
        Lanczos steps (products with A); capped at n.
    generator : int or torch.Generator, default 0
        Seed of the random start vector.

    Returns
    -------
    ConditionEstimate
        ``lam_min`` and ``lam_max``, the smallest and largest Ritz values of the tridiagonal matrix T_k, and
        ``cond = lam_max / lam_min``: a lower bound on ``cond(A + reg I)`` that tightens with ``steps``.
    """
    check_number("reg", reg, low=0)
    check_number("steps", steps, low=1, integer=True)
    n = op.shape[0]
    steps = min(int(steps), n)
    dense = isinstance(op, torch.Tensor)
    device, work = (op.device, op.dtype) if dense else (op.Xt.device, op.Xt.dtype)
    q = torch.randn(n, 1, generator=make_generator(generator), dtype=torch.float64).to(device)
    Q = torch.empty(n, steps, dtype=torch.float64, device=device)
    alphas, betas = [], []
    q = q / q.norm()
    for j in range(steps):
        Q[:, j:j + 1] = q
        w = op.matmul(q.to(work)).to(torch.float64) + reg * q
        alphas.append(float((q * w).sum()))
        w = w - Q[:, :j + 1] @ (Q[:, :j + 1].T @ w)  # full reorthogonalisation, twice ("twice is enough")
        w = w - Q[:, :j + 1] @ (Q[:, :j + 1].T @ w)
        beta = float(w.norm())
        if j == steps - 1 or beta <= 1e-12 * max(abs(a) for a in alphas):
            break  # an invariant subspace was found: its Ritz values are exact
        betas.append(beta)
        q = w / beta
    k = len(alphas)
    T = torch.diag(torch.tensor(alphas, dtype=torch.float64))
    if k > 1:
        off = torch.tensor(betas[:k - 1], dtype=torch.float64)
        T += torch.diag(off, 1) + torch.diag(off, -1)
    ritz = torch.linalg.eigvalsh(T)
    lo, hi = float(ritz[0]), float(ritz[-1])
    return ConditionEstimate(lo, hi, hi / lo if lo > 0 else math.inf, k)


class CGInfo(NamedTuple):
    """How a PCG solve went: iterations, the final true relative residual, whether it met the tolerance, the
    final true residual R = Y - (K + reg I) alpha, and the history of relative residuals (one per iteration).

    Parameters
    ----------
    iterations : int
        CG iterations in all.
    relres : float
        The final true relative residual.
    converged : bool
        Whether ``relres <= tol``.
    residual : torch.Tensor, shape (n, c)
        The final true residual, in Y's dtype.
    history : list of float
        Relative residuals.
    """

    iterations: int
    relres: float
    converged: bool
    residual: torch.Tensor
    history: list


def pcg(op: KernelOperator, Y: torch.Tensor, reg: float, *, precond=None, tol: float = 1e-3,
        maxiter: int = 500, x0=None):
    """Solve (K + reg I) alpha = Y by preconditioned conjugate gradients, all columns at once.

    Stops when the true relative residual ``|Y - (K + reg I) alpha|_F / |Y|_F`` is at most ``tol``. CG runs with K's
    products in its own dtype and its vectors in float64; the true residual is recomputed with float64
    accumulation (:meth:`KernelOperator.matmul_accurate`) after each inner CG run, and CG restarts on it (mixed-
    precision iterative refinement). In float32 a plain CG stalls near a relative residual of a few 1e-3 and then
    diverges, because a float32 product K p is accurate to ``eps |K| |p|``, not to ``eps |K p|``, once p lies in the
    small-eigenvalue directions; each refinement step gains what the inner run reached before it stalled.

    A solve that does not converge within ``maxiter`` CG iterations in all returns its best iterate with
    ``converged=False`` (the caller decides whether to warn).

    Parameters
    ----------
    op : KernelOperator
        K.
    Y : torch.Tensor, shape (n,) or (n, c)
        Targets, finite, on the operator's device.
    reg : float
        The ridge (>= 0).
    precond : NystromPreconditioner, optional
        Applied to the residuals (None: none).
    tol : float, default 1e-3
        The relative residual to reach (> 0).
    maxiter : int, default 500
        The CG iteration budget.
    x0 : torch.Tensor, shape (n,) or (n, c), optional
        A starting point (0 when None).

    Returns
    -------
    alpha : torch.Tensor, shape of Y
        The solution, in Y's dtype.
    info : CGInfo
        How the solve went.

    Raises
    ------
    ValueError
        If Y has the wrong shape or device, or is not finite.
    """
    check_number("tol", tol, low=0, low_inclusive=False)
    check_number("maxiter", maxiter, low=1, integer=True)
    check_number("reg", reg, low=0)
    if not isinstance(Y, torch.Tensor) or Y.ndim not in (1, 2) or Y.shape[0] != op.shape[0]:
        raise ValueError(f"Y must be a tensor of shape (n,) or (n, c) with n = {op.shape[0]} (the operator's size), "
                         f"got {tuple(getattr(Y, 'shape', ()))}")
    if Y.device != op.Xt.device:
        raise ValueError(f"Y is on device {Y.device} but the operator's points are on {op.Xt.device}: move Y "
                         f"there first (Y.to({str(op.Xt.device)!r}))")
    if not bool(torch.isfinite(Y).all()):
        raise ValueError("Y contains NaN or infinite values")
    Y2 = (Y if Y.ndim == 2 else Y[:, None]).to(torch.float64)
    work = op.Xt.dtype

    def fast(V):  # products in the kernel's dtype, vectors in float64
        return op.matmul(V.to(work)).to(torch.float64).add_(V, alpha=reg)

    def true_residual(V):
        return Y2 - op.matmul_accurate(V).add_(V, alpha=reg)

    ynorm = float(Y2.norm()) or 1.0
    X = torch.zeros_like(Y2) if x0 is None else (x0 if x0.ndim == 2 else x0[:, None]).to(torch.float64).clone()
    R = true_residual(X) if x0 is not None else Y2.clone()
    relres = float(R.norm()) / ynorm
    history, its = [relres], 0
    for _ in range(20):  # refinement steps; each one restarts CG on the true residual
        if relres <= tol or its >= maxiter or not math.isfinite(relres):
            break
        inner_tol = max(0.9 * tol * ynorm / float(R.norm()), 1e-8)
        D, used, inner = _cg_run(fast, R, precond, inner_tol, maxiter - its)
        its += used
        X.add_(D)
        R = true_residual(X)
        new = float(R.norm()) / ynorm
        history += [h * relres for h in inner[1:]]
        history[-1] = new
        if new >= relres:  # no progress at all: stop rather than loop
            relres = new
            break
        relres = new
    return _shaped(X, Y), CGInfo(its, relres, relres <= tol, R.to(Y.dtype), history)


def _cg_run(A, B, precond, tol, maxiter):
    """Plain PCG for A D = B from D = 0 with per-column step sizes, stopped at relative residual ``tol`` (by the
    recursive residual), after ``maxiter`` iterations, or when it stalls (no new minimum for 15 iterations) or
    diverges (ten times its minimum). Returns the best iterate, the iterations used and the relative residuals."""
    bnorm = float(B.norm()) or 1.0
    D = torch.zeros_like(B)
    R = B.clone()
    Z = R if precond is None else precond.apply(R)
    P = Z.clone()
    rz = (R * Z).sum(0)
    best, best_res, best_it = D.clone(), 1.0, 0
    history = [1.0]
    it = 0
    for it in range(1, maxiter + 1):
        AP = A(P)
        pap = (P * AP).sum(0)
        tiny = torch.finfo(pap.dtype).tiny
        step = torch.where(pap > 0, rz / pap.clamp_min(tiny), torch.zeros_like(pap))
        D.add_(P * step)
        R.sub_(AP * step)
        res = float(R.norm()) / bnorm
        history.append(res)
        if res < best_res:
            best, best_res, best_it = D.clone(), res, it
        if res <= tol or not math.isfinite(res) or res > 10 * best_res or it - best_it >= 15:
            break
        Z = R if precond is None else precond.apply(R)
        rz_new = (R * Z).sum(0)
        beta = torch.where(rz > 0, rz_new / rz.clamp_min(tiny), torch.zeros_like(rz))
        P = Z + P * beta
        rz = rz_new
    return best, it, history


def _shaped(X, Y):
    X = X.to(Y.dtype)
    return X if Y.ndim == 2 else X[:, 0]


def default_rank(n: int) -> int:
    """The preconditioner rank used when none is given: n/20, at least 100 and at most 1,000.

    Measured on the benchmark task (d = 100, L = 10, reg 1e-3, a learnt M, n = 8000, 2-core CPU, float32): ranks
    200 / 400 / 600 / 800 took 74 / 44 / 31 / 26 CG iterations and 1.58 / 1.27 / 1.73 / 1.98 s per solve
    (preconditioner build included) against 1.86 s for Cholesky: the build cost (n k^2) outgrows the saved
    iterations above about n/20.

    Parameters
    ----------
    n : int
        The number of training points.

    Returns
    -------
    int
        ``min(n, max(100, min(1000, n // 20)))``.
    """
    return int(min(n, max(100, min(1000, n // 20))))


class CGSolver:
    """Kernel ridge regression by preconditioned CG, as a solver strategy for the estimators (``solver="cg"``).

    Parameters
    ----------
    tol : float, default 1e-3
        Relative residual to reach. 1e-3 kept the RFM loop's test MSE within 0.05 % of the exact solve in the
        research prototype (``shared/research/solvers_at_scale.md``, section 2.4).
    rank : int or None, default None
        Rank of the RPCholesky preconditioner (None: :func:`default_rank`; 0: no preconditioner).
    maxiter : int, default 500
        CG iteration budget; not converging within it is a ``RuntimeWarning`` (the residual is recorded).
    store : bool or None, default None
        Store K when it fits in memory (None), always (True) or never (False: blocks on the fly).
    block : int, default 100
        Pivots drawn per RPCholesky round.
    seed : int, default 0
        Seed of the pivot draws.
    fused : bool or None, default None
        Products of an unstored K by the fused Triton kernel (see :class:`KernelOperator`; None: when available).
    """

    def __init__(self, tol=1e-3, rank=None, maxiter=500, store=None, block=100, seed=0, fused=None):
        self.tol, self.rank, self.maxiter, self.store, self.fused = tol, rank, maxiter, store, fused
        self.block, self.seed = block, seed
        check_number("tol", tol, low=0, low_inclusive=False)
        if rank is not None:
            check_number("rank", rank, low=0, integer=True)
        check_number("maxiter", maxiter, low=1, integer=True)
        self.last_info = None

    def solve(self, kernel, Xt, Y, reg, *, pairs=None, mem_bytes=None) -> SolveResult:
        """Solve (K + reg I) alpha = Y by :func:`pcg` with an RPCholesky-Nystrom preconditioner.

        A solve that does not converge warns (``RuntimeWarning``): with K stored it falls back to a Cholesky solve of
        it, else it returns the inexact iterate.

        Parameters
        ----------
        kernel : Kernel
            The kernel.
        Xt : torch.Tensor, shape (n, r)
            The transformed training points.
        Y : torch.Tensor, shape (n,) or (n, c)
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
            ``info`` holds "cg_iters", "cg_relres", "precond_rank", "K_stored" and "K_fused"; ``K`` the stored kernel
            matrix, if any.

        Raises
        ------
        ValueError
            If ``reg`` is not positive.
        """
        n = Xt.shape[0]
        if not reg > 0:
            raise ValueError("solver='cg' needs reg > 0 (with reg = 0 the system may be singular); use "
                             "solver='cholesky' for interpolation")
        op = KernelOperator(kernel, Xt, pairs=pairs, mem_bytes=mem_bytes, store=self.store, fused=self.fused)
        rank = default_rank(n) if self.rank is None else min(int(self.rank), n)
        precond = None
        if rank > 0:
            F, _ = rpcholesky(op, rank, block=self.block, generator=self.seed)
            precond = NystromPreconditioner(F, reg) if F.shape[1] else None
        alpha, info = pcg(op, Y, reg, precond=precond, tol=self.tol, maxiter=self.maxiter)
        self.last_info = info
        record = {"cg_iters": info.iterations, "cg_relres": info.relres,
                  "precond_rank": 0 if precond is None else precond.rank, "K_stored": op.stored,
                  "K_fused": op.fused}
        if not info.converged:
            what = (f"CG did not reach the relative residual {self.tol:g} in {info.iterations} iterations (reached "
                    f"{info.relres:.3g}; n={n}, reg={reg:g}, preconditioner rank {rank})")
            if op.stored:  # the exact solve is at hand: use it rather than a bad iterate
                warnings.warn(f"{what}; falling back to a Cholesky solve of the stored K. Raise maxiter or the "
                              "preconditioner rank to stay iterative.", RuntimeWarning, stacklevel=3)
                alpha, method = solve_krr(op.K, Y, reg, overwrite=True, check_symmetric=False)
                return SolveResult(alpha, f"cg->{method}", None if method == "lstsq" else Y - reg * alpha,
                                   info=record)
            warnings.warn(f"{what}. The solution is inexact (its residual is in the history); raise maxiter or the "
                          "preconditioner rank.", RuntimeWarning, stacklevel=3)
        R = info.residual if Y.ndim == 2 else info.residual[:, 0]
        return SolveResult(alpha, "cg", Y - reg * alpha - R, info=record, K=op.K)

    def __repr__(self):
        return f"CGSolver(tol={self.tol!r}, rank={self.rank!r}, maxiter={self.maxiter!r})"
