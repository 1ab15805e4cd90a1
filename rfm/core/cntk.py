r"""The neural tangent kernel of a convolutional ReLU network (CNTK), in closed form.

The network (NTK parametrisation, every weight N(0, 1) at initialisation, no biases, width m -> infinity)::

    g^(1)(x)_p   = w / sqrt(C q^2)  sum_{a in q x q} W^(1)_a x_{p+a}                 (C input channels)
    g^(h+1)(x)_p = w / sqrt(m q^2)  sum_{a in q x q} W^(h+1)_a phi(g^(h)(x))_{p+a},   h = 1, ..., L - 1
    f(x)         = readout of phi(g^(L)(x)),    phi(t) = sqrt(2) max(t, 0)

with L = ``depth`` convolutions of q x q filters at stride 1 ("valid" or zero "same" padding), w = ``w_std``, and
one of two read-outs, a dense layer of unit variance on

* ``"flatten"``: all m P_L activations, scaled by 1 / sqrt(m P_L);
* ``"gap"``: the m channels averaged over the P_L positions (global average pooling), scaled by 1 / sqrt(m).

This is the architecture of ``crfm_src/models.py:Vanilla`` in the ConvRFM authors' code
(``aradha/agop_feature_learning``, ``kernel_machine_agop/conv_rfm``): neural-tangents ``stax.Conv(width, (ps, ps),
W_std=ps, b_std=0, padding='VALID')``, ``stax.ABRelu(b=sqrt(2), a=0)`` (= phi), ``depth`` such blocks, then
``stax.Flatten()`` and ``stax.Dense(num_classes, W_std=1)``; their first convolution runs at stride ps on an image
of unfolded patches, which is a stride-1 convolution of the original image. ``w_std=None`` is their ``W_std = q``.

The recursion (Arora et al. 2019, "On exact computation with an infinitely wide neural net", the CNTK; derived
here for the network above and checked against its empirical NTK in ``tests/core/test_cntk.py``): the covariance of
the pre-activations at positions p of x and p' of z,

    S_1(p, p')     = w^2 / (C q^2) sum_a <x_{p+a}, z_{p'+a}>,
    K_h            = norm_h (sin t + (pi - t) cos t) / pi,    Sdot_h = (pi - t) / pi,    cos t = S_h / norm_h,
    norm_h(p, p')  = sqrt(S_h(x, x)(p, p) S_h(z, z)(p', p'))       (:func:`rfm.core.ntk.relu_dual_`),
    S_{h+1}(p, p') = w^2 / q^2 sum_a K_h(p + a, p' + a),
    Theta_1 = S_1,    Theta_{h+1}(p, p') = w^2 / q^2 sum_a (Theta_h Sdot_h)(p + a, p' + a) + S_{h+1}(p, p'),

and the read-out Theta(x, z) = mean_p [Theta_L Sdot_L + K_L](p, p) (flatten) or the mean over all pairs (p, p')
(gap). A convolution keeps the offset p' - p, so the flatten read-out needs only aligned positions (p' = p) at
every layer: (n, m, P) numbers per layer. Global average pooling needs all pairs: (n, m, P, P), for small images.
With one convolution and the flatten read-out the CNTK is the fully connected NTK of one hidden layer
(:class:`rfm.core.ntk.NTKKernel`, ``depth=1``, ``bandwidth = sqrt(C q^2) / w``) averaged over aligned patch pairs.

It is a fixed kernel (a baseline); its input gradients (ConvRFM with the CNTK) are not implemented.
"""
from __future__ import annotations

import math

import torch

from .._checks import check_choice, check_number
from .ntk import relu_dual_
from .patches import as_images, as_pair, padding_amounts, unfold

READOUTS = ("flatten", "gap")


