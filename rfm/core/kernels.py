r"""Kernels with a feature matrix, and their closed-form input gradients.

A feature matrix M (d x d, PSD) enters every kernel through the transformed inputs x~ = L^T x, where M = L L^T:

* Laplace    ``k_M(x, z) = exp(-(|x - z|_M / L)^q)``, q in (0, 2] (q = 1 is the kernel of the RFM papers)
* Gaussian   ``k_M(x, z) = exp(-|x - z|_M^2 / (2 L^2))`` (the grokking paper's kernel)
* polynomial ``k_M(x, z) = (x^T M z / L^2 + c)^p`` (p = 2, c = 0: the quadratic kernel)

with ``|v|_M^2 = v^T M v``. M is held by :class:`rfm.core.feature_matrix.FeatureMatrix`; the transform is computed once
and the kernels work on Euclidean distances or inner products of the transformed inputs. The kernel matrix is built
in one place, :func:`kernel_blocks` (block by block, within the memory budget of :mod:`rfm.core.blocks`), used by
:func:`kernel_matrix` and by the predictions of :class:`rfm.KernelMachine`.

For the predictor f_c(z) = sum_i alpha_ic k_M(z, x_i), the chain rule through z~ = L^T z gives
grad_z f = L grad_z~ f, with

* radial kernels:        grad_z~ f_c(z_j) = sum_i W_ji alpha_ic (z~_j - x~_i),  W = k'(r) / r
* inner-product kernels: grad_z~ f_c(z_j) = sum_i W_ji alpha_ic x~_i,           W = dk/d(x~.z~)

Pairs where the evaluation point *is* a center (same row, detected exactly by comparing the rows, not by a distance
threshold) get W = 0 in radial kernels. For the Gaussian kernel, and the Laplace kernel with q > 1, that term is
exactly zero anyway (the difference vanishes); for q <= 1 the kernel has a cusp there and 0 is the convention of the
RFM papers. Doing it by index avoids the fp32 cancellation errors of distance-threshold masking (see
``shared/research/rfm_code.md``: up to 45% AGOP error at training points).
"""
from __future__ import annotations

import math

import torch

from .._checks import check_matrix, check_number
from .blocks import block_rows, iter_blocks, resolve_mem_bytes
from .coincident import block_pairs, find_pairs
from .feature_matrix import as_feature_matrix

# ----------------------------------------------------------------------------------------------------------------
# Kernels on transformed inputs


