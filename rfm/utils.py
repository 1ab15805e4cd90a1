"""Device, dtype and randomness helpers, and PSD matrix powers."""
from __future__ import annotations

import numbers
import random

import numpy as np
import torch

from ._checks import check_number, check_square, to_tensor


def get_device(device=None) -> torch.device:
    """``None`` means CUDA when it is present, else CPU; a string or ``torch.device`` is used as given.

    Parameters
    ----------
    device : str or torch.device, optional
        The device.

    Returns
    -------
    torch.device
    """
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if isinstance(device, bool) or not isinstance(device, (str, int, torch.device)):
        raise TypeError(f"device must be None, a string such as 'cpu' or 'cuda', or a torch.device, got {device!r}")
    try:
        device = torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"device={device!r} is not a device torch knows; use 'cpu', 'cuda', 'cuda:0' or None "
                         f"(CUDA when present)") from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={str(device)!r} was requested but CUDA is not available on this machine")
    return device


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and torch (CPU and CUDA) and return a CPU ``torch.Generator`` seeded the same way.

    The package itself never reads global random state: every random choice takes a generator. This helper is for
    chapter code (network initialisation, data shuffling) that uses the global state.

    Parameters
    ----------
    seed : int
        The seed.

    Returns
    -------
    torch.Generator
        On the CPU.
    """
    check_number("seed", seed, low=0, integer=True)
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002  (the global stream np.random.* reads: no Generator seeds it)
    torch.manual_seed(seed)
    return make_generator(seed)


def check_generator(generator) -> torch.Generator:
    """A CPU ``torch.Generator`` from a seed (an integer >= 0) or a CPU generator (returned as it is).

    Parameters
    ----------
    generator : int or torch.Generator
        A seed, or a generator on the CPU (random draws are made on the CPU and moved).

    Returns
    -------
    torch.Generator
        The generator, seeded with ``generator`` when it is an integer.
    """
    if isinstance(generator, torch.Generator):
        if generator.device.type != "cpu":
            raise ValueError(f"generator must be a CPU torch.Generator (random draws are made on the CPU and "
                             f"moved), got one on {generator.device}; use torch.Generator().manual_seed(seed)")
        return generator
    if isinstance(generator, bool) or not isinstance(generator, numbers.Integral):
        raise TypeError(f"generator must be an integer seed or a torch.Generator, got {generator!r} of type "
                        f"{type(generator).__name__}")
    if generator < 0:
        raise ValueError(f"generator (a seed) must be >= 0, got {generator!r}")
    return make_generator(int(generator))


def make_generator(seed) -> torch.Generator:
    """A CPU generator: random draws are made on the CPU and moved, so results do not depend on the device.

    Parameters
    ----------
    seed : int or torch.Generator
        A seed, or a generator (returned as it is).

    Returns
    -------
    torch.Generator
    """
    if isinstance(seed, torch.Generator):
        return seed
    check_number("seed", seed, low=0, integer=True)
    g = torch.Generator(device="cpu")
    g.manual_seed(int(seed))
    return g


def symmetrize(A: torch.Tensor) -> torch.Tensor:
    """The symmetric part ``(A + A^T) / 2`` of a matrix (or of each matrix in a batch).

    Parameters
    ----------
    A : torch.Tensor, shape (..., d, d)
        Matrices.

    Returns
    -------
    torch.Tensor, shape (..., d, d)
    """
    return 0.5 * (A + A.transpose(-1, -2))


def psd_eigh(A: torch.Tensor):
    """Eigen-decomposition of the symmetric part of ``A`` with negative eigenvalues (rounding) clamped to 0.

    Eigenvalues come back in ascending order, as ``torch.linalg.eigh`` gives them.

    Parameters
    ----------
    A : torch.Tensor, shape (d, d)
        A symmetric matrix.

    Returns
    -------
    evals : torch.Tensor, shape (d,)
        Clamped at 0, ascending.
    evecs : torch.Tensor, shape (d, d)
        Columns.
    """
    A = check_square(A, "A")
    evals, evecs = torch.linalg.eigh(symmetrize(A))
    return evals.clamp_min(0), evecs


def psd_power(A: torch.Tensor, power: float) -> torch.Tensor:
    """``A**power`` for a symmetric PSD matrix, via its eigen-decomposition (negative rounding eigenvalues -> 0).

    A 1-D input is treated as the diagonal of a diagonal matrix. ``power`` may be any real > 0 (0 gives the
    projector onto the range); ``power=1`` clamps the negative eigenvalues, giving the nearest PSD matrix. A matrix
    that is not square, not symmetric beyond round-off, or not finite is an error.

    Parameters
    ----------
    A : torch.Tensor, shape (d, d) or (d,)
        A symmetric PSD matrix, or a diagonal.
    power : float
        The exponent (>= 0).

    Returns
    -------
    torch.Tensor, the shape of A
    """
    check_number("power", power, low=0)
    A = to_tensor(A, "A")
    if A.ndim == 1:
        if A.numel() == 0:
            raise ValueError("A is empty; pass a symmetric matrix (d, d) or the diagonal (d,) of a diagonal one")
        if not A.is_floating_point():
            A = A.to(torch.float64)
        if not bool(torch.isfinite(A).all()):
            raise ValueError("A (a diagonal) contains NaN or infinite values")
        if power == 0:  # the projector onto the range, as for a matrix (0 ** 0 would give 1 on the null space)
            return (A > 0).to(A.dtype)
        return A.clamp_min(0) ** power
    if A.ndim != 2:
        raise ValueError(f"A must be a symmetric matrix (d, d) or the diagonal (d,) of a diagonal one, got shape "
                         f"{tuple(A.shape)}")
    A = check_square(A, "A", symmetric=True)
    evals, evecs = psd_eigh(A)
    if power == 0:
        scaled = (evals > 0).to(A.dtype)
    else:
        scaled = evals**power
    return (evecs * scaled) @ evecs.T


def top_eigenvectors(A: torch.Tensor, k: int) -> torch.Tensor:
    """The ``k`` leading eigenvectors of a symmetric matrix, as the columns of a (d, k) matrix, largest first.

    Parameters
    ----------
    A : torch.Tensor, shape (d, d)
        A symmetric matrix.
    k : int
        How many.

    Returns
    -------
    torch.Tensor, shape (d, k)
    """
    check_number("k", k, low=1, integer=True)
    A = check_square(A, "A", symmetric=True)
    if k > A.shape[0]:
        raise ValueError(f"k must be <= {A.shape[0]}, the size of the {A.shape[0]} x {A.shape[0]} matrix A (it has "
                         f"only {A.shape[0]} eigenvectors), got k={k}")
    _, evecs = torch.linalg.eigh(symmetrize(A))
    return evecs[:, -k:].flip(-1)


def to_numpy(x):
    """A tensor (any device, with or without grad) as a NumPy array; other inputs through ``np.asarray``.

    Parameters
    ----------
    x : torch.Tensor or array-like
        The input.

    Returns
    -------
    numpy.ndarray
    """
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)
