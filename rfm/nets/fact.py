r"""The Features at Convergence Theorem (FACT) for the layers of an :class:`rfm.nets.MLP`.

Boix-Adsera, Mallinar, Simon & Belkin (arXiv 2507.05644): at a critical point of

    L_lambda(theta) = (1/n) sum_i l_i(theta) + (lambda / 2) ‖theta‖^2,        lambda > 0,

every weight matrix W_l, used through the product W_l h_l, satisfies

    W_l^T W_l = FACT_l := -(1 / (n lambda)) sum_i grad_{h_l} l_i  h_l(x_i)^T,

where h_l(x_i) is the layer's input at the data and grad_{h_l} l_i the gradient of the i-th loss with respect to
it (through W_l: the sub-network :meth:`MLP.forward_from`). The losses are those of :func:`rfm.nets.train`: for
``"mse"`` l_i = (1/c) ‖f(x_i) - y_i‖^2 (the mean over samples and outputs is torch's ``mse_loss``), for ``"ce"`` the
cross-entropy of sample i. ``torch.optim.SGD(weight_decay=lambda)`` adds lambda theta to the gradient, which is the
(lambda/2)‖theta‖^2 convention above; decoupled decay (AdamW) minimises another objective and the identity does not
follow from it.

* :func:`fact_matrix`, :func:`fact_residual` -- FACT_l and ‖W^T W - FACT_l‖_F / ‖W^T W‖_F;
* :func:`fact_table` -- per layer: that residual and the Pearson correlations of W^T W with FACT_l (the FACT) and with
  AGOP_l^{1/2} (the Neural Feature Ansatz, :func:`rfm.nets.layer_agop`);
* :func:`regularized_loss`, :func:`gradient_norm`, :func:`polish_lbfgs` -- L_lambda, ‖grad L_lambda‖ and full-batch
  L-BFGS on L_lambda to drive a network to a critical point (after gradient descent with :func:`rfm.nets.train`).

By the proof, W^T (grad_W L_lambda) = lambda (W^T W - FACT_l), so the residual is at most
‖W‖ ‖grad_W L_lambda‖ / (lambda ‖W^T W‖): it measures how far from a critical point the layer is.
"""
from __future__ import annotations

import torch
from torch import nn

from .._checks import check_choice_str, check_matrix, check_number
from ..metrics import matrix_correlation
from .mlp import LOSSES, MLP, check_input_features, check_mlp, layer_agop, prepare_targets

__all__ = ["fact_matrix", "fact_residual", "fact_table", "gradient_norm", "layer_loss_gradients", "polish_lbfgs",
           "regularized_loss", "sample_losses"]


def sample_losses(out: torch.Tensor, Y: torch.Tensor, loss: str = "mse") -> torch.Tensor:
    """The per-sample losses l_i whose mean is :func:`rfm.nets.train`'s loss: (1/c) ‖f_i - y_i‖^2, or the
    cross-entropy of integer labels; shape (n,).

    Parameters
    ----------
    out : torch.Tensor, shape (n, c)
        Outputs.
    Y : torch.Tensor
        Targets (n, c) or integer labels (n,).
    loss : {"mse", "ce"}, default "mse"
        As in :func:`rfm.nets.train`.

    Returns
    -------
    torch.Tensor, shape (n,)
    """
    check_choice_str("loss", loss, LOSSES)
    if loss == "mse":
        return (out - Y).square().mean(1)
    return nn.functional.cross_entropy(out, Y, reduction="none")


def _data(model, X, y, loss):
    check_mlp(model)
    check_choice_str("loss", loss, LOSSES)
    param = next(model.parameters())
    X = check_matrix(X, "X", dtype=param.dtype, device=param.device).detach()
    check_input_features(X, model, "X")
    return X, prepare_targets(y, X.shape[0], loss, param.dtype, param.device)


