r"""The Average Gradient Outer Product.

For a predictor f: R^d -> R^c and points x_1..x_N,

    AGOP(f) = (1/N) sum_j sum_c grad f_c(x_j) grad f_c(x_j)^T                    (d x d, PSD)

and its *centred* form subtracts, for each output c, the mean gradient g_c = (1/N) sum_j grad f_c(x_j):

    AGOP_centred(f) = AGOP(f) - sum_c g_c g_c^T.

Both are accumulated from the running sums S = sum grad grad^T and s_c = sum_j grad f_c, so the result is the same
whatever the batch size (the public RFM codes centre per batch, which makes M depend on it). The EGOP of a target
function is the same quantity for the true function.

Two routes, one accumulator:

* :func:`agop` (this module) -- any differentiable torch function, by autograd;
* :meth:`rfm.KernelMachine.agop` -- the closed form for a kernel predictor f(z) = sum_i alpha_i k_M(z, x_i),
  streamed over the evaluation points, with seeded random sampling of the points.

``power`` and ``normalize`` (M = normalize(AGOP^power)) are applied by :func:`rfm.feature_update`.
"""
from __future__ import annotations

import torch

from .._checks import check_matrix, check_number
from .._compat import renamed_keyword
from ..utils import make_generator
from .feature_matrix import feature_update


class AGOPAccumulator:
    """Running sums for the (optionally centred) AGOP, independent of how the points are batched.

    Parameters
    ----------
    n_outputs : int
        The number of outputs c of the function.
    dim : int
        The dimension of the gradients.
    diag : bool, default False
        Keep only the diagonal of the sum of outer products (a vector of length ``dim``).
    dtype : torch.dtype, default torch.float64
        The dtype of the sums.
    device : torch.device or str, optional
        Where the sums live.
    """

    def __init__(self, n_outputs: int, dim: int, *, diag: bool = False, dtype=torch.float64, device=None):
        self.diag = diag
        self.count = 0
        self.S = torch.zeros((dim,) if diag else (dim, dim), dtype=dtype, device=device)
        self.s = torch.zeros(n_outputs, dim, dtype=dtype, device=device)

    def add(self, G: torch.Tensor):
        """Add per-point gradients to the sums.

        Parameters
        ----------
        G : torch.Tensor, shape (b, c, dim)
            The gradients of the c outputs at b points (converted to the sums' dtype).
        """
        G = G.to(self.S.dtype)
        flat = G.reshape(-1, G.shape[-1])
        if self.diag:
            self.S += flat.square().sum(0)
        else:
            self.S += flat.T @ flat
        self.s += G.sum(0)
        self.count += G.shape[0]

    def result(self, center: bool = False, *, centre: bool | None = None) -> torch.Tensor:
        """The AGOP (1/N) S, minus sum_c g_c g_c^T (g_c the mean gradient of output c) when ``center``.

        Parameters
        ----------
        center : bool, default False
            Subtract each output's mean gradient.
        centre : bool or None, default None
            Deprecated name of ``center`` (used when given, with a DeprecationWarning).

        Returns
        -------
        torch.Tensor, the accumulator's dtype, shape (dim, dim) (or (dim,) with ``diag``)
            Symmetric (the average of A and its transpose) when dense.

        Raises
        ------
        ValueError
            If no points were added.
        """
        center = renamed_keyword("AGOPAccumulator.result", "centre", "center", centre, center)
        if self.count == 0:
            raise ValueError("no points were added to the AGOP")
        A = self.S / self.count
        if center:
            mean = self.s / self.count
            A = A - (mean.square().sum(0) if self.diag else mean.T @ mean)
        return A if self.diag else 0.5 * (A + A.T)


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
            if out.ndim == 0 or out.shape[0] != Xb.shape[0]:
                raise ValueError(f"f must map a batch of {Xb.shape[0]} rows to {Xb.shape[0]} outputs (shape (b,) or "
                                 f"(b, c)), got shape {tuple(out.shape)}; it must act row by row")
            if not out.is_floating_point():
                raise TypeError(f"f must return a floating-point tensor, got dtype {out.dtype}")
            out = out.reshape(Xb.shape[0], -1)
            c = out.shape[1]
            grads = [torch.autograd.grad(out[:, k].sum(), Xb, retain_graph=k < c - 1, allow_unused=True)[0]
                     for k in range(c)]
        G = torch.stack([torch.zeros_like(Xb) if g is None else g for g in grads], 1).detach()
        if not bool(torch.isfinite(G).all()):
            bad = int((~torch.isfinite(G)).any(2).any(1).sum())
            raise FloatingPointError(f"the gradients of f are NaN or infinite at {bad} of the points in rows "
                                     f"{start}..{start + Xb.shape[0] - 1}: f is not differentiable there, or it "
                                     "overflows (check the scale of X, or use float64)")
        yield G


def jacobians(f, X, *, batch_size: int | None = None) -> torch.Tensor:
    """Per-point gradients grad f_c(x_j) of a differentiable torch function acting row by row: shape (n, c, d).

    Each output's gradient is one backward pass over a batch (the gradient of sum_j f_c(x_j) has grad f_c(x_j) as
    its row j, because rows do not interact). Non-finite gradients are an error that names the rows.

    Parameters
    ----------
    f : callable
        Maps a (b, d) batch to (b,) or (b, c), row by row.
    X : array-like or torch.Tensor, shape (n, d)
        Evaluation points.
    batch_size : int or None, default None
        Rows per backward pass (None: all at once).

    Returns
    -------
    torch.Tensor, shape (n, c, d)
        In the dtype of ``f``'s output gradients (X's dtype); c = 1 for a function with output (b,).

    Raises
    ------
    TypeError
        If ``f`` does not return a floating-point tensor.
    ValueError
        If ``f`` does not map b rows to b outputs.
    FloatingPointError
        If a gradient is NaN or infinite.

    Examples
    --------
    >>> import torch, rfm
    >>> rfm.jacobians(lambda Z: Z.square().sum(1), torch.tensor([[1.0, 2.0]]))
    tensor([[[2., 4.]]])
    """
    X = check_matrix(X, "X")
    return torch.cat(list(_batch_jacobians(f, X, batch_size)))


