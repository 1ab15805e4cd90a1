r"""Fused kernel products on the fly, in Triton: ``f(D(Z, X)) @ V`` without an m x n block in memory.

For the Laplace kernel (exponent 1 or 2) and the Gaussian kernel on transformed points z~ = L^T z, x~ = L^T x, one
program computes a tile of squared distances ``|z~|^2 + |x~|^2 - 2 z~.x~`` by a matrix product, turns it into kernel
values (or gradient weights k'(r)/r) in registers, and multiplies the tile by the matching rows of V, accumulating
the tiles' partial products in float64. Nothing but Z, X, V and the output touches memory, so the product costs
the distance flops and one exp (and one sqrt) per entry, where the blocked path
(:func:`rfm.core.kernels.kernel_blocks`) writes and re-reads each block several times.

What it computes is the blocked path's arithmetic, entry for entry:

* squared distances clamped at 0; coincident pairs (evaluation point *is* a centre: the diagonal and duplicated
  rows, :mod:`rfm.core.coincident`) get exactly 0, found by comparing integer row ids, never by a threshold;
* ``what="values"``: k(z_j, x_i), so a coincident pair contributes exactly V's row;
* ``what="weights"``: the gradient weights W = k'(r)/r of :meth:`rfm.core.kernels.Kernel.weights_`, with W = 0 at
  coincident pairs (and, for the Laplace kernel with exponent 1, wherever the distance is 0);
* products of a tile with V in float32 (on a GPU: ``precision``), partial sums over tiles in float64.

:func:`kernel_product` is the entry point (``K(Z, X) @ V``); :class:`rfm.core.cg.KernelOperator` uses it for K·v
on the fly when it is available (:func:`available`: triton importable, and a CUDA tensor or the Triton interpreter,
``TRITON_INTERPRET=1``, which runs the same kernel with numpy on a CPU: that is how the tests cover it without a
GPU). :func:`kernel_gradients` gives the per-point gradients grad f_c(z_j) (the AGOP's kernel-weighted sums
W alpha and W (alpha (x) X~)) by the same kernel. triton is an optional dependency (the ``gpu`` extra); without it
everything here reports itself unavailable and the package keeps its pure-torch paths.
"""
from __future__ import annotations

import functools
import os

import torch

from .kernels import GaussianKernel, Kernel, LaplaceKernel

#: The tile sizes and warps, the fastest of five timed on an H200 at n = 1e5, d = 100
#: (results/gpu/2026-11-27-h200/kv.json; BM = 128 with BD = 128 needs more shared memory than the chip has).
#: d <= BD runs in one chunk.
CONFIG = {"BM": 64, "BN": 64, "BD": 128, "num_warps": 4, "num_stages": 2}

#: The precision of the two products on a GPU, "ieee" (float32 FMA), "tf32x3" (three TF32 products, float32
#: accuracy), "tf32", or "tf32+fp32" (distances in TF32, the product with V in float32 FMAs, for at most 4 columns of
#: V; more columns: a tf32x3 product). Measured on an H200 (results/gpu/2026-11-27-h200), one K·v at n = 10^6,
#: d = 100: tf32x3 18.9 s, rel. error 1.9e-7; tf32 3.8 s, rel. error 5.7e-4 (4.8e-3 at 3·10^5), too coarse for CG's
#: 1e-3, hence the default. "tf32+fp32" is not measured on a GPU yet: emulated on a CPU (TF32 rounding of the
#: inputs, n = 6,000), TF32 distances alone give a relative error of 2.7e-5 and a TF32 product with V 5.6e-4, so
#: most of TF32's error is the second product. The Triton interpreter ignores the precision (numpy float32).
PRECISION = "tf32x3"
PRECISIONS = ("ieee", "tf32x3", "tf32", "tf32+fp32")

_FN = {"laplace1/values": 0, "laplace1/weights": 1, "exp2/values": 2, "exp2/weights": 3}


def triton_importable() -> bool:
    """Whether triton (the optional ``gpu`` extra) can be imported here.

    Returns
    -------
    bool
        True when ``import triton`` and ``import triton.language`` succeed.
    """
    try:
        import triton
        import triton.language  # noqa: F401
    except Exception:  # ImportError, or a broken install
        return False
    return True


def interpreting() -> bool:
    """Whether Triton runs in its interpreter (``TRITON_INTERPRET=1``): kernels then run on CPU tensors.

    Returns
    -------
    bool
    """
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def supports(kernel: Kernel) -> bool:
    """Whether the fused path computes this kernel: Laplace with exponent 1 or 2, or Gaussian.

    Parameters
    ----------
    kernel : Kernel
        The kernel.

    Returns
    -------
    bool
    """
    if type(kernel) is LaplaceKernel:
        return kernel.exponent in (1.0, 2.0)
    return type(kernel) is GaussianKernel


