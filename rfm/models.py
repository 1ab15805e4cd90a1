r"""Recursive Feature Machines as scikit-learn estimators.

The loop (Radhakrishnan, Beaglehole, Pandit & Belkin, Science 2024), for t = 0, 1, ..., iters:

1. solve   (K_{M_t}(X, X) + reg I) alpha_t = Y                    kernel ridge regression with the metric M_t
2. record  train/validation metrics of f_t(z) = K_{M_t}(z, X) alpha_t (the training predictions come from the
           solve itself, f_t(X) = Y - reg alpha_t, exact for an exact solve: check them with ``predict`` when the
           residual matters, e.g. for reg = 0)
3. update  M_{t+1} = normalize(AGOP(f_t)^agop_power)               (skipped after the last solve)

with M_0 = I (or ``M_init``). ``iters`` counts feature updates, so ``iters=0`` is plain kernel ridge regression and
the history holds ``iters + 1`` records. Conventions, all explicit parameters: ``agop_power`` (1 in the Science
paper and xRFM, 1/2 in the grokking paper), ``normalize`` ("max" in the RFM package and xRFM, None in the grokking
and Science numpy code), ``centre`` (gradients centred per output over all evaluation points), ``max_agop_points``
(a seeded uniform random subset of the training points; all of them when n is smaller).
"""
from __future__ import annotations

import time

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from tqdm import tqdm

from ._checks import check_choice, check_matrix, check_number, check_same_features, check_targets, resolve_dtype
from .agop import (NORMALIZATIONS, feature_update, kernel_agop_transformed, kernel_gradients, normalization_scale,
                   sample_points)
from .kernels import FeatureMatrix, as_feature_matrix, coincident_pairs, get_kernel, kernel_predict, row_ids
from .metrics import r2_score
from .solvers import kernel_matrix, solve_krr
from .utils import get_device, make_generator, psd_eigh, to_numpy


