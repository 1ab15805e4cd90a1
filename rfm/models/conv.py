r"""Convolutions seen through their patches: the convolutional Neural Feature Ansatz and ConvRFM.

A convolution with filters W (C_out x C_in x q x q) acts on every q x q patch u_p of its input alike: its output
at position p is W u_p, with W reshaped to C_out x C_in q^2 (:func:`patches` gives the u_p in that order, so that
``patches(X, q) @ W.reshape(C_out, -1).T`` is ``conv2d(X, W)``). Beaglehole, Radhakrishnan, Pandit & Belkin
(code aradha/convrfm) state the *convolutional Neural Feature Ansatz*: the filter feature matrix W^T W
(:func:`filter_nfm`) is proportional to the AGOP of the network taken with respect to the patches of the layer,

    patch-AGOP = (1/n) sum_x sum_c sum_p grad_{u_p} f_c(x) grad_{u_p} f_c(x)^T        (C_in q^2 x C_in q^2)

(:func:`patch_agop`: a sum over the patches, a mean over the images, as the authors' ConvRFM code accumulates
it). :class:`ConvNet` is a small bias-free CNN to train (with :func:`rfm.nets.train`, which takes any module)
and measure it on.

:class:`ConvRFM` (and :class:`ConvRFMClassifier`) is the convolutional Recursive Feature Machine with a kernel
that averages a radial base kernel over *aligned* patch pairs, with the patches transformed by M^{1/2}:

    K_M(x, z) = (1/P) sum_p k(M^{1/2} u_p(x), M^{1/2} u_p(z)),

alternating a kernel ridge solve with M <- normalize(patch-AGOP of the predictor ^ power) (the closed form, as
:mod:`rfm.core.machine` does for the plain kernel). The authors' kernel is the convolutional NTK of
neural-tangents (JAX); this module replaces it by a Laplace (or Gaussian) patch kernel.

Images are (n, C, H, W) tensors or flattened rows (n, C*H*W) with their ``shape`` given, as :mod:`rfm.data`
returns them. Everything runs on the device of the input (or of the network).
"""
from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

from .._checks import _to_tensor, check_choice, check_number, check_targets, resolve_dtype
from ..core.agop import AGOPAccumulator, jacobians, sample_points
from ..core.blocks import resolve_mem_bytes
from ..core.feature_matrix import NORMALIZATIONS, FeatureMatrix, feature_matrix_from_agop, feature_update
from ..core.kernels import Kernel, get_kernel
from ..core.solvers import solve_krr
from ..metrics import matrix_correlation
from ..nets.classifier import _class_indices, decode_label_codes, label_codes
from ..utils import get_device, make_generator

PADDING_MODES = ("zeros", "circular", "reflect", "replicate")

# ----------------------------------------------------------------------------------------------------------------
# Patches


def _image_shape(shape):
    """(H, W) or (C, H, W) -> (C, H, W)."""
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__len__") or len(shape) not in (2, 3):
        raise ValueError(f"shape must be (height, width) or (channels, height, width), got {shape!r}")
    for s in shape:
        check_number("shape entry", s, low=1, integer=True)
    shape = tuple(int(s) for s in shape)
    return shape if len(shape) == 3 else (1, *shape)