class Kernel:
    """Base class. A kernel acts in place on a block B of pairwise numbers between transformed points: squared
    distances ``|z~_j - x~_i|^2`` for radial kernels, inner products <z~_j, x~_i> for inner-product kernels.

    * :meth:`values_` turns B into the kernel values k(z_j, x_i);
    * :meth:`weights_` turns B into the gradient weights W with grad_z~ k(z_j, x_i) = W_ji (z~_j - x~_i) (radial)
      or W_ji x~_i (inner-product), and W = 0 where the distance is exactly 0 (radial).

    Working in place on one buffer keeps the n x n temporaries to one or two per block.

    Parameters
    ----------
    bandwidth : float, default 1.0
        The bandwidth L (> 0).

    Raises
    ------
    TypeError, ValueError
        If ``bandwidth`` is not a positive number.
    """

    name = "kernel"
    radial = True
    uses_norms = False  # True: values need the squared norms of both points too (norm_values_; the NTK)
    buffers = 1         # n-wide numbers per row of a block that computing the values takes (the memory policy)

    def __init__(self, bandwidth: float = 1.0):
        self.bandwidth = float(check_number("bandwidth", bandwidth, low=0, low_inclusive=False))

    def values_(self, B: torch.Tensor) -> torch.Tensor:
        """Turn the block B of squared distances or inner products into kernel values, in place; returns B.

        Parameters
        ----------
        B : torch.Tensor, shape (m, n)
            Squared distances (radial kernels) or inner products of transformed points; overwritten.

        Returns
        -------
        torch.Tensor, shape (m, n)
            B, holding the result.

        Raises
        ------
        NotImplementedError
            In the base class.
        """
        raise NotImplementedError

    def weights_(self, B: torch.Tensor) -> torch.Tensor:
        """Turn the block B of squared distances or inner products into gradient weights, in place; returns B.

        Parameters
        ----------
        B : torch.Tensor, shape (m, n)
            Squared distances (radial kernels) or inner products of transformed points; overwritten.

        Returns
        -------
        torch.Tensor, shape (m, n)
            B, holding the result.

        Raises
        ------
        NotImplementedError
            In the base class.
        """
        raise NotImplementedError

    def norm_values_(self, B, zz, xx):
        """Kernel values from B and the squared norms zz (rows) and xx (columns) of the transformed points, in
        place; kernels with ``uses_norms`` (the NTK) override it, the others ignore the norms.

        Parameters
        ----------
        B : torch.Tensor, shape (m, n)
            Squared distances or inner products; overwritten.
        zz : torch.Tensor, shape (m,)
            Squared norms of the rows' points.
        xx : torch.Tensor, shape (n,)
            Squared norms of the columns' points.

        Returns
        -------
        torch.Tensor, shape (m, n)
            B, holding the kernel values.
        """
        return self.values_(B)

    def diagonal_values(self, sq_norms: torch.Tensor) -> torch.Tensor:
        """k(x, x) for points with squared (transformed) norms ``sq_norms``, as a new tensor.

        Parameters
        ----------
        sq_norms : torch.Tensor, shape (n,)
            Squared norms of the transformed points.

        Returns
        -------
        torch.Tensor, shape (n,)
        """
        if self.radial:
            return self.values_(torch.zeros_like(sq_norms)[:, None])[:, 0]
        return self.values_(sq_norms.clone()[:, None])[:, 0]

    def weights_from_values_(self, K: torch.Tensor):
        """Turn a block of kernel values into the gradient weights, in place, when the kernel allows it (radial
        kernels, whose k'(r)/r is a function of k(r)), so that a kernel matrix already computed for the solve
        spares the AGOP its distance products; None when it does not. Coincident pairs are masked by the
        caller.

        Parameters
        ----------
        K : torch.Tensor, shape (m, n)
            Kernel values (overwritten by kernels that implement it).

        Returns
        -------
        torch.Tensor or None
            None in the base class; K, holding the weights, in kernels that override it.
        """
        return None

    def matrix(self, X, Z=None, M=None, *, mem_bytes=None) -> torch.Tensor:
        """Kernel matrix K_ij = k_M(x_i, z_j), shape (n, m); ``Z=None`` means Z = X, ``M=None`` the identity.

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (n, d)
            Points.
        Z : array-like or torch.Tensor, shape (m, d), optional
            Points (converted to X's dtype and device); X when None.
        M : FeatureMatrix, tensor (d, d) or (d,), or None
            The feature matrix (None: the identity).
        mem_bytes : int, optional
            Working-memory budget of one block.

        Returns
        -------
        torch.Tensor, shape (n, m)
            In X's dtype (float64 unless X is float32) and device.

        Raises
        ------
        ValueError
            If X and Z have different numbers of features, or M does not act on d features.

        Examples
        --------
        >>> import torch
        >>> from rfm import LaplaceKernel
        >>> LaplaceKernel(bandwidth=1.0)(torch.tensor([[0.0], [1.0]]))
        tensor([[1.0000, 0.3679],
                [0.3679, 1.0000]])
        """
        X = check_matrix(X, "X")
        Z = None if Z is None else check_matrix(Z, "Z", dtype=X.dtype, device=X.device)
        if Z is not None and Z.shape[1] != X.shape[1]:
            raise ValueError(f"X has {X.shape[1]} features but Z has {Z.shape[1]}; they must have the same number")
        return kernel_matrix(self, X, Z, as_feature_matrix(M, X.shape[1]), mem_bytes=mem_bytes)

    def __call__(self, X, Z=None, M=None):
        return self.matrix(X, Z, M)

    def __repr__(self):
        params = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({params})"

    def __eq__(self, other):
        return type(self) is type(other) and vars(self) == vars(other)


