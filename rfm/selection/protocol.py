"""Tabular benchmarks: the evaluation protocol, the methods compared, and the summaries of a benchmark table.

The protocol (:func:`evaluate`) follows the one the RFM paper uses on the UCI collection, as far as the book could
read it: seeded stratified folds; in each, the training part is standardised with its own statistics and split once
more into a fitting part and a validation part, the validation accuracy picks each method's hyper-parameters from
its grid (for RFM also the iteration and whether rows are normalised), the chosen configuration is refitted on the
whole training part and scored on the held-out fold. Every method sees the same folds and the same splits.

* :class:`Method`, :func:`rfm_method` (RFM, and with ``iters=0`` its own iteration 0: the Laplace kernel machine),
  :func:`ntk_method` (the ReLU NTK), :func:`sklearn_methods` (random forest, histogram gradient boosting, a linear
  model, an MLP, an RBF SVM);
* :func:`stratified_folds`, :func:`evaluate`, :func:`benchmark` (many sets);
* ``protocol="fixed_split"`` of :func:`evaluate`: the protocol of the authors' UCI script
  (``tabular_benchmark_experiments/main.py`` of aradha/recursive_feature_machines, commit 60e4c118): the
  hyper-parameters and RFM's M are chosen once, on one fixed split of the whole table, and reused in every test
  fold, where only the ridge solve is redone. The split overlaps the test folds, so M is learnt partly on test rows;
* :func:`summarize` (mean score, mean rank, P90, P95, PMA, ADTM) and :func:`win_tie_loss`.

The data sets are in :mod:`rfm.data.tabular`.
"""
from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import rankdata
from sklearn import ensemble, linear_model, neural_network, svm
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import KFold, StratifiedKFold, train_test_split
from tqdm.auto import tqdm

from ..core.ntk import NTKKernel
from ..data.tabular import TabularSet, row_normalize, standardize
from ..models.estimators import RFMClassifier, RFMRegressor

TASKS = ("classification", "regression")
PROTOCOLS = ("nested", "fixed_split")


@dataclass
class Method:
    """A method of a benchmark: how to build its estimator and the grid its validation split chooses from.

    Parameters
    ----------
    name : str
        The method's name in the tables.
    build : callable
        ``build(**params)`` returns an unfitted estimator for one parameter set of ``grid``.
    grid : list of dict, default=[{}]
        The parameter sets. A parameter ``row_norm`` (bool) is taken by the protocol: rows are divided by their
        norm before fitting.
    rfm : bool, default=False
        True for an estimator that takes ``fit(X, y, X_val, y_val)``, keeps its best iteration on the validation
        split (``best_iter_``), and is refitted with ``iters=best_iter_``.
    """

    name: str
    build: Callable
    grid: list = field(default_factory=lambda: [{}])
    rfm: bool = False


def rfm_method(task: str, *, name: str = "RFM", regs=(1.0, 0.1, 1e-3), row_norm=(False, True), iters: int = 5,
               bandwidth: float = 10.0, **params) -> Method:
    """RFM with the Laplace kernel over ``regs`` x ``row_norm``; the validation split picks the iteration in
    0..``iters`` too.

    Parameters
    ----------
    task : {"classification", "regression"}
        :class:`rfm.RFMClassifier` or :class:`rfm.RFMRegressor`.
    name : str, default="RFM"
        The method's name.
    regs : sequence of float, default=(1.0, 0.1, 1e-3)
        The ridges of the grid.
    row_norm : sequence of bool, default=(False, True)
        Whether rows are divided by their norms, in the grid.
    iters : int, default=5
        RFM's iterations; 0 is the plain Laplace kernel machine (RFM's iteration 0).
    bandwidth : float, default=10.0
        The Laplace kernel's bandwidth.
    **params
        Further arguments of the estimator.

    Returns
    -------
    Method
        The method, with ``rfm=True``.
    """
    _check_task(task)
    cls = RFMClassifier if task == "classification" else RFMRegressor
    grid = _kernel_grid(regs, row_norm)

    def build(reg, iters=iters, M_init=None):
        return cls(kernel="laplace", bandwidth=bandwidth, reg=reg, iters=iters, M_init=M_init, dtype="float64",
                   **params)

    return Method(name, build, grid, rfm=True)


