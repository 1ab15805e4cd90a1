r"""Fully connected networks, their training, and the Neural Feature Ansatz.

A network with layers l = 0, ..., L-1 computes h_0 = x, h_{l+1} = sigma(W_l h_l + b_l) and f(x) = W_{L-1} h_{L-1}
(+ b_{L-1}): the last layer is a linear read-out. For every layer l,

* the **neural feature matrix** (NFM) is W_l^T W_l (d_l x d_l, on the layer's input space), optionally
  (W_l - W_l^0)^T (W_l - W_l^0) with the initial weights removed, as ``verify_deep_NFA.py`` of Radhakrishnan et al.
  does;
* the **AGOP with respect to the layer's input** is (1/n) sum_i sum_c grad_h f_c^{(l)}(h_l(x_i)) grad_h f_c^{(l)}(.)^T,
  where f^{(l)} is the sub-network from layer l on and h_l(x_i) the layer's inputs at the data. It is computed by
  :func:`rfm.agop` on that sub-network (autograd), so the package has one AGOP implementation.

The **Neural Feature Ansatz** (Radhakrishnan, Beaglehole, Pandit & Belkin, Science 2024) says that after training
W_l^T W_l is proportional to AGOP_l^alpha with alpha = 1/2; :func:`nfa_table` measures it for every layer as a
correlation of the flattened matrices (:func:`rfm.metrics.matrix_correlation`, ``"pearson"`` or ``"cosine"``), for
the trained network and for the same network at initialisation.
"""
from __future__ import annotations

import copy
import math
import numbers

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from .._checks import (
    check_bool,
    check_choice,
    check_choice_str,
    check_matrix,
    check_number,
    check_targets,
    resolve_dtype,
)
from .._compat import renamed_keyword
from ..core.agop import agop
from ..core.feature_matrix import feature_update
from ..data.modular import ModularData, check_prime
from ..metrics import matrix_correlation
from ..utils import check_generator, get_device
from .training import fit, num_threads

#: The activations of :class:`MLP` by name (``activation=``).
ACTIVATIONS = {
    "relu": torch.relu,
    "tanh": torch.tanh,
    "gelu": nn.functional.gelu,
    "sigmoid": torch.sigmoid,
    "quadratic": torch.square,
    "linear": lambda h: h,
}
#: The weight initialisations of :class:`MLP` (``init=``).
INITS = ("normal", "uniform")


# ----------------------------------------------------------------------------------------------------------------
# Argument checks (the ones every module needs are in rfm._checks; these are about networks)


def check_widths(widths) -> list[int]:
    """The hidden-layer widths of an MLP as a list of positive ints.

    Parameters
    ----------
    widths : sequence of int
        One width per hidden layer; ``[]`` for a linear model.

    Returns
    -------
    list of int
        The widths.
    """
    if isinstance(widths, numbers.Integral) and not isinstance(widths, bool):
        raise TypeError(f"widths must be a list or tuple of hidden-layer widths, got the int {widths!r}; for one "
                        f"hidden layer of width {widths} write [{widths}] (and [] for a linear model)")
    if isinstance(widths, torch.Tensor):
        widths = widths.tolist()
    if not isinstance(widths, (list, tuple, range, np.ndarray)):
        raise TypeError(f"widths must be a list or tuple of ints, e.g. [256] or [64, 64], got {widths!r} of type "
                        f"{type(widths).__name__}")
    out = []
    for i, w in enumerate(list(widths)):
        if isinstance(w, bool) or not isinstance(w, numbers.Integral):
            raise TypeError(f"widths[{i}] must be a positive integer (the number of units of hidden layer {i}), "
                            f"got {w!r} of type {type(w).__name__}")
        if w < 1:
            raise ValueError(f"widths[{i}] must be >= 1 (the number of units of hidden layer {i}), got {w!r}; "
                             "remove the layer instead of giving it width 0")
        out.append(int(w))
    return out


def _check_init_scale(init_scale, n_layers: int) -> list[float]:
    if isinstance(init_scale, numbers.Real) and not isinstance(init_scale, bool):
        scales = [init_scale] * n_layers
    elif isinstance(init_scale, (list, tuple, np.ndarray, torch.Tensor)):
        scales = list(init_scale.tolist() if isinstance(init_scale, (np.ndarray, torch.Tensor)) else init_scale)
    else:
        raise TypeError(f"init_scale must be a number or a list of numbers (one per layer, {n_layers} here), got "
                        f"{init_scale!r} of type {type(init_scale).__name__}")
    if len(scales) != n_layers:
        raise ValueError(f"init_scale must be one number or one per layer ({n_layers}: the hidden layers and the "
                         f"read-out), got {len(scales)} values {init_scale!r}")
    for l, s in enumerate(scales):
        check_number(f"init_scale[{l}]", s, low=0)
    return [float(s) for s in scales]


