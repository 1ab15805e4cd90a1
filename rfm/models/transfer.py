r"""Transfer learning with kernels: projection and translation of a source model (Radhakrishnan, Ruiz Luyten,
Prasad & Uhler, Nature Communications 2023).

A *source* predictor f_s, fitted on a large source task, is carried to a target task with n_t labelled samples
(x_i, y_i) in one of two ways:

* **projection** -- a kernel machine on the source model's *outputs*: f_t(x) = g(f_s(x)), where g is kernel ridge
  regression of y_i on the features f_s(x_i) (:class:`ProjectedKernel`). The target labels may differ from the
  source labels (any number of outputs).
* **translation** -- the source predictor plus a correction: f_t(x) = f_s(x) + h(x), where h is kernel ridge
  regression of the *residuals* y_i - f_s(x_i) on the inputs x_i (:class:`TranslatedKernel`). The target labels
  live in the source's output space (same number of outputs). With no target data h = 0 and f_t = f_s.

These definitions follow the authors' code (``uhlerlab/kernel_tf``, ``cifarc_analysis/laplace_main.py``: the
translated prediction is the source prediction plus a Laplace kernel fitted to ``y - f_s(x)``; the projected one is
a Laplace kernel fitted on ``f_s(x)``). The source may be any fitted rfm model -- a :class:`rfm.KernelMachine`, an
:class:`rfm.RFMRegressor` (its ``predict``), an :class:`rfm.RFMClassifier` (its raw least-squares outputs, the
one-hot codes it was fitted to), another transferred model -- or any callable mapping an (n, d) tensor to outputs.

Both estimators are the RFM loop (:mod:`rfm.models.loop`) with a *transfer step* and no feature update
(``iters=0``): one kernel ridge solve on the source outputs (projection) or on the residuals (translation).

:func:`transfer_curves` measures the paper's comparison (target-only baseline, the source alone, translation,
projection) against the number of target samples; :func:`rfm.metrics.fit_scaling_law` (re-exported here) fits
err = a n^b on log-log axes (the empirical scaling law in the number of target samples).
"""
from __future__ import annotations

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._checks import check_matrix, check_number, resolve_dtype
from ..core.kernels import get_kernel, kernel_matrix
from ..core.machine import KernelMachine
from ..core.solvers import solve_krr
from ..metrics import ScalingLaw, fit_scaling_law  # noqa: F401  (re-exported: their pre-0.2 home)
from ..utils import make_generator
from .estimators import RFMClassifier, RFMRegressor, regression_targets
from .loop import rfm_loop

__all__ = ["ProjectedKernel", "TranslatedKernel", "source_outputs", "transfer_curves"]


def source_outputs(source, X) -> torch.Tensor:
    """The raw outputs f_s(X) of a source model as a 2-D tensor (n, c) on X's device and dtype.

    ``source`` is a :class:`rfm.KernelMachine`, an estimator with ``decision_function``-like raw outputs (an
    :class:`rfm.RFMClassifier`: its least-squares outputs before the arg-max), an estimator with ``predict``
    (:class:`rfm.RFMRegressor`, :class:`TranslatedKernel`, :class:`ProjectedKernel`), or a callable.

    Parameters
    ----------
    source : KernelMachine, estimator or callable
        The source model.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs (zero rows allowed).

    Returns
    -------
    torch.Tensor, shape (n, c)
        Detached, in X's dtype and device.

    Raises
    ------
    TypeError
        If ``source`` is none of those.
    ValueError
        If it does not return one row per row of X.
    """
    X = check_matrix(X, "X", min_rows=0)
    if isinstance(source, KernelMachine):
        out = source.predict(X.to(dtype=source.centers.dtype, device=source.centers.device)).detach()
    elif isinstance(source, RFMClassifier) and hasattr(source, "machine_"):  # raw least-squares outputs
        out = source.machine_.predict(X.to(dtype=source.machine_.centers.dtype,
                                           device=source.machine_.centers.device)).detach()
    elif hasattr(source, "predict"):
        out = source.predict(X)
    elif callable(source):
        out = source(X)
    else:
        raise TypeError(f"source must be a fitted rfm model (KernelMachine, RFMRegressor, RFMClassifier, a transferred "
                        f"kernel) or a callable, got {type(source).__name__}")
    out = torch.as_tensor(np.asarray(out) if not isinstance(out, torch.Tensor) else out)
    out = out.detach().to(device=X.device, dtype=X.dtype)
    if out.ndim == 1:
        out = out[:, None]
    if out.ndim != 2 or out.shape[0] != X.shape[0]:
        raise ValueError(f"source must return one row of outputs per row of X ({X.shape[0]}), got shape "
                         f"{tuple(out.shape)}")
    return out


