r"""Linear Recursive Feature Machines (lin-RFM) and iteratively reweighted least squares (IRLS).

lin-RFM (Radhakrishnan, Belkin & Drusvyatskiy, "Linear Recursive Feature Machines provably recover low-rank
matrices", PNAS 2025; code aradha/lin-RFM) is RFM with a linear predictor. Each iteration

1. maps the inputs through the feature map x -> M x and fits the **minimum-norm** interpolant in those coordinates;
2. sets M <- AGOP^alpha, where the AGOP of a linear predictor is its weight outer product.

Convention (as in aradha/lin-RFM): alpha is the power of the **feature map** M, so the kernel metric is
P = M^T M = AGOP^{2 alpha}. (In kernel RFM, :func:`rfm.feature_update`, the power applies to the metric itself.)

**Sparse regression** (diagonal M). For f(x) = w^T x the AGOP is w w^T; its diagonal gives
P = diag(abs(w)^{4 alpha}), and the minimum-norm solve in reweighted coordinates is

    w_new = M (X M)^+ y = P X^T (X P X^T)^{-1} y,

i.e. w_new = argmin { sum_i w_i^2 / P_ii : X w = y }. IRLS for the l_p quasi-norm minimises
sum_i abs(w_i^old)^{p-2} w_i^2 under the same constraint, so the two coincide when 4 alpha = 2 - p:

    p = 2 - 4 alpha       (alpha = 1/4: p = 1, basis pursuit; alpha = 1/2: p = 0, the log penalty).

**Matrix completion.** Row i of Y (n x d) is a linear function of the columns' one-hot codes; with the metric P on
the d columns, the minimum-norm fit of the observed entries of row i (columns I_i) predicts
out_i = P[:, I_i] (P[I_i, I_i] + reg I)^{-1} y_{i, I_i}. The AGOP is out^T out / n and P <- AGOP^{2 alpha}
(an eigendecomposition), which is IRLS for the Schatten-p quasi-norm with the same map p = 2 - 4 alpha
(:func:`irls_completion` is that reference, with IRLS's smoothing inside the power). At alpha = 1/2, P = AGOP needs
no eigendecomposition: the **SVD-free** update. The row fits carry a ridge that decays from iteration to iteration,
the continuation IRLS applies to its smoothing; all rows are solved in one batched call.

The deep linear network baselines: for completion (:func:`deep_linear_completion`) an :class:`rfm.nets.MLP` with
linear activations trained by Adam on the observed entries; for sparse regression
(:func:`diagonal_network_regression`) a diagonal linear network w = u^L - v^L trained by gradient descent from a
small initialisation.

The stopping rule here reads only observed entries: a held-out share of them (chosen with ``seed``) is never fitted
and decides when to stop (aradha/lin-RFM stops on the unobserved entries, which a user does not have).

Every function takes numpy arrays or torch tensors and returns the same kind (torch in, torch out).
"""
from __future__ import annotations

import time
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._checks import as_input_kind as _out
from .._checks import check_eval_target as _eval_target
from .._checks import check_iterations as _check_iters
from .._checks import check_matrix, check_number
from .._checks import check_observed as _observed
from .._checks import check_regression_data as _xy
from .._checks import check_vector as _vec
from .._checks import is_numpy as _is_numpy
from ..nets import linear as nets_linear
from ..utils import make_generator, psd_power
from .loop import rfm_loop

__all__ = ["CompletionStep", "LinRFMRegressor", "SparseStep", "irls", "irls_step", "lin_rfm_sparse",
           "lin_rfm_sparse_step", "lin_rfm_completion", "irls_completion", "completion_predict", "completion_metric",
           "alpha_to_irls_p", "irls_p_to_alpha"]


def alpha_to_irls_p(alpha: float) -> float:
    """The IRLS power p that one lin-RFM step with feature-map power ``alpha`` equals: p = 2 - 4 alpha.

    Parameters
    ----------
    alpha : float
        The lin-RFM power (>= 0).

    Returns
    -------
    float
    """
    return 2.0 - 4.0 * check_number("alpha", alpha, low=0.0)


def irls_p_to_alpha(p: float) -> float:
    """Inverse of :func:`alpha_to_irls_p`: alpha = (2 - p) / 4.

    Parameters
    ----------
    p : float
        The IRLS power (<= 2).

    Returns
    -------
    float
    """
    return (2.0 - check_number("p", p, high=2.0)) / 4.0


# ----------------------------------------------------------------------------------------------------------------
# input handling


def _weighted_min_norm(X, y, p_diag, reg):
    """argmin sum_i w_i^2 / p_i subject to X w = y (reg = 0: through a pseudo-inverse, which also handles zero
    weights) or its ridge version w = P X^T (X P X^T + reg I)^{-1} y."""
    if reg > 0:
        G = (X * p_diag) @ X.T
        G = G + reg * torch.eye(G.shape[0], dtype=G.dtype, device=G.device)
        return p_diag * (X.T @ torch.linalg.solve(G, y))
    m = p_diag.clamp_min(0).sqrt()
    return m * (torch.linalg.pinv(X * m) @ y)