class LaplaceKernel(Kernel):
    """``k(x, z) = exp(-(|x - z|_M / L)^q)``, exponent q in (0, 2].

    Parameters
    ----------
    bandwidth : float, default 10.0
        L (> 0).
    exponent : float, default 1.0
        q in (0, 2].
    """

    name = "laplace"

    def __init__(self, bandwidth: float = 10.0, exponent: float = 1.0):
        super().__init__(bandwidth)
        self.exponent = float(check_number("exponent", exponent, low=0, low_inclusive=False, high=2))

    def values_(self, B):
        """exp(-(r / L)^q) from the squared distances r^2, in place.

        Parameters
        ----------
        B : torch.Tensor, shape (m, n)
            Squared distances (radial kernels) or inner products of transformed points; overwritten.

        Returns
        -------
        torch.Tensor, shape (m, n)
            B, holding the result.
        """
        q, L = self.exponent, self.bandwidth
        if q == 1:
            return B.sqrt_().mul_(-1.0 / L).exp_()
        return B.mul_(1.0 / L**2).pow_(q / 2).neg_().exp_()

    def weights_(self, B):
        # k'(r)/r = -(q / L^q) r^(q-2) k(r); at r = 0 (coincident points) the weight is set to 0.
        """k'(r)/r = -(q / L^q) r^(q-2) k(r) from the squared distances r^2, in place (0 where r = 0).

        Parameters
        ----------
        B : torch.Tensor, shape (m, n)
            Squared distances (radial kernels) or inner products of transformed points; overwritten.

        Returns
        -------
        torch.Tensor, shape (m, n)
            B, holding the result.
        """
        q, L = self.exponent, self.bandwidth
        if q == 2:
            return B.mul_(-1.0 / L**2).exp_().mul_(-2.0 / L**2)
        zero = B == 0
        if q == 1:
            r = B.sqrt_()
            K = torch.mul(r, -1.0 / L).exp_()
            W = r.reciprocal_().mul_(K).mul_(-1.0 / L)
        else:
            K = torch.pow(B, q / 2).mul_(-1.0 / L**q).exp_()
            W = B.pow_((q - 2) / 2).mul_(K).mul_(-q / L**q)
        return W.masked_fill_(zero, 0.0)

    def weights_from_values_(self, K):
        # t = -ln k = (r / L)^q, and k'(r)/r = -(q / L^2) t^((q-2)/q) k; at t = 0 (r = 0) the weight is 0 as above
        """k'(r)/r from the kernel values, in place: with t = -ln k = (r / L)^q, k'(r)/r = -(q / L^2) t^((q-2)/q) k
        (0 where k >= 1, i.e. r = 0).

        Parameters
        ----------
        K : torch.Tensor, shape (m, n)
            Kernel values; overwritten.

        Returns
        -------
        torch.Tensor, shape (m, n)
            K, holding the weights.
        """
        q, L = self.exponent, self.bandwidth
        if q == 2:
            return K.mul_(-2.0 / L**2)
        zero = K >= 1
        t = torch.log(K).neg_()
        if q == 1:
            W = K.div_(t).mul_(-1.0 / L**2)
        else:
            W = K.mul_(t.pow_((q - 2) / q)).mul_(-q / L**2)
        return W.masked_fill_(zero, 0.0)


class GaussianKernel(Kernel):
    """``k(x, z) = exp(-|x - z|_M^2 / (2 L^2))``.

    Parameters
    ----------
    bandwidth : float, default 1.0
        L (> 0).
    """

    name = "gaussian"

    def __init__(self, bandwidth: float = 1.0):
        super().__init__(bandwidth)

    def values_(self, B):
        """exp(-r^2 / (2 L^2)) from the squared distances r^2, in place.

        Parameters
        ----------
        B : torch.Tensor, shape (m, n)
            Squared distances (radial kernels) or inner products of transformed points; overwritten.

        Returns
        -------
        torch.Tensor, shape (m, n)
            B, holding the result.
        """
        return B.mul_(-0.5 / self.bandwidth**2).exp_()

    def weights_(self, B):
        """k'(r)/r = -k(r) / L^2 from the squared distances r^2, in place.

        Parameters
        ----------
        B : torch.Tensor, shape (m, n)
            Squared distances (radial kernels) or inner products of transformed points; overwritten.

        Returns
        -------
        torch.Tensor, shape (m, n)
            B, holding the result.
        """
        return self.values_(B).mul_(-1.0 / self.bandwidth**2)

    def weights_from_values_(self, K):
        """k'(r)/r = -k / L^2 from the kernel values, in place.

        Parameters
        ----------
        K : torch.Tensor, shape (m, n)
            Kernel values; overwritten.

        Returns
        -------
        torch.Tensor, shape (m, n)
            K, holding the weights.
        """
        return K.mul_(-1.0 / self.bandwidth**2)