class TransferStep:
    """The RFM loop's step (:mod:`rfm.models.loop`) of a transfer estimator: kernel ridge regression of targets R on
    features F (projection: F = f_s(X), R = y; translation: F = X, R = y - f_s(X)), with no feature update (the
    loop runs with ``iters=0``).

    Parameters
    ----------
    kernel : rfm.Kernel
    F, R : torch.Tensor
        Features (n, d) and targets (n, c), n >= 1.
    reg : float
        Ridge.
    """

    def __init__(self, kernel, F, R, reg):
        self.kernel, self.F, self.R, self.reg = kernel, F, R, reg

    def solve(self, M, t):
        """The kernel machine g with (K(F, F) + reg I) alpha = R."""
        K = kernel_matrix(self.kernel, self.F)
        alpha, method = solve_krr(K, self.R, self.reg, overwrite=True, check_symmetric=False)
        return KernelMachine(self.kernel, self.F, alpha), {"iteration": t, "solve": method}, None

    def score(self, record):
        """None: one solve, nothing to select."""
        return None

    def stop(self, model, history, best_iter):
        """False: one solve."""
        return False


class _TransferBase(RegressorMixin, BaseEstimator):
    def __init__(self, source, kernel="laplace", bandwidth=10.0, reg=1e-3, dtype="float64"):
        self.source = source
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.reg = reg
        self.dtype = dtype

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def _make_kernel(self):
        if self.bandwidth is None:
            return get_kernel(self.kernel)
        check_number("bandwidth", self.bandwidth, low=0, low_inclusive=False)
        if not isinstance(self.kernel, str):
            raise ValueError("bandwidth must be None when kernel is a Kernel instance (set it on the instance)")
        return get_kernel(self.kernel, bandwidth=float(self.bandwidth))

    def _fit_krr(self, F, R):
        """A kernel machine g with (K(F, F) + reg I) alpha = R (the loop with iters=0); None with no samples."""
        if F.shape[0] == 0:
            return None
        return rfm_loop(TransferStep(self._make_kernel(), F, R, float(self.reg)), None, 0).model

    def _inputs(self, X, name="X", min_rows=1, reset=False):
        if not isinstance(X, torch.Tensor):
            X = validate_data(self, X, reset=reset, dtype=[np.float64, np.float32], ensure_min_samples=min_rows)
        return check_matrix(X, name, dtype=resolve_dtype(self.dtype), min_rows=min_rows)

    def _output(self, out, X):
        if self._y_1d:
            out = out[:, 0]
        if isinstance(X, torch.Tensor):
            return out.to(device=X.device)
        return out.detach().cpu().numpy()

    def _check_fit(self, X, y, min_rows=0):
        check_number("reg", self.reg, low=0)
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None.")
        Xt = self._inputs(X, min_rows=min_rows, reset=True)
        Y = regression_targets(y, Xt.shape[0], dtype=Xt.dtype, device=Xt.device)
        self.n_features_in_ = Xt.shape[1]
        self.n_outputs_ = Y.shape[1]
        self._y_1d = (y.ndim if isinstance(y, torch.Tensor) else np.asarray(y).ndim) == 1
        return Xt, Y

    def _check_predict(self, X):
        check_is_fitted(self, "n_outputs_")
        Xt = self._inputs(X, min_rows=0)
        if Xt.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {Xt.shape[1]} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input.")
        return Xt


