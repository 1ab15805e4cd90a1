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
    A = _to_tensor(A, name)
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
