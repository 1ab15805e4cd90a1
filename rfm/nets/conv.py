r"""Convolutional networks seen through their patches: the convolutional Neural Feature Ansatz.

A convolution with filters W (C_out x C_in x q x q) acts on every q x q patch u_p of its input alike (its output at
position p is W u_p, :mod:`rfm.core.patches`). Beaglehole, Radhakrishnan, Pandit & Belkin (code aradha/convrfm)
state the *convolutional Neural Feature Ansatz*: the filter feature matrix W^T W (:func:`filter_nfm`) is
proportional to the AGOP of the network taken with respect to the patches of the layer,

    patch-AGOP = (1/n) sum_x sum_c sum_p grad_{u_p} f_c(x) grad_{u_p} f_c(x)^T        (C_in q^2 x C_in q^2)

(:func:`patch_agop`: a sum over the patches, a mean over the images, as the authors' ConvRFM code accumulates
it). :class:`ConvNet` is a small bias-free CNN to train (with :func:`rfm.nets.train`, which takes any module)
and measure it on; :func:`conv_from_feature_matrix` draws a frozen convolution whose filter covariance is a
learned patch metric (the featurisation step of Deep ConvRFM, :mod:`rfm.models.conv`).

Everything runs on the device of the input (or of the network).
"""
from __future__ import annotations

import copy
import math

import torch
from torch import nn

from .._checks import check_number, resolve_dtype, to_tensor
from ..core.agop import AGOPAccumulator, jacobians
from ..core.blocks import resolve_mem_bytes
from ..core.feature_matrix import FeatureMatrix, feature_update
from ..core.patches import image_shape, padding_amounts, unfold
from ..metrics import matrix_correlation
from ..utils import make_generator
from .alignment import spectrum_matched

__all__ = ["ConvNet", "cnfa_table", "conv_from_feature_matrix", "conv_layers", "conv_patches", "filter_nfm",
           "patch_agop", "patch_gradients"]

def _conv_settings(conv: nn.Conv2d):
    q, st, dil = tuple(conv.kernel_size), tuple(conv.stride), tuple(conv.dilation)
    return q, st, padding_amounts(conv.padding, q, dil, st), dil, conv.padding_mode


def conv_patches(conv: nn.Conv2d, h: torch.Tensor) -> torch.Tensor:
    """The patches a ``torch.nn.Conv2d`` multiplies by its filters, with its own stride, padding, padding mode and
    dilation.

    Parameters
    ----------
    conv : torch.nn.Conv2d
        The layer (groups 1).
    h : torch.Tensor
        Its input (n, C_in, H, W).

    Returns
    -------
    torch.Tensor
        (n, P, C_in q^2), in the order of the flattened filters.
    """
    _check_conv(conv)
    return unfold(h, *_conv_settings(conv))[0]


def _check_conv(conv):
    if not isinstance(conv, nn.Conv2d):
        raise TypeError(f"expected a torch.nn.Conv2d, got {type(conv).__name__}")
    if conv.groups != 1:
        raise ValueError(f"grouped convolutions (groups={conv.groups}) are not supported: the filter matrix W is "
                         "C_out x C_in q^2 only for groups=1")
    return conv


def filter_nfm(conv) -> torch.Tensor:
    """The filter feature matrix W^T W, with W reshaped to C_out x C_in q^2.

    Parameters
    ----------
    conv : torch.nn.Conv2d or tensor
        A layer (groups 1) or its weight tensor (C_out, C_in, qh, qw).

    Returns
    -------
    torch.Tensor
        float64 (C_in q^2, C_in q^2).
    """
    if isinstance(conv, nn.Module):
        W = _check_conv(conv).weight
    else:
        W = to_tensor(conv, "conv")
        if W.ndim != 4:
            raise ValueError(f"a filter tensor must be 4-D (C_out, C_in, qh, qw), got shape {tuple(W.shape)}")
    W = W.detach().to(torch.float64).reshape(W.shape[0], -1)
    if not bool(torch.isfinite(W).all()):
        raise ValueError("the filters contain NaN or infinite values")
    return W.T @ W



# ----------------------------------------------------------------------------------------------------------------
# The patch-AGOP of a network