class TranslatedKernel(_TransferBase):
    r"""Translation: f_t(x) = f_s(x) + h(x), with h the kernel ridge regression of the residuals y - f_s(x).

    Parameters
    ----------
    source : fitted rfm model or callable
        The source predictor f_s (see :func:`source_outputs`); its outputs and the targets y must have the same
        number of columns.
    kernel : str or Kernel, default "laplace"
        The correction kernel, on the target inputs.
    bandwidth : float or None, default 10.0
        The kernel's bandwidth (None: the kernel's default, or the instance's own).
    reg : float, default 1e-3
        Ridge of the correction (0: interpolate the residuals, the authors' code).
    dtype : str, default "float64"
        Working precision.

    Attributes
    ----------
    correction_ : KernelMachine or None
        h (None when fitted on no samples: then f_t = f_s).
    n_features_in_, n_outputs_ : int

    Examples
    --------
    >>> import torch
    >>> from rfm.models.transfer import TranslatedKernel
    >>> src = lambda X: X[:, :1]                     # a source predicting the first coordinate
    >>> X = torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    >>> TranslatedKernel(src, reg=0.0).fit(X, torch.tensor([[0.5], [2.0]], dtype=torch.float64)).predict(X)
    tensor([[0.5000],
            [2.0000]], dtype=torch.float64)
    """

    def fit(self, X, y):
        """Fit the correction h to the residuals y - f_s(X).

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (n_samples, n_features)
            Target inputs (no rows: h = 0, the source predictor itself).
        y : array-like or torch.Tensor, shape (n_samples,) or (n_samples, n_outputs)
            Targets in the source's output space.

        Returns
        -------
        self
        """
        Xt, Y = self._check_fit(X, y)
        if Xt.shape[0] == 0:          # no target data: the source predictor itself
            self.correction_ = None
            return self
        Fs = source_outputs(self.source, Xt)
        if Fs.shape[1] != Y.shape[1]:
            raise ValueError(f"y has {Y.shape[1]} output(s) but the source predicts {Fs.shape[1]}: translation needs "
                             "targets in the source's output space (use ProjectedKernel for other labels)")
        self.correction_ = self._fit_krr(Xt, Y - Fs)
        return self

    def predict(self, X):
        """f_s(X) + h(X).

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (n_samples, n_features)

        Returns
        -------
        torch.Tensor or numpy.ndarray
            (n_samples,) for 1-D training targets, else (n_samples, n_outputs); a tensor for tensor input.
        """
        Xt = self._check_predict(X)
        out = source_outputs(self.source, Xt)
        if out.shape[1] != self.n_outputs_:
            raise ValueError(f"the source predicts {out.shape[1]} output(s) but y had {self.n_outputs_}")
        if self.correction_ is not None:
            out = out + self.correction_.predict(Xt).detach()
        return self._output(out, X)


class ProjectedKernel(_TransferBase):
    r"""Projection: f_t(x) = g(f_s(x)), with g the kernel ridge regression of y on the source outputs f_s(x).

    Parameters
    ----------
    source : fitted rfm model or callable
        The source predictor f_s (see :func:`source_outputs`); the targets may have any number of outputs.
    kernel, bandwidth, reg, dtype
        As for :class:`TranslatedKernel` (the kernel acts on the source outputs).

    Attributes
    ----------
    projection_ : KernelMachine
        g, whose centres are the source outputs of the target training points.
    n_features_in_, n_outputs_ : int
    """

    def fit(self, X, y):
        """Fit g to the targets y on the source outputs f_s(X).

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (n_samples, n_features)
            Target inputs (at least one row).
        y : array-like or torch.Tensor, shape (n_samples,) or (n_samples, n_outputs)
            Targets (any number of outputs).

        Returns
        -------
        self
        """
        Xt, Y = self._check_fit(X, y, min_rows=1)
        self.projection_ = self._fit_krr(source_outputs(self.source, Xt), Y)
        return self

    def predict(self, X):
        """g(f_s(X)).

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (n_samples, n_features)

        Returns
        -------
        torch.Tensor or numpy.ndarray
            (n_samples,) for 1-D training targets, else (n_samples, n_outputs); a tensor for tensor input.
        """
        Xt = self._check_predict(X)
        F = source_outputs(self.source, Xt).to(self.projection_.centers.dtype)
        return self._output(self.projection_.predict(F).detach(), X)


METHODS = ("baseline", "direct", "translated", "projected")