def _window_sum(T: torch.Tensor, q: int, pads, joint: bool) -> torch.Tensor:
    """sum_a T(p + a) over a q x q window (``joint=False``: T (..., H, W)) or sum_a T(p + a, p' + a) (``joint``:
    T (..., H, W, H', W')), after zero padding by ``pads`` (left, right, top, bottom) on every spatial axis."""
    left, right, top, bottom = pads
    if joint:
        T = torch.nn.functional.pad(T, (left, right, top, bottom))           # H', W'
        T = T.movedim((-4, -3), (-2, -1))
        T = torch.nn.functional.pad(T, (left, right, top, bottom)).movedim((-2, -1), (-4, -3))
        H, W = T.shape[-4] - q + 1, T.shape[-3] - q + 1
        out = torch.zeros(T.shape[:-4] + (H, W, H, W), dtype=T.dtype, device=T.device)
        for a in range(q):
            for b in range(q):
                out += T[..., a:a + H, b:b + W, a:a + H, b:b + W]
        return out
    # a box filter by an integral image: O(H W) per map whatever q
    T = torch.nn.functional.pad(T, (left + 1, right, top + 1, bottom))   # a zero row and column in front
    I = T.cumsum(-2).cumsum(-1)
    H, W = T.shape[-2] - q, T.shape[-1] - q
    return I[..., q:, q:] - I[..., :H, q:] - I[..., q:, :W] + I[..., :H, :W]


