r"""The one training loop of the package's networks: zero the gradients, take a loss, backpropagate, step, record.

Every network the package trains by a torch optimizer goes through :func:`fit`; what varies is passed in:

* ``loss_at(step)`` -- the loss of the step's batch (a mini-batch of a permutation, fresh prompts, the observed
  entries of a matrix, ...), built after the gradients are zeroed;
* ``callback(step, loss)`` -- runs after each update with the loss at which the step was taken (a detached
  tensor); it records what it wants (every k steps, at the end of an epoch) and returns True to stop;
* ``diverged(step, loss)`` -- the error to raise when the loss is not finite (checked before the update, so the
  weights are never overwritten with NaN); None skips the check (and the device sync it costs).

The drivers over it: :func:`rfm.nets.train` (epochs of mini-batches of (X, y), a record per epoch and a
``callback(model, record)``), :func:`rfm.nets.optim.train_full_batch` (steps of full-batch training with any
optimizer), :func:`rfm.nets.icl.train_online` (fresh prompts at every step),
:func:`rfm.nets.linear.deep_linear_completion`, :func:`rfm.nets.linear.diagonal_network_regression` and
:func:`rfm.nets.saddle.escape_direction` (ascent on the layers' spheres, :class:`rfm.nets.saddle.SphereAscent`).

The loops with closed-form updates (no autograd) are not written through it: the two-layer network of
:mod:`rfm.nets.two_layer` (GD and SGD by the formulas of its gradients, the catapult chapters' fast path) and the
matrix factorisations of :mod:`rfm.nets.qwem` and :mod:`rfm.nets.barlow_twins` (W <- W - lr (W W^T - M) W and its
Barlow Twins analogue) compute their updates by formulas; autograd would give the same numbers only up to
round-off, not the same floating-point operations.
"""
from __future__ import annotations

import contextlib
import math

import torch

from .._checks import check_number

__all__ = ["fit", "num_threads"]


@contextlib.contextmanager
def num_threads(threads: int | None):
    """Run a block with ``threads`` torch CPU threads (None: unchanged), restoring the previous number after.

    Parameters
    ----------
    threads : int or None
        The number of CPU threads; None leaves torch's setting as it is.

    Returns
    -------
    contextlib.AbstractContextManager
        The context.
    """
    if threads is None:
        yield
        return
    check_number("threads", threads, low=1, integer=True)
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def _generic_divergence(step: int, loss: float) -> FloatingPointError:
    return FloatingPointError(f"the training loss became {loss} at step {step}: the optimisation diverged; lower the "
                              "learning rate")


def fit(optimizer: torch.optim.Optimizer, loss_at, steps: int, *, callback=None, diverged=_generic_divergence,
        threads: int | None = None) -> int:
    """Take ``steps`` optimizer steps on the losses ``loss_at(1), loss_at(2), ...``; return the steps taken.

    Each step is ``optimizer.zero_grad(set_to_none=True)``, ``loss = loss_at(step)``, a finiteness check (when
    ``diverged`` is given), ``loss.backward()``, ``optimizer.step()``, then ``callback(step, loss)``, which stops
    the loop by returning True. The loop runs with gradients enabled (also under ``torch.no_grad()``) and with
    ``threads`` torch CPU threads.

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
        Built on the parameters to train.
    loss_at : callable
        ``loss_at(step) -> torch.Tensor``, the scalar loss of step ``step`` (1-based).
    steps : int
        The number of steps (0: nothing is done).
    callback : callable, optional
        ``callback(step, loss) -> bool`` after each update, with the step's loss detached; True stops.
    diverged : callable or None
        ``diverged(step, loss) -> Exception`` for a loss (a float) that is NaN or infinite, raised before the
        update; by default a ``FloatingPointError`` naming the step. None: no check.
    threads : int, optional
        torch CPU threads during the loop (restored after).

    Returns
    -------
    int
        The number of steps taken (fewer than ``steps`` when the callback stopped the loop).

    Examples
    --------
    >>> import torch
    >>> w = torch.zeros(1, requires_grad=True)
    >>> fit(torch.optim.SGD([w], lr=0.5), lambda t: ((w - 1) ** 2).sum(), 20)
    20
    >>> round(float(w), 6)
    1.0
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    if not callable(loss_at):
        raise TypeError(f"loss_at must be a function loss_at(step) -> loss tensor, got {type(loss_at).__name__}")
    check_number("steps", steps, low=0, integer=True)
    for name, fn in (("callback", callback), ("diverged", diverged)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{name} must be a function or None, got {type(fn).__name__}")
    with num_threads(threads), torch.enable_grad():
        for step in range(1, int(steps) + 1):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_at(step)
            if diverged is not None:
                value = float(loss.detach())
                if not math.isfinite(value):
                    raise diverged(step, value)
            loss.backward()
            optimizer.step()
            if callback is not None and callback(step, loss.detach()):
                return step
    return int(steps)