# ----------------------------------------------------------------------------------------------------------------
# sparse regression


def lin_rfm_sparse_step(X, y, w, *, alpha: float = 0.5, reg: float = 0.0):
    """One lin-RFM step from the predictor ``w``: M = diag(abs(w)^{2 alpha}) (the AGOP's diagonal to the power
    alpha), then the minimum-norm interpolant in the coordinates X M, mapped back: w_new = M (X M)^+ y
    (``reg`` = 0) or P X^T (X P X^T + reg I)^{-1} y with P = M^2.

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    y : array-like or torch.Tensor, shape (n,)
        Targets.
    w : array-like or torch.Tensor, shape (d,)
        The current predictor.
    alpha : float, default 0.5
        The power (> 0).
    reg : float, default 0.0
        The ridge (>= 0).

    Returns
    -------
    array or tensor (d,), same kind as X
    """
    numpy_out = _is_numpy(X)
    Xt, yt = _xy(X, y)
    wt = _vec(w, Xt.shape[1], Xt)
    alpha = check_number("alpha", alpha, low=0.0, low_inclusive=False)
    reg = check_number("reg", reg, low=0.0)
    return _out(_weighted_min_norm(Xt, yt, wt.abs() ** (4 * alpha), reg), numpy_out)


class SparseStep:
    """The RFM loop's step (:mod:`rfm.models.loop`) of lin-RFM for sparse regression: the metric is the diagonal p
    of P = M^2; solve = the minimum-norm interpolant w = argmin sum_i w_i^2 / p_i s.t. X w = y; the AGOP of
    f(x) = w^T x is w w^T (kept as w); update p = diag(AGOP)^{2 alpha} = abs(w)^{4 alpha}.

    Parameters
    ----------
    X, y : torch.Tensor
        Design (n, d) and targets (n,).
    alpha : float
        The power of the feature map M = AGOP^alpha.
    reg : float
        Ridge of the solve (0: the pseudo-inverse).
    """

    def __init__(self, X, y, alpha, reg):
        self.X, self.y, self.alpha, self.reg = X, y, alpha, reg

    def solve(self, p, t):
        """The weighted minimum-norm interpolant; the record holds it as ``"w"``.

        Parameters
        ----------
        p : torch.Tensor, shape (d,)
            The diagonal metric.
        t : int
            The iteration.

        Returns
        -------
        w : torch.Tensor, shape (d,)
        record : dict
            ``"iteration"`` and ``"w"``.
        scratch : None
        """
        w = _weighted_min_norm(self.X, self.y, p, self.reg)
        return w, {"iteration": t, "w": w}, None

    def score(self, record):
        """None: lin-RFM keeps the last iterate.

        Parameters
        ----------
        record : dict
            An iterate's record (unused).
        """
        return None

    def stop(self, w, history, best_iter):
        """False: all iterations run.

        Parameters
        ----------
        w, history, best_iter
            As in the loop's interface (unused).

        Returns
        -------
        bool
            False.
        """
        return False

    def agop(self, w, p, scratch):
        """The AGOP w w^T of the linear predictor, represented by w.

        Parameters
        ----------
        w : torch.Tensor, shape (d,)
            The predictor.
        p, scratch
            Unused.

        Returns
        -------
        torch.Tensor, shape (d,)
            ``w``.
        """
        return w

    def update(self, w, p, t):
        """p = abs(w)^{4 alpha}.

        Parameters
        ----------
        w : torch.Tensor, shape (d,)
            The predictor.
        p : torch.Tensor
            The current metric (unused).
        t : int
            The iteration (unused).

        Returns
        -------
        p_next : torch.Tensor, shape (d,)
        stop : bool
            False.
        """
        return w.abs() ** (4 * self.alpha), False


def lin_rfm_sparse(X, y, *, iters: int = 50, alpha: float = 0.5, reg: float = 0.0, return_path: bool = False):
    """lin-RFM for sparse linear regression: the RFM loop (:func:`rfm.models.loop.rfm_loop`) with
    :class:`SparseStep`, from M = I (iteration 0: the minimum-norm least-squares solution X^+ y), then ``iters``
    steps of :func:`lin_rfm_sparse_step`.

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, d)
    y : array-like or torch.Tensor, shape (n,)
    iters : int, default 50
        Number of updates of M.
    alpha : float, default 0.5
        The power of the feature map (IRLS p = 2 - 4 alpha).
    reg : float, default 0.0
        Ridge of each solve.
    return_path : bool, default False
        Also return every iterate.

    Returns
    -------
    w : array or tensor (d,), same kind as X
    path : array or tensor (iters + 1, d), with ``return_path`` (row 0 = iteration 0)
    """
    numpy_out = _is_numpy(X)
    Xt, yt = _xy(X, y)
    iters = _check_iters(iters)
    alpha = check_number("alpha", alpha, low=0.0, low_inclusive=False)
    reg = check_number("reg", reg, low=0.0)
    res = rfm_loop(SparseStep(Xt, yt, alpha, reg), torch.ones(Xt.shape[1], dtype=Xt.dtype, device=Xt.device),
                   iters)
    w = res.model
    if return_path:
        return _out(w, numpy_out), _out(torch.stack([r["w"] for r in res.history]), numpy_out)
    return _out(w, numpy_out)


