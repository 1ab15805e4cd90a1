r"""Untrained controls for the Neural Feature Ansatz: networks with a trained layer's spectrum but random directions.

For one hidden layer the AGOP with respect to the input is W^T K W (K: the pre-activation tangent covariance, see
:mod:`rfm.nets.alignment`), so W^T W and AGOP^{1/2} share W's row space and are correlated for *any* W whose
singular values are spread unevenly: a random network whose first layer already points at two coordinates scores
as high as a trained one. A claim that training produced the correlation must therefore beat a network with the
same singular values in random directions, evaluated identically:

* :func:`spectrum_matched_weights` -- U' diag(s) V'^T with s the singular values of W and U', V' Haar-random
  (``sides="both"``), or only the left (``"left"``: W'^T W' = W^T W, the NFM is kept) or right (``"right"``:
  W' W'^T = W W^T) singular vectors redrawn;
* :func:`column_norm_matched_weights` -- Gaussian directions with W's column norms: the diagonal of W^T W is kept
  exactly (on images, the pixel support), everything else is random;
* :func:`matched_network` -- a copy of a trained :class:`rfm.nets.MLP` with one layer's weights replaced by one of
  the two; every other layer, and the network's recorded initial weights, are unchanged;
* :func:`matched_nfa` -- corr(NFM_l, AGOP_l^power) of such networks, computed as :func:`rfm.nets.nfa_table`
  computes the trained value, for several random draws.
"""
from __future__ import annotations

import copy

import torch

from .._checks import check_choice, check_number, to_tensor
from ..core.feature_matrix import feature_update
from ..metrics import matrix_correlation
from ..utils import make_generator
from .alignment import haar_orthogonal
from .mlp import KINDS, MLP, check_mlp, layer_agop, nfm

#: What :func:`matched_network` keeps of the trained layer: its singular values, or its column norms.
MATCHES = ("spectrum", "column_norms")
#: Which singular vectors :func:`spectrum_matched_weights` redraws.
SIDES = ("both", "left", "right")


def _weight_matrix(W) -> torch.Tensor:
    W = to_tensor(W, "W").detach()
    if W.ndim != 2:
        raise ValueError(f"W must be a 2-D weight matrix (k_out, k_in), got shape {tuple(W.shape)}")
    if not W.is_floating_point():
        W = W.to(torch.float64)
    if not bool(torch.isfinite(W).all()):
        raise ValueError(f"W contains {int((~torch.isfinite(W)).sum())} NaN or infinite value(s)")
    return W


def spectrum_matched_weights(W, generator=0, *, sides: str = "both") -> torch.Tensor:
    """A matrix with exactly W's singular values and Haar-random singular vectors (same shape, dtype, device).

    With W = U diag(s) V^T (thin SVD, r = min(k_out, k_in) values), the result is U' diag(s) V'^T where U' and V'
    are the first r columns of independent Haar-random orthogonal matrices (:func:`rfm.nets.alignment.haar_orthogonal`,
    uniform on the Stiefel manifold). ``sides="left"`` redraws only U (so W'^T W' = W^T W), ``"right"`` only V
    (W' W'^T = W W^T). The computation is in float64; ``generator`` is a seed or a CPU ``torch.Generator``.

    Parameters
    ----------
    W : torch.Tensor, shape (k_out, k_in)
        A weight matrix.
    generator : int or torch.Generator, default 0
        Seeds the draws.
    sides : {"both", "left", "right"}, default "both"
        Which singular vectors are redrawn.

    Returns
    -------
    torch.Tensor, shape (k_out, k_in)
        In W's dtype and device.
    """
    check_choice("sides", sides, SIDES)
    W = _weight_matrix(W)
    g = make_generator(generator)
    W64 = W.to(torch.float64).cpu()
    U, s, Vh = torch.linalg.svd(W64, full_matrices=False)
    r = s.shape[0]
    if sides in ("both", "left"):
        U = haar_orthogonal(W64.shape[0], g)[:, :r]
    V = Vh.T
    if sides in ("both", "right"):
        V = haar_orthogonal(W64.shape[1], g)[:, :r]
    return ((U * s) @ V.T).to(dtype=W.dtype, device=W.device)