class PolynomialKernel(Kernel):
    """k(x, z) = (x^T M z / L^2 + c)^p with integer degree p >= 1; ``degree=2, c=0`` is the quadratic kernel.

    Parameters
    ----------
    degree : int, default 2
        p (>= 1).
    c : float, default 0.0
        The offset (>= 0).
    bandwidth : float, default 1.0
        L (> 0).
    """

    name = "polynomial"
    radial = False

    def __init__(self, degree: int = 2, c: float = 0.0, bandwidth: float = 1.0):
        super().__init__(bandwidth)
        self.degree = int(check_number("degree", degree, low=1, integer=True))
        self.c = float(check_number("c", c, low=0))

    def values_(self, B):
        """(B / L^2 + c)^p from the inner products B, in place.

        Parameters
        ----------
        B : torch.Tensor, shape (m, n)
            Squared distances (radial kernels) or inner products of transformed points; overwritten.

        Returns
        -------
        torch.Tensor, shape (m, n)
            B, holding the result.
        """
        return B.mul_(1.0 / self.bandwidth**2).add_(self.c).pow_(self.degree)

    def weights_(self, B):
        """dk/d<x~, z~> = (p / L^2) (B / L^2 + c)^(p-1) from the inner products B, in place.

        Parameters
        ----------
        B : torch.Tensor, shape (m, n)
            Squared distances (radial kernels) or inner products of transformed points; overwritten.

        Returns
        -------
        torch.Tensor, shape (m, n)
            B, holding the result.
        """
        p, L2 = self.degree, self.bandwidth**2
        if p == 1:
            return B.fill_(1.0 / L2)
        return B.mul_(1.0 / L2).add_(self.c).pow_(p - 1).mul_(p / L2)


class QuadraticKernel(PolynomialKernel):
    """k(x, z) = (x^T M z / L^2 + c)^2: the quadratic kernel of the grokking papers (c = 0).

    Parameters
    ----------
    c : float, default 0.0
        The offset (>= 0).
    bandwidth : float, default 1.0
        L (> 0).
    """

    name = "quadratic"

    def __init__(self, c: float = 0.0, bandwidth: float = 1.0):
        super().__init__(degree=2, c=c, bandwidth=bandwidth)


#: The kernels of :func:`get_kernel` by name; :mod:`rfm.core.ntk` adds "ntk" (it builds on :class:`Kernel`, and
#: ``import rfm`` imports it).
KERNELS = {
    "laplace": LaplaceKernel,
    "gaussian": GaussianKernel,
    "polynomial": PolynomialKernel,
    "quadratic": QuadraticKernel,
}


def get_kernel(kernel="laplace", **params) -> Kernel:
    """A kernel from its name or an instance.

    Parameters
    ----------
    kernel : {"laplace", "gaussian", "polynomial", "quadratic", "ntk"} or Kernel, default "laplace"
        The name (case-insensitive) or an instance (returned as it is).
    **params
        The kernel's parameters (``bandwidth``; ``exponent`` for Laplace; ``degree`` and ``c`` for polynomial;
        ``depth`` and ``bias`` for the ReLU NTK, :class:`rfm.core.ntk.NTKKernel`).
        Parameters a kernel does not take are rejected by name, e.g. ``get_kernel("gaussian", exponent=2)``.

    Returns
    -------
    Kernel

    Raises
    ------
    ValueError
        If the name is unknown, a parameter is not the kernel's, or an instance comes with parameters.

    Examples
    --------
    >>> from rfm import get_kernel
    >>> get_kernel("laplace", bandwidth=5.0)
    LaplaceKernel(bandwidth=5.0, exponent=1.0)
    """
    if isinstance(kernel, Kernel):
        if params:
            raise ValueError(f"got a kernel instance and extra parameters {sorted(params)}; pass one or the other")
        return kernel
    if not isinstance(kernel, str) or kernel.lower() not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; known kernels: {sorted(KERNELS)}")
    cls = KERNELS[kernel.lower()]
    try:
        return cls(**params)
    except TypeError as exc:
        raise ValueError(f"kernel {kernel!r} does not take these parameters: {exc}") from exc


