r"""Linearised Barlow Twins, learned one mode at a time.

Simon, Knutins, Ziyin, Geisz, Fetterman & Albrecht (ICML 2023): two views (:func:`two_view_data`), the cross-view
matrix Gamma (:func:`cross_view_matrix`) and gradient descent on ||W Gamma W^T - I||_F^2 from a small
initialisation (:func:`linear_barlow_twins`), with the predicted per-mode onsets :func:`barlow_twins_onsets` (each
mode a logistic curve, :func:`rfm.nets.curves.logistic_onset`).

Gradient descent here is the closed-form update W <- W - 4 lr (C - I) W Gamma, not :func:`rfm.nets.training.fit`
(no network, no autograd). Time in the closed forms is ``lr * step``.
"""
from __future__ import annotations

import math

import torch

from .._checks import check_matrix, check_number, check_square
from ..utils import check_generator, symmetrize
from .curves import logistic_onset

__all__ = ["barlow_twins_onsets", "cross_view_matrix", "linear_barlow_twins", "two_view_data"]


def two_view_data(n: int, spectrum, d: int, *, noise: float = 0.5, nuisance: float = 0.0, generator=0) -> dict:
    """Two augmented views of n points: a latent z ~ N(0, diag(spectrum^2)) in a random orthonormal basis Q of R^d
    (len(spectrum) <= d), plus independent view noise: isotropic with std ``noise`` and, along one more random
    unit direction v orthogonal to Q's columns, std ``nuisance``. So the cross-view covariance is Q diag(s^2) Q^T
    while each view's covariance adds noise^2 I + nuisance^2 v v^T. Returns {"X1", "X2", "Q", "v"}.

    Parameters
    ----------
    n : int
        Points (>= 2).
    spectrum : array-like of float
        The latent standard deviations, fewer than d.
    d : int
        The dimension (>= 2).
    noise : float, default 0.5
        Isotropic view-noise std.
    nuisance : float, default 0.0
        Std along the nuisance direction.
    generator : int or torch.Generator, default 0
        Seeds the draws.

    Returns
    -------
    dict
        "X1", "X2" float64 (n, d), "Q" (d, len(spectrum)), "v" (d,).
    """
    check_number("n", n, low=2, integer=True)
    check_number("d", d, low=2, integer=True)
    s = torch.as_tensor(spectrum, dtype=torch.float64).reshape(-1)
    if s.numel() >= d:
        raise ValueError(f"spectrum must have fewer than d = {d} values (one direction is kept for the nuisance)")
    check_number("noise", noise, low=0)
    check_number("nuisance", nuisance, low=0)
    g = check_generator(generator)
    Qfull, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    Q, v = Qfull[:, :s.numel()], Qfull[:, s.numel()]
    Z = torch.randn(n, s.numel(), generator=g, dtype=torch.float64) * s
    views = []
    for _ in range(2):
        E = noise * torch.randn(n, d, generator=g, dtype=torch.float64)
        E = E + nuisance * torch.randn(n, 1, generator=g, dtype=torch.float64) * v
        views.append(Z @ Q.T + E)
    return {"X1": views[0], "X2": views[1], "Q": Q, "v": v}


def cross_view_matrix(X1, X2) -> torch.Tensor:
    """Gamma = (X1^T X2 + X2^T X1) / (2 n) of the centred views: the matrix whose top eigenvectors linear Barlow
    Twins learns.

    Parameters
    ----------
    X1, X2 : array-like, shape (n, d)
        The two views of the same points.

    Returns
    -------
    torch.Tensor, float64, shape (d, d)
        Symmetric.
    """
    X1, X2 = check_matrix(X1, "X1", dtype=torch.float64), check_matrix(X2, "X2", dtype=torch.float64)
    if X1.shape != X2.shape:
        raise ValueError(f"X1 and X2 must have the same shape (two views of the same points), got "
                         f"{tuple(X1.shape)} and {tuple(X2.shape)}")
    X1, X2 = X1 - X1.mean(0), X2 - X2.mean(0)
    return symmetrize(X1.T @ X2) / X1.shape[0]


