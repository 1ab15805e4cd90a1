r"""Networks as classifiers on least-squares label codes: the codes of :class:`rfm.RFMClassifier`, for an MLP.

A classifier by least squares regresses **label codes** and reads the class back from its outputs:

* two classes: one column, 0 for the first class and 1 for the second; the prediction is class 1 when the output
  exceeds 1/2;
* more classes: one-hot columns; the prediction is the arg-max.

:func:`label_codes` and :func:`decode_label_codes` are the one implementation of these codes; the kernel
classifier (:class:`rfm.RFMClassifier`) uses them too, so that a network and an RFM trained on the same images
regress the same targets. :func:`fit_mlp_classifier` builds an :class:`rfm.nets.MLP` with one output per code
column and trains it by :func:`rfm.nets.train` on the squared error; :func:`predict_classes` decodes its outputs.
"""
from __future__ import annotations

import numbers

import torch

from .._checks import check_number
from ..metrics import accuracy
from .mlp import MLP, check_mlp, train


def class_indices(y, n_classes=None, name="y") -> tuple[torch.Tensor, int]:
    """Class labels as a long tensor of indices 0..c-1, and the number of classes c.

    Parameters
    ----------
    y : array-like or torch.Tensor
        1-D integer class indices (floats with integer values are accepted).
    n_classes : int, optional
        c; by default max(y) + 1 (2 for an empty y).
    name : str
        The labels' name, for the error messages.

    Returns
    -------
    (torch.Tensor, int)
        The indices and c.
    """
    t = torch.as_tensor(y)
    if t.ndim != 1:
        raise ValueError(f"{name} must be a 1-D tensor of class indices 0..c-1, got shape {tuple(t.shape)}")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        if t.dtype == torch.bool:
            raise TypeError(f"{name} must hold integer class indices 0..c-1, got booleans; use y.long()")
        if not torch.equal(t, t.round()):
            raise ValueError(f"{name} must hold integer class indices 0..c-1, got non-integer values")
    t = t.long()
    if n_classes is None:
        n_classes = int(t.max()) + 1 if t.numel() else 2
    if isinstance(n_classes, bool) or not isinstance(n_classes, numbers.Integral):
        raise TypeError(f"n_classes must be an integer >= 2, got {n_classes!r}")
    if n_classes < 2:
        raise ValueError(f"n_classes must be >= 2 (a classifier needs two classes), got {n_classes}")
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= n_classes):
        raise ValueError(f"{name} must hold class indices in 0..{n_classes - 1}, got values from {int(t.min())} to "
                         f"{int(t.max())}")
    return t, int(n_classes)


def label_codes(y, n_classes: int | None = None, *, dtype=torch.float32) -> torch.Tensor:
    """Least-squares targets of class indices ``y`` (0..c-1): shape (n, 1) with 0/1 for two classes, one-hot (n, c)
    for more. ``n_classes`` defaults to ``max(y) + 1``.

    Parameters
    ----------
    y : array-like of int, shape (n,)
        Class indices.
    n_classes : int, optional
        c.
    dtype : torch.dtype, default torch.float32
        The dtype.

    Returns
    -------
    torch.Tensor, shape (n, 1) or (n, c)
    """
    t, c = class_indices(y, n_classes)
    if c == 2:
        return t.to(dtype)[:, None]
    return torch.nn.functional.one_hot(t, c).to(dtype)


def decode_label_codes(out: torch.Tensor) -> torch.Tensor:
    """Class indices from outputs of shape (n, 1) (class 1 where the output exceeds 1/2) or (n, c) (arg-max).

    Parameters
    ----------
    out : torch.Tensor, shape (n, 1) or (n, c)
        Outputs.

    Returns
    -------
    torch.Tensor of int64, shape (n,)

    Raises
    ------
    ValueError
        If out is not a 2-D tensor.
    """
    if not isinstance(out, torch.Tensor) or out.ndim != 2:
        raise ValueError(f"out must be a 2-D tensor of outputs (n, 1) or (n, c), got "
                         f"{tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}")
    return (out[:, 0] > 0.5).long() if out.shape[1] == 1 else out.argmax(1)


