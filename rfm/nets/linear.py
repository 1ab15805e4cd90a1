r"""Deep linear networks, the network baselines of lin-RFM (:mod:`rfm.models.linear`).

* :func:`deep_linear_completion` -- matrix completion by a deep linear network (deep matrix factorisation; Arora,
  Cohen, Hu & Luo 2019): an :class:`rfm.nets.MLP` with linear activations and no biases maps the one-hot code of
  column j to column j of the completion, so that the completion is the product of its weight matrices; Adam on
  the squared error of the observed entries, from a small initialisation (which biases the product towards low
  rank);
* :func:`diagonal_network_regression` -- sparse regression by a deep *diagonal* linear network w = u^L - v^L
  (Woodworth, Gunasekar, Lee, Moroshko, Savarese, Golan, Soudry & Srebro 2020), trained by full-batch gradient
  descent from a small initialisation (the "rich" regime, biased towards sparse interpolants).

Both train through the package's one training loop, :func:`rfm.nets.training.fit`, for a fixed number of steps or,
with ``train_tol``, until the relative training residual is at most ``train_tol`` (``steps`` then a cap; the answer
says how many steps were taken, the residual reached and whether it converged), and take NumPy arrays or torch
tensors and answer in the same kind (torch in, torch out).
"""
from __future__ import annotations

import time

import torch

from .._checks import (
    as_input_kind,
    check_eval_target,
    check_iterations,
    check_number,
    check_observed,
    check_regression_data,
    check_vector,
    is_numpy,
)
from ..utils import make_generator
from .mlp import MLP
from .training import fit, num_threads

__all__ = ["deep_linear_completion", "diagonal_network_regression"]


def _relative_error(A: torch.Tensor, B: torch.Tensor) -> float:
    return float(torch.linalg.norm(A) / torch.linalg.norm(B).clamp_min(1e-300))


def _check_train_tol(train_tol):
    return None if train_tol is None else check_number("train_tol", train_tol, low=0.0, low_inclusive=False)


def _train_recorded(opt, loss_at, record, hist_tr, *, steps, eval_every, train_tol, threads):
    """The shared loop of the two baselines: :func:`rfm.nets.training.fit` for at most ``steps`` steps, ``record()``
    at step 0, every ``eval_every`` steps and at the last, each appending the relative training residual to
    ``hist_tr``; with ``train_tol``, stop at the first record whose residual is at most ``train_tol``. The seconds
    of training (the time spent in ``loss_at`` and the update, not in the records) accumulate in the returned clock,
    which ``loss_at`` starts by :func:`time.perf_counter` into ``clock["t0"]``.

    Returns ``(steps_taken, converged)``: ``converged`` is None without ``train_tol``."""
    clock = {"elapsed": 0.0, "t0": 0.0}

    def timed_loss(t):
        clock["t0"] = time.perf_counter()
        return loss_at(t)

    def after_step(t, loss):
        clock["elapsed"] += time.perf_counter() - clock["t0"]
        if t % eval_every == 0 or t == steps:
            record(clock["elapsed"])
            return train_tol is not None and hist_tr[-1] <= train_tol
        return False

    with num_threads(threads):
        record(0.0)
        taken = 0
        if train_tol is None or hist_tr[-1] > train_tol:
            taken = fit(opt, timed_loss, steps, callback=after_step, diverged=None)
    return taken, (None if train_tol is None else bool(hist_tr[-1] <= train_tol))


def deep_linear_completion(Y, mask, *, depth: int = 3, width: int | None = None, init_scale: float = 0.1,
                           lr: float = 1e-3, steps: int = 3000, seed=0, eval_every: int = 100, Y_eval=None,
                           eval_mask=None, threads: int | None = None, train_tol: float | None = None):
    """The deep linear network baseline for matrix completion (deep matrix factorisation; Arora, Cohen, Hu & Luo
    2019): an :class:`rfm.nets.MLP` with linear activations and no biases, ``depth`` layers of ``width`` (default
    the number of columns d) units, maps the one-hot code of column j to column j of the completion, so that the
    completion is the product of its ``depth`` weight matrices. Adam on the squared error of the observed entries
    only, from weights N(0, init_scale^2 / fan_in) (a small ``init_scale`` biases the product towards low rank).

    Parameters
    ----------
    Y : array-like
        (n, d) matrix; only the entries where ``mask`` is True are read.
    mask : array-like
        True (or 1) where Y is observed.
    depth, width : int
        The number of layers and of units per hidden layer (default d).
    init_scale, lr : float
        The initial weights' scale and Adam's learning rate.
    steps : int
        The number of Adam steps (the cap, with ``train_tol``).
    seed : int or torch.Generator
        The initial weights' seed.
    eval_every : int
        Record every this many steps (and at the last; first at step 0).
    Y_eval, eval_mask : array-like, optional
        The truth and the entries to score (default: the unobserved ones), for reporting only.
    threads : int, optional
        torch CPU threads during training.
    train_tol : float, optional
        Stop at the first record (step 0, every ``eval_every`` steps) whose relative training residual is at most
        ``train_tol``; ``steps`` is then a cap. None (default): run all ``steps`` steps.

    Returns
    -------
    dict
        ``"Y"`` the completion at the last record (same kind as Y), ``"steps"`` (the steps taken), ``"train_error"``
        and ``"eval_error"`` (relative errors on the observed entries and, with ``Y_eval``, on ``eval_mask``, at the
        records), ``"time"`` (cumulative seconds of training at the records), ``"train_residual"`` (the last
        training error) and ``"converged"`` (whether it is at most ``train_tol``; None without ``train_tol``).
    """
    Yt, m, numpy_out = check_observed(Y, mask)
    depth = int(check_number("depth", depth, low=1, integer=True))
    n, d = Yt.shape
    width = d if width is None else int(check_number("width", width, low=1, integer=True))
    init_scale = check_number("init_scale", init_scale, low=0.0, low_inclusive=False)
    lr = check_number("lr", lr, low=0.0, low_inclusive=False)
    steps = check_iterations(steps)
    eval_every = int(check_number("eval_every", eval_every, low=1, integer=True))
    train_tol = _check_train_tol(train_tol)
    ev = check_eval_target(Y_eval, eval_mask, Yt, m)
    g = make_generator(seed)
    net = MLP(d, [width] * (depth - 1), n, activation="linear", bias=False, init_scale=init_scale, generator=g,
              dtype=Yt.dtype, device=Yt.device)
    eye = torch.eye(d, dtype=Yt.dtype, device=Yt.device)
    target, obs = Yt.T, m.T
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    hist_tr, hist_ev, times = [], [], []
    state = {}

    def record(elapsed):
        with torch.no_grad():
            out = net(eye).T
        hist_tr.append(_relative_error((out - Yt)[m], Yt[m]))
        if ev is not None:
            hist_ev.append(_relative_error((out - ev[0])[ev[1]], ev[0][ev[1]]))
        times.append(elapsed)
        state["out"] = out

    def observed_loss(t):
        return ((net(eye) - target)[obs] ** 2).mean()

    taken, converged = _train_recorded(opt, observed_loss, record, hist_tr, steps=steps, eval_every=eval_every,
                                       train_tol=train_tol, threads=threads)
    out = state["out"]
    if not bool(torch.isfinite(out).all()):
        raise FloatingPointError(f"the deep linear network diverged (lr={lr}); use a smaller lr")
    return {"Y": as_input_kind(out.detach(), numpy_out), "steps": taken, "train_error": hist_tr,
            "eval_error": hist_ev, "time": times, "train_residual": hist_tr[-1], "converged": converged}


