r"""Recursive Feature Machines as scikit-learn estimators.

The loop (Radhakrishnan, Beaglehole, Pandit & Belkin, Science 2024), for t = 0, 1, ..., iters:

1. solve   (K_{M_t}(X, X) + reg I) alpha_t = Y                    kernel ridge regression with the metric M_t
2. record  train/validation metrics of f_t(z) = K_{M_t}(z, X) alpha_t
3. update  M_{t+1} = normalize(AGOP(f_t)^agop_power)               (skipped after the last solve)

Step 3 is pluggable (``update``): ``"agop"`` (the default, above), the FACT-RFM updates of Boix-Adsera et al.
(``"fact"``: M = normalize((F F^T)^{1/2}), ``"fact_geometric"``: M = normalize((F M_t^2 F^T)^{1/4}), with F the
kernel FACT of f_t, :mod:`rfm.core.fact`), or a callable ``update(machine, M_t) -> S`` returning a symmetric PSD
(d, d) matrix (or a (d,) diagonal), after which M = normalize(S^agop_power).

with M_0 = I (or ``M_init``). ``iters`` counts feature updates, so ``iters=0`` is plain kernel ridge regression and
the history holds ``iters + 1`` records. Conventions, all explicit parameters: ``agop_power`` (1 in the Science
paper and xRFM, 1/2 in the grokking paper), ``normalize`` ("max" in the RFM package and xRFM, None in the grokking
and Science numpy code), ``center`` (gradients centred per output over all evaluation points), ``max_agop_points``
(a seeded uniform random subset of the training points; all of them when n is smaller).

The loop itself is :func:`rfm.models.loop.rfm_loop`, the one RFM loop of the package; :class:`KernelStep` is what
it runs for these estimators. Each iterate is a :class:`rfm.KernelMachine`; the fitted one is ``model.machine_``.
Arrays in give arrays out (float32 input stays float32, other input comes back float64); torch tensors in give
tensors out, on their device and differentiable.
"""
from __future__ import annotations

import copy
import numbers
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_consistent_length, check_is_fitted, column_or_1d, validate_data

from .._checks import (
    DegenerateAGOPError,
    check_choice,
    check_label_types,
    check_matrix,
    check_number,
    check_numeric_input,
    check_targets,
    resolve_dtype,
)
from ..core.coincident import find_pairs
from ..core.fact import UPDATES, fact_update_target, kernel_fact
from ..core.feature_matrix import NORMALIZATIONS, FeatureMatrix, as_feature_matrix, feature_matrix_from_agop
from ..core.kernels import Kernel, get_kernel, kernel_matrix
from ..core.machine import KernelMachine
from ..core.solvers import get_solver
from ..metrics import r2_score
from ..nets.classifier import decode_label_codes, label_codes
from ..utils import get_device, make_generator, to_numpy
from .loop import rfm_loop

_DEFAULT_BANDWIDTH = 10.0


