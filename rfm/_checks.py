"""Input validation shared by the package.

Every public entry point turns user input into tensors here, so that a bad input fails early with a message that
names the argument and what is wrong with it, instead of as a NaN or a shape error deep inside torch.
"""
from __future__ import annotations

import numbers

import numpy as np
import torch


class DegenerateAGOPError(ValueError):
    """The AGOP is zero, so no feature matrix can be formed from it (a constant predictor, a single point, ...)."""


#: The asymmetry |A - A^T| that :func:`check_square` tolerates as round-off, relative to max|A| (as
#: FeatureMatrix.full).
SYM_RTOL = 1e-4

_FLOAT_DTYPES = {"float32": torch.float32, "float64": torch.float64, "float": torch.float32, "double": torch.float64}


def resolve_dtype(dtype) -> torch.dtype:
    """Accept ``torch.float32``/``torch.float64`` or their names; anything else is an error.

    Parameters
    ----------
    dtype : str or torch.dtype
        "float32", "float64" or the torch dtypes.

    Returns
    -------
    torch.dtype

    Raises
    ------
    ValueError
        For any other dtype.
    """
    if isinstance(dtype, str):
        if dtype not in _FLOAT_DTYPES:
            raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
        return _FLOAT_DTYPES[dtype]
    if dtype in (torch.float32, torch.float64):
        return dtype
    raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")


def check_number(name: str, value, *, low=None, low_inclusive=True, high=None, high_inclusive=True, integer=False):
    """Check a scalar hyperparameter lies in a range; return it unchanged.

    Parameters
    ----------
    name : str
        The parameter's name, for the message.
    value : object
        The value.
    low, high : float, optional
        The bounds.
    low_inclusive, high_inclusive : bool, default True
        Whether the bounds are allowed.
    integer : bool, default False
        Require an integer.

    Returns
    -------
    object
        ``value``.

    Raises
    ------
    TypeError
        If value is not a (integer) real number, or is a bool.
    ValueError
        If it is not finite or out of range.
    """
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        what = "an integer" if integer else "a real number"
        raise TypeError(f"{name} must be {what}, got {value!r}")
    if not np.isfinite(float(value)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        op = ">=" if low_inclusive else ">"
        raise ValueError(f"{name} must be {op} {low}, got {value!r}")
    if high is not None and (value > high or (value == high and not high_inclusive)):
        op = "<=" if high_inclusive else "<"
        raise ValueError(f"{name} must be {op} {high}, got {value!r}")
    return value


def check_choice(name: str, value, choices):
    """Check that ``value`` is one of ``choices``; return it unchanged.

    Parameters
    ----------
    name : str
        The argument's name, for the error message.
    value : object
        The value to check.
    choices : collection
        The allowed values.

    Returns
    -------
    object
        ``value``.
    """
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(map(str, choices))}, got {value!r}")
    return value


def check_choice_str(name: str, value, choices) -> str:
    """Check that ``value`` is a string and one of ``choices``; return it unchanged.

    Parameters
    ----------
    name : str
        The argument's name, for the error message.
    value : object
        The value to check.
    choices : collection of str
        The allowed strings.

    Returns
    -------
    str
        ``value``.
    """
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, one of {sorted(choices)}, got {value!r} of type "
                        f"{type(value).__name__}")
    return check_choice(name, value, choices)