def ntk_method(task: str, *, name: str = "NTK", regs=(1.0, 0.1, 1e-3), row_norm=(False, True), depth: int = 1,
               bias: float = 1.0) -> Method:
    """Kernel ridge regression with the ReLU NTK (:class:`rfm.NTKKernel`, inputs scaled by 1/sqrt(d)) over
    ``regs`` x ``row_norm``.

    Parameters
    ----------
    task : {"classification", "regression"}
        Classification or regression.
    name : str, default="NTK"
        The method's name.
    regs : sequence of float, default=(1.0, 0.1, 1e-3)
        The ridges of the grid.
    row_norm : sequence of bool, default=(False, True)
        Whether rows are divided by their norms, in the grid.
    depth : int, default=1
        The NTK's number of hidden layers.
    bias : float, default=1.0
        The NTK's bias term.

    Returns
    -------
    Method
        The method (an RFM estimator at iteration 0 with the NTK as its kernel).
    """
    _check_task(task)
    cls = RFMClassifier if task == "classification" else RFMRegressor

    class _NTK(cls):
        """The NTK machine; its bandwidth is set from the data at fit time (sqrt(d))."""

        def fit(self, X, y, X_val=None, y_val=None):
            self.kernel = NTKKernel(depth=depth, bias=bias, bandwidth=float(np.sqrt(np.shape(X)[1])))
            return super().fit(X, y, X_val, y_val)

    grid = _kernel_grid(regs, row_norm)
    return Method(name, lambda reg, iters=0: _NTK(reg=reg, iters=0, dtype="float64"), grid, rfm=True)


def sklearn_methods(task: str, seed: int = 0, *, trees: int = 100, mlp_width: int = 128) -> list[Method]:
    """scikit-learn baselines, each with a small grid: random forest, histogram gradient boosting, logistic
    regression (ridge for regression), an MLP (one hidden layer, L-BFGS for at most 300 iterations, weight decay
    0.01 or 1) and an SVM with the RBF kernel.

    Parameters
    ----------
    task : {"classification", "regression"}
        Classifiers or regressors.
    seed : int, default=0
        The seed of the random forest, the boosting and the MLP.
    trees : int, default=100
        The random forest's number of trees.
    mlp_width : int, default=128
        The MLP's hidden width.

    Returns
    -------
    list of Method
        RF, HistGB, LogReg (Ridge for regression), MLP and SVM.
    """
    _check_task(task)
    if task == "classification":
        return [
            Method("RF", lambda: ensemble.RandomForestClassifier(n_estimators=trees, random_state=seed, n_jobs=1)),
            Method("HistGB", lambda: ensemble.HistGradientBoostingClassifier(random_state=seed)),
            Method("LogReg", lambda C: linear_model.LogisticRegression(C=C, max_iter=2000),
                   [{"C": 1.0}, {"C": 0.1}]),
            Method("MLP", lambda alpha: neural_network.MLPClassifier(
                hidden_layer_sizes=(mlp_width,), alpha=alpha, solver="lbfgs", max_iter=300, random_state=seed),
                   [{"alpha": 1e-2}, {"alpha": 1.0}]),
            Method("SVM", lambda C: svm.SVC(C=C, kernel="rbf"), [{"C": 1.0}, {"C": 10.0}]),
        ]
    return [
        Method("RF", lambda: ensemble.RandomForestRegressor(n_estimators=trees, random_state=seed, n_jobs=1)),
        Method("HistGB", lambda: ensemble.HistGradientBoostingRegressor(random_state=seed)),
        Method("Ridge", lambda alpha: linear_model.Ridge(alpha=alpha), [{"alpha": 1.0}, {"alpha": 10.0}]),
        Method("MLP", lambda alpha: neural_network.MLPRegressor(
            hidden_layer_sizes=(mlp_width,), alpha=alpha, solver="lbfgs", max_iter=300, random_state=seed),
               [{"alpha": 1e-2}, {"alpha": 1.0}]),
        Method("SVM", lambda C: svm.SVR(C=C, kernel="rbf"), [{"C": 1.0}, {"C": 10.0}]),
    ]


