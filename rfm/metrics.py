"""Comparisons between matrices and simple prediction metrics.

The NFA papers compare a neural feature matrix with a power of the AGOP by a correlation of the flattened matrices.
Two forms are in use, and a chapter should say which one it asserts on:

* ``"pearson"``: subtract each matrix's mean entry, then take the cosine (Radhakrishnan et al., Science 2024;
  ``verify_deep_NFA.py`` in their code);
* ``"cosine"``: the uncentred cosine ``<A, B>_F / (|A|_F |B|_F)`` (used in the convolutional NFA code and in
  "Feature learning as alignment").

Every function checks its inputs first: arrays must be numeric, non-empty and finite (a NaN in a prediction usually
means the model diverged), and predictions must have as many entries as the targets.
"""
from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np
import torch

from ._checks import check_choice, check_number, check_square, to_tensor
from .utils import top_eigenvectors


def _as_float_tensor(A, name):
    A = to_tensor(A, name)
    if not A.is_floating_point():
        A = A.to(torch.float64)
    return A


def _check_finite(t: torch.Tensor, name: str, hint: str = "") -> torch.Tensor:
    if t.numel() == 0:
        raise ValueError(f"{name} is empty (shape {tuple(t.shape)}); pass at least one value")
    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
        bad = int((~torch.isfinite(t)).sum())
        raise ValueError(f"{name} contains {bad} NaN or infinite value(s){hint}; remove or replace them first")
    return t


_PRED_HINT = " (a model that diverged, or missing values?)"


def _paired(y, y_pred, what: str):
    """``y`` and ``y_pred`` as tensors with the same shape; (n,) and (n, 1) count as the same.

    Both must be non-empty and finite; ``y`` is moved to the device of ``y_pred``."""
    y, y_pred = to_tensor(y, "y"), to_tensor(y_pred, "y_pred")
    _check_finite(y, "y")
    _check_finite(y_pred, "y_pred", _PRED_HINT)
    if y.shape != y_pred.shape:
        col = lambda t: t.reshape(-1, 1) if t.ndim <= 1 else t
        if col(y).shape != col(y_pred).shape:
            hint = ""
            if what == "labels" and y_pred.ndim == 2 and y_pred.shape[0] == y.reshape(-1).shape[0]:
                hint = " (y_pred looks like scores, one column per class: pass y_pred.argmax(1))"
            elif y.ndim >= 1 and y_pred.ndim >= 1 and y.shape[0] != y_pred.shape[0]:
                hint = f" (y has {y.shape[0]} samples, y_pred {y_pred.shape[0]})"
            raise ValueError(f"y and y_pred must have the same shape ({what} for the same samples), got "
                             f"{tuple(y.shape)} and {tuple(y_pred.shape)}{hint}")
    return y.to(y_pred.device), y_pred


def matrix_correlation(A, B, kind: str = "pearson") -> float:
    """Correlation of two matrices of the same shape, flattened: ``"pearson"`` (mean-centred) or ``"cosine"``.

    Parameters
    ----------
    A, B : array-like or torch.Tensor
        Matrices (or arrays) of the same shape, finite and non-empty; compared in float64.
    kind : {"pearson", "cosine"}, default "pearson"
        Subtract each array's mean entry first ("pearson"), or not ("cosine").

    Returns
    -------
    float
        In [-1, 1].

    Raises
    ------
    ValueError
        If the shapes differ, an entry is not finite, or one array is constant ("pearson") or zero ("cosine").
    """
    check_choice("kind", kind, ("pearson", "cosine"))
    A = _check_finite(_as_float_tensor(A, "A").detach(), "A")
    B = _check_finite(_as_float_tensor(B, "B").detach(), "B").to(device=A.device)
    if A.shape != B.shape:
        raise ValueError(f"A and B must have the same shape, got {tuple(A.shape)} and {tuple(B.shape)}")
    a = A.reshape(-1).to(torch.float64)
    b = B.reshape(-1).to(torch.float64)
    if kind == "pearson":
        a = a - a.mean()
        b = b - b.mean()
    na, nb = a.norm(), b.norm()
    if na == 0 or nb == 0:
        raise ValueError(f"correlation is undefined: one matrix is {'constant' if kind == 'pearson' else 'zero'}")
    return float((a @ b) / (na * nb))


