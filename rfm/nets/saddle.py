r"""The saddle-escape direction of a bias-free network, from which small-initialisation training leaves the origin.

Bantzis, Simon & Jacot (arXiv 2505.21722): the maximiser of g(theta) = <Y, f_theta(X)> / n over unit-Frobenius
layers (:func:`escape_objective`), by normalised ascent on each layer's sphere (:func:`escape_direction`), a random
point of the same spheres as the control (:func:`random_sphere_direction`) and per-layer spectra
(:func:`layer_singular_values`); and gradient descent on the squared loss from a small initialisation, with every
layer's spectrum recorded along the way (:func:`gd_layer_spectra`: the saddle-to-saddle regime the escape
direction describes).

The ascent is a step of :class:`SphereAscent` on the spheres, taken by the one training loop
:func:`rfm.nets.training.fit` (the objective is maximised: the optimizer climbs its gradient).
"""
from __future__ import annotations

import copy

import torch

from .._checks import check_matrix, check_number
from ..utils import check_generator
from .mlp import MLP
from .optim import train_full_batch
from .training import fit

__all__ = ["SphereAscent", "escape_direction", "escape_objective", "gd_layer_spectra", "layer_singular_values",
           "layer_top_ratios", "random_sphere_direction"]


class SphereAscent(torch.optim.Optimizer):
    """Normalised gradient *ascent* on the unit sphere of each parameter: W <- (W + lr G / ||G||) / ||...||, with
    G the gradient of the objective (a parameter whose gradient is 0 does not move).

    Parameters
    ----------
    params : iterable of torch.Tensor
        The parameters, each kept at unit Frobenius norm.
    lr : float
        The step along the normalised gradient.
    """

    def __init__(self, params, lr: float = 1.0):
        check_number("lr", lr, low=0, low_inclusive=False)
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        """One ascent step on every parameter's sphere.

        Parameters
        ----------
        closure : callable, optional
            Re-evaluates the objective (as in torch's optimizers).

        Returns
        -------
        torch.Tensor or None
            The closure's value.
        """
        value = None
        if closure is not None:
            with torch.enable_grad():
                value = closure()
        for group in self.param_groups:
            for W in group["params"]:
                if W.grad is None:
                    continue
                gn = W.grad.norm()
                if float(gn) > 0:
                    W.add_(group["lr"] * W.grad / gn)
                    W.div_(W.norm())
        return value


def _check_bias_free(model) -> MLP:
    if not isinstance(model, MLP):
        raise TypeError(f"model must be an rfm.nets.MLP, got {type(model).__name__}")
    if any(lin.bias is not None for lin in model.layers):
        raise ValueError("model must be bias-free (MLP(..., bias=False)): the escape direction is defined for "
                         "homogeneous networks")
    return model


def _normalise_layers(net: MLP):
    with torch.no_grad():
        for lin in net.layers:
            lin.weight.div_(lin.weight.norm())


def random_sphere_direction(model: MLP, generator=0) -> MLP:
    """A copy of ``model`` with every layer replaced by an i.i.d. Gaussian matrix scaled to unit Frobenius norm:
    a uniformly random point of the product of the layers' spheres (the control for :func:`escape_direction`).

    Parameters
    ----------
    model : MLP
        A bias-free network.
    generator : int or torch.Generator, default 0
        Seeds the draws.

    Returns
    -------
    MLP
        A new network.
    """
    net = copy.deepcopy(_check_bias_free(model))
    g = check_generator(generator)
    with torch.no_grad():
        for lin in net.layers:
            lin.weight.copy_(torch.randn(lin.weight.shape, generator=g, dtype=torch.float64))
    _normalise_layers(net)
    return net


def escape_objective(model: MLP, X, Y) -> torch.Tensor:
    """g(theta) = <Y, f_theta(X)> / n, the first-order term of the loss decrease near the origin saddle
    (for the squared loss 1/(2n) ||f(X) - Y||^2, -g is the linear part of the loss in f).

    Parameters
    ----------
    model : MLP
        The network.
    X : torch.Tensor, shape (n, d)
        Inputs.
    Y : torch.Tensor, shape (n, c)
        Targets.

    Returns
    -------
    torch.Tensor, 0-d
        Differentiable in the model's parameters.
    """
    return (Y * model(X)).sum() / X.shape[0]