def diagonal_network_regression(X, y, *, depth: int = 2, init_scale: float = 1e-3, lr: float = 1e-2,
                                steps: int = 10000, eval_every: int = 100, w_true=None, threads: int | None = None,
                                train_tol: float | None = None):
    """The deep *diagonal* linear network baseline for sparse regression (Woodworth, Gunasekar, Lee, Moroshko,
    Savarese, Golan, Soudry & Srebro 2020): w = u^depth - v^depth (entrywise powers), u = v = ``init_scale`` at the
    start (so w = 0), trained by full-batch gradient descent on the mean squared error of X w against y. A small
    ``init_scale`` biases gradient descent towards sparse interpolants (the "rich" regime); depth 1 is plain
    gradient descent on a linear model from zero, which converges to the minimum-norm solution.

    Parameters
    ----------
    X : array-like
        (n, d) inputs.
    y : array-like
        (n,) targets.
    depth : int
        L in w = u^L - v^L.
    init_scale, lr : float
        The initial value of u and v, and the learning rate.
    steps : int
        The number of gradient steps (the cap, with ``train_tol``).
    eval_every : int
        Record every this many steps (and at the last; first at step 0).
    w_true : array-like, optional
        The true weights, for ``"eval_error"``.
    threads : int, optional
        torch CPU threads during training.
    train_tol : float, optional
        Stop at the first record (step 0, every ``eval_every`` steps) whose relative training residual is at most
        ``train_tol``; ``steps`` is then a cap. None (default): run all ``steps`` steps.

    Returns
    -------
    dict
        ``"w"`` (same kind as X), ``"steps"`` (the steps taken), ``"train_error"`` (relative residual
        norm(X w - y) / norm(y)) and, with ``w_true``, ``"eval_error"`` (norm(w - w_true) / norm(w_true)) at the
        records, ``"time"`` (cumulative seconds of training at the records), ``"train_residual"`` (the last
        training error) and ``"converged"`` (whether it is at most ``train_tol``; None without ``train_tol``).
    """
    numpy_out = is_numpy(X)
    Xt, yt = check_regression_data(X, y)
    depth = int(check_number("depth", depth, low=1, integer=True))
    init_scale = check_number("init_scale", init_scale, low=0.0, low_inclusive=False)
    lr = check_number("lr", lr, low=0.0, low_inclusive=False)
    steps = check_iterations(steps)
    eval_every = int(check_number("eval_every", eval_every, low=1, integer=True))
    train_tol = _check_train_tol(train_tol)
    wt = None if w_true is None else check_vector(w_true, Xt.shape[1], Xt, "w_true")
    u = torch.full((Xt.shape[1],), init_scale, dtype=Xt.dtype, device=Xt.device, requires_grad=True)
    v = torch.full((Xt.shape[1],), init_scale, dtype=Xt.dtype, device=Xt.device, requires_grad=True)
    opt = torch.optim.SGD([u, v], lr=lr)
    hist_tr, hist_ev, times = [], [], []

    def weights():
        return u ** depth - v ** depth

    def record(elapsed):
        with torch.no_grad():
            w = weights()
            hist_tr.append(_relative_error(Xt @ w - yt, yt))
            if wt is not None:
                hist_ev.append(_relative_error(w - wt, wt))
        times.append(elapsed)

    def squared_error(t):
        return (Xt @ weights() - yt).square().mean()

    taken, converged = _train_recorded(opt, squared_error, record, hist_tr, steps=steps, eval_every=eval_every,
                                       train_tol=train_tol, threads=threads)
    w = weights().detach()
    if not bool(torch.isfinite(w).all()):
        raise FloatingPointError(f"the diagonal network diverged (lr={lr}); use a smaller lr")
    return {"w": as_input_kind(w, numpy_out), "steps": taken, "train_error": hist_tr, "eval_error": hist_ev,
            "time": times, "train_residual": hist_tr[-1], "converged": converged}
