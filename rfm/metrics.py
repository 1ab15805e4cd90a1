"""Comparisons between matrices and simple prediction metrics.

The NFA papers compare a neural feature matrix with a power of the AGOP by a correlation of the flattened matrices.
Two forms are in use, and a chapter should say which one it asserts on:

* ``"pearson"``: subtract each matrix's mean entry, then take the cosine (Radhakrishnan et al., Science 2024;
  ``verify_deep_NFA.py`` in their code);
* ``"cosine"``: the uncentred cosine <A, B>_F / (|A|_F |B|_F) (used in the convolutional NFA code and in
  "Feature learning as alignment").
"""
from __future__ import annotations

import torch

from ._checks import check_choice, check_number
from .utils import top_eigenvectors


def _as_float_tensor(A, name):
    A = torch.as_tensor(A)
    if not A.is_floating_point():
        A = A.to(torch.float64)
    return A


def matrix_correlation(A, B, kind: str = "pearson") -> float:
    """Correlation of two matrices of the same shape, flattened: ``"pearson"`` (mean-centred) or ``"cosine"``."""
    check_choice("kind", kind, ("pearson", "cosine"))
    A = _as_float_tensor(A, "A").detach()
    B = _as_float_tensor(B, "B").detach().to(device=A.device)
    if A.shape != B.shape:
        raise ValueError(f"A and B must have the same shape, got {tuple(A.shape)} and {tuple(B.shape)}")
    a = A.reshape(-1).to(torch.float64)
    b = B.reshape(-1).to(torch.float64)
    if kind == "pearson":
        a = a - a.mean()
        b = b - b.mean()
    na, nb = a.norm(), b.norm()
    if na == 0 or nb == 0:
        raise ValueError(f"correlation is undefined: one matrix is {'constant' if kind == 'pearson' else 'zero'}")
    return float((a @ b) / (na * nb))


def subspace_overlap(U, V) -> float:
    """How much of span(V) lies in span(U): ``|P_U V|_F^2 / k`` for orthonormal bases (d, k_U) and (d, k).

    It is 1 when span(V) is inside span(U) and k / d on average for a random k-dimensional V."""
    U = torch.linalg.qr(_as_float_tensor(U, "U").to(torch.float64))[0]
    V = torch.linalg.qr(_as_float_tensor(V, "V").to(torch.float64))[0]
    if U.shape[0] != V.shape[0]:
        raise ValueError(f"U and V must have the same number of rows, got {U.shape[0]} and {V.shape[0]}")
    return float((U.T @ V).square().sum() / V.shape[1])


def top_eigenspace_overlap(M, coordinates, k: int | None = None) -> float:
    """Overlap of the top-``k`` eigenvectors of ``M`` with the span of the given coordinate axes.

    ``k`` defaults to the number of coordinates, e.g. ``top_eigenspace_overlap(M, [0, 1])`` asks whether the top-2
    eigenspace of M is span(e1, e2)."""
    M = _as_float_tensor(M, "M").detach().to(torch.float64).cpu()
    coordinates = list(coordinates)
    k = len(coordinates) if k is None else check_number("k", k, low=1, integer=True)
    E = torch.zeros(M.shape[0], len(coordinates), dtype=torch.float64)
    E[coordinates, range(len(coordinates))] = 1.0
    return subspace_overlap(E, top_eigenvectors(M, k))


def mse(y, y_pred) -> float:
    y, y_pred = torch.as_tensor(y), torch.as_tensor(y_pred)
    return float((y.reshape(y_pred.shape).to(y_pred.dtype) - y_pred).square().mean())


def r2_score(y, y_pred) -> float:
    """Coefficient of determination, averaged uniformly over output columns (scikit-learn's default)."""
    y = torch.as_tensor(y).detach().to(torch.float64)
    y_pred = torch.as_tensor(y_pred).detach().to(torch.float64).reshape(y.shape)
    if y.ndim == 1:
        y, y_pred = y[:, None], y_pred[:, None]
    ss_res = (y - y_pred).square().sum(0)
    ss_tot = (y - y.mean(0)).square().sum(0)
    r2 = torch.where(ss_tot > 0, 1 - ss_res / ss_tot.clamp_min(1e-300), torch.zeros_like(ss_tot))
    return float(r2.mean())


def accuracy(y, y_pred) -> float:
    y, y_pred = torch.as_tensor(y), torch.as_tensor(y_pred)
    return float((y.reshape(-1) == y_pred.reshape(-1)).to(torch.float64).mean())
