r"""The Average Gradient Outer Product.

For a predictor f: R^d -> R^c and points x_1..x_N,

    AGOP(f) = (1/N) sum_j sum_c grad f_c(x_j) grad f_c(x_j)^T                    (d x d, PSD)

and its *centred* form subtracts, for each output c, the mean gradient g_c = (1/N) sum_j grad f_c(x_j):

    AGOP_centred(f) = AGOP(f) - sum_c g_c g_c^T.

Both are accumulated from the running sums S = sum grad grad^T and s_c = sum_j grad f_c, so the result is the same
whatever the batch size (the public RFM codes centre per batch, which makes M depend on it). The EGOP of a target
function is the same quantity for the true function.

Two routes:

* :func:`agop` -- any differentiable torch function, by autograd;
* :func:`kernel_agop` -- the closed form for a kernel predictor f(z) = sum_i alpha_i k_M(z, x_i), streamed over the
  evaluation points, with seeded random sampling of the points.

Both take ``power`` (M = AGOP^power, computed on the PSD eigen-decomposition) and ``normalize``
(None, "max": divide by the largest absolute entry, "trace": by the trace, "fro": by the Frobenius norm), applied in
that order by :func:`feature_update`.
"""
from __future__ import annotations

import torch

from ._checks import check_choice, check_matrix, check_number
from .kernels import (FeatureMatrix, as_feature_matrix, block_pairs, block_rows, coincident_pairs, default_mem_bytes,
                      get_kernel, gradient_weights, iter_blocks, predictor_grad_transformed, row_ids)
from .utils import make_generator, psd_power

NORMALIZATIONS = (None, "max", "trace", "fro")


class AGOPAccumulator:
    """Running sums for the (optionally centred) AGOP, independent of how the points are batched."""

    def __init__(self, n_outputs: int, dim: int, *, diag: bool = False, dtype=torch.float64, device=None):
        self.diag = diag
        self.count = 0
        self.S = torch.zeros((dim,) if diag else (dim, dim), dtype=dtype, device=device)
        self.s = torch.zeros(n_outputs, dim, dtype=dtype, device=device)

    def add(self, G: torch.Tensor):
        """Add per-point gradients G of shape (b, c, dim)."""
        G = G.to(self.S.dtype)
        flat = G.reshape(-1, G.shape[-1])
        if self.diag:
            self.S += flat.square().sum(0)
        else:
            self.S += flat.T @ flat
        self.s += G.sum(0)
        self.count += G.shape[0]

    def result(self, centre: bool = False) -> torch.Tensor:
        if self.count == 0:
            raise ValueError("no points were added to the AGOP")
        A = self.S / self.count
        if centre:
            mean = self.s / self.count
            A = A - (mean.square().sum(0) if self.diag else mean.T @ mean)
        return A if self.diag else 0.5 * (A + A.T)


def normalization_scale(M: torch.Tensor, normalize: str | None) -> torch.Tensor:
    """The number M is divided by under ``normalize`` (1 for None); M is a matrix or a diagonal vector."""
    check_choice("normalize", normalize, NORMALIZATIONS)
    if normalize is None:
        return torch.ones((), dtype=M.dtype, device=M.device)
    if normalize == "max":
        scale = M.abs().max()
    elif normalize == "trace":
        scale = M.sum() if M.ndim == 1 else M.diagonal().sum()
    else:
        scale = M.norm()
    if not float(scale) > 0:
        raise ValueError(f"cannot normalise a zero AGOP (normalize={normalize!r}): the predictor's gradient is 0")
    return scale


def feature_update(A: torch.Tensor, power: float = 1.0, normalize: str | None = None) -> torch.Tensor:
    """M = A^power (PSD power; elementwise for a 1-D diagonal), then divided as ``normalize`` says."""
    check_number("power", power, low=0, low_inclusive=False)
    M = psd_power(A, power)
    return M / normalization_scale(M, normalize)