def escape_direction(model: MLP, X, Y, *, steps: int = 2000, lr: float = 1.0, restarts: int = 1,
                     generator=0, record_ratios: bool = False) -> dict:
    """The optimal escape direction from the origin saddle: the maximiser of g(theta) = <Y, f_theta(X)> / n over
    networks whose layers all have unit Frobenius norm, by normalised ascent on each layer's sphere,
    W_l <- (W_l + lr G_l / ||G_l||) / ||...|| with G_l = dg / dW_l (at a maximiser G_l is parallel to W_l, so
    it is a fixed point). ``restarts`` random starts (the first from ``model``'s own weights); the best is kept.
    Returns {"model", "objective" (history of the best start), "best", "all_best"}, and with ``record_ratios``
    also "ratios": the best start's per-layer sigma_1 / sigma_2 (:func:`layer_top_ratios`) along the ascent,
    shape (steps + 1, layers), row t after t steps, aligned with "objective" (entry t: the objective after t
    steps).

    Parameters
    ----------
    model : MLP
        A bias-free network (the starting point of the first restart).
    X : array-like, shape (n, d)
        Inputs.
    Y : array-like, shape (n, c)
        Targets.
    steps : int, default 2000
        Ascent steps per start.
    lr : float, default 1.0
        The step.
    restarts : int, default 1
        Starts.
    generator : int or torch.Generator, default 0
        Seeds the draws.
    record_ratios : bool, default False
        Record every layer's sigma_1 / sigma_2 after each step (one SVD per layer and step).

    Returns
    -------
    dict
        As described above.
    """
    model = _check_bias_free(model)
    p = next(model.parameters())
    X = check_matrix(X, "X", dtype=p.dtype, device=p.device)
    Y = check_matrix(Y, "Y", dtype=p.dtype, device=p.device)
    if Y.shape[0] != X.shape[0]:
        raise ValueError(f"X and Y must have the same number of rows, got {X.shape[0]} and {Y.shape[0]}")
    if Y.shape[1] != model.layers[-1].weight.shape[0]:
        raise ValueError(f"Y has {Y.shape[1]} columns but the model has {model.layers[-1].weight.shape[0]} outputs")
    check_number("steps", steps, low=1, integer=True)
    check_number("lr", lr, low=0, low_inclusive=False)
    check_number("restarts", restarts, low=1, integer=True)
    g = check_generator(generator)
    best, results = None, []
    for r in range(restarts):
        net = copy.deepcopy(model)
        if r > 0:
            net = random_sphere_direction(net, g)
        _normalise_layers(net)
        hist, ratios = [], [layer_top_ratios(net)] if record_ratios else None

        def callback(t, obj, hist=hist, ratios=ratios, net=net):
            hist.append(float(obj))     # the objective at which step t was taken: after t - 1 steps
            if ratios is not None:
                ratios.append(layer_top_ratios(net))

        ascent = SphereAscent([lin.weight for lin in net.layers], lr=lr)
        fit(ascent, lambda t, net=net: escape_objective(net, X, Y), int(steps), callback=callback, diverged=None)
        with torch.no_grad():
            hist.append(float(escape_objective(net, X, Y)))
        results.append(hist[-1])
        if best is None or hist[-1] > best[1][-1]:
            best = (net, hist, ratios)
    out = {"model": best[0], "objective": best[1], "best": best[1][-1], "all_best": results}
    if record_ratios:
        out["ratios"] = torch.stack(best[2])
    return out


def layer_top_ratios(model: MLP) -> torch.Tensor:
    """sigma_1 / sigma_2 of every layer's weight matrix, input layer first (inf for a layer of rank one at most).

    Parameters
    ----------
    model : MLP
        The network (every layer at least 2 x 2).

    Returns
    -------
    torch.Tensor, float64, shape (layers,)
    """
    svs = layer_singular_values(model)
    if any(s.numel() < 2 for s in svs):
        raise ValueError("every layer needs at least two singular values")
    return torch.stack([s[0] / s[1] for s in svs])


def layer_singular_values(model: MLP) -> list[torch.Tensor]:
    """The singular values (descending) of every layer's weight matrix, input layer first.

    Parameters
    ----------
    model : MLP
        The network.

    Returns
    -------
    list of torch.Tensor
        float64, one per layer.
    """
    if not isinstance(model, MLP):
        raise TypeError(f"model must be an rfm.nets.MLP, got {type(model).__name__}")
    return [torch.linalg.svdvals(lin.weight.detach().to(torch.float64)) for lin in model.layers]


def gd_layer_spectra(model: MLP, X, Y, optimizer: torch.optim.Optimizer, *, steps: int, record_every: int = 10,
                     top: int = 10) -> dict:
    r"""Full-batch descent on the mean squared error of a bias-free network (in place, through
    :func:`rfm.nets.optim.train_full_batch` with any ``optimizer`` over the model's parameters), recording the top
    ``top`` singular values of every layer (:func:`layer_singular_values`) and every layer's weights before the
    first step and every ``record_every`` steps.

    Near the origin the gradient of an L-homogeneous network scales as r^(L-1) (r the scale of its layers), so
    plain gradient descent from a small initialisation spends of the order of r_0^-(L-2) steps on the plateau.
    :class:`rfm.nets.optim.SLO` with a single parameter group and ``eps=0`` (steps of fixed length ``lr`` along
    the whole gradient) follows the same gradient-flow path on another clock (exactly in the limit of short steps),
    without that slow-down.

    Parameters
    ----------
    model : MLP
        A bias-free network, trained in place.
    X : torch.Tensor, shape (n, d)
        Inputs.
    Y : torch.Tensor, shape (n, c)
        Targets.
    optimizer : torch.optim.Optimizer
        Over ``model``'s parameters.
    steps : int
        Steps.
    record_every : int, default 10
        Steps between records (and the last step).
    top : int, default 10
        Singular values kept per layer (where a layer has fewer, padded with NaN).

    Returns
    -------
    dict
        "steps" (the steps after which the records were taken), "loss" (the mean squared error there; the
        loss of :func:`rfm.nets.optim.train_full_batch`'s history is the one before the step), "sv" (torch.Tensor,
        shape (records, layers, top), float64) and "weights" (one list of the layers' weights per record).
    """
    model = _check_bias_free(model)
    check_number("steps", steps, low=1, integer=True)
    check_number("record_every", record_every, low=1, integer=True)
    check_number("top", top, low=1, integer=True)
    L = len(model.layers)
    rec_steps, losses, svs, weights = [], [], [], []

    def record(net, rec):
        with torch.no_grad():
            losses.append(float(((net(X) - Y) ** 2).mean()))
        s = torch.full((L, top), float("nan"), dtype=torch.float64)
        for l, v in enumerate(layer_singular_values(net)):
            s[l, :min(top, len(v))] = v[:top]
        rec_steps.append(rec["step"])
        svs.append(s)
        weights.append([lin.weight.detach().clone() for lin in net.layers])

    train_full_batch(model, X, Y, optimizer, steps=steps, record_every=record_every, callback=record, threads=1)
    return {"steps": rec_steps, "loss": losses, "sv": torch.stack(svs), "weights": weights}
