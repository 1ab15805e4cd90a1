r"""Sparse parities: y = x_{s_1} XOR ... XOR x_{s_k} on uniformly random bits.

The input is a uniformly random point of the hypercube, coded as ``"pm1"`` (x in {-1, +1}^d, label the product
prod_{s in S} x_s in {-1, +1}) or ``"01"`` (x in {0, 1}^d, label the XOR in {0, 1}); the support S is a set of k of
the d coordinates. Every function of fewer than k coordinates, and every coordinate alone, is uncorrelated with the
label, which is what makes the task hard for a fixed kernel and gives the sharp transition in n of feature-learning
methods.
"""
from __future__ import annotations

import torch

from .._checks import check_choice, check_number, resolve_dtype
from ..utils import make_generator

#: The input codes of :func:`sparse_parity`.
ENCODINGS = ("pm1", "01")


def parity_support(d: int, k: int, *, generator=0) -> list[int]:
    """A support of k distinct coordinates of d, drawn uniformly and sorted.

    Parameters
    ----------
    d : int
        The dimension.
    k : int
        The support size, 1 <= k <= d.
    generator : int or torch.Generator, default 0
        Seeds the draw.

    Returns
    -------
    list of int
    """
    check_number("d", d, low=1, integer=True)
    check_number("k", k, low=1, high=d, integer=True)
    return sorted(torch.randperm(int(d), generator=make_generator(generator))[: int(k)].tolist())


def sparse_parity(n: int, d: int, support, *, encoding: str = "pm1", generator=0, dtype="float64"):
    """``n`` uniformly random points of the hypercube in dimension ``d`` and their parity on ``support`` (a list of
    distinct coordinates): with ``"pm1"`` X in {-1, +1} and y = prod X[:, S]; with ``"01"`` X in {0, 1} and
    y = XOR = sum X[:, S] mod 2.

    Parameters
    ----------
    n : int
        Points.
    d : int
        Dimension.
    support : sequence of int
        Distinct coordinates in [0, d).
    encoding : {"pm1", "01"}, default "pm1"
        The encoding.
    generator : int or torch.Generator, default 0
        Seeds the points.
    dtype : str or torch.dtype, default "float64"
        The dtype of X and y.

    Returns
    -------
    X : torch.Tensor, shape (n, d)
    y : torch.Tensor, shape (n,)

    Raises
    ------
    ValueError
        If the support is empty, repeats a coordinate or leaves [0, d).

    Examples
    --------
    >>> from rfm.data.parity import sparse_parity
    >>> X, y = sparse_parity(4, 5, [0, 2])
    >>> bool((y == X[:, 0] * X[:, 2]).all())
    True
    """
    check_number("n", n, low=1, integer=True)
    check_number("d", d, low=1, integer=True)
    check_choice("encoding", encoding, ENCODINGS)
    S = [int(s) for s in support]
    if not S:
        raise ValueError("support is empty; give at least one coordinate")
    if len(set(S)) != len(S):
        raise ValueError(f"support has repeated coordinates: {support!r}")
    if min(S) < 0 or max(S) >= d:
        raise ValueError(f"support coordinates must be in 0..{d - 1}, got {support!r}")
    bits = torch.randint(0, 2, (int(n), int(d)), generator=make_generator(generator), dtype=torch.int64)
    dtype = resolve_dtype(dtype)
    if encoding == "01":
        return bits.to(dtype), (bits[:, S].sum(1) % 2).to(dtype)
    X = (2 * bits - 1).to(dtype)
    return X, X[:, S].prod(1)


def support_recovered(diag_M, support) -> bool:
    """Whether the k largest entries of diag(M) (a vector, or a square M) are exactly the support (k = len(support)).

    Parameters
    ----------
    diag_M : array-like or torch.Tensor, shape (d,) or (d, d)
        diag(M), or M.
    support : sequence of int
        The coordinates.

    Returns
    -------
    bool
    """
    m = torch.as_tensor(diag_M)
    m = m.diagonal() if m.ndim == 2 else m
    k = len(support)
    top = torch.topk(m.to(torch.float64), k).indices.tolist()
    return sorted(top) == sorted(int(s) for s in support)
