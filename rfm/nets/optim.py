r"""Speed Limited Optimization, and a full-batch training loop that takes any torch optimizer.

**Speed Limited Optimization** (SLO; "Feature learning as alignment", seed 004, Section 5.2) moves every layer at a
fixed *speed*: for layer l with learning rate eta and speed C_l::

    W_l <- W_l - eta * C_l * g_l / (eps + |g_l|),        g_l = dL/dW_l,

where ``|g_l|`` is the Frobenius norm of the layer's whole gradient (weight and bias together, when there is a bias).
The paper's rule has eps = 0, a step of length exactly eta * C_l; its experiments (Appendix I) use eps = 0.1, which
turns the step into plain gradient descent with learning rate eta * C_l / eps once ``|g_l| << eps``, so that the
network can still interpolate. A large C_0 and small C_1, C_2 force the first layer far from its initialisation
while the later layers barely move, and the centred neural feature correlation then dominates the uncentred one.

:class:`SLO` is a :class:`torch.optim.Optimizer`; one parameter group is one layer, with its ``speed``.
:func:`layer_groups` builds the groups of an :class:`rfm.nets.MLP`, and :func:`train_full_batch` runs full-batch
training with any optimizer, counted in steps: a thin wrapper over :func:`rfm.nets.train` (which takes an optimizer
instance too), whose steps are those of the one training loop :func:`rfm.nets.training.fit`.
"""
from __future__ import annotations

import math

import torch

from .._checks import check_number
from . import mlp as nets