def _basis(U, name: str) -> torch.Tensor:
    U = _check_finite(_as_float_tensor(U, name).detach(), name)
    if U.ndim != 2:
        hint = f" (a single vector: {name}.reshape(-1, 1))" if U.ndim == 1 else ""
        raise ValueError(f"{name} must be a 2-D matrix (d, k) whose columns span the subspace, got shape "
                         f"{tuple(U.shape)}{hint}")
    d, k = U.shape
    if k > d:
        raise ValueError(f"{name} has {k} columns but only {d} rows: at most {d} columns of a basis in dimension {d} "
                         f"can be independent (pass the basis vectors as columns, not rows: {name}.T?)")
    Q, R = torch.linalg.qr(U.to(torch.float64))
    r = R.diagonal().abs()
    if float(r.max()) == 0 or bool((r <= 1e-10 * r.max()).any()):
        raise ValueError(f"the columns of {name} are linearly dependent (or zero), so they are not a basis of a "
                         f"{k}-dimensional subspace; drop the repeated or zero columns")
    return Q


def subspace_overlap(U, V) -> float:
    """How much of span(V) lies in span(U): ``|P_U V|_F^2 / k`` for orthonormal bases (d, k_U) and (d, k).

    It is 1 when span(V) is inside span(U) and k / d on average for a random k-dimensional V.

    Parameters
    ----------
    U : array-like or torch.Tensor, shape (d, k_U)
        Columns spanning the first subspace (orthonormalised here; they must be independent).
    V : array-like or torch.Tensor, shape (d, k)
        Columns spanning the second subspace.

    Returns
    -------
    float
        In [0, 1] (k_U >= k) or [0, k_U / k].

    Raises
    ------
    ValueError
        If U or V is not a 2-D matrix of independent, finite columns, or their numbers of rows differ.
    """
    U, V = _as_float_tensor(U, "U"), _as_float_tensor(V, "V")
    if U.ndim == 2 and V.ndim == 2 and U.shape[0] != V.shape[0]:
        raise ValueError(f"U and V must have the same number of rows, got {U.shape[0]} and {V.shape[0]}")
    U = _basis(U, "U")
    V = _basis(V, "V").to(U.device)
    return float((U.T @ V).square().sum() / V.shape[1])


def top_eigenspace_overlap(M, coordinates, k: int | None = None) -> float:
    """Overlap of the top-``k`` eigenvectors of ``M`` with the span of the given coordinate axes.

    ``k`` defaults to the number of coordinates, e.g. ``top_eigenspace_overlap(M, [0, 1])`` asks whether the top-2
    eigenspace of M is span(e1, e2).

    Parameters
    ----------
    M : array-like or torch.Tensor, shape (d, d)
        A symmetric matrix.
    coordinates : sequence of int
        Distinct coordinate indices in [0, d).
    k : int, optional
        The number of top eigenvectors, 1 <= k <= d (default: ``len(coordinates)``).

    Returns
    -------
    float
        :func:`subspace_overlap` of the coordinate axes' span with the top-k eigenvectors, in [0, 1].

    Raises
    ------
    TypeError
        If ``coordinates`` is not a sequence of integers.
    ValueError
        If a coordinate is out of range or repeated, or ``coordinates`` is empty.
    """
    M = check_square(M, "M").detach().to(torch.float64).cpu()
    d = M.shape[0]
    if isinstance(coordinates, (str, bytes)) or not hasattr(coordinates, "__iter__"):
        raise TypeError(f"coordinates must be a list of coordinate indices, e.g. [0, 1], got {coordinates!r}")
    coords = []
    for c in coordinates:
        if isinstance(c, torch.Tensor) and c.numel() == 1 and not c.is_floating_point():
            c = int(c)
        if isinstance(c, bool) or not isinstance(c, numbers.Integral):
            raise TypeError(f"coordinates must be integer indices, got {c!r} in {coordinates!r}")
        if not 0 <= int(c) < d:
            raise ValueError(f"coordinate {int(c)} is out of range for a {d} x {d} matrix M (valid: 0 to {d - 1})")
        coords.append(int(c))
    if not coords:
        raise ValueError("coordinates is empty; name at least one coordinate axis, e.g. [0]")
    if len(set(coords)) != len(coords):
        raise ValueError(f"coordinates must be distinct, got {coords}")
    k = len(coords) if k is None else check_number("k", k, low=1, high=d, integer=True)
    E = torch.zeros(d, len(coords), dtype=torch.float64)
    E[coords, range(len(coords))] = 1.0
    return subspace_overlap(E, top_eigenvectors(M, k))


