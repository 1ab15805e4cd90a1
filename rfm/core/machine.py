r"""A fitted kernel machine f(z) = sum_i alpha_i k_M(z, x_i): predictions, input gradients and the closed-form AGOP.

:class:`KernelMachine` is the object every RFM iteration produces and the estimators hold (``model.machine_``). It
owns the three things the papers compute from a kernel predictor:

* ``predict(Z)``    -- K_M(Z, X) alpha in blocks, differentiable in Z through the closed-form gradient;
* ``gradients(Z)``  -- the per-point input gradients grad f_c(z_j), shape (m, c, d);
* ``agop(Z)``       -- the AGOP (1/m) sum_j sum_c grad f_c(z_j) grad f_c(z_j)^T in closed form, streamed over the
  points (optionally centred per output, or only its diagonal), accumulated in float64.

For radial kernels the gradient in transformed coordinates z~ = L^T z is sum_i W_ji alpha_ic (z~_j - x~_i) with
W = k'(r)/r, set to 0 where z_j *is* a centre (found by exact row comparison, :mod:`rfm.core.coincident`); for
inner-product kernels it is sum_i W_ji alpha_ic x~_i. The gradient in input coordinates is L times it.
"""
from __future__ import annotations

import torch

from .._checks import check_choice, check_matrix, check_same_features
from .._compat import renamed_keyword
from .agop import AGOPAccumulator, sample_points
from .blocks import block_rows, iter_blocks, resolve_mem_bytes
from .coincident import block_pairs, find_pairs, subset_pairs
from .feature_matrix import FeatureMatrix, as_feature_matrix, feature_update
from .kernels import Kernel, get_kernel, gradient_weights, kernel_blocks

AGOP_ALGORITHMS = ("auto", "direct", "folded")