class LinRFMRegressor(RegressorMixin, BaseEstimator):
    """lin-RFM for sparse linear regression as a scikit-learn estimator: :func:`lin_rfm_sparse` through the one RFM
    loop, with the package's name for the power: the metric P = M^2 is AGOP^agop_power, so ``agop_power = 2 alpha``
    of :func:`lin_rfm_sparse` (the IRLS power is p = 2 - 2 agop_power: 1/2 is basis pursuit, 1 the log penalty).

    Parameters
    ----------
    iters : int, default 50
        Number of updates of M (0: the minimum-norm least-squares solution).
    agop_power : float, default 1.0
        The power of the AGOP's diagonal in the metric (> 0).
    reg : float, default 0.0
        Ridge of each solve (0: the minimum-norm interpolant, by a pseudo-inverse).

    Attributes
    ----------
    coef_ : numpy.ndarray
        The weights w (n_features,), or (n_outputs, n_features) for 2-D targets (one lin-RFM per output).
    path_ : numpy.ndarray
        Every iterate, (iters + 1, n_features) (or (n_outputs, iters + 1, n_features)).
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from rfm.models.linear import LinRFMRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((20, 50))
    >>> w = np.zeros(50); w[[3, 7]] = [1.0, -2.0]
    >>> model = LinRFMRegressor(iters=100, agop_power=0.5).fit(X, X @ w)
    >>> bool(np.abs(model.coef_ - w).max() < 1e-6)
    True
    """

    def __init__(self, iters=50, agop_power=1.0, reg=0.0):
        self.iters = iters
        self.agop_power = agop_power
        self.reg = reg

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def fit(self, X, y):
        """Run lin-RFM on X and y.

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)
        y : array-like, shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self
        """
        iters = _check_iters(self.iters)
        power = check_number("agop_power", self.agop_power, low=0.0, low_inclusive=False)
        reg = check_number("reg", self.reg, low=0.0)
        X, y = validate_data(self, X, y, dtype=np.float64, multi_output=True, y_numeric=True)
        Y = y.reshape(len(y), -1)
        fits = [lin_rfm_sparse(X, np.ascontiguousarray(Y[:, j]), iters=iters, alpha=power / 2, reg=reg,
                               return_path=True) for j in range(Y.shape[1])]  # contiguous: as one output rounds
        self.coef_ = np.stack([w for w, _ in fits]) if y.ndim == 2 else fits[0][0]
        self.path_ = np.stack([path for _, path in fits]) if y.ndim == 2 else fits[0][1]
        return self

    def predict(self, X):
        """X w.

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)

        Returns
        -------
        numpy.ndarray
            (n_samples,) or (n_samples, n_outputs).
        """
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_.T


def irls_step(X, y, w, *, p: float = 1.0, eps: float = 0.0):
    """One step of IRLS for min ||w||_p^p subject to X w = y (Daubechies, DeVore, Fornasier & Gunturk 2010;
    Chartrand & Yin 2008): weights c_i = (w_i^2 + eps)^{p/2 - 1}, and w_new = argmin sum_i c_i w_i^2 s.t. X w = y,
    solved from its KKT conditions: w_new = C^{-1} X^T (X C^{-1} X^T)^{-1} y.

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    y : array-like or torch.Tensor, shape (n,)
        Targets.
    w : array-like or torch.Tensor, shape (d,)
        The current iterate.
    p : float, default 1.0
        The power (<= 2).
    eps : float, default 0.0
        The smoothing (>= 0).

    Returns
    -------
    array or tensor (d,), same kind as X
    """
    numpy_out = _is_numpy(X)
    Xt, yt = _xy(X, y)
    wt = _vec(w, Xt.shape[1], Xt)
    p = check_number("p", p, high=2.0)
    eps = check_number("eps", eps, low=0.0)
    c_inv = (wt ** 2 + eps) ** (1.0 - p / 2.0)          # 1 / c_i, finite also where w_i = 0 (p < 2)
    G = (Xt * c_inv) @ Xt.T
    lam = torch.linalg.lstsq(G, yt[:, None]).solution[:, 0] if G.device.type == "cpu" else torch.linalg.pinv(G) @ yt
    return _out(c_inv * (Xt.T @ lam), numpy_out)