def fit_mlp_classifier(X, y, n_classes: int, widths, *, init_scale=1.0, activation: str = "relu",
                       bias: bool = False, init: str = "normal", lr: float = 0.1, epochs: int = 100,
                       batch_size: int | None = None, weight_decay: float = 0.0, optimizer="sgd",
                       generator=0, device=None, dtype="float32", threads: int | None = None, callback=None,
                       eval_every: int | None = None) -> MLP:
    """An :class:`rfm.nets.MLP` ``d -> widths -> (1 or c)`` trained on the squared error to the label codes of ``y``.

    ``y`` holds class indices 0..``n_classes``-1. ``generator`` (a seed or ``torch.Generator``) draws the initial
    weights and the mini-batches (``batch_size`` None: full-batch gradient descent); a seed starts both streams.
    ``init_scale`` is one number or one per layer (e.g. ``[0.1, 1.0, 1.0]`` for a small first layer).
    ``callback(net, record)`` runs every ``eval_every`` epochs (default: only after the last) as in
    :func:`rfm.nets.train`, whose other arguments these are. Returns the trained network (in eval mode).

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    y : array-like of int, shape (n,)
        Class indices.
    n_classes : int
        c.
    widths : sequence of int
        Hidden widths.
    init_scale, activation, bias, init
        As in :class:`rfm.nets.MLP`.
    lr, epochs, batch_size, weight_decay, optimizer, generator, device, dtype, threads, callback, eval_every
        As in :func:`rfm.nets.train`.

    Returns
    -------
    MLP
        The trained network, in eval mode.
    """
    t, c = class_indices(y, n_classes)
    X = torch.as_tensor(X)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D tensor (n, d), got shape {tuple(X.shape)}")
    if X.shape[0] != t.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {t.shape[0]} labels")
    check_number("epochs", epochs, low=0, integer=True)
    Y = label_codes(t, c)
    net = MLP(X.shape[1], widths, Y.shape[1], activation=activation, bias=bias, init=init, init_scale=init_scale,
              generator=generator, dtype=dtype, device=device)
    param = next(net.parameters())
    train(net, X.to(device=param.device, dtype=param.dtype), Y.to(device=param.device, dtype=param.dtype),
          loss="mse", optimizer=optimizer, lr=lr, epochs=epochs, batch_size=batch_size, weight_decay=weight_decay,
          generator=generator, threads=threads, callback=callback, eval_every=eval_every or max(epochs, 1))
    return net


@torch.no_grad()
def predict_classes(net: MLP, X) -> torch.Tensor:
    """The classes (a CPU long tensor) a network trained by :func:`fit_mlp_classifier` predicts for the rows of X.

    Parameters
    ----------
    net : MLP
        A network from :func:`fit_mlp_classifier`.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.

    Returns
    -------
    torch.Tensor of int64, shape (n,)
        On the CPU.
    """
    check_mlp(net, "net")
    param = next(net.parameters())
    X = torch.as_tensor(X).to(device=param.device, dtype=param.dtype)
    return decode_label_codes(net(X)).cpu()


# rfm.models.conv still imports the pre-0.2 private name; it goes when it imports class_indices.
_class_indices = class_indices


def classifier_accuracy(net: MLP, X, y) -> float:
    """The share of the rows of X whose class, as :func:`predict_classes` reads it from ``net``, is the label in y.

    Parameters
    ----------
    net : rfm.nets.MLP
        A network trained by :func:`fit_mlp_classifier` (one output for two classes, else one per class).
    X : array-like of shape (n, d)
        The inputs.
    y : array-like of shape (n,)
        The class indices.

    Returns
    -------
    float
        The accuracy, in [0, 1].
    """
    return accuracy(y, predict_classes(net, X))