def available(kernel: Kernel, device, dtype=torch.float32) -> bool:
    """The fused path can run: a supported kernel, float32 or float64 points, triton importable, and a CUDA device
    (or the Triton interpreter, for CPU tensors).

    Parameters
    ----------
    kernel : Kernel
        The kernel.
    device : torch.device or str
        Where the points are.
    dtype : torch.dtype, default torch.float32
        Their dtype.

    Returns
    -------
    bool
    """
    if not supports(kernel) or dtype not in (torch.float32, torch.float64):
        return False
    dev = torch.device(device).type
    if dev == "cuda":
        return triton_importable()
    return dev == "cpu" and interpreting() and triton_importable()


def _fn_and_scales(kernel: Kernel, what: str):
    """Which function of the squared distance the kernel computes, and its two constants."""
    L = kernel.bandwidth
    if type(kernel) is LaplaceKernel and kernel.exponent == 1.0:
        # values exp(-r / L); weights -(1 / L) exp(-r / L) / r
        return _FN["laplace1/" + what], 1.0 / L, -1.0 / L
    if type(kernel) is LaplaceKernel:  # exponent 2: exp(-d2 / L^2), weights -(2 / L^2) exp(-d2 / L^2)
        return _FN["exp2/" + what], 1.0 / L**2, -2.0 / L**2
    if type(kernel) is GaussianKernel:  # exp(-d2 / (2 L^2)), weights -(1 / L^2) exp(...)
        return _FN["exp2/" + what], 0.5 / L**2, -1.0 / L**2
    raise ValueError(f"the fused path does not compute {kernel!r} (Laplace with exponent 1 or 2, or Gaussian)")