NORMALIZE = ("max", "trace", "fro")
KINDS = ("pearson", "cosine")


def _as_list(name, values, what):
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple, range, np.ndarray, torch.Tensor)):
        raise TypeError(f"{name} must be a list or tuple of {what}, e.g. {name}=[{'0' if what == 'ints' else '0.5'}]"
                        f", got {values!r}")
    values = values.tolist() if isinstance(values, (np.ndarray, torch.Tensor)) else list(values)
    if not values:
        raise ValueError(f"{name} is empty; give at least one value")
    return values


def _check_int_list(name, values):
    values = _as_list(name, values, "ints")
    for v in values:
        check_number(name, v, integer=True)
    return values


def _check_number_list(name, values):
    values = _as_list(name, values, "numbers")
    for v in values:
        check_number(name, v)
    return values


def _check_str_list(name, values):
    if isinstance(values, str):
        raise TypeError(f"{name} must be a list or tuple of strings, e.g. ({values!r},), got the string {values!r}")
    values = _as_list(name, values, "strings")
    for v in values:
        if not isinstance(v, str):
            raise TypeError(f"{name} must contain strings, got {v!r}")
    return values


def check_mlp(model, name="model") -> MLP:
    """Raise unless ``model`` is an :class:`MLP`.

    Parameters
    ----------
    model : object
        The model to check.
    name : str
        Its name, for the error message.

    Returns
    -------
    MLP
        ``model``.
    """
    if not isinstance(model, MLP):
        raise TypeError(f"{name} must be an rfm.nets.MLP (its layers and initial weights are read), got "
                        f"{type(model).__name__}; build the network with rfm.nets.MLP(d_in, [width], d_out)")
    return model


def check_input_features(X: torch.Tensor, model, name="X"):
    """For an MLP, raise unless X has as many columns as its first layer has inputs (other models pass).

    Parameters
    ----------
    X : torch.Tensor
        The inputs, shape (n, d).
    model : torch.nn.Module
        The network.
    name : str
        The inputs' name, for the error message.

    Returns
    -------
    None
    """
    if isinstance(model, MLP):
        d = model.layers[0].in_features
        if X.shape[1] != d:
            raise ValueError(f"{name} has {X.shape[1]} features (columns) but the network's input dimension d_in "
                             f"is {d}; pass data with {d} columns or build the MLP with d_in={X.shape[1]}")