class _BaseRFM(BaseEstimator):
    def __init__(self, kernel="laplace", bandwidth=10.0, exponent=1.0, reg=1e-3, iters=5, agop_power=1.0,
                 centre=False, normalize="max", diag=False, rank=None, M_init=None, max_agop_points=20_000,
                 mem_gb=None, device=None, dtype="float32", random_state=0, callback=None, verbose=False):
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.exponent = exponent
        self.reg = reg
        self.iters = iters
        self.agop_power = agop_power
        self.centre = centre
        self.normalize = normalize
        self.diag = diag
        self.rank = rank
        self.M_init = M_init
        self.max_agop_points = max_agop_points
        self.mem_gb = mem_gb
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.callback = callback
        self.verbose = verbose

    # -- parameters ------------------------------------------------------------------------------------------------
    def _make_kernel(self):
        if not isinstance(self.kernel, str):
            return get_kernel(self.kernel)
        params = {"bandwidth": self.bandwidth}
        if str(self.kernel).lower() == "laplace":
            params["exponent"] = self.exponent
        elif self.exponent != 1.0:
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
            raise TypeError(f"callback must be callable, got {self.callback!r}")
        check_number("random_state", self.random_state, low=0, integer=True)

    def _mem_bytes(self):
        return None if self.mem_gb is None else int(self.mem_gb * 2**30)

    # -- the loop --------------------------------------------------------------------------------------------------
    def fit(self, X, y, X_val=None, y_val=None):
        """Run the RFM loop. With validation data the iteration with the best validation metric is kept."""
        kernel = self._make_kernel()
        dtype = resolve_dtype(self.dtype)
        device = get_device(self.device)
        X = check_matrix(X, "X", dtype=dtype, device=device).detach()
        n, d = X.shape
        self._check_params(d)
        Y = self._encode_fit_targets(y, n, dtype, device)
        if (X_val is None) != (y_val is None):
            raise ValueError("X_val and y_val must be given together")
        if X_val is not None:
            X_val = check_matrix(X_val, "X_val", dtype=dtype, device=device).detach()
            check_same_features(X_val, d, "X_val")
            Y_val = self._encode_targets(y_val, X_val.shape[0], dtype, device, "y_val")
            val_pairs = coincident_pairs(*row_ids(X_val, X)) if kernel.radial else None
        fm = FeatureMatrix.identity(d) if self.M_init is None else as_feature_matrix(self.M_init, d)
        generator = make_generator(self.random_state)
        mem = self._mem_bytes()
        ids = row_ids(X)[0] if kernel.radial else None
        pairs = coincident_pairs(ids, ids) if kernel.radial else None  # (i, i), and duplicated rows
        self.kernel_, self.device_, self.dtype_, self.n_features_in_ = kernel, device, dtype, d
        self.X_fit_ = X
        self.history_ = []
        best, best_score = None, None
        bar = tqdm(total=self.iters + 1, desc=type(self).__name__, disable=not self.verbose, leave=False)
        for t in range(self.iters + 1):
            t0 = time.perf_counter()
            Xt = fm.transform(X)
            K = kernel_matrix(kernel, Xt, transformed=True, pairs=pairs, mem_bytes=mem)
            alpha, method = solve_krr(K, Y, self.reg, overwrite=True)
            del K
            self._set_state(fm, alpha, Xt)
            # for an exact solve, (K + reg I) alpha = Y gives the training predictions for free
            train_pred = Y - self.reg * alpha if method != "lstsq" else self._raw(X)
            record = {"iteration": t, "solver": method, **self._metrics(Y, train_pred, "train")}
            if X_val is not None:
                record.update(self._metrics(Y_val, self._raw(X_val, val_pairs).detach(), "val"))
                score = self._selection_score(record)
                if best_score is None or score > best_score:
                    best, best_score = (fm, alpha, t), score
            record["M"] = self._snapshot(fm)
            stop = bool(self.callback(self, record)) if self.callback is not None else False
            if t < self.iters and not stop:
                idx = sample_points(n, self.max_agop_points, generator)
                Zt = Xt if idx is None else Xt[idx.to(device)]
                eval_pairs = pairs if idx is None or ids is None else coincident_pairs(ids[idx.to(device)], ids)
                want_diag = self.diag and fm.kind in ("identity", "diag")
                At = kernel_agop_transformed(kernel, Xt, alpha, Zt, eval_pairs, diag=want_diag, centre=self.centre,
                                             mem_bytes=mem)
                fm = self._feature_matrix_from_agop(fm.to(dtype=torch.float64).pullback_agop(At))
            record["time_s"] = time.perf_counter() - t0
            self.history_.append(record)
            bar.update(1)
            if stop:
                break
        bar.close()
        if best is not None:
            self._set_state(best[0], best[1], best[0].transform(X))
            self.best_iter_ = best[2]
        else:
            self.best_iter_ = self.history_[-1]["iteration"]
        return self

    def _feature_matrix_from_agop(self, A):
        if self.diag:
            a = A.diagonal() if A.ndim == 2 else A
            return FeatureMatrix.diag(feature_update(a, self.agop_power, self.normalize))
        if self.rank is not None:
            evals, evecs = psd_eigh(A)
            vals, vecs = evals[-self.rank:] ** self.agop_power, evecs[:, -self.rank:]
            scale = normalization_scale((vecs * vals) @ vecs.T, self.normalize)
            return FeatureMatrix.factor(vecs * (vals / scale).sqrt())
        return FeatureMatrix.full(feature_update(A, self.agop_power, self.normalize))

    def _set_state(self, fm, alpha, Xt):
        self.feature_matrix_, self.alpha_, self.Xt_ = fm, alpha, Xt
        self.xx_ = Xt.square().sum(1)
        self.M_ = self._snapshot(fm)

    @staticmethod
    def _snapshot(fm):
        if fm.kind == "diag":
            return fm.data.detach().cpu().clone()
        return fm.dense(dtype=torch.float64).cpu()

    def _raw(self, X, pairs=None):
        return kernel_predict(self.kernel_, X, self.X_fit_, self.Xt_, self.alpha_, self.feature_matrix_,
                              xx=self.xx_, mem_bytes=self._mem_bytes(), pairs=pairs)

    # -- inference -------------------------------------------------------------------------------------------------
    def _check_fitted(self):
        if not hasattr(self, "alpha_"):
            raise RuntimeError(f"this {type(self).__name__} is not fitted yet; call fit(X, y) first")

    def _prepare(self, X, name="X"):
        self._check_fitted()
        Xc = check_matrix(X, name, dtype=self.dtype_, device=self.device_)
        check_same_features(Xc, self.n_features_in_, name)
        return Xc

    @staticmethod
    def _like_input(out, X):
        if isinstance(X, torch.Tensor):
            return out.to(device=X.device, dtype=X.dtype if X.is_floating_point() else out.dtype)
        return out.detach().cpu().numpy()

    def agop(self, X=None, *, centre=None, diag=None):
        """Closed-form AGOP of the fitted predictor at the rows of ``X`` (default: the training points), as the raw
        mean (no power, no normalisation). Returns the type it was given (a tensor when ``X`` is None)."""
        self._check_fitted()
        Z = self.X_fit_ if X is None else self._prepare(X).detach()
        centre = self.centre if centre is None else centre
        diag = self.diag if diag is None else diag
        fm = self.feature_matrix_
        pairs = coincident_pairs(*row_ids(Z, self.X_fit_)) if self.kernel_.radial else None
        At = kernel_agop_transformed(self.kernel_, self.Xt_, self.alpha_, fm.transform(Z), pairs,
                                     diag=diag and fm.kind in ("identity", "diag"), centre=centre,
                                     mem_bytes=self._mem_bytes())
        A = fm.to(dtype=torch.float64).pullback_agop(At)
        if diag and A.ndim == 2:
            A = A.diagonal().clone()
        return A if X is None or isinstance(X, torch.Tensor) else A.cpu().numpy()

    def gradients(self, X):
        """Per-point input gradients of the raw outputs, shape (m, n_outputs, d)."""
        Z = self._prepare(X).detach()
        G = kernel_gradients(self.kernel_, self.X_fit_, self.alpha_, Z, self.feature_matrix_,
                             mem_bytes=self._mem_bytes())
        return self._like_input(G, X)