def mse(y, y_pred) -> float:
    """Mean squared error over samples and outputs; ``y`` and ``y_pred`` of the same shape ((n,) and (n, 1) mix).

    Parameters
    ----------
    y : array-like or torch.Tensor, shape (n,) or (n, c)
        Targets.
    y_pred : array-like or torch.Tensor, the shape of ``y``
        Predictions, finite.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If the shapes differ or a value is not finite.
    """
    y, y_pred = _paired(y, y_pred, "targets")
    if not y_pred.is_floating_point():
        y_pred = y_pred.to(torch.float64)
    return float((y.reshape(y_pred.shape).to(y_pred.dtype) - y_pred).square().mean())


def r2_score(y, y_pred) -> float:
    """Coefficient of determination, averaged uniformly over output columns (scikit-learn's default).

    Parameters
    ----------
    y : array-like or torch.Tensor, shape (n,) or (n, c)
        Targets, n >= 2.
    y_pred : array-like or torch.Tensor, the shape of ``y``
        Predictions, finite.

    Returns
    -------
    float
        The mean over columns of 1 - SS_res / SS_tot (computed in float64); a constant column counts 0.

    Raises
    ------
    ValueError
        If the shapes differ, a value is not finite, or there are fewer than two samples.
    """
    y, y_pred = _paired(y, y_pred, "targets")
    y = y.detach().to(torch.float64)
    y_pred = y_pred.detach().to(torch.float64).reshape(y.shape)
    if y.ndim == 0 or y.shape[0] < 2:
        raise ValueError(f"r2_score needs at least two samples (R^2 compares with the variance of y), got "
                         f"{1 if y.ndim == 0 else y.shape[0]}")
    if y.ndim == 1:
        y, y_pred = y[:, None], y_pred[:, None]
    ss_res = (y - y_pred).square().sum(0)
    ss_tot = (y - y.mean(0)).square().sum(0)
    r2 = torch.where(ss_tot > 0, 1 - ss_res / ss_tot.clamp_min(1e-300), torch.zeros_like(ss_tot))
    return float(r2.mean())


def accuracy(y, y_pred) -> float:
    """The share of samples whose predicted label equals the true label; labels of the same shape.

    Parameters
    ----------
    y : array-like or torch.Tensor, shape (n,)
        True labels.
    y_pred : array-like or torch.Tensor, shape (n,)
        Predicted labels (not scores: pass ``scores.argmax(1)``).

    Returns
    -------
    float
        In [0, 1].

    Raises
    ------
    ValueError
        If the shapes differ or a value is not finite.
    """
    y, y_pred = _paired(y, y_pred, "labels")
    return float((y.reshape(-1) == y_pred.reshape(-1)).to(torch.float64).mean())


class ScalingLaw(NamedTuple):
    """err = coef * n ** slope, fitted by least squares on (log n, log err); ``r2`` is the fit's R^2 there.

    Parameters
    ----------
    coef : float
        The prefactor a.
    slope : float
        The exponent b (the slope on log-log axes, the same in every base).
    r2 : float
        R^2 of the linear fit in log-log coordinates (the same in every base).
    intercept : float, default nan
        The intercept of the fitted line in base-``base`` logarithms: log_base(a).
    base : float, default e
        The base of the logarithms of the fit.
    """
    coef: float
    slope: float
    r2: float
    intercept: float = math.nan
    base: float = math.e

    def __call__(self, n):
        """The fitted law at ``n``.

        Parameters
        ----------
        n : float or array-like
            Abscissae.

        Returns
        -------
        numpy.ndarray of float64, the shape of ``n``
            coef * n ** slope.
        """
        return self.coef * np.asarray(n, dtype=float) ** self.slope


def _log(x: np.ndarray, base: float | None) -> np.ndarray:
    """log_base(x): numpy's own log10 and log2 for those bases, else log(x) / log(base); None: the natural log."""
    if base is None:
        return np.log(x)
    if base == 10:
        return np.log10(x)
    if base == 2:
        return np.log2(x)
    return np.log(x) / math.log(base)