class _BaseRFM(BaseEstimator):
    def __init__(self, kernel="laplace", bandwidth=None, exponent=None, reg=1e-3, iters=5, agop_power=1.0,
                 center=False, normalize="max", diag=False, rank=None, M_init=None, max_agop_points=20_000,
                 solver="auto", mem_gb=None, device=None, dtype="float32", random_state=0, callback=None,
                 verbose=False, update="agop", centre="deprecated"):
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.exponent = exponent
        self.reg = reg
        self.iters = iters
        self.agop_power = agop_power
        self.center = center
        self.normalize = normalize
        self.diag = diag
        self.rank = rank
        self.M_init = M_init
        self.max_agop_points = max_agop_points
        self.solver = solver
        self.mem_gb = mem_gb
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.callback = callback
        self.verbose = verbose
        self.update = update
        self.centre = centre

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags

    # -- parameters ------------------------------------------------------------------------------------------------
    def _make_kernel(self) -> Kernel:
        if isinstance(self.kernel, Kernel):
            if self.bandwidth is not None or self.exponent is not None:
                raise ValueError(
                    f"kernel is a {type(self.kernel).__name__} instance, which carries its own parameters; leave "
                    "bandwidth and exponent as None, or pass kernel by name (e.g. kernel='laplace', bandwidth=5) "
                    "so that a grid search over them takes effect")
            return self.kernel
        if not isinstance(self.kernel, str):
            raise TypeError(f"kernel must be a name ('laplace', 'gaussian', 'quadratic', 'polynomial') or a "
                            f"rfm.Kernel instance, got {self.kernel!r}")
        params = {"bandwidth": _DEFAULT_BANDWIDTH if self.bandwidth is None else self.bandwidth}
        if self.kernel.lower() == "laplace":
            params["exponent"] = 1.0 if self.exponent is None else self.exponent
        elif self.exponent is not None:
            raise ValueError(f"exponent applies to the laplace kernel only; got exponent={self.exponent!r} "
                             f"with kernel={self.kernel!r}")
        return get_kernel(self.kernel, **params)

    def _check_params(self, d):
        check_number("reg", self.reg, low=0)
        check_number("iters", self.iters, low=0, integer=True)
        check_number("agop_power", self.agop_power, low=0, low_inclusive=False)
        check_choice("normalize", self.normalize, NORMALIZATIONS)
        if self.max_agop_points is not None:
            check_number("max_agop_points", self.max_agop_points, low=1, integer=True)
        if self.rank is not None:
            check_number("rank", self.rank, low=1, high=d, integer=True)
            if self.diag:
                raise ValueError("diag=True and rank are exclusive: a diagonal M has no low-rank factor")
        if self.mem_gb is not None:
            check_number("mem_gb", self.mem_gb, low=0, low_inclusive=False)
        if self.callback is not None and not callable(self.callback):
            raise TypeError(f"callback must be callable as callback(model, record), got {self.callback!r}")
        if not callable(self.update):
            if not isinstance(self.update, str):
                raise TypeError(f"update must be one of {list(UPDATES)} or a callable update(machine, M) -> S, got "
                                f"{self.update!r}")
            check_choice("update", self.update, UPDATES)
            if self.update != "agop":
                if self.agop_power != 1.0:
                    raise ValueError(f"update={self.update!r} carries its own exponent; agop_power applies to the "
                                     f"AGOP and to a callable update only: leave it at 1.0 (got {self.agop_power!r})")
        rs = self.random_state
        if not (rs is None or isinstance(rs, np.random.RandomState)
                or (isinstance(rs, numbers.Integral) and not isinstance(rs, bool))):
            raise TypeError(f"random_state must be None, an int >= 0 or a numpy RandomState, got {rs!r}")
        if isinstance(rs, numbers.Integral):
            check_number("random_state", rs, low=0, integer=True)
        return get_solver(self.solver)

    def _generator(self) -> torch.Generator:
        return torch_generator(self.random_state)

    def _mem_bytes(self):
        return None if self.mem_gb is None else int(self.mem_gb * 2**30)

    # -- inputs ----------------------------------------------------------------------------------------------------
    def _check_X(self, X, *, reset: bool, dtype, device, name="X"):
        """X as a tensor (dtype, device), and the numpy dtype outputs should have for this input."""
        if isinstance(X, torch.Tensor):
            Xt = check_matrix(X, name, dtype=dtype, device=device)
            if reset:
                self.n_features_in_ = Xt.shape[1]
                if hasattr(self, "feature_names_in_"):
                    del self.feature_names_in_
            elif Xt.shape[1] != self.n_features_in_:
                raise ValueError(f"{name} has {Xt.shape[1]} features, but {type(self).__name__} is expecting "
                                 f"{self.n_features_in_} features as input.")
            return Xt, None
        check_numeric_input(X, name)
        if name == "X":
            arr = validate_data(self, X, reset=reset, dtype=[np.float64, np.float32], ensure_min_samples=1)
        else:
            arr = check_array(X, dtype=[np.float64, np.float32], input_name=name)
            if arr.shape[1] != self.n_features_in_:
                raise ValueError(f"{name} has {arr.shape[1]} features, but {type(self).__name__} is expecting "
                                 f"{self.n_features_in_} features as input.")
        out_dtype = arr.dtype
        return check_matrix(arr, name, dtype=dtype, device=device), out_dtype

    @staticmethod
    def _output(out: torch.Tensor, X, np_dtype):
        if isinstance(X, torch.Tensor):
            return out.to(device=X.device, dtype=X.dtype if X.is_floating_point() else out.dtype)
        return out.detach().cpu().numpy().astype(np_dtype, copy=False)

    # -- the loop --------------------------------------------------------------------------------------------------
    def fit(self, X, y, X_val=None, y_val=None):
        """Run the RFM loop (:func:`rfm.models.loop.rfm_loop`).

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (n_samples, n_features)
        y : array-like or torch.Tensor, shape (n_samples,) or (n_samples, n_outputs)
            Regression targets, or class labels for the classifier.
        X_val, y_val : optional
            Validation data: every iteration is scored on it and the best one is kept (``best_iter_``).

        Returns
        -------
        self
        """
        step = KernelStep(self, X, y, X_val, y_val)
        res = rfm_loop(step, step.M0, self.iters, verbose=self.verbose, desc=type(self).__name__)
        self._set_fitted(res.model, res.history, res.best_iter, step.fitted)
        return self

    def _center(self) -> bool:
        """``center``, or the deprecated ``centre`` when it is given."""
        if isinstance(self.centre, str) and self.centre == "deprecated":
            return self.center
        warnings.warn(f"{type(self).__name__}: the parameter centre was renamed center (the package spells "
                      "identifiers the American way); centre will be removed in the next release",
                      DeprecationWarning, stacklevel=4)
        return self.centre

    def _snapshot(self, fm):
        """M for the records and ``M_``: with ``diag``, the identity of iteration 0 as a vector of ones too (its
        dense (d, d) form would take 6 GB for a 96 x 96 x 3 image)."""
        if self.diag and fm.kind == "identity":
            return torch.ones(fm.dim, dtype=torch.float64)
        return fm.snapshot()

    def _set_fitted(self, machine, history, best_iter, fitted):
        """All fitted state, assigned at once (at the end of a successful fit, or on a callback's view)."""
        self.machine_ = machine
        self.kernel_ = machine.kernel
        self.feature_matrix_ = machine.fm
        self.M_ = self._snapshot(machine.fm)
        self.history_ = history
        self.best_iter_ = best_iter
        for key, value in fitted.items():
            setattr(self, key, value)

    # -- fitted views ----------------------------------------------------------------------------------------------
    @property
    def alpha_(self) -> torch.Tensor:
        """The coefficients of the fitted predictor, shape (n_samples, n_outputs)."""
        check_is_fitted(self, "machine_")
        return self.machine_.alpha

    @property
    def X_fit_(self) -> torch.Tensor:
        """The training points (the predictor's centres), as a tensor."""
        check_is_fitted(self, "machine_")
        return self.machine_.centers

    def __sklearn_is_fitted__(self):
        return hasattr(self, "machine_")

    # -- inference -------------------------------------------------------------------------------------------------
    def _prepare(self, X, name="X"):
        check_is_fitted(self, "machine_")
        m = self.machine_
        return self._check_X(X, reset=False, dtype=m.centers.dtype, device=m.centers.device, name=name)

    def _raw(self, X):
        Xt, np_dtype = self._prepare(X)
        return self.machine_.predict(Xt), np_dtype

    def agop(self, X=None, *, center=None, diag=None, centre=None):
        """Closed-form AGOP of the fitted predictor at the rows of ``X`` (default: the training points), as the raw
        mean (no power, no normalisation).

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (m, n_features), optional
            Evaluation points (default: the training points).
        center, diag : bool or None, default None
            Centre the gradients per output, keep the diagonal only (None: as fitted).
        centre : bool or None, default None
            Deprecated spelling of ``center``.

        Returns
        -------
        torch.Tensor or numpy.ndarray
            float64 (d, d), or (d,) with ``diag``; a tensor when ``X`` is None or a tensor, else a numpy array.
        """
        check_is_fitted(self, "machine_")
        if centre is not None:
            warnings.warn("agop(centre=...) was renamed agop(center=...); centre will be removed in the next "
                          "release", DeprecationWarning, stacklevel=2)
            center = centre if center is None else center
        if center is None:
            center = self.center if isinstance(self.centre, str) and self.centre == "deprecated" else self.centre
        Z = None if X is None else self._prepare(X)[0].detach()
        A = self.machine_.agop(Z, center=center, diag=self.diag if diag is None else diag)
        return A if X is None or isinstance(X, torch.Tensor) else A.cpu().numpy()

    def fact(self):
        """The kernel FACT (1/n) sum_i sum_c alpha_ic grad f_c(x_i) x_i^T of the fitted predictor over its training
        points (:func:`rfm.core.fact.kernel_fact`), float64 (d, d), not symmetric in general."""
        check_is_fitted(self, "machine_")
        return kernel_fact(self.machine_)

    def gradients(self, X):
        """Per-point input gradients of the raw outputs, shape (n_samples, n_outputs, n_features)."""
        Xt, np_dtype = self._prepare(X)
        return self._output(self.machine_.gradients(Xt.detach()), X, np_dtype)