def conv_ntk(X, Z=None, *, shape=None, q: int = 3, depth: int = 1, padding: str = "valid",
             readout: str = "flatten", w_std: float | None = None, dtype=torch.float64,
             max_bytes: int = 2**28) -> torch.Tensor:
    """The CNTK Theta(x_i, z_j) of the convolutional ReLU network described in :mod:`rfm.core.cntk`.

    Parameters
    ----------
    X : images (n, C, H, W), (n, H, W), or flattened rows with ``shape``
    Z : images, optional
        The second argument (None: X).
    shape : (C, H, W) or (H, W), optional
        The image shape of flattened rows.
    q : int, default 3
        Filter size (odd for ``padding="same"`` to be centred; torch's convention otherwise).
    depth : int, default 1
        Convolutional layers L >= 1 (each followed by the ReLU).
    padding : {"valid", "same"}, default "valid"
        Of every convolution ("same": zeros, the grid kept).
    readout : {"flatten", "gap"}, default "flatten"
        Dense layer on all activations (the ConvRFM authors') or on their global average over positions.
    w_std : float, optional
        The convolutions' weight scale w (None: q, the authors' ``W_std=ps``).
    dtype : torch.dtype, default torch.float64
        Of the computation and the result.
    max_bytes : int, default 2**28
        Rows of X are processed in blocks whose per-layer tensors stay about this size.

    Returns
    -------
    torch.Tensor, shape (n, n_Z)
        On X's device.

    Examples
    --------
    >>> import torch
    >>> from rfm.core.cntk import conv_ntk
    >>> X = torch.randn(3, 1, 6, 6, dtype=torch.float64)
    >>> K = conv_ntk(X, q=3, depth=2)
    >>> K.shape, bool(torch.allclose(K, K.T))
    (torch.Size([3, 3]), True)
    """
    depth = int(check_number("depth", depth, low=1, integer=True))
    check_choice("padding", padding, ("valid", "same"))
    check_choice("readout", readout, READOUTS)
    qq = as_pair("q", q, 1)
    if qq[0] != qq[1]:
        raise ValueError(f"q must be square, got {q!r}")
    q = qq[0]
    w = float(q if w_std is None else check_number("w_std", w_std, low=0, low_inclusive=False))
    hx = as_images(X, shape, name="X", dtype=dtype)
    hz = hx if Z is None else as_images(Z, shape, name="Z", dtype=dtype, device=hx.device)
    if hz.shape[1:] != hx.shape[1:]:
        raise ValueError(f"X and Z have images of shapes {tuple(hx.shape[1:])} and {tuple(hz.shape[1:])}")
    pads = padding_amounts(padding, qq, (1, 1), (1, 1))
    c1, c = w**2 / (hx.shape[1] * q * q), w**2 / (q * q)
    H_last = min(hx.shape[-2] + pads[2] + pads[3], hx.shape[-1] + pads[0] + pads[1]) - depth * (q - 1)
    if padding == "valid" and H_last < 1 or hx.shape[-2] + pads[2] + pads[3] < q:
        raise ValueError(f"{depth} convolution(s) of {q} x {q} filters do not fit in images of "
                         f"{tuple(hx.shape[-2:])} with padding {padding!r}")
    # S_1(x, x)(p, p) = c1 |u_p(x)|^2: the box sum of the pixels' squared norms, (n, H', W')
    vx = _window_sum((hx * hx).sum(1), q, pads, False).mul_(c1)
    vz = _window_sum((hz * hz).sum(1), q, pads, False).mul_(c1)
    grid = tuple(vx.shape[-2:])
    joint = readout == "gap"
    if joint:
        Ux, _ = unfold(hx, qq, (1, 1), pads, (1, 1), "zeros")            # (n, P, C q q)
        Uz, _ = unfold(hz, qq, (1, 1), pads, (1, 1), "zeros")
    P = grid[0] * grid[1]
    per_row = len(hz) * (P * P if joint else hx.shape[-2] * hx.shape[-1]) * 8 * 4
    rows = max(1, int(max_bytes // max(per_row, 1)))
    out = torch.empty(len(hx), len(hz), dtype=dtype, device=hx.device)
    for i in range(0, len(hx), rows):
        sl = slice(i, i + rows)
        if joint:                                                         # all pairs (p, p'): (b, m, H, W, H, W)
            S = torch.einsum("npd,mqd->nmpq", Ux[sl], Uz).mul_(c1).reshape(-1, len(hz), *grid, *grid)
        else:   # aligned pairs: <u_p(x), u_p(z)> is the box sum of the pixels' inner products, (b, m, H, W)
            S = _window_sum(torch.einsum("nchw,mchw->nmhw", hx[sl], hz), q, pads, False).mul_(c1)
        out[sl] = _cntk_rows(S, vx[sl], vz, depth, q, pads, c, joint)
    return out


def _cntk_rows(S, vx, vz, depth, q, pads, c, joint):
    """The recursion from the first layer's covariances S and the diagonals vx (b, H, W), vz (m, H, W)."""
    theta = S.clone()                                                     # Theta_1 = S_1
    for h in range(depth):
        if joint:
            norm = (vx[:, None, :, :, None, None] * vz[None, :, None, None, :, :]).sqrt_()
        else:
            norm = (vx[:, None] * vz[None]).sqrt_()
        sdot = relu_dual_(S, norm)                                        # S <- K_h (phi keeps the diagonal)
        theta.mul_(sdot)
        if h < depth - 1:                                                 # the next convolution
            S = _window_sum(S, q, pads, joint).mul_(c)
            theta = _window_sum(theta, q, pads, joint).mul_(c).add_(S)
            vx = _window_sum(vx, q, pads, False).mul_(c)
            vz = _window_sum(vz, q, pads, False).mul_(c)
    theta.add_(S)                                                         # the read-out's Theta_L Sdot_L + K_L
    return theta.flatten(2).mean(-1)


def cntk_ridge(K_train: torch.Tensor, Y: torch.Tensor, K_test: torch.Tensor, reg: float = 1e-3):
    """Kernel ridge regression with a kernel divided by the largest entry of its training block (the ConvRFM
    authors' ``Ktrain /= Ktrain.max()`` in ``CRFM_star.ipynb``), so that ``reg`` is relative to it.

    Parameters
    ----------
    K_train : torch.Tensor, shape (n, n)
    Y : torch.Tensor, shape (n,) or (n, c)
        Targets.
    K_test : torch.Tensor, shape (m, n)
    reg : float, default 1e-3
        Ridge, relative to max K_train.

    Returns
    -------
    torch.Tensor, shape (m,) or (m, c)
        Predictions at the test points.
    """
    from .direct import solve_krr

    scale = float(K_train.max())
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"the training kernel's largest entry must be positive and finite, got {scale}")
    alpha, _ = solve_krr(K_train / scale, Y.to(K_train.dtype), float(reg), overwrite=True)
    return (K_test / scale) @ alpha
