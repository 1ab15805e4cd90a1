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


_FLOAT_DTYPES = {"float32": torch.float32, "float64": torch.float64, "float": torch.float32, "double": torch.float64}


def resolve_dtype(dtype) -> torch.dtype:
    """Accept ``torch.float32``/``torch.float64`` or their names; anything else is an error."""
    if isinstance(dtype, str):
        if dtype not in _FLOAT_DTYPES:
            raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
        return _FLOAT_DTYPES[dtype]
    if dtype in (torch.float32, torch.float64):
        return dtype
    raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")


def check_number(name: str, value, *, low=None, low_inclusive=True, high=None, high_inclusive=True, integer=False):
    """Check a scalar hyperparameter lies in a range; return it unchanged."""
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
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(map(str, choices))}, got {value!r}")
    return value


def _to_tensor(x, name: str) -> torch.Tensor:
    if x is None:
        raise ValueError(f"{name} is None; pass an array")
    if hasattr(x, "toarray") or type(x).__module__.startswith("scipy.sparse"):
        raise TypeError(f"{name} is a sparse matrix, but dense data is required; convert it with {name}.toarray()")
    if isinstance(x, torch.Tensor):
        if x.layout != torch.strided:
            raise TypeError(f"{name} is a sparse tensor ({x.layout}), but dense data is required; use {name}.to_dense()")
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

    A tensor that requires grad keeps its graph (the conversion is differentiable)."""
    t = _to_tensor(X, name)
    if t.dtype == torch.bool:
        raise TypeError(f"{name} must be numeric, got dtype torch.bool")
    if t.ndim != 2:
        hint = " (reshape a single feature with X.reshape(-1, 1), a single sample with X.reshape(1, -1))" if t.ndim == 1 else ""
        raise ValueError(f"{name} must be a 2-D array of shape (n_samples, n_features), got shape {tuple(t.shape)}{hint}")
    if t.shape[0] < min_rows:
        raise ValueError(f"{name} must have at least {min_rows} sample(s), got {t.shape[0]}")
    if t.shape[1] < 1:
        raise ValueError(f"{name} must have at least one feature, got shape {tuple(t.shape)}")
    target_dtype = dtype if dtype is not None else (t.dtype if t.is_floating_point() else torch.float32)
    t = t.to(device=device if device is not None else t.device, dtype=target_dtype)
    if not bool(torch.isfinite(t).all()):
        bad = int((~torch.isfinite(t)).sum())
        overflow = bool(torch.isfinite(_to_tensor(X, name).double()).all())
        hint = (f" after conversion to {t.dtype}: its values exceed that type's range (scale the data, or use "
                "float64)") if overflow else ""
        raise ValueError(f"{name} contains {bad} NaN or infinite value(s){hint}")
    return t


def check_targets(y, n: int, name: str = "y", *, dtype=None, device=None) -> torch.Tensor:
    """Return regression targets as a finite (n, c) tensor; 1-D input becomes one column."""
    t = _to_tensor(y, name)
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
    """Raise if ``X`` does not have ``d`` columns (scikit-learn's wording)."""
    if X.shape[1] != d:
        raise ValueError(f"{name} has {X.shape[1]} features, but {owner} is expecting {d} features as input.")


def check_numeric_input(X, name: str = "X"):
    """Raise a one-line error for array-likes that scikit-learn's ``check_array`` would convert silently or report
    with a dump of the data: strings (also numbers written as strings, which it parses), pandas columns of strings
    (named), complex values. Other input is left to the caller's validation; nothing is converted or returned."""
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
    classes cannot be sorted, and numpy's error ("'<' not supported between 'NoneType' and 'str'") hides why."""
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