def fit_scaling_law(n, err, *, base: float | None = None) -> ScalingLaw:
    """Fit err = a n^b to positive ``n`` and positive ``err`` by least squares in log-log coordinates: the package's
    one log-log fit (scaling laws in the number of samples, slopes of a power law).

    Parameters
    ----------
    n : array-like
        Positive, finite abscissae (e.g. sample sizes), at least two different values.
    err : array-like
        Positive, finite values, one per entry of ``n``.
    base : float or None, default None
        The base of the logarithms (positive, not 1), e.g. 10 to read the intercept in decades; None: the natural
        logarithm. The slope and R^2 do not depend on it (up to rounding), the intercept does.

    Returns
    -------
    ScalingLaw
        (coef, slope, r2, intercept, base): a = base ** intercept, b = the slope of log err against log n, the fit's
        R^2, the intercept of the line in base-``base`` logarithms, and the base (e for None).

    Raises
    ------
    ValueError
        If n and err differ in length, hold fewer than two points or two different n, are not positive and finite,
        or ``base`` is not a finite positive number other than 1.
    TypeError
        If ``base`` is not a real number.

    Examples
    --------
    >>> from rfm.metrics import fit_scaling_law
    >>> law = fit_scaling_law([10, 100, 1000], [1.0, 0.1, 0.01])
    >>> round(law.slope, 6), round(law.coef, 6)
    (-1.0, 10.0)
    >>> round(fit_scaling_law([10, 100, 1000], [1.0, 0.1, 0.01], base=10).intercept, 6)
    1.0
    """
    if base is not None:
        check_number("base", base, low=0, low_inclusive=False)
        if base == 1:
            raise ValueError("base must be a positive number other than 1 (log base 1 is undefined), got 1")
    n = np.asarray(n, dtype=float).ravel()
    err = np.asarray(err, dtype=float).ravel()
    if n.shape != err.shape:
        raise ValueError(f"n and err must have the same length, got {n.size} and {err.size}")
    if n.size < 2:
        raise ValueError(f"n must hold at least two sample sizes to fit a slope, got {n.size}")
    if not (np.isfinite(n).all() and (n > 0).all()):
        raise ValueError("n must be positive and finite (sample sizes)")
    if not (np.isfinite(err).all() and (err > 0).all()):
        raise ValueError("err must be positive and finite (a zero error has no logarithm: drop it)")
    if np.ptp(n) == 0:
        raise ValueError("n must hold at least two different sample sizes")
    x, y = _log(n, base), _log(err, base)
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (intercept + slope * x)
    tot = ((y - y.mean()) ** 2).sum()
    r2 = 1.0 - (resid ** 2).sum() / tot if tot > 0 else 1.0
    coef = np.exp(intercept) if base is None else float(base) ** intercept
    return ScalingLaw(float(coef), float(slope), float(r2), float(intercept), math.e if base is None else float(base))


def largest_rise(values, se) -> float:
    """The largest increase between consecutive values of a curve, in units of their combined standard error.

    A curve that should never go up (a risk against model size) is "non-increasing within c standard errors" when
    this is at most c; a negative value means it fell at every step.

    Parameters
    ----------
    values : array-like of shape (m,)
        The curve, m >= 2.
    se : array-like of shape (m,)
        The standard error of each value.

    Returns
    -------
    float
        ``max_i (values[i+1] - values[i]) / sqrt(se[i+1]^2 + se[i]^2)``.

    Examples
    --------
    >>> from rfm.metrics import largest_rise
    >>> largest_rise([3.0, 2.0, 2.5], [0.3, 0.4, 0.0])
    1.25
    """
    values = np.asarray(values, dtype=float).ravel()
    se = np.asarray(se, dtype=float).ravel()
    if values.shape != se.shape or values.size < 2:
        raise ValueError(f"values and se must be two curves of equal length >= 2, got {values.size} and {se.size}")
    d = np.diff(values)
    return float(np.max(d / np.sqrt(se[1:] ** 2 + se[:-1] ** 2)))