def as_images(X, shape=None, *, name: str = "X", dtype=None, device=None) -> torch.Tensor:
    """``X`` as a finite floating (n, C, H, W) tensor: 4-D as it is, 2-D rows reshaped to ``shape``
    ((H, W) or (C, H, W)), 3-D read as (n, H, W) single-channel images."""
    t = _to_tensor(X, name)
    if t.dtype == torch.bool:
        raise TypeError(f"{name} must be numeric, got dtype torch.bool")
    if t.ndim == 2:
        if shape is None:
            raise ValueError(f"{name} is 2-D (flattened images, shape {tuple(t.shape)}): pass shape=(C, H, W) or "
                             "(H, W), or pass the images as an (n, C, H, W) tensor")
        C, H, W = _image_shape(shape)
        if t.shape[1] != C * H * W:
            raise ValueError(f"{name} has {t.shape[1]} columns but shape {(C, H, W)} has {C * H * W} pixels")
        t = t.reshape(t.shape[0], C, H, W)
    elif t.ndim == 3:
        t = t[:, None]
    elif t.ndim != 4:
        raise ValueError(f"{name} must hold images as (n, C, H, W), (n, H, W) or flattened rows (n, C*H*W), got "
                         f"shape {tuple(t.shape)}")
    if shape is not None and tuple(t.shape[1:]) != _image_shape(shape):
        raise ValueError(f"{name} has images of shape {tuple(t.shape[1:])}, expected {_image_shape(shape)}")
    if t.shape[0] < 1:
        raise ValueError(f"{name} must hold at least one image")
    target = dtype if dtype is not None else (t.dtype if t.is_floating_point() else torch.float32)
    t = t.to(device=device if device is not None else t.device, dtype=target)
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains {int((~torch.isfinite(t)).sum())} NaN or infinite value(s)")
    return t


def _pair_of(name, value, low):
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{name} must be an integer or a pair of integers, got {value!r}")
        return tuple(int(check_number(name, v, low=low, integer=True)) for v in value)
    v = int(check_number(name, value, low=low, integer=True))
    return v, v


def _pads(padding, q, dilation, stride):
    """The (left, right, top, bottom) amounts of F.pad for padding "valid", "same", an int or (ph, pw)."""
    if isinstance(padding, str):
        check_choice("padding", padding, ("same", "valid"))
        if padding == "valid":
            return (0, 0, 0, 0)
        if stride != (1, 1):
            raise ValueError("padding='same' needs stride 1 (as torch's conv2d)")
        (th, tw) = (dilation[0] * (q[0] - 1), dilation[1] * (q[1] - 1))
        return (tw // 2, tw - tw // 2, th // 2, th - th // 2)
    ph, pw = _pair_of("padding", padding, 0)
    return (pw, pw, ph, ph)


def _unfold(h, q, stride, pads, dilation, padding_mode):
    """(n, C, H, W) -> patches (n, P, C*q*q) and the output grid (H', W')."""
    check_choice("padding_mode", padding_mode, PADDING_MODES)
    if any(pads):
        h = F.pad(h, pads, mode="constant" if padding_mode == "zeros" else padding_mode)
    Hp, Wp = h.shape[-2:]
    Ho = (Hp - dilation[0] * (q[0] - 1) - 1) // stride[0] + 1
    Wo = (Wp - dilation[1] * (q[1] - 1) - 1) // stride[1] + 1
    if Ho < 1 or Wo < 1:
        raise ValueError(f"the {q[0]} x {q[1]} patches do not fit in images of {Hp} x {Wp} (after padding)")
    U = F.unfold(h, q, dilation=dilation, padding=0, stride=stride)  # (n, C q q, P)
    return U.transpose(1, 2), (Ho, Wo)


def patches(X, q: int = 3, stride=1, padding=0, *, shape=None, padding_mode: str = "zeros",
            dilation=1) -> torch.Tensor:
    """The q x q patches of images, shape (n, P, C*q*q), ordered as a conv2d filter flattened (channel, row, column).

    Parameters
    ----------
    X : tensor (n, C, H, W), (n, H, W), or flattened rows (n, C*H*W) with ``shape``
    q : int or (qh, qw), default 3
        Patch (filter) size.
    stride, dilation : int or pair, default 1
    padding : int, pair, "valid" or "same", default 0
        As torch's conv2d: ``"same"`` keeps the H x W grid (stride 1).
    shape : (C, H, W) or (H, W), optional
        The image shape of flattened rows.
    padding_mode : {"zeros", "circular", "reflect", "replicate"}, default "zeros"

    Returns
    -------
    torch.Tensor (n, P, C*q*q), P = H' W' positions in row-major order, on X's device and in its dtype

    Examples
    --------
    >>> import torch
    >>> from rfm.models.conv import patches
    >>> X, W = torch.randn(2, 3, 8, 8), torch.randn(5, 3, 3, 3)
    >>> out = patches(X, 3) @ W.reshape(5, -1).T                       # (2, 36, 5)
    >>> torch.allclose(out.transpose(1, 2).reshape(2, 5, 6, 6), torch.nn.functional.conv2d(X, W), atol=1e-5)
    True
    """
    h = as_images(X, shape)
    qq = _pair_of("q", q, 1)
    st, dil = _pair_of("stride", stride, 1), _pair_of("dilation", dilation, 1)
    U, _ = _unfold(h, qq, st, _pads(padding, qq, dil, st), dil, padding_mode)
    return U


def _conv_settings(conv: nn.Conv2d):
    q, st, dil = tuple(conv.kernel_size), tuple(conv.stride), tuple(conv.dilation)
    return q, st, _pads(conv.padding, q, dil, st), dil, conv.padding_mode


def conv_patches(conv: nn.Conv2d, h: torch.Tensor) -> torch.Tensor:
    """The patches (n, P, C_in q^2) a ``torch.nn.Conv2d`` multiplies by its filters, at its input h (n, C, H, W),
    with its own stride, padding, padding mode and dilation."""
    _check_conv(conv)
    return _unfold(h, *_conv_settings(conv))[0]


def _check_conv(conv):
    if not isinstance(conv, nn.Conv2d):
        raise TypeError(f"expected a torch.nn.Conv2d, got {type(conv).__name__}")
    if conv.groups != 1:
        raise ValueError(f"grouped convolutions (groups={conv.groups}) are not supported: the filter matrix W is "
                         "C_out x C_in q^2 only for groups=1")
    return conv


def filter_nfm(conv) -> torch.Tensor:
    """The filter feature matrix W^T W (float64, C_in q^2 x C_in q^2), with W reshaped to C_out x C_in q^2.

    ``conv`` is a ``torch.nn.Conv2d`` (groups 1) or its weight tensor (C_out, C_in, qh, qw)."""
    if isinstance(conv, nn.Module):
        W = _check_conv(conv).weight
    else:
        W = _to_tensor(conv, "conv")
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
    """The ``torch.nn.Conv2d`` modules of a model with their names, in the order of ``model.named_modules()``."""
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
    t = _to_tensor(X, "X")
    if t.ndim < 2 or t.shape[0] < 1:
        raise ValueError(f"X must be a batch of inputs (n, ...) with n >= 1, got shape {tuple(t.shape)}")
    t = t.to(dtype=param.dtype if param is not None else torch.float32,
             device=param.device if param is not None else t.device)
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"X contains {int((~torch.isfinite(t)).sum())} NaN or infinite value(s)")
    return t


