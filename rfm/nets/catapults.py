r"""Catapults in GD: full-batch gradient descent in stages, each raising the learning rate above the stability edge.

Zhu, Liu, Radhakrishnan & Belkin ("Catapults in SGD", arXiv 2306.04815) read the spikes in the training loss of SGD
as catapults, locate them in the top eigendirections of the tangent kernel, and measure their effect on feature
learning by the alignment of the network's AGOP with the AGOP of the target. For the two-layer ReLU network of
:mod:`rfm.nets.two_layer` (same parametrisation, same loss L = (1/2n) sum_i r_i^2), :func:`multi_stage_gd` runs
full-batch GD in stages; every stage after the first re-measures the sharpness lambda = lambda_max(K)/n and sets
eta = c_raise * 2 / lambda, above the current stability edge, so that each raise can trigger one more catapult.

The network's mini-batch SGD (:func:`~rfm.nets.two_layer.two_layer_sgd`), input gradients and AGOP
(:func:`~rfm.nets.two_layer.two_layer_agop`; the alignment with a target's EGOP is then
``rfm.matrix_correlation(G, G_star, kind="cosine")``) are in :mod:`rfm.nets.two_layer` and importable from here
too; the spikes are counted by :func:`rfm.nets.dynamics.count_spikes`, and the share of the residual in the top-k
tangent-kernel eigendirections is :func:`rfm.nets.tangent_kernel.residual_in_top_eigenspace`.
"""
from __future__ import annotations

import torch

from .._checks import check_number
from ..utils import make_generator
from .tangent_kernel import lr_for_sharpness, residual_in_top_eigenspace, sharpness

# the two-layer network's SGD and AGOP live with the network; their names stay importable from here
from .two_layer import (
    check_data,
    two_layer_agop,
    two_layer_gd,
    two_layer_input_gradients,
    two_layer_loss,
    two_layer_ntk,
    two_layer_outputs,
    two_layer_sgd,
)

__all__ = ["batches_above_edge", "multi_stage_gd", "residual_shares", "two_layer_agop", "two_layer_input_gradients",
           "two_layer_sgd"]