def _batch_jacobians(f, X: torch.Tensor, batch_size: int | None):
    """Yield the per-point gradients (b, c, d) of a row-wise function, one batch of rows at a time."""
    n = X.shape[0]
    bs = n if batch_size is None else check_number("batch_size", batch_size, low=1, integer=True)
    for start in range(0, n, bs):
        Xb = X[start:start + bs].detach().clone().requires_grad_(True)
        with torch.enable_grad():
            out = f(Xb)
            if not isinstance(out, torch.Tensor):
                raise TypeError(f"f must return a torch.Tensor, got {type(out).__name__}")
            out = out.reshape(Xb.shape[0], -1)
            c = out.shape[1]
            grads = [torch.autograd.grad(out[:, k].sum(), Xb, retain_graph=k < c - 1, allow_unused=True)[0]
                     for k in range(c)]
        yield torch.stack([torch.zeros_like(Xb) if g is None else g for g in grads], 1).detach()


def jacobians(f, X, *, batch_size: int | None = None) -> torch.Tensor:
    """Per-point gradients grad f_c(x_j) of a differentiable torch function acting row by row: shape (n, c, d).

    Each output's gradient is one backward pass over a batch (the gradient of sum_j f_c(x_j) has grad f_c(x_j) as
    its row j, because rows do not interact)."""
    X = check_matrix(X, "X")
    return torch.cat(list(_batch_jacobians(f, X, batch_size)))


def agop(f, X, *, batch_size: int | None = None, centre: bool = False, diag: bool = False, power: float = 1.0,
         normalize: str | None = None) -> torch.Tensor:
    """AGOP of a differentiable torch function ``f`` at the rows of ``X``, by autograd.

    ``f`` maps an (b, d) batch to (b,) or (b, c) and must act row by row (no batch statistics). The gradient of each
    output is one backward pass over the batch, and batches are accumulated (:class:`AGOPAccumulator`), so the
    result does not depend on ``batch_size``. Returns a float64 (d, d) matrix (or (d,) with ``diag=True``)."""
    X = check_matrix(X, "X")
    acc = None
    for G in _batch_jacobians(f, X, batch_size):
        if acc is None:
            acc = AGOPAccumulator(G.shape[1], X.shape[1], diag=diag, device=X.device)
        acc.add(G)
    A = acc.result(centre)
    if power == 1.0 and normalize is None:
        return A
    return feature_update(A, power, normalize)


def sample_points(n: int, max_points: int | None, generator=None) -> torch.Tensor | None:
    """Indices of a uniform random subset of size ``max_points`` (without replacement), or None for all points."""
    if max_points is None or max_points >= n:
        return None
    check_number("max_points", max_points, low=1, integer=True)
    return torch.randperm(n, generator=make_generator(0 if generator is None else generator))[:max_points]


