r"""Two Dirichlet classes on the unit sphere and their Bayes classifier (the data of Radhakrishnan, Belkin and Uhler,
"Wide and deep neural networks achieve consistency for classification", PNAS 2023).

A point of class +1 is a draw s ~ Dirichlet(``alpha_pos``) on the probability simplex of R^d, one of class -1 a
draw from Dirichlet(``alpha_neg``); the input is s / ``||s||_2``, a point of the positive orthant of the unit
sphere S^{d-1}. As in ``dataset.py`` of the authors' code (``uhlerlab/inf_depth_ntks``), the class sizes are fixed,
``int(n * prior)`` points of class +1 and the rest of class -1, and the points are then shuffled.

The map s -> s / ``||s||_2`` is inverted by x -> x / sum(x), so the Bayes classifier needs only the sphere point:
it predicts +1 where ``prior`` p_pos(s) > (1 - ``prior``) p_neg(s), with p the two Dirichlet densities (the map's
Jacobian is the same for both classes and cancels).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from .._checks import check_matrix, check_number


class DirichletSphere(NamedTuple):
    """Points on the sphere ``X`` (n, d), labels ``y`` (n,) in {+1, -1} (float64), and the settings.

    Parameters
    ----------
    X : torch.Tensor, float64, shape (n, d)
        The points.
    y : torch.Tensor, float64, shape (n,)
        +1 or -1.
    alpha_pos : tuple of float
        The Dirichlet parameters of class +1.
    alpha_neg : tuple of float
        The Dirichlet parameters of class -1.
    prior : float
        The share of class +1.
    """

    X: torch.Tensor
    y: torch.Tensor
    alpha_pos: tuple
    alpha_neg: tuple
    prior: float


def _alphas(alpha_pos, alpha_neg):
    a = torch.as_tensor(alpha_pos, dtype=torch.float64).reshape(-1)
    b = torch.as_tensor(alpha_neg, dtype=torch.float64).reshape(-1)
    if a.numel() < 2 or a.shape != b.shape:
        raise ValueError(f"alpha_pos and alpha_neg must have the same length d >= 2, got {a.numel()} and {b.numel()}")
    if not (torch.isfinite(a).all() and torch.isfinite(b).all() and (a > 0).all() and (b > 0).all()):
        raise ValueError("alpha_pos and alpha_neg must be finite and positive")
    return a, b


def dirichlet_sphere(n: int, alpha_pos, alpha_neg, prior: float = 0.5, *, generator=0) -> DirichletSphere:
    """``n`` points of two Dirichlet classes, normalised onto the unit sphere (see :mod:`rfm.data.dirichlet`).

    ``int(n * prior)`` points have label +1 (Dirichlet(``alpha_pos``)), the rest -1; the order is shuffled by
    ``generator`` (an integer seed or a ``numpy.random.Generator``, which draws the Dirichlet points with
    numpy's sampler). Split the result into training and test points by slicing.

    Parameters
    ----------
    n : int
        Points.
    alpha_pos, alpha_neg : array-like of float, shape (d,)
        Positive Dirichlet parameters of the two classes, d >= 2.
    prior : float, default 0.5
        The share of class +1, in [0, 1].
    generator : int or numpy.random.Generator, default 0
        The random source.

    Returns
    -------
    DirichletSphere

    Raises
    ------
    ValueError
        If the alphas differ in length, have fewer than two entries, or are not positive and finite.
    TypeError
        If ``generator`` is neither an int nor a numpy Generator.

    Examples
    --------
    >>> from rfm.data.dirichlet import dirichlet_sphere
    >>> data = dirichlet_sphere(5, [1, 2], [2, 1], prior=0.4, generator=0)
    >>> data.X.shape, int((data.y > 0).sum())
    (torch.Size([5, 2]), 2)
    """
    n = int(check_number("n", n, low=1, integer=True))
    prior = float(check_number("prior", prior, low=0, high=1))
    a, b = _alphas(alpha_pos, alpha_neg)
    if isinstance(generator, bool) or not isinstance(generator, (int, np.integer, np.random.Generator)):
        raise TypeError(f"generator must be an integer seed or a numpy Generator, got {type(generator).__name__}")
    rng = np.random.default_rng(generator)
    n_pos = int(n * prior)
    S = torch.from_numpy(np.concatenate([rng.dirichlet(a.numpy(), size=n_pos),
                                         rng.dirichlet(b.numpy(), size=n - n_pos)]))
    X = S / S.norm(dim=1, keepdim=True)
    y = torch.cat([torch.ones(n_pos, dtype=torch.float64), -torch.ones(n - n_pos, dtype=torch.float64)])
    perm = torch.from_numpy(rng.permutation(n))
    return DirichletSphere(X[perm], y[perm], tuple(a.tolist()), tuple(b.tolist()), prior)


def dirichlet_log_density(X, alpha) -> torch.Tensor:
    """log of the Dirichlet(``alpha``) density at the simplex points x / sum(x) of the sphere points ``X`` (n, d).

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, d)
        Points in the positive orthant.
    alpha : array-like of float, shape (d,)
        Dirichlet parameters.

    Returns
    -------
    torch.Tensor, float64, shape (n,)

    Raises
    ------
    ValueError
        If alpha does not have d entries or X has a negative entry.
    """
    X = check_matrix(X, "X", dtype=torch.float64)
    a = torch.as_tensor(alpha, dtype=torch.float64, device=X.device).reshape(-1)
    if a.numel() != X.shape[1]:
        raise ValueError(f"alpha has {a.numel()} entries but X has {X.shape[1]} columns")
    if (X < 0).any():
        raise ValueError("X must lie in the positive orthant (Dirichlet points normalised onto the sphere)")
    S = X / X.sum(1, keepdim=True)
    return torch.distributions.Dirichlet(a).log_prob(S.clamp_min(1e-300))


def bayes_dirichlet(X, alpha_pos, alpha_neg, prior: float = 0.5) -> torch.Tensor:
    """The Bayes classifier's labels (+1 / -1, float64) at the sphere points ``X`` (see :mod:`rfm.data.dirichlet`).

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, d)
        Sphere points in the positive orthant.
    alpha_pos, alpha_neg : array-like of float, shape (d,)
        The classes' Dirichlet parameters.
    prior : float, default 0.5
        The share of class +1, in (0, 1).

    Returns
    -------
    torch.Tensor, float64, shape (n,)
        +1 where the posterior of class +1 is larger, else -1.

    Examples
    --------
    >>> import torch
    >>> from rfm.data.dirichlet import bayes_dirichlet
    >>> X = torch.tensor([[0.9, 0.1], [0.1, 0.9]], dtype=torch.float64)
    >>> bayes_dirichlet(X / X.norm(dim=1, keepdim=True), [1, 2], [2, 1], prior=0.4)
    tensor([-1.,  1.], dtype=torch.float64)
    """
    prior = float(check_number("prior", prior, low=0, high=1, low_inclusive=False, high_inclusive=False))
    a, b = _alphas(alpha_pos, alpha_neg)
    lp = dirichlet_log_density(X, a) + torch.log(torch.tensor(prior, dtype=torch.float64))
    ln = dirichlet_log_density(X, b) + torch.log(torch.tensor(1 - prior, dtype=torch.float64))
    return torch.where(lp > ln, 1.0, -1.0).to(torch.float64)