def layer_loss_gradients(model: MLP, X, y, layer: int = 0, *, loss: str = "mse"):
    """(H, G): the layer's inputs h_l(x_i) (n, d_l) and the loss gradients grad_{h_l} l_i (n, d_l), float64.

    Parameters
    ----------
    model : MLP
        The network.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    y : array-like or torch.Tensor
        Targets (n, c) for "mse", integer labels (n,) for "ce".
    layer : int, default 0
        The layer.
    loss : {"mse", "ce"}, default "mse"
        As in :func:`rfm.nets.train`.

    Returns
    -------
    H : torch.Tensor, float64, shape (n, d_l)
    G : torch.Tensor, float64, shape (n, d_l)
    """
    X, Y = _data(model, X, y, loss)
    H = model.layer_input(X, layer).detach().clone().requires_grad_(True)
    with torch.enable_grad():
        total = sample_losses(model.forward_from(H, layer), Y, loss).sum()
        (G,) = torch.autograd.grad(total, H)
    return H.detach().to(torch.float64), G.to(torch.float64)


def fact_matrix(model: MLP, X, y, layer: int = 0, *, weight_decay: float, loss: str = "mse") -> torch.Tensor:
    """FACT_l = -(1/(n lambda)) sum_i grad_{h_l} l_i h_l(x_i)^T, float64 (d_l, d_l), with lambda = ``weight_decay``.

    Parameters
    ----------
    model : MLP
        The network.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    y : array-like or torch.Tensor
        Targets (n, c) for "mse", integer labels (n,) for "ce".
    layer : int, default 0
        The layer.
    weight_decay : float
        lambda.
    loss : {"mse", "ce"}, default "mse"
        As in :func:`rfm.nets.train`.

    Returns
    -------
    torch.Tensor, float64, shape (d_l, d_l)

    Examples
    --------
    >>> import torch
    >>> from rfm.nets import MLP
    >>> from rfm.nets.fact import fact_matrix
    >>> net = MLP(3, [4], 2, dtype="float64")
    >>> fact_matrix(net, torch.randn(5, 3, dtype=torch.float64), torch.randn(5, 2, dtype=torch.float64), 1,
    ...             weight_decay=0.1).shape
    torch.Size([4, 4])
    """
    check_number("weight_decay", weight_decay, low=0, low_inclusive=False)
    H, G = layer_loss_gradients(model, X, y, layer, loss=loss)
    return -(G.T @ H) / (H.shape[0] * weight_decay)


def _gram(model, layer):
    W = model.weight(layer).detach().to(torch.float64)
    return W.T @ W


def fact_residual(model: MLP, X, y, layer: int = 0, *, weight_decay: float, loss: str = "mse") -> float:
    """‖W_l^T W_l - FACT_l‖_F / ‖W_l^T W_l‖_F: 0 at a critical point of the weight-decayed loss.

    Parameters
    ----------
    model : MLP
        The network.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    y : array-like or torch.Tensor
        Targets (n, c) for "mse", integer labels (n,) for "ce".
    layer : int, default 0
        The layer.
    weight_decay : float
        lambda.
    loss : {"mse", "ce"}, default "mse"
        As in :func:`rfm.nets.train`.

    Returns
    -------
    float
    """
    WtW = _gram(model, layer)
    F = fact_matrix(model, X, y, layer, weight_decay=weight_decay, loss=loss)
    return float((WtW - F).norm() / WtW.norm())


def fact_table(model: MLP, X, y, *, weight_decay: float, layers=None, loss: str = "mse",
               kind: str = "pearson") -> list[dict]:
    """One row per layer: ``layer``, ``fact_corr`` = corr(W^T W, FACT_l), ``nfa_corr`` = corr(W^T W,
    AGOP_l^{1/2}) (AGOP of the network's outputs with respect to the layer input, uncentred) and ``residual``
    (:func:`fact_residual`); correlations of the flattened matrices (:func:`rfm.metrics.matrix_correlation`).

    Parameters
    ----------
    model : MLP
        The network.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    y : array-like or torch.Tensor
        Targets (n, c) for "mse", integer labels (n,) for "ce".
    weight_decay : float
        lambda.
    layers : iterable of int, optional
        The layers (default: all).
    loss : {"mse", "ce"}, default "mse"
        As in :func:`rfm.nets.train`.
    kind : {"pearson", "cosine"}, default "pearson"
        The correlation.

    Returns
    -------
    list of dict
        One per layer.
    """
    check_mlp(model)
    layers = range(model.n_layers) if layers is None else layers
    rows = []
    for layer in layers:
        WtW = _gram(model, layer)
        F = fact_matrix(model, X, y, layer, weight_decay=weight_decay, loss=loss)
        A = layer_agop(model, X, layer, power=0.5)
        rows.append({"layer": int(layer), "fact_corr": matrix_correlation(WtW, F, kind=kind),
                     "nfa_corr": matrix_correlation(WtW, A, kind=kind),
                     "residual": float((WtW - F).norm() / WtW.norm())})
    return rows


