r"""Kernels with a feature matrix, and their closed-form input gradients.

A feature matrix M (d x d, PSD) enters every kernel through the transformed inputs x~ = L^T x, where M = L L^T:

* Laplace   k_M(x, z) = exp(-(|x - z|_M / L)^q),  q in (0, 2]  (q = 1 is the kernel of the RFM papers)
* Gaussian  k_M(x, z) = exp(-|x - z|_M^2 / (2 L^2))             (the grokking paper's kernel)
* polynomial k_M(x, z) = (x^T M z / L^2 + c)^p                  (p = 2, c = 0: the quadratic kernel)

with |v|_M^2 = v^T M v.  M is held by :class:`FeatureMatrix` in one of three forms: ``full`` (d x d), ``diag``
(a vector) or ``factor`` (F with M = F F^T, d x r); the transform is computed once and the kernels work on
Euclidean distances or inner products of the transformed inputs.

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

import torch

from ._checks import check_matrix, check_number

# ----------------------------------------------------------------------------------------------------------------
# The feature matrix M = L L^T


class FeatureMatrix:
    """A PSD feature matrix M in ``full``, ``diag`` or ``factor`` form (or the identity).

    Build one with :meth:`identity`, :meth:`full`, :meth:`diag` or :meth:`factor`, or let :func:`as_feature_matrix`
    read a tensor (1-D -> diag, square -> full)."""

    _KINDS = ("identity", "full", "diag", "factor")

    def __init__(self, kind: str, data: torch.Tensor | None, dim: int):
        if kind not in self._KINDS:
            raise ValueError(f"kind must be one of {self._KINDS}, got {kind!r}")
        self.kind, self.data, self.dim = kind, data, int(dim)
        self._sqrt = None

    # -- constructors ------------------------------------------------------------------------------------------
    @classmethod
    def identity(cls, d: int):
        check_number("d", d, low=1, integer=True)
        return cls("identity", None, d)

    @classmethod
    def full(cls, M):
        M = check_matrix(M, "M")
        if M.shape[0] != M.shape[1]:
            raise ValueError(f"a full feature matrix M must be square, got shape {tuple(M.shape)}")
        scale = M.abs().max().clamp_min(1e-300)
        if float((M - M.T).abs().max() / scale) > 1e-4:
            raise ValueError("a full feature matrix M must be symmetric (|M - M^T| is more than 1e-4 of max|M|)")
        return cls("full", 0.5 * (M + M.T), M.shape[0])

    @classmethod
    def diag(cls, m):
        m = torch.as_tensor(m)
        if m.ndim != 1:
            raise ValueError(f"a diagonal feature matrix is given by a 1-D vector, got shape {tuple(m.shape)}")
        m = check_matrix(m[:, None], "M (diagonal)")[:, 0]
        if bool((m < 0).any()):
            raise ValueError("a diagonal feature matrix must have non-negative entries (M must be PSD)")
        return cls("diag", m, m.shape[0])

    @classmethod
    def factor(cls, F):
        F = check_matrix(F, "F")
        return cls("factor", F, F.shape[0])

    # -- conversions -------------------------------------------------------------------------------------------
    def to(self, device=None, dtype=None) -> "FeatureMatrix":
        data = None if self.data is None else self.data.to(device=device, dtype=dtype)
        out = FeatureMatrix(self.kind, data, self.dim)
        out._sqrt = self._sqrt  # float64 eigen-factor, reusable whatever the working dtype
        return out

    def dense(self, dtype=torch.float64, device=None) -> torch.Tensor:
        """M as a d x d matrix."""
        if self.kind == "identity":
            return torch.eye(self.dim, dtype=dtype, device=device)
        if self.kind == "diag":
            return torch.diag(self.data).to(dtype=dtype, device=device)
        if self.kind == "factor":
            return (self.data @ self.data.T).to(dtype=dtype, device=device)
        return self.data.to(dtype=dtype, device=device)

    def sqrt_factor(self, dtype, device):
        """L with M = L L^T: ``None`` (identity), a vector (diag), or a matrix (d, r)."""
        if self.kind == "identity":
            return None
        if self.kind == "diag":
            return self.data.to(dtype=dtype, device=device).clamp_min(0).sqrt()
        if self.kind == "factor":
            return self.data.to(dtype=dtype, device=device)
        if self._sqrt is None:
            # L = U diag(sqrt(lambda)); computed in float64 for accuracy, once per feature matrix.
            evals, evecs = torch.linalg.eigh(self.data.to(torch.float64))
            self._sqrt = evecs * evals.clamp_min(0).sqrt()
        return self._sqrt.to(dtype=dtype, device=device)

    def transform(self, X: torch.Tensor) -> torch.Tensor:
        """x~ = L^T x for every row of X."""
        L = self.sqrt_factor(X.dtype, X.device)
        if L is None:
            return X
        return X * L if L.ndim == 1 else X @ L

    def pullback(self, G: torch.Tensor) -> torch.Tensor:
        """Map gradients from transformed to input coordinates: grad_z = L grad_z~ (on the last axis)."""
        L = self.sqrt_factor(G.dtype, G.device)
        if L is None:
            return G
        return G * L if L.ndim == 1 else G @ L.T

    def pullback_agop(self, A: torch.Tensor) -> torch.Tensor:
        """L A L^T for an AGOP computed in transformed coordinates (A a matrix, or a vector for diagonal L)."""
        L = self.sqrt_factor(A.dtype, A.device)
        if L is None:
            return A
        if L.ndim == 1:
            return A * L.square() if A.ndim == 1 else L[:, None] * A * L[None, :]
        return L @ A @ L.T

    def __repr__(self):
        return f"FeatureMatrix(kind={self.kind!r}, dim={self.dim})"


def as_feature_matrix(M, d: int | None = None) -> FeatureMatrix:
    """Read ``None`` (identity), a :class:`FeatureMatrix`, a 1-D vector (diagonal) or a square matrix (full)."""
    if M is None:
        if d is None:
            raise ValueError("M=None needs the input dimension d")
        return FeatureMatrix.identity(d)
    if isinstance(M, FeatureMatrix):
        fm = M
    else:
        t = torch.as_tensor(M)
        fm = FeatureMatrix.diag(t) if t.ndim == 1 else FeatureMatrix.full(t)
    if d is not None and fm.dim != d:
        raise ValueError(f"M acts on {fm.dim} features but X has {d}")
    return fm


# ----------------------------------------------------------------------------------------------------------------
# Kernels on transformed inputs


class Kernel:
    """Base class. A kernel acts in place on a block B of pairwise numbers between transformed points: squared
    distances |z~_j - x~_i|^2 for radial kernels, inner products <z~_j, x~_i> for inner-product kernels.

    * :meth:`values_` turns B into the kernel values k(z_j, x_i);
    * :meth:`weights_` turns B into the gradient weights W with grad_z~ k(z_j, x_i) = W_ji (z~_j - x~_i) (radial)
      or W_ji x~_i (inner-product), and W = 0 where the distance is exactly 0 (radial).

    Working in place on one buffer keeps the n x n temporaries to one or two per block."""

    name = "kernel"
    radial = True

    def __init__(self, bandwidth: float = 1.0):
        self.bandwidth = float(check_number("bandwidth", bandwidth, low=0, low_inclusive=False))

    def values_(self, B: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def weights_(self, B: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def matrix(self, X, Z=None, M=None) -> torch.Tensor:
        """Kernel matrix K_ij = k_M(x_i, z_j) (n x m). For large inputs use :func:`rfm.solvers.kernel_matrix`."""
        X = check_matrix(X, "X")
        Z = X if Z is None else check_matrix(Z, "Z", dtype=X.dtype, device=X.device)
        fm = as_feature_matrix(M, X.shape[1])
        Xt, Zt = fm.transform(X), fm.transform(Z)
        pairs = coincident_pairs(*row_ids(X, Z)) if self.radial else None
        return self.values_(pairwise_(self, Xt, Zt, pairs=pairs))

    def __call__(self, X, Z=None, M=None):
        return self.matrix(X, Z, M)

    def __repr__(self):
        params = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({params})"

    def __eq__(self, other):
        return type(self) is type(other) and vars(self) == vars(other)


class LaplaceKernel(Kernel):
    r"""k(x, z) = exp(-(|x - z|_M / L)^q), exponent q in (0, 2]."""

    name = "laplace"

    def __init__(self, bandwidth: float = 10.0, exponent: float = 1.0):
        super().__init__(bandwidth)
        self.exponent = float(check_number("exponent", exponent, low=0, low_inclusive=False, high=2))

    def values_(self, B):
        q, L = self.exponent, self.bandwidth
        if q == 1:
            return B.sqrt_().mul_(-1.0 / L).exp_()
        return B.mul_(1.0 / L**2).pow_(q / 2).neg_().exp_()

    def weights_(self, B):
        # k'(r)/r = -(q / L^q) r^(q-2) k(r); at r = 0 (coincident points) the weight is set to 0.
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


class GaussianKernel(Kernel):
    r"""k(x, z) = exp(-|x - z|_M^2 / (2 L^2))."""

    name = "gaussian"

    def __init__(self, bandwidth: float = 1.0):
        super().__init__(bandwidth)

    def values_(self, B):
        return B.mul_(-0.5 / self.bandwidth**2).exp_()

    def weights_(self, B):
        return self.values_(B).mul_(-1.0 / self.bandwidth**2)


class PolynomialKernel(Kernel):
    r"""k(x, z) = (x^T M z / L^2 + c)^p with integer degree p >= 1; ``degree=2, c=0`` is the quadratic kernel."""

    name = "polynomial"
    radial = False

    def __init__(self, degree: int = 2, c: float = 0.0, bandwidth: float = 1.0):
        super().__init__(bandwidth)
        self.degree = int(check_number("degree", degree, low=1, integer=True))
        self.c = float(check_number("c", c, low=0))

    def values_(self, B):
        return B.mul_(1.0 / self.bandwidth**2).add_(self.c).pow_(self.degree)

    def weights_(self, B):
        p, L2 = self.degree, self.bandwidth**2
        if p == 1:
            return B.fill_(1.0 / L2)
        return B.mul_(1.0 / L2).add_(self.c).pow_(p - 1).mul_(p / L2)


class QuadraticKernel(PolynomialKernel):
    r"""k(x, z) = (x^T M z / L^2 + c)^2: the quadratic kernel of the grokking papers (c = 0)."""

    name = "quadratic"

    def __init__(self, c: float = 0.0, bandwidth: float = 1.0):
        super().__init__(degree=2, c=c, bandwidth=bandwidth)


KERNELS = {
    "laplace": LaplaceKernel,
    "gaussian": GaussianKernel,
    "polynomial": PolynomialKernel,
    "quadratic": QuadraticKernel,
}


def get_kernel(kernel="laplace", **params) -> Kernel:
    """A kernel from its name (``"laplace"``, ``"gaussian"``, ``"polynomial"``, ``"quadratic"``) or an instance.

    Parameters a kernel does not take are rejected by name, e.g. ``get_kernel("gaussian", exponent=2)``."""
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


# ----------------------------------------------------------------------------------------------------------------
# Blocks, coincident pairs and the predictor's gradient (shared by prediction, its backward pass and the AGOP)


def row_ids(*mats: torch.Tensor):
    """Integer ids such that two rows (of any of the matrices) get the same id iff they are exactly equal."""
    sizes = [m.shape[0] for m in mats]
    _, inv = torch.unique(torch.cat([m.detach() for m in mats]), dim=0, return_inverse=True)
    return torch.split(inv, sizes)


def coincident_pairs(z_ids: torch.Tensor, x_ids: torch.Tensor):
    """All (j, i) with z_ids[j] == x_ids[i], as two index tensors sorted by j: the pairs of identical points."""
    order = torch.argsort(x_ids)
    xs = x_ids[order]
    left = torch.searchsorted(xs, z_ids, right=False)
    counts = torch.searchsorted(xs, z_ids, right=True) - left
    rows = torch.repeat_interleave(torch.arange(z_ids.shape[0], device=z_ids.device), counts)
    starts = torch.repeat_interleave(left, counts)
    offsets = torch.arange(rows.shape[0], device=z_ids.device) - torch.repeat_interleave(torch.cumsum(counts, 0) - counts,
                                                                                          counts)
    return rows, order[starts + offsets]


def block_pairs(pairs, sl: slice):
    """The coincident pairs whose row lies in the block ``sl``, with rows relative to the block start."""
    if pairs is None:
        return None
    rows, cols = pairs
    lo, hi = torch.searchsorted(rows, torch.tensor([sl.start, sl.stop], device=rows.device)).tolist()
    return rows[lo:hi] - sl.start, cols[lo:hi]


def pairwise_(kernel: Kernel, Zt, Xt, *, zz=None, xx=None, pairs=None, out=None):
    """The block B of squared distances (radial kernels; coincident pairs set to exactly 0) or inner products,
    written into ``out`` when given (shape (len(Zt), len(Xt)))."""
    if not kernel.radial:
        return torch.mm(Zt, Xt.T, out=out)
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
    coincident pairs) or sum_i beta_i W_ji x~_i (inner-product kernels)."""
    W = kernel.weights_(pairwise_(kernel, Zt, Xt, zz=zz, xx=xx, pairs=pairs, out=out))
    if kernel.radial and pairs is not None and pairs[0].numel():
        W.index_put_(pairs, torch.zeros((), dtype=W.dtype, device=W.device))
    return W


