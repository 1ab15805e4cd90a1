r"""Kernel ridge regression: (K + reg I) alpha = Y, the direct solves.

The predictor is f(z) = sum_i alpha_i k_M(z, x_i). ``reg = 0`` asks for interpolation (the grokking paper's
setting). :func:`solve_krr` solves one system given K. A *solver* (:func:`rfm.core.solvers.get_solver`) is what an
estimator calls once per RFM iteration: it receives the kernel and the transformed training points and returns a
:class:`SolveResult`, so that a solver that never forms K (an iterative one) slots in beside the direct ones.

Direct solves: a Cholesky factorisation; when K + reg I is not numerically positive definite (reg = 0 with
near-duplicate points, or float32 round-off) it falls back to an LU solve, then to least squares, and says so with
a ``RuntimeWarning``; the method used is recorded.
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import torch

from .._checks import check_choice, check_number
from .kernels import kernel_matrix

DIRECT_METHODS = ("cholesky", "lu", "lstsq")
_NONFINITE_K = ("K contains NaN or infinite values (kernel values overflowed? check the feature scale against the "
                "bandwidth)")


def _relative_residual(A, alpha, Y):
    return float((A @ alpha - Y).norm() / Y.norm().clamp_min(torch.finfo(Y.dtype).tiny))


def solve_krr(K: torch.Tensor, Y: torch.Tensor, reg: float = 0.0, *, overwrite: bool = False,
              method: str = "cholesky", check_symmetric: bool = True):
    """Solve (K + reg I) alpha = Y for a symmetric PSD kernel matrix K.

    Parameters
    ----------
    K : torch.Tensor, shape (n, n)
        Symmetric kernel matrix (finite).
    Y : torch.Tensor, shape (n,) or (n, c)
    reg : float, default 0.0
        Ridge (>= 0).
    overwrite : bool, default False
        Modify K in place (its diagonal gets ``reg``), which saves an n x n copy.
    method : {"cholesky", "lu", "lstsq"}, default "cholesky"
        The first method tried; Cholesky falls back to LU, LU to least squares, each with a ``RuntimeWarning``.
    check_symmetric : bool, default True
        Refuse a K that is not symmetric to 1e-5 of its largest entry (a cross-kernel passed by mistake). The
        estimators build K themselves and skip it: float32 distances of far-from-origin points break exact
        symmetry at about that level, and Cholesky reads one triangle only.

    Returns
    -------
    alpha : torch.Tensor, the shape of Y
    method : str, the method that produced it

    Examples
    --------
    >>> import torch
    >>> from rfm import solve_krr
    >>> solve_krr(torch.eye(2, dtype=torch.float64), torch.tensor([1.0, 2.0], dtype=torch.float64), 1.0)
    (tensor([0.5000, 1.0000], dtype=torch.float64), 'cholesky')
    """
    check_number("reg", reg, low=0)
    check_choice("method", method, DIRECT_METHODS)
    if not isinstance(K, torch.Tensor) or not isinstance(Y, torch.Tensor):
        raise TypeError(f"K and Y must be torch tensors, got {type(K).__name__} and {type(Y).__name__}")
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be square (n, n), got shape {tuple(K.shape)}")
    if Y.ndim not in (1, 2) or Y.shape[0] != K.shape[0]:
        raise ValueError(f"Y must have shape (n,) or (n, c) with n = {K.shape[0]} rows (the size of K), "
                         f"got shape {tuple(Y.shape)}")
    if not K.is_floating_point() or K.dtype != Y.dtype or K.device != Y.device:
        raise TypeError(f"K and Y must be floating tensors of one dtype on one device, got {K.dtype} on {K.device} "
                        f"and {Y.dtype} on {Y.device}")
    if not bool(torch.isfinite(Y).all()):
        raise ValueError("Y contains NaN or infinite values")
    if check_symmetric:  # two n x n passes: skipped by the estimators, which build K themselves
        if not bool(torch.isfinite(K).all()):
            raise ValueError(_NONFINITE_K)
        scale = float(K.abs().max()) if K.numel() else 0.0
        if scale > 0 and float((K - K.T).abs().max()) > 1e-5 * scale:
            raise ValueError("K must be symmetric (|K - K^T| is more than 1e-5 of max|K|): kernel ridge "
                             "regression solves with K(X, X), not a cross-kernel K(X, Z)")
    A = K if overwrite else K.clone()
    if reg:
        A.diagonal().add_(reg)
    Y2 = Y if Y.ndim == 2 else Y[:, None]

    def shaped(alpha):
        return alpha if Y.ndim == 2 else alpha[:, 0]

    if method == "cholesky":
        L, info = torch.linalg.cholesky_ex(A)
        if int(info) == 0:
            alpha = torch.cholesky_solve(Y2, L)
            if bool(torch.isfinite(alpha).all()):
                return shaped(alpha), "cholesky"
        del L
        if not bool(torch.isfinite(A).all()):
            raise ValueError(_NONFINITE_K)
        warnings.warn(
            f"K + reg*I (n={A.shape[0]}, reg={reg:g}, {A.dtype}) is not numerically positive definite; falling "
            "back from Cholesky to an LU solve. A larger reg or dtype=float64 avoids this.", RuntimeWarning,
            stacklevel=2)
        method = "lu"
    if method == "lu":
        if not bool(torch.isfinite(A).all()):
            raise ValueError(_NONFINITE_K)
        alpha, info = torch.linalg.solve_ex(A, Y2)
        # LU "succeeds" on a numerically singular matrix (no pivot exactly 0) with a useless answer: check it.
        tol = 1e-6 if A.dtype == torch.float64 else 1e-3
        if int(info) == 0 and bool(torch.isfinite(alpha).all()) and _relative_residual(A, alpha, Y2) < tol:
            return shaped(alpha), "lu"
        warnings.warn(
            f"K + reg*I (n={A.shape[0]}, reg={reg:g}) is singular; using the minimum-norm least-squares solution.",
            RuntimeWarning, stacklevel=2)
    if A.device.type == "cpu":
        alpha = torch.linalg.lstsq(A, Y2, driver="gelsd").solution
    else:  # CUDA's lstsq needs a full-rank matrix
        alpha = torch.linalg.pinv(A, hermitian=True) @ Y2
    return shaped(alpha), "lstsq"


class SolveResult(NamedTuple):
    """What a solver returns: the coefficients, the method used, and the training predictions f(X) when the solve
    gives them for free (an exact solve: f(X) = Y - reg alpha), else None (then they are computed).

    Parameters
    ----------
    alpha : torch.Tensor, shape (n, c)
        The coefficients.
    method : str
        The method that solved (e.g. "cholesky", "lstsq", "cg").
    train_pred : torch.Tensor, shape (n, c), or None
        f(X) when the solve gives it.
    info : dict or None, default None
        Extra numbers for the history (iterations, residual, ...).
    K : torch.Tensor, shape (n, n), or None, default None
        K(X, X) when the solver kept it intact (the AGOP can reuse it).
    """

    alpha: torch.Tensor
    method: str
    train_pred: torch.Tensor | None
    info: dict | None = None  # extra numbers for the history (iterations, residual, ...)
    K: torch.Tensor | None = None  # K(X, X) when the solver kept it intact (the AGOP can reuse it)


class DirectSolver:
    """Form K_M(X, X) in blocks (one n x n matrix) and factor it (:func:`solve_krr`).

    Parameters
    ----------
    method : {"cholesky", "lu", "lstsq"}, default "cholesky"
    """

    def __init__(self, method: str = "cholesky"):
        self.method = check_choice("method", method, DIRECT_METHODS)

    def solve(self, kernel, Xt: torch.Tensor, Y: torch.Tensor, reg: float, *, pairs=None,
              mem_bytes: int | None = None) -> SolveResult:
        """Solve (K_M(X, X) + reg I) alpha = Y, given the transformed training points ``Xt`` (x~ = L^T x) and
        their coincident pairs (the diagonal and duplicated rows).

        Parameters
        ----------
        kernel : Kernel
            The kernel.
        Xt : torch.Tensor, shape (n, r)
            The transformed training points.
        Y : torch.Tensor, shape (n, c)
            The targets.
        reg : float
            The ridge (>= 0).
        pairs : tuple of index tensors, optional
            Coincident pairs of the training points.
        mem_bytes : int, optional
            Working-memory budget of the kernel blocks.

        Returns
        -------
        SolveResult
            alpha (n, c) by :func:`solve_krr`; ``train_pred`` = Y - reg alpha except after a least-squares fallback.
        """
        K = kernel_matrix(kernel, Xt, transformed=True, pairs=pairs, mem_bytes=mem_bytes)
        alpha, method = solve_krr(K, Y, reg, overwrite=True, method=self.method, check_symmetric=False)
        del K
        return SolveResult(alpha, method, None if method == "lstsq" else Y - reg * alpha)

    def __repr__(self):
        return f"DirectSolver(method={self.method!r})"