class RFMRegressor(RegressorMixin, _BaseRFM):
    """Recursive Feature Machine for regression (see the module docstring for the loop and its conventions).

    Parameters
    ----------
    kernel : "laplace", "gaussian", "quadratic", "polynomial" or a :class:`rfm.kernels.Kernel`
    bandwidth : kernel bandwidth L (> 0); exponent : Laplace exponent q in (0, 2]
    reg : ridge (>= 0; 0 interpolates); iters : number of feature updates (>= 0)
    agop_power, normalize, centre : the M-update convention; diag : keep only diag(M); rank : keep a rank-r factor
    M_init : initial feature matrix (default identity); max_agop_points : AGOP evaluation points (random subset)
    mem_gb : working-memory budget for kernel blocks; device (None = CUDA if present), dtype ("float32"/"float64")
    random_state : seed for the AGOP sample; callback : ``callback(model, record)`` after each solve, may return True
    to stop; verbose : show a progress bar.

    Fitted attributes: ``M_``, ``feature_matrix_``, ``alpha_``, ``history_``, ``best_iter_``, ``n_features_in_``.
    """

    def _encode_fit_targets(self, y, n, dtype, device):
        self._y_1d = np.ndim(y) == 1
        return self._encode_targets(y, n, dtype, device, "y")

    def _encode_targets(self, y, n, dtype, device, name):
        if isinstance(y, torch.Tensor):
            kind = "f" if y.is_floating_point() else ("b" if y.dtype == torch.bool else "i")
        else:
            kind = np.asarray(y).dtype.kind
        if kind in "iubUSO":
            raise ValueError(f"{name} has dtype kind {kind!r}, which looks like class labels; use RFMClassifier for "
                             "classification, or cast integer-valued regression targets to float")
        return check_targets(y, n, name, dtype=dtype, device=device)

    @staticmethod
    def _metrics(Y, pred, split):
        return {f"{split}_mse": float((Y - pred).square().mean()), f"{split}_r2": r2_score(Y, pred)}

    @staticmethod
    def _selection_score(record):
        return -record["val_mse"]

    def predict(self, X):
        """Predictions (n,) or (n, n_outputs); numpy in, numpy out; torch in, torch out (differentiable)."""
        out = self._raw(self._prepare(X))
        if self._y_1d:
            out = out[:, 0]
        return self._like_input(out, X)

    def score(self, X, y, sample_weight=None):
        """R^2 of the predictions (averaged uniformly over outputs)."""
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported")
        return r2_score(to_numpy(y), to_numpy(self.predict(X.detach() if isinstance(X, torch.Tensor) else X)))