class _Stop(Exception):
    pass


def conv_layers(model: nn.Module) -> list[tuple[str, nn.Conv2d]]:
    """The ``torch.nn.Conv2d`` modules of a model with their names.

    Parameters
    ----------
    model : torch.nn.Module

    Returns
    -------
    list of (str, torch.nn.Conv2d)
        In the order of ``model.named_modules()``.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Conv2d)]


def _conv_layer(model, layer) -> nn.Conv2d:
    convs = conv_layers(model)
    if not convs:
        raise ValueError("model has no torch.nn.Conv2d layer")
    if isinstance(layer, nn.Conv2d):
        if not any(m is layer for _, m in convs):
            raise ValueError("layer is a Conv2d that is not part of model")
        return _check_conv(layer)
    if isinstance(layer, str):
        names = dict(convs)
        if layer not in names:
            raise ValueError(f"model has no Conv2d named {layer!r}; its Conv2d layers are {list(names)}")
        return _check_conv(names[layer])
    check_number("layer", layer, low=-len(convs), high=len(convs) - 1, integer=True)
    return _check_conv(convs[layer][1])


def _layer_input(model, conv, Xb) -> torch.Tensor:
    """The input of ``conv`` when the model runs on Xb (the forward pass stops there)."""
    seen = {}

    def grab(mod, inp):
        seen["h"] = inp[0].detach()
        raise _Stop

    handle = conv.register_forward_pre_hook(grab)
    try:
        with torch.no_grad():
            model(Xb)
    except _Stop:
        pass
    finally:
        handle.remove()
    if "h" not in seen:
        raise ValueError("the chosen Conv2d layer is not used when the model runs on X")
    return seen["h"]


def _conv_from_patches(conv, U, grid):
    """conv's output (b, C_out, H', W') computed from its patches U (b, P, C_in q^2)."""
    W = conv.weight.reshape(conv.weight.shape[0], -1)
    out = (U @ W.T).transpose(1, 2).reshape(U.shape[0], W.shape[0], *grid)
    if conv.bias is not None:
        out = out + conv.bias[:, None, None]
    return out


def _as_model_input(model, X):
    param = next(model.parameters(), None)
    t = to_tensor(X, "X")
    if t.ndim < 2 or t.shape[0] < 1:
        raise ValueError(f"X must be a batch of inputs (n, ...) with n >= 1, got shape {tuple(t.shape)}")
    t = t.to(dtype=param.dtype if param is not None else torch.float32,
             device=param.device if param is not None else t.device)
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"X contains {int((~torch.isfinite(t)).sum())} NaN or infinite value(s)")
    return t


def patch_gradients(model: nn.Module, X, layer=0) -> torch.Tensor:
    """The gradients of every output of ``model`` with respect to every patch of a conv layer's input, by autograd
    (:func:`rfm.jacobians`).

    The layer's output is recomputed from its patches U as U W^T (plus its bias), and the network is
    differentiated with respect to U. The model must act image by image (no batch statistics: call
    ``model.eval()`` for batch norm).

    Parameters
    ----------
    model : torch.nn.Module
    X : tensor
        Inputs as the model takes them.
    layer : int, str or torch.nn.Conv2d, default 0
        An index into :func:`conv_layers`, a name, or the module.

    Returns
    -------
    torch.Tensor
        (n, c, P, C_in q^2).
    """
    conv = _conv_layer(model, layer)
    X = _as_model_input(model, X)
    q, st, pads, dil, mode = _conv_settings(conv)
    h = _layer_input(model, conv, X)
    U, grid = unfold(h, q, st, pads, dil, mode)
    b, P, D = U.shape

    def f(Uflat):
        def replace(mod, inp, out):
            return _conv_from_patches(conv, Uflat.reshape(b, P, D), grid)

        handle = conv.register_forward_hook(replace)
        try:
            return model(X)
        finally:
            handle.remove()

    G = jacobians(f, U.reshape(b, P * D))
    return G.reshape(b, G.shape[1], P, D)


