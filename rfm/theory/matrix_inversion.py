r"""Matrix inversion by stochastic gradient descent with an adaptive (self-preconditioned) step, Newton--Schulz, and
an empirical order of convergence.

**The objective.** For a symmetric positive definite A (d x d) and a direction z, the per-sample loss::

    l_z(X) = 1/2 (X z)^T A (X z) - z^T X z,        grad l_z(X) = (A X - I) z z^T = -R z z^T,   R = I - A X,

is minimised by every X with X z = A^{-1} z, so X = A^{-1} minimises all of them at once (interpolation). For z
drawn uniformly from an orthonormal basis, E_z l_z(X) = (1/2 tr(X^T A X) - tr X) / d, whose minimiser is A^{-1}.
One *step* samples a batch of b orthonormal directions Z (d x b): coordinate vectors (columns of X, the default)
or the columns of a random orthogonal matrix. One *epoch* is d / b steps.

**The steps** (:func:`sgd_inverse`), with P = Z Z^T:

* ``step="adaptive"`` -- X <- X + X_t R Z Z^T: the stochastic gradient multiplied by the current iterate X_t, an
  estimate of the inverse Hessian A^{-1} that the method itself is learning (a matrix step size adapted every
  step). With b = d and Z = I this is one Newton--Schulz step X <- 2X - X A X.
* ``step="frozen"`` -- the same with the initial X_0 in place of X_t (a matrix step that is not adapted).
* ``step=eta`` (a number) -- plain SGD with a fixed scalar step: X <- X + eta R Z Z^T.

**What we prove here** (our construction, not read in a paper). With ``sampling="reshuffle"`` an epoch visits an
orthonormal basis once. In that basis a step changes only the visited columns of R Q, each to R_now (R Q)_j, so
with e = ``||R||_F``: if e_0 < 1 then every column norm can only shrink and the epoch ends with::

    e_{epoch+1} <= e_epoch^2

for any order and any batch size, the bound Newton--Schulz satisfies (R <- R^2). The iteration is
defined for any invertible A (the identity R' = R - (I - R) R P does not need symmetry); the loss l_z needs A
symmetric positive definite. With ``sampling="replace"`` the directions are drawn afresh each step, some are
missed in an epoch, and the bound fails. A fixed scalar step decouples the directions: an epoch of fixed-step SGD
is one gradient-descent step R <- (I - eta A) R, linear convergence at rate ``max |1 - eta lambda|``.

:func:`convergence_order` fits the slope p of log e_{t+1} against log e_t (p = 1 linear, p = 2 quadratic);
:func:`newton_schulz` is the deterministic quadratic reference; :func:`spd_matrix` and :func:`start_near_inverse`
draw the test problems.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from .._checks import check_choice, check_number, check_square
from ..metrics import fit_scaling_law
from ..utils import make_generator

__all__ = ["InversionRun", "OrderFit", "convergence_order", "newton_schulz", "residual_norm", "richardson_step",
           "sgd_inverse", "spd_matrix", "start_near_inverse"]


class InversionRun(NamedTuple):
    """The result of an iterative inversion.

    ``X`` is the last iterate (the input's dtype and device); ``errors`` the residual ``|``||I - A X||``|_F`` before the
    first step and after each step (Newton--Schulz) or epoch (SGD), a float64 CPU tensor; ``diverged`` is True when
    the error passed ``blowup`` or stopped being finite (the run stopped there).

    Parameters
    ----------
    X : torch.Tensor, shape (d, d)
        The last iterate.
    errors : torch.Tensor, float64
        The residuals.
    diverged : bool
        Whether the run diverged.
    """

    X: torch.Tensor
    errors: torch.Tensor
    diverged: bool


class OrderFit(NamedTuple):
    """Least-squares fit log e_{t+1} = order * log e_t + log_constant over ``pairs`` consecutive pairs.

    Parameters
    ----------
    order : float
        The slope p.
    log_constant : float
        log C.
    pairs : int
        The pairs used.
    """

    order: float
    log_constant: float
    pairs: int


def _check_pair(A, X0):
    A = check_square(A, "A")
    X0 = check_square(X0, "X0")
    if X0.shape != A.shape:
        raise ValueError(f"X0 must have A's shape {tuple(A.shape)}, got {tuple(X0.shape)}")
    if X0.device != A.device:
        raise ValueError(f"X0 is on {X0.device} but A is on {A.device}; put both on one device")
    dtype = torch.promote_types(A.dtype, X0.dtype)
    return A.detach().to(dtype), X0.detach().to(dtype)


def residual_norm(A, X) -> float:
    """``|``||I - A X||``|_F``, the error of X as an inverse of A (zero exactly at X = A^{-1}).

    Parameters
    ----------
    A : array-like or torch.Tensor, shape (d, d)
        The matrix.
    X : array-like or torch.Tensor, shape (d, d)
        A candidate inverse.

    Returns
    -------
    float
    """
    A, X = _check_pair(A, X)
    eye = torch.eye(A.shape[0], dtype=A.dtype, device=A.device)
    return float(torch.linalg.matrix_norm(eye - A @ X))


def _stop(err, tol, blowup):
    """(stop, diverged) for the error just measured."""
    if not math.isfinite(err) or err > blowup:
        return True, True
    return (tol is not None and err <= tol), False


def newton_schulz(A, X0, steps: int, *, tol: float | None = None, blowup: float = 1e8) -> InversionRun:
    """Newton--Schulz: X <- 2 X - X A X, so that I - A X_{t+1} = (I - A X_t)^2 exactly.

    It converges to A^{-1} if and only if the spectral radius of I - A X_0 is below 1, and then quadratically.
    ``steps`` is the most steps; the run stops early once the error is at most ``tol``, or above ``blowup``.

    Parameters
    ----------
    A : array-like or torch.Tensor, shape (d, d)
        The matrix.
    X0 : array-like or torch.Tensor, shape (d, d)
        The initial iterate.
    steps : int
        The most steps.
    tol : float, optional
        Stop once the error is at most this.
    blowup : float, default 1e8
        Stop once the error is above this.

    Returns
    -------
    InversionRun
    """
    A, X = _check_pair(A, X0)
    check_number("steps", steps, low=0, integer=True)
    check_number("blowup", blowup, low=0, low_inclusive=False)
    if tol is not None:
        check_number("tol", tol, low=0)
    eye = torch.eye(A.shape[0], dtype=A.dtype, device=A.device)
    errors = [float(torch.linalg.matrix_norm(eye - A @ X))]
    diverged = _stop(errors[0], None, blowup)[1]
    for _ in range(steps if not diverged else 0):
        X = 2 * X - X @ (A @ X)
        errors.append(float(torch.linalg.matrix_norm(eye - A @ X)))
        stop, diverged = _stop(errors[-1], tol, blowup)
        if stop:
            break
    return InversionRun(X, torch.tensor(errors, dtype=torch.float64), diverged)


def sgd_inverse(A, X0, epochs: int, *, batch_size: int = 1, step="adaptive", directions: str = "coordinates",
                sampling: str = "reshuffle", seed=0, tol: float | None = None, blowup: float = 1e8) -> InversionRun:
    """SGD on the per-direction losses l_z (module docstring) for ``epochs`` epochs of d / batch_size steps.

    ``step`` is ``"adaptive"`` (the current iterate X_t as the step: locally quadratic per epoch), ``"frozen"`` (the
    initial X_0 as the step) or a positive number (plain SGD with that fixed step). ``directions`` is
    ``"coordinates"`` (the columns of X) or ``"orthogonal"`` (a random orthonormal basis). ``sampling`` is
    ``"reshuffle"`` (each epoch one pass over a freshly shuffled basis, without replacement) or ``"replace"`` (each
    step a fresh batch). ``batch_size`` must divide d. ``seed`` (an int or a torch.Generator) fixes the order of the
    directions. Errors ``|``||I - A X||``|_F`` are recorded per epoch; the run stops early at ``tol`` or above
    ``blowup``.

    Parameters
    ----------
    A : array-like or torch.Tensor, shape (d, d)
        The matrix.
    X0 : array-like or torch.Tensor, shape (d, d)
        The initial iterate.
    epochs : int
        Epochs (>= 0).
    batch_size : int, default 1
        Directions per step, dividing d.
    step : {"adaptive", "frozen"} or float, default "adaptive"
        The step.
    directions : {"coordinates", "orthogonal"}, default "coordinates"
        The directions.
    sampling : {"reshuffle", "replace"}, default "reshuffle"
        How directions are drawn.
    seed : int or torch.Generator, default 0
        Seeds the draw.
    tol : float, optional
        Stop once the error is at most this.
    blowup : float, default 1e8
        Stop once the error is above this.

    Returns
    -------
    InversionRun
    """
    A, X = _check_pair(A, X0)
    d = A.shape[0]
    check_number("epochs", epochs, low=0, integer=True)
    check_number("batch_size", batch_size, low=1, high=d, integer=True)
    if d % batch_size:
        raise ValueError(f"batch_size must divide d = {d} (an epoch is d / batch_size steps), got {batch_size}")
    if isinstance(step, str):
        check_choice("step", step, ("adaptive", "frozen"))
    else:
        check_number("step", step, low=0, low_inclusive=False)
    check_choice("directions", directions, ("coordinates", "orthogonal"))
    check_choice("sampling", sampling, ("reshuffle", "replace"))
    check_number("blowup", blowup, low=0, low_inclusive=False)
    if tol is not None:
        check_number("tol", tol, low=0)
    g = make_generator(seed)
    X = X.clone()
    X_frozen = X.clone() if step == "frozen" else None
    eye = torch.eye(d, dtype=A.dtype, device=A.device)
    errors = [float(torch.linalg.matrix_norm(eye - A @ X))]
    diverged = _stop(errors[0], None, blowup)[1]
    steps = d // batch_size

    def basis():
        if directions == "coordinates":
            return torch.randperm(d, generator=g)
        return torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))[0].to(A.dtype).to(A.device)

    for _ in range(epochs if not diverged else 0):
        Q = basis() if sampling == "reshuffle" else None
        for k in range(steps):
            if sampling == "reshuffle":
                Z = Q[k * batch_size:(k + 1) * batch_size] if directions == "coordinates" else \
                    Q[:, k * batch_size:(k + 1) * batch_size]
            else:
                Z = basis()
                Z = Z[:batch_size] if directions == "coordinates" else Z[:, :batch_size]
            if directions == "coordinates":
                # Z holds column indices: R Z = I[:, S] - A X[:, S], and only the columns S of X move
                RZ = eye[:, Z] - A @ X[:, Z]
                if step == "adaptive":
                    X[:, Z] += X @ RZ
                elif step == "frozen":
                    X[:, Z] += X_frozen @ RZ
                else:
                    X[:, Z] += step * RZ
            else:
                RZ = Z - A @ (X @ Z)
                update = X @ RZ if step == "adaptive" else X_frozen @ RZ if step == "frozen" else step * RZ
                X = X + update @ Z.T
        errors.append(float(torch.linalg.matrix_norm(eye - A @ X)))
        stop, diverged = _stop(errors[-1], tol, blowup)
        if stop:
            break
    return InversionRun(X, torch.tensor(errors, dtype=torch.float64), diverged)


def richardson_step(A) -> float:
    """The best fixed scalar step for a symmetric positive definite A, 2 / (lambda_min + lambda_max).

    Fixed-step SGD (and gradient descent) then contracts ``||I - A X||`` by (kappa - 1) / (kappa + 1) per epoch.

    Parameters
    ----------
    A : array-like or torch.Tensor, shape (d, d)
        A symmetric positive definite matrix.

    Returns
    -------
    float
    """
    A = check_square(A, "A", symmetric=True)
    ev = torch.linalg.eigvalsh(A.detach().to(torch.float64))
    if float(ev[0]) <= 0:
        raise ValueError(f"A must be positive definite, but its smallest eigenvalue is {float(ev[0]):.3g}")
    return float(2.0 / (ev[0] + ev[-1]))


def convergence_order(errors, *, floor: float = 1e-10, ceiling: float | None = None, min_pairs: int = 2) -> OrderFit:
    """The empirical order of convergence: the least-squares slope of log e_{t+1} against log e_t.

    Uses the consecutive pairs (e_t, e_{t+1}) with e_t <= ``ceiling`` (no upper limit when None) and e_{t+1} >=
    ``floor`` (above the round-off plateau), both positive and finite. A sequence with e_{t+1} = C e_t^p gives
    order p exactly; linear convergence gives 1. Fewer than ``min_pairs`` pairs in the window is an error.

    Parameters
    ----------
    errors : array-like of float
        e_0, e_1, ...
    floor : float, default 1e-10
        The smallest e_{t+1} used.
    ceiling : float, optional
        The largest e_t used.
    min_pairs : int, default 2
        The fewest pairs accepted.

    Returns
    -------
    OrderFit

    Raises
    ------
    ValueError
        If fewer than ``min_pairs`` pairs are in the window.
    """
    e = errors.detach().cpu().double().numpy() if isinstance(errors, torch.Tensor) else np.asarray(errors, float)
    if e.ndim != 1:
        raise ValueError(f"errors must be a 1-D sequence, got shape {e.shape}")
    check_number("floor", floor, low=0)
    if ceiling is not None:
        check_number("ceiling", ceiling, low=0, low_inclusive=False)
    check_number("min_pairs", min_pairs, low=2, integer=True)
    a, b = e[:-1], e[1:]
    keep = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0) & (b >= floor)
    if ceiling is not None:
        keep &= a <= ceiling
    if int(keep.sum()) < min_pairs:
        raise ValueError(f"only {int(keep.sum())} pair(s) (e_t, e_t+1) lie in the window e_t <= {ceiling}, "
                         f"e_t+1 >= {floor}; need at least {min_pairs} (run longer, or widen the window)")
    if np.ptp(a[keep]) == 0:
        raise ValueError("all the errors in the window are equal; the order is undefined (a stalled run)")
    law = fit_scaling_law(a[keep], b[keep])  # the package's one log-log fit: e_{t+1} = C e_t^order
    return OrderFit(law.slope, math.log(law.coef), int(keep.sum()))


def spd_matrix(d: int, kappa: float, *, seed=0, dtype=torch.float64, device=None) -> torch.Tensor:
    """A random symmetric positive definite d x d matrix Q diag(lambda) Q^T with eigenvalues log-spaced from 1 to
    ``kappa`` (its condition number) and Q a random orthogonal matrix (drawn on the CPU from ``seed``).

    Parameters
    ----------
    d : int
        The size.
    kappa : float
        The condition number (>= 1).
    seed : int or torch.Generator, default 0
        Seeds the draw.
    dtype : torch.dtype, default torch.float64
        The dtype.
    device : torch.device or str, optional
        The device.

    Returns
    -------
    torch.Tensor, shape (d, d)
    """
    check_number("d", d, low=1, integer=True)
    check_number("kappa", kappa, low=1)
    g = make_generator(seed)
    Q = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))[0]
    ev = torch.logspace(0, math.log10(kappa), d, dtype=torch.float64)
    A = (Q * ev) @ Q.T
    return (0.5 * (A + A.T)).to(dtype=dtype, device=device)


def start_near_inverse(A, radius: float, *, seed=0) -> torch.Tensor:
    """An initial X_0 = A^{-1} (I - radius U) with U a random orthogonal matrix, so that I - A X_0 = radius U:
    its spectral norm and spectral radius are both ``radius``, its Frobenius norm ``radius`` sqrt(d).

    Parameters
    ----------
    A : array-like or torch.Tensor, shape (d, d)
        An invertible matrix.
    radius : float
        The spectral radius of I - A X_0.
    seed : int or torch.Generator, default 0
        Seeds the draw.

    Returns
    -------
    torch.Tensor, shape (d, d)
        In A's dtype.
    """
    A = check_square(A, "A")
    check_number("radius", radius, low=0)
    g = make_generator(seed)
    d = A.shape[0]
    U = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))[0].to(dtype=A.dtype, device=A.device)
    eye = torch.eye(d, dtype=A.dtype, device=A.device)
    return torch.linalg.solve(A.detach(), eye - radius * U)
