"""Device, dtype and randomness helpers, and PSD matrix powers."""
from __future__ import annotations

import random

import numpy as np
import torch

from ._checks import check_number


def get_device(device=None) -> torch.device:
    """``None`` means CUDA when it is present, else CPU; a string or ``torch.device`` is used as given."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={str(device)!r} was requested but CUDA is not available on this machine")
    return device


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and torch (CPU and CUDA) and return a CPU ``torch.Generator`` seeded the same way.

    The package itself never reads global random state: every random choice takes a generator. This helper is for
    chapter code (network initialisation, data shuffling) that uses the global state."""
    check_number("seed", seed, low=0, integer=True)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return make_generator(seed)


def make_generator(seed) -> torch.Generator:
    """A CPU generator: random draws are made on the CPU and moved, so results do not depend on the device."""
    if isinstance(seed, torch.Generator):
        return seed
    check_number("seed", seed, low=0, integer=True)
    g = torch.Generator(device="cpu")
    g.manual_seed(int(seed))
    return g


def symmetrize(A: torch.Tensor) -> torch.Tensor:
    return 0.5 * (A + A.transpose(-1, -2))


def psd_eigh(A: torch.Tensor):
    """Eigen-decomposition of the symmetric part of ``A`` with negative eigenvalues (rounding) clamped to 0.

    Eigenvalues come back in ascending order, as ``torch.linalg.eigh`` gives them."""
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"expected a square matrix, got shape {tuple(A.shape)}")
    evals, evecs = torch.linalg.eigh(symmetrize(A))
    return evals.clamp_min(0), evecs


def psd_power(A: torch.Tensor, power: float) -> torch.Tensor:
    """``A**power`` for a symmetric PSD matrix, via its eigen-decomposition (negative rounding eigenvalues -> 0).

    A 1-D input is treated as the diagonal of a diagonal matrix. ``power`` may be any real > 0 (0 gives the
    projector onto the range)."""
    check_number("power", power, low=0)
    if A.ndim == 1:
        return A.clamp_min(0) ** power
    if power == 1:
        return symmetrize(A)
    evals, evecs = psd_eigh(A)
    if power == 0:
        scaled = (evals > 0).to(A.dtype)
    else:
        scaled = evals**power
    return (evecs * scaled) @ evecs.T


def top_eigenvectors(A: torch.Tensor, k: int) -> torch.Tensor:
    """The ``k`` leading eigenvectors of a symmetric matrix, as the columns of a (d, k) matrix, largest first."""
    check_number("k", k, low=1, integer=True)
    _, evecs = torch.linalg.eigh(symmetrize(A))
    return evecs[:, -k:].flip(-1)


def to_numpy(x):
    """A tensor (any device, with or without grad) as a NumPy array; other inputs through ``np.asarray``."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)