class KernelStep:
    """The RFM loop's step (:mod:`rfm.models.loop`) for a kernel machine: kernel ridge regression with the metric M
    by the estimator's solver, metrics on the training (and validation) data, the AGOP, FACT or a callable update,
    and M = normalize(A^power).

    Parameters
    ----------
    model : RFMRegressor or RFMClassifier
        The estimator whose parameters the step follows (validated here, as ``fit`` starts).
    X, y, X_val, y_val
        As for ``fit``.

    Attributes
    ----------
    M0 : rfm.FeatureMatrix
        The initial feature matrix.
    fitted : dict
        Fitted attributes the targets define (``classes_`` or ``_y_1d``).
    """

    def __init__(self, model, X, y, X_val=None, y_val=None):
        if y is None:
            raise ValueError(f"{type(model).__name__} requires y to be passed, but the target y is None.")
        self.model = model
        kernel = model._make_kernel()
        dtype, device = resolve_dtype(model.dtype), get_device(model.device)
        X = model._check_X(X, reset=True, dtype=dtype, device=device)[0].detach()
        n, d = X.shape
        self.solver = model._check_params(d)
        _warn_if_reg_ignored(self.solver, model.reg, type(model).__name__)
        self.center = model._center()
        if self.center and not (callable(model.update) or model.update == "agop"):
            raise ValueError(f"center=True centres the AGOP's gradients; it has no meaning for "
                             f"update={model.update!r}: set center=False")
        self.Y, self.fitted = model._encode_fit_targets(y, n, dtype, device)
        if (X_val is None) != (y_val is None):
            raise ValueError("X_val and y_val must be given together")
        self.val = None
        if X_val is not None:
            X_val = model._check_X(X_val, reset=False, dtype=dtype, device=device, name="X_val")[0].detach()
            Y_val = model._encode_targets(y_val, X_val.shape[0], dtype, device, "y_val", self.fitted)
            self.val = (X_val, Y_val, find_pairs(X_val, X) if kernel.radial else None)
        M0 = FeatureMatrix.identity(d) if model.M_init is None else as_feature_matrix(model.M_init, d)
        self.X, self.kernel, self.device, self.M0 = X, kernel, device, M0.to(device=device)
        self.generator, self.mem = model._generator(), model._mem_bytes()
        self.pairs = find_pairs(X) if kernel.radial else None  # (i, i), and duplicated rows

    def solve(self, fm, t):
        """Kernel ridge regression with M_t; the record of its metrics; K(X, X) when the solver kept it intact.

        Parameters
        ----------
        fm : FeatureMatrix
            M_t.
        t : int
            The iteration.

        Returns
        -------
        machine : KernelMachine
            The fitted predictor f_t.
        record : dict
            ``"iteration"``, ``"solver"``, the solver's info, the training (and validation) metrics and ``"M"``.
        K : torch.Tensor, shape (n, n), or None
            K(X, X) when the solver kept it intact (the AGOP reuses it).
        """
        m = self.model
        Xt = fm.transform(self.X)
        _check_finite_transform(Xt)
        res = self.solver.solve(self.kernel, Xt, self.Y, m.reg, pairs=self.pairs, mem_bytes=self.mem)
        _warn_if_saturated(self.kernel, Xt, res.K, type(m).__name__)
        machine = KernelMachine.from_iterate(self.kernel, self.X, Xt, res.alpha, fm, mem_bytes=self.mem)
        train_pred = res.train_pred if res.train_pred is not None else machine.predict(self.X, pairs=self.pairs)
        record = {"iteration": t, "solver": res.method, **(res.info or {}),
                  **m._metrics(self.Y, train_pred, "train", self.fitted)}
        if self.val is not None:
            X_val, Y_val, val_pairs = self.val
            record.update(m._metrics(Y_val, machine.predict(X_val, pairs=val_pairs).detach(), "val", self.fitted))
        record["M"] = m._snapshot(fm)
        return machine, record, res.K  # K(X, X) when the solver kept it intact: the AGOP reuses it

    def score(self, record):
        """The validation score (None without validation data: the last iterate is kept).

        Parameters
        ----------
        record : dict
            An iterate's record.

        Returns
        -------
        float, tuple or None
            Larger is better: -val_mse (regressor), (val_acc, -val_mse) (classifier), or None.
        """
        return None if "val_mse" not in record else self.model._selection_score(record)

    def stop(self, machine, history, best_iter) -> bool:
        """Call the callback on a view of the model fitted to the current iterate; True means stop.

        Parameters
        ----------
        machine : KernelMachine
            The current iterate.
        history : list of dict
            The records so far, the current one last.
        best_iter : int
            The best iteration so far (unused: the view is fitted to the current iterate).

        Returns
        -------
        bool
            False without a callback.
        """
        m = self.model
        if m.callback is None:
            return False
        view = copy.copy(m)
        view._set_fitted(machine, history, history[-1]["iteration"], self.fitted)
        return bool(m.callback(view, history[-1]))

    def agop(self, machine, fm, K):
        """The matrix that the update maps to M: the AGOP, the FACT-RFM target, or the callable's output.

        Parameters
        ----------
        machine : KernelMachine
            The current iterate.
        fm : FeatureMatrix
            M_t.
        K : torch.Tensor, shape (n, n), or None
            K(X, X), when kept by the solve.

        Returns
        -------
        torch.Tensor, float64, shape (d, d) (or (d,) with ``diag`` and the AGOP update)
        """
        m = self.model
        if callable(m.update):
            S = m.update(machine, fm.dense(device=self.device))
            if not isinstance(S, torch.Tensor):
                S = torch.as_tensor(np.asarray(S, dtype=np.float64))
            return S.detach().to(device=self.device, dtype=torch.float64)
        if m.update == "agop":
            return machine.agop(center=self.center, diag=m.diag, max_points=m.max_agop_points,
                                generator=self.generator, pairs=self.pairs, K=K)
        M = fm.dense(device=self.device) if m.update == "fact_geometric" else None
        return fact_update_target(m.update, machine, M, pairs=self.pairs)

    def update(self, A, fm, t):
        """M = normalize(A^agop_power) (power 1 for the FACT updates); a degenerate A keeps M and stops.

        Parameters
        ----------
        A : torch.Tensor, shape (d, d) or (d,)
            The output of :meth:`agop`.
        fm : FeatureMatrix
            M_t.
        t : int
            The iteration.

        Returns
        -------
        fm_next : FeatureMatrix
            M_{t+1} (M_t for a degenerate A, with a RuntimeWarning).
        stop : bool
            True when A was degenerate.
        """
        m = self.model
        power = m.agop_power if (callable(m.update) or m.update == "agop") else 1.0
        try:
            return feature_matrix_from_agop(A, power=power, normalize=m.normalize, diag=m.diag,
                                            rank=m.rank).to(device=self.device), False
        except DegenerateAGOPError as exc:
            warnings.warn(f"{type(m).__name__}: {exc}. M is kept as it was and the loop stops after iteration "
                          f"{t} (further iterations would repeat the same solve).", RuntimeWarning, stacklevel=4)
            return fm, True