def transfer_curves(source, X_pool, y_pool, X_test, y_test, n_targets, *, draws: int = 5, kernel="laplace",
                    bandwidth=10.0, reg=1e-3, projection_kernel="laplace", projection_bandwidth=10.0,
                    n_classes=None, generator=0) -> dict:
    """Test accuracy against the number of target samples for the four predictors of the paper's comparisons.

    For each n_t in ``n_targets`` and each of ``draws`` random subsets of n_t rows of the target pool
    (``X_pool``, ``y_pool``; integer labels, fitted as one-hot least-squares targets):

    * ``baseline``   -- kernel ridge regression on the n_t target samples alone (``kernel``, ``bandwidth``, ``reg``);
    * ``direct``     -- the source predictor applied to the target test set (no target data);
    * ``translated`` -- :class:`TranslatedKernel` (the same kernel as the baseline for the correction);
    * ``projected``  -- :class:`ProjectedKernel` (``projection_kernel`` on the source outputs).

    Returns a dict of float64 arrays of shape (len(n_targets), draws), one per method (``direct`` is constant),
    plus ``n_targets``. An n_t of 0 gives the baseline chance-level zero predictions and projection NaN.

    Parameters
    ----------
    source : KernelMachine, estimator or callable
        The source model (:func:`source_outputs`).
    X_pool : array-like, shape (N, d)
        The target pool (float64).
    y_pool : array-like of int, shape (N,)
        Its labels.
    X_test : array-like, shape (m, d)
        The target test set.
    y_test : array-like of int, shape (m,)
        Its labels.
    n_targets : sequence of int
        Numbers of target samples, each in [0, N].
    draws : int, default 5
        Random subsets per number.
    kernel, bandwidth, reg
        The baseline's (and the translated predictor's correction) kernel, bandwidth and ridge.
    projection_kernel, projection_bandwidth
        The kernel on the source outputs of :class:`ProjectedKernel`.
    n_classes : int, optional
        The number of classes (default: the largest label + 1).
    generator : int or torch.Generator, default 0
        Seeds the subsets.

    Returns
    -------
    dict
        ``"baseline"``, ``"direct"``, ``"translated"``, ``"projected"``: float64 arrays (len(n_targets), draws) of
        test accuracies; ``"n_targets"``: the numbers.

    Raises
    ------
    ValueError
        If a label array does not match its inputs, or an entry of n_targets is out of range.
    """
    X_pool = check_matrix(X_pool, "X_pool", dtype=torch.float64)
    X_test = check_matrix(X_test, "X_test", dtype=torch.float64, device=X_pool.device)
    y_pool = torch.as_tensor(np.asarray(y_pool)).long().reshape(-1)
    y_test = torch.as_tensor(np.asarray(y_test)).long().reshape(-1)
    if len(y_pool) != len(X_pool) or len(y_test) != len(X_test):
        raise ValueError("y_pool and y_test must have one label per row of X_pool and X_test")
    c = int(max(y_pool.max(), y_test.max())) + 1 if n_classes is None else int(n_classes)
    Y_pool = torch.nn.functional.one_hot(y_pool, c).to(torch.float64).to(X_pool.device)
    ns = [int(check_number("n_targets entry", n, low=0, high=len(X_pool), integer=True)) for n in n_targets]
    check_number("draws", draws, low=1, integer=True)
    g = make_generator(generator)
    acc = lambda out: float((out.argmax(1).cpu() == y_test).double().mean())
    res = {m: np.full((len(ns), draws), np.nan) for m in METHODS}
    direct = acc(source_outputs(source, X_test))
    base_kernel = get_kernel(kernel) if bandwidth is None else get_kernel(kernel, bandwidth=float(bandwidth))
    for i, n in enumerate(ns):
        for j in range(draws):
            idx = torch.randperm(len(X_pool), generator=g)[:n].to(X_pool.device)
            X, Y = X_pool[idx], Y_pool[idx]
            res["direct"][i, j] = direct
            res["translated"][i, j] = acc(TranslatedKernel(source, base_kernel, None, reg).fit(X, Y).predict(X_test))
            if n == 0:
                res["baseline"][i, j] = acc(torch.zeros(len(X_test), c))
                continue
            base = RFMRegressor(kernel=base_kernel, bandwidth=None, reg=reg, iters=0, dtype="float64",
                                device=X_pool.device).fit(X, Y)
            res["baseline"][i, j] = acc(base.predict(X_test))
            res["projected"][i, j] = acc(ProjectedKernel(source, projection_kernel, projection_bandwidth, reg)
                                         .fit(X, Y).predict(X_test))
    res["n_targets"] = np.asarray(ns)
    return res
