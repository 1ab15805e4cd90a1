r"""The eigenframework: test risk of kernel and random-feature ridge regression predicted from a task's
eigenstructure, and the ridge paths that measure it.

A task is described in the eigenbasis of a kernel (or of a feature covariance): eigenvalues lambda_1 >= lambda_2 >= ...
and the target's coefficients v_i, f*(x) = sum_i v_i phi_i(x) with orthonormal phi_i, plus label noise of variance
sigma^2. Under the Gaussian-universality ansatz, kernel ridge regression (KRR) with ridge delta on n samples (the
ridge is added to the *unnormalised* n x n kernel matrix, K + delta I) has

    sum_i lambda_i / (lambda_i + kappa) + delta / kappa = n        (kappa: the effective regularisation)
    L_i = lambda_i / (lambda_i + kappa)                             (the learnability of mode i)
    E_0 = n / (n - sum_i L_i^2)                                      (the overfitting coefficient)
    test risk  = E_0 (sum_i (1 - L_i)^2 v_i^2 + sigma^2),   train risk = (delta / (n kappa))^2 test risk

(Simon, Dickens, Karkada & DeWeese, TMLR 2023, "The eigenlearning framework"; used by Zhou, Simon, Vardi & Srebro,
ICLR 2024, for the cost of overfitting). :func:`krr_risk` computes it, :func:`effective_regularization` solves for
kappa.

Random-feature (RF) regression with k features whose kernel limit has this eigenstructure adds a second
equation; :func:`rf_risk` implements the RF eigenframework of Simon, Karkada, Ghosh & Belkin (2023, "More is
better"), *as written in the authors' code* (``dkarkada/more-is-better``, ``theory.py``, ``rf_krr_risk_theory``):
kappa and gamma solve

    sum_i lambda_i / (lambda_i + gamma) + delta / kappa = n,
    sum_i lambda_i / (lambda_i + gamma) + k kappa / gamma = k,

and with L_i = lambda_i / (lambda_i + gamma), z = sum L_i, q = sum L_i^2,

    E = 1 / (1 - (q (k - 2 z) + z^2) / (n (k - q))),
    test risk = E (sum_i [(1 - L_i) - kappa L_i / (lambda_i + gamma) k / (k - q)] v_i^2 + sigma^2).

As k -> infinity, gamma -> kappa and this is the KRR formula. We eliminate kappa = gamma (k - z) / k and solve the
remaining equation in gamma by bisection on log gamma (it is monotone); at delta = 0 the limits are taken in closed
form (interpolation when n < k; least squares on k < n features, where E = n / (n - k)).

The measured side: :class:`RidgePath` diagonalises one kernel matrix and then gives the coefficients, training
error and predictions at *every* ridge of a path for the cost of a matrix product;
:func:`gaussian_design_risks` draws a Gaussian design with a given spectrum (kernel limit, or k Gaussian random
features of it) and returns the exact ("omniscient") test risk and the training error along a ridge path.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from .._checks import check_number

__all__ = ["KRRRisk", "RFRisk", "RidgePath", "cost_of_overfitting", "effective_regularization",
           "gaussian_design_mean_risks", "gaussian_design_risks", "krr_risk", "learnabilities", "optimal_fitting_ratio",
           "optimal_ridge", "power_law_task", "rf_risk", "rf_risk_path", "ridge_path_risk", "spectral_task"]


def _spectrum(eigvals, name="eigvals") -> np.ndarray:
    lam = np.asarray(eigvals.detach().cpu() if isinstance(eigvals, torch.Tensor) else eigvals, dtype=float).ravel()
    if lam.size == 0:
        raise ValueError(f"{name} must hold at least one eigenvalue")
    if not np.isfinite(lam).all() or (lam < 0).any():
        raise ValueError(f"{name} must be finite and non-negative (a kernel's eigenvalues)")
    if not (lam > 0).any():
        raise ValueError(f"{name} must hold at least one positive eigenvalue")
    return lam


def _coeffs(coeffs, size: int) -> np.ndarray:
    v = np.asarray(coeffs.detach().cpu() if isinstance(coeffs, torch.Tensor) else coeffs, dtype=float).ravel()
    if v.size != size:
        raise ValueError(f"coeffs must hold one coefficient per eigenvalue ({size}), got {v.size}")
    if not np.isfinite(v).all():
        raise ValueError("coeffs must be finite")
    return v


def _bisect_log(f, lo: float, hi: float, iters: int = 200) -> float:
    """Root of a decreasing function f on (lo, hi), by bisection on log scale (f(lo) > 0 > f(hi) assumed)."""
    a, b = math.log(lo), math.log(hi)
    for _ in range(iters):
        m = 0.5 * (a + b)
        if f(math.exp(m)) > 0:
            a = m
        else:
            b = m
        if b - a < 1e-13:
            break
    return math.exp(0.5 * (a + b))


def learnabilities(eigvals, kappa: float):
    """L_i = lambda_i / (lambda_i + kappa), the fraction of mode i that KRR learns (the type of ``eigvals`` is kept:
    a tensor in gives a tensor out).

    Parameters
    ----------
    eigvals : array-like of float, shape (P,)
        The kernel's eigenvalues lambda_i.
    kappa : float
        The effective regularisation.

    Returns
    -------
    array or tensor, shape (P,)
        Of the type of eigvals.
    """
    kappa = check_number("kappa", kappa, low=0)
    if isinstance(eigvals, torch.Tensor):
        return eigvals / (eigvals + kappa)
    lam = _spectrum(eigvals)
    return lam / (lam + kappa)


def effective_regularization(eigvals, n: float, ridge: float = 0.0) -> float:
    """kappa > 0 solving sum_i lambda_i / (lambda_i + kappa) + ridge / kappa = n.

    With ``ridge = 0`` and n larger than the number of positive eigenvalues p, ridgeless regression is least squares
    on p modes and kappa = 0 (every mode learnt, E_0 = n / (n - p)); n = p is the interpolation threshold, where
    the risk diverges: an error.

    Parameters
    ----------
    eigvals : array-like of float, shape (P,)
        The kernel's eigenvalues lambda_i.
    n : float
        Samples.
    ridge : float, default 0.0
        The ridge.

    Returns
    -------
    float
        kappa (0 in the least-squares case).

    Raises
    ------
    ValueError
        At the interpolation threshold (ridge 0 and n equal to the number of positive eigenvalues).
    """
    lam = _spectrum(eigvals)
    n = check_number("n", n, low=0, low_inclusive=False)
    ridge = check_number("ridge", ridge, low=0)
    pos = int((lam > 0).sum())
    if ridge == 0 and n > pos:
        return 0.0                         # least squares on the pos modes: every one is learnt, kappa -> 0
    if ridge == 0 and n == pos:
        raise ValueError(f"with ridge = 0 and n equal to the number of positive eigenvalues ({pos}) the risk "
                         f"diverges (the interpolation threshold): use a positive ridge or another n")
    f = lambda kap: (lam / (lam + kap)).sum() + ridge / kap - n
    hi = max(lam.sum() / n, ridge / n, lam.max()) * 1e3 + 1e-300
    lo = max(lam[lam > 0].min(), 1e-300) * 1e-30
    return _bisect_log(f, lo, hi)


class KRRRisk(NamedTuple):
    """The eigenframework's prediction for KRR: test risk, training risk, effective regularisation, E_0.

    Parameters
    ----------
    test : float
        The test risk (with the noise).
    train : float
        The training risk.
    kappa : float
        The effective regularisation.
    e0 : float
        The overfitting coefficient E_0.
    """

    test: float
    train: float
    kappa: float
    e0: float


def krr_risk(eigvals, coeffs, n: float, ridge: float = 0.0, noise: float = 0.0) -> KRRRisk:
    """Predicted test and training risk of KRR with ``ridge`` on n samples (see the module docstring).

    ``coeffs`` are the target's coefficients in the eigenbasis (v_i), ``noise`` the label-noise variance sigma^2.
    The test risk includes the noise (it is the mean squared error against noisy test labels).

    Parameters
    ----------
    eigvals : array-like of float, shape (P,)
        The kernel's eigenvalues lambda_i.
    coeffs : array-like of float, shape (P,)
        The target's coefficients v_i in the eigenbasis.
    n : float
        Samples.
    ridge : float, default 0.0
        The ridge.
    noise : float, default 0.0
        The label-noise variance sigma^2.

    Returns
    -------
    KRRRisk

    Examples
    --------
    >>> from rfm.theory.eigenframework import krr_risk
    >>> r = krr_risk([1.0, 1.0], [1.0, 0.0], n=1, ridge=0.0)   # one sample, two equal modes: kappa = 1
    >>> round(r.kappa, 9), round(r.e0, 9), round(r.test, 9)
    (1.0, 2.0, 0.5)
    """
    lam = _spectrum(eigvals)
    v = _coeffs(coeffs, lam.size)
    noise = check_number("noise", noise, low=0)
    kappa = effective_regularization(lam, n, ridge)
    L = np.where(lam > 0, lam / np.maximum(lam + kappa, np.finfo(float).tiny), 0.0)
    e0 = n / (n - (L ** 2).sum())
    test = e0 * (((1 - L) ** 2 * v ** 2).sum() + noise)
    train = ((n - L.sum()) / n) ** 2 * test           # ridge / kappa = n - sum L_i (also in the limit ridge -> 0)
    return KRRRisk(float(test), float(train), float(kappa), float(e0))


class RFRisk(NamedTuple):
    """The RF eigenframework's prediction: test risk, kappa, gamma and the overfitting coefficient E.

    Parameters
    ----------
    test : float
        The test risk.
    kappa : float
        The effective regularisation.
    gamma : float
        The RF eigenframework's gamma.
    e : float
        The overfitting coefficient E.
    """

    test: float
    kappa: float
    gamma: float
    e: float


def rf_risk(eigvals, coeffs, n: float, k: float, ridge: float = 0.0, noise: float = 0.0) -> RFRisk:
    """Predicted test risk of ridge regression on k random features whose kernel limit has eigenvalues ``eigvals``.

    The equations are those of the authors' code (module docstring). ``k = inf`` gives :func:`krr_risk`. At ``ridge
    = 0`` and n = k the risk diverges (the interpolation peak): an error.

    Parameters
    ----------
    eigvals : array-like of float, shape (P,)
        The kernel's eigenvalues lambda_i.
    coeffs : array-like of float, shape (P,)
        The target's coefficients v_i in the eigenbasis.
    n : float
        Samples.
    k : float
        Random features (inf: the kernel limit).
    ridge : float, default 0.0
        The ridge.
    noise : float, default 0.0
        The label-noise variance.

    Returns
    -------
    RFRisk

    Raises
    ------
    ValueError
        At ridge 0 and n = k.
    """
    lam = _spectrum(eigvals)
    v = _coeffs(coeffs, lam.size)
    n = check_number("n", n, low=0, low_inclusive=False)
    if not (isinstance(k, (int, float, np.integer, np.floating)) and k == math.inf):
        k = check_number("k", k, low=0, low_inclusive=False)
    ridge = check_number("ridge", ridge, low=0)
    noise = check_number("noise", noise, low=0)
    if math.isinf(k):
        r = krr_risk(lam, v, n, ridge, noise)
        return RFRisk(r.test, r.kappa, r.kappa, r.e0)
    z_of = lambda g: (lam / (lam + g)).sum()
    pos = int((lam > 0).sum())
    top = lam.max() * 1e3 * (1 + n + k) + ridge
    # gamma_k: z(gamma_k) = k (zero when k >= the number of modes): kappa = gamma (k - z) / k > 0 needs gamma > gamma_k
    g_k = _bisect_log(lambda g: z_of(g) - k, lam[lam > 0].min() * 1e-30, top) if k < pos else 0.0
    if ridge > 0:
        f = lambda g: z_of(g) + ridge * k / (g * (k - z_of(g))) - n
        lo = g_k * (1 + 1e-12) if g_k > 0 else lam[lam > 0].min() * 1e-30
        gamma = _bisect_log(f, lo, top)
    elif n < min(k, pos):
        gamma = _bisect_log(lambda g: z_of(g) - n, lam[lam > 0].min() * 1e-30, top)  # interpolation: z = n
    elif k < n and k < pos:
        gamma = g_k                                                                    # least squares: z = k, kappa = 0
    else:
        raise ValueError(f"ridgeless random-feature regression with n = {n} and k = {k} (and {pos} modes) is at or "
                         f"past the interpolation threshold where the risk diverges: use a positive ridge")
    L = lam / (lam + gamma)
    z, q = L.sum(), (L ** 2).sum()
    kappa = gamma * (k - z) / k
    x = (q * (k - 2 * z) + z ** 2) / (n * (k - q))
    e = 1.0 / (1.0 - x)
    bias = (1 - L) - kappa * L / (lam + gamma) * k / (k - q)
    test = e * ((bias * v ** 2).sum() + noise)
    return RFRisk(float(test), float(kappa), float(gamma), float(e))


def optimal_ridge(risk, ridges):
    """The ridge of ``ridges`` with the smallest value of ``risk`` (a callable ridge -> risk, or an array of risks
    aligned with ``ridges``): returns (ridge, risk, index).

    Parameters
    ----------
    risk : callable or array-like
        ridge -> risk, or risks aligned with ``ridges``.
    ridges : array-like of float, shape (R,)
        Ridges delta >= 0.

    Returns
    -------
    ridge, risk : float
    index : int
    """
    ridges = np.asarray(ridges, dtype=float).ravel()
    if ridges.size == 0:
        raise ValueError("ridges must hold at least one ridge")
    vals = np.array([risk(r) for r in ridges]) if callable(risk) else np.asarray(risk, dtype=float).ravel()
    if vals.shape != ridges.shape:
        raise ValueError(f"risk must hold one value per ridge ({ridges.size}), got {vals.size}")
    i = int(np.nanargmin(vals))
    return float(ridges[i]), float(vals[i]), i


def cost_of_overfitting(eigvals, coeffs, n: float, noise: float, ridges=None) -> tuple[float, float]:
    """The predicted cost of overfitting C(n) = R(ridge 0) / min over ridges of R(ridge) for KRR, and E_0 at ridge 0.

    ``ridges`` (default: 0 and 121 values log-spaced over 24 decades around the spectrum's scale) is the path on
    which the optimum is sought. In the eigenframework C(n) <= E_0(ridge 0): the bias term grows with the ridge and
    E_0 >= 1 (a consequence of the formulas, checked in the tests).

    Parameters
    ----------
    eigvals : array-like of float, shape (P,)
        The kernel's eigenvalues lambda_i.
    coeffs : array-like of float, shape (P,)
        The target's coefficients v_i in the eigenbasis.
    n : float
        Samples.
    noise : float
        The label-noise variance.
    ridges : array-like of float, optional
        The path.

    Returns
    -------
    C, e0 : float
    """
    lam = _spectrum(eigvals)
    if ridges is None:
        ridges = np.concatenate([[0.0], lam.sum() * np.logspace(-12, 12, 121)])
    r0 = krr_risk(lam, coeffs, n, 0.0, noise)
    best = optimal_ridge(lambda r: krr_risk(lam, coeffs, n, r, noise).test, ridges)[1]
    return r0.test / best, r0.e0


def power_law_task(P: int, alpha: float, beta: float, *, noise: float = 0.0):
    """Eigenvalues lambda_i = i^-alpha and target coefficients v_i^2 proportional to i^-beta (normalised to
    sum v_i^2 = 1), i = 1..P: the power-law tasks of the "more is better" paper. Returns (eigvals, coeffs, noise)
    as float64 numpy arrays and the noise variance.

    Parameters
    ----------
    P : int
        Modes.
    alpha : float
        The eigenvalue decay.
    beta : float
        The coefficient decay.
    noise : float, default 0.0
        The noise variance.

    Returns
    -------
    eigvals, coeffs : numpy.ndarray of float64, shape (P,)
    noise : float
    """
    P = check_number("P", P, low=1, integer=True)
    alpha = check_number("alpha", alpha, low=0, low_inclusive=False)
    beta = check_number("beta", beta, low=0, low_inclusive=False)
    noise = check_number("noise", noise, low=0)
    i = np.arange(1, P + 1, dtype=float)
    v = i ** (-beta / 2)
    return i ** -alpha, v / np.linalg.norm(v), float(noise)


def spectral_task(K, f):
    """Eigenvalues and target coefficients of a task given by a kernel matrix on a pool of N points (taken as the
    population) and the target's values f on them: lambda_i = eig(K) / N, v_i = u_i . f / sqrt(N) (eigenvalues in
    decreasing order). Then the eigenframework with these values predicts KRR with K on n points drawn from the
    pool, with the ridge added to the n x n kernel matrix.

    Parameters
    ----------
    K : array-like or torch.Tensor, shape (N, N)
        The kernel matrix on the pool.
    f : array-like, shape (N,)
        The target's values.

    Returns
    -------
    eigvals, coeffs : numpy.ndarray of float64, shape (N,)
    """
    K = torch.as_tensor(K, dtype=torch.float64)
    f = torch.as_tensor(f, dtype=torch.float64).reshape(-1)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be a square kernel matrix, got shape {tuple(K.shape)}")
    if f.numel() != K.shape[0]:
        raise ValueError(f"f must hold one value per point of K ({K.shape[0]}), got {f.numel()}")
    N = K.shape[0]
    w, U = torch.linalg.eigh(0.5 * (K + K.T))
    w, U = w.flip(0).clamp_min(0.0), U.flip(1)
    return (w / N).numpy(), (U.T @ f / math.sqrt(N)).numpy()


class RidgePath:
    """Kernel ridge regression at many ridges from one eigendecomposition of the n x n kernel matrix.

    ``RidgePath(K, y)`` diagonalises K = U diag(s) U^T (float64). For a ridge delta the coefficients are
    alpha = U diag(1 / (s + delta)) U^T y; at delta = 0 the eigen-directions with s below ``rtol`` times the largest
    are dropped (the minimum-norm interpolant, or least squares when K is singular). Every method takes an array of
    ridges and returns one column per ridge.

    Parameters
    ----------
    K : array-like or torch.Tensor, shape (n, n)
        The symmetric kernel matrix.
    y : array-like or torch.Tensor, shape (n,)
        Targets.
    rtol : float, default 1e-12
        The relative cut-off of the eigenvalues at delta = 0.

    Examples
    --------
    >>> import torch
    >>> from rfm.theory.eigenframework import RidgePath
    >>> path = RidgePath(torch.eye(2, dtype=torch.float64), torch.tensor([1.0, 2.0], dtype=torch.float64))
    >>> path.coefficients([0.0, 1.0]).tolist()
    [[1.0, 0.5], [2.0, 1.0]]
    """

    def __init__(self, K, y, *, rtol: float = 1e-12):
        K = torch.as_tensor(K, dtype=torch.float64)
        y = torch.as_tensor(y, dtype=torch.float64)
        if K.ndim != 2 or K.shape[0] != K.shape[1]:
            raise ValueError(f"K must be a square kernel matrix, got shape {tuple(K.shape)}")
        if y.ndim != 1 or y.numel() != K.shape[0]:
            raise ValueError(f"y must be a vector with one value per row of K ({K.shape[0]}), "
                             f"got shape {tuple(y.shape)}")
        if not (torch.isfinite(K).all() and torch.isfinite(y).all()):
            raise ValueError("K and y must be finite")
        s, U = torch.linalg.eigh(0.5 * (K + K.T))
        s = s.clamp_min(0.0)
        keep = s > check_number("rtol", rtol, low=0) * s.max().clamp_min(torch.finfo(s.dtype).tiny)
        self.s, self.U, self.y = s[keep], U[:, keep], y
        self.c = self.U.T @ y

    def _weights(self, ridges) -> torch.Tensor:
        r = torch.as_tensor(np.asarray(ridges, dtype=float).ravel(), dtype=torch.float64)
        if (r < 0).any() or not torch.isfinite(r).all():
            raise ValueError("ridges must be finite and non-negative")
        return 1.0 / (self.s[:, None] + r[None, :])                  # (rank, R)

    def coefficients(self, ridges) -> torch.Tensor:
        """alpha(delta) for each ridge: shape (n, R).

        Parameters
        ----------
        ridges : array-like of float, shape (R,)
            Ridges delta >= 0.

        Returns
        -------
        torch.Tensor, float64, shape (n, R)
        """
        return self.U @ (self._weights(ridges) * self.c[:, None])

    def train_mse(self, ridges) -> torch.Tensor:
        """Mean squared training error (ridge delta: the residual y - K alpha) per ridge: shape (R,).

        Parameters
        ----------
        ridges : array-like of float, shape (R,)
            Ridges delta >= 0.

        Returns
        -------
        torch.Tensor, float64, shape (R,)
        """
        r = torch.as_tensor(np.asarray(ridges, dtype=float).ravel(), dtype=torch.float64)
        shrink = r[None, :] * self._weights(ridges)                  # delta / (s + delta)
        outside = (self.y @ self.y - self.c @ self.c).clamp_min(0.0)  # the part of y outside K's range
        return (((shrink * self.c[:, None]) ** 2).sum(0) + outside) / self.y.numel()

    def predict(self, K_test, ridges) -> torch.Tensor:
        """Predictions K_test alpha(delta) on test points (K_test: m x n kernel against the training points).

        Parameters
        ----------
        K_test : array-like or torch.Tensor, shape (m, n)
            The test kernel.
        ridges : array-like of float, shape (R,)
            Ridges delta >= 0.

        Returns
        -------
        torch.Tensor, float64, shape (m, R)
        """
        return torch.as_tensor(K_test, dtype=torch.float64) @ self.coefficients(ridges)


def gaussian_design_risks(eigvals, coeffs, n: int, ridges, *, k: int | None = None, noise: float = 0.0,
                          generator=None) -> tuple[np.ndarray, np.ndarray]:
    """Measured (test, train) risks of ridge regression on a Gaussian design along a ridge path.

    Inputs x ~ N(0, I_P) in the eigen-coordinates, labels y = v . x + sigma * noise. With ``k = None`` the model is
    the kernel limit, KRR with K(x, x') = x^T Lambda x'; with an integer k it is ridge regression on the k random
    features Phi(x) = G Lambda^(1/2) x / sqrt(k), G with N(0, 1) entries, whose kernel tends to the same limit as k
    grows (the construction of the "more is better" paper's Gaussian experiments). The learnt function is linear,
    f(x) = u . x, so its test risk is exact: ``norm(u - v)^2 + sigma^2`` (no test set). Returns two arrays, one value
    per ridge.

    Parameters
    ----------
    eigvals : array-like of float, shape (P,)
        The kernel's eigenvalues lambda_i.
    coeffs : array-like of float, shape (P,)
        The target's coefficients v_i in the eigenbasis.
    n : int
        Samples.
    ridges : array-like of float, shape (R,)
        Ridges delta >= 0.
    k : int, optional
        Random features (None: the kernel limit).
    noise : float, default 0.0
        The label-noise variance sigma^2.
    generator : int or torch.Generator, optional
        Seeds the draws.

    Returns
    -------
    test, train : numpy.ndarray of float64, shape (R,)
    """
    lam = _spectrum(eigvals)
    v = torch.as_tensor(_coeffs(coeffs, lam.size))
    n = check_number("n", n, low=1, integer=True)
    noise = check_number("noise", noise, low=0)
    gen = generator if isinstance(generator, torch.Generator) else torch.Generator().manual_seed(
        0 if generator is None else int(generator))
    P = lam.size
    root = torch.as_tensor(np.sqrt(lam))
    X = torch.randn(n, P, generator=gen, dtype=torch.float64)
    y = X @ v + math.sqrt(noise) * torch.randn(n, generator=gen, dtype=torch.float64)
    if k is None:
        F = X * root                                                # Phi = X Lambda^(1/2): u = Lambda^(1/2) Phi^T alpha
        T = F.T * root[:, None]
    else:
        k = check_number("k", k, low=1, integer=True)
        G = torch.randn(k, P, generator=gen, dtype=torch.float64)
        W = (G * root) / math.sqrt(k)                               # Phi(x) = W x
        F = X @ W.T
        T = W.T @ F.T                                               # u = W^T Phi^T alpha
    path = RidgePath(F @ F.T, y)
    U = T @ path.coefficients(ridges)                               # (P, R): the learnt u per ridge
    test = ((U - v[:, None]) ** 2).sum(0) + noise
    return test.numpy(), path.train_mse(ridges).numpy()


def gaussian_design_mean_risks(eigvals, coeffs, n: int, ridges, *, k: int | None = None, noise: float = 0.0,
                               generators=(0,)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean over independent draws of :func:`gaussian_design_risks`: the measured risks along a ridge path.

    Parameters
    ----------
    eigvals, coeffs : array-like
        The task's spectrum and target coefficients (see :func:`gaussian_design_risks`).
    n : int
        Number of samples.
    ridges : array-like
        The ridge path.
    k : int or None, default=None
        Number of random features; None is the kernel limit.
    noise : float, default=0.0
        Label-noise variance.
    generators : iterable, default=(0,)
        One seed (or ``torch.Generator``) per draw; at least two for a standard error.

    Returns
    -------
    test_mean, test_se, train_mean : numpy.ndarray
        The mean test risk, its standard error (sample standard deviation over sqrt(draws); NaN for one draw) and
        the mean training error, one value per ridge.
    """
    te, tr = zip(*[gaussian_design_risks(eigvals, coeffs, n, ridges, k=k, noise=noise, generator=g)
                   for g in generators])
    te, tr = np.array(te), np.array(tr)
    se = te.std(0, ddof=1) / np.sqrt(len(te)) if len(te) > 1 else np.full(te.shape[1], np.nan)
    return te.mean(0), se, tr.mean(0)


def rf_risk_path(eigvals, coeffs, n: float, k: float | None, ridges, noise: float = 0.0) -> np.ndarray:
    """The RF eigenframework's test risk (:func:`rf_risk`) at each ridge of a path.

    Parameters
    ----------
    eigvals, coeffs : array-like
        The task's spectrum and target coefficients.
    n : float
        Number of samples.
    k : float or None
        Number of random features; None (or ``inf``) is the kernel limit.
    ridges : array-like
        The ridge path.
    noise : float, default=0.0
        Label-noise variance.

    Returns
    -------
    numpy.ndarray
        One test risk per ridge; NaN where the formula has no value (ridge 0 at the interpolation threshold).
    """
    k = np.inf if k is None else k
    out = []
    for r in np.asarray(ridges, dtype=float).ravel():
        try:
            out.append(rf_risk(eigvals, coeffs, n, k, r, noise).test)
        except ValueError:          # ridgeless at the threshold: the risk diverges
            out.append(np.nan)
    return np.array(out)


def optimal_fitting_ratio(eigvals, coeffs, n: float, ridges, noise: float = 0.0) -> float:
    """The eigenframework's fitting ratio (train over test risk of KRR) at the ridge of a path with the least test
    risk.

    Parameters
    ----------
    eigvals, coeffs : array-like
        The task's spectrum and target coefficients.
    n : float
        Number of samples.
    ridges : array-like
        The ridge path; ridge 0 is skipped when n equals the number of non-zero eigenvalues (the risk diverges).
    noise : float, default=0.0
        Label-noise variance.

    Returns
    -------
    float
        train / test at the optimal ridge of the path (near 0: the best model nearly interpolates).
    """
    n_modes = np.count_nonzero(eigvals)
    rs = [krr_risk(eigvals, coeffs, n, r, noise) for r in ridges if r > 0 or n != n_modes]
    best = min(rs, key=lambda r: r.test)
    return best.train / best.test


def ridge_path_risk(K_train, K_test, y_train, target, ridges, noise: float = 0.0) -> np.ndarray:
    """Population risk of kernel ridge regression at each ridge of a path, on a pool that stands in for the
    population: the mean squared error against the clean target plus the label-noise variance.

    Parameters
    ----------
    K_train : array-like of shape (n, n)
        Kernel matrix of the training points.
    K_test : array-like of shape (m, n)
        Kernel between the pool and the training points.
    y_train : array-like of shape (n,)
        The (noisy) training labels.
    target : array-like of shape (m,)
        The clean target on the pool.
    ridges : array-like
        The ridge path.
    noise : float, default=0.0
        Label-noise variance, added to the error (the risk against noisy test labels).

    Returns
    -------
    numpy.ndarray
        One risk per ridge.
    """
    pred = RidgePath(K_train, y_train).predict(K_test, ridges)
    target = torch.as_tensor(target, dtype=torch.float64)
    return ((pred - target[:, None]) ** 2).mean(0).numpy() + noise