def _auto_batch(model, conv, X, mem_bytes: int) -> int:
    """Images per backward pass of :func:`patch_agop` within ``mem_bytes``: one image's patches U (P x D) and its
    gradients (c x P x D, in the model's dtype and again in float64 for the AGOP), with room for autograd's copies."""
    q, st, pads, dil, mode = _conv_settings(conv)
    U, _ = unfold(_layer_input(model, conv, X[:1]), q, st, pads, dil, mode)
    with torch.no_grad():
        out = model(X[:1])
    c = out[0].numel()
    per_image = U[0].numel() * (X.element_size() * (2 * c + 2) + 8 * c)
    return max(1, min(X.shape[0], mem_bytes // max(1, 2 * per_image)))


def patch_agop(model: nn.Module, X, layer=0, *, batch_size: int | None = None, mem_bytes: int | None = None,
               power: float = 1.0, normalize: str | None = None) -> torch.Tensor:
    """The patch-AGOP of a conv layer: (1/n) sum_x sum_c sum_p g g^T with g = grad_{u_p} f_c(x) (float64,
    C_in q^2 x C_in q^2), from :func:`patch_gradients`.

    Parameters
    ----------
    model : torch.nn.Module
        Maps a batch of inputs to (b,) or (b, c) outputs, image by image.
    X : tensor
        Inputs as the model takes them (e.g. flattened images for :class:`ConvNet`), on any device (moved to the
        model's).
    layer : int, str or torch.nn.Conv2d, default 0
        Which convolution: an index into :func:`conv_layers`, its name, or the module.
    batch_size : int or None
        Images per backward pass; the result does not depend on it. None: as many as fit the working-memory budget
        ``mem_bytes`` (the gradients of b images take about b c P C_in q^2 float64 numbers, a few times over).
    mem_bytes : int or None
        The budget for ``batch_size=None`` (None: :func:`rfm.core.blocks.default_mem_bytes` of the model's device).
    power, normalize : as :func:`rfm.feature_update` (M = normalize(AGOP^power)).

    Returns
    -------
    torch.Tensor
        float64 (C_in q^2, C_in q^2).

    Examples
    --------
    >>> import torch
    >>> from rfm.nets.conv import patch_agop
    >>> w = torch.randn(1, 1, 3, 3, dtype=torch.float64)
    >>> net = torch.nn.Sequential(torch.nn.Conv2d(1, 1, 3, bias=False, dtype=torch.float64),
    ...                           torch.nn.Flatten(), torch.nn.Linear(36, 1, bias=False, dtype=torch.float64))
    >>> with torch.no_grad():
    ...     _ = net[0].weight.copy_(w); _ = net[2].weight.fill_(1.0)
    >>> A = patch_agop(net, torch.randn(4, 1, 8, 8, dtype=torch.float64))
    >>> torch.allclose(A, 36 * w.reshape(-1, 1) @ w.reshape(1, -1))    # f = sum_p w.u_p: g = w at 36 patches
    True
    """
    conv = _conv_layer(model, layer)
    X = _as_model_input(model, X)
    n = X.shape[0]
    if batch_size is None:
        bs = _auto_batch(model, conv, X, resolve_mem_bytes(mem_bytes, X.device))
    else:
        bs = int(check_number("batch_size", batch_size, low=1, integer=True))
    acc = None
    for start in range(0, n, bs):
        G = patch_gradients(model, X[start:start + bs], layer)  # (b, c, P, D)
        if acc is None:
            acc = AGOPAccumulator(G.shape[1] * G.shape[2], G.shape[3], device=G.device)
        acc.add(G.reshape(G.shape[0], -1, G.shape[3]))
    A = acc.result()
    if power == 1.0 and normalize is None:
        return A
    return feature_update(A, power, normalize)


def cnfa_table(model: nn.Module, X, *, initial: nn.Module | None = None, layers=None, generator=0,
               batch_size: int | None = None) -> list[dict]:
    """The convolutional Neural Feature Ansatz, layer by layer, with its controls.

    For each conv layer l (``layers``: indices into :func:`conv_layers`; None: all), the uncentred cosine
    (:func:`rfm.matrix_correlation` ``"cosine"``, the authors' correlation) of the filter feature matrix W^T W
    (:func:`filter_nfm`) and the patch-AGOP (:func:`patch_agop`, at the inputs X) of ``model``; the same for
    ``initial`` (the network before training, when given); and the **spectrum-matched** control: the eigenvalues of
    the model's W^T W in Haar-random directions (:func:`rfm.nets.alignment.spectrum_matched`) against the model's
    patch-AGOP.

    Parameters
    ----------
    model : torch.nn.Module
        The trained network.
    X : tensor
        Inputs at which the patch-AGOPs are taken.
    initial : torch.nn.Module, optional
        The network at initialisation (same conv layers).
    layers : sequence of int, optional
        Indices into :func:`conv_layers` (None: all).
    generator : int or torch.Generator, default 0
        For the Haar-random directions of the control (one draw per layer, in order).
    batch_size : int, optional
        Images per backward pass of :func:`patch_agop`.

    Returns
    -------
    list of dict
        One per layer: ``layer`` (1-based), ``trained``, ``init`` (with ``initial``), ``spectrum-matched``, and the
        matrices ``G``, ``A`` (``G0``, ``A0``) in float64 on the CPU.
    """
    convs = conv_layers(model)
    if not convs:
        raise ValueError("model has no torch.nn.Conv2d layer")
    if initial is not None and len(conv_layers(initial)) != len(convs):
        raise ValueError(f"initial has {len(conv_layers(initial))} Conv2d layers, model has {len(convs)}")
    idx = range(len(convs)) if layers is None else [int(check_number("layers", l, low=-len(convs),
                                                                      high=len(convs) - 1, integer=True))
                                                     for l in layers]
    g = make_generator(generator)
    rows = []
    for l in idx:
        l = l % len(convs)
        G, A = filter_nfm(convs[l][1]).cpu(), patch_agop(model, X, l, batch_size=batch_size).cpu()
        row = {"layer": l + 1, "trained": float(matrix_correlation(G, A, "cosine"))}
        if initial is not None:
            G0 = filter_nfm(conv_layers(initial)[l][1]).cpu()
            A0 = patch_agop(initial, X, l, batch_size=batch_size).cpu()
            row.update(init=float(matrix_correlation(G0, A0, "cosine")), G0=G0, A0=A0)
        row["spectrum-matched"] = float(matrix_correlation(spectrum_matched(G, g), A, "cosine"))
        row.update(G=G, A=A)
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------------------------------------------
# A small bias-free CNN


class ConvNet(nn.Module):
    """A bias-free CNN: ``len(channels)`` conv layers (q x q, "same" padding, ReLU after each), global average
    pooling, and a linear read-out to ``d_out`` outputs.

    Parameters
    ----------
    shape : (C, H, W) or (H, W)
        The input images; the network takes (n, C, H, W) tensors or flattened rows (n, C*H*W), so that
        :func:`rfm.nets.train` trains it as it trains an MLP.
    channels : sequence of int, default (64,)
    d_out : int, default 1
    q : int, default 3
    init_scale : float, default 1.0
        Weights ~ N(0, s^2 / fan_in), fan_in = C_in q^2 for a conv layer (s = 0.1 sqrt(fan_in) gives std 0.1).
    generator, dtype, device : seed or ``torch.Generator``; "float32"/"float64"; device

    The initial weights are kept as buffers, and :meth:`initial` rebuilds the network at initialisation (the
    control of the convolutional NFA).
    """

    def __init__(self, shape, channels=(64,), d_out: int = 1, *, q: int = 3, init_scale: float = 1.0,
                 generator=0, dtype="float32", device=None):
        super().__init__()
        self.shape = image_shape(shape)
        if isinstance(channels, (int, str)) or not hasattr(channels, "__iter__"):
            raise TypeError(f"channels must be a sequence of integers, e.g. (64,), got {channels!r}")
        channels = [int(check_number("channels entry", c, low=1, integer=True)) for c in channels]
        if not channels:
            raise ValueError("channels must list at least one conv layer")
        check_number("d_out", d_out, low=1, integer=True)
        check_number("q", q, low=1, integer=True)
        s = float(check_number("init_scale", init_scale, low=0, low_inclusive=False))
        dtype = resolve_dtype(dtype)
        g = make_generator(generator)
        self.convs = nn.ModuleList()
        c_in = self.shape[0]
        for c in channels:
            conv = nn.Conv2d(c_in, c, q, padding="same", bias=False, dtype=dtype)
            with torch.no_grad():
                conv.weight.copy_(torch.randn(conv.weight.shape, generator=g, dtype=torch.float64)
                                  * (s / math.sqrt(c_in * q * q)))
            self.convs.append(conv)
            c_in = c
        self.readout = nn.Linear(c_in, int(d_out), bias=False, dtype=dtype)
        with torch.no_grad():
            self.readout.weight.copy_(torch.randn(self.readout.weight.shape, generator=g, dtype=torch.float64)
                                      * (s / math.sqrt(c_in)))
        for l, conv in enumerate(self.convs):
            self.register_buffer(f"W0_{l}", conv.weight.detach().clone())
        self.register_buffer("W0_readout", self.readout.weight.detach().clone())
        if device is not None:
            self.to(device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The outputs of the network.

        Parameters
        ----------
        x : torch.Tensor
            Images (n, C, H, W) or flattened rows (n, C*H*W).

        Returns
        -------
        torch.Tensor
            (n, d_out).
        """
        if x.ndim == 2:
            x = x.reshape(x.shape[0], *self.shape)
        for conv in self.convs:
            x = torch.relu(conv(x))
        return self.readout(x.mean((2, 3)))

    def initial(self) -> ConvNet:
        """A copy of the network with its initial weights restored.

        Returns
        -------
        ConvNet
        """
        net = copy.deepcopy(self)
        with torch.no_grad():
            for l, conv in enumerate(net.convs):
                conv.weight.copy_(getattr(net, f"W0_{l}"))
            net.readout.weight.copy_(net.W0_readout)
        return net



# ----------------------------------------------------------------------------------------------------------------
# Filters drawn from a patch metric


def conv_from_feature_matrix(M, in_channels: int, width: int, q: int = 3, *, padding="same", generator=0,
                             dtype="float32", device=None) -> nn.Conv2d:
    """A bias-free ``torch.nn.Conv2d`` (frozen) whose ``width`` flattened filters are independent draws
    w ~ N(0, M / tr M), so that E[W^T W] = width M / tr M: a convolution with the filter covariance a ConvRFM
    learned (the featurisation step of Deep ConvRFM; the authors' ``get_layer_from_M`` with ``-sampleM``).

    Parameters
    ----------
    M : tensor or rfm.FeatureMatrix
        A (C q^2, C q^2) PSD matrix on C = ``in_channels`` channels of q x q patches.
    in_channels, width, q : int
        Input channels, number of filters, filter size.
    padding : int, pair, "valid" or "same", default "same"
        As torch's conv2d.
    generator : int or torch.Generator, default 0
        For the draws.
    dtype : {"float32", "float64"}, default "float32"
    device : optional

    Returns
    -------
    torch.nn.Conv2d
        Frozen (no gradient), bias-free.
    """
    check_number("in_channels", in_channels, low=1, integer=True)
    check_number("width", width, low=1, integer=True)
    check_number("q", q, low=1, integer=True)
    D = int(in_channels) * int(q) ** 2
    fm = M if isinstance(M, FeatureMatrix) else FeatureMatrix.full(M)
    if fm.dim != D:
        raise ValueError(f"M acts on {fm.dim} patch entries, but {in_channels} channel(s) of {q} x {q} patches have "
                         f"{D}")
    trace = float(fm.dense().trace())
    if not trace > 0:
        raise ValueError("M is zero: there is no filter distribution to draw from")
    L = fm.sqrt_factor(torch.float64, "cpu")
    L = torch.eye(D, dtype=torch.float64) if L is None else (torch.diag(L) if L.ndim == 1 else L)
    G = torch.randn(int(width), L.shape[1], generator=make_generator(generator), dtype=torch.float64)
    W = (G @ L.T) / math.sqrt(trace)
    dtype = resolve_dtype(dtype)
    conv = nn.Conv2d(int(in_channels), int(width), int(q), padding=padding, bias=False, dtype=dtype)
    with torch.no_grad():
        conv.weight.copy_(W.reshape(conv.weight.shape))
    conv.weight.requires_grad_(False)
    return conv.to(device) if device is not None else conv