class RFMRegressor(RegressorMixin, _BaseRFM):
    """Recursive Feature Machine for regression.

    Parameters
    ----------
    kernel : {"laplace", "gaussian", "quadratic", "polynomial"} or rfm.Kernel, default "laplace"
        The kernel; an instance carries its own bandwidth (then leave ``bandwidth`` and ``exponent`` as None).
    bandwidth : float or None, default None
        Kernel bandwidth L > 0; None means 10.
    exponent : float or None, default None
        Laplace exponent q in (0, 2]; None means 1 (the RFM papers' kernel).
    reg : float, default 1e-3
        Ridge (>= 0; 0 interpolates).
    iters : int, default 5
        Number of feature updates (>= 0); ``iters=0`` is kernel ridge regression.
    agop_power : float, default 1.0
        M = AGOP^agop_power.
    center : bool, default False
        Centre the gradients per output before the outer products.
    normalize : {None, "max", "trace", "fro"}, default "max"
        How M is scaled after each update.
    diag : bool, default False
        Keep only diag(M).
    rank : int or None, default None
        Keep a rank-``rank`` factor of M.
    M_init : array-like of shape (d, d) or (d,), or None, default None
        Initial feature matrix (PSD; default the identity).
    max_agop_points : int or None, default 20000
        AGOP evaluation points (a seeded random subset of the training points when n is larger).
    solver : {"auto", "cholesky", "lu", "lstsq"} or solver object, default "auto"
        How each kernel ridge regression is solved (:func:`rfm.core.solvers.get_solver`).
    mem_gb : float or None, default None
        Working-memory budget for kernel blocks (default 1 GiB on a CPU, a quarter of the free GPU memory).
    device : str, torch.device or None, default None
        None means CUDA when present, else the CPU.
    dtype : {"float32", "float64"}, default "float32"
        The dtype of the computation.
    random_state : int, numpy RandomState or None, default 0
        Seed for the AGOP sample (None: drawn from numpy's global state).
    callback : callable or None, default None
        ``callback(model, record)`` after each solve, on a view of the model fitted to the current iterate; may
        return True to stop.
    verbose : bool, default False
        Show a progress bar.
    update : {"agop", "fact", "fact_geometric"} or callable, default "agop"
        The feature update (step 3 of the loop): the AGOP, the FACT-RFM update M = (F F^T)^{1/2} or its
        geometric-mean variant M = (F M^2 F^T)^{1/4} (F the kernel FACT, :mod:`rfm.core.fact`; these ignore
        ``agop_power`` and ``max_agop_points`` and refuse ``center``), or ``update(machine, M) -> S`` (S symmetric
        PSD, then M = normalize(S^agop_power)).
    centre : bool or "deprecated", default "deprecated"
        Deprecated spelling of ``center`` (used when given, with a DeprecationWarning).

    Attributes
    ----------
    machine_ : rfm.KernelMachine
        The fitted predictor (the best iteration with validation data, else the last).
    M_ : torch.Tensor
        Its feature matrix (float64 (d, d), or the diagonal vector with ``diag=True``).
    history_ : list of dict
        One record per iteration: metrics, solver, M, time.
    best_iter_ : int
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from rfm import RFMRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((300, 5))
    >>> y = X[:, 0] * X[:, 1]
    >>> model = RFMRegressor(iters=3, bandwidth=5.0).fit(X[:250], y[:250])
    >>> model.predict(X[250:]).shape
    (50,)
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def _encode_fit_targets(self, y, n, dtype, device):
        Y = self._encode_targets(y, n, dtype, device, "y", None)
        one_d = (y.ndim if isinstance(y, torch.Tensor) else np.asarray(y).ndim) == 1
        return Y, {"_y_1d": one_d}

    def _encode_targets(self, y, n, dtype, device, name, fitted):
        return regression_targets(y, n, name=name, dtype=dtype, device=device)

    @staticmethod
    def _metrics(Y, pred, split, fitted=None):
        r2 = r2_score(Y, pred) if Y.shape[0] > 1 else float("nan")  # R^2 of one sample is undefined
        return {f"{split}_mse": float((Y - pred).square().mean()), f"{split}_r2": r2}

    @staticmethod
    def _selection_score(record):
        return -record["val_mse"]

    def predict(self, X):
        """Predictions, shape (n_samples,) or (n_samples, n_outputs); numpy in, numpy out; torch in, torch out
        (differentiable).

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (n_samples, n_features)
            Samples.

        Returns
        -------
        numpy.ndarray or torch.Tensor, shape (n_samples,) or (n_samples, n_outputs)
            (n_samples,) when the model was fitted to a 1-D y; numpy in X's floating dtype (float64 for other
            input), or a tensor in X's dtype and device.
        """
        out, np_dtype = self._raw(X)
        if self._y_1d:
            out = out[:, 0]
        return self._output(out, X, np_dtype)

    def score(self, X, y, sample_weight=None):
        """R^2 of the predictions (averaged uniformly over outputs); with ``sample_weight``, the weighted R^2 of
        ``sklearn.metrics.r2_score``.

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (n_samples, n_features)
            Samples.
        y : array-like or torch.Tensor, shape (n_samples,) or (n_samples, n_outputs)
            Targets.
        sample_weight : array-like, shape (n_samples,), optional
            Weights.

        Returns
        -------
        float
        """
        pred = to_numpy(self.predict(X.detach() if isinstance(X, torch.Tensor) else X)).astype(np.float64)
        if sample_weight is not None:
            return _weighted_score(to_numpy(y).astype(np.float64), pred, sample_weight, "r2")
        return r2_score(to_numpy(y).astype(np.float64), pred)


class RFMClassifier(ClassifierMixin, _BaseRFM):
    """Recursive Feature Machine for classification by least squares on label codes.

    Two classes are coded as one column (0/1), more as one-hot columns. ``decision_function`` is the raw output
    minus 1/2 for two classes (positive means ``classes_[1]``, as scikit-learn expects) and the raw outputs for
    more; ``predict`` takes its sign or the arg-max; ``predict_proba`` clips the outputs to [1e-3, 1] and
    renormalises each row. The best iteration (with validation data) is the one of highest validation accuracy.

    Parameters
    ----------
    kernel, bandwidth, exponent, reg, iters, agop_power, center, normalize, diag, rank, M_init, max_agop_points
        As in :class:`RFMRegressor` (the same names, defaults and meanings).
    solver, mem_gb, device, dtype, random_state, callback, verbose, update
        As in :class:`RFMRegressor`.
    centre : bool or "deprecated", default "deprecated"
        Deprecated name of ``center`` (used when given, with a DeprecationWarning).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    machine_, M_, history_, best_iter_, n_features_in_ : as :class:`RFMRegressor`

    Examples
    --------
    >>> import numpy as np
    >>> from rfm import RFMClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((300, 5))
    >>> y = np.where(X[:, 0] > 0, "pos", "neg")
    >>> clf = RFMClassifier(iters=2, bandwidth=5.0).fit(X[:250], y[:250])
    >>> clf.score(X[250:], y[250:]) > 0.9
    True
    """

    def _encode_fit_targets(self, y, n, dtype, device):
        classes, labels = class_labels(y, n)
        fitted = {"classes_": classes}
        return self._encode_targets(labels, n, dtype, device, "y", fitted), fitted

    def _encode_targets(self, y, n, dtype, device, name, fitted):
        codes = class_indices(y, n, fitted["classes_"], name=name)
        return label_codes(torch.as_tensor(codes, device=device), len(fitted["classes_"]), dtype=dtype)

    @staticmethod
    def _codes(raw):
        return decode_label_codes(raw)

    def _metrics(self, Y, pred, split, fitted=None):
        truth = self._codes(Y)
        return {f"{split}_acc": float((self._codes(pred) == truth).double().mean()),
                f"{split}_mse": float((Y - pred).square().mean())}

    @staticmethod
    def _selection_score(record):
        return (record["val_acc"], -record["val_mse"])

    def decision_function(self, X):
        """Raw least-squares output minus 1/2, shape (n_samples,), for two classes (positive: ``classes_[1]``);
        the raw outputs, shape (n_samples, n_classes), for more.

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (n_samples, n_features)
            Samples.

        Returns
        -------
        numpy.ndarray or torch.Tensor, shape (n_samples,) or (n_samples, n_classes)
            numpy for array input, a tensor on X's device for tensor input.
        """
        out, np_dtype = self._raw(X)
        return self._output(out[:, 0] - 0.5 if out.shape[1] == 1 else out, X, np_dtype)

    def predict(self, X):
        """Class labels, shape (n_samples,); a tensor on X's device for tensor input with numeric labels.

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (n_samples, n_features)
            Samples.

        Returns
        -------
        numpy.ndarray or torch.Tensor, shape (n_samples,)
            Labels from ``classes_``.
        """
        out, _ = self._raw(X)
        labels = self.classes_[self._codes(out.detach()).cpu().numpy()]
        if isinstance(X, torch.Tensor) and labels.dtype.kind in "iufb":
            return torch.as_tensor(labels, device=X.device)
        return labels

    def predict_proba(self, X):
        """Class probabilities, shape (n_samples, n_classes): the outputs clipped to [1e-3, 1] and normalised.

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (n_samples, n_features)
            Samples.

        Returns
        -------
        numpy.ndarray or torch.Tensor, shape (n_samples, n_classes)
            Rows sum to 1; two classes: (1 - p, p) with p the output clipped to [1e-3, 1 - 1e-3].
        """
        raw, np_dtype = self._raw(X)
        if raw.shape[1] == 1:
            p1 = raw.clamp(1e-3, 1 - 1e-3)
            proba = torch.cat([1 - p1, p1], 1)
        else:
            proba = raw.clamp(1e-3, 1.0)
            proba = proba / proba.sum(1, keepdim=True)
        return self._output(proba, X, np_dtype)

    def score(self, X, y, sample_weight=None):
        """Mean accuracy (weighted by ``sample_weight`` when given).

        Parameters
        ----------
        X : array-like or torch.Tensor, shape (n_samples, n_features)
            Samples.
        y : array-like or torch.Tensor, shape (n_samples,)
            True labels.
        sample_weight : array-like, shape (n_samples,), optional
            Weights.

        Returns
        -------
        float
        """
        pred = self.predict(X.detach() if isinstance(X, torch.Tensor) else X)
        if sample_weight is not None:
            return _weighted_score(to_numpy(y), to_numpy(pred), sample_weight, "accuracy")
        return float(np.mean(to_numpy(pred) == to_numpy(y)))


def _check_finite_transform(Xt):
    sq = Xt.square().sum(1)
    if not bool(torch.isfinite(sq).all()):
        raise FloatingPointError(
            f"the squared norms of the (transformed) features overflow {Xt.dtype} (largest |x| about "
            f"{float(Xt.abs().max()):.3g}): scale the features (e.g. sklearn's StandardScaler) or use "
            "dtype='float64'")


# -- targets, shared by every estimator of the package -----------------------------------------------------------
def regression_targets(y, n: int, *, name: str = "y", dtype=torch.float32, device=None) -> torch.Tensor:
    """Regression targets as a finite (n, n_outputs) tensor, validated as scikit-learn does.

    Parameters
    ----------
    y : array-like or torch.Tensor, shape (n,) or (n, n_outputs)
    n : int
        The number of samples of the matching X.
    name : {"y", "y_val"}, default "y"
        The argument's name in error messages (its X is "X" or "X_val").
    dtype, device : torch dtype and device of the result

    Returns
    -------
    torch.Tensor
        (n, n_outputs); booleans of a tensor become 0/1.
    """
    x_name = "X_val" if name == "y_val" else "X"
    if isinstance(y, torch.Tensor):
        if y.dtype == torch.bool:
            y = y.to(dtype)
        return check_targets(y, n, name, dtype=dtype, device=device)
    raw = np.asarray(y)
    if raw.dtype.kind in "US":
        raise ValueError(f"{name} has dtype {raw.dtype}, which looks like class labels: use RFMClassifier "
                         "(ConvRFMClassifier for images) for classification, or convert numeric strings to float")
    arr = check_array(y, ensure_2d=False, dtype=np.float64, input_name=name, ensure_min_samples=0)
    if arr.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D (n_samples,) or 2-D (n_samples, n_outputs), got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"Found input variables with inconsistent numbers of samples: [{n}, {arr.shape[0]}] "
                         f"({name} has {arr.shape[0]} rows but {x_name} has {n})")
    return check_targets(arr, n, name, dtype=dtype, device=device)


def class_labels(y, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The sorted classes of training labels, validated as scikit-learn does (at least two classes).

    Parameters
    ----------
    y : array-like or torch.Tensor, shape (n,) or (n, 1)
        Class labels of any sortable kind (integers, strings, ...).
    n : int
        The number of samples of the matching X.

    Returns
    -------
    classes : numpy.ndarray
        ``np.unique`` of the labels.
    labels : numpy.ndarray
        The labels as a validated 1-D array.
    """
    labels = to_numpy(y)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = column_or_1d(labels, warn=True)
    if labels.ndim != 1:
        raise ValueError(f"y must be a 1-D array of class labels, got shape {labels.shape}")
    check_consistent_length(labels, np.empty(n))
    check_label_types(labels, "y")
    labels = column_or_1d(check_array(labels, ensure_2d=False, dtype=None, input_name="y", ensure_min_samples=0))
    check_classification_targets(labels)
    classes = np.unique(labels)
    if len(classes) < 2:
        raise ValueError(f"y has 1 class ({classes[0]!r}); a classifier needs at least 2 classes")
    return classes, labels