class KernelMachine:
    r"""The kernel predictor f(z) = sum_i alpha_i k_M(z, x_i).

    Parameters
    ----------
    kernel : Kernel or str
        The kernel (an instance, or a name with its default parameters).
    centers : array-like or torch.Tensor, shape (n, d)
        The centres x_i (the training points of a fitted model).
    alpha : array-like or torch.Tensor, shape (n,) or (n, c)
        The coefficients; a 1-D alpha is one output.
    M : FeatureMatrix, tensor (d, d) or (d,), or None
        The feature matrix (None: the identity).
    mem_bytes : int, optional
        Working-memory budget for one block of kernel values (default: 1 GiB on a CPU, a quarter of the free GPU
        memory).

    Examples
    --------
    >>> import torch
    >>> from rfm import KernelMachine
    >>> X = torch.tensor([[0.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    >>> f = KernelMachine("laplace", X, torch.tensor([1.0, -1.0], dtype=torch.float64))
    >>> f.predict(X).shape, f.gradients(X).shape, f.agop().shape
    (torch.Size([2, 1]), torch.Size([2, 1, 2]), torch.Size([2, 2]))
    """

    def __init__(self, kernel, centers, alpha, M=None, *, mem_bytes: int | None = None):
        self.kernel: Kernel = get_kernel(kernel)
        self.centers = check_matrix(centers, "centers")
        n, d = self.centers.shape
        alpha = check_matrix(alpha[:, None] if getattr(alpha, "ndim", 2) == 1 else alpha, "alpha",
                             dtype=self.centers.dtype, device=self.centers.device)
        if alpha.shape[0] != n:
            raise ValueError(f"alpha must have one row per centre ({n}), got shape {tuple(alpha.shape)}")
        self.alpha = alpha
        self.fm: FeatureMatrix = as_feature_matrix(M, d)
        self.mem_bytes = mem_bytes
        self.centers_t = self.fm.transform(self.centers)

    @classmethod
    def from_iterate(cls, kernel, centers, centers_t, alpha, fm, mem_bytes=None) -> KernelMachine:
        """A machine from an RFM iteration's own tensors (already checked, transformed once), without copies or
        validation passes (the RFM loop builds one per solve).

        Parameters
        ----------
        kernel : rfm.Kernel
        centers : torch.Tensor
            The training points (n, d), validated by the caller.
        centers_t : torch.Tensor
            ``fm.transform(centers)``.
        alpha : torch.Tensor
            Coefficients (n,) or (n, c).
        fm : rfm.FeatureMatrix
        mem_bytes : int or None, default None
            Working-memory budget of its kernel blocks.

        Returns
        -------
        KernelMachine
        """
        self = cls.__new__(cls)
        self.kernel, self.centers, self.centers_t, self.fm, self.mem_bytes = kernel, centers, centers_t, fm, mem_bytes
        self.alpha = alpha if alpha.ndim == 2 else alpha[:, None]
        return self

    # -- sizes ---------------------------------------------------------------------------------------------------
    @property
    def n_centers(self) -> int:
        return self.centers.shape[0]

    @property
    def n_features(self) -> int:
        return self.centers.shape[1]

    @property
    def n_outputs(self) -> int:
        return self.alpha.shape[1]

    @property
    def M(self) -> torch.Tensor:
        """The feature matrix M as a CPU tensor (the diagonal vector of a diagonal M, else the dense float64 matrix)."""
        return self.fm.snapshot()

    def __repr__(self):
        return (f"KernelMachine({self.kernel!r}, n_centers={self.n_centers}, n_features={self.n_features}, "
                f"n_outputs={self.n_outputs}, M={self.fm.kind})")

    # -- inputs ----------------------------------------------------------------------------------------------------
    def _points(self, Z, name="Z") -> torch.Tensor:
        Z = check_matrix(Z, name, dtype=self.centers.dtype, device=self.centers.device)
        check_same_features(Z, self.n_features, name)
        return Z

    def _pairs(self, Z):
        return find_pairs(Z, self.centers) if self.kernel.radial else None

    def _mem(self) -> int:
        return resolve_mem_bytes(self.mem_bytes, self.centers.device)

    # -- predictions -----------------------------------------------------------------------------------------------
    def predict(self, Z, *, pairs=None) -> torch.Tensor:
        """f(Z), differentiable in Z (closed-form backward pass).

        Parameters
        ----------
        Z : array-like or torch.Tensor, shape (m, d)
            Evaluation points (converted to the centres' dtype and device).
        pairs : tuple of index tensors, optional
            Coincident (row of Z, centre) pairs when already known (found by comparing rows otherwise; used by
            radial kernels only).

        Returns
        -------
        torch.Tensor, shape (m, c)
            The predictions, in the machine's dtype and device.

        Raises
        ------
        ValueError
            If Z is not a matrix with the centres' number of features.
        """
        Z = self._points(Z)
        pairs = self._pairs(Z) if pairs is None and self.kernel.radial else pairs
        return _KernelPredict.apply(Z, self, pairs)

    __call__ = predict

    def gradients(self, Z) -> torch.Tensor:
        """Per-point input gradients grad f_c(z_j), in closed form (0 weight at coincident points).

        Parameters
        ----------
        Z : array-like or torch.Tensor, shape (m, d)
            Evaluation points.

        Returns
        -------
        torch.Tensor, shape (m, c, d)
            The gradients, in the machine's dtype and device.
        """
        Z = self._points(Z).detach()
        Zt, pairs = self.fm.transform(Z), self._pairs(Z)
        n = self.n_centers
        rows = block_rows(n, 3 * n, Z.element_size(), self._mem())
        return torch.cat([self.fm.pullback(_gradient_block(self.kernel, Zt[sl], self.centers_t, self.alpha,
                                                           block_pairs(pairs, sl)))
                          for sl in iter_blocks(Z.shape[0], rows)])

    # -- the AGOP --------------------------------------------------------------------------------------------------
    def agop(self, Z=None, *, center: bool = False, diag: bool = False, max_points: int | None = None,
             generator=None, pairs=None, algorithm: str = "auto", K=None, centre: bool | None = None) -> torch.Tensor:
        """The AGOP of f at the rows of Z (default: the centres), in closed form; float64 (d, d), or (d,) with
        ``diag`` (the diagonal alone, computed directly when M is diagonal).

        Parameters
        ----------
        Z : array-like or torch.Tensor, shape (m, d), optional
            Evaluation points; the centres when None.
        center : bool, default False
            Subtract each output's mean gradient (the centred AGOP).
        diag : bool, default False
            Return only the diagonal.
        max_points : int, optional
            Use a uniform random subset of this many points (without replacement), drawn from ``generator``.
        generator : int or torch.Generator, optional
            Seed for that subset (0 when None).
        pairs : tuple of index tensors, optional
            Coincident (row of Z, centre) pairs when already known.
        algorithm : {"auto", "direct", "folded"}, default "auto"
            "direct" forms each gradient and accumulates g g^T; "folded" sums over the outputs first (much faster
            with many outputs and few centres, e.g. modular arithmetic), "auto" uses it in float64 when it is at
            least twice cheaper.
        K : torch.Tensor, shape (n, n), optional
            The kernel matrix K(X, X) of the centres under this M, when the solve kept it (only with ``Z=None``):
            radial kernels then get their gradient weights from it without recomputing distances.
        centre : bool or None, default None
            Deprecated name of ``center`` (used when given, with a DeprecationWarning).

        Returns
        -------
        torch.Tensor, float64, shape (d, d) (or (d,) with ``diag``)

        Raises
        ------
        ValueError
            If ``algorithm`` is unknown, or ``K`` is given with ``Z``.
        """
        center = renamed_keyword("KernelMachine.agop", "centre", "center", centre, center)
        check_choice("algorithm", algorithm, AGOP_ALGORITHMS)
        if Z is None:
            Z, Zt = self.centers, self.centers_t
        elif K is not None:
            raise ValueError("K (the kernel matrix of the centres) can only be reused with Z=None")
        else:
            Z = self._points(Z).detach()
            Zt = self.fm.transform(Z)
        idx = sample_points(Z.shape[0], max_points, generator)
        if idx is not None:
            idx = idx.to(Z.device)
            pairs = subset_pairs(pairs, idx, Z.shape[0])
            Z, Zt, K = Z[idx], Zt[idx], None if K is None else K[idx]
        if pairs is None and self.kernel.radial:
            pairs = self._pairs(Z)
        want_diag = diag and self.fm.is_diagonal
        At = transformed_agop(self.kernel, self.centers_t, self.alpha, Zt, pairs, diag=want_diag, center=center,
                              mem_bytes=self._mem(), algorithm=algorithm, K=K)
        A = self.fm.to(dtype=torch.float64).pullback_agop(At)
        return A.diagonal().clone() if diag and A.ndim == 2 else A