def per_vector_overlap(U, V) -> float:
    """The mean of ``|<u_i, v_i>|`` over matching columns of two eigenvector matrices: sign-free, but, unlike
    :func:`subspace_overlap`, it counts eigenvectors that only swap places inside a common eigenspace as change.

    Parameters
    ----------
    U, V : torch.Tensor of shape (s, q)
        Unit columns (eigenvectors), matched by index.

    Returns
    -------
    float
        1 when every column agrees up to sign; 0 when matching columns are orthogonal.

    Examples
    --------
    >>> import torch
    >>> from rfm.metrics import per_vector_overlap
    >>> per_vector_overlap(torch.eye(2), torch.tensor([[-1.0, 0.0], [0.0, 0.0]]))
    0.5
    """
    return float((U * V).sum(0).abs().mean())


def align_signs(Us) -> list:
    """Each eigenvector matrix of a sequence with its columns' signs flipped to agree with its predecessor's
    (an eigensolver returns each eigenvector with an arbitrary sign).

    Parameters
    ----------
    Us : sequence of torch.Tensor of shape (s, q)
        Eigenvectors at successive steps, matched by column.

    Returns
    -------
    list of torch.Tensor
        The first matrix as given, then each one with ``sign(<previous aligned u_i, u_i>)`` applied to column i
        (a zero inner product keeps the sign).
    """
    aligned = [Us[0]]
    for U in Us[1:]:
        sign = torch.sign((aligned[-1] * U).sum(0))
        aligned.append(U * torch.where(sign == 0, torch.ones_like(sign), sign))
    return aligned


def entry_sum_drift(Us) -> list:
    """Gorlla's eigenvector statistic: per step, the median over columns of ``|sum_j u_ji(t) - sum_j u_ji(0)|``,
    the change of each eigenvector's entry sum since the first step.

    Parameters
    ----------
    Us : sequence of torch.Tensor of shape (s, q)
        Eigenvectors at successive steps (pass :func:`align_signs` of them to remove the eigensolver's signs).

    Returns
    -------
    list of float
        One value per step, 0 at the first.

    Examples
    --------
    >>> import torch
    >>> from rfm.metrics import entry_sum_drift
    >>> entry_sum_drift([torch.eye(2), -torch.eye(2)])
    [0.0, 2.0]
    """
    return [float((U.sum(0) - Us[0].sum(0)).abs().median()) for U in Us]


def flip_rate(predict, X, X_perturbed) -> float:
    """The share of samples whose predicted label changes when ``X`` is replaced by ``X_perturbed``.

    Parameters
    ----------
    predict : callable
        Labels of the rows of its argument (a model's ``predict``).
    X : array-like of shape (n, d)
        The samples.
    X_perturbed : array-like of shape (n, d)
        The same samples, perturbed (row i of one is row i of the other).

    Returns
    -------
    float
        The share of rows i with ``predict(X_perturbed)[i] != predict(X)[i]``.
    """
    after, before = torch.as_tensor(predict(X_perturbed)).cpu(), torch.as_tensor(predict(X)).cpu()
    if after.shape != before.shape:
        raise ValueError(f"predict gave shapes {tuple(after.shape)} and {tuple(before.shape)} for X_perturbed and X")
    return float((after != before).double().mean())


def eigenvector_mass(M, coordinates, k: int = 20) -> torch.Tensor:
    """For each of the top-``k`` eigenvectors of a symmetric ``M``, the share of its squared norm on ``coordinates``.

    A share of 1 means the eigenvector lies in the span of those coordinate axes; a random unit vector in ``d``
    dimensions puts ``len(coordinates) / d`` there on average.

    Parameters
    ----------
    M : array-like of shape (d, d)
        A symmetric matrix (a feature matrix, an AGOP).
    coordinates : sequence of int
        The coordinate axes (0-based).
    k : int, default=20
        How many eigenvectors, by decreasing eigenvalue.

    Returns
    -------
    torch.Tensor of shape (k,)
        The shares, in float64, in the order of the eigenvalues.
    """
    M = check_square(M, "M").detach().to(torch.float64).cpu()
    k = check_number("k", k, low=1, high=M.shape[0], integer=True)
    return top_eigenvectors(M, k)[list(coordinates)].square().sum(0)


def relative_error(estimate, truth) -> float:
    """The relative error ``||estimate - truth|| / ||truth||`` in the Euclidean (vectors) or Frobenius (matrices) norm.

    Parameters
    ----------
    estimate : torch.Tensor
        The estimate.
    truth : torch.Tensor
        The true value, of the same shape (not zero).

    Returns
    -------
    float
    """
    return float(torch.linalg.norm(estimate - truth) / torch.linalg.norm(truth))
