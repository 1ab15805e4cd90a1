r"""Alternating gradient flows (AGF) for a two-layer network trained from small initialisation on the squared loss.

The network is a sum of homogeneous neurons, f(u) = sum_i a_i (w_i . u)^q, with w_i in R^d (optionally restricted
to a mask, e.g. one coordinate per neuron for a diagonal network) and a_i in R^c; neuron i is homogeneous of degree
kappa = q + 1 in theta_i = (w_i, a_i). The loss is the mean over points and outputs, L(F) = mean((Y - F)^2), as
``torch.nn.functional.mse_loss`` (and :func:`rfm.nets.optim.train_full_batch`). Time is gradient-flow time,
``lr * step`` for gradient descent with step ``lr``.

What we read. Only the abstract of Kunin et al., "Alternating Gradient Flows: a theory of feature learning in
two-layer neural networks" (arXiv 2506.06489): AGF alternates "maximizing a utility function over dormant neurons
and minimizing a cost function over active ones", begins "with all neurons dormant", and "at each iteration, a
dormant neuron activates, triggering the acquisition of a feature and a drop in the loss". The paper's equations
could not be read; the steps below are **our derivation** from that description:

* **Utility maximisation (dormant neurons).** With the residual r = Y - F_active held fixed, a dormant neuron's
  output is negligible and gradient flow on L moves it by dtheta_i/dt = grad U_i(theta_i; r) with the utility
  U_i = (2 / (n c)) sum_n (a_i . r_n) (w_i . u_n)^q = -<grad_F L, f_i>. By homogeneity (theta . grad U = kappa U),
  its norm rho obeys drho/dt = kappa rho^(kappa-1) Ubar(thetabar) and its direction climbs the normalised utility
  Ubar on the sphere at rate rho^(kappa-2). Each dormant neuron therefore accumulates S_i(t) = int kappa Ubar dt and
  leaves the origin when S_i reaches a threshold set by its initial norm: log(1/rho_i(0)) for kappa = 2, and
  (rho_i(0)^(2-kappa) - 1) / (kappa - 2) for kappa > 2 (both: the norm reaches ``active_norm`` = 1). We integrate
  these decoupled flows exactly (adaptive Euler steps on theta_i), so the directions and accumulated utilities
  carry over from one round to the next. The first neuron to reach the threshold activates: that is the predicted
  **jump time**.
* **Cost minimisation (active neurons).** The active neurons (with the new one) minimise L over their parameters,
  instantaneously on the time scale of the plateaus (L-BFGS from their current values). The minimum is the
  predicted **loss after the jump**; the new residual feeds the next utility maximisation.

The repository ``geometric-intelligence/group-agf`` (``src/power.py``, ``CyclicPower.loss_plateau_predictions``,
whose docstring says "as predicted by AGF") gives loss levels for a cyclic template: the template's power not yet
learned, frequencies in decreasing order of power. The cost step here reaches those levels on the chapter's
modular-addition task only where each frequency is fitted completely, which the chapter measures rather than
assumes.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .._checks import check_matrix, check_number

__all__ = ["agf_predict", "agf_staircase", "neuron_outputs"]


def neuron_outputs(W, A, X, power: int = 2, mask=None) -> torch.Tensor:
    """The network's output sum_i a_i ((mask_i * w_i) . u)^power for the rows u of X.

    Parameters
    ----------
    W : torch.Tensor, shape (N, d)
        Input weights, one row per neuron.
    A : torch.Tensor, shape (N, c)
        Output weights, one row per neuron.
    X : torch.Tensor, shape (n, d)
        Inputs.
    power : int
        q >= 1 in (w . u)^q.
    mask : torch.Tensor, shape (N, d), optional
        Multiplies W (a zero entry removes that weight).

    Returns
    -------
    torch.Tensor, shape (n, c)
    """
    Wm = W if mask is None else W * mask
    return (X @ Wm.T).pow(power) @ A


def _utility_grads(W, A, X, R, power, mask):
    """Gradients of the utilities U_i = (2/(n c)) sum_n (a_i . r_n)(w_i . u_n)^q, for every neuron at once."""
    n, c = R.shape
    Wm = W if mask is None else W * mask
    H = X @ Wm.T                                     # (n, N)
    RA = R @ A.T                                     # (n, N)
    gA = (2.0 / (n * c)) * H.pow(power).T @ R        # (N, c)
    gW = (2.0 * power / (n * c)) * (RA * H.pow(power - 1)).T @ X
    if mask is not None:
        gW = gW * mask
    U = (2.0 / (n * c)) * (RA * H.pow(power)).sum(0)
    return gW, gA, U


def _best_outputs(Phi, Y):
    """Least-squares output weights for features Phi (n, k): argmin_A ||Y - Phi A||^2 (minimum norm)."""
    return torch.linalg.lstsq(Phi, Y, driver="gelsd").solution


def _cost_minimise(W, A, X, Y, idx, power, mask, iters):
    """Minimise L over the active neurons' (w_i, a_i): L-BFGS over the w_i with the a_i at their least-squares
    optimum for each w (variable projection; by the envelope theorem the gradient in w is the partial gradient at
    that optimum)."""
    Wa = W[idx].clone().requires_grad_(True)
    Ma = None if mask is None else mask[idx]
    opt = torch.optim.LBFGS([Wa], lr=1.0, max_iter=iters, tolerance_grad=1e-12, tolerance_change=1e-15,
                            history_size=20, line_search_fn="strong_wolfe")

    def features(Wv):
        return (X @ (Wv if Ma is None else Wv * Ma).T).pow(power)

    def closure():
        opt.zero_grad()
        Phi = features(Wa)
        Aopt = _best_outputs(Phi.detach(), Y)
        loss = (Y - Phi @ Aopt).square().mean()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        Wn = Wa.detach()
        An = _best_outputs(features(Wn), Y)
        # the factorisation a (w.u)^q is invariant under (w, a) -> (s w, a / s^q): rebalance so that
        # ||w||^2 = q ||a||^2 (the balance gradient flow keeps from a small start, our derivation), for the next
        # dormant phase's norms
        nw, na = Wn.norm(dim=1).clamp_min(1e-300), An.norm(dim=1)
        s = (power * na.square() / nw.square()).pow(1.0 / (2 * (power + 1)))
        s = torch.where(na > 0, s, torch.ones_like(s))
        W[idx], A[idx] = Wn * s[:, None], An / s[:, None].pow(power)


def agf_predict(X, Y, W0, A0, *, power: int = 2, mask=None, max_rounds: int | None = None,
                loss_tol: float = 1e-3, max_time: float = math.inf, active_norm: float = 1.0,
                rel_step: float = 0.01, cost_iters: int = 500, max_steps: int = 200_000) -> dict:
    """The AGF prediction (see the module's docstring) of the loss curve of gradient flow from (W0, A0).

    Parameters
    ----------
    X : array-like, shape (n, d)
        Inputs.
    Y : array-like, shape (n, c)
        Targets.
    W0 : array-like, shape (N, d)
        Initial input weights (one row per neuron: ``net.layers[0].weight`` of a bias-free two-layer MLP).
    A0 : array-like, shape (N, c)
        Initial output weights (``net.layers[1].weight.T``).
    power : int, default 2
        q in (w . u)^q: 1 for a linear network (kappa = 2), 2 for the quadratic network (kappa = 3).
    mask : array-like, shape (N, d), optional
        Multiplies the input weights (e.g. the identity for a diagonal linear network).
    max_rounds : int, optional
        At most this many activations (default: the number of neurons).
    loss_tol : float
        Stop once the loss is below ``loss_tol`` times its initial value.
    max_time : float
        Stop when no neuron activates before this gradient-flow time.
    active_norm : float
        The norm at which a dormant neuron counts as active.
    rel_step : float
        Each Euler step of the dormant flow changes no dormant neuron by more than this fraction of its norm.
    cost_iters : int
        L-BFGS iterations of each cost minimisation.
    max_steps : int
        At most this many Euler steps in one utility-maximisation phase.

    Returns
    -------
    dict
        "times" (jump times, gradient-flow time), "losses" (the loss after each jump), "loss0" (the initial loss
        Y's mean square), "neurons" (the neuron activated at each jump), "utilities" (its utility U at activation,
        per unit norm), "outputs" (the network's output after each jump, a list of (n, c) tensors), "W", "A" (the
        final parameters), "stopped" ("loss", "rounds", "time" or "steps").
    """
    X = check_matrix(X, "X", dtype=torch.float64)
    Y = check_matrix(Y, "Y", dtype=torch.float64)
    W = check_matrix(W0, "W0", dtype=torch.float64).clone()
    A = check_matrix(A0, "A0", dtype=torch.float64).clone()
    if Y.shape[0] != X.shape[0] or W.shape != (A.shape[0], X.shape[1]) or A.shape[1] != Y.shape[1]:
        raise ValueError(f"shapes do not match: X {tuple(X.shape)}, Y {tuple(Y.shape)}, W0 {tuple(W.shape)}, "
                         f"A0 {tuple(A.shape)} (need W0 (N, d), A0 (N, c))")
    check_number("power", power, low=1, integer=True)
    for name, v in (("loss_tol", loss_tol), ("active_norm", active_norm), ("rel_step", rel_step)):
        check_number(name, v, low=0, low_inclusive=False)
    if mask is not None:
        mask = check_matrix(mask, "mask", dtype=torch.float64)
        if mask.shape != W.shape:
            raise ValueError(f"mask must have W0's shape {tuple(W.shape)}, got {tuple(mask.shape)}")
        W = W * mask
    N = W.shape[0]
    max_rounds = N if max_rounds is None else int(max_rounds)
    active = torch.zeros(N, dtype=torch.bool)
    loss0 = float(Y.square().mean())
    out = {"times": [], "losses": [], "loss0": loss0, "neurons": [], "utilities": [], "outputs": []}
    t, R, stopped = 0.0, Y.clone(), "rounds"
    while len(out["times"]) < max_rounds:
        dorm = (~active).nonzero().reshape(-1)
        if dorm.numel() == 0:
            break
        hit, steps = None, 0
        while hit is None:
            gW, gA, U = _utility_grads(W[dorm], A[dorm], X, R, power, None if mask is None else mask[dorm])
            rho = torch.sqrt(W[dorm].square().sum(1) + A[dorm].square().sum(1))
            g = torch.sqrt(gW.square().sum(1) + gA.square().sum(1))
            dt = float((rel_step * rho / g.clamp_min(1e-300)).min())
            if t + dt > max_time or steps >= max_steps:
                stopped = "time" if t + dt > max_time else "steps"
                break
            W[dorm] += dt * gW
            A[dorm] += dt * gA
            t, steps = t + dt, steps + 1
            rho = torch.sqrt(W[dorm].square().sum(1) + A[dorm].square().sum(1))
            if bool((rho >= active_norm).any()):
                j = int(torch.argmax(rho))
                hit = int(dorm[j])
                out["utilities"].append(float(U[j]) / float(rho[j]) ** (power + 1))
        if hit is None:
            break
        active[hit] = True
        idx = active.nonzero().reshape(-1)
        _cost_minimise(W, A, X, Y, idx, power, mask, cost_iters)
        F = neuron_outputs(W[idx], A[idx], X, power, None if mask is None else mask[idx])
        R = Y - F
        out["times"].append(t)
        out["losses"].append(float(R.square().mean()))
        out["neurons"].append(hit)
        out["outputs"].append(F)
        if out["losses"][-1] <= loss_tol * loss0:
            stopped = "loss"
            break
    out.update(W=W, A=A, stopped=stopped)
    out["times"], out["losses"] = np.array(out["times"]), np.array(out["losses"])
    return out


def agf_staircase(times, losses, loss0: float, t) -> np.ndarray:
    """The loss curve AGF predicts: ``loss0`` before the first jump, ``losses[k]`` from ``times[k]`` on.

    Parameters
    ----------
    times : array-like
        Increasing jump times.
    losses : array-like
        The loss after each jump.
    loss0 : float
        The loss before the first jump.
    t : array-like
        Where to evaluate the curve (same time units as ``times``).

    Returns
    -------
    numpy.ndarray
        The predicted loss at each t.

    Examples
    --------
    >>> agf_staircase([1.0, 2.0], [0.5, 0.1], 1.0, [0.0, 1.5, 3.0]).tolist()
    [1.0, 0.5, 0.1]
    """
    times, losses = np.asarray(times, float), np.asarray(losses, float)
    if times.shape != losses.shape or times.ndim != 1:
        raise ValueError(f"times and losses must be 1-D of the same length, got {times.shape} and {losses.shape}")
    if np.any(np.diff(times) < 0):
        raise ValueError("times must be non-decreasing")
    k = np.searchsorted(times, np.asarray(t, float), side="right")
    return np.concatenate([[float(loss0)], losses])[k]