def column_norm_matched_weights(W, generator=0) -> torch.Tensor:
    """Independent Gaussian columns rescaled to W's column norms: diag(W'^T W') = diag(W^T W) exactly, the
    directions are random (a zero column stays zero). Same shape, dtype and device as W.

    Parameters
    ----------
    W : torch.Tensor, shape (k_out, k_in)
        A weight matrix.
    generator : int or torch.Generator, default 0
        Seeds the draws.

    Returns
    -------
    torch.Tensor, shape (k_out, k_in)
        In W's dtype and device.
    """
    W = _weight_matrix(W)
    g = make_generator(generator)
    W64 = W.to(torch.float64).cpu()
    R = torch.randn(W64.shape, generator=g, dtype=torch.float64)
    return (R / R.norm(dim=0) * W64.norm(dim=0)).to(dtype=W.dtype, device=W.device)


def matched_network(model: MLP, layer: int = 0, generator=0, *, match: str = "spectrum",
                    sides: str = "both") -> MLP:
    """A copy of ``model`` whose layer ``layer`` has random weights matched to the trained ones.

    ``match="spectrum"``: :func:`spectrum_matched_weights` (``sides`` as there); ``"column_norms"``:
    :func:`column_norm_matched_weights`. The other layers and biases are the trained ones, so the copy is evaluated
    exactly like the trained network (same inputs h_l to the layer, same read-out); ``model`` is not changed.

    Parameters
    ----------
    model : MLP
        The trained network.
    layer : int, default 0
        The layer redrawn.
    generator : int or torch.Generator, default 0
        Seeds the draws.
    match : {"spectrum", "column_norms"}, default "spectrum"
        What the random weights keep.
    sides : {"both", "left", "right"}, default "both"
        As in :func:`spectrum_matched_weights`.

    Returns
    -------
    MLP
        A new network.
    """
    check_mlp(model)
    model._check_layer(layer)
    check_choice("match", match, MATCHES)
    check_choice("sides", sides, SIDES)
    net = copy.deepcopy(model)
    W = net.weight(layer).detach()
    W_new = spectrum_matched_weights(W, generator, sides=sides) if match == "spectrum" else \
        column_norm_matched_weights(W, generator)
    with torch.no_grad():
        net.layers[layer].weight.copy_(W_new)
    return net


def matched_nfa(model: MLP, X, layer: int = 0, *, draws: int = 5, generator=0, match: str = "spectrum",
                sides: str = "both", power: float = 0.5, kind: str = "pearson", diagonal: bool = False,
                batch_size: int | None = None) -> list[float]:
    """corr(NFM_l, AGOP_l^power) for ``draws`` networks of :func:`matched_network`, at the data X.

    Each value is computed as the ``trained`` column of :func:`rfm.nets.nfa_table`: ``nfm(net, layer)`` against
    ``feature_update(layer_agop(net, X, layer), power)``, correlated by :func:`rfm.matrix_correlation` (``kind``);
    ``diagonal`` correlates the two diagonals only. The draws use one generator (a seed or ``torch.Generator``).

    Parameters
    ----------
    model : MLP
        The trained network.
    X : array-like or torch.Tensor, shape (n, d)
        The data.
    layer : int, default 0
        The layer.
    draws : int, default 5
        Matched networks (>= 1).
    generator : int or torch.Generator, default 0
        Seeds the draws.
    match, sides
        As in :func:`matched_network`.
    power : float, default 0.5
        The AGOP's power (> 0).
    kind : {"pearson", "cosine"}, default "pearson"
        The correlation.
    diagonal : bool, default False
        Correlate the diagonals only.
    batch_size : int, optional
        Rows per backward pass of the AGOP.

    Returns
    -------
    list of float
        One correlation per draw.
    """
    check_number("draws", draws, low=1, integer=True)
    check_number("power", power, low=0, low_inclusive=False)
    check_choice("kind", kind, KINDS)
    g = make_generator(generator)
    out = []
    for _ in range(draws):
        net = matched_network(model, layer, g, match=match, sides=sides)
        F = nfm(net, layer)
        G = feature_update(layer_agop(net, X, layer, batch_size=batch_size), power)
        if diagonal:
            F, G = F.diagonal(), G.diagonal()
        out.append(matrix_correlation(F, G, kind))
    return out
