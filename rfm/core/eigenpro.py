r"""EigenPro 2 and EigenPro 3: preconditioned stochastic gradient solvers for kernel regression.

EigenPro 2 (Ma & Belkin, MLSys 2019) solves K alpha = Y (here (K + reg I) alpha = Y) by mini-batch SGD on the
coefficients, with a preconditioner that flattens the top of K's spectrum, estimated by Nystrom on a fixed subsample
S of s points, and with the batch size and step size set analytically from that spectrum. The steps follow the
authors' code (EigenPro/EigenPro-pytorch, ``eigenpro2/models.py`` and ``utils/eigh.py``):

1. :func:`nystrom_eigensystem`: eigenpairs (lambda_i, e_i) of K(S, S) / s, lambda_1 >= lambda_2 >= ...;
   beta = max_i k(x_i, x_i) over S.
2. q: the number of eigenvalues with lambda_i^(-a) < max_bs, minus 1, at least ``min_q``; max_bs =
   min(max(s / 5, bs_max), s) and a = 0.95. The preconditioner P g = g - V D V^T K(S, X_B) g, with V = e / sqrt(s)
   and D_ii = (1 - (lambda_q / lambda_i)^a) / lambda_i for i < q, lowers the top eigenvalue from lambda_1 to
   lambda_1 (lambda_q / lambda_1)^a (= lambda_q at a = 1).
3. batch size bs = min(floor(beta / lambda~ + 1), bs_max) and step eta = bs / beta below that critical batch, else
   0.99 * 2 bs / (beta + (bs - 1) lambda~), with lambda~ the new top eigenvalue; the coefficient step is eta / bs.
4. per batch B: g = K(X_B, X) alpha - Y_B; alpha_B -= (eta / bs) g; alpha_S += (eta / bs) V D V^T K(S, X_B) g.

With q = 1 nothing is flattened: the iteration is plain mini-batch SGD, and with one batch of all n points it is
Richardson's iteration alpha <- alpha - (eta / n) (K alpha - Y). A ridge reg is EigenPro on the kernel
k(x, x') + reg [x = x'] (the preconditioner's eigenvalues move by reg / s; none of the authors' codes has a ridge).

EigenPro 3 (Abedsoltan, Belkin & Pandit, ICML 2023) fits a model f = sum_j a_j k(., z_j) on centres Z that need not
be the data: the same preconditioned stochastic gradient in function space, g = K(Z, X_B) r - K(Z, S) V D V^T
K(S, X_B) r with r = f(X_B) - Y_B, then a projection back onto span{k(., z_j)}: K(Z, Z) theta = g, and
a <- a - (eta / bs) theta. The authors solve the projection inexactly with EigenPro 2 iterations on the centres;
:func:`eigenpro3` does that with ``projection="eigenpro"`` and solves it exactly (one Cholesky factor of K(Z, Z),
made once) with ``projection="exact"``. The data preconditioner, batch and step here are EigenPro 2's (the authors'
EigenPro 3 code uses a = 1 and eta = bs / (2 beta)), so that with Z = X and an exact projection EigenPro 3 is
EigenPro 2 step for step. With centres other than the data the preconditioned iteration does not stop exactly at
the least-squares model on the centres: its fixed point solves K(Z, X) P r = 0, since the data preconditioner P does
not preserve span{k(., z_j)}; with q = 1 (no preconditioning) it is projected gradient descent and does
(:func:`nystrom_krr` is that model).

:class:`EigenPro2Solver` and :class:`EigenPro3Solver` are solver strategies for the estimators
(``solver="eigenpro2"``, ``"eigenpro3"``). EigenPro 3 inside RFM uses a seeded subset of the training points as
centres (its coefficients are zero on the other points), so the fitted predictor is an ordinary
:class:`rfm.KernelMachine`.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

from .._checks import check_number
from .._compat import renamed_keyword
from ..utils import make_generator
from .agop import sample_points
from .cg import KernelOperator
from .direct import SolveResult, solve_krr
from .kernels import Kernel, kernel_matrix


class NystromEigensystem(NamedTuple):
    """Top eigenpairs of K(S, S) / s on a subsample S: ``values`` (q,) descending, ``vectors`` (s, q) orthonormal,
    ``idx`` the subsample's indices into the data, ``beta`` the largest k(x, x) on S.

    Parameters
    ----------
    values : torch.Tensor, float64, shape (q,)
        Eigenvalues, descending.
    vectors : torch.Tensor, float64, shape (s, q)
        Orthonormal eigenvectors.
    idx : torch.Tensor of int64, shape (s,)
        The subsample.
    beta : float
        max k(x, x) over S.
    """

    values: torch.Tensor
    vectors: torch.Tensor
    idx: torch.Tensor
    beta: float


def _subsample(n, s, idx, generator, device):
    if idx is not None:
        idx = torch.as_tensor(idx, dtype=torch.long, device=device)
        if idx.ndim != 1 or len(idx) == 0 or int(idx.min()) < 0 or int(idx.max()) >= n:
            raise ValueError(f"idx must be a non-empty 1-D tensor of indices in [0, {n}), got {idx!r}")
        if len(torch.unique(idx)) != len(idx):
            raise ValueError("idx must not repeat an index (K(S, S) would be singular)")
        return idx
    s = None if s is None else int(check_number("s", s, low=1, integer=True))
    sel = sample_points(n, s, generator=generator)        # None: every point
    return torch.arange(n, device=device) if sel is None else sel.to(device)


def nystrom_eigensystem(kernel: Kernel, Xt: torch.Tensor, q: int | None = None, *, s: int | None = None,
                        idx=None, generator=0, pairs=None) -> NystromEigensystem:
    """Top-``q`` eigenpairs of K(S, S) / s on a subsample S of the (transformed) points ``Xt`` (n, r).

    S is ``idx`` when given, else ``s`` points drawn without replacement by ``generator`` (all points when s is None
    or at least n). The eigendecomposition is a full ``eigh`` in float64 (s is at most a few thousand); ``q`` None
    keeps all s pairs. ``pairs`` are the coincident pairs of ``Xt`` (the diagonal by default).

    Parameters
    ----------
    kernel : Kernel
        The kernel.
    Xt : torch.Tensor, shape (n, r)
        Transformed points (floating point).
    q : int, optional
        Eigenpairs kept, 1 <= q <= s.
    s : int, optional
        Subsample size.
    idx : index tensor, optional
        The subsample (overrides ``s``).
    generator : int or torch.Generator, default 0
        Seeds the draw.
    pairs : tuple of index tensors, optional
        Coincident pairs of Xt.

    Returns
    -------
    NystromEigensystem

    Raises
    ------
    TypeError
        If Xt is not a 2-D floating tensor.
    """
    if not isinstance(Xt, torch.Tensor) or Xt.ndim != 2 or not Xt.is_floating_point():
        raise TypeError(f"Xt must be a 2-D floating torch tensor (n, r), got {type(Xt).__name__}")
    n = Xt.shape[0]
    S = _subsample(n, s, idx, generator, Xt.device)
    sub_pairs = None
    if pairs is not None:  # the coincident pairs among S, renumbered 0..s-1 on both sides
        pos = torch.full((n,), -1, dtype=torch.long, device=pairs[0].device)
        pos[S.to(pos.device)] = torch.arange(len(S), device=pos.device)
        r, c = pos[pairs[0]], pos[pairs[1]]
        keep = (r >= 0) & (c >= 0)
        sub_pairs = (r[keep], c[keep])
    K = KernelOperator(kernel, Xt[S], pairs=sub_pairs, store=True).K.to(torch.float64)
    m = len(S)
    q = m if q is None else int(check_number("q", q, low=1, high=m, integer=True))
    evals, evecs = torch.linalg.eigh(0.5 * (K + K.T) / m)
    values, vectors = evals.flip(0)[:q], evecs.flip(1)[:, :q]
    return NystromEigensystem(values, vectors, S, float(K.diagonal().max()))


def nystrom_factor(kernel: Kernel, Xt: torch.Tensor, eig: NystromEigensystem, *, rtol: float = 1e-10):
    """F (n, k) with K(X, X) ~ F F^T = K(X, S) K(S, S)^+ K(S, X), the Nystrom approximation from the eigensystem
    (eigenvalues below ``rtol`` times the largest are dropped). It is exact when K has rank at most the number of
    kept eigenpairs and S spans it.

    Parameters
    ----------
    kernel : Kernel
        The kernel.
    Xt : torch.Tensor, shape (n, r)
        Transformed points.
    eig : NystromEigensystem
        From :func:`nystrom_eigensystem` on the same points.
    rtol : float, default 1e-10
        Relative cut-off of the eigenvalues.

    Returns
    -------
    torch.Tensor, float64, shape (n, k)
    """
    keep = eig.values > rtol * float(eig.values[0])
    s = len(eig.idx)
    C = kernel_matrix(kernel, Xt, Xt[eig.idx], transformed=True).to(torch.float64)
    return C @ (eig.vectors[:, keep] / (s * eig.values[keep]).sqrt())


class EigenProSetup(NamedTuple):
    """What EigenPro 2 derives from the Nystrom eigensystem: the kept eigenpairs (``q - 1`` of them), the
    preconditioner's scaled vectors V D (s, q - 1) and V (s, q - 1), lambda_q, the top eigenvalue before and after
    preconditioning, beta, and the batch size and step (``eta``: the step per batch, ``eta / bs`` per coefficient).

    Parameters
    ----------
    q : int
        The preconditioner's level.
    VD : torch.Tensor, shape (s, q - 1)
        V D.
    V : torch.Tensor, shape (s, q - 1)
        The eigenvectors scaled by 1 / sqrt(s).
    idx : torch.Tensor of int64, shape (s,)
        The subsample.
    tail : float
        lambda_q.
    top : float
        The top eigenvalue.
    new_top : float
        The top eigenvalue after preconditioning.
    beta : float
        max k(x, x) (plus reg).
    bs : int
        The batch size.
    eta : float
        The step per batch.
    """

    q: int
    VD: torch.Tensor
    V: torch.Tensor
    idx: torch.Tensor
    tail: float
    top: float
    new_top: float
    beta: float
    bs: int
    eta: float


def eigenpro_setup(eig: NystromEigensystem, *, q=None, bs=None, bs_max=None, alpha: float = 0.95, min_q: int = 5,
                   reg: float = 0.0, n=None) -> EigenProSetup:
    """EigenPro 2's preconditioner, batch size and step from a Nystrom eigensystem (module docstring, steps 2-3).

    ``q`` None chooses q automatically; ``q = 1`` is no preconditioning (plain SGD). ``bs_max`` is the largest batch
    the device holds (None: no limit beyond n); ``bs`` forces a batch size. ``reg`` adds reg / s to the eigenvalues
    and reg to beta (EigenPro on the kernel k + reg [x = x']).

    Parameters
    ----------
    eig : NystromEigensystem
        The eigensystem.
    q : int, optional
        The level (1 <= q <= number of eigenpairs).
    bs : int, optional
        The batch size.
    bs_max : int, optional
        The largest batch.
    alpha : float, default 0.95
        The damping exponent, in (0, 1].
    min_q : int, default 5
        The smallest automatic q.
    reg : float, default 0.0
        The ridge.
    n : int, optional
        The number of data points (default: s).

    Returns
    -------
    EigenProSetup

    Raises
    ------
    ValueError
        If the subsample is smaller than ``min_q``, or lambda_q is not positive.
    """
    check_number("alpha", alpha, low=0, high=1, low_inclusive=False)
    s = len(eig.idx)
    n = s if n is None else int(n)
    lam = eig.values + reg / s
    beta = eig.beta + reg
    bs_max = n if bs_max is None else int(check_number("bs_max", bs_max, low=1, integer=True))
    if q is None:
        max_bs = min(max(s / 5, bs_max), s)
        q = int((lam.clamp_min(1e-300).pow(-alpha) < max_bs).sum()) - 1
        q = max(q, min_q)
        if q > len(lam):
            raise ValueError(f"EigenPro needs at least {min_q} points in its Nystrom subsample (its preconditioner "
                             f"uses the top q = {min_q} eigenvalues), got {len(lam)} (n = {n} samples): use at "
                             f"least {min_q} samples (and s >= {min_q}), or a direct solver (solver='cholesky') "
                             "for so few")
    q = int(check_number("q", q, low=1, high=len(lam), integer=True))
    tail, top = float(lam[q - 1]), float(lam[0])
    if not tail > 0:
        raise ValueError(f"the Nystrom eigenvalue lambda_q (q={q}) is {tail:g}: K(S, S) is rank-deficient there; "
                         "choose a smaller q or a larger reg")
    head = lam[: q - 1]
    D = (1 - (tail / head).pow(alpha)) / head
    V = eig.vectors[:, : q - 1] / math.sqrt(s)
    new_top = top * (tail / top) ** alpha if q > 1 else top
    critical = beta / new_top + 1
    if bs is None:
        bs = min(int(critical), bs_max, n)
    bs = int(check_number("bs", bs, low=1, integer=True))
    eta = bs / beta if bs < critical else 0.99 * 2 * bs / (beta + (bs - 1) * new_top)
    return EigenProSetup(q, V * D, V, eig.idx, tail, top, new_top, beta, bs, eta)


class EigenProInfo(NamedTuple):
    """How an EigenPro run went: the setup, the epochs run, and per epoch (after it) the training MSE and the
    relative residual ``|(K + reg I) alpha - Y|_F / |Y|_F`` (empty when not tracked).

    Parameters
    ----------
    setup : EigenProSetup
        The preconditioner, batch size and step.
    epochs : int
        Epochs run.
    train_mse : list of float
        Per epoch.
    relres : list of float
        Per epoch (EigenPro 3: the validation MSE).
    extra : dict or None, default None
        EigenPro 3's exact projection: the jitter used and the factorisations tried.
    """

    setup: EigenProSetup
    epochs: int
    train_mse: list
    relres: list
    extra: dict | None = None  # EigenPro 3's exact projection: the jitter used and the factorisations tried


def _check_Y(Y, n):
    if not isinstance(Y, torch.Tensor) or Y.ndim not in (1, 2) or Y.shape[0] != n:
        raise ValueError(f"Y must be a tensor of shape (n,) or (n, c) with n = {n}, got "
                         f"{tuple(getattr(Y, 'shape', ()))}")
    if not bool(torch.isfinite(Y).all()):
        raise ValueError("Y contains NaN or infinite values")
    return Y if Y.ndim == 2 else Y[:, None]


def eigenpro2(op: KernelOperator, Y: torch.Tensor, reg: float = 0.0, *, epochs: int = 10, s: int | None = 2000,
              q=None, bs=None, bs_max=None, alpha: float = 0.95, tol: float | None = None, track: bool = False,
              generator=0, idx=None, x0=None):
    """Solve (K + reg I) alpha = Y by EigenPro 2 (module docstring) on a kernel operator (``KernelOperator``).

    Parameters
    ----------
    op : KernelOperator
        K(X, X); batches use its columns K[:, B] (stored or made on the fly).
    Y : torch.Tensor, shape (n,) or (n, c)
    reg : float, default 0
    epochs : int, default 10
        Passes over the data.
    s : int or None, default 2000
        Nystrom subsample size (the authors': 2,000 below 1e5 points); None or >= n uses all points.
    q, bs, bs_max, alpha
        See :func:`eigenpro_setup`.
    tol : float or None
        Stop after the first epoch whose relative residual is at most ``tol`` (one extra K product per epoch).
    track : bool, default False
        Record the training MSE and the relative residual after every epoch (one K product per epoch).
    generator : int or torch.Generator
        Seeds the subsample and the batch order.
    idx : index tensor, optional
        The Nystrom subsample (overrides ``s``).
    x0 : torch.Tensor, optional
        Starting coefficients (default zero).

    Returns
    -------
    alpha : torch.Tensor
        The coefficients, in Y's shape and dtype.
    info : EigenProInfo

    Raises
    ------
    ValueError
        If Y is not (n,) or (n, c), or is not finite.
    """
    n = op.shape[0]
    Y2 = _check_Y(Y, n)
    check_number("reg", reg, low=0)
    epochs = int(check_number("epochs", epochs, low=0, integer=True))
    g = make_generator(generator)
    eig = nystrom_eigensystem(op.kernel, op.Xt, s=s, idx=idx, generator=g, pairs=op.pairs)
    setup = eigenpro_setup(eig, q=q, bs=bs, bs_max=bs_max, alpha=alpha, reg=reg, n=n)
    dt = Y2.dtype
    A = torch.zeros_like(Y2) if x0 is None else (x0 if x0.ndim == 2 else x0[:, None]).to(dt).clone()
    VD, V, S = setup.VD.to(dt), setup.V.to(dt), setup.idx
    step = setup.eta / setup.bs
    ynorm = float(Y2.norm()) or 1.0
    mses, rels = [], []
    ep = 0
    for ep in range(1, epochs + 1):  # noqa: B007  (read after the loop: the epochs run, fewer at tol)
        for B in torch.randperm(n, generator=g).to(Y2.device).split(setup.bs):
            C = op.columns(B).to(dt)                       # K(X, X_B), (n, b)
            G = C.T @ A - Y2[B]
            if reg:
                G = G + reg * A[B]
            A[B] -= step * G
            if setup.q > 1:
                KSB = C[S]
                if reg:  # the ridge's delta kernel where S meets B
                    KSB = KSB.clone()
                    pos = torch.full((n,), -1, dtype=torch.long, device=A.device)
                    pos[S] = torch.arange(len(S), device=A.device)
                    inS = pos[B] >= 0
                    KSB[pos[B][inS], inS.nonzero()[:, 0]] += reg
                A[S] += step * (VD @ (V.T @ (KSB @ G)))
        if track or tol is not None:
            KA = op.matmul(A)
            R = KA + reg * A - Y2
            if track:
                mses.append(float((KA - Y2).square().mean()))
                rels.append(float(R.norm()) / ynorm)
            if tol is not None and float(R.norm()) / ynorm <= tol:
                break
    alpha_ = A if Y.ndim == 2 else A[:, 0]
    return alpha_, EigenProInfo(setup, ep, mses, rels)


def eigenpro3(kernel: Kernel, Xt: torch.Tensor, Y: torch.Tensor, Zt: torch.Tensor, *, epochs: int = 10,
              s: int | None = 2000, q=None, bs=None, bs_max=None, alpha: float = 0.95, projection: str = "exact",
              projection_epochs: int = 2, generator=0, idx=None, jitter: float = 1e-7, X_val=None, Y_val=None):
    """Fit f = sum_j a_j k(., z_j) on centres ``Zt`` (p, r) to data ``Xt`` (n, r), ``Y`` by EigenPro 3.

    Each batch B: r = K(X_B, Z) a - Y_B, the preconditioned functional gradient g = K(Z, X_B) r - K(Z, S) V D V^T
    K(S, X_B) r (EigenPro 2's data preconditioner on a Nystrom subsample S of the data), the projection
    K(Z, Z) theta = g, and a <- a - (eta / bs) theta. ``projection="exact"`` solves the projection with a Cholesky
    factor of K(Z, Z) + jitter * p I made once; ``"eigenpro"`` runs ``projection_epochs`` of EigenPro 2 on the
    centres, as the authors do. Memory: K(Z, Z) (p x p, for the exact projection) and K(X_B, Z); never n x n.
    With ``X_val``, ``Y_val`` the validation MSE is recorded per epoch.

    Parameters
    ----------
    kernel : Kernel
        The kernel.
    Xt : torch.Tensor, shape (n, r)
        Transformed data.
    Y : torch.Tensor, shape (n,) or (n, c)
        Targets.
    Zt : torch.Tensor, shape (p, r)
        Transformed centres.
    epochs : int, default 10
        Passes over the data.
    s, q, bs, bs_max, alpha, generator, idx
        As in :func:`eigenpro2`.
    projection : {"exact", "eigenpro"}, default "exact"
        How the projection is solved.
    projection_epochs : int, default 2
        EigenPro 2 epochs per projection (``"eigenpro"``).
    jitter : float, default 1e-7
        Starting relative jitter of the exact projection (:func:`centre_factor`).
    X_val, Y_val : torch.Tensor, optional
        Validation data (transformed), for the per-epoch validation MSE.

    Returns
    -------
    a : torch.Tensor, shape (p,) or (p, c)
        The coefficients on the centres, in Y's dtype.
    info : EigenProInfo
        ``train_mse`` is the MSE on a batch-by-batch pass after each epoch, ``relres`` the validation MSE when
        given, ``extra`` the exact projection's jitter and tries.

    Raises
    ------
    ValueError
        If Y or Zt has the wrong shape, or ``projection`` is unknown.
    """
    n = Xt.shape[0]
    Y2 = _check_Y(Y, n)
    if not isinstance(Zt, torch.Tensor) or Zt.ndim != 2 or Zt.shape[1] != Xt.shape[1]:
        raise ValueError(f"Zt must be a (p, {Xt.shape[1]}) tensor of centres, got {tuple(getattr(Zt, 'shape', ()))}")
    if projection not in ("exact", "eigenpro"):
        raise ValueError(f"projection must be 'exact' or 'eigenpro', got {projection!r}")
    epochs = int(check_number("epochs", epochs, low=0, integer=True))
    g = make_generator(generator)
    eig = nystrom_eigensystem(kernel, Xt, s=s, idx=idx, generator=g)
    setup = eigenpro_setup(eig, q=q, bs=bs, bs_max=bs_max, alpha=alpha, n=n)
    dt = Y2.dtype
    p = Zt.shape[0]
    Zop = KernelOperator(kernel, Zt, store=True) if projection == "eigenpro" else None
    factor = None
    if projection == "exact":
        factor = centre_factor(kernel, Zt, jitter)
        L = factor.L
    VD, V = setup.VD.to(dt), setup.V.to(dt)
    XS = Xt[setup.idx]
    KZS = kernel_matrix(kernel, Zt, XS, transformed=True).to(dt)   # (p, s)
    step = setup.eta / setup.bs
    a = torch.zeros(p, Y2.shape[1], dtype=dt, device=Xt.device)
    mses, vals = [], []

    def project(G):
        if projection == "exact":
            return torch.cholesky_solve(G.to(torch.float64), L).to(dt)
        theta, _ = eigenpro2(Zop, G, epochs=projection_epochs, s=min(p, 2000), generator=g)
        return theta

    ep = 0
    for ep in range(1, epochs + 1):  # noqa: B007  (read after the loop: the epochs run)
        for B in torch.randperm(n, generator=g).to(Xt.device).split(setup.bs):
            KBZ = kernel_matrix(kernel, Xt[B], Zt, transformed=True).to(dt)      # (b, p)
            R = KBZ @ a - Y2[B]
            G = KBZ.T @ R
            if setup.q > 1:
                KSB = kernel_matrix(kernel, XS, Xt[B], transformed=True).to(dt)  # (s, b)
                G = G - KZS @ (VD @ (V.T @ (KSB @ R)))
            a -= step * project(G)
        mses.append(float(sum((kernel_matrix(kernel, Xt[B], Zt, transformed=True).to(dt) @ a - Y2[B])
                              .square().sum() for B in torch.arange(n).split(4096)) / Y2.numel()))
        if X_val is not None:
            pv = kernel_matrix(kernel, X_val, Zt, transformed=True).to(dt) @ a
            Yv = Y_val if Y_val.ndim == 2 else Y_val[:, None]
            vals.append(float((pv - Yv).square().mean()))
    extra = None if factor is None else {"ep_jitter": factor.jitter, "ep_factor_tries": factor.tries}
    return (a if Y.ndim == 2 else a[:, 0]), EigenProInfo(setup, ep, mses, vals, extra)


class CentreFactor(NamedTuple):
    """The Cholesky factor of K(Z, Z) + jitter I used by EigenPro 3's exact projection: ``L``, the ``jitter``
    added (absolute), and how many factorisations were tried (1 when the first jitter sufficed).

    Parameters
    ----------
    L : torch.Tensor, float64, shape (p, p)
        The lower Cholesky factor.
    jitter : float
        The absolute jitter added to the diagonal.
    tries : int
        Factorisations tried.
    """

    L: torch.Tensor
    jitter: float
    tries: int


def centre_factor(kernel: Kernel, Zt: torch.Tensor, jitter: float = 1e-7, *, max_jitter: float = 1e-1):
    """Factor K(Z, Z) + j I robustly: K computed in float64 from the centres (not a float32 K converted, whose
    round-off makes a learnt M's kernel indefinite at the 1e-7 level), j = jitter * mean diag, raised tenfold
    until Cholesky succeeds (up to ``max_jitter`` * mean diag). The jitter used is recorded
    (:class:`CentreFactor`); past ``max_jitter`` it is a ``RuntimeError`` naming it.

    Parameters
    ----------
    kernel : Kernel
        The kernel.
    Zt : torch.Tensor, shape (p, r)
        Transformed centres.
    jitter : float, default 1e-7
        The first relative jitter.
    max_jitter : float, default 1e-1
        The largest relative jitter.

    Returns
    -------
    CentreFactor

    Raises
    ------
    RuntimeError
        If Cholesky fails at ``max_jitter``.
    """
    KZ = kernel_matrix(kernel, Zt.to(torch.float64), transformed=True)
    scale = float(KZ.diagonal().mean()) or 1.0
    j, tries = jitter, 0
    while True:
        tries += 1
        A = KZ.clone()
        A.diagonal().add_(j * scale)
        L, info = torch.linalg.cholesky_ex(A)
        del A
        if int(info) == 0 and bool(torch.isfinite(L.diagonal()).all()):
            return CentreFactor(L, j * scale, tries)
        if j >= max_jitter:
            raise RuntimeError(f"EigenPro 3: K(Z, Z) + j I is not positive definite even at j = {j * scale:g} "
                               f"({tries} tries, p = {Zt.shape[0]} centres)")
        j = min(max(10 * j, 1e-12), max_jitter)


def nystrom_krr(kernel: Kernel, Xt: torch.Tensor, Y: torch.Tensor, Zt: torch.Tensor, reg: float = 0.0):
    """The exact least-squares model on centres Z: ``a = argmin |K(X, Z) a - Y|^2 + reg a^T K(Z, Z) a``, solved as
    (K(Z, X) K(X, Z) + reg K(Z, Z)) a = K(Z, X) Y in float64 (the solution EigenPro 3 approaches).

    Parameters
    ----------
    kernel : Kernel
        The kernel.
    Xt : torch.Tensor, shape (n, r)
        Transformed data.
    Y : torch.Tensor, shape (n,) or (n, c)
        Targets.
    Zt : torch.Tensor, shape (p, r)
        Transformed centres.
    reg : float, default 0.0
        The ridge in the RKHS norm of the centres' model.

    Returns
    -------
    torch.Tensor, shape (p,) or (p, c)
        In Y's dtype.
    """
    KXZ = kernel_matrix(kernel, Xt, Zt, transformed=True).to(torch.float64)
    A = KXZ.T @ KXZ
    if reg:
        A = A + reg * kernel_matrix(kernel, Zt, transformed=True).to(torch.float64)
    Y2 = Y if Y.ndim == 2 else Y[:, None]
    a, _ = solve_krr(A, KXZ.T @ Y2.to(torch.float64), 1e-10 * float(A.diagonal().mean()), check_symmetric=False)
    a = a.to(Y.dtype)
    return a if Y.ndim == 2 else a[:, 0]


class EigenPro2Solver:
    """Kernel ridge regression by EigenPro 2, as a solver strategy for the estimators (``solver="eigenpro2"``).

    Parameters
    ----------
    epochs : int, default 10
        Passes over the data (the most; fewer when ``tol`` is reached).
    tol : float or None, default None
        Stop once the relative residual ``|(K + reg I) alpha - Y| / |Y|`` is at most tol (checked after each epoch).
    s : int, default 2000
        Nystrom subsample size.
    q, bs, bs_max, alpha
        See :func:`eigenpro_setup` (None: the authors' automatic choices).
    store : bool or None, default None
        Store K (None: when it fits in memory).
    seed : int, default 0
        Seeds the subsample and the batch order.
    idx : index tensor, optional
        A fixed Nystrom subsample (overrides ``s``), e.g. to follow its eigenvectors across RFM iterations.
    """

    def __init__(self, epochs=10, tol=None, s=2000, q=None, bs=None, bs_max=None, alpha=0.95, store=None, seed=0,
                 idx=None):
        check_number("epochs", epochs, low=1, integer=True)
        if tol is not None:
            check_number("tol", tol, low=0, low_inclusive=False)
        self.epochs, self.tol, self.s, self.q, self.bs, self.bs_max = epochs, tol, s, q, bs, bs_max
        self.alpha, self.store, self.seed, self.idx = alpha, store, seed, idx
        self.last_info = None

    def solve(self, kernel, Xt, Y, reg, *, pairs=None, mem_bytes=None) -> SolveResult:
        """Solve (K + reg I) alpha = Y by :func:`eigenpro2` with this solver's settings (the info in ``last_info``).

        Parameters
        ----------
        kernel : Kernel
            The kernel.
        Xt : torch.Tensor, shape (n, r)
            The transformed training points.
        Y : torch.Tensor, shape (n,) or (n, c)
            The targets.
        reg : float
            The ridge.
        pairs : tuple of index tensors, optional
            Coincident pairs of the training points.
        mem_bytes : int, optional
            Working-memory budget of the kernel blocks.

        Returns
        -------
        SolveResult
            ``info`` holds the epochs, q, batch size, step and top eigenvalues; ``K`` the stored kernel matrix, if any.
        """
        op = KernelOperator(kernel, Xt, pairs=pairs, mem_bytes=mem_bytes, store=self.store)
        alpha, info = eigenpro2(op, Y, reg, epochs=self.epochs, s=self.s, q=self.q, bs=self.bs,
                                bs_max=self.bs_max, alpha=self.alpha, tol=self.tol, generator=self.seed,
                                idx=self.idx)
        self.last_info = info
        st = info.setup
        record = {"ep_epochs": info.epochs, "ep_q": st.q, "ep_bs": st.bs, "ep_eta": st.eta,
                  "ep_top_eigval": st.top, "ep_new_top_eigval": st.new_top}
        return SolveResult(alpha, "eigenpro2", None, info=record, K=op.K)

    def __repr__(self):
        return f"EigenPro2Solver(epochs={self.epochs!r}, tol={self.tol!r}, s={self.s!r}, q={self.q!r})"


#: The default number of centres of EigenPro 3 is every training point up to this many, then this many. Measured (CPU,
#: the benchmark task n = 2,000, d = 100, L = 10, 3 updates, 10 epochs, 2026-11-27): test MSE 0.969 with 10 % of the
#: points as centres (the old default: no learning), 0.384 with 50 %, 0.178 with all of them (EigenPro 2's 0.178;
#: the exact solve 0.155). On an H200, 20,000 centres fitted n = 10^6 with one update to test MSE 4.7e-4
#: (../shared/measurements/h200-2026-11-27).
EP3_MAX_CENTRES = 20_000


class EigenPro3Solver:
    """Kernel regression on a subset of the training points as centres, by EigenPro 3 (``solver="eigenpro3"``).

    The centres are ``centers`` training points drawn by ``seed`` (an int, or a fraction of n when below 1; None:
    all points up to :data:`EP3_MAX_CENTRES`, then that many); the returned coefficients are zero on the other
    points. ``reg`` is ignored: EigenPro 3 fits the centres' model to the data without a ridge (the number of
    centres and early stopping regularise). The exact projection factors K(Z, Z) in float64 with a jitter raised
    until the factorisation succeeds (:func:`centre_factor`); the jitter used is recorded (``ep_jitter``).

    Parameters
    ----------
    centers : int, float or None, default None
        The number of centres (an int), or their fraction of n (a float below 1); None: the default above.
    epochs : int, default 10
        Epochs of EigenPro 3.
    s : int, default 2000
        Subsample size of the preconditioner (as in :func:`eigenpro3`).
    projection : {"exact", "eigenpro"}, default "exact"
        How the projection onto the centres is solved (as in :func:`eigenpro3`).
    seed : int, default 0
        Seed of the draw of the centres and of the iteration.
    centres : int, float or None, default None
        Deprecated name of ``centers`` (used when given, with a DeprecationWarning).

    Raises
    ------
    ValueError
        If ``centers`` is not positive or ``epochs`` not a positive int.
    """

    def __init__(self, centers=None, epochs=10, s=2000, projection="exact", seed=0, *, centres=None):
        centers = renamed_keyword("EigenPro3Solver", "centres", "centers", centres, centers)
        if centers is not None:
            check_number("centers", centers, low=0, low_inclusive=False)
        check_number("epochs", epochs, low=1, integer=True)
        self.centers, self.epochs, self.s, self.projection, self.seed = centers, epochs, s, projection, seed
        self.last_info = None

    def n_centres(self, n: int) -> int:
        """The number of centres for n training points.

        Parameters
        ----------
        n : int
            The number of training points.

        Returns
        -------
        int
            Between 1 and n.
        """
        c = self.centers
        if c is None:
            p = min(n, EP3_MAX_CENTRES)
        else:
            p = int(round(c * n)) if c < 1 else int(c)
        return max(1, min(p, n))

    def solve(self, kernel, Xt, Y, reg, *, pairs=None, mem_bytes=None) -> SolveResult:
        """Fit by :func:`eigenpro3` on :meth:`n_centres` training points drawn by ``seed``; ``reg`` is ignored.

        Parameters
        ----------
        kernel : Kernel
            The kernel.
        Xt : torch.Tensor, shape (n, r)
            The transformed training points.
        Y : torch.Tensor, shape (n,) or (n, c)
            The targets.
        reg : float
            The ridge.
        pairs : tuple of index tensors, optional
            Coincident pairs of the training points.
        mem_bytes : int, optional
            Working-memory budget of the kernel blocks.

        Returns
        -------
        SolveResult
            alpha (n,) or (n, c), zero off the centres; ``info`` holds the epochs, q, batch size, number of centres
            and the exact projection's jitter.
        """
        n = Xt.shape[0]
        p = self.n_centres(n)
        Zi = torch.randperm(n, generator=make_generator(self.seed))[:p].to(Xt.device)
        a, info = eigenpro3(kernel, Xt, Y, Xt[Zi], epochs=self.epochs, s=self.s, projection=self.projection,
                            generator=self.seed)
        self.last_info = info
        alpha = torch.zeros((n,) + tuple(Y.shape[1:]), dtype=Y.dtype, device=Y.device)
        alpha[Zi] = a
        record = {"ep_epochs": info.epochs, "ep_q": info.setup.q, "ep_bs": info.setup.bs, "ep_centres": p,
                  **(info.extra or {})}
        return SolveResult(alpha, "eigenpro3", None, info=record)

    def __repr__(self):
        return f"EigenPro3Solver(centers={self.centers!r}, epochs={self.epochs!r}, projection={self.projection!r})"