def agop(f, X, *, batch_size: int | None = None, center: bool = False, diag: bool = False, power: float = 1.0,
         normalize: str | None = None, centre: bool | None = None) -> torch.Tensor:
    """AGOP of a differentiable torch function ``f`` at the rows of ``X``, by autograd.

    Parameters
    ----------
    f : callable
        Maps a (b, d) batch to (b,) or (b, c), row by row (no batch statistics).
    X : array-like or torch.Tensor, shape (n, d)
        Evaluation points.
    batch_size : int or None, default None
        Rows per backward pass (None: all at once); the result does not depend on it.
    center : bool, default False
        Subtract each output's mean gradient.
    diag : bool, default False
        Return only the diagonal, shape (d,).
    power, normalize : float, str or None, default 1.0, None
        Applied by :func:`rfm.feature_update` (M = normalize(AGOP^power)).
    centre : bool or None, default None
        Deprecated name of ``center`` (used when given, with a DeprecationWarning).

    Returns
    -------
    torch.Tensor, float64, shape (d, d) (or (d,) with ``diag``)

    Examples
    --------
    >>> import torch, rfm
    >>> X = torch.randn(1000, 3, dtype=torch.float64)
    >>> A = rfm.agop(lambda Z: Z[:, 0] * Z[:, 1], X)   # the EGOP of x1 x2: E[x2^2], E[x1^2] on the diagonal
    >>> A.shape, bool(A[2, 2] == 0)
    (torch.Size([3, 3]), True)
    """
    center = renamed_keyword("rfm.agop", "centre", "center", centre, center)
    X = check_matrix(X, "X")
    _check_rowwise(f, X)
    acc = None
    for G in _batch_jacobians(f, X, batch_size):
        if acc is None:
            acc = AGOPAccumulator(G.shape[1], X.shape[1], diag=diag, device=X.device)
        acc.add(G)
    A = acc.result(center)
    if power == 1.0 and normalize is None:
        return A
    return feature_update(A, power, normalize)


def sample_points(n: int, max_points: int | None, generator=None) -> torch.Tensor | None:
    """Indices of a uniform random subset of size ``max_points`` (without replacement), or None for all points.

    Parameters
    ----------
    n : int
        The number of points.
    max_points : int or None
        The subset size (>= 1); None, or a size >= n: all points.
    generator : int or torch.Generator, optional
        Seed or generator of the draw (0 when None).

    Returns
    -------
    torch.Tensor of int64, shape (max_points,), or None
        Distinct indices in [0, n), on the CPU; None when every point is used.
    """
    if max_points is None or max_points >= n:
        return None
    check_number("max_points", max_points, low=1, integer=True)
    return torch.randperm(n, generator=make_generator(0 if generator is None else generator))[:max_points]


def _check_rowwise(f, X: torch.Tensor):
    """Entry checks for :func:`agop`'s ``f``: callable, parameters in X's dtype, and acting row by row.

    The AGOP needs each row's gradient of f at that row alone; a function using batch statistics (BatchNorm in
    training mode, X - X.mean(0)) gives a result that depends on ``batch_size``. That is checked cheaply: a module's
    batch-statistics layers in training mode are named without running it (a forward pass would move their running
    statistics); any other f is run on two rows together and one by one (under a forked RNG, so that a random f does
    not shift the caller's random numbers), and a difference beyond rounding is warned about."""
    import warnings

    if not callable(f):
        raise TypeError(f"f must be callable (a function or torch.nn.Module mapping a (b, d) batch to (b,) or (b, c)),"
                        f" got {type(f).__name__} {f!r}")
    if isinstance(f, torch.nn.Module):
        p = next((q for q in f.parameters() if q.is_floating_point()), None)
        if p is not None and p.dtype != X.dtype:
            raise TypeError(f"X has dtype {X.dtype} but f's parameters are {p.dtype}: convert one to the other "
                            f"(X.to({p.dtype}), or f.to({X.dtype}))")
        batch_stats = [name or type(f).__name__ for name, m in f.named_modules()
                       if m.training and isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        if batch_stats:
            warnings.warn(f"f has batch-statistics layers in training mode ({batch_stats[:3]}): its gradients, and so "
                          "the AGOP, depend on batch_size; call f.eval() first", UserWarning, stacklevel=3)
        return
    if X.shape[0] < 2:
        return
    rows = X[[0, -1]].detach()
    devices = [X.device] if X.device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            both = f(rows)
            alone = torch.cat([f(rows[:1]), f(rows[1:])])
    except Exception:
        return
    if not (isinstance(both, torch.Tensor) and isinstance(alone, torch.Tensor) and both.shape == alone.shape
            and both.is_floating_point()):
        return
    scale = float(both.abs().max()) if both.numel() else 0.0
    diff = float((both - alone).abs().max()) if both.numel() else 0.0
    if diff > 1e-3 * scale + 1e3 * torch.finfo(both.dtype).tiny:  # NaN compares False: left to the AGOP pass
        warnings.warn(f"f does not act row by row: its output at a row changes with the other rows of the batch "
                      f"(by {diff:.3g}, against outputs of size {scale:.3g}), as with batch statistics "
                      "(X - X.mean(0), BatchNorm) or randomness; the AGOP then depends on batch_size. Make f act on "
                      "each row alone (a network: f.eval())", UserWarning, stacklevel=3)