class RFMClassifier(ClassifierMixin, _BaseRFM):
    """Recursive Feature Machine for classification by least squares on label codes.

    Two classes are coded as one column (0/1), more as one-hot columns; ``predict`` takes the threshold 1/2 or the
    arg-max, and ``predict_proba`` clips the outputs to [1e-3, 1] and renormalises each row. The best iteration
    (with validation data) is the one of highest validation accuracy. Parameters as :class:`RFMRegressor`.
    """

    def _encode_fit_targets(self, y, n, dtype, device):
        labels = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
        if labels.ndim != 1:
            raise ValueError(f"y must be a 1-D array of class labels, got shape {labels.shape}")
        if labels.dtype.kind == "f" and not np.all(np.isfinite(labels)):
            raise ValueError("y contains NaN or infinite values")
        self.classes_ = np.unique(labels)
        if len(self.classes_) < 2:
            raise ValueError(f"y has a single class ({self.classes_[0]!r}); a classifier needs at least two")
        return self._encode_targets(y, n, dtype, device, "y")

    def _encode_targets(self, y, n, dtype, device, name):
        labels = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
        if labels.ndim != 1 or labels.shape[0] != n:
            raise ValueError(f"{name} must be a 1-D array of {n} class labels, got shape {labels.shape}")
        unseen = np.setdiff1d(np.unique(labels), self.classes_)
        if unseen.size:
            raise ValueError(f"{name} contains labels not seen in y: {unseen[:10].tolist()}")
        codes = torch.as_tensor(np.searchsorted(self.classes_, labels), device=device)
        if len(self.classes_) == 2:
            return codes.to(dtype)[:, None]
        return torch.nn.functional.one_hot(codes, len(self.classes_)).to(dtype)

    def _codes(self, raw):
        return (raw[:, 0] > 0.5).long() if raw.shape[1] == 1 else raw.argmax(1)

    def _metrics(self, Y, pred, split):
        truth = self._codes(Y)
        return {f"{split}_acc": float((self._codes(pred) == truth).double().mean()),
                f"{split}_mse": float((Y - pred).square().mean())}

    @staticmethod
    def _selection_score(record):
        return (record["val_acc"], -record["val_mse"])

    def decision_function(self, X):
        """The raw least-squares outputs (n,) for two classes, (n, n_classes) otherwise."""
        out = self._raw(self._prepare(X))
        return self._like_input(out[:, 0] if out.shape[1] == 1 else out, X)

    def predict(self, X):
        codes = self._codes(self._raw(self._prepare(X)).detach()).cpu().numpy()
        labels = self.classes_[codes]
        if isinstance(X, torch.Tensor) and labels.dtype.kind in "iufb":
            return torch.as_tensor(labels, device=X.device)
        return labels

    def predict_proba(self, X):
        raw = self._raw(self._prepare(X))
        if raw.shape[1] == 1:
            p1 = raw.clamp(1e-3, 1 - 1e-3)
            proba = torch.cat([1 - p1, p1], 1)
        else:
            proba = raw.clamp(1e-3, 1.0)
            proba = proba / proba.sum(1, keepdim=True)
        return self._like_input(proba, X)

    def score(self, X, y, sample_weight=None):
        """Mean accuracy."""
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported")
        pred = self.predict(X.detach() if isinstance(X, torch.Tensor) else X)
        return float(np.mean(to_numpy(pred) == to_numpy(y)))