def class_indices(y, n: int, classes: np.ndarray, *, name: str = "y") -> np.ndarray:
    """The index in ``classes`` of each label.

    Parameters
    ----------
    y : array-like or torch.Tensor, shape (n,)
    n : int
        The number of labels expected.
    classes : numpy.ndarray
        The fitted classes (:func:`class_labels`).
    name : str, default "y"
        The argument's name in error messages.

    Returns
    -------
    numpy.ndarray of int
        (n,) indices into ``classes``.
    """
    labels = to_numpy(y)
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(f"{name} must be a 1-D array of {n} class labels, got shape {labels.shape}")
    unseen = np.setdiff1d(np.unique(labels), classes)
    if unseen.size:
        raise ValueError(f"{name} contains labels not seen in y: {unseen[:10].tolist()}")
    return np.searchsorted(classes, labels)


def torch_generator(random_state) -> torch.Generator:
    """The torch generator of a scikit-learn ``random_state``.

    Parameters
    ----------
    random_state : int, numpy RandomState, None or torch.Generator
        An int seeds the generator; a RandomState (or None: numpy's global state) draws its seed; a generator is
        used as it is.

    Returns
    -------
    torch.Generator
    """
    if isinstance(random_state, torch.Generator) or isinstance(random_state, numbers.Integral):
        return make_generator(random_state if isinstance(random_state, torch.Generator) else int(random_state))
    return make_generator(int(check_random_state(random_state).randint(0, 2**31 - 1)))