def pairwise_(kernel: Kernel, Zt, Xt, *, zz=None, xx=None, pairs=None, out=None):
    """The block B of squared distances (radial kernels; coincident pairs set to exactly 0) or inner products,
    written into ``out`` when given (shape (len(Zt), len(Xt))).

    Parameters
    ----------
    kernel : Kernel
        Whether it is radial decides what B holds.
    Zt : torch.Tensor, shape (m, r)
        Transformed rows' points.
    Xt : torch.Tensor, shape (n, r)
        Transformed columns' points.
    zz, xx : torch.Tensor, shapes (m,) and (n,), optional
        Their squared norms, when already computed (radial kernels).
    pairs : tuple of index tensors, optional
        Coincident (row of Zt, row of Xt) pairs.
    out : torch.Tensor, shape (m, n), optional
        Where to write B.

    Returns
    -------
    torch.Tensor, shape (m, n)
        Squared distances clamped at 0 (radial), or Zt Xt^T.
    """
    if not kernel.radial:
        return torch.mm(Zt, Xt.T, out=out) if out is not None else torch.mm(Zt, Xt.T)
    xx = Xt.square().sum(1) if xx is None else xx
    zz = Zt.square().sum(1) if zz is None else zz
    B = torch.addmm(xx[None, :], Zt, Xt.T, alpha=-2.0, out=out) if out is not None else \
        torch.addmm(xx[None, :], Zt, Xt.T, alpha=-2.0)
    B.add_(zz[:, None]).clamp_min_(0)
    if pairs is not None and pairs[0].numel():
        B.index_put_(pairs, torch.zeros((), dtype=B.dtype, device=B.device))
    return B


def gradient_weights(kernel: Kernel, Zt, Xt, *, zz=None, xx=None, pairs=None, out=None):
    """W for a block: grad_z~ sum_i beta_i k(z_j, x_i) = sum_i beta_i W_ji (z~_j - x~_i) (radial, with W = 0 at
    coincident pairs) or sum_i beta_i W_ji x~_i (inner-product kernels).

    Parameters
    ----------
    kernel : Kernel
        The kernel.
    Zt, Xt, zz, xx, pairs, out
        As in :func:`pairwise_`.

    Returns
    -------
    torch.Tensor, shape (m, n)
    """
    W = kernel.weights_(pairwise_(kernel, Zt, Xt, zz=zz, xx=xx, pairs=pairs, out=out))
    if kernel.radial and pairs is not None and pairs[0].numel():
        W.index_put_(pairs, torch.zeros((), dtype=W.dtype, device=W.device))
    return W




def kernel_blocks(kernel: Kernel, Zt, Xt, *, pairs=None, mem_bytes=None, extra_cols: int = 0, out=None):
    """Yield ``(sl, K_block)`` with K_block = k(z_j, x_i) for the rows ``sl`` of Zt: the one place where kernel
    values are computed. Inputs are transformed points; ``pairs`` are the coincident (row of Zt, row of Xt) pairs.

    Blocks hold as many rows as fit in the memory budget (with ``extra_cols`` more numbers per row for the
    caller's work); with ``out`` (len(Zt), len(Xt)) the blocks are written into it, else into one reused buffer,
    which is overwritten by the next block.

    Parameters
    ----------
    kernel : Kernel
        The kernel.
    Zt : torch.Tensor, shape (m, r)
        Transformed rows' points.
    Xt : torch.Tensor, shape (n, r)
        Transformed columns' points.
    pairs : tuple of index tensors, optional
        Coincident pairs.
    mem_bytes : int, optional
        Working-memory budget (default: :func:`rfm.core.blocks.default_mem_bytes`).
    extra_cols : int, default 0
        More numbers per row that the caller needs.
    out : torch.Tensor, shape (m, n), optional
        Where to write the whole matrix.

    Yields
    ------
    sl : slice
        The block's rows of Zt.
    K_block : torch.Tensor, shape (sl.stop - sl.start, n)
        The kernel values, in Xt's dtype.
    """
    n = Xt.shape[0]
    mem = resolve_mem_bytes(mem_bytes, Xt.device)
    rows = min(max(1, Zt.shape[0]), block_rows(n, kernel.buffers * n + extra_cols, Xt.element_size(), mem))
    norms = kernel.radial or kernel.uses_norms
    xx = Xt.square().sum(1) if norms else None
    zz = Zt.square().sum(1) if norms else None
    buf = None if out is not None else torch.empty(rows, n, dtype=Xt.dtype, device=Xt.device)
    for sl in iter_blocks(Zt.shape[0], rows):
        target = out[sl] if out is not None else buf[: sl.stop - sl.start]
        B = pairwise_(kernel, Zt[sl], Xt, zz=None if zz is None else zz[sl], xx=xx, pairs=block_pairs(pairs, sl),
                      out=target)
        yield sl, kernel.norm_values_(B, zz[sl], xx) if kernel.uses_norms else kernel.values_(B)