def iter_blocks(m: int, rows: int):
    for start in range(0, m, rows):
        yield slice(start, min(start + rows, m))


def block_rows(n_cols: int, per_row_cols: int, itemsize: int, mem_bytes: int) -> int:
    """Rows per block so that about ``per_row_cols`` numbers per row fit in ``mem_bytes``."""
    return max(1, int(mem_bytes // max(1, itemsize * per_row_cols)))


def default_mem_bytes(device: torch.device) -> int:
    """Working-memory budget for one block: 1 GB on CPU, a quarter of the free memory on a GPU."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free // 4)
    return 2**30


def predictor_grad_transformed(kernel: Kernel, Zt, Xt, alpha, pairs=None, *, xx=None, pair_coef=None, AX=None,
                               out=None):
    """grad_z~ f_c(z_j) for every point z_j of the block and output c, in transformed coordinates: (b, c, r).

    ``pairs`` are the block's coincident pairs (rows relative to the block), whose weight is 0.
    With ``pair_coef`` (b, n) given instead of ``alpha``, returns grad_z~ sum_i pair_coef_ji k(z_j, x_i): (b, r)
    (used for vector-Jacobian products). ``AX`` may hold alpha (x) X~ reshaped to (n, c*r), precomputed once for
    many blocks; ``out`` a (b, n) buffer to work in."""
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


class _KernelPredict(torch.autograd.Function):
    """f(Z) = K(Z, X) alpha with a closed-form backward pass (exact at coincident points)."""

    @staticmethod
    def forward(ctx, Z, kernel, fm, X, Xt, alpha, xx, mem_bytes, pairs):
        Zt = fm.transform(Z)
        zz = Zt.square().sum(1)
        if pairs is None and kernel.radial:
            pairs = coincident_pairs(*row_ids(Z, X))
        rows = block_rows(Xt.shape[0], 2 * Xt.shape[0], Z.element_size(), mem_bytes)
        buf = torch.empty(min(rows, Z.shape[0]), Xt.shape[0], dtype=Z.dtype, device=Z.device)
        out = torch.empty(Z.shape[0], alpha.shape[1], dtype=Z.dtype, device=Z.device)
        for sl in iter_blocks(Z.shape[0], rows):
            B = pairwise_(kernel, Zt[sl], Xt, zz=zz[sl], xx=xx, pairs=block_pairs(pairs, sl),
                          out=buf[: sl.stop - sl.start])
            torch.mm(kernel.values_(B), alpha, out=out[sl])
        ctx.save_for_backward(Z, X, Xt, alpha, xx)
        ctx.kernel, ctx.fm, ctx.mem_bytes, ctx.pairs = kernel, fm, mem_bytes, pairs
        return out

    @staticmethod
    def backward(ctx, grad_out):
        Z, X, Xt, alpha, xx = ctx.saved_tensors
        Zt = ctx.fm.transform(Z)
        # the cotangent mixes the outputs: grad_z sum_c g_jc f_c(z_j) = sum_i (sum_c g_jc alpha_ic) grad_z k(z_j, x_i)
        beta = grad_out @ alpha.T
        rows = block_rows(Xt.shape[0], 3 * Xt.shape[0], Z.element_size(), ctx.mem_bytes)
        grads = [predictor_grad_transformed(ctx.kernel, Zt[sl], Xt, None, block_pairs(ctx.pairs, sl), xx=xx,
                                            pair_coef=beta[sl])
                 for sl in iter_blocks(Z.shape[0], rows)]
        return ctx.fm.pullback(torch.cat(grads)), None, None, None, None, None, None, None, None


def kernel_predict(kernel: Kernel, Z, X, Xt, alpha, fm: FeatureMatrix, xx=None, mem_bytes=None, pairs=None):
    """Predictions K(Z, X) alpha in blocks, differentiable in Z through the closed-form gradient.

    ``X`` are the centers, ``Xt`` their transform by ``fm`` (passed in so that it is computed once per fit);
    ``pairs`` the coincident (row of Z, center) pairs when already known (found by comparing rows otherwise)."""
    mem = default_mem_bytes(Z.device) if mem_bytes is None else mem_bytes
    xx = Xt.square().sum(1) if xx is None else xx
    return _KernelPredict.apply(Z, kernel, fm, X, Xt, alpha, xx, mem, pairs)