# ----------------------------------------------------------------------------------------------------------------
# Predictions with a closed-form backward pass


class _KernelPredict(torch.autograd.Function):
    """f(Z) = K(Z, X) alpha with a closed-form backward pass (exact at coincident points)."""

    @staticmethod
    def forward(ctx, Z, machine, pairs):
        m = machine
        out = torch.empty(Z.shape[0], m.n_outputs, dtype=Z.dtype, device=Z.device)
        for sl, K in kernel_blocks(m.kernel, m.fm.transform(Z), m.centers_t, pairs=pairs, mem_bytes=m._mem(),
                                   extra_cols=m.n_centers):
            torch.mm(K, m.alpha, out=out[sl])
        ctx.save_for_backward(Z)
        ctx.machine, ctx.pairs = machine, pairs
        return out

    @staticmethod
    def backward(ctx, grad_out):
        (Z,) = ctx.saved_tensors
        m = ctx.machine
        Zt = m.fm.transform(Z)
        # the cotangent mixes the outputs: grad_z sum_c g_jc f_c(z_j) = sum_i (sum_c g_jc alpha_ic) grad_z k(z_j, x_i)
        beta = grad_out @ m.alpha.T
        rows = block_rows(m.n_centers, 3 * m.n_centers, Z.element_size(), m._mem())
        grads = [_gradient_block(m.kernel, Zt[sl], m.centers_t, None, block_pairs(ctx.pairs, sl),
                                 pair_coef=beta[sl])
                 for sl in iter_blocks(Z.shape[0], rows)]
        return m.fm.pullback(torch.cat(grads)), None, None


