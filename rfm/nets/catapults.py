r"""Catapults in GD and SGD, on top of :mod:`rfm.nets.dynamics`: multi-stage GD, mini-batch SGD, the network's AGOP.

Zhu, Liu, Radhakrishnan & Belkin ("Catapults in SGD", arXiv 2306.04815) read the spikes in the training loss of SGD
as catapults, locate them in the top eigendirections of the tangent kernel, and measure their effect on feature
learning by the alignment of the network's AGOP with the AGOP of the target. This module adds, for the two-layer
ReLU network of :mod:`rfm.nets.dynamics` (same parametrisation, same loss L = (1/2n) sum_i r_i^2):

* :func:`multi_stage_gd` -- full-batch GD in stages; every stage after the first re-measures the sharpness
  lambda = lambda_max(K)/n and sets eta = c_raise * 2 / lambda, above the current stability edge, so that each
  raise can trigger one more catapult;
* :func:`two_layer_sgd` -- mini-batch SGD (batches drawn without replacement each epoch), recording the full-batch
  training loss after every step, for :func:`rfm.nets.dynamics.count_spikes`;
* :func:`two_layer_input_gradients` and :func:`two_layer_agop` -- the input gradients of the network in closed form,
  grad_x f = U^T (v * relu'(U x / sqrt(d))) / sqrt(md), and its AGOP (1/n) sum_i grad f(x_i) grad f(x_i)^T (equal to
  ``rfm.agop`` of the network, which the tests check); the alignment with a target's EGOP is then
  ``rfm.matrix_correlation(G, G_star, kind="cosine")``.

The share of the residual in the top-k tangent-kernel eigendirections is
:func:`rfm.nets.dynamics.residual_in_top_eigenspace`.
"""
from __future__ import annotations

import math

import torch

from .._checks import check_number
from ..utils import make_generator
from . import dynamics as dyn


def _half_mse(U, v, X, y):
    r = dyn._features("network", U, v, U, v, X)[0] - y
    return 0.5 * float(r @ r) / r.shape[0]


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
    final ``U``, ``v``. A diverged stage ends the run."""
    check_number("stages", stages, low=1, integer=True)
    check_number("steps", steps, low=1, integer=True)
    check_number("c_first", c_first, low=0, low_inclusive=False)
    check_number("c_raise", c_raise, low=0, low_inclusive=False)
    X, y, X_test, y_test = dyn._check_data(U0, v0, X, y, X_test, y_test)
    U, v = U0.clone(), v0.clone()
    losses, starts, lrs, lam_starts, lams, tests, params, diverged = [], [], [], [], [], [], [], False
    for s in range(stages):
        lam = dyn.sharpness(dyn.two_layer_ntk("network", U, v, U, v, X))
        lr = dyn.lr_for_sharpness(c_first if s == 0 else c_raise, lam)
        rec = dyn.two_layer_gd("network", X, y, U, v, lr=lr, steps=steps, kernel_every=kernel_every,
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
            tests.append(_half_mse(U, v, X_test, y_test))
    return {"loss": losses, "stage_starts": starts, "lrs": lrs, "sharpness_start": lam_starts, "sharpness": lams,
            "test": tests, "params": params, "diverged": diverged, "U": U, "v": v}


def two_layer_sgd(X, y, U0, v0, *, lr: float, batch_size: int, epochs: int, generator=0, X_test=None,
                  y_test=None, blowup: float = 1e8, max_steps: int | None = None) -> dict:
    """Mini-batch SGD on the two-layer network from (U0, v0), on L_B = (1/2b) sum_{i in B} r_i^2.

    Each epoch draws a random permutation of the n training points (``generator`` seeds it) and takes
    ceil(n / batch_size) steps on consecutive batches (the last one may be smaller). ``batch_size = n`` is
    full-batch GD, step for step equal to :func:`rfm.nets.dynamics.two_layer_gd`. Returns a dict with ``loss``
    (the full-batch training loss before each step and after the last), ``steps``, ``diverged`` (the full-batch
    loss passed ``blowup`` times its initial value or became non-finite; the run stops there), ``test`` (the
    final test loss, None without test data or after divergence) and the final ``U``, ``v``. ``max_steps`` stops the
    run after that many steps, with the batches of the whole run (to replay a run up to a step of interest)."""
    check_number("lr", lr, low=0, low_inclusive=False)
    check_number("epochs", epochs, low=1, integer=True)
    check_number("blowup", blowup, low=1, low_inclusive=False)
    if max_steps is not None:
        check_number("max_steps", max_steps, low=0, integer=True)
    X, y, X_test, y_test = dyn._check_data(U0, v0, X, y, X_test, y_test)
    n, (m, d) = X.shape[0], U0.shape
    check_number("batch_size", batch_size, low=1, high=n, integer=True)
    g = make_generator(generator)
    U, v = U0.clone(), v0.clone()
    losses, diverged = [_half_mse(U, v, X, y)], False

    def stop():
        return max_steps is not None and len(losses) - 1 >= max_steps

    for _ in range(epochs):
        order = torch.randperm(n, generator=g).to(X.device)
        for i in range(0, n, batch_size):
            if stop():
                break
            idx = order[i:i + batch_size]
            Xb, rb_y = X[idx], y[idx]
            out, Fv, Cu = dyn._features("network", U, v, U, v, Xb)
            r = out - rb_y
            b = Xb.shape[0]
            U = U - (lr / (b * math.sqrt(m * d))) * ((Cu * r[:, None]).T @ Xb)
            v = v - (lr / (b * math.sqrt(m))) * (Fv.T @ r)
            loss = _half_mse(U, v, X, y)
            losses.append(loss)
            if not math.isfinite(loss) or loss > blowup * max(losses[0], 1e-300):
                diverged = True
                break
        if diverged or stop():
            break
    test = _half_mse(U, v, X_test, y_test) if X_test is not None and not diverged else None
    return {"loss": losses, "steps": len(losses) - 1, "diverged": diverged, "test": test, "U": U, "v": v}


def two_layer_input_gradients(U, v, X) -> torch.Tensor:
    """The gradients grad_x f (n, d) of the two-layer network f(x) = v^T relu(U x / sqrt(d)) / sqrt(m) at the rows
    of X, in closed form: U^T (v * relu'(U x / sqrt(d))) / sqrt(md)."""
    X = dyn._check_two_layer(U, v, U, v, X)
    m, d = U.shape
    D = (X @ U.T > 0).to(X.dtype)                      # relu'(u_i^T x / sqrt(d)), (n, m)
    return (D * v) @ U / math.sqrt(m * d)


def two_layer_agop(U, v, X) -> torch.Tensor:
    """The AGOP (1/n) sum_i grad_x f(x_i) grad_x f(x_i)^T (d, d) of the two-layer network at the rows of X."""
    G = two_layer_input_gradients(U, v, X)
    return G.T @ G / G.shape[0]
