"""Coincident points: which evaluation points *are* centres, found by comparing rows exactly.

Radial kernels need to know where an evaluation point z_j equals a centre x_i: the distance there must be exactly 0
(not a float32 round-off of ``|z|^2 + |x|^2 - 2 z.x``), and the gradient weight k'(r)/r is set to 0 (for the Laplace
kernel with q <= 1 it has a cusp; 0 is the convention of the RFM papers). Doing it by index, never by a distance
threshold, avoids the fp32 cancellation errors of threshold masking (up to 45 % AGOP error at training points in
the public codes; see ``shared/research/rfm_code.md``).
"""
from __future__ import annotations

import torch


def row_ids(*mats: torch.Tensor):
    """Integer ids such that two rows (of any of the matrices) get the same id iff they are exactly equal.

    Parameters
    ----------
    *mats : torch.Tensor, shape (n_k, d)
        Matrices with the same number of columns, on one device.

    Returns
    -------
    tuple of torch.Tensor of int64, shapes (n_k,)
        One id tensor per matrix.
    """
    sizes = [m.shape[0] for m in mats]
    _, inv = torch.unique(torch.cat([m.detach() for m in mats]), dim=0, return_inverse=True)
    return torch.split(inv, sizes)


def coincident_pairs(z_ids: torch.Tensor, x_ids: torch.Tensor):
    """All (j, i) with ``z_ids[j] == x_ids[i]``, as two index tensors sorted by j: the pairs of identical points.

    Parameters
    ----------
    z_ids : torch.Tensor of int64, shape (m,)
        Row ids of the evaluation points (:func:`row_ids`).
    x_ids : torch.Tensor of int64, shape (n,)
        Row ids of the centres, on the same device.

    Returns
    -------
    rows, cols : torch.Tensor of int64, shape (p,)
        The p pairs: row j of Z and row i of X, sorted by j.
    """
    order = torch.argsort(x_ids)
    xs = x_ids[order]
    left = torch.searchsorted(xs, z_ids, right=False)
    counts = torch.searchsorted(xs, z_ids, right=True) - left
    rows = torch.repeat_interleave(torch.arange(z_ids.shape[0], device=z_ids.device), counts)
    starts = torch.repeat_interleave(left, counts)
    offsets = (torch.arange(rows.shape[0], device=z_ids.device)
               - torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts))
    return rows, order[starts + offsets]


def find_pairs(Z: torch.Tensor, X: torch.Tensor | None = None):
    """The coincident (row of Z, row of X) pairs; ``X=None`` means Z against itself (the diagonal and duplicates).

    Parameters
    ----------
    Z : torch.Tensor, shape (m, d)
        Evaluation points.
    X : torch.Tensor, shape (n, d), optional
        Centres (None: Z).

    Returns
    -------
    rows, cols : torch.Tensor of int64, shape (p,)
        As in :func:`coincident_pairs`.
    """
    if X is None:
        ids = row_ids(Z)[0]
        return coincident_pairs(ids, ids)
    return coincident_pairs(*row_ids(Z, X))


def block_pairs(pairs, sl: slice):
    """The coincident pairs whose row lies in the block ``sl``, with rows relative to the block start.

    Parameters
    ----------
    pairs : tuple of torch.Tensor or None
        (rows, cols) sorted by row, as :func:`coincident_pairs` returns them.
    sl : slice
        A block of rows, with integer start and stop.

    Returns
    -------
    tuple of torch.Tensor or None
        (rows - sl.start, cols) of the pairs in the block; None when ``pairs`` is None.
    """
    if pairs is None:
        return None
    rows, cols = pairs
    lo, hi = torch.searchsorted(rows, torch.tensor([sl.start, sl.stop], device=rows.device)).tolist()
    return rows[lo:hi] - sl.start, cols[lo:hi]


def subset_pairs(pairs, idx: torch.Tensor, n_rows: int):
    """The pairs of the rows ``idx`` (in that order) of a set whose pairs are ``pairs``, renumbered 0..len(idx)-1.

    Parameters
    ----------
    pairs : tuple of torch.Tensor or None
        (rows, cols) of the whole set.
    idx : torch.Tensor of int64, shape (k,)
        Distinct rows kept.
    n_rows : int
        The number of rows of the whole set.

    Returns
    -------
    tuple of torch.Tensor or None
        (new rows, cols) sorted by new row; None when ``pairs`` is None.
    """
    if pairs is None:
        return None
    rows, cols = pairs
    pos = torch.full((n_rows,), -1, dtype=torch.long, device=rows.device)
    pos[idx.to(rows.device)] = torch.arange(idx.shape[0], device=rows.device)
    new_rows = pos[rows]
    keep = new_rows >= 0
    new_rows, new_cols = new_rows[keep], cols[keep]
    order = torch.argsort(new_rows, stable=True)
    return new_rows[order], new_cols[order]