def _gradient_block(kernel: Kernel, Zt, Xt, alpha, pairs=None, *, xx=None, pair_coef=None, AX=None, out=None,
                    K=None):
    """grad_z~ f_c(z_j) for every point z_j of a block and output c, in transformed coordinates: (b, c, r).

    ``pairs`` are the block's coincident pairs (rows relative to the block), whose weight is 0.
    With ``pair_coef`` (b, n) given instead of ``alpha``, returns grad_z~ sum_i pair_coef_ji k(z_j, x_i): (b, r)
    (vector-Jacobian products). ``AX`` may hold alpha (x) X~ reshaped to (n, c*r), precomputed once for many
    blocks; ``out`` a (b, n) buffer to work in. ``K`` (b, n), the block's kernel values when already computed,
    gives the weights without the distance products (radial kernels)."""
    W = None
    if K is not None:
        W = kernel.weights_from_values_(out.copy_(K) if out is not None else K.clone())
        if W is not None and pairs is not None and pairs[0].numel():
            W.index_put_(pairs, torch.zeros((), dtype=W.dtype, device=W.device))
    if W is None:
        W = gradient_weights(kernel, Zt, Xt, xx=xx, pairs=pairs, out=out)
    if pair_coef is not None:
        W.mul_(pair_coef)
        G = W @ Xt
        return G.neg_().add_(Zt * W.sum(1, keepdim=True)) if kernel.radial else G
    b, r = Zt.shape
    n, c = alpha.shape
    if AX is None:
        AX = (alpha[:, :, None] * Xt[:, None, :]).reshape(n, c * r)
    G = (W @ AX).reshape(b, c, r)
    if kernel.radial:
        G.neg_().add_(Zt[:, None, :] * (W @ alpha)[:, :, None])
    return G


# ----------------------------------------------------------------------------------------------------------------
# The closed-form AGOP in transformed coordinates


