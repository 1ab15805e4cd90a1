r"""Kernel ridge regression: the kernel matrix in blocks, and the linear solve.

The predictor is f(z) = sum_i alpha_i k_M(z, x_i) with (K + reg I) alpha = Y. ``reg = 0`` asks for interpolation
(the grokking paper's setting). The solve is a Cholesky factorisation; when K + reg I is not numerically positive
definite (reg = 0 with near-duplicate points, or float32 round-off) it falls back to an LU solve, then to least
squares, and says so with a ``RuntimeWarning``; the method used is returned so that a model can record it.
"""
from __future__ import annotations

import warnings

import torch

from ._checks import check_number
from .kernels import (FeatureMatrix, Kernel, block_pairs, block_rows, coincident_pairs, default_mem_bytes, iter_blocks,
                      pairwise_, row_ids)


def kernel_matrix(kernel: Kernel, X: torch.Tensor, Z: torch.Tensor | None = None, fm: FeatureMatrix | None = None,
                  *, transformed: bool = False, pairs=None, mem_bytes: int | None = None) -> torch.Tensor:
    """K_ij = k_M(x_i, z_j) as an (n, m) matrix, computed in place block by block (the only n x m memory is K).
    With ``transformed=True`` X and Z are already L^T x.

    Coincident pairs get distance exactly 0 in radial kernels: ``pairs`` (from
    :func:`rfm.kernels.coincident_pairs`) names them; without it they are found by comparing the rows (when not
    transformed) or, for K(X, X), taken to be the diagonal."""
    if kernel.radial and pairs is None:
        if not transformed:
            pairs = coincident_pairs(*(row_ids(X) * 2 if Z is None else row_ids(X, Z)))
        elif Z is None:
            diag = torch.arange(X.shape[0], device=X.device)
            pairs = (diag, diag)
    if not transformed and fm is not None:
        X = fm.transform(X)
        Z = None if Z is None else fm.transform(Z)
    Z = X if Z is None else Z
    mem = default_mem_bytes(X.device) if mem_bytes is None else mem_bytes
    xx, zz = X.square().sum(1), Z.square().sum(1)
    K = torch.empty(X.shape[0], Z.shape[0], dtype=X.dtype, device=X.device)
    rows = block_rows(Z.shape[0], Z.shape[0], X.element_size(), mem)
    for sl in iter_blocks(X.shape[0], rows):
        kernel.values_(pairwise_(kernel, X[sl], Z, zz=xx[sl], xx=zz, pairs=block_pairs(pairs, sl), out=K[sl]))
    return K


def _relative_residual(A, alpha, Y):
    return float((A @ alpha - Y).norm() / Y.norm().clamp_min(torch.finfo(Y.dtype).tiny))


def solve_krr(K: torch.Tensor, Y: torch.Tensor, reg: float = 0.0, *, overwrite: bool = False):
    """Solve (K + reg I) alpha = Y. Returns ``(alpha, method)`` with method in {"cholesky", "lu", "lstsq"}.

    With ``overwrite=True`` K is modified in place (its diagonal gets ``reg``), which saves an n x n copy."""
    check_number("reg", reg, low=0)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be square, got shape {tuple(K.shape)}")
    if Y.shape[0] != K.shape[0]:
        raise ValueError(f"Y has {Y.shape[0]} rows but K is {K.shape[0]} x {K.shape[0]}")
    A = K if overwrite else K.clone()
    if reg:
        A.diagonal().add_(reg)
    Y2 = Y if Y.ndim == 2 else Y[:, None]
    L, info = torch.linalg.cholesky_ex(A)
    if int(info) == 0:
        alpha = torch.cholesky_solve(Y2, L)
        if bool(torch.isfinite(alpha).all()):
            return (alpha if Y.ndim == 2 else alpha[:, 0]), "cholesky"
    del L
    warnings.warn(
        f"K + reg*I (n={A.shape[0]}, reg={reg:g}, {A.dtype}) is not numerically positive definite; falling back "
        "from Cholesky to an LU solve. A larger reg or dtype=float64 avoids this.", RuntimeWarning, stacklevel=2)
    alpha, info = torch.linalg.solve_ex(A, Y2)
    # LU "succeeds" on a numerically singular matrix (no pivot exactly 0) with a useless answer: check the residual.
    tol = 1e-6 if A.dtype == torch.float64 else 1e-3
    if int(info) == 0 and bool(torch.isfinite(alpha).all()) and _relative_residual(A, alpha, Y2) < tol:
        return (alpha if Y.ndim == 2 else alpha[:, 0]), "lu"
    warnings.warn(
        f"K + reg*I (n={A.shape[0]}, reg={reg:g}) is singular; using the minimum-norm least-squares solution.",
        RuntimeWarning, stacklevel=2)
    if A.device.type == "cpu":
        alpha = torch.linalg.lstsq(A, Y2, driver="gelsd").solution
    else:  # CUDA's lstsq needs a full-rank matrix
        alpha = torch.linalg.pinv(A, hermitian=True) @ Y2
    return (alpha if Y.ndim == 2 else alpha[:, 0]), "lstsq"