def irls(X, y, *, iters: int = 50, p: float = 1.0, eps: float = 0.0, eps_decay: float = 1.0,
         return_path: bool = False):
    """Reference IRLS-p from the minimum-norm solution; ``eps`` is the smoothing, multiplied by ``eps_decay`` after
    every step.

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    y : array-like or torch.Tensor, shape (n,)
        Targets.
    iters : int, default 50
        Steps.
    p : float, default 1.0
        The power (<= 2).
    eps : float, default 0.0
        The smoothing (>= 0).
    eps_decay : float, default 1.0
        Its factor per step, in [0, 1].
    return_path : bool, default False
        Also return every iterate.

    Returns
    -------
    w : array or tensor (d,), same kind as X
    path : array or tensor (iters + 1, d), with ``return_path`` (row 0 = the minimum-norm solution)
    """
    numpy_out = _is_numpy(X)
    Xt, yt = _xy(X, y)
    iters = _check_iters(iters)
    eps_decay = check_number("eps_decay", eps_decay, low=0.0, high=1.0)
    w = torch.linalg.pinv(Xt) @ yt
    path = [w]
    for _ in range(iters):
        w = irls_step(Xt, yt, w, p=p, eps=eps)
        eps *= eps_decay
        path.append(w)
    if return_path:
        return _out(w, numpy_out), _out(torch.stack(path), numpy_out)
    return _out(w, numpy_out)


# ----------------------------------------------------------------------------------------------------------------
# matrix completion


def completion_predict(Y, mask, P, *, reg: float = 0.0, replace: bool = False):
    """The minimum-norm fit of each row's observed entries under the column metric P:
    out_i = P[:, I_i] (P[I_i, I_i] + reg I)^{-1} Y[i, I_i] (a pseudo-inverse when reg = 0). Rows with no observed
    entry predict zero. ``replace`` puts the observed values back into the prediction (as aradha/lin-RFM does; it
    matters when reg > 0 shrinks the fit). Only the entries where ``mask`` is True are read.

    Parameters
    ----------
    Y : array-like or torch.Tensor, shape (n, d)
        The matrix.
    mask : array-like of bool, shape (n, d)
        True where Y is observed.
    P : array-like or torch.Tensor, shape (d, d)
        The column metric.
    reg : float, default 0.0
        The ridge (>= 0).
    replace : bool, default False
        Put the observed values back.

    Returns
    -------
    array or tensor (n, d), same kind as Y

    Raises
    ------
    ValueError
        If P is not (d, d).
    """
    Yt, m, numpy_out = _observed(Y, mask)
    Pt = torch.as_tensor(np.asarray(P) if _is_numpy(P) else P).to(dtype=Yt.dtype, device=Yt.device)
    if tuple(Pt.shape) != (Yt.shape[1], Yt.shape[1]):
        raise ValueError(f"P must be ({Yt.shape[1]}, {Yt.shape[1]}), got {tuple(Pt.shape)}")
    reg = check_number("reg", reg, low=0.0)
    return _out(_predict(Yt, m, Pt, reg, bool(replace)), numpy_out)