def kernel_matrix(kernel, X, Z=None, fm=None, *, transformed: bool = False, pairs=None,
                  mem_bytes: int | None = None) -> torch.Tensor:
    """K_ij = k_M(x_i, z_j) as an (n, m) matrix, computed in place block by block (the only n x m memory is K).

    Parameters
    ----------
    kernel : Kernel or str
        The kernel (an instance, or a name for :func:`get_kernel` with its default parameters).
    X : torch.Tensor, shape (n, d)
        Points (array-likes are checked and converted, float64 unless float32).
    Z : torch.Tensor, shape (m, d), optional
        Defaults to X.
    fm : FeatureMatrix, optional
        M; the identity when None. Ignored with ``transformed=True`` (X and Z are then already L^T x).
    transformed : bool, default False
        X and Z are already transformed points.
    pairs : tuple of index tensors, optional
        Coincident (row of X, row of Z) pairs (:func:`rfm.core.coincident.find_pairs`); found by comparing rows
        when not given (for K(X, X) in transformed coordinates: the diagonal).
    mem_bytes : int, optional
        Working-memory budget for one block.

    Returns
    -------
    torch.Tensor, shape (n, m)
        In X's dtype and device.
    """
    kernel = get_kernel(kernel)
    if not isinstance(X, torch.Tensor) or (Z is not None and not isinstance(Z, torch.Tensor)):
        X, Z = _as_tensors(X, Z)
    if kernel.radial and pairs is None:
        if not transformed:
            pairs = find_pairs(X, Z)
        elif Z is None:
            diag = torch.arange(X.shape[0], device=X.device)
            pairs = (diag, diag)
    if not transformed and fm is not None:
        X = fm.transform(X)
        Z = None if Z is None else fm.transform(Z)
    Z = X if Z is None else Z
    K = torch.empty(X.shape[0], Z.shape[0], dtype=X.dtype, device=X.device)
    for _ in kernel_blocks(kernel, X, Z, pairs=pairs, mem_bytes=mem_bytes, out=K):
        pass
    return K


def _as_tensors(X, Z):
    """:func:`kernel_matrix` on array-likes: X and Z as finite 2-D tensors (float64 unless float32)."""
    X = check_matrix(X, "X")
    if Z is not None:
        Z = check_matrix(Z, "Z", dtype=X.dtype, device=X.device)
        if Z.shape[1] != X.shape[1]:
            raise ValueError(f"Z has {Z.shape[1]} features but X has {X.shape[1]}: they must have the same columns")
    return X, Z


def random_fourier_features(X, k: int, bandwidth: float, generator=None):
    """Random Fourier features ``sqrt(2/k) cos(X W + b)`` of the Gaussian kernel ``exp(-|x - z|^2 / (2 L^2))``.

    W has N(0, 1/L^2) entries and b is uniform on [0, 2 pi), both drawn in float64 on the CPU (W first) and moved to
    X's device, so a seed gives the same features on every device. ``F @ F.T`` tends to the Gaussian kernel matrix as
    k grows.

    Parameters
    ----------
    X : torch.Tensor of shape (n, d)
        Inputs (float64 for the features to be float64).
    k : int
        Number of features.
    bandwidth : float
        The Gaussian kernel's bandwidth L.
    generator : torch.Generator, optional
        Source of the random draws.

    Returns
    -------
    torch.Tensor of shape (n, k)
        The features.
    """
    k = check_number("k", k, low=1, integer=True)
    bandwidth = check_number("bandwidth", bandwidth, low=0, low_inclusive=False)
    W = torch.randn(X.shape[1], k, generator=generator, dtype=torch.float64).to(X.device) / bandwidth
    b = (2 * math.pi * torch.rand(k, generator=generator, dtype=torch.float64)).to(X.device)
    return math.sqrt(2.0 / k) * torch.cos(X @ W + b)