class SLO(torch.optim.Optimizer):
    """Speed Limited Optimization: each parameter group takes the step ``-lr * speed * g / (eps + |g|_F)``.

    ``params`` are parameter groups, one per layer, each with its ``speed`` C_l (see :func:`layer_groups`), or
    plain parameters (then one group with ``speed``). ``lr`` is eta; ``eps`` = 0 is the paper's rule, and its
    experiments use eps = 0.1. A group whose gradient is exactly 0 does not move.

    Parameters
    ----------
    params : iterable
        Parameters, or parameter groups with a ``speed`` each (:func:`layer_groups`).
    lr : float, default 1e-3
        eta.
    speed : float, default 1.0
        The speed of groups that do not set one.
    eps : float, default 0.0
        Added to the gradient norm.

    Raises
    ------
    TypeError
        If params is a single tensor.
    """

    def __init__(self, params, lr: float = 1e-3, *, speed: float = 1.0, eps: float = 0.0):
        check_number("lr", lr, low=0, low_inclusive=False)
        check_number("speed", speed, low=0)
        check_number("eps", eps, low=0)
        if isinstance(params, torch.Tensor):
            raise TypeError("params must be an iterable of parameters or of parameter groups, got a single tensor; "
                            "pass [tensor] or model.parameters()")
        super().__init__(params, dict(lr=lr, speed=speed, eps=eps))
        for i, group in enumerate(self.param_groups):
            check_number(f"speed of parameter group {i}", group["speed"], low=0)
            check_number(f"lr of parameter group {i}", group["lr"], low=0, low_inclusive=False)
            check_number(f"eps of parameter group {i}", group["eps"], low=0)

    @torch.no_grad()
    def step(self, closure=None):
        """One step of every parameter group.

        Parameters
        ----------
        closure : callable, optional
            Re-evaluates the model and returns the loss.

        Returns
        -------
        torch.Tensor or None
            The closure's loss, if any.

        Raises
        ------
        FloatingPointError
            If a group's gradient is not finite.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for i, group in enumerate(self.param_groups):
            grads = [p.grad for p in group["params"] if p.grad is not None]
            if not grads:
                continue
            norm = math.sqrt(sum(float(g.square().sum()) for g in grads))
            if not math.isfinite(norm):
                raise FloatingPointError(
                    f"SLO.step: the gradient of parameter group {i} is NaN or infinite (norm {norm}), so the step "
                    "would write NaN into the weights; the loss has probably diverged: lower lr or the speeds, or "
                    "check the data for NaN")
            if norm == 0.0 and group["eps"] == 0.0:
                continue
            scale = group["lr"] * group["speed"] / (group["eps"] + norm)
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-scale)
        return loss


def layer_groups(model, speeds) -> list[dict]:
    """One parameter group per layer of an MLP, ``{"params": [...], "speed": C_l}``; ``speeds`` has one C_l per
    layer, first layer first (e.g. ``(500, 0.002, 0.002)`` for two hidden layers and the read-out).

    Parameters
    ----------
    model : MLP
        The network.
    speeds : sequence of float
        One C_l per layer.

    Returns
    -------
    list of dict
    """
    if not isinstance(model, nets.MLP):
        raise TypeError(f"model must be an rfm.nets.MLP (one parameter group per layer), got {type(model).__name__}")
    if isinstance(speeds, (str, bytes)) or not hasattr(speeds, "__iter__"):
        raise TypeError(f"speeds must be a list with one speed per layer ({model.n_layers}), e.g. "
                        f"{tuple([1.0] * model.n_layers)}, got {speeds!r}")
    speeds = list(speeds)
    for s in speeds:
        if isinstance(s, torch.Tensor) and s.numel() == 1:
            s = s.item()
        check_number("speed", s, low=0)
    speeds = [float(s) for s in speeds]
    if len(speeds) != model.n_layers:
        raise ValueError(f"speeds must give one value per layer ({model.n_layers}), got {len(speeds)}: {speeds}")
    return [{"params": list(layer.parameters()), "speed": s} for layer, s in zip(model.layers, speeds)]


def train_full_batch(model, X, y, optimizer: torch.optim.Optimizer, *, steps: int, loss: str = "mse",
                     record_every: int = 1, X_val=None, y_val=None, metric=None, callback=None,
                     threads: int | None = None) -> list[dict]:
    """Full-batch training of ``model`` with any optimizer, for ``steps`` steps; returns the history.

    Before the first step and after every ``record_every`` steps (and the last), a record {"step", "train_loss",
    "val_loss", "val_metric"} is stored (the validation entries when ``X_val``, ``y_val`` and ``metric`` are
    given), and ``callback(model, record)`` runs; it may return True to stop. ``train_loss`` is the loss at which
    that step was taken, i.e. before its update (at step 0: the initial loss); the validation loss is measured
    after the update. ``loss`` is "mse" (mean over points
    and outputs) or "ce", as in :func:`rfm.nets.train`. ``threads`` as there.

    Parameters
    ----------
    model : torch.nn.Module
        The network.
    X, y : torch.Tensor
        Training data.
    optimizer : torch.optim.Optimizer
        Any optimizer over the model's parameters.
    steps : int
        Steps.
    loss : {"mse", "ce"}, default "mse"
        The loss.
    record_every : int, default 1
        Steps between records.
    X_val, y_val : torch.Tensor, optional
        Validation data.
    metric : callable, optional
        A validation metric, as in :func:`rfm.nets.train`.
    callback : callable, optional
        ``callback(model, record)``; True stops.
    threads : int, optional
        As in :func:`rfm.nets.train`.

    Returns
    -------
    list of dict
        The records.
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    check_number("steps", steps, low=0, integer=True)
    check_number("record_every", record_every, low=1, integer=True)
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable as callback(model, record), got {type(callback).__name__}")

    def step_record(net, rec):  # full-batch epochs are steps
        rec["step"] = rec.pop("epoch")
        return callback is not None and bool(callback(net, rec))

    return nets.train(model, X, y, loss=loss, optimizer=optimizer, epochs=steps, batch_size=None,
                      eval_every=record_every, X_val=X_val, y_val=y_val, metric=metric, callback=step_record,
                      threads=threads, record_initial=True)