def patch_gradients(model: nn.Module, X, layer=0) -> torch.Tensor:
    """The gradients of every output of ``model`` with respect to every patch of a conv layer's input:
    shape (n, c, P, C_in q^2), by autograd (:func:`rfm.jacobians`).

    The layer's output is recomputed from its patches U as U W^T (plus its bias), and the network is
    differentiated with respect to U; ``layer`` is an index into :func:`conv_layers`, a name, or the module. The
    model must act image by image (no batch statistics: call ``model.eval()`` for batch norm)."""
    conv = _conv_layer(model, layer)
    X = _as_model_input(model, X)
    q, st, pads, dil, mode = _conv_settings(conv)
    h = _layer_input(model, conv, X)
    U, grid = _unfold(h, q, st, pads, dil, mode)
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
    U, _ = _unfold(_layer_input(model, conv, X[:1]), q, st, pads, dil, mode)
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

    Examples
    --------
    >>> import torch
    >>> from rfm.models.conv import patch_agop
    >>> w = torch.randn(1, 1, 3, 3, dtype=torch.float64)
    >>> net = torch.nn.Sequential(torch.nn.Conv2d(1, 1, 3, bias=False, dtype=torch.float64),
    ...                           torch.nn.Flatten(), torch.nn.Linear(36, 1, bias=False, dtype=torch.float64))
    >>> with torch.no_grad():
    ...     net[0].weight.copy_(w); net[2].weight.fill_(1.0)
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

    Returns one dict per layer: ``layer`` (1-based), ``trained``, ``init`` (with ``initial``), ``spectrum-matched``,
    and the matrices ``G``, ``A`` (``G0``, ``A0``) in float64 on the CPU."""
    from ..nets.alignment import spectrum_matched

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
        self.shape = _image_shape(shape)
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
        if x.ndim == 2:
            x = x.reshape(x.shape[0], *self.shape)
        for conv in self.convs:
            x = torch.relu(conv(x))
        return self.readout(x.mean((2, 3)))

    def initial(self) -> "ConvNet":
        """A copy of the network with its initial weights restored."""
        net = copy.deepcopy(self)
        with torch.no_grad():
            for l, conv in enumerate(net.convs):
                conv.weight.copy_(getattr(net, f"W0_{l}"))
            net.readout.weight.copy_(net.W0_readout)
        return net


# ----------------------------------------------------------------------------------------------------------------
# ConvRFM


class ConvRFM:
    """The convolutional RFM with an aligned-patch kernel K_M(x, z) = (1/P) sum_p k(M^{1/2} u_p(x), M^{1/2} u_p(z)).

    For t = 0..iters: solve (K_{M_t}(X, X) + reg I) alpha = Y; record; M_{t+1} = normalize(A_t^power), A_t the
    patch-AGOP of f_t(z) = K_{M_t}(z, X) alpha at (a seeded subset of ``max_agop_points`` of) the training images
    (sum over patches and outputs, mean over images; closed form). M_0 = I. ``iters=0`` is the fixed
    convolutional kernel, the control.

    Parameters
    ----------
    shape : (C, H, W) or (H, W), optional
        Needed for flattened images; read from (n, C, H, W) input otherwise.
    q, stride, padding, padding_mode : the patches (:func:`patches`), default 3, 1, "same", "zeros"
    kernel : "laplace", "gaussian" or a radial :class:`rfm.Kernel`, default "laplace"
    bandwidth : float, default 10.0
    reg : float, default 1e-3
    iters : int, default 1
    power : float, default 1.0
        M = A^power; the patches are transformed by M^{1/2}.
    normalize : {None, "max", "trace", "fro"}, default "trace"
        "trace" makes the patch metric A / tr A, which is the authors' M = sqrtm(A) / its Frobenius norm.
    max_agop_points : int or None, default None (all training images)
    dtype : "float32" or "float64", default "float32"; device : None (that of X) or a device
    mem_gb : working memory per kernel block (default 1 GiB on CPU, a quarter of the free GPU memory)
    generator : seed for the AGOP subset

    Attributes after :meth:`fit`: ``M_`` (a :class:`rfm.FeatureMatrix` on the patches), ``alpha_``, ``history_``
    (one record per solve: iteration, train MSE, validation MSE and accuracy when validation data are given),
    ``agops_`` (the patch-AGOPs, float64, CPU), ``Ms_`` (the M used at each solve, float64, CPU).
    """

    def __init__(self, shape=None, *, q=3, stride=1, padding="same", padding_mode="zeros", kernel="laplace",
                 bandwidth: float = 10.0, reg: float = 1e-3, iters: int = 1, power: float = 1.0,
                 normalize: str | None = "trace", max_agop_points: int | None = None, dtype="float32", device=None,
                 mem_gb: float | None = None, generator=0):
        self.shape = None if shape is None else _image_shape(shape)
        self.q, self.stride, self.padding, self.padding_mode = q, stride, padding, padding_mode
        self.kernel = get_kernel(kernel, bandwidth=bandwidth) if isinstance(kernel, str) else get_kernel(kernel)
        if not isinstance(self.kernel, Kernel) or not self.kernel.radial or self.kernel.uses_norms:
            raise ValueError(f"ConvRFM needs a radial kernel (laplace, gaussian), got {self.kernel!r}")
        self.reg = float(check_number("reg", reg, low=0))
        self.iters = int(check_number("iters", iters, low=0, integer=True))
        self.power = float(check_number("power", power, low=0, low_inclusive=False))
        self.normalize = check_choice("normalize", normalize, NORMALIZATIONS)
        if max_agop_points is not None:
            check_number("max_agop_points", max_agop_points, low=1, integer=True)
        self.max_agop_points = max_agop_points
        self.dtype = resolve_dtype(dtype)
        self.device = None if device is None else get_device(device)
        if mem_gb is not None:
            check_number("mem_gb", mem_gb, low=0, low_inclusive=False)
        self.mem_gb = mem_gb
        self.generator = generator
        # check the patch settings now
        qq = _pair_of("q", q, 1)
        st, dil = _pair_of("stride", stride, 1), (1, 1)
        self._pads = _pads(padding, qq, dil, st)
        check_choice("padding_mode", padding_mode, PADDING_MODES)

    # -- patches and kernels ---------------------------------------------------------------------------------------
    def _images(self, X, name="X"):
        device = self.device if self.device is not None else (X.device if isinstance(X, torch.Tensor) else None)
        h = as_images(X, self.shape, name=name, dtype=self.dtype, device=device)
        if getattr(self, "image_shape_", None) is not None and tuple(h.shape[1:]) != self.image_shape_:
            raise ValueError(f"{name} has images of shape {tuple(h.shape[1:])} but the model was fitted on "
                             f"{self.image_shape_}")
        return h

    def patches(self, X) -> torch.Tensor:
        """The patches (n, P, C q^2) of images X, with this model's settings."""
        h = self._images(X)
        qq, st = _pair_of("q", self.q, 1), _pair_of("stride", self.stride, 1)
        return _unfold(h, qq, st, self._pads, (1, 1), self.padding_mode)[0]

    def _transform(self, U, fm):
        n, P, D = U.shape
        return fm.transform(U.reshape(n * P, D)).reshape(n, P, -1)

    def _mem(self, device):
        return resolve_mem_bytes(None if self.mem_gb is None else int(self.mem_gb * 2**30), device)

    def _blocks(self, n, m, P, itemsize, device, factor=3, extra=0):
        """Rows of the evaluation points and positions per block, so that positions x m x (factor rows + extra)
        numbers fit in the memory budget (rows first, within half of it)."""
        mem = self._mem(device)
        rows = max(1, min(n, mem // max(1, 2 * factor * itemsize * m)))
        pos = max(1, min(P, mem // max(1, itemsize * m * (factor * rows + extra))))
        return rows, pos

    @staticmethod
    def _sq_dists(A, B):
        """Squared distances (p, a, b) between A (p, a, r) and B (p, b, r), clamped at 0."""
        D2 = torch.baddbmm((A * A).sum(2)[:, :, None] + (B * B).sum(2)[:, None, :], A, B.transpose(1, 2),
                           alpha=-2.0)
        return D2.clamp_min_(0)

    def kernel_matrix(self, Uz: torch.Tensor, Ux: torch.Tensor) -> torch.Tensor:
        """K (m, n) between transformed patch sets Uz (m, P, r) and Ux (n, P, r): the mean over positions p of
        k(uz_p, ux_p)."""
        m, P, _ = Uz.shape
        n = Ux.shape[0]
        if Ux.shape[1] != P or Ux.shape[2] != Uz.shape[2]:
            raise ValueError(f"patch sets of shapes {tuple(Uz.shape)} and {tuple(Ux.shape)} do not align")
        K = torch.zeros(m, n, dtype=Uz.dtype, device=Uz.device)
        rows, pos = self._blocks(m, n, P, Uz.element_size(), Uz.device)
        Xt = Ux.transpose(0, 1)  # (P, n, r)
        for r0 in range(0, m, rows):
            Zt = Uz[r0:r0 + rows].transpose(0, 1)
            for p0 in range(0, P, pos):
                B = self._sq_dists(Zt[p0:p0 + pos], Xt[p0:p0 + pos])
                K[r0:r0 + rows] += self.kernel.values_(B).sum(0)
        return K.div_(P)

    def _patch_agop(self, Uz, Ux, alpha, self_index=None):
        """The closed-form patch-AGOP (in transformed coordinates) of f(z) = K(z, X) alpha at the transformed
        patches Uz (s, P, r); ``self_index[j]`` is the training row that image j is (its aligned pairs get weight
        0, the coincident-point convention of rfm.core.kernels), or -1."""
        s, P, r = Uz.shape
        n, c = alpha.shape
        acc = AGOPAccumulator(P * c, r, device=Uz.device)
        Xt = Ux.transpose(0, 1)  # (P, n, r)
        rows, pos = self._blocks(s, n, P, Uz.element_size(), Uz.device, factor=4 + c, extra=c * r)
        for r0 in range(0, s, rows):
            Z = Uz[r0:r0 + rows]
            b = Z.shape[0]
            G = torch.empty(b, P, c, r, dtype=Uz.dtype, device=Uz.device)
            Zt = Z.transpose(0, 1)  # (P, b, r)
            for p0 in range(0, P, pos):
                sl = slice(p0, p0 + pos)
                Wt = self.kernel.weights_(self._sq_dists(Zt[sl], Xt[sl]))  # (p, b, n): k'(r)/r
                if self_index is not None:
                    idx = self_index[r0:r0 + rows]
                    own = idx >= 0
                    Wt[:, torch.nonzero(own)[:, 0], idx[own]] = 0.0
                wa = Wt @ alpha  # (p, b, c)
                aX = (alpha[None, :, :, None] * Xt[sl][:, :, None, :]).reshape(-1, n, c * r)  # (p, n, c r)
                g = wa[..., None] * Zt[sl][:, :, None, :] - torch.bmm(Wt, aX).reshape(-1, b, c, r)
                G[:, sl] = g.transpose(0, 1) / P
            acc.add(G.reshape(b, P * c, r))
        return acc.result()

    # -- the RFM loop ----------------------------------------------------------------------------------------------
    def _targets(self, y, n, device):
        return check_targets(y, n, "y", dtype=self.dtype, device=device)

    def fit(self, X, y, X_val=None, y_val=None):
        """Fit on images X (see the class) and targets y (n,) or (n, c); with X_val, y_val every solve records the
        validation MSE (and accuracy for a classifier). Returns self."""
        self._targets_shape(y)
        self.image_shape_ = None
        h = self._images(X)
        self.image_shape_ = tuple(h.shape[1:])
        U = self.patches(h)
        n, P, D = U.shape
        Y = self._targets(y, n, U.device)
        Uv = Yv = None
        if (X_val is None) != (y_val is None):
            raise ValueError("X_val and y_val must be given together")
        if X_val is not None:
            Uv = self.patches(self._images(X_val, "X_val"))
            Yv = self._val_targets(y_val, Uv.shape[0], U.device)
        g = make_generator(self.generator)
        fm = FeatureMatrix.identity(D)
        self.history_, self.agops_, self.Ms_ = [], [], []
        for t in range(self.iters + 1):
            Ut = self._transform(U, fm)
            K = self.kernel_matrix(Ut, Ut)
            alpha, method = solve_krr(K, Y, self.reg, overwrite=True, check_symmetric=False)
            del K
            self.M_, self.alpha_ = fm, alpha
            self.Ms_.append(fm.dense(device="cpu"))
            rec = {"iteration": t, "solve": method}
            if method != "lstsq":  # an exact solve: f(X) = Y - reg alpha
                rec["train_mse"] = float((self.reg * alpha).square().sum(1).mean())
            if Uv is not None:
                out = self.kernel_matrix(self._transform(Uv, fm), Ut) @ alpha
                rec.update(self._val_metrics(out, Yv))
            self.history_.append(rec)
            if t == self.iters:
                break
            idx = sample_points(n, self.max_agop_points, g)
            rows = torch.arange(n, device=U.device) if idx is None else idx.to(U.device)
            A = fm.pullback_agop(self._patch_agop(Ut[rows], Ut, alpha, self_index=rows))
            self.agops_.append(A.detach().cpu())
            fm = feature_matrix_from_agop(A, power=self.power, normalize=self.normalize)
        self.X_patches_ = self._transform(U, self.M_)
        return self

    def _val_targets(self, y, m, device):
        return self._targets(y, m, device)

    def _val_metrics(self, out, Yv):
        return {"val_mse": float((out - Yv).square().sum(1).mean())}

    def _check_fitted(self):
        if not hasattr(self, "alpha_"):
            raise RuntimeError(f"this {type(self).__name__} is not fitted yet: call fit(X, y) first")

    def predict(self, X) -> torch.Tensor:
        """f(z) = K_M(z, X) alpha at images X: (m,) for 1-D training targets, else (m, c)."""
        self._check_fitted()
        Uz = self._transform(self.patches(X), self.M_)
        out = self.kernel_matrix(Uz, self.X_patches_) @ self.alpha_
        return out[:, 0] if self._one_d else out

    def _targets_shape(self, y):
        self._one_d = _to_tensor(y, "y").ndim == 1

    def patch_agop(self, X) -> torch.Tensor:
        """The patch-AGOP (float64, C q^2 x C q^2) of the fitted predictor at images X (closed form; images are
        treated as new points, not as training rows)."""
        self._check_fitted()
        Uz = self._transform(self.patches(X), self.M_)
        A = self._patch_agop(Uz, self.X_patches_, self.alpha_)
        return self.M_.pullback_agop(A)


class ConvRFMClassifier(ConvRFM):
    """:class:`ConvRFM` on class labels 0..c-1: least-squares codes (:func:`rfm.nets.classifier.label_codes`: one
    0/1 column for two classes, one-hot for more), :meth:`predict` returns labels and :meth:`score` the accuracy;
    with validation data every solve also records ``val_accuracy``."""

    def _targets(self, y, n, device):
        t, c = _class_indices(torch.as_tensor(y).cpu(), getattr(self, "n_classes_", None))
        if t.shape[0] != n:
            raise ValueError(f"y has {t.shape[0]} labels but X has {n} images")
        self.n_classes_ = c
        return label_codes(t, c, dtype=self.dtype).to(device)

    def _val_targets(self, y, m, device):
        t, _ = _class_indices(torch.as_tensor(y).cpu(), self.n_classes_, "y_val")
        if t.shape[0] != m:
            raise ValueError(f"y_val has {t.shape[0]} labels but X_val has {m} images")
        return t.to(device)

    def _val_metrics(self, out, yv):
        codes = label_codes(yv.cpu(), self.n_classes_, dtype=out.dtype).to(out.device)
        return {"val_mse": float((out - codes).square().sum(1).mean()),
                "val_accuracy": float((decode_label_codes(out) == yv).double().mean())}

    def _targets_shape(self, y):
        self._one_d = False

    def decision_function(self, X) -> torch.Tensor:
        """The raw outputs (m, 1) for two classes, (m, c) for more."""
        return ConvRFM.predict(self, X)

    def predict(self, X) -> torch.Tensor:
        """Class labels (m,)."""
        return decode_label_codes(self.decision_function(X))

    def score(self, X, y) -> float:
        """Accuracy on images X with labels y."""
        t, _ = _class_indices(torch.as_tensor(y).cpu(), self.n_classes_)
        pred = self.predict(X).cpu()
        if pred.shape[0] != t.shape[0]:
            raise ValueError(f"y has {t.shape[0]} labels but X has {pred.shape[0]} images")
        return float((pred == t).double().mean())


# ----------------------------------------------------------------------------------------------------------------
# Deep ConvRFM: random filters drawn from the learned M, then ConvRFM on the new features


def conv_from_feature_matrix(M, in_channels: int, width: int, q: int = 3, *, padding="same", generator=0,
                             dtype="float32", device=None) -> nn.Conv2d:
    """A bias-free ``torch.nn.Conv2d`` (frozen) whose ``width`` flattened filters are independent draws
    w ~ N(0, M / tr M), so that E[W^T W] = width M / tr M: a convolution with the filter covariance a ConvRFM
    learned (the featurisation step of Deep ConvRFM; the authors' ``get_layer_from_M`` with ``-sampleM``).

    ``M`` is a (C q^2, C q^2) PSD matrix or a :class:`rfm.FeatureMatrix` on C = ``in_channels`` channels of
    q x q patches."""
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


class DeepConvRFM:
    """Deep ConvRFM (classification): ``depth`` stages; stage l fits a :class:`ConvRFMClassifier` on the current
    features, and (but for the last) draws a frozen conv layer of ``width`` filters from its final M
    (:func:`conv_from_feature_matrix`) whose outputs (after ``activation``, None or "relu") are the next features.

    The authors' ``deep_conv_rfm/main.py`` keeps, at each depth, the M of the iteration with the best *test*
    accuracy; here the last iteration's M is used, so no test data enter the fit. Parameters other than
    ``depth``, ``width``, ``activation`` and ``generator`` go to every stage's :class:`ConvRFMClassifier`.

    Attributes after :meth:`fit`: ``models_`` (the fitted stages), ``layers_`` (the conv layers between them),
    ``history_`` (per stage, its history)."""

    def __init__(self, shape=None, *, depth: int = 2, width: int = 64, activation=None, generator=0, **params):
        self.depth = int(check_number("depth", depth, low=1, integer=True))
        self.width = int(check_number("width", width, low=1, integer=True))
        if activation is not None:
            check_choice("activation", activation, ("relu",))
        self.activation = activation
        self.shape = shape
        self.generator = generator
        self.params = params
        probe = ConvRFMClassifier(shape, generator=0, **params)  # checks the stage parameters now
        self._q, self._padding, self._dtype = probe.q, probe.padding, probe.dtype
        if self.depth > 1 and (not isinstance(self._q, int) or probe.stride not in (1, (1, 1))):
            raise ValueError("Deep ConvRFM needs square patches (an int q) and stride 1")

    def _featurize(self, conv, H):
        with torch.no_grad():
            H = conv.to(H.device)(H)
            return torch.relu(H) if self.activation == "relu" else H

    def fit(self, X, y, X_val=None, y_val=None):
        """Fit the stages on images X and labels y; with X_val, y_val each stage records validation accuracy."""
        g = make_generator(self.generator)
        H = as_images(X, self.shape, dtype=self._dtype)
        Hv = None if X_val is None else as_images(X_val, self.shape, name="X_val", dtype=self._dtype,
                                                  device=H.device)
        self.models_, self.layers_, self.history_ = [], [], []
        for stage in range(self.depth):
            seed = int(torch.randint(0, 2**31 - 1, (1,), generator=g))
            model = ConvRFMClassifier(generator=seed, **self.params).fit(H, y, Hv, y_val)
            self.models_.append(model)
            self.history_.append(model.history_)
            if stage == self.depth - 1:
                break
            conv = conv_from_feature_matrix(model.M_, H.shape[1], self.width, self._q, padding=self._padding,
                                            generator=seed + 1, dtype=self._dtype)
            self.layers_.append(conv)
            H = self._featurize(conv, H)
            Hv = None if Hv is None else self._featurize(conv, Hv)
        return self

    def _features(self, X):
        H = as_images(X, self.shape, dtype=self._dtype)
        for conv in self.layers_:
            H = self._featurize(conv, H)
        return H

    def _check_fitted(self):
        if not hasattr(self, "models_"):
            raise RuntimeError("this DeepConvRFM is not fitted yet: call fit(X, y) first")

    def decision_function(self, X) -> torch.Tensor:
        """The last stage's raw outputs on the features of images X."""
        self._check_fitted()
        return self.models_[-1].decision_function(self._features(X))

    def predict(self, X) -> torch.Tensor:
        """Class labels (m,)."""
        self._check_fitted()
        return self.models_[-1].predict(self._features(X))

    def score(self, X, y) -> float:
        """Accuracy on images X with labels y."""
        self._check_fitted()
        return self.models_[-1].score(self._features(X), y)
