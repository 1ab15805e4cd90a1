r"""The saddle-escape direction of a bias-free network, from which small-initialisation training leaves the origin.

Bantzis, Simon & Jacot (arXiv 2505.21722): the maximiser of g(theta) = <Y, f_theta(X)> / n over unit-Frobenius
layers (:func:`escape_objective`), by normalised ascent on each layer's sphere (:func:`escape_direction`), a random
point of the same spheres as the control (:func:`random_sphere_direction`) and per-layer spectra
(:func:`layer_singular_values`).

The ascent is a projected step on the spheres, not a loss minimised by :func:`rfm.nets.training.fit`.
"""
from __future__ import annotations

import copy

import torch

from .._checks import check_matrix, check_number
from ..utils import check_generator
from .mlp import MLP

__all__ = ["escape_direction", "escape_objective", "layer_singular_values", "random_sphere_direction"]


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
    a uniformly random point of the product of the layers' spheres (the control for :func:`escape_direction`)."""
    net = copy.deepcopy(_check_bias_free(model))
    g = check_generator(generator)
    with torch.no_grad():
        for lin in net.layers:
            lin.weight.copy_(torch.randn(lin.weight.shape, generator=g, dtype=torch.float64))
    _normalise_layers(net)
    return net


def escape_objective(model: MLP, X, Y) -> torch.Tensor:
    """g(theta) = <Y, f_theta(X)> / n, the first-order term of the loss decrease near the origin saddle
    (for the squared loss 1/(2n) ||f(X) - Y||^2, -g is the linear part of the loss in f)."""
    return (Y * model(X)).sum() / X.shape[0]


def escape_direction(model: MLP, X, Y, *, steps: int = 2000, lr: float = 1.0, restarts: int = 1,
                     generator=0) -> dict:
    """The optimal escape direction from the origin saddle: the maximiser of g(theta) = <Y, f_theta(X)> / n over
    networks whose layers all have unit Frobenius norm, by normalised ascent on each layer's sphere,
    W_l <- (W_l + lr G_l / ||G_l||) / ||...|| with G_l = dg / dW_l (at a maximiser G_l is parallel to W_l, so
    it is a fixed point). ``restarts`` random starts (the first from ``model``'s own weights); the best is kept.
    Returns {"model", "objective" (history of the best start), "best", "all_best"}."""
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
        hist = []
        for _ in range(steps):
            net.zero_grad()
            obj = escape_objective(net, X, Y)
            obj.backward()
            hist.append(float(obj.detach()))
            with torch.no_grad():
                for lin in net.layers:
                    G = lin.weight.grad
                    gn = G.norm()
                    if float(gn) > 0:
                        lin.weight.add_(lr * G / gn)
                        lin.weight.div_(lin.weight.norm())
        with torch.no_grad():
            hist.append(float(escape_objective(net, X, Y)))
        results.append(hist[-1])
        if best is None or hist[-1] > best[1][-1]:
            best = (net, hist)
    return {"model": best[0], "objective": best[1], "best": best[1][-1], "all_best": results}


def layer_singular_values(model: MLP) -> list[torch.Tensor]:
    """The singular values (descending) of every layer's weight matrix, input layer first."""
    if not isinstance(model, MLP):
        raise TypeError(f"model must be an rfm.nets.MLP, got {type(model).__name__}")
    return [torch.linalg.svdvals(lin.weight.detach().to(torch.float64)) for lin in model.layers]