def _predict(Y, m, P, reg, replace=False, max_elements: int = 2 ** 24, definite: bool = False):
    """All rows at once: row i's observed columns are gathered into a (k, k) block of P (k = the most observed
    entries of any row), padded with an identity block and a zero right-hand side, which leaves the row's solution
    unchanged (the padded system is block diagonal); rows are taken in chunks of at most ``max_elements`` block
    entries. The coefficients are scattered back into an (n, d) matrix A, and the prediction is A P. With reg = 0
    the blocks are pseudo-inverted, unless ``definite`` says P is positive definite (then a plain solve)."""
    n, d = Y.shape
    counts = m.sum(1)
    k = int(counts.max())
    out = torch.zeros_like(Y)
    if k == 0:
        return out
    order = torch.argsort(m.to(torch.int8), dim=1, descending=True, stable=True)[:, :k]
    ar = torch.arange(k, device=Y.device)
    eye = torch.eye(k, dtype=Y.dtype, device=Y.device)
    step = max(1, max_elements // (k * k))
    for s in range(0, n, step):
        sl = slice(s, min(n, s + step))
        valid = ar < counts[sl, None]
        idx = torch.where(valid, order[sl], torch.zeros((), dtype=order.dtype, device=Y.device))
        both = valid[:, :, None] & valid[:, None, :]
        K = torch.where(both, P[idx[:, :, None], idx[:, None, :]], eye)
        yv = torch.where(valid, Y[sl].gather(1, idx), torch.zeros((), dtype=Y.dtype, device=Y.device))
        if reg > 0 or definite:
            a = torch.linalg.solve(K + reg * eye, yv[..., None])[..., 0]
        else:
            a = (torch.linalg.pinv(K, hermitian=True) @ yv[..., None])[..., 0]
        A = torch.zeros((a.shape[0], d), dtype=Y.dtype, device=Y.device)
        A.scatter_add_(1, idx, torch.where(valid, a, torch.zeros((), dtype=a.dtype, device=a.device)))
        out[sl] = A @ P
    if replace:
        out = torch.where(m, Y, out)
    return out


def _predict_rowwise(Y, m, P, reg, replace=False):
    """One row at a time: the reference :func:`_predict` is tested against."""
    out = torch.zeros_like(Y)
    for i in range(Y.shape[0]):
        idx = m[i].nonzero(as_tuple=True)[0]
        if idx.numel() == 0:
            continue
        K = P[idx][:, idx]
        yi = Y[i, idx]
        if reg > 0:
            a = torch.linalg.solve(K + reg * torch.eye(idx.numel(), dtype=K.dtype, device=K.device), yi)
        else:
            a = torch.linalg.pinv(K, hermitian=True) @ yi
        out[i] = P[:, idx] @ a
        if replace:
            out[i, idx] = yi
    return out


def completion_metric(out, *, alpha: float = 0.5, svd_free: bool = True):
    """The next metric from the current completion ``out`` (n x d): AGOP = out^T out / n and P = AGOP^{2 alpha}
    (eigendecomposition), or P = AGOP directly (``svd_free``, which requires alpha = 1/2).

    Parameters
    ----------
    out : array-like or torch.Tensor, shape (n, d)
        The completion.
    alpha : float, default 0.5
        The power (> 0).
    svd_free : bool, default True
        P = AGOP.

    Returns
    -------
    array or tensor (d, d), same kind as ``out``
    """
    numpy_out = _is_numpy(out)
    O = check_matrix(out, "out")
    alpha = check_number("alpha", alpha, low=0.0, low_inclusive=False)
    return _out(_metric(O, alpha, svd_free), numpy_out)


def _metric(O, alpha, svd_free):
    A = O.T @ O / O.shape[0]
    if svd_free:
        return A
    return psd_power(A, 2 * alpha)


def _schedule(start, decay, floor, it):
    return max(start * decay ** it, floor) if start > 0 else 0.0


def _check_schedule(prefix, start, decay, floor):
    start = check_number(prefix, start, low=0.0)
    decay = check_number(prefix + "_decay", decay, low=0.0, high=1.0)
    floor = check_number(prefix + "_min", floor, low=0.0)
    return start, decay, floor


def lin_rfm_completion(Y, mask, *, iters: int = 300, alpha: float = 0.5, reg: float = 0.1, reg_decay: float = 0.95,
                       reg_min: float = 1e-10, reg_schedule: str = "geometric", reg_patience: int = 10,
                       reg_switch: float = 0.1, svd_free: bool = True, replace: bool = True, holdout: float = 0.0,
                       patience: int | None = None, tol: float = 0.0, seed=0, Y_eval=None, eval_mask=None,
                       switch_on: str = "holdout"):
    """lin-RFM for low-rank matrix completion.

    Starts from P = I (iteration 0 fills the unobserved entries with zeros) and alternates
    :func:`completion_predict` (with ``replace``) and :func:`completion_metric`. The ridge of the row solves at
    iteration t is max(reg * reg_decay^t, reg_min): a large ridge early and a vanishing one later, the continuation
    that IRLS applies to its smoothing epsilon (a fixed small ridge stalls far from the answer; a fixed large one
    leaves a bias of its size). ``reg_decay=1`` keeps it fixed. With ``reg_schedule="plateau"`` (which needs a
    ``holdout``) the ridge is instead multiplied by ``reg_decay`` only when the held-out error has not improved by
    1 % for ``reg_patience`` iterations: it waits for the fit at the current ridge to settle, the rule of the
    authors' code (a ridge of 0.05 lowered once the error is small) with the held-out observed entries in place of
    the unobserved ones. Close to the information limit the geometric schedule can commit to a wrong metric
    (d = 500, r = 5, 10,000 observed entries: 0.32 relative test error after 1,000 iterations) where the plateau
    schedule from 0.05 keeps improving (0.055 after 800, one problem). ``reg_schedule="switch"`` is the rule of the
    authors' code (aradha/lin-RFM, ``svd_free_lin_rfm.py``): the ridge stays at ``reg`` until the squared relative
    error of the previous iterate falls below ``reg_switch`` and is then min(reg, reg_min) for good. The authors
    compare the mean squared error on the *unobserved* entries with 0.1, for matrices whose mean squared entry is 1
    (Frobenius norm d, as :func:`rfm.data.low_rank_completion`), so their rule is this one with reg=0.05,
    reg_min=1e-3, reg_switch=0.1, read on the evaluation entries (``switch_on="eval"``, an oracle: it reads the
    answer) or, what a user can do, on the held-out observed entries (``switch_on="holdout"``, the default).

    A share ``holdout`` of the observed entries (chosen with ``seed``) is left out of the fit; their relative error
    decides the stopping (``patience`` iterations without improvement, or the error below ``tol``) and which iterate
    is returned (the best). Nothing else of Y than its observed entries is read. ``Y_eval``/``eval_mask``
    (optional, e.g. the ground truth on the unobserved entries) are only *reported* along the way, never used to
    stop.

    Returns a dict: ``"Y"`` the completion at the chosen iteration (same kind as Y), ``"iteration"`` it,
    ``"holdout_error"``, ``"eval_error"`` (lists per iteration, relative Frobenius errors), ``"time"``
    (cumulative seconds at each iteration), ``"metric_time"`` (cumulative seconds spent on the metric updates
    alone) and ``"P"`` the final metric.

    Parameters
    ----------
    Y : array-like or torch.Tensor, shape (n, d)
        The matrix; only its observed entries are read.
    mask : array-like of bool, shape (n, d)
        True where Y is observed.
    iters : int, default 300
        Metric updates (>= 0).
    replace : bool, default True
        Put the observed values back into each completion.
    holdout : float, default 0.0
        Share of the observed entries left out for early stopping and selection, in [0, 1).
    patience : int, optional
        Stop after this many iterations without a better held-out error (needs ``holdout``).
    tol : float, default 0.0
        Stop once the held-out error is at most this.
    seed : int or torch.Generator, default 0
        Seeds the held-out draw.
    Y_eval : array-like, shape (n, d), optional
        Values to report the error on (e.g. the ground truth), never used to stop.
    eval_mask : array-like of bool, shape (n, d), optional
        Where Y_eval is read.
    alpha : float, default 0.5
        The power of the AGOP (P = AGOP^{2 alpha}).
    reg : float, default 0.1
        The starting ridge of the row solves.
    reg_decay : float, default 0.95
        Its factor per iteration (or per plateau).
    reg_min : float, default 1e-10
        Its floor.
    reg_schedule : {"geometric", "plateau"}, default "geometric"
        How the ridge decays.
    reg_patience : int, default 10
        Iterations without a 1 % improvement before a plateau decay.
    svd_free : bool, default True
        P = AGOP directly (alpha = 1/2 only).

    Returns
    -------
    dict
        ``"Y"`` the completion (n, d) at the chosen iteration (the same kind as Y), ``"iteration"`` it,
        ``"holdout_error"`` and ``"eval_error"`` (lists per iteration, relative Frobenius errors), ``"time"`` and
        ``"metric_time"`` (cumulative seconds) and ``"P"`` the final metric (d, d).

    Raises
    ------
    ValueError
        If ``svd_free`` is set with alpha != 1/2, the schedule is unknown, or "plateau" is asked without a holdout.
    """
    alpha = check_number("alpha", alpha, low=0.0, low_inclusive=False)
    if svd_free and abs(alpha - 0.5) > 1e-12:
        raise ValueError(f"the SVD-free update is lin-RFM at alpha = 1/2 (P = AGOP); got alpha={alpha}: pass "
                         "svd_free=False for other powers")
    reg, reg_decay, reg_min = _check_schedule("reg", reg, reg_decay, reg_min)
    if reg_schedule not in ("geometric", "plateau", "switch"):
        raise ValueError(f"reg_schedule must be 'geometric', 'plateau' or 'switch', got {reg_schedule!r}")
    if reg_schedule == "geometric":
        ridge = lambda it, err: _schedule(reg, reg_decay, reg_min, it)
    elif reg_schedule == "switch":
        if switch_on not in ("holdout", "eval"):
            raise ValueError(f"switch_on must be 'holdout' or 'eval', got {switch_on!r}")
        if switch_on == "holdout" and not holdout > 0:
            raise ValueError("reg_schedule='switch' reads the held-out error: pass a holdout share, e.g. 0.1, or "
                             "switch_on='eval' with Y_eval")
        if switch_on == "eval" and Y_eval is None:
            raise ValueError("switch_on='eval' reads the evaluation error: pass Y_eval")
        ridge = _SwitchRidge(reg, reg_min, check_number("reg_switch", reg_switch, low=0.0), switch_on)
    else:
        if not holdout > 0:
            raise ValueError("reg_schedule='plateau' lowers the ridge when the held-out error stalls: pass a "
                             "holdout share, e.g. holdout=0.1")
        ridge = _PlateauRidge(reg, reg_decay, reg_min,
                              int(check_number("reg_patience", reg_patience, low=1, integer=True)))
    return _complete(Y, mask, iters=iters, metric=lambda out, it: _metric(out, alpha, svd_free),
                     ridge=ridge, replace=replace, holdout=holdout, patience=patience, tol=tol, seed=seed,
                     Y_eval=Y_eval, eval_mask=eval_mask)


class _PlateauRidge:
    """The ridge of ``reg_schedule="plateau"``: called with the iteration and the previous held-out error."""

    def __init__(self, start, factor, floor, patience):
        self.value, self.factor, self.floor, self.patience = start, factor, floor, patience
        self.best, self.since = float("inf"), 0

    def __call__(self, it, err):
        if err is None:
            return self.value
        if err < 0.99 * self.best:
            self.best, self.since = err, 0
        else:
            self.since += 1
        if self.since >= self.patience and self.value > self.floor:
            self.value, self.best, self.since = max(self.value * self.factor, self.floor), err, 0
        return self.value


class _SwitchRidge:
    """The ridge of ``reg_schedule="switch"``: ``start`` until the squared error read falls below ``level``, then
    min(start, floor) for good."""

    def __init__(self, start, floor, level, reads):
        self.value, self.floor, self.level, self.reads, self.switched_at = start, floor, level, reads, None

    def __call__(self, it, err):
        if self.switched_at is None and err is not None and err ** 2 < self.level:
            self.value, self.switched_at = min(self.value, self.floor), it
        return self.value


def irls_completion(Y, mask, *, iters: int = 300, p: float = 1.0, eps: float = 0.1, eps_decay: float = 0.95,
                    eps_min: float = 1e-10, replace: bool = True, holdout: float = 0.0, patience: int | None = None,
                    tol: float = 0.0, seed=0, Y_eval=None, eval_mask=None):
    """Reference IRLS-p for low-rank matrix completion (Mohan & Fazel 2012; Fornasier, Rauhut & Ward 2011): each
    step minimises the weighted Frobenius norm sum_i x_i^T W x_i over completions that agree with the observed
    entries, with W = (X^T X / n + eps I)^{p/2 - 1}; equivalently the row fits of :func:`completion_predict` under
    the metric P = W^{-1} = (X^T X / n + eps I)^{1 - p/2}, an eigendecomposition per step unless p = 0. The
    smoothing eps at iteration t is max(eps * eps_decay^t, eps_min). Same arguments and return value as
    :func:`lin_rfm_completion` (no ridge: P is positive definite).

    Parameters
    ----------
    Y : array-like or torch.Tensor, shape (n, d)
        The matrix; only its observed entries are read.
    mask : array-like of bool, shape (n, d)
        True where Y is observed.
    iters : int, default 300
        Metric updates (>= 0).
    replace : bool, default True
        Put the observed values back into each completion.
    holdout : float, default 0.0
        Share of the observed entries left out for early stopping and selection, in [0, 1).
    patience : int, optional
        Stop after this many iterations without a better held-out error (needs ``holdout``).
    tol : float, default 0.0
        Stop once the held-out error is at most this.
    seed : int or torch.Generator, default 0
        Seeds the held-out draw.
    Y_eval : array-like, shape (n, d), optional
        Values to report the error on (e.g. the ground truth), never used to stop.
    eval_mask : array-like of bool, shape (n, d), optional
        Where Y_eval is read.
    p : float, default 1.0
        The power, below 2.
    eps : float, default 0.1
        The starting smoothing.
    eps_decay : float, default 0.95
        Its factor per iteration.
    eps_min : float, default 1e-10
        Its floor.

    Returns
    -------
    dict
        ``"Y"`` the completion (n, d) at the chosen iteration (the same kind as Y), ``"iteration"`` it,
        ``"holdout_error"`` and ``"eval_error"`` (lists per iteration, relative Frobenius errors), ``"time"`` and
        ``"metric_time"`` (cumulative seconds) and ``"P"`` the final metric (d, d).
    """
    p = check_number("p", p, high=2.0, high_inclusive=False)
    eps, eps_decay, eps_min = _check_schedule("eps", eps, eps_decay, eps_min)

    def metric(out, it):
        A = out.T @ out / out.shape[0]
        e = _schedule(eps, eps_decay, eps_min, it)
        A = A + e * torch.eye(A.shape[0], dtype=A.dtype, device=A.device)
        return A if p == 0 else psd_power(A, 1.0 - p / 2.0)

    return _complete(Y, mask, iters=iters, metric=metric, ridge=lambda it, err: 0.0, replace=replace, holdout=holdout,
                     patience=patience, tol=tol, seed=seed, Y_eval=Y_eval, eval_mask=eval_mask, definite=eps_min > 0)


class CompletionStep:
    """The RFM loop's step (:mod:`rfm.models.loop`) of lin-RFM (and IRLS) for matrix completion: solve = the
    minimum-norm row fits under the column metric P (:func:`completion_predict`); record the held-out and evaluation
    errors; keep the iterate of least held-out error and stop early on it; the AGOP out^T out / n of the completion
    and its power, by ``metric``.

    Parameters
    ----------
    Y, fit, holdout : torch.Tensor
        The observed matrix, the entries fitted, and the held-out entries (or None).
    evaluation : (truth, entries) or None
        Reported only.
    metric : callable
        ``metric(out, it) -> P``.
    ridge : callable
        ``ridge(it, previous held-out error or None) -> reg``.
    replace, definite : bool
        As :func:`completion_predict`; ``definite``: P is positive definite (a plain solve).
    tol : float
        Stop when the held-out error is at most this.
    patience : int or None
        Stop after this many iterations without a better held-out error.

    Attributes
    ----------
    times, metric_times : list of float
        Cumulative seconds at each iteration (solves and metric updates), and in the metric updates alone.
    """

    def __init__(self, Y, fit, holdout, evaluation, metric, ridge, replace, definite, tol, patience):
        self.Y, self.fit, self.ho, self.ev = Y, fit, holdout, evaluation
        self.metric, self.ridge, self.replace, self.definite = metric, ridge, replace, definite
        self.tol, self.patience = tol, patience
        self.hist_ho, self.hist_ev, self.times, self.metric_times = [], [], [], []
        self.elapsed, self.in_metric = 0.0, 0.0

    def _sync(self):
        if self.Y.device.type == "cuda":
            torch.cuda.synchronize(self.Y.device)

    @staticmethod
    def _rel(A, B, sel):
        return float(torch.linalg.norm(A[sel] - B[sel]) / torch.linalg.norm(B[sel]).clamp_min(1e-300))

    def solve(self, P, it):
        """The row fits under P (with the ridge of this iteration), and their errors.

        Parameters
        ----------
        P : torch.Tensor, shape (d, d)
            The column metric.
        it : int
            The iteration.

        Returns
        -------
        out : torch.Tensor, shape (n, d)
            The completion.
        record : dict
            ``"iteration"`` and ``"holdout_error"`` (NaN without a held-out share).
        scratch : None
        """
        t0 = time.perf_counter()
        if getattr(self.ridge, "reads", "holdout") == "eval":   # the authors' oracle switch (see _SwitchRidge)
            reg = self.ridge(it, self.hist_ev[-1] if self.hist_ev else None)
        else:
            reg = self.ridge(it, self.hist_ho[-1] if self.hist_ho and self.ho is not None else None)
        out = _predict(self.Y, self.fit, P, reg, bool(self.replace), definite=self.definite or it == 0)
        self._sync()
        self.elapsed += time.perf_counter() - t0
        self.times.append(self.elapsed)
        self.metric_times.append(self.in_metric)
        err = self._rel(out, self.Y, self.ho) if self.ho is not None else float("nan")
        self.hist_ho.append(err)
        if self.ev is not None:
            self.hist_ev.append(self._rel(out, self.ev[0], self.ev[1]))
        return out, {"iteration": it, "holdout_error": err}, None

    def score(self, record):
        """Minus the held-out error (None without a held-out share: the last iterate is kept).

        Parameters
        ----------
        record : dict
            An iterate's record.

        Returns
        -------
        float or None
        """
        return None if self.ho is None else -record["holdout_error"]

    def stop(self, out, history, best_iter):
        """Early stopping on the held-out error: at most ``tol``, or ``patience`` iterations without a better one.

        Parameters
        ----------
        out : torch.Tensor
            The current completion (unused).
        history : list of dict
            The records so far.
        best_iter : int
            The best iteration so far.

        Returns
        -------
        bool
            False without a held-out share.
        """
        if self.ho is None:
            return False
        since = history[-1]["iteration"] - best_iter
        return history[-1]["holdout_error"] <= self.tol or (self.patience is not None and since >= self.patience)

    def agop(self, out, P, scratch):
        """The completion, whose AGOP out^T out / n ``metric`` forms.

        Parameters
        ----------
        out : torch.Tensor, shape (n, d)
            The completion.
        P : torch.Tensor
            The metric (unused).
        scratch : None
            Unused.

        Returns
        -------
        torch.Tensor, shape (n, d)
            ``out``.
        """
        return out

    def update(self, out, P, it):
        """P = metric(out, it).

        Parameters
        ----------
        out : torch.Tensor, shape (n, d)
            The completion.
        P : torch.Tensor
            The current metric (unused).
        it : int
            The iteration.

        Returns
        -------
        P_next : torch.Tensor, shape (d, d)
        stop : bool
            False.
        """
        t0 = time.perf_counter()
        P = self.metric(out, it)
        self._sync()
        dt = time.perf_counter() - t0
        self.elapsed += dt
        self.in_metric += dt
        return P, False


def _complete(Y, mask, *, iters, metric, ridge, replace, holdout, patience, tol, seed, Y_eval, eval_mask,
              definite=False):
    Yt, m, numpy_out = _observed(Y, mask)
    iters = _check_iters(iters)
    holdout = check_number("holdout", holdout, low=0.0, high=1.0, high_inclusive=False)
    tol = check_number("tol", tol, low=0.0)
    if patience is not None:
        patience = int(check_number("patience", patience, low=1, integer=True))
    if holdout > 0:
        g = make_generator(seed)
        obs = m.nonzero()
        k = int(round(holdout * obs.shape[0]))
        if k < 1:
            raise ValueError(f"holdout={holdout} leaves no observed entry out ({obs.shape[0]} observed)")
        pick = obs[torch.randperm(obs.shape[0], generator=g)[:k].to(obs.device)]
        ho = torch.zeros_like(m)
        ho[pick[:, 0], pick[:, 1]] = True
        fit = m & ~ho
    else:
        ho, fit = None, m
    step = CompletionStep(Yt, fit, ho, _eval_target(Y_eval, eval_mask, Yt, m), metric, ridge, replace, definite,
                          tol, patience)
    res = rfm_loop(step, torch.eye(Yt.shape[1], dtype=Yt.dtype, device=Yt.device), iters)
    return {"Y": _out(res.model, numpy_out), "iteration": res.best_iter, "holdout_error": step.hist_ho,
            "eval_error": step.hist_ev, "time": step.times, "metric_time": step.metric_times,
            "P": _out(res.M, numpy_out), "switched_at": getattr(ridge, "switched_at", None)}


# The deep linear network baselines moved to rfm.nets.linear in 0.2 (old name -> new module).
MOVED = {"deep_linear_completion": "rfm.nets.linear", "diagonal_network_regression": "rfm.nets.linear"}


def __getattr__(name):
    """The network baselines at their pre-0.2 path, with a DeprecationWarning (for one release)."""
    if name in MOVED:
        warnings.warn(f"rfm.models.linear.{name} moved to rfm.nets.linear.{name} in rfm 0.2; the old path will be "
                      "removed in 0.3", DeprecationWarning, stacklevel=2)
        return getattr(nets_linear, name)
    raise AttributeError(f"module 'rfm.models.linear' has no attribute {name!r}")