def transformed_agop(kernel, Xt, alpha, Zt, pairs=None, *, diag=False, center=False,
                     mem_bytes=None, acc_dtype=torch.float64, algorithm="auto", K=None, centre=None):
    """The AGOP in transformed coordinates (r x r, or r with ``diag``), streamed over the rows of Zt.

    ``pairs`` (from :func:`rfm.core.coincident.coincident_pairs`) are the (evaluation point, center) pairs that are the
    same point; their weight is 0.

    ``algorithm``: "direct" forms each gradient g_jc (cost ~ m n c r) and accumulates g g^T, the numerically safe
    form; "folded" sums over the outputs before the large products (cost ~ m n (n + c + r)), which is much faster
    when there are few centers and many outputs and features (modular arithmetic: n = 1860, c = 61, r = 122), but
    adds terms that cancel, so "auto" uses it only in float64 and when it is at least twice cheaper.

    ``K`` (len(Zt), n), the kernel values at these pairs when the solve already computed them, spares the direct
    algorithm the distance products for radial kernels (the weights follow from the values).

    Parameters
    ----------
    kernel : Kernel
        The kernel.
    Xt : torch.Tensor, shape (n, r)
        The transformed centres.
    alpha : torch.Tensor, shape (n, c)
        The coefficients.
    Zt : torch.Tensor, shape (m, r)
        The transformed evaluation points.
    pairs : tuple of index tensors, optional
        Coincident (row of Zt, centre) pairs.
    diag : bool, default False
        Return only the diagonal.
    center : bool, default False
        Subtract each output's mean gradient.
    mem_bytes : int, optional
        Working-memory budget (default as in :class:`KernelMachine`).
    acc_dtype : torch.dtype, default torch.float64
        The dtype of the running sums.
    algorithm : {"auto", "direct", "folded"}, default "auto"
        As above.
    K : torch.Tensor, shape (m, n), optional
        Kernel values already computed.
    centre : bool or None, default None
        Deprecated name of ``center`` (used when given, with a DeprecationWarning).

    Returns
    -------
    torch.Tensor, ``acc_dtype``, shape (r, r) (or (r,) with ``diag``)
    """
    center = renamed_keyword("transformed_agop", "centre", "center", centre, center)
    check_choice("algorithm", algorithm, AGOP_ALGORITHMS)
    n, c = alpha.shape
    r = Xt.shape[1]
    mem = resolve_mem_bytes(mem_bytes, Xt.device)
    if algorithm == "auto":
        cheaper = 2 * (n + 2 * c + r) < c * r
        fits = 8 * n * n <= mem // 2
        algorithm = "folded" if (Xt.dtype == torch.float64 and cheaper and fits) else "direct"
    if algorithm == "folded":
        return _kernel_agop_folded(kernel, Xt, alpha, Zt, pairs, diag=diag, center=center, mem=mem,
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
            part.add(_gradient_block(kernel, Zt[sl], Xt, a, block_pairs(pairs, sl), xx=xx, AX=AX,
                                     out=buf[: sl.stop - sl.start], K=None if K is None else K[sl]))
        acc.S += part.S
        acc.s[c0:c0 + cc] = part.s
        acc.count = part.count
    return acc.result(center)


def _kernel_agop_folded(kernel, Xt, alpha, Zt, pairs, *, diag, center, mem, acc_dtype):
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
    if center:
        mean = s / count
        A = A - (mean.square().sum(0) if diag else mean.T @ mean)
    return A if diag else 0.5 * (A + A.T)


# ----------------------------------------------------------------------------------------------------------------
# Functional forms (a machine built on the fly)


def kernel_agop(kernel, centers, alpha, X=None, M=None, *, center: bool = False, diag: bool = False,
                power: float = 1.0, normalize: str | None = None, max_points: int | None = None,
                generator=None, mem_bytes: int | None = None, centre: bool | None = None) -> torch.Tensor:
    """Closed-form AGOP of f(z) = sum_i alpha_i k_M(z, x_i) over the rows of ``X`` (default: the centres):
    :meth:`KernelMachine.agop`, then :func:`rfm.feature_update` with ``power`` and ``normalize``.

    Parameters
    ----------
    kernel, centers, alpha, M, mem_bytes
        As in :class:`KernelMachine`.
    X : array-like or torch.Tensor, shape (m, d), optional
        Evaluation points; the centres when None.
    center, diag, max_points, generator
        As in :meth:`KernelMachine.agop`.
    power : float, default 1.0
        Matrix power of the AGOP.
    normalize : str or None, default None
        Normalisation of :func:`rfm.feature_update`.
    centre : bool or None, default None
        Deprecated name of ``center`` (used when given, with a DeprecationWarning).

    Returns
    -------
    torch.Tensor, float64, shape (d, d) (or (d,) with ``diag``)
    """
    center = renamed_keyword("rfm.kernel_agop", "centre", "center", centre, center)
    A = KernelMachine(kernel, centers, alpha, M, mem_bytes=mem_bytes).agop(
        X, center=center, diag=diag, max_points=max_points, generator=generator)
    if power == 1.0 and normalize is None:
        return A
    return feature_update(A, power, normalize)


def kernel_gradients(kernel, centers, alpha, X, M=None, *, mem_bytes=None) -> torch.Tensor:
    """Per-point gradients grad f_c(x_j) of the kernel predictor: :meth:`KernelMachine.gradients`.

    Parameters
    ----------
    kernel, centers, alpha, M, mem_bytes
        As in :class:`KernelMachine`.
    X : array-like or torch.Tensor, shape (m, d)
        Evaluation points.

    Returns
    -------
    torch.Tensor, shape (m, c, d)
    """
    return KernelMachine(kernel, centers, alpha, M, mem_bytes=mem_bytes).gradients(X)