def _kernel_grid(regs, row_norm) -> list[dict]:
    return [{"reg": r, "row_norm": rn} for rn in row_norm for r in regs]


def _check_task(task):
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")


def stratified_folds(y, k: int, seed: int = 0, task: str = "classification") -> list[tuple[np.ndarray, np.ndarray]]:
    """Seeded folds: stratified by class for classification, plain shuffled folds for regression.

    Parameters
    ----------
    y : array-like of shape (n,)
        The labels or targets.
    k : int
        The number of folds (each class needs at least ``k`` members).
    seed : int, default=0
        The same seed gives the same folds.
    task : {"classification", "regression"}, default="classification"
        Whether to stratify.

    Returns
    -------
    list of (ndarray, ndarray)
        ``k`` pairs of sorted (train indices, test indices).
    """
    _check_task(task)
    y = np.asarray(y)
    if k < 2 or k > len(y):
        raise ValueError(f"k must be between 2 and the number of rows ({len(y)}), got {k}")
    if task == "classification":
        counts = np.unique(y, return_counts=True)[1]
        if counts.min() < k:
            raise ValueError(f"a class has {counts.min()} member(s), fewer than the {k} folds; use fewer folds or "
                             "drop the class")
        splitter = StratifiedKFold(k, shuffle=True, random_state=seed)
    else:
        splitter = KFold(k, shuffle=True, random_state=seed)
    return [(np.sort(tr), np.sort(te)) for tr, te in splitter.split(np.zeros((len(y), 1)), y)]


def _inner_split(y, fraction: float, seed: int, task: str):
    idx = np.arange(len(y))
    strat = y if task == "classification" and np.unique(y, return_counts=True)[1].min() >= 2 else None
    return train_test_split(idx, test_size=fraction, random_state=seed, stratify=strat)


def _score(task, y, pred) -> float:
    if task == "classification":
        return float(np.mean(np.asarray(pred) == y))
    y = np.asarray(y, dtype=np.float64)
    return float(1.0 - np.sum((y - np.asarray(pred, dtype=np.float64)) ** 2) / np.sum((y - y.mean()) ** 2))