def kernel_agop_transformed(kernel, Xt, alpha, Zt, pairs=None, *, diag=False, centre=False,
                            mem_bytes=None, acc_dtype=torch.float64, algorithm="auto"):
    """The AGOP in transformed coordinates (r x r, or r with ``diag``), streamed over the rows of Zt.

    ``pairs`` (from :func:`rfm.kernels.coincident_pairs`) are the (evaluation point, center) pairs that are the same
    point; their weight is 0.

    ``algorithm``: "direct" forms each gradient g_jc (cost ~ m n c r) and accumulates g g^T, the numerically safe
    form; "folded" sums over the outputs before the large products (cost ~ m n (n + c + r)), which is much faster
    when there are few centers and many outputs and features (modular arithmetic: n = 1860, c = 61, r = 122), but
    adds terms that cancel, so "auto" uses it only in float64 and when it is at least twice cheaper."""
    check_choice("algorithm", algorithm, ("auto", "direct", "folded"))
    n, c = alpha.shape
    r = Xt.shape[1]
    mem = default_mem_bytes(Xt.device) if mem_bytes is None else mem_bytes
    if algorithm == "auto":
        cheaper = 2 * (n + 2 * c + r) < c * r
        fits = 8 * n * n <= mem // 2
        algorithm = "folded" if (Xt.dtype == torch.float64 and cheaper and fits) else "direct"
    if algorithm == "folded":
        return _kernel_agop_folded(kernel, Xt, alpha, Zt, pairs, diag=diag, centre=centre, mem=mem,
                                   acc_dtype=acc_dtype)
    # alpha (x) X~ is (n, c*r); take the outputs in chunks if it would not fit in half the budget.
    cc = max(1, min(c, (mem // 2) // max(1, n * r * Xt.element_size())))
    xx = Xt.square().sum(1)
    acc = AGOPAccumulator(c, r, diag=diag, dtype=acc_dtype, device=Xt.device)
    rows = min(Zt.shape[0], block_rows(n, 3 * n + 2 * cc * r, Xt.element_size(), mem // 2))
    buf = torch.empty(rows, n, dtype=Xt.dtype, device=Xt.device)
    for c0 in range(0, c, cc):
        a = alpha[:, c0:c0 + cc]
        AX = (a[:, :, None] * Xt[:, None, :]).reshape(n, -1)
        part = AGOPAccumulator(a.shape[1], r, diag=diag, dtype=acc_dtype, device=Xt.device)
        for sl in iter_blocks(Zt.shape[0], rows):
            part.add(predictor_grad_transformed(kernel, Zt[sl], Xt, a, block_pairs(pairs, sl), xx=xx, AX=AX,
                                                out=buf[: sl.stop - sl.start]))
        acc.S += part.S
        acc.s[c0:c0 + cc] = part.s
        acc.count = part.count
    return acc.result(centre)


def _kernel_agop_folded(kernel, Xt, alpha, Zt, pairs, *, diag, centre, mem, acc_dtype):
    r"""The AGOP with the sum over outputs taken first.

    With W the gradient weights of a block (b x n), A = W alpha and u_jc = sum_i W_ji alpha_ic x~_i, the gradient is
    g_jc = A_jc z~_j - u_jc for radial kernels (g_jc = u_jc for inner-product kernels), and

        sum_jc g g^T = Z~^T diag(sum_c A^2) Z~ - Z~^T Q X~ - (Z~^T Q X~)^T + X~^T ((W^T W) o alpha alpha^T) X~,

    Q = W o (A alpha^T); the per-output sums are sum_j g_jc = A^T Z~ - (alpha o colsum W)^T X~."""
    n, c = alpha.shape
    r = Xt.shape[1]
    xx = Xt.square().sum(1)
    X64, a64 = Xt.to(acc_dtype), alpha.to(acc_dtype)
    T = torch.zeros(n, n, dtype=acc_dtype, device=Xt.device)
    S = torch.zeros((r,) if diag else (r, r), dtype=acc_dtype, device=Xt.device)
    s = torch.zeros(c, r, dtype=acc_dtype, device=Xt.device)
    wsum = torch.zeros(n, dtype=acc_dtype, device=Xt.device)
    rows = min(Zt.shape[0], block_rows(n, 4 * n + c + r, Xt.element_size(), mem // 2))
    buf = torch.empty(rows, n, dtype=Xt.dtype, device=Xt.device)
    for sl in iter_blocks(Zt.shape[0], rows):
        W = gradient_weights(kernel, Zt[sl], Xt, xx=xx, pairs=block_pairs(pairs, sl),
                             out=buf[: sl.stop - sl.start]).to(acc_dtype)
        T.addmm_(W.T, W)
        wsum += W.sum(0)
        if kernel.radial:
            Zb = Zt[sl].to(acc_dtype)
            A = W @ a64
            QX = W.mul_(A @ a64.T) @ X64
            a2 = A.square().sum(1)
            if diag:
                S += a2 @ Zb.square() - 2 * (Zb * QX).sum(0)
            else:
                cross = Zb.T @ QX
                S += (Zb * a2[:, None]).T @ Zb - cross - cross.T
            s += A.T @ Zb
    RX = T.mul_(a64 @ a64.T) @ X64
    S += (X64 * RX).sum(0) if diag else X64.T @ RX
    u_sum = (a64 * wsum[:, None]).T @ X64
    s += -u_sum if kernel.radial else u_sum
    count = Zt.shape[0]
    A = S / count
    if centre:
        mean = s / count
        A = A - (mean.square().sum(0) if diag else mean.T @ mean)
    return A if diag else 0.5 * (A + A.T)


def kernel_agop(kernel, centers, alpha, X=None, M=None, *, centre: bool = False, diag: bool = False,
                power: float = 1.0, normalize: str | None = None, max_points: int | None = None,
                generator=None, mem_bytes: int | None = None) -> torch.Tensor:
    """Closed-form AGOP of f(z) = sum_i alpha_i k_M(z, x_i) over the rows of ``X`` (default: the centers).

    ``kernel`` is a :class:`~rfm.kernels.Kernel` or its name; ``M`` is None (identity), a matrix, a vector
    (diagonal) or a :class:`~rfm.kernels.FeatureMatrix`. With ``max_points`` a uniform random subset of the
    evaluation points is used, drawn from ``generator`` (a seed or ``torch.Generator``). Evaluation points that
    coincide with a center are detected by exact row comparison. Returns a float64 matrix (d, d), or (d,) with
    ``diag=True``; ``power`` and ``normalize`` as in :func:`feature_update`."""
    kernel = get_kernel(kernel)
    centers = check_matrix(centers, "centers")
    alpha = torch.as_tensor(alpha, dtype=centers.dtype, device=centers.device)
    alpha = alpha[:, None] if alpha.ndim == 1 else alpha
    if alpha.ndim != 2 or alpha.shape[0] != centers.shape[0]:
        raise ValueError(f"alpha must have one row per center ({centers.shape[0]}), got shape {tuple(alpha.shape)}")
    X = centers if X is None else check_matrix(X, "X", dtype=centers.dtype, device=centers.device)
    fm = as_feature_matrix(M, centers.shape[1]).to(centers.device)
    idx = sample_points(X.shape[0], max_points, generator)
    if idx is not None:
        X = X[idx.to(X.device)]
    pairs = coincident_pairs(*row_ids(X, centers)) if kernel.radial else None
    At = kernel_agop_transformed(kernel, fm.transform(centers), alpha, fm.transform(X), pairs,
                                 diag=diag and fm.kind in ("identity", "diag"), centre=centre, mem_bytes=mem_bytes)
    A = fm.to(dtype=torch.float64).pullback_agop(At)
    if diag and A.ndim == 2:
        A = A.diagonal().clone()
    if power == 1.0 and normalize is None:
        return A
    return feature_update(A, power, normalize)


def kernel_gradients(kernel, centers, alpha, X, M=None, *, mem_bytes=None) -> torch.Tensor:
    """Per-point gradients grad f_c(x_j) of the kernel predictor, shape (m, c, d)."""
    kernel = get_kernel(kernel)
    centers = check_matrix(centers, "centers")
    X = check_matrix(X, "X", dtype=centers.dtype, device=centers.device)
    alpha = torch.as_tensor(alpha, dtype=centers.dtype, device=centers.device)
    alpha = alpha[:, None] if alpha.ndim == 1 else alpha
    fm: FeatureMatrix = as_feature_matrix(M, centers.shape[1]).to(centers.device)
    Xt, Zt = fm.transform(centers), fm.transform(X)
    pairs = coincident_pairs(*row_ids(X, centers)) if kernel.radial else None
    mem = default_mem_bytes(X.device) if mem_bytes is None else mem_bytes
    rows = block_rows(centers.shape[0], 3 * centers.shape[0], X.element_size(), mem)
    return torch.cat([fm.pullback(predictor_grad_transformed(kernel, Zt[sl], Xt, alpha, block_pairs(pairs, sl)))
                      for sl in iter_blocks(X.shape[0], rows)])