def _warn_if_reg_ignored(solver, reg, owner):
    """EigenPro 3 fits without a ridge (:class:`rfm.core.eigenpro.EigenPro3Solver`): say so when the user set one.
    reg = 0 asks for no ridge, which is what EigenPro 3 does, so it passes silently like the default."""
    from ..core.eigenpro import EigenPro3Solver
    if isinstance(solver, EigenPro3Solver) and reg not in (0, _BaseRFM().reg):
        warnings.warn(f"{owner}: solver='eigenpro3' ignores reg (got reg={reg!r}): EigenPro 3 fits its centres "
                      "without a ridge (the number of centres and early stopping regularise). Leave reg at its "
                      "default, or use solver='cholesky' or 'cg' for kernel ridge regression with this reg.",
                      UserWarning, stacklevel=4)


def _warn_if_saturated(kernel, Xt, K, owner):
    """Warn when K(X, X) is numerically constant: every prediction is then the same number. With K kept by the
    solver its range is read directly; otherwise, for a radial kernel, one row K(x_1, X) decides (if every point is
    at distance ~0 from x_1, all are at distance ~0 from each other). A dot-product kernel without K is not checked
    (its row at x_1 = 0 is constant for any data)."""
    n = Xt.shape[0]
    if n < 2 or Xt.requires_grad:
        return
    if K is None:
        if not kernel.radial:
            return
        first = torch.zeros(1, dtype=torch.long, device=Xt.device)
        K = kernel_matrix(kernel, Xt[:1], Xt, transformed=True, pairs=(first, first))
    top = float(K.abs().max())
    if float(K.max() - K.min()) > 2 * torch.finfo(K.dtype).eps * top:
        return
    spread = float((Xt - Xt[:1]).double().square().sum(1).max().sqrt())
    if spread == 0:
        warnings.warn(f"{owner}: all {n} training points are identical, so the kernel matrix is constant and every "
                      "prediction is the same constant", RuntimeWarning, stacklevel=4)
        return
    warnings.warn(f"{owner}: the kernel matrix is numerically constant (every entry {float(K[0, 0]):.6g} in "
                  f"{K.dtype}; the points lie within {spread:.3g} of each other, against a bandwidth of "
                  f"{getattr(kernel, 'bandwidth', float('nan')):g}): every prediction is the same constant. Scale the "
                  "features (e.g. sklearn's StandardScaler) or lower the bandwidth.", RuntimeWarning, stacklevel=4)


def _weighted_score(y, pred, sample_weight, metric):
    """``score`` with ``sample_weight``: scikit-learn's weighted R^2 or accuracy (weights >= 0, one per sample)."""
    from sklearn.metrics import accuracy_score
    from sklearn.metrics import r2_score as sk_r2_score
    from sklearn.utils.validation import _check_sample_weight
    if np.asarray(y).shape[0] != pred.shape[0]:
        raise ValueError(f"y has {np.asarray(y).shape[0]} samples but X has {pred.shape[0]}")
    w = _check_sample_weight(to_numpy(sample_weight), pred, dtype=np.float64, ensure_non_negative=True)
    if metric == "r2":
        return float(sk_r2_score(y, pred, sample_weight=w))
    return float(accuracy_score(y, pred, sample_weight=w))