def multi_stage_gd(X, y, U0, v0, *, stages: int, steps: int, c_first: float, c_raise: float, X_test=None,
                   y_test=None, kernel_every: int = 0, blowup: float = 1e8) -> dict:
    """Full-batch GD on the two-layer network in ``stages`` stages of ``steps`` steps each.

    Stage 1 uses eta = c_first * 2 / lambda_0 (lambda_0 the sharpness at (U0, v0)); every later stage measures the
    sharpness lambda at its start and uses eta = c_raise * 2 / lambda (c_raise > 1: above the stability edge, a
    catapult can follow). Returns a dict: ``loss`` (the training loss before each step and after the last, one
    sequence over all stages), ``stage_starts`` (the index in ``loss`` where each stage starts), ``lrs``,
    ``sharpness_start`` (lambda at the start of each stage) and ``sharpness`` [(step, lambda)] (every
    ``kernel_every`` steps of each stage, and at each stage's start and end), ``test`` (the test loss at the end
    of each stage, when test data are given), ``params`` [(U, v)] at the end of each stage, ``diverged`` and the
    final ``U``, ``v``. A diverged stage ends the run.

    Parameters
    ----------
    X : array-like, shape (n, d)
        Training inputs.
    y : array-like, shape (n,)
        Training targets.
    U0, v0 : torch.Tensor
        The two-layer network's initial weights (as in :func:`rfm.nets.two_layer.two_layer_gd`).
    stages : int
        Stages (>= 1).
    steps : int
        Steps per stage (>= 1).
    c_first : float
        The first stage's step, in units of 2 / lambda_0 (> 0).
    c_raise : float
        The later stages' step, in units of 2 / lambda (> 0).
    X_test, y_test : array-like, optional
        Test data.
    kernel_every : int, default 0
        Sharpness every this many steps (0: only at stage boundaries).
    blowup : float, default 1e8
        Divergence threshold, as in :func:`rfm.nets.two_layer.two_layer_gd`.

    Returns
    -------
    dict
        As described above.
    """
    check_number("stages", stages, low=1, integer=True)
    check_number("steps", steps, low=1, integer=True)
    check_number("c_first", c_first, low=0, low_inclusive=False)
    check_number("c_raise", c_raise, low=0, low_inclusive=False)
    X, y, X_test, y_test = check_data(U0, v0, X, y, X_test, y_test)
    U, v = U0.clone(), v0.clone()
    losses, starts, lrs, lam_starts, lams, tests, params, diverged = [], [], [], [], [], [], [], False
    for s in range(stages):
        lam = sharpness(two_layer_ntk("network", U, v, U, v, X))
        lr = lr_for_sharpness(c_first if s == 0 else c_raise, lam)
        rec = two_layer_gd("network", X, y, U, v, lr=lr, steps=steps, kernel_every=kernel_every,
                               blowup=blowup)
        offset = len(losses) - (1 if losses else 0)       # a stage's first loss is the previous stage's last
        starts.append(offset)
        losses.extend(rec["loss"] if not losses else rec["loss"][1:])
        lrs.append(lr)
        lam_starts.append(lam)
        lams.extend((offset + t, value) for t, value in rec["sharpness"])
        U, v = rec["U"], rec["v"]
        params.append((U, v))
        if rec["diverged"]:
            diverged = True
            break
        if X_test is not None:
            tests.append(two_layer_loss(U, v, X_test, y_test))
    return {"loss": losses, "stage_starts": starts, "lrs": lrs, "sharpness_start": lam_starts, "sharpness": lams,
            "test": tests, "params": params, "diverged": diverged, "U": U, "v": v}


def residual_shares(U, v, X, y, ks) -> tuple[float, dict]:
    """The training loss of the two-layer network and the share of its residual in the top-k eigendirections of its
    current tangent kernel, for each k.

    Parameters
    ----------
    U, v : torch.Tensor
        The network's weights, shapes (m, d) and (m,).
    X : torch.Tensor of shape (n, d)
        The training inputs.
    y : torch.Tensor of shape (n,)
        The targets.
    ks : iterable of int
        The numbers of top eigendirections.

    Returns
    -------
    loss : float
        L = (1/2n) sum_i r_i^2.
    shares : dict of int to float
        k -> :func:`rfm.nets.tangent_kernel.residual_in_top_eigenspace` of the residual r = f(X) - y.
    """
    K = two_layer_ntk("network", U, v, U, v, X)
    r = two_layer_outputs("network", U, v, U, v, X) - y
    return 0.5 * float(r @ r) / len(y), {k: residual_in_top_eigenspace(K, r, k) for k in ks}


def batches_above_edge(U, v, X, batch_sizes, lr: float, *, draws: int = 200, generator=0) -> dict:
    """The share of random mini-batches whose own sharpness lambda_max(K_B)/b exceeds the stability edge 2/lr.

    Parameters
    ----------
    U, v : torch.Tensor
        The network's weights.
    X : torch.Tensor of shape (n, d)
        The training inputs the batches are drawn from (without replacement).
    batch_sizes : iterable of int
        The batch sizes, drawn in this order from one stream.
    lr : float
        The learning rate.
    draws : int, default=200
        Batches per size.
    generator : int or torch.Generator, default=0
        The stream of the batches.

    Returns
    -------
    dict of int to float
        Batch size -> share of its batches above the edge.
    """
    g = make_generator(generator)
    out = {}
    for b in batch_sizes:
        hits = 0
        for _ in range(draws):
            idx = torch.randperm(len(X), generator=g)[:b].to(X.device)
            hits += sharpness(two_layer_ntk("network", U, v, U, v, X[idx])) > 2 / lr
        out[b] = hits / draws
    return out