def _fit(est, *args, notes=None):
    """``est.fit(*args)``; scikit-learn's ConvergenceWarnings are counted in ``notes`` instead of shown (the
    library is quiet by default; :attr:`Result.not_converged` reports them)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        est.fit(*args)
    for w in caught:
        if issubclass(w.category, ConvergenceWarning):
            if notes is not None:
                notes.append(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return est


def _fit_score(method: Method, params: dict, X, y, X_val, y_val, task, notes=None):
    """Fit one configuration; its validation score (for RFM, its best iteration's) and the refit parameters."""
    est, (X, X_val) = _prepared(method, params, X, X_val)
    if method.rfm:
        _fit(est, X, y, X_val, y_val, notes=notes)
        best = est.history_[est.best_iter_]
        score = best["val_acc"] if task == "classification" else best["val_r2"]
        return score, {**params, "iters": int(est.best_iter_)}
    _fit(est, X, y, notes=notes)
    return _score(task, y_val, est.predict(X_val)), dict(params)


def _prepared(method: Method, params: dict, *Xs):
    """The unfitted estimator of one configuration and the inputs it sees (rows divided by their norms when the
    configuration says ``row_norm``)."""
    params = dict(params)
    if params.pop("row_norm", False):
        Xs = tuple(row_normalize(X) for X in Xs)
    return method.build(**params), Xs


@dataclass
class Result:
    """One method on one data set: the test score of each fold and the configuration chosen in each.

    Parameters
    ----------
    method : str
        The method's name.
    dataset : str
        The data set's name.
    scores : list of float
        The test score of each fold.
    chosen : list of dict
        The configuration the validation split chose in each fold.
    not_converged : list of str, optional
        The messages of scikit-learn's ConvergenceWarnings.
    extra : dict, optional
        Further records (e.g. read back by :func:`read_results`).
    """

    method: str
    dataset: str
    scores: list
    chosen: list
    not_converged: list = field(default_factory=list)  # messages of scikit-learn's ConvergenceWarnings
    extra: dict = field(default_factory=dict)  # further records, e.g. read back from a result file

    @property
    def mean(self) -> float:
        """The mean test score over the folds."""
        return float(np.mean(self.scores))


def evaluate(methods, data: TabularSet, *, folds: int = 4, val_fraction: float = 0.25, seed: int = 0,
             max_train: int | None = None, protocol: str = "nested") -> dict[str, Result]:
    """Score every method on ``data`` with the protocol of the module docstring.

    ``protocol="nested"`` (the default) chooses the configuration inside each fold, on a split of that fold's
    training part only. ``protocol="fixed_split"`` follows the authors' UCI script
    (``tabular_benchmark_experiments/main.py``, aradha/recursive_feature_machines at commit 60e4c118): the whole
    table is standardised once; one seeded split of all its rows (``val_fraction`` of them for validation) chooses
    each method's configuration, and for RFM also the feature matrix M of the chosen iteration, learnt on the
    split's fitting part; in every test fold the chosen configuration is refitted on the fold's training part with
    M fixed (for RFM only the ridge solve is redone, as the script's ``rfm.train`` does). The split overlaps the test
    folds, so both the configuration and M have seen test rows.

    Classification is scored by accuracy, regression by R^2 (targets standardised with the training part's
    statistics, which leaves R^2 unchanged).

    Parameters
    ----------
    methods : list of Method
        The methods, with unique names.
    data : TabularSet
        The data set (:mod:`rfm.data.tabular`).
    folds : int, default=4
        The number of outer folds.
    val_fraction : float, default=0.25
        The share of each training part held out to choose the configuration.
    seed : int, default=0
        The seed of the folds, the inner splits and the subsamples.
    max_train : int or None, default=None
        Caps the training part of each fold (a seeded subsample, the same for every method) for the largest sets;
        with ``"fixed_split"`` it caps the fitting part of the selection split too.
    protocol : {"nested", "fixed_split"}, default="nested"
        Where the configuration (and RFM's M) is chosen: inside each fold, or once on a fixed split of all rows.

    Returns
    -------
    dict of str to Result
        Method name -> its result.
    """
    _check_task(data.task)
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    names = [m.name for m in methods]
    if len(set(names)) != len(names):
        raise ValueError(f"method names must be unique, got {names}")
    results = {m.name: Result(m.name, data.name, [], []) for m in methods}
    if protocol == "fixed_split":
        return _evaluate_fixed_split(methods, data, results, folds, val_fraction, seed, max_train)
    for f, (train, test) in enumerate(stratified_folds(data.y, folds, seed, data.task)):
        if max_train is not None and len(train) > max_train:
            train = np.sort(np.random.default_rng([seed, f]).choice(train, max_train, replace=False))
        X_train, X_test = standardize(data.X[train], data.X[test])
        y_train, y_test = data.y[train], data.y[test]
        if data.task == "regression":
            mu, sd = y_train.mean(), y_train.std() or 1.0
            y_train, y_test = (y_train - mu) / sd, (y_test - mu) / sd
        fit_idx, val_idx = _inner_split(y_train, val_fraction, seed + 1000 * f, data.task)
        for m in methods:
            best = None
            for params in m.grid:
                score, refit = _fit_score(m, params, X_train[fit_idx], y_train[fit_idx], X_train[val_idx],
                                          y_train[val_idx], data.task, results[m.name].not_converged)
                if best is None or score > best[0]:
                    best = (score, refit)
            est, (Xa, Xb) = _prepared(m, best[1], X_train, X_test)
            _fit(est, Xa, y_train, notes=results[m.name].not_converged)
            results[m.name].scores.append(_score(data.task, y_test, est.predict(Xb)))
            results[m.name].chosen.append({**best[1], "row_norm": bool(best[1].get("row_norm", False))})
    return results


def _evaluate_fixed_split(methods, data, results, folds, val_fraction, seed, max_train):
    """The authors' UCI protocol (see :func:`evaluate`): configuration and M chosen once, reused in every fold."""
    X = standardize(data.X)  # the script reads tables standardised over all their rows
    y = data.y
    if data.task == "regression":
        y = (y - y.mean()) / (y.std() or 1.0)
    fit_idx, val_idx = _inner_split(y, val_fraction, seed + 7919, data.task)
    if max_train is not None and len(fit_idx) > max_train:
        fit_idx = np.random.default_rng([seed, 7919]).choice(fit_idx, max_train, replace=False)
    chosen, record = {}, {}
    for m in methods:
        notes = results[m.name].not_converged
        best = None
        for params in m.grid:
            score, refit = _fit_score(m, params, X[fit_idx], y[fit_idx], X[val_idx], y[val_idx], data.task, notes)
            if best is None or score > best[0]:
                best = (score, refit)
        params = dict(best[1])
        record[m.name] = {**best[1], "row_norm": bool(best[1].get("row_norm", False)),
                          "learnt_M": bool(m.rfm and params.get("iters", 0) > 0)}
        if m.rfm and params.get("iters", 0) > 0:  # M of the chosen iteration, learnt on the split's fitting part
            est, (X_fit,) = _prepared(m, params, X[fit_idx])
            _fit(est, X_fit, y[fit_idx], notes=notes)
            params["M_init"] = est.M_.detach().cpu().numpy()
            params["iters"] = 0  # the folds redo the ridge solve only
        chosen[m.name] = params
    for f, (train, test) in enumerate(stratified_folds(data.y, folds, seed, data.task)):
        if max_train is not None and len(train) > max_train:
            train = np.sort(np.random.default_rng([seed, f]).choice(train, max_train, replace=False))
        for m in methods:
            est, (Xa, Xb) = _prepared(m, chosen[m.name], X[train], X[test])
            _fit(est, Xa, y[train], notes=results[m.name].not_converged)
            results[m.name].scores.append(_score(data.task, y[test], est.predict(Xb)))
            results[m.name].chosen.append(dict(record[m.name]))
    return results


def benchmark(methods, datasets, progress: bool = False, **kwargs) -> dict[str, dict[str, Result]]:
    """:func:`evaluate` on each data set.

    Parameters
    ----------
    methods : list of Method
        The methods.
    datasets : iterable of TabularSet
        The data sets.
    progress : bool, default=False
        Show a progress bar over the data sets.
    **kwargs
        Arguments of :func:`evaluate`.

    Returns
    -------
    dict of str to dict of str to Result
        Data set name -> method name -> result.
    """
    return {data.name: evaluate(methods, data, **kwargs) for data in tqdm(datasets, disable=not progress)}


def read_results(folder) -> dict[str, dict[str, dict[str, Result]]]:
    """Per-set result files (``<set>.json``, as ``scripts/tabular_full.py`` writes them) as :func:`benchmark`'s
    output, one per protocol.

    Each file holds ``{"set": name, "results": {protocol: {method: {"scores": [...], "chosen": [...], ...}}}}``;
    the extra keys of a method's record (e.g. ``mass``) are kept in the ``extra`` field of :class:`Result`.

    Parameters
    ----------
    folder : str or path
        The folder of the files.

    Returns
    -------
    dict of str to dict of str to dict of str to Result
        Protocol -> data set name -> method name -> result; sets sorted by name.
    """
    out: dict = {}
    for f in sorted(os.listdir(folder)):
        if not f.endswith(".json"):
            continue
        with open(os.path.join(folder, f)) as fh:
            rec = json.load(fh)
        for protocol, by_method in rec["results"].items():
            sets = out.setdefault(protocol, {})
            sets[rec["set"]] = {m: Result(m, rec["set"], list(r["scores"]), list(r["chosen"]),
                                          extra={k: v for k, v in r.items() if k not in ("scores", "chosen")})
                                for m, r in by_method.items()}
    return out


def score_table(results: dict[str, dict[str, Result]]):
    """The mean test scores of :func:`benchmark`'s output as a table.

    Parameters
    ----------
    results : dict of str to dict of str to Result
        :func:`benchmark`'s output.

    Returns
    -------
    sets : list of str
        The data sets' names (rows).
    methods : list of str
        The methods' names (columns).
    table : ndarray of shape (n_sets, n_methods)
        The mean test scores.
    """
    sets = list(results)
    methods = list(next(iter(results.values()))) if sets else []
    return sets, methods, np.array([[results[s][m].mean for m in methods] for s in sets])


def summarize(table, methods=None, *, tie_tol: float = 0.0) -> dict[str, dict[str, float]]:
    """Summaries of a benchmark table (rows: data sets, columns: methods, higher is better).

    * ``mean``: the mean score; ``rank``: the mean rank (1 = best on a set; ties share the average rank, and
      scores within ``tie_tol`` of each other count as ties);
    * ``P90`` / ``P95``: the percentage of sets on which the method reaches at least 90% / 95% of the best score
      on that set; ``PMA``: the mean percentage of the best score (the percentage-of-maximum-accuracy summaries of
      the UCI comparisons; meaningful for accuracies, not for R^2 that can be negative);
    * ``ADTM``: the mean over sets of (score - worst) / (best - worst), best and worst taken over the methods of
      the table (1 where all are equal): the "average distance to the minimum" of Grinsztajn et al.'s benchmark,
      with the worst method as the minimum.

    Parameters
    ----------
    table : array-like of shape (n_sets, n_methods)
        The scores, finite.
    methods : list of str or None, default=None
        The columns' names; None names them ``m0``, ``m1``, ...
    tie_tol : float, default=0.0
        Scores within this of each other share a rank.

    Returns
    -------
    dict of str to dict of str to float
        Method name -> {"mean", "rank", "P90", "P95", "PMA", "ADTM"}.
    """
    A = np.asarray(table, dtype=np.float64)
    if A.ndim != 2 or A.size == 0:
        raise ValueError(f"table must be a non-empty (data sets, methods) array, got shape {A.shape}")
    if not np.isfinite(A).all():
        raise ValueError("table has non-finite scores")
    methods = list(methods) if methods is not None else [f"m{j}" for j in range(A.shape[1])]
    if len(methods) != A.shape[1]:
        raise ValueError(f"{len(methods)} method names for {A.shape[1]} columns")
    R = A.copy()
    if tie_tol > 0:  # snap scores within tie_tol of a set's best to it, and so on down
        for i in range(R.shape[0]):
            order = np.argsort(-R[i])
            for a, b in zip(order, order[1:]):
                if R[i, a] - R[i, b] <= tie_tol:
                    R[i, b] = R[i, a]
    ranks = np.vstack([rankdata(-row, method="average") for row in R])
    best, worst = A.max(axis=1, keepdims=True), A.min(axis=1, keepdims=True)
    span = np.where(best > worst, best - worst, 1.0)
    dtm = np.where(best > worst, (A - worst) / span, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(best > 0, A / best, np.nan)
    out = {}
    for j, name in enumerate(methods):
        out[name] = {"mean": float(A[:, j].mean()), "rank": float(ranks[:, j].mean()),
                     "P90": float(100 * np.mean(A[:, j] >= 0.90 * best[:, 0])),
                     "P95": float(100 * np.mean(A[:, j] >= 0.95 * best[:, 0])),
                     "PMA": float(100 * np.nanmean(frac[:, j])), "ADTM": float(dtm[:, j].mean())}
    return out


def win_tie_loss(a, b, tol: float = 0.0) -> tuple[int, int, int]:
    """How many sets ``a`` wins (a > b + tol), ties (``abs(a - b) <= tol``) and loses against ``b``.

    Parameters
    ----------
    a, b : array-like of shape (n_sets,)
        Two methods' scores, higher is better.
    tol : float, default=0.0
        Differences up to this are ties.

    Returns
    -------
    tuple of int
        (wins, ties, losses) of ``a``.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
    return int(np.sum(a > b + tol)), int(np.sum(np.abs(a - b) <= tol)), int(np.sum(a < b - tol))
