r"""The patch feature map: images as the q x q patches a convolution multiplies by its filters.

A convolution with filters W (C_out x C_in x q x q) acts on every q x q patch u_p of its input alike: its output at
position p is W u_p, with W reshaped to C_out x C_in q^2. :func:`patches` gives the u_p in that order (channel,
row, column), so that ``patches(X, q) @ W.reshape(C_out, -1).T`` is ``conv2d(X, W)``. ConvRFM
(:mod:`rfm.models.conv`) runs the RFM loop on these patches; the convolutional Neural Feature Ansatz
(:mod:`rfm.nets.conv`) differentiates a network with respect to them.

Images are (n, C, H, W) tensors or flattened rows (n, C*H*W) with their ``shape`` given, as :mod:`rfm.data`
returns them.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .._checks import check_choice, check_number, to_tensor

__all__ = ["PADDING_MODES", "as_images", "as_pair", "image_shape", "padding_amounts", "patches", "unfold"]

PADDING_MODES = ("zeros", "circular", "reflect", "replicate")


def image_shape(shape) -> tuple[int, int, int]:
    """An image shape as (C, H, W).

    Parameters
    ----------
    shape : (H, W) or (C, H, W)
        Positive integers; (H, W) means one channel.

    Returns
    -------
    tuple of int
        (C, H, W).
    """
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__len__") or len(shape) not in (2, 3):
        raise ValueError(f"shape must be (height, width) or (channels, height, width), got {shape!r}")
    for s in shape:
        check_number("shape entry", s, low=1, integer=True)
    shape = tuple(int(s) for s in shape)
    return shape if len(shape) == 3 else (1, *shape)


def as_images(X, shape=None, *, name: str = "X", dtype=None, device=None) -> torch.Tensor:
    """``X`` as a finite floating (n, C, H, W) tensor.

    Parameters
    ----------
    X : array-like or torch.Tensor
        4-D images (n, C, H, W) as they are, 3-D (n, H, W) single-channel images, or 2-D flattened rows (n, C*H*W)
        with ``shape``.
    shape : (C, H, W) or (H, W), optional
        The image shape (required for 2-D input; checked against other input).
    name : str, default "X"
        The argument's name in error messages.
    dtype, device : optional
        Of the result (default: X's floating dtype, or float32, and X's device).

    Returns
    -------
    torch.Tensor
        (n, C, H, W).
    """
    t = to_tensor(X, name)
    if t.dtype == torch.bool:
        raise TypeError(f"{name} must be numeric, got dtype torch.bool")
    if t.ndim == 2:
        if shape is None:
            raise ValueError(f"{name} is 2-D (flattened images, shape {tuple(t.shape)}): pass shape=(C, H, W) or "
                             "(H, W), or pass the images as an (n, C, H, W) tensor")
        C, H, W = image_shape(shape)
        if t.shape[1] != C * H * W:
            raise ValueError(f"{name} has {t.shape[1]} columns but shape {(C, H, W)} has {C * H * W} pixels")
        t = t.reshape(t.shape[0], C, H, W)
    elif t.ndim == 3:
        t = t[:, None]
    elif t.ndim != 4:
        raise ValueError(f"{name} must hold images as (n, C, H, W), (n, H, W) or flattened rows (n, C*H*W), got "
                         f"shape {tuple(t.shape)}")
    if shape is not None and tuple(t.shape[1:]) != image_shape(shape):
        raise ValueError(f"{name} has images of shape {tuple(t.shape[1:])}, expected {image_shape(shape)}")
    if t.shape[0] < 1:
        raise ValueError(f"{name} must hold at least one image")
    target = dtype if dtype is not None else (t.dtype if t.is_floating_point() else torch.float32)
    t = t.to(device=device if device is not None else t.device, dtype=target)
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains {int((~torch.isfinite(t)).sum())} NaN or infinite value(s)")
    return t


def as_pair(name: str, value, low: int) -> tuple[int, int]:
    """An integer or a pair of integers (a size, stride or padding of torch's conv2d) as a pair.

    Parameters
    ----------
    name : str
        The argument's name in error messages.
    value : int or (int, int)
    low : int
        The smallest allowed entry.

    Returns
    -------
    tuple of int
        (vertical, horizontal).
    """
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{name} must be an integer or a pair of integers, got {value!r}")
        return tuple(int(check_number(name, v, low=low, integer=True)) for v in value)
    v = int(check_number(name, value, low=low, integer=True))
    return v, v


def padding_amounts(padding, q, dilation, stride) -> tuple[int, int, int, int]:
    """The (left, right, top, bottom) amounts of ``torch.nn.functional.pad`` for a conv2d padding.

    Parameters
    ----------
    padding : int, (ph, pw), "valid" or "same"
        As torch's conv2d (``"same"`` keeps the H x W grid and needs stride 1).
    q, dilation, stride : (int, int)
        The filter size, dilation and stride.

    Returns
    -------
    tuple of int
        (left, right, top, bottom).
    """
    if isinstance(padding, str):
        check_choice("padding", padding, ("same", "valid"))
        if padding == "valid":
            return (0, 0, 0, 0)
        if stride != (1, 1):
            raise ValueError("padding='same' needs stride 1 (as torch's conv2d)")
        (th, tw) = (dilation[0] * (q[0] - 1), dilation[1] * (q[1] - 1))
        return (tw // 2, tw - tw // 2, th // 2, th - th // 2)
    ph, pw = as_pair("padding", padding, 0)
    return (pw, pw, ph, ph)


def unfold(h: torch.Tensor, q, stride, pads, dilation, padding_mode: str):
    """The patches of images h and their output grid.

    Parameters
    ----------
    h : torch.Tensor
        Images (n, C, H, W).
    q, stride, dilation : (int, int)
        Filter size, stride and dilation.
    pads : (left, right, top, bottom)
        From :func:`padding_amounts`.
    padding_mode : {"zeros", "circular", "reflect", "replicate"}

    Returns
    -------
    U : torch.Tensor
        (n, P, C q_h q_w), the patches in row-major order of positions.
    grid : (int, int)
        The output grid (H', W'), P = H' W'.
    """
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
    torch.Tensor
        (n, P, C*q*q), P = H' W' positions in row-major order, on X's device and in its dtype.

    Examples
    --------
    >>> import torch
    >>> from rfm.core.patches import patches
    >>> X, W = torch.randn(2, 3, 8, 8), torch.randn(5, 3, 3, 3)
    >>> out = patches(X, 3) @ W.reshape(5, -1).T                       # (2, 36, 5)
    >>> torch.allclose(out.transpose(1, 2).reshape(2, 5, 6, 6), torch.nn.functional.conv2d(X, W), atol=1e-5)
    True
    """
    h = as_images(X, shape)
    qq = as_pair("q", q, 1)
    st, dil = as_pair("stride", stride, 1), as_pair("dilation", dilation, 1)
    U, _ = unfold(h, qq, st, padding_amounts(padding, qq, dil, st), dil, padding_mode)
    return U