def linear_barlow_twins(X1, X2, k: int, *, init_scale: float = 1e-4, lr: float = 1e-3, steps: int = 5000,
                        record_every: int = 10, generator=0) -> dict:
    """Gradient descent on the linear Barlow Twins loss ||W Gamma W^T - I_k||_F^2, W (k, d) from N(0, s^2 / d)
    (s = ``init_scale``), Gamma = :func:`cross_view_matrix` (the symmetrised cross-correlation of the embeddings
    of the two views is C = W Gamma W^T). Returns {"W", "W0", "Gamma", "steps", "loss", "eig_C"} with the loss and
    the eigenvalues of C (descending, (T, k)) every ``record_every`` steps.

    Parameters
    ----------
    X1, X2 : array-like, shape (n, d)
        The two views.
    k : int
        Embedding dimension, 1 <= k <= d.
    init_scale : float, default 1e-4
        s (> 0).
    lr : float, default 1e-3
        The learning rate.
    steps : int, default 5000
        Steps.
    record_every : int, default 10
        Steps between records.
    generator : int or torch.Generator, default 0
        Seeds the draws.

    Returns
    -------
    dict
        As described above; W and W0 are float64 (k, d).
    """
    G = cross_view_matrix(X1, X2)
    d = G.shape[0]
    check_number("k", k, low=1, high=d, integer=True)
    check_number("init_scale", init_scale, low=0, low_inclusive=False)
    check_number("lr", lr, low=0, low_inclusive=False)
    check_number("steps", steps, low=0, integer=True)
    check_number("record_every", record_every, low=1, integer=True)
    W0 = torch.randn(k, d, generator=check_generator(generator), dtype=torch.float64) * (init_scale / math.sqrt(d))
    W, I = W0.clone(), torch.eye(k, dtype=torch.float64)
    rec_steps, losses, eigs = [], [], []
    for s in range(steps + 1):
        C = symmetrize(W @ G @ W.T)
        if s % record_every == 0 or s == steps:
            rec_steps.append(s)
            losses.append(float((C - I).square().sum()))
            eigs.append(torch.linalg.eigvalsh(C).flip(0))
        if s == steps:
            break
        W = W - lr * 4 * (C - I) @ W @ G
        if not bool(torch.isfinite(W).all()):
            raise FloatingPointError(f"linear_barlow_twins diverged at step {s}; lower lr (now {lr})")
    return {"W": W, "W0": W0, "Gamma": G, "steps": rec_steps, "loss": torch.tensor(losses),
            "eig_C": torch.stack(eigs)}


def barlow_twins_onsets(Gamma, W0, k: int, lr: float, fraction: float = 0.5) -> list[float]:
    """Predicted steps at which the top ``k`` modes of linear Barlow Twins reach ``fraction`` of 1: mode j's
    eigenvalue c = gamma_j ||W u_j||^2 follows dc/dt = 8 gamma_j c (1 - c) (:func:`logistic_onset` with rate
    8 gamma_j, c0 from W0), t = lr * step; modes are taken as uncoupled.

    Parameters
    ----------
    Gamma : array-like, shape (d, d)
        The symmetric cross-view matrix (:func:`cross_view_matrix`).
    W0 : array-like, shape (k', d)
        The initial weights.
    k : int
        Modes, 1 <= k <= d.
    lr : float
        The learning rate (> 0).
    fraction : float, default 0.5
        The level, in (0, 1).

    Returns
    -------
    list of float
        One predicted step per mode, by decreasing eigenvalue.

    Raises
    ------
    ValueError
        If one of the top k eigenvalues of Gamma is not positive.
    """
    G = check_square(Gamma, "Gamma", symmetric=True).to(torch.float64)
    W0 = check_matrix(W0, "W0", dtype=torch.float64)
    check_number("k", k, low=1, high=G.shape[0], integer=True)
    check_number("lr", lr, low=0, low_inclusive=False)
    lam, U = torch.linalg.eigh(G)
    lam, U = lam.flip(0)[:k], U.flip(1)[:, :k]
    if bool((lam <= 0).any()):
        raise ValueError("a mode with a non-positive eigenvalue of Gamma is never learned")
    c0 = lam * (W0 @ U).square().sum(0)
    return [logistic_onset(8 * float(l), float(c), 1.0, fraction) / lr for l, c in zip(lam, c0)]