@functools.cache
def _kernel(interpret: bool):
    """The Triton kernel, built on first use (so that TRITON_INTERPRET is read when it is called, not imported)."""
    import triton
    import triton.language as tl

    global _add  # the reduction's combine function, made here so that it is interpreted when the kernel is

    @triton.jit
    def _add(a, b):
        return a + b

    @triton.jit
    def fused_kv(Z, X, V, OUT, ZZ, XX, ZID, XID, m, n, d, c, s1, s2,
                 FN: tl.constexpr, USE_IDS: tl.constexpr, ONE_CHUNK: tl.constexpr, PREC: tl.constexpr,
                 VPREC: tl.constexpr, VFMA: tl.constexpr,
                 BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr, BC: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_c = tl.program_id(1)
        rm = pid_m * BM + tl.arange(0, BM)
        rc = pid_c * BC + tl.arange(0, BC)
        mmask = rm < m
        cmask = rc < c
        zz = tl.load(ZZ + rm, mask=mmask, other=0.0)
        if USE_IDS:
            zid = tl.load(ZID + rm, mask=mmask, other=-1)
        rd0 = tl.arange(0, BD)
        if ONE_CHUNK:  # d <= BD: the rows of Z stay in registers for the whole sweep
            z0 = tl.load(Z + rm[:, None] * d + rd0[None, :], mask=mmask[:, None] & (rd0[None, :] < d), other=0.0)
        acc = tl.full((BM, BC), 0.0, dtype=tl.float64)
        for n0 in range(0, n, BN):
            rn = n0 + tl.arange(0, BN)
            nmask = rn < n
            if ONE_CHUNK:
                x = tl.load(X + rn[:, None] * d + rd0[None, :], mask=nmask[:, None] & (rd0[None, :] < d), other=0.0)
                dot = tl.dot(z0, tl.trans(x), input_precision=PREC)
            else:
                dot = tl.full((BM, BN), 0.0, dtype=Z.dtype.element_ty)
                for d0 in range(0, d, BD):
                    rd = d0 + rd0
                    dmask = rd < d
                    z = tl.load(Z + rm[:, None] * d + rd[None, :], mask=mmask[:, None] & dmask[None, :], other=0.0)
                    x = tl.load(X + rn[:, None] * d + rd[None, :], mask=nmask[:, None] & dmask[None, :], other=0.0)
                    dot = tl.dot(z, tl.trans(x), dot, input_precision=PREC)
            xx = tl.load(XX + rn, mask=nmask, other=0.0)
            d2 = tl.maximum(zz[:, None] + xx[None, :] - 2.0 * dot, 0.0)
            if USE_IDS:
                xid = tl.load(XID + rn, mask=nmask, other=-2)
                same = zid[:, None] == xid[None, :]
                d2 = tl.where(same, 0.0, d2)
            if FN == 0:
                k = tl.exp(-tl.sqrt(d2) * s1)
            elif FN == 1:
                r = tl.sqrt(d2)
                k = tl.where(d2 > 0.0, tl.exp(-r * s1) * s2 / tl.where(d2 > 0.0, r, 1.0), 0.0)
            elif FN == 2:
                k = tl.exp(-d2 * s1)
            else:
                k = tl.exp(-d2 * s1) * s2
                if USE_IDS:
                    k = tl.where(same, 0.0, k)
            k = tl.where(nmask[None, :], k, 0.0)
            v = tl.load(V + rn[:, None] * c + rc[None, :], mask=nmask[:, None] & cmask[None, :], other=0.0)
            if VFMA:  # a few columns: float32 products and sums on the FMA units (BC = 1, 2 or 4)
                acc += tl.reduce(k[:, :, None] * v[None, :, :], 1, _add).to(tl.float64)
            else:
                acc += tl.dot(k, v, input_precision=VPREC).to(tl.float64)
        tl.store(OUT + rm[:, None] * c + rc[None, :], acc, mask=mmask[:, None] & cmask[None, :])

    return fused_kv


def pair_ids(pairs, m: int, n: int, device):
    """Integer ids (z_ids (m,), x_ids (n,)) such that z_ids[j] == x_ids[i] exactly for the coincident pairs (j, i).

    ``pairs`` must be complete (every (j, i) with z_j equal to x_i), as :func:`rfm.core.coincident.find_pairs`
    gives them: each evaluation point that is a centre takes the smallest index of the centres equal to it, those
    centres take it too; the other points get ids that match nothing.

    Parameters
    ----------
    pairs : tuple of index tensors or None
        The complete coincident (row of Z, row of X) pairs.
    m : int
        The number of evaluation points.
    n : int
        The number of centres.
    device : torch.device or str
        Where the ids go.

    Returns
    -------
    z_ids : torch.Tensor of int32, shape (m,)
    x_ids : torch.Tensor of int32, shape (n,)
    """
    x_ids = torch.arange(n, device=device, dtype=torch.int64)
    z_ids = -1 - torch.arange(m, device=device, dtype=torch.int64)
    if pairs is None or pairs[0].numel() == 0:
        return z_ids.to(torch.int32), x_ids.to(torch.int32)
    rows, cols = pairs[0].to(device), pairs[1].to(device)
    first = torch.full((m,), n, dtype=torch.int64, device=device)
    first.scatter_reduce_(0, rows, cols, reduce="amin")
    z_ids[rows] = first[rows]
    x_ids[cols] = first[rows]
    return z_ids.to(torch.int32), x_ids.to(torch.int32)


def _launch(kernel, Zt, Xt, V, what, ids, precision, config, out=None):
    fn, s1, s2 = _fn_and_scales(kernel, what)
    cfg = dict(CONFIG, **(config or {}))
    m, d = Zt.shape
    n, c = V.shape
    work = torch.float32 if Zt.dtype == torch.float32 else torch.float64
    Z = Zt.to(work).contiguous()
    X = Xt.to(work).contiguous()
    Vw = V.to(work).contiguous()
    zz = Z.square().sum(1)
    xx = X.square().sum(1)
    z_ids, x_ids = ids if ids is not None else (zz, xx)  # unused pointers when there are no ids
    if out is None:
        out = torch.empty(m, c, dtype=torch.float64, device=Zt.device)
    if m == 0 or c == 0:
        return out
    if n == 0:
        return out.zero_()
    interp = Zt.device.type == "cpu"
    BM, BN = cfg["BM"], cfg["BN"]
    BD = cfg["BD"]
    one = d <= BD
    if one:  # one chunk of the feature dimension, padded to a power of two (at least 16 for tl.dot)
        BD = max(16, 1 << (d - 1).bit_length())
    prec = "ieee" if work == torch.float64 else (precision or PRECISION)
    if prec not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {prec!r}")
    vfma = prec == "tf32+fp32" and c <= 4
    if vfma:
        BC = 1 if c == 1 else (2 if c == 2 else 4)
        prec, vprec = "tf32", "ieee"
    else:
        BC = 16 if c <= 16 else (32 if c <= 32 else 64)
        prec, vprec = ("tf32", "tf32x3") if prec == "tf32+fp32" else (prec, prec)
    grid = (-(-m // BM), -(-c // BC))
    extra = {} if interp else {"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]}
    _kernel(interp)[grid](Z, X, Vw, out, zz, xx, z_ids, x_ids, m, n, d, c, s1, s2,
                          FN=fn, USE_IDS=ids is not None, ONE_CHUNK=one, PREC=prec, VPREC=vprec, VFMA=vfma,
                          BM=BM, BN=BN, BD=BD, BC=BC, **extra)
    return out


def kernel_product(kernel: Kernel, Zt: torch.Tensor, Xt: torch.Tensor, V: torch.Tensor, *, pairs=None, ids=None,
                   what: str = "values", out_dtype=None, precision: str | None = None, config: dict | None = None):
    """``k(Z~, X~) @ V`` (or the gradient weights' ``W @ V`` with ``what="weights"``), fused, shape (m, c).

    Parameters
    ----------
    kernel : LaplaceKernel (exponent 1 or 2) or GaussianKernel
    Zt, Xt : torch.Tensor, shapes (m, r) and (n, r)
        Transformed points (float32, or float64 for an exact reference); one device.
    V : torch.Tensor, shape (n, c) or (n,)
    pairs : tuple of index tensors, optional
        The complete coincident (row of Zt, row of Xt) pairs; their distance is exactly 0 (weights: W = 0).
    ids : tuple (z_ids, x_ids), optional
        The same as precomputed :func:`pair_ids` (int32), to spare recomputing them at every product.
    what : {"values", "weights"}
    out_dtype : torch.dtype, optional
        Dtype of the result (default V's); the tiles' partial sums are float64 whatever it is.
    precision : {"ieee", "tf32x3", "tf32", "tf32+fp32"}, optional
        precision of the products for float32 on a GPU (default ``PRECISION``; see ``PRECISIONS``).
    config : dict, optional
        Tile sizes overriding :data:`CONFIG`.

    Returns
    -------
    torch.Tensor, shape (m, c) (or (m,) for a 1-D V)
        In ``out_dtype`` (default V's dtype).

    Raises
    ------
    ValueError
        If ``what`` is unknown or the shapes do not match.
    RuntimeError
        If the fused path is not available for this kernel, device and dtype.
    """
    if what not in ("values", "weights"):
        raise ValueError(f"what must be 'values' or 'weights', got {what!r}")
    if not available(kernel, Zt.device, Zt.dtype):
        raise RuntimeError(f"the fused kernel product is not available for {kernel!r} on {Zt.device} "
                           f"({Zt.dtype}): it needs triton and a CUDA device (or TRITON_INTERPRET=1 on a CPU)")
    if Zt.ndim != 2 or Xt.ndim != 2 or Zt.shape[1] != Xt.shape[1]:
        raise ValueError(f"Zt and Xt must be (m, r) and (n, r), got {tuple(Zt.shape)} and {tuple(Xt.shape)}")
    vec = V.ndim == 1
    V2 = V[:, None] if vec else V
    if V2.shape[0] != Xt.shape[0]:
        raise ValueError(f"V must have {Xt.shape[0]} rows (one per point of Xt), got {tuple(V.shape)}")
    if ids is None and pairs is not None and kernel.radial:
        ids = pair_ids(pairs, Zt.shape[0], Xt.shape[0], Zt.device)
    out = _launch(kernel, Zt, Xt, V2, what, ids, precision, config)
    out = out.to(V.dtype if out_dtype is None else out_dtype)
    return out[:, 0] if vec else out


def kernel_gradients(kernel: Kernel, Zt, Xt, alpha, *, pairs=None, ids=None, precision=None, config=None):
    """grad_z~ f_c(z_j) for f_c = sum_i alpha_ic k(., x_i), in transformed coordinates, shape (m, c, r):
    ``Z~_j (W alpha)_jc - (W (alpha (x) X~))_jc`` with W the fused gradient weights (the AGOP's kernel-weighted
    sums), accumulated in float64 and returned in Zt's dtype.

    Parameters
    ----------
    kernel : LaplaceKernel (exponent 1 or 2) or GaussianKernel
        The kernel.
    Zt : torch.Tensor, shape (m, r)
        Transformed evaluation points.
    Xt : torch.Tensor, shape (n, r)
        Transformed centres.
    alpha : torch.Tensor, shape (n,) or (n, c)
        Coefficients.
    pairs, ids, precision, config
        As in :func:`kernel_product`.

    Returns
    -------
    torch.Tensor, shape (m, c, r)
        In Zt's dtype.
    """
    alpha = alpha[:, None] if alpha.ndim == 1 else alpha
    n, c = alpha.shape
    r = Xt.shape[1]
    AX = (alpha[:, :, None] * Xt[:, None, :]).reshape(n, c * r)
    S = kernel_product(kernel, Zt, Xt, torch.cat([alpha, AX], 1), pairs=pairs, ids=ids, what="weights",
                       out_dtype=torch.float64, precision=precision, config=config)
    Wa, WAX = S[:, :c], S[:, c:].reshape(-1, c, r)
    G = Zt.to(torch.float64)[:, None, :] * Wa[:, :, None] - WAX
    return G.to(Zt.dtype)