class MLP(nn.Module):
    """A fully connected network ``d_in -> widths[0] -> (...) -> widths[-1] -> d_out``.

    Parameters
    ----------
    d_in, widths, d_out : input dimension, hidden widths (a list; ``[]`` gives a linear model), output dimension
    activation : "relu", "tanh", "gelu", "sigmoid", "quadratic" or "linear" (between layers, not after the last)
    bias : whether the layers have biases (the NFA papers use none); biases start at 0
    init : "normal" (W_ij ~ N(0, s^2 / fan_in)) or "uniform" (U(-s, s) / sqrt(fan_in), PyTorch's default for s = 1)
    init_scale : s, one number for every layer or one per layer, e.g. ``[0.1, 1.0]`` for a small first layer
    generator : seed or ``torch.Generator`` for the initial weights; dtype, device as in torch

    The initial weights and biases are kept as buffers (``W0_0``, ``b0_0``, ...), so that :func:`nfm` can remove
    them and :meth:`initial` can rebuild the network at initialisation.
    """

    def __init__(self, d_in: int, widths=(256,), d_out: int = 1, *, activation: str = "relu", bias: bool = False,
                 init: str = "normal", init_scale=1.0, generator=0, dtype="float32", device=None):
        super().__init__()
        check_number("d_in", d_in, low=1, integer=True)
        widths = check_widths(widths)
        check_number("d_out", d_out, low=1, integer=True)
        check_choice_str("activation", activation, ACTIVATIONS)
        check_choice_str("init", init, INITS)
        check_bool("bias", bias)
        dims = [int(d_in), *widths, int(d_out)]
        n_layers = len(dims) - 1
        scales = _check_init_scale(init_scale, n_layers)
        self.activation, self.init, self.init_scale = activation, init, scales
        self.act = ACTIVATIONS[activation]
        dtype, device = resolve_dtype(dtype), get_device(device) if device is not None else torch.device("cpu")
        g = check_generator(generator)
        self.layers = nn.ModuleList()
        for l, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
            lin = nn.Linear(a, b, bias=bias, dtype=dtype)
            if init == "normal":
                W = torch.randn(b, a, generator=g, dtype=torch.float64) * (scales[l] / math.sqrt(a))
            else:
                W = (2 * torch.rand(b, a, generator=g, dtype=torch.float64) - 1) * (scales[l] / math.sqrt(a))
            with torch.no_grad():
                lin.weight.copy_(W)
                if bias:
                    lin.bias.zero_()
            self.layers.append(lin)
            self.register_buffer(f"W0_{l}", lin.weight.detach().clone())
            if bias:
                self.register_buffer(f"b0_{l}", lin.bias.detach().clone())
        self.to(device)

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    def _check_layer(self, layer: int) -> int:
        check_number("layer", layer, low=0, high=self.n_layers - 1, integer=True)
        return layer

    def weight(self, layer: int) -> torch.Tensor:
        """The weight matrix W_l of layer ``layer`` (the live parameter, shape (out, in)).

        Parameters
        ----------
        layer : int
            A layer index, 0 to n_layers - 1.

        Returns
        -------
        torch.Tensor, shape (k_{l+1}, k_l)
        """
        return self.layers[self._check_layer(layer)].weight

    def initial_weight(self, layer: int) -> torch.Tensor:
        """W_l at initialisation (a buffer kept at construction).

        Parameters
        ----------
        layer : int
            A layer index, 0 to n_layers - 1.

        Returns
        -------
        torch.Tensor, shape (k_{l+1}, k_l)
        """
        return getattr(self, f"W0_{self._check_layer(layer)}")

    def forward_from(self, h: torch.Tensor, layer: int = 0) -> torch.Tensor:
        """The sub-network f^{(l)}: from the input h of layer ``layer`` to the output, shape (n, d_out).

        Parameters
        ----------
        h : torch.Tensor, shape (n, k_l)
            The input of layer ``layer``.
        layer : int, default 0
            The layer.

        Returns
        -------
        torch.Tensor, shape (n, d_out)
        """
        for l in range(self._check_layer(layer), self.n_layers):
            h = self.layers[l](h)
            if l < self.n_layers - 1:
                h = self.act(h)
        return h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The network's output f(x): :meth:`forward_from` at layer 0.

        Parameters
        ----------
        x : torch.Tensor, shape (n, d_in)
            Inputs.

        Returns
        -------
        torch.Tensor, shape (n, d_out)
        """
        return self.forward_from(x, 0)

    @torch.no_grad()
    def layer_input(self, X: torch.Tensor, layer: int) -> torch.Tensor:
        """h_l at the rows of X: X itself for layer 0, sigma(W_{l-1} h_{l-1} + b_{l-1}) after.

        Parameters
        ----------
        X : torch.Tensor, shape (n, d_in)
            Inputs.
        layer : int
            A layer index, 0 to n_layers - 1.

        Returns
        -------
        torch.Tensor, shape (n, k_l)
            Without gradient.
        """
        h = X
        for l in range(self._check_layer(layer)):
            h = self.act(self.layers[l](h))
        return h

    def initial(self) -> MLP:
        """A copy of the network with its initial weights (and biases) restored.

        Returns
        -------
        MLP
            A new network.
        """
        net = copy.deepcopy(self)
        with torch.no_grad():
            for l, lin in enumerate(net.layers):
                lin.weight.copy_(net.initial_weight(l))
                if lin.bias is not None:
                    lin.bias.copy_(getattr(net, f"b0_{l}"))
        return net


def quadratic_net(p: int, width: int = 256, *, init_scale: float = 1.0, generator=0, dtype="float64",
                  device=None):
    """The network of the paper's ``train_net.py`` for modulus ``p``: f(u) = W2 (W1 u)^2, u in R^{2p}, R^p out,
    no biases, every entry of a layer with fan-in m drawn from U[-s/sqrt(m), s/sqrt(m)] with s = ``init_scale``
    (the scaled Kaiming-uniform initialisation of the paper's code). It is

        rfm.nets.MLP(2p, [width], p, activation="quadratic", init="uniform", init_scale=s, bias=False)

    Train it with :func:`rfm.nets.train` (AdamW, ``loss="mse"`` on the one-hot targets, ``batch_size=32``) and a
    :class:`rfm.nets.callbacks.NetworkProgress` callback. Passing the *same* ``torch.Generator`` as ``generator``
    here and to ``nets.train`` draws the initial weights and then the mini-batch permutations from one stream, as
    the paper's code does with its one seed.

    Parameters
    ----------
    p : int
        The prime modulus (inputs R^{2p}, outputs R^p).
    width : int
        The number of hidden units.
    init_scale : float
        s in U[-s/sqrt(m), s/sqrt(m)].
    generator : int or torch.Generator
        Seed or generator of the initial weights.
    dtype, device
        As in torch.

    Returns
    -------
    MLP
        The network.
    """
    if isinstance(p, ModularData):
        raise TypeError("quadratic_net takes the modulus p, not the data set: pass data.p")
    p = check_prime(p)
    check_number("width", width, low=1, integer=True)
    return MLP(2 * p, [int(width)], p, activation="quadratic", init="uniform", init_scale=init_scale, bias=False,
               generator=generator, dtype=dtype, device=device)


# ----------------------------------------------------------------------------------------------------------------
# Training

#: The losses of :func:`train` (``loss=``).
LOSSES = ("mse", "ce")
#: The optimizers of :func:`train` by name (``optimizer=``; an optimizer instance is accepted too).
OPTIMIZERS = ("sgd", "adam")


def _loss_fn(loss):
    if loss == "mse":
        return lambda out, y: nn.functional.mse_loss(out, y)  # mean over samples and outputs, as torch's MSELoss
    return lambda out, y: nn.functional.cross_entropy(out, y)


def prepare_targets(y, n, loss, dtype, device, name="y", x_name="X"):
    """Targets as a tensor for ``loss``: finite (n, c) floats for "mse", 1-D integer labels >= 0 for "ce".

    Parameters
    ----------
    y : array-like or torch.Tensor
        The targets, one per row of the inputs.
    n : int
        The number of rows of the inputs.
    loss : {"mse", "ce"}
        The loss the targets are for.
    dtype, device
        The dtype ("mse") and device of the result.
    name, x_name : str
        The names of the targets and of the inputs, for the error messages.

    Returns
    -------
    torch.Tensor
        (n, c) floats for "mse", (n,) long labels for "ce".
    """
    if y is None:
        raise ValueError(f"{name} is None; pass the targets, one per row of {x_name}")
    if loss == "mse":
        t = check_targets(y, n, name, dtype=dtype, device=device)  # (n, c), finite
        return t
    if isinstance(y, torch.Tensor):
        t = y
    else:
        arr = np.asarray(y)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"with loss='ce', {name} must hold integer class labels, got dtype {arr.dtype}")
        t = torch.from_numpy(np.ascontiguousarray(arr))
    if t.ndim != 1 or t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise ValueError(f"with loss='ce', {name} must be a 1-D tensor of integer class labels 0..c-1, got "
                         f"shape {tuple(t.shape)} and dtype {t.dtype}; for one-hot targets use y.argmax(1), or "
                         "loss='mse'")
    if t.shape[0] != n:
        raise ValueError(f"{name} has {t.shape[0]} labels but {x_name} has {n} rows: they must have the same "
                         "number of samples")
    if n and int(t.min()) < 0:
        raise ValueError(f"with loss='ce', {name} must hold class labels >= 0, got {int(t.min())}; map the "
                         "classes to 0..c-1 first")
    return t.to(device=device, dtype=torch.long)


def _check_outputs(out: torch.Tensor, Y: torch.Tensor, loss: str, name: str = "y"):
    """The model's outputs must fit the targets: same shape for "mse", one column per class for "ce"."""
    if out.ndim != 2:
        raise ValueError(f"the model returns outputs of shape {tuple(out.shape)}; train needs (batch, n_outputs)")
    if loss == "mse" and out.shape != Y.shape:
        raise ValueError(f"the model returns {out.shape[1]} output(s) per sample but {name} has {Y.shape[1]} "
                         f"column(s); with loss='mse' they must match (build the network with d_out={Y.shape[1]}, "
                         "or pass one-hot targets for a classifier)")
    if loss == "ce" and int(Y.max()) >= out.shape[1]:
        raise ValueError(f"{name} has class label {int(Y.max())} but the model returns only {out.shape[1]} "
                         f"output(s) (classes 0..{out.shape[1] - 1}); build the network with "
                         f"d_out={int(Y.max()) + 1} or relabel the classes")


def _non_finite_loss(value: float, epoch: int, opt, where: str) -> FloatingPointError:
    lrs = sorted({g.get("lr") for g in opt.param_groups if "lr" in g}) if opt is not None else []
    lr = f"lr={lrs[0]:g}" if len(lrs) == 1 else "the learning rate"
    return FloatingPointError(
        f"the training loss became {value} at epoch {epoch} ({where}): the optimisation diverged, most likely "
        f"because {lr} is too large for this model and data; lower the learning rate (e.g. 10x), scale the inputs "
        "and targets, or use a smaller init_scale")


def train(model: nn.Module, X, y, *, loss: str = "mse", optimizer="sgd", lr: float = 0.1,
          epochs: int = 100, batch_size: int | None = None, momentum: float = 0.0, weight_decay: float = 0.0,
          X_val=None, y_val=None, metric=None, eval_every: int = 1, callback=None, generator=0,
          threads: int | None = None, progress: bool = False, record_initial: bool = False) -> list[dict]:
    """Train ``model`` in place on (X, y) by epochs of mini-batches and return its history, one record per
    evaluated epoch.

    Each mini-batch is one step of the package's one training loop, :func:`rfm.nets.training.fit`. Every
    ``eval_every`` epochs (and at the last) a record {"epoch", "train_loss", "val_loss", "val_metric"} is stored,
    where train_loss is the mean batch loss over the epoch (weighted by batch size) and the validation entries are
    there when ``X_val``, ``y_val`` (and ``metric``) are given. The inputs are checked before training (finite,
    matching lengths, outputs that fit the targets); a loss that becomes NaN or infinite raises
    ``FloatingPointError`` naming the epoch, before the step that would write it into the weights.

    Parameters
    ----------
    model : torch.nn.Module
        The network (e.g. :class:`MLP`), trained in place.
    X, y : array-like
        Inputs (n, d) and targets: (n,) or (n, c) for ``loss="mse"``, integer labels (n,) for ``"ce"``.
    loss : {"mse", "ce"}
        Mean squared error over samples and outputs, or cross-entropy.
    optimizer : {"sgd", "adam"} or torch.optim.Optimizer
        A name (then ``lr``, ``momentum``, ``weight_decay`` build it) or an optimizer already built on the model's
        parameters.
    lr, momentum, weight_decay : float
        The named optimizer's settings (momentum for SGD only).
    epochs : int
        Passes over the data.
    batch_size : int, optional
        None: full-batch gradient descent; else mini-batches of a fresh permutation each epoch.
    X_val, y_val : array-like, optional
        Validation data, given together; only measured.
    metric : callable, optional
        ``metric(outputs, y_val) -> float``, recorded as "val_metric".
    eval_every : int
        Record every this many epochs (and at the last).
    callback : callable, optional
        ``callback(model, record)`` after each record; True stops training.
    generator : int or torch.Generator
        Seed or CPU generator of the mini-batch permutations.
    threads : int, optional
        torch CPU threads during training (restored after): small networks train fastest on one thread (on a
        busy 2-core machine one Adam step of a 50-256-1 network took 1 ms on one thread and 9 ms on two).
    progress : bool
        Show a progress bar over the epochs.
    record_initial : bool
        First store a record for epoch 0, the initial loss on all of X.

    Returns
    -------
    list of dict
        The records.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (e.g. rfm.nets.MLP), got {type(model).__name__}")
    params = [q for q in model.parameters() if q.requires_grad]
    if not params:
        raise ValueError("model has no trainable parameters (none, or all with requires_grad=False): there is "
                         "nothing to train")
    check_choice_str("loss", loss, LOSSES)
    if isinstance(optimizer, torch.optim.Optimizer):
        ids = {id(q) for group in optimizer.param_groups for q in group["params"]}
        if not ids & {id(q) for q in params}:
            raise ValueError("optimizer was built on other parameters than the model's; build it on this model, "
                             "e.g. torch.optim.AdamW(model.parameters(), lr=1e-3)")
    else:
        if not isinstance(optimizer, str):
            raise TypeError(f"optimizer must be 'sgd', 'adam' or a torch.optim.Optimizer instance, got "
                            f"{type(optimizer).__name__}; for another optimizer pass an instance, e.g. "
                            "torch.optim.AdamW(model.parameters(), lr=1e-3)")
        check_choice("optimizer", optimizer, OPTIMIZERS)
    check_number("lr", lr, low=0, low_inclusive=False)
    check_number("epochs", epochs, low=0, integer=True)
    check_number("momentum", momentum, low=0, high=1, high_inclusive=False)
    check_number("weight_decay", weight_decay, low=0)
    check_number("eval_every", eval_every, low=1, integer=True)
    if metric is not None and not callable(metric):
        raise TypeError(f"metric must be a function metric(outputs, y_val) -> number, or None; got "
                        f"{type(metric).__name__}")
    if metric is not None and X_val is None:
        raise ValueError("metric is evaluated on the validation data: pass X_val and y_val with it")
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be a function callback(model, record) -> bool, or None; got "
                        f"{type(callback).__name__}")
    check_bool("progress", progress)
    check_bool("record_initial", record_initial)
    param = params[0]
    X = check_matrix(X, "X", dtype=param.dtype, device=param.device).detach()
    check_input_features(X, model, "X")
    n = X.shape[0]
    Y = prepare_targets(y, n, loss, param.dtype, param.device)
    if batch_size is None:
        bs = n
    else:
        bs = int(check_number("batch_size", batch_size, low=1, integer=True))
    if (X_val is None) != (y_val is None):
        raise ValueError(f"X_val and y_val must be given together, got only {'X_val' if y_val is None else 'y_val'}")
    Y_val = None
    if X_val is not None:
        X_val = check_matrix(X_val, "X_val", dtype=param.dtype, device=param.device).detach()
        if X_val.shape[1] != X.shape[1]:
            raise ValueError(f"X_val has {X_val.shape[1]} features but X has {X.shape[1]}: validation data must "
                             "have the same columns as the training data")
        Y_val = prepare_targets(y_val, X_val.shape[0], loss, param.dtype, param.device, "y_val", "X_val")
        if loss == "mse" and Y_val.shape[1] != Y.shape[1]:
            raise ValueError(f"y_val has {Y_val.shape[1]} column(s) but y has {Y.shape[1]}: they must match")
    g = check_generator(generator)
    lossf = _loss_fn(loss)
    if isinstance(optimizer, torch.optim.Optimizer):
        opt = optimizer
    elif optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    history = []

    def record(epoch, train_loss):
        rec = {"epoch": epoch, "train_loss": train_loss}
        if X_val is not None:
            with torch.no_grad():
                out = model(X_val)
                if not history:
                    _check_outputs(out, Y_val, loss, "y_val")
                rec["val_loss"] = float(lossf(out, Y_val))
                if metric is not None:
                    rec["val_metric"] = float(metric(out, Y_val))
        history.append(rec)
        return callback is not None and bool(callback(model, rec))

    model.train()
    with num_threads(threads):
        if record_initial:
            with torch.no_grad():
                out = model(X)
                _check_outputs(out, Y, loss)
                initial = float(lossf(out, Y))
                if not math.isfinite(initial):
                    raise FloatingPointError(
                        f"the loss at initialisation (epoch 0) is {initial}: the model's outputs overflow before "
                        "any training; scale the inputs or use a smaller init_scale")
                if record(0, initial):
                    model.eval()
                    return history
    # epochs of mini-batches as steps of the one loop: step t is batch (t - 1) % per_epoch of epoch ceil(t / per_epoch)
    per_epoch = -(-n // bs)
    epoch_state = {"order": None, "total": 0.0, "start": 0}
    bar = tqdm(total=epochs, desc="train", disable=not progress, leave=False)

    def batch_loss(t):
        epoch, b = (t - 1) // per_epoch + 1, (t - 1) % per_epoch
        if b == 0:
            epoch_state["order"] = torch.randperm(n, generator=g).to(X.device) if bs < n else None
            epoch_state["total"] = 0.0
        start = epoch_state["start"] = b * bs
        order = epoch_state["order"]
        xb, yb = (X, Y) if order is None else (X[order[start:start + bs]], Y[order[start:start + bs]])
        epoch_state["size"] = xb.shape[0]
        out = model(xb)
        if epoch == 1 and start == 0:
            _check_outputs(out, yb if loss == "mse" else Y, loss)
        return lossf(out, yb)

    def after_step(t, batch):
        epoch_state["total"] += float(batch) * epoch_state["size"]
        if t % per_epoch:
            return False
        epoch = t // per_epoch
        bar.update(1)
        if epoch % eval_every and epoch != epochs:
            return False
        return record(epoch, epoch_state["total"] / n)

    def divergence(t, value):
        return _non_finite_loss(value, (t - 1) // per_epoch + 1, opt, f"mini-batch starting at sample "
                                f"{epoch_state['start']}" if bs < n else "full batch")

    try:
        fit(opt, batch_loss, epochs * per_epoch, callback=after_step, diverged=divergence, threads=threads)
    finally:
        bar.close()
    model.eval()
    return history


# ----------------------------------------------------------------------------------------------------------------
# Neural feature matrices and per-layer AGOPs


def nfm(model: MLP, layer: int = 0, *, subtract_init: bool = False, diagonal: bool = False) -> torch.Tensor:
    """The neural feature matrix W_l^T W_l, or (W_l - W_l^0)^T (W_l - W_l^0) with ``subtract_init`` (float64).

    With ``diagonal``, only its diagonal (the squared column norms of W_l), without forming the d x d matrix.

    Parameters
    ----------
    model : MLP
        The network.
    layer : int, default 0
        The layer.
    subtract_init : bool, default False
        Use W_l - W_l^0.
    diagonal : bool, default False
        Only the diagonal.

    Returns
    -------
    torch.Tensor, float64, shape (k_l, k_l) or (k_l,)
    """
    check_mlp(model)
    check_bool("subtract_init", subtract_init)
    check_bool("diagonal", diagonal)
    W = model.weight(layer).detach().to(torch.float64)
    if subtract_init:
        W = W - model.initial_weight(layer).to(torch.float64)
    return W.square().sum(0) if diagonal else W.T @ W


def layer_agop(model: MLP, X, layer: int = 0, *, center: bool = False, power: float = 1.0,
               normalize: str | None = None, batch_size: int | None = None,
               centre: bool | None = None) -> torch.Tensor:
    """AGOP of the network with respect to the input of layer ``layer``, at the data X.

    The gradients are those of the sub-network f^{(l)} = :meth:`MLP.forward_from` at h_l(x_i), by :func:`rfm.agop`.
    Layer 0 gives the usual input AGOP of the whole network.

    Parameters
    ----------
    model : MLP
        The network.
    X : array-like or torch.Tensor, shape (n, d)
        The data (converted to the network's dtype and device).
    layer : int, default 0
        The layer whose input the gradients are taken with respect to.
    center : bool, default False
        Subtract each output's mean gradient.
    power : float, default 1.0
        Matrix power (> 0), as in :func:`rfm.feature_update`.
    normalize : str or None, default None
        Normalisation, as in :func:`rfm.feature_update`.
    batch_size : int or None, default None
        Rows per backward pass (None: all at once).
    centre : bool or None, default None
        Deprecated name of ``center`` (used when given, with a DeprecationWarning).

    Returns
    -------
    torch.Tensor, float64, shape (d_l, d_l)
        d_l the width of the input of layer ``layer``.

    Raises
    ------
    TypeError, ValueError
        If a parameter is of the wrong type or out of range, or X does not have the network's input width.
    """
    center = renamed_keyword("rfm.nets.layer_agop", "centre", "center", centre, center)
    check_mlp(model)
    check_bool("center", center)
    check_number("power", power, low=0, low_inclusive=False)
    if normalize is not None:
        check_choice_str("normalize", normalize, NORMALIZE)
    if batch_size is not None:
        check_number("batch_size", batch_size, low=1, integer=True)
    param = next(model.parameters())
    X = check_matrix(X, "X", dtype=param.dtype, device=param.device).detach()
    check_input_features(X, model, "X")
    H = model.layer_input(X, layer)
    return agop(lambda h: model.forward_from(h, layer), H, batch_size=batch_size, center=center, power=power,
                normalize=normalize)


def nfa_table(model: MLP, X, *, layers=None, powers=(0.5, 1.0), kinds=("pearson", "cosine"),
              subtract_init: bool = False, center: bool = False, batch_size: int | None = None,
              centre: bool | None = None) -> list[dict]:
    """The per-layer NFA table: records {"layer", "power", "kind", "trained", "init", "init_nfa"} with

    * ``trained``  = corr(NFM_l, AGOP_l(f)^power): the ansatz for the trained network f;
    * ``init``     = corr(NFM_l at initialisation, AGOP_l(f)^power): how much of the learned AGOP the initial
      weights already carried -- the baseline the trained value is compared with;
    * ``init_nfa`` = corr(NFM_l at initialisation, AGOP_l(f_0)^power): the ansatz for the network at
      initialisation f_0. It is not small: AGOP_l(f_0) is built from W_l^0 itself (for one hidden layer it is
      W^0T D W^0 averaged over the data), so it shows how much correlation the algebra alone gives.

    ``subtract_init`` applies to the trained NFM only (at initialisation it would be 0). ``layers`` defaults to
    every layer but the linear read-out, whose AGOP is exactly W^T W (the gradient of f_c = w_c . h is w_c), so
    that its correlation with AGOP^1 is 1 by construction. Each layer's AGOP is computed once per network.

    Parameters
    ----------
    model : MLP
        The trained network (its initial weights are kept by the MLP).
    X : array-like or torch.Tensor, shape (n, d)
        The data the AGOPs average over.
    layers : sequence of int, optional
        The layers (default: all but the read-out).
    powers : sequence of float, default (0.5, 1.0)
        Powers (> 0) of the AGOP.
    kinds : sequence of {"pearson", "cosine"}, default ("pearson", "cosine")
        Correlations, as in :func:`rfm.matrix_correlation`.
    subtract_init : bool, default False
        Use W_l - W_l^0 in the trained NFM.
    center : bool, default False
        Centre the AGOPs (subtract each output's mean gradient).
    batch_size : int or None, default None
        Rows per backward pass.
    centre : bool or None, default None
        Deprecated name of ``center`` (used when given, with a DeprecationWarning).

    Returns
    -------
    list of dict
        One record per (layer, power, kind), with float values under "trained", "init" and "init_nfa".
    """
    center = renamed_keyword("rfm.nets.nfa_table", "centre", "center", centre, center)
    check_mlp(model)
    layers = range(max(1, model.n_layers - 1)) if layers is None else _check_int_list("layers", layers)
    for l in layers:
        model._check_layer(l)
    powers = _check_number_list("powers", powers)
    for p in powers:
        check_number("powers", p, low=0, low_inclusive=False)
    kinds = _check_str_list("kinds", kinds)
    for kind in kinds:
        check_choice("kinds", kind, KINDS)
    check_bool("subtract_init", subtract_init)
    check_bool("center", center)
    param = next(model.parameters())
    X = check_matrix(X, "X", dtype=param.dtype, device=param.device).detach()
    check_input_features(X, model, "X")
    net0 = model.initial()
    rows = []
    for l in layers:
        F, F0 = nfm(model, l, subtract_init=subtract_init), nfm(net0, l)
        A = layer_agop(model, X, l, center=center, batch_size=batch_size)
        A0 = layer_agop(net0, X, l, center=center, batch_size=batch_size)
        for p in powers:
            G, G0 = feature_update(A, p), feature_update(A0, p)
            for kind in kinds:
                rows.append({"layer": l, "power": p, "kind": kind, "trained": matrix_correlation(F, G, kind),
                             "init": matrix_correlation(F0, G, kind), "init_nfa": matrix_correlation(F0, G0, kind)})
    return rows


def format_nfa_table(rows: list[dict]) -> str:
    """The table of :func:`nfa_table` as aligned text, one line per layer, power and kind.

    Parameters
    ----------
    rows : list of dict
        The records of :func:`nfa_table`.

    Returns
    -------
    str

    Raises
    ------
    TypeError, ValueError
        If rows is not such a list.
    """
    keys = ("layer", "power", "kind", "init", "trained", "init_nfa")
    if not isinstance(rows, (list, tuple)):
        raise TypeError(f"rows must be the list returned by nfa_table, got {type(rows).__name__}")
    for i, r in enumerate(rows):
        missing = [k for k in keys if not isinstance(r, dict) or k not in r]
        if missing:
            raise ValueError(f"rows[{i}] is not a record of nfa_table: it lacks {missing}; pass nfa_table(...)'s "
                             "result")
    lines = [f"{'layer':>5} {'power':>5} {'kind':>8} {'init':>7} {'trained':>8} {'init_nfa':>9}"]
    lines += [f"{r['layer']:>5} {r['power']:>5g} {r['kind']:>8} {r['init']:>7.3f} {r['trained']:>8.3f} "
              f"{r['init_nfa']:>9.3f}" for r in rows]
    return "\n".join(lines)