def check_bool(name: str, value) -> bool:
    """Check that ``value`` is ``True`` or ``False`` (a NumPy bool too); return it as a Python bool.

    Parameters
    ----------
    name : str
        The argument's name, for the error message.
    value : object
        The value to check.

    Returns
    -------
    bool
        ``value`` as a Python bool.
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r} of type {type(value).__name__}")
    return bool(value)


def to_tensor(x, name: str) -> torch.Tensor:
    """``x`` as a torch tensor (arrays, lists and tensors; sparse matrices and None refused with a clear error).

    Parameters
    ----------
    x : array-like or torch.Tensor
        The input.
    name : str
        Its name, for the error messages.

    Returns
    -------
    torch.Tensor
        ``x`` as a tensor (a tensor is returned as it is).
    """
    if x is None:
        raise ValueError(f"{name} is None; pass an array")
    if hasattr(x, "toarray") or type(x).__module__.startswith("scipy.sparse"):
        raise TypeError(f"{name} is a sparse matrix, but dense data is required; convert it with {name}.toarray()")
    if isinstance(x, torch.Tensor):
        if x.layout != torch.strided:
            raise TypeError(f"{name} is a sparse tensor ({x.layout}), but dense data is required; "
                            f"use {name}.to_dense()")
        t = x
    else:
        try:
            arr = np.asarray(x)
        except Exception as exc:  # pragma: no cover - exotic inputs
            raise TypeError(f"{name} could not be converted to an array: {exc}") from exc
        if arr.dtype == object:
            raise TypeError(f"{name} must be numeric, got an array of Python objects (ragged rows or strings?)")
        if arr.dtype.kind == "c":
            raise TypeError(f"{name} must be real-valued, got dtype {arr.dtype}")
        if arr.dtype.kind in "US":
            raise TypeError(f"{name} must be numeric, got an array of strings (dtype {arr.dtype})")
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
        arr = np.ascontiguousarray(arr)
        t = torch.from_numpy(arr if arr.flags.writeable else arr.copy())
    if t.is_complex():
        raise TypeError(f"{name} must be real-valued, got dtype {t.dtype}")
    return t


def check_matrix(X, name: str = "X", *, dtype=None, device=None, min_rows: int = 1) -> torch.Tensor:
    """Return ``X`` as a finite 2-D floating tensor on ``device``.

    A tensor that requires grad keeps its graph (the conversion is differentiable).

    Parameters
    ----------
    X : array-like or torch.Tensor
        The input.
    name : str, default "X"
        Its name, for messages.
    dtype : torch.dtype, optional
        The dtype (default: X's floating dtype, float32 for other input).
    device : torch.device or str, optional
        The device.
    min_rows : int, default 1
        The fewest rows.

    Returns
    -------
    torch.Tensor, shape (n, d)

    Raises
    ------
    TypeError
        If X is boolean.
    ValueError
        If X is not 2-D, too small, or not finite.
    """
    t = to_tensor(X, name)
    if t.dtype == torch.bool:
        raise TypeError(f"{name} must be numeric, got dtype torch.bool")
    if t.ndim != 2:
        hint = (" (reshape a single feature with X.reshape(-1, 1), a single sample with X.reshape(1, -1))"
                if t.ndim == 1 else "")
        raise ValueError(f"{name} must be a 2-D array of shape (n_samples, n_features), "
                         f"got shape {tuple(t.shape)}{hint}")
    if t.shape[0] < min_rows:
        raise ValueError(f"{name} must have at least {min_rows} sample(s), got {t.shape[0]}")
    if t.shape[1] < 1:
        raise ValueError(f"{name} must have at least one feature, got shape {tuple(t.shape)}")
    target_dtype = dtype if dtype is not None else (t.dtype if t.is_floating_point() else torch.float32)
    t = t.to(device=device if device is not None else t.device, dtype=target_dtype)
    if not bool(torch.isfinite(t).all()):
        bad = int((~torch.isfinite(t)).sum())
        overflow = bool(torch.isfinite(to_tensor(X, name).double()).all())
        hint = (f" after conversion to {t.dtype}: its values exceed that type's range (scale the data, or use "
                "float64)") if overflow else ""
        raise ValueError(f"{name} contains {bad} NaN or infinite value(s){hint}")
    return t


def check_targets(y, n: int, name: str = "y", *, dtype=None, device=None) -> torch.Tensor:
    """Return regression targets as a finite (n, c) tensor; 1-D input becomes one column.

    Parameters
    ----------
    y : array-like or torch.Tensor, shape (n,) or (n, c)
        Targets.
    n : int
        The number of samples.
    name : str, default "y"
        Its name.
    dtype, device
        As in :func:`check_matrix`.

    Returns
    -------
    torch.Tensor, shape (n, c)
    """
    t = to_tensor(y, name)
    if t.ndim == 1:
        t = t[:, None]
    if t.ndim != 2:
        raise ValueError(f"{name} must be 1-D (n_samples,) or 2-D (n_samples, n_outputs), got shape {tuple(t.shape)}")
    if t.shape[0] != n:
        raise ValueError(f"{name} has {t.shape[0]} rows but X has {n}: they must have the same number of samples")
    t = t.to(device=device, dtype=dtype if dtype is not None else torch.float32)
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains NaN or infinite values")
    return t


def check_same_features(X: torch.Tensor, d: int, name: str = "X", owner: str = "the model"):
    """Raise if ``X`` does not have ``d`` columns (scikit-learn's wording).

    Parameters
    ----------
    X : torch.Tensor, shape (n, d')
        The input.
    d : int
        The expected number of columns.
    name : str, default "X"
        Its name.
    owner : str, default "the model"
        Who expects d, for the message.

    Raises
    ------
    ValueError
        If d' != d.
    """
    if X.shape[1] != d:
        raise ValueError(f"{name} has {X.shape[1]} features, but {owner} is expecting {d} features as input.")


def check_square(A, name: str = "A", *, symmetric: bool = False) -> torch.Tensor:
    """``A`` as a finite square floating tensor (integers become float64), on its device and with its graph.

    Parameters
    ----------
    A : array-like or torch.Tensor
        The matrix, shape (d, d) with d >= 1.
    name : str
        Its name, for the error messages.
    symmetric : bool
        If True, an asymmetry beyond round-off (:data:`SYM_RTOL` of max|A|) is an error.

    Returns
    -------
    torch.Tensor
        ``A`` as a floating tensor.
    """
    A = to_tensor(A, name)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square matrix (d, d), got shape {tuple(A.shape)}")
    if A.shape[0] == 0:
        raise ValueError(f"{name} is empty (shape {tuple(A.shape)}); pass a d x d matrix with d >= 1")
    if not A.is_floating_point():
        A = A.to(torch.float64)
    if not bool(torch.isfinite(A).all()):
        bad = int((~torch.isfinite(A)).sum())
        raise ValueError(f"{name} contains {bad} NaN or infinite value(s); it was probably computed from "
                         "diverged values (check the model or data that produced it)")
    if symmetric:
        scale = float(A.detach().abs().max())
        asym = float((A.detach() - A.detach().T).abs().max())
        if asym > SYM_RTOL * scale:
            raise ValueError(f"{name} must be symmetric, but max|{name} - {name}^T| = {asym:.3g} is more than "
                             f"{SYM_RTOL:g} of max|{name}| = {scale:.3g}; pass a symmetric matrix (use "
                             f"({name} + {name}.T) / 2 if the asymmetry is round-off)")
    return A


# ----------------------------------------------------------------------------------------------------------------
# NumPy in, NumPy out: the linear models (lin-RFM, IRLS, the deep linear baselines) answer in the caller's kind


def is_numpy(x) -> bool:
    """Whether ``x`` came as something other than a torch tensor (NumPy, a list): the answer is then NumPy.

    Parameters
    ----------
    x : object
        An input.

    Returns
    -------
    bool
        True unless ``x`` is a torch tensor.
    """
    return not isinstance(x, torch.Tensor)


def as_input_kind(t: torch.Tensor, numpy_out: bool):
    """``t`` as a NumPy array (detached, on the CPU) when ``numpy_out``, else unchanged.

    Parameters
    ----------
    t : torch.Tensor
        A result.
    numpy_out : bool
        Whether the caller gave NumPy (:func:`is_numpy`).

    Returns
    -------
    numpy.ndarray or torch.Tensor
        The result in the caller's kind.
    """
    return t.detach().cpu().numpy() if numpy_out else t


def check_regression_data(X, y):
    """(X, y) of a linear regression as tensors: X a finite (n, d) matrix, y finite with n entries in X's dtype.

    Parameters
    ----------
    X : array-like
        (n, d) inputs.
    y : array-like
        (n,) or (n, 1) targets.

    Returns
    -------
    (torch.Tensor, torch.Tensor)
        X (n, d) and y (n,).
    """
    Xt = check_matrix(X, "X")
    yt = torch.as_tensor(np.asarray(y) if is_numpy(y) else y)
    if yt.ndim == 2 and yt.shape[1] == 1:
        yt = yt[:, 0]
    if yt.ndim != 1:
        raise ValueError(f"y must be 1-D with one target per row of X, got shape {tuple(yt.shape)}")
    if yt.shape[0] != Xt.shape[0]:
        raise ValueError(f"y has {yt.shape[0]} entries but X has {Xt.shape[0]} rows")
    yt = yt.to(dtype=Xt.dtype, device=Xt.device)
    if not bool(torch.isfinite(yt).all()):
        raise ValueError("y contains NaN or infinite values")
    return Xt, yt


def check_vector(w, d: int, like: torch.Tensor, name: str = "w") -> torch.Tensor:
    """A finite 1-D vector of length ``d`` in the dtype and on the device of ``like``.

    Parameters
    ----------
    w : array-like
        The vector.
    d : int
        Its length (the number of columns of X).
    like : torch.Tensor
        The tensor whose dtype and device it takes.
    name : str
        Its name, for the error messages.

    Returns
    -------
    torch.Tensor
        (d,) vector.
    """
    wt = torch.as_tensor(np.asarray(w) if is_numpy(w) else w).to(dtype=like.dtype, device=like.device)
    if wt.ndim != 1 or wt.shape[0] != d:
        raise ValueError(f"{name} must be a 1-D vector of length {d} (the number of columns of X), got shape "
                         f"{tuple(wt.shape)}")
    if not bool(torch.isfinite(wt).all()):
        raise ValueError(f"{name} contains NaN or infinite values")
    return wt


def check_iterations(iters) -> int:
    """A number of iterations or steps: an integer >= 0.

    Parameters
    ----------
    iters : int
        The number.

    Returns
    -------
    int
        ``iters``.
    """
    if isinstance(iters, bool) or not isinstance(iters, numbers.Integral) or iters < 0:
        raise ValueError(f"iters must be a non-negative integer, got {iters!r}")
    return int(iters)


def check_mask(mask, shape, device) -> torch.Tensor:
    """The observed entries of a matrix as a boolean tensor of ``shape`` on ``device`` (0/1 accepted), not empty.

    Parameters
    ----------
    mask : array-like
        True (or 1) where the matrix is observed.
    shape : tuple of int
        The matrix's shape.
    device : torch.device
        Where the mask goes.

    Returns
    -------
    torch.Tensor
        The boolean mask.
    """
    m = torch.as_tensor(np.asarray(mask) if is_numpy(mask) else mask, device=device)
    if tuple(m.shape) != tuple(shape):
        raise ValueError(f"mask must have the shape of Y {tuple(shape)}, got {tuple(m.shape)}")
    if m.dtype != torch.bool:
        if not bool(((m == 0) | (m == 1)).all()):
            raise ValueError("mask must be boolean (True where Y is observed) or 0/1")
        m = m.bool()
    if not bool(m.any()):
        raise ValueError("mask has no observed entry")
    return m


def check_observed(Y, mask):
    """A partly observed matrix: Y as a tensor with its unobserved entries set to zero (they are never read: NaN
    there is fine), the boolean mask, and whether the caller gave NumPy (to answer in kind).

    Parameters
    ----------
    Y : array-like
        (n, d) matrix.
    mask : array-like
        True where Y is observed.

    Returns
    -------
    (torch.Tensor, torch.Tensor, bool)
        Y with zeros where unobserved, the mask, and whether Y was NumPy.
    """
    numpy_out = is_numpy(Y)
    mask_np = np.asarray(mask, dtype=bool) if is_numpy(mask) else None
    Yt = check_matrix(np.where(mask_np, Y, 0.0) if (numpy_out and mask_np is not None
                                                    and mask_np.shape == np.shape(Y)) else Y, "Y")
    m = check_mask(mask, Yt.shape, Yt.device)
    return torch.where(m, Yt, torch.zeros((), dtype=Yt.dtype, device=Yt.device)), m, numpy_out


def check_eval_target(Y_eval, eval_mask, Yt: torch.Tensor, m: torch.Tensor):
    """(truth, entries to score) of a completion, for reporting only, or None without ``Y_eval``; the default
    entries are the unobserved ones.

    Parameters
    ----------
    Y_eval : array-like or None
        The full matrix.
    eval_mask : array-like or None
        The entries to score; None: those not in ``m``.
    Yt : torch.Tensor
        The observed matrix (its shape, dtype and device).
    m : torch.Tensor
        Its observed entries.

    Returns
    -------
    tuple or None
        (Y_eval as a tensor, the boolean entries to score), or None.
    """
    if Y_eval is None:
        return None
    Ye = check_matrix(Y_eval, "Y_eval").to(dtype=Yt.dtype, device=Yt.device)
    if tuple(Ye.shape) != tuple(Yt.shape):
        raise ValueError(f"Y_eval must have the shape of Y {tuple(Yt.shape)}, got {tuple(Ye.shape)}")
    return Ye, (check_mask(eval_mask, Yt.shape, Yt.device) if eval_mask is not None else ~m)


def check_numeric_input(X, name: str = "X"):
    """Raise a one-line error for array-likes that scikit-learn's ``check_array`` would convert silently or report
    with a dump of the data: strings (also numbers written as strings, which it parses), pandas columns of strings
    (named), complex values. Other input is left to the caller's validation; nothing is converted or returned.

    Parameters
    ----------
    X : object
        The input.
    name : str, default "X"
        Its name.
    """
    columns = getattr(X, "columns", None)
    dtypes = getattr(X, "dtypes", None)
    if columns is not None and dtypes is not None and hasattr(X, "iloc"):            # a pandas DataFrame
        bad = []
        for col, dt in zip(columns, dtypes):
            kind = getattr(dt, "kind", "O")
            if kind in "OSU" and any(isinstance(v, (str, bytes)) for v in X[col]):
                bad.append(col)
            elif kind == "c":
                raise ValueError(f"Complex data not supported: column {col!r} of {name} has dtype {dt}")
        if bad:
            example = next(v for v in X[bad[0]] if isinstance(v, (str, bytes)))
            raise TypeError(f"{name} must be numeric, but column(s) {bad} hold strings (e.g. {example!r}): encode "
                            "them (sklearn's OneHotEncoder or OrdinalEncoder), convert numbers written as text with "
                            f"pd.to_numeric, or drop them")
        return
    if not isinstance(X, (np.ndarray, list, tuple)):
        return
    try:
        arr = np.asarray(X)
    except (ValueError, TypeError):
        return                                                                       # ragged: the caller's error
    if arr.dtype.kind == "c":  # ValueError and this wording: scikit-learn's check_complex_data expects them
        raise ValueError(f"Complex data not supported: {name} has dtype {arr.dtype}; pass real values (e.g. "
                         f"{name}.real, or its absolute value)")
    if arr.dtype.kind in "SU" or (arr.dtype == object and any(isinstance(v, (str, bytes)) for v in arr.ravel())):
        example = next(v for v in arr.ravel() if isinstance(v, (str, bytes, np.str_, np.bytes_)))
        raise TypeError(f"{name} must be numeric, got strings (e.g. {example!r}); if they are numbers written as "
                        f"text, convert them first ({name} = np.asarray({name}, dtype=float))")


def check_label_types(labels, name: str = "y"):
    """Raise if an object array of class labels holds None (missing labels) or mixes strings with numbers: their
    classes cannot be sorted, and numpy's error ("'<' not supported between 'NoneType' and 'str'") hides why.

    Parameters
    ----------
    labels : array-like
        Class labels.
    name : str, default "y"
        Their name.
    """
    labels = np.asarray(labels)
    if labels.dtype != object:
        return
    flat = labels.ravel()
    missing = sum(v is None for v in flat)
    if missing:
        raise ValueError(f"{name} contains {missing} missing label(s) (None) among its {flat.size}: drop those "
                         "samples or give them a label")
    strings = sum(isinstance(v, (str, bytes)) for v in flat)
    if 0 < strings < flat.size:
        raise ValueError(f"{name} mixes string labels with {flat.size - strings} non-string label(s): use one type "
                         f"for all labels (e.g. {name} = np.asarray({name}).astype(str))")