def regularized_loss(model: nn.Module, X, Y, weight_decay: float, loss: str = "mse") -> torch.Tensor:
    """L_lambda = mean_i l_i + (lambda/2) sum of squared parameters (the objective of SGD with ``weight_decay``);
    X, Y already tensors on the model's device (Y as :func:`rfm.nets.train` prepares it).

    Parameters
    ----------
    model : torch.nn.Module
        The network.
    X, Y : torch.Tensor
        Data on the model's device.
    weight_decay : float
        lambda.
    loss : {"mse", "ce"}, default "mse"
        As in :func:`rfm.nets.train`.

    Returns
    -------
    torch.Tensor, 0-d
        Differentiable in the parameters.
    """
    reg = sum(p.square().sum() for p in model.parameters())
    return sample_losses(model(X), Y, loss).mean() + 0.5 * weight_decay * reg


def gradient_norm(model: MLP, X, y, *, weight_decay: float, loss: str = "mse") -> float:
    """‖grad L_lambda‖, the Euclidean norm over all parameters.

    Parameters
    ----------
    model : MLP
        The network.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    y : array-like or torch.Tensor
        Targets (n, c) for "mse", integer labels (n,) for "ce".
    weight_decay : float
        lambda.
    loss : {"mse", "ce"}, default "mse"
        As in :func:`rfm.nets.train`.

    Returns
    -------
    float
    """
    X, Y = _data(model, X, y, loss)
    with torch.enable_grad():
        grads = torch.autograd.grad(regularized_loss(model, X, Y, weight_decay, loss), list(model.parameters()))
    return float(torch.sqrt(sum(g.to(torch.float64).square().sum() for g in grads)))


def polish_lbfgs(model: MLP, X, y, *, weight_decay: float, loss: str = "mse", tol: float = 1e-6,
                 max_rounds: int = 50, iters_per_round: int = 100, lr: float = 1.0) -> list[dict]:
    """Minimise L_lambda by full-batch L-BFGS (strong-Wolfe line search) in rounds of ``iters_per_round``
    iterations until ‖grad L_lambda‖ < ``tol`` or ``max_rounds`` rounds; the model is changed in place. Returns one
    record per round: ``round``, ``loss`` (L_lambda) and ``grad_norm``. Use float64 networks for tolerances below
    about 1e-4. ``weight_decay=0`` minimises the plain loss (a control: a network converged without weight decay, to
    which the FACT does not apply).

    Parameters
    ----------
    model : MLP
        The network.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    y : array-like or torch.Tensor
        Targets (n, c) for "mse", integer labels (n,) for "ce".
    weight_decay : float
        lambda, at least 0 (0: the plain loss).
    loss : {"mse", "ce"}, default "mse"
        As in :func:`rfm.nets.train`.
    tol : float, default 1e-6
        The gradient-norm target.
    max_rounds : int, default 50
        Rounds at most.
    iters_per_round : int, default 100
        L-BFGS iterations per round.
    lr : float, default 1.0
        L-BFGS's lr.

    Returns
    -------
    list of dict
        One record per round.
    """
    check_number("weight_decay", weight_decay, low=0)
    check_number("tol", tol, low=0, low_inclusive=False)
    check_number("max_rounds", max_rounds, low=1, integer=True)
    check_number("iters_per_round", iters_per_round, low=1, integer=True)
    X, Y = _data(model, X, y, loss)
    params = list(model.parameters())
    history = []
    for r in range(int(max_rounds)):
        opt = torch.optim.LBFGS(params, lr=lr, max_iter=int(iters_per_round), history_size=50,
                                tolerance_grad=tol / 10, tolerance_change=0.0, line_search_fn="strong_wolfe")

        def closure(opt=opt):
            opt.zero_grad(set_to_none=True)
            value = regularized_loss(model, X, Y, weight_decay, loss)
            value.backward()
            return value

        with torch.enable_grad():
            opt.step(closure)
        g = gradient_norm(model, X, Y, weight_decay=weight_decay, loss=loss)
        with torch.no_grad():
            value = float(regularized_loss(model, X, Y, weight_decay, loss))
        history.append({"round": r, "loss": value, "grad_norm": g})
        if g < tol:
            break
    return history
