r"""Measures of training curves: when a series first reaches a level, per-mode onsets, plateaus and drops.

A curve is a sequence of values recorded at steps (losses, accuracies, a mode's size). These are the package's one
implementation of each measure; the chapters and the modules of :mod:`rfm.nets` use them:

* :func:`first_reaching` -- the first recorded step at which a series reaches a level (from below, or falling to
  it with ``below=True``); :func:`mode_onsets` applies it to every column of a (T, k) series, at a fraction of
  each column's target;
* :func:`plateau_fraction` -- the share of a loss curve before the loss first falls below (1 - tol) times its
  initial value; :func:`plateau_levels` -- the levels a loss rests at;
* :func:`loss_drops` / :func:`count_drops` -- the distinct drops of a loss curve; :func:`count_spikes` -- its
  spikes (catapults);
* :func:`logistic_mode` and :func:`logistic_onset` -- the closed form of one mode learned from a small
  initialisation, the solution of dx/dt = r x (1 - x / x_inf), and the time it reaches a fraction of x_inf.

The log-log slope of a curve is :func:`rfm.models.transfer.fit_scaling_law` (``.slope``).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .._checks import check_number

__all__ = ["count_drops", "count_spikes", "first_reaching", "half_time", "largest_spike", "logistic_mode",
           "logistic_onset", "loss_drops", "mode_onsets", "plateau_fraction", "plateau_levels", "rescaled_gap"]


def _series(values, name: str) -> np.ndarray:
    a = np.asarray(values.detach().cpu() if isinstance(values, torch.Tensor) else values, dtype=float)
    if a.ndim != 1 or a.size < 2:
        raise ValueError(f"{name} must be a 1-D series of at least 2 values, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return a


def first_reaching(steps, values, level: float, *, below: bool = False, default=None):
    """The first step whose value is >= ``level`` (``below``: <= ``level``).

    Parameters
    ----------
    steps : sequence
        The steps (or epochs, iterations) at which ``values`` were recorded.
    values : sequence of float
        The series, one value per step.
    level : float
        The level to reach.
    below : bool
        If True, the first step whose value falls to ``level`` or below (a loss); else rises to it or above.
    default : object
        What to return when no value reaches the level (None by default).

    Returns
    -------
    object
        The step, or ``default``.

    Examples
    --------
    >>> first_reaching([0, 5, 10, 15], [0.0, 0.2, 0.99, 1.0], 0.99)
    10
    """
    steps, values = list(steps), list(values)
    if len(steps) != len(values):
        raise ValueError(f"steps and values must have the same length, got {len(steps)} and {len(values)}")
    for s_, v in zip(steps, values):
        if (v <= level) if below else (v >= level):
            return s_
    return default


def mode_onsets(steps, series, targets=None, *, fraction: float = 0.5, below: bool = False) -> list:
    """For each column j of ``series`` (T, k), the first step at which it reaches ``fraction * targets[j]``
    (:func:`first_reaching`; from below, or with ``below=True`` falling to it).

    Parameters
    ----------
    steps : sequence
        The T steps at which the rows of ``series`` were recorded.
    series : array-like
        (T, k) values, one column per mode (a 1-D series is one column).
    targets : array-like, optional
        One target per column; by default each column's last value.
    fraction : float
        The fraction of the target to reach, in [0, 1].
    below : bool
        Whether the series falls to the level (True) or rises to it.

    Returns
    -------
    list
        One step per column, None where the level is never reached.
    """
    S = np.asarray(series.detach().cpu() if isinstance(series, torch.Tensor) else series, dtype=float)
    if S.ndim == 1:
        S = S[:, None]
    steps = list(steps)
    if S.ndim != 2 or S.shape[0] != len(steps):
        raise ValueError(f"series must be (T, k) with T = len(steps) = {len(steps)}, got shape {S.shape}")
    check_number("fraction", fraction, low=0, high=1)
    if targets is None:
        targets = S[-1]
    targets = np.asarray(targets.detach().cpu() if isinstance(targets, torch.Tensor) else targets, dtype=float)
    if targets.shape != (S.shape[1],):
        raise ValueError(f"targets must have one value per column ({S.shape[1]}), got shape {targets.shape}")
    return [first_reaching(steps, S[:, j], fraction * targets[j], below=below) for j in range(S.shape[1])]


def plateau_fraction(loss, *, tol: float = 0.01) -> float:
    """The fraction of the curve before the loss first falls below (1 - ``tol``) times its initial value.

    Parameters
    ----------
    loss : sequence of float
        A finite loss curve of at least two values, sampled at equal intervals.
    tol : float
        The relative drop, in (0, 1], that ends the plateau.

    Returns
    -------
    float
        The index of the first value below (1 - tol) loss[0], divided by the length; 1.0 if there is none.

    Examples
    --------
    >>> plateau_fraction([1.0, 0.99, 0.97, 0.5, 0.1], tol=0.05)
    0.6
    """
    a = _series(loss, "loss")
    check_number("tol", tol, low=0, low_inclusive=False, high=1)
    below = np.nonzero(a < (1 - tol) * a[0])[0]
    return 1.0 if below.size == 0 else float(below[0]) / len(a)


def plateau_levels(loss, levels, *, tol: float = 0.1, min_fraction: float = 0.02) -> list:
    """The ``levels`` at which the loss rests: those with at least ``min_fraction`` of the samples within ``tol`` of
    the level (e.g. levels 0..k-1 for a Barlow Twins loss that falls by one per learned mode).

    Parameters
    ----------
    loss : sequence of float
        A finite loss curve.
    levels : iterable of float
        The candidate levels.
    tol : float
        How close to a level a sample must be.
    min_fraction : float
        The share of the samples, in (0, 1], that must be that close.

    Returns
    -------
    list
        The levels the loss rests at, in the order given.
    """
    a = _series(loss, "loss")
    check_number("tol", tol, low=0, low_inclusive=False)
    check_number("min_fraction", min_fraction, low=0, low_inclusive=False, high=1)
    return [lv for lv in levels if float(np.mean(np.abs(a - lv) <= tol)) >= min_fraction]


def loss_drops(loss, *, rel_drop: float = 0.1, window: float = 0.05) -> list[dict]:
    """The distinct drops of a loss curve sampled at equal intervals: a drop is a run of windows of
    ``window * len(loss)`` samples (at least 1) over each of which the loss falls by at least ``rel_drop`` times
    its initial value; overlapping windows are merged. Returns one {"start", "end", "size"} per drop (indices
    into ``loss``; size = loss[start] - loss[end]).

    Parameters
    ----------
    loss : sequence of float
        A finite loss curve of at least two values.
    rel_drop : float
        The fall over one window, relative to the initial loss, that counts.
    window : float
        The window's length as a fraction of the curve, in (0, 1].

    Returns
    -------
    list of dict
        One {"start", "end", "size"} per drop.
    """
    a = _series(loss, "loss")
    check_number("rel_drop", rel_drop, low=0, low_inclusive=False)
    check_number("window", window, low=0, low_inclusive=False, high=1)
    w = max(1, int(round(window * len(a))))
    thr = rel_drop * abs(a[0])
    hits = [i for i in range(len(a) - w) if a[i] - a[i + w] >= thr]
    drops, cur = [], None
    for i in hits:
        if cur is not None and i <= cur[1]:
            cur[1] = i + w
        else:
            if cur is not None:
                drops.append(cur)
            cur = [i, i + w]
    if cur is not None:
        drops.append(cur)
    return [{"start": s, "end": e, "size": float(a[s] - a[e])} for s, e in drops]


def count_drops(loss, *, rel_drop: float = 0.1, window: float = 0.05) -> int:
    """The number of distinct drops of :func:`loss_drops`.

    Parameters
    ----------
    loss : sequence of float
        A finite loss curve.
    rel_drop, window : float
        As in :func:`loss_drops`.

    Returns
    -------
    int
        The number of drops.
    """
    return len(loss_drops(loss, rel_drop=rel_drop, window=window))


def logistic_mode(t, rate: float, x0: float, x_inf: float):
    """x(t) = x_inf / (1 + (x_inf / x0 - 1) exp(-rate t)), the solution of dx/dt = rate x (1 - x / x_inf) with
    x(0) = x0: one mode of a small-initialisation factorisation (x = its squared singular value).

    Parameters
    ----------
    t : float or array-like
        Times.
    rate : float
        > 0.
    x0 : float
        x(0) > 0.
    x_inf : float
        The limit (> 0).

    Returns
    -------
    torch.Tensor, float64, the shape of t
    """
    check_number("rate", rate, low=0, low_inclusive=False)
    check_number("x0", x0, low=0, low_inclusive=False)
    check_number("x_inf", x_inf, low=0, low_inclusive=False)
    t = torch.as_tensor(t, dtype=torch.float64)
    return x_inf / (1 + (x_inf / x0 - 1) * torch.exp(-rate * t))


def logistic_onset(rate: float, x0: float, x_inf: float, fraction: float = 0.5) -> float:
    """The time at which :func:`logistic_mode` reaches ``fraction * x_inf``: log((x_inf/x0 - 1) f / (1 - f)) / rate.

    Parameters
    ----------
    rate, x0, x_inf : float
        As in :func:`logistic_mode` (all > 0).
    fraction : float, default 0.5
        In (0, 1).

    Returns
    -------
    float
        Negative when x0 is above ``fraction * x_inf``.
    """
    check_number("rate", rate, low=0, low_inclusive=False)
    check_number("x0", x0, low=0, low_inclusive=False)
    check_number("x_inf", x_inf, low=0, low_inclusive=False)
    check_number("fraction", fraction, low=0, low_inclusive=False, high=1, high_inclusive=False)
    return math.log((x_inf / x0 - 1) * fraction / (1 - fraction)) / rate


def spike_intervals(losses, factor: float = 2.0) -> list[tuple[int, int]]:
    """The loss spikes of :func:`count_spikes`, as (start, end) steps.

    ``start`` is the step of the last loss below ``factor`` times the running minimum before the spike (the step
    before the loss first exceeds it), ``end`` the first step where the loss is back below it (for a run that
    diverges or ends inside a spike: the last step).

    Parameters
    ----------
    losses : sequence of float
        The training losses, in order.
    factor : float
        How far above the running minimum (> 1) a spike starts.

    Returns
    -------
    list of (int, int)
        One pair per spike, in order; its length is :func:`count_spikes`.

    Examples
    --------
    >>> spike_intervals([1.0, 0.9, 5.0, 3.0, 0.8, 0.7])
    [(1, 4)]
    """
    check_number("factor", factor, low=1, low_inclusive=False)
    values = [float(v) for v in torch.as_tensor(losses, dtype=torch.float64).reshape(-1).tolist()]
    spans, low, start = [], math.inf, None
    for t, v in enumerate(values):
        if not math.isfinite(v):
            if start is None:
                start = max(t - 1, 0)
            break
        if start is not None:
            if v < factor * low:
                spans.append((start, t))
                start = None
                low = min(low, v)
        elif v > factor * low:
            start = max(t - 1, 0)
        else:
            low = min(low, v)
    if start is not None:
        spans.append((start, len(values) - 1))
    return spans


def count_spikes(losses, factor: float = 2.0) -> int:
    """The number of loss spikes in a sequence of training losses, by a fixed rule.

    A spike starts at step t when the loss exceeds ``factor`` times the lowest loss seen before t, and ends at the
    first later step where the loss is back below ``factor`` times that lowest loss (the running minimum is frozen
    during the spike). A run that diverges (the loss grows and never returns, or becomes NaN or infinite) counts
    as one spike. Monotone or slowly oscillating losses (within the factor) have none.

    Parameters
    ----------
    losses : sequence of float
        The training losses, in order.
    factor : float
        How far above the running minimum (> 1) a spike starts.

    Returns
    -------
    int
        The number of spikes.
    """
    check_number("factor", factor, low=1, low_inclusive=False)
    values = [float(v) for v in torch.as_tensor(losses, dtype=torch.float64).reshape(-1).tolist()]
    spikes, low, inside = 0, math.inf, False
    for v in values:
        if not math.isfinite(v):
            return spikes + (0 if inside else 1)
        if inside:
            if v < factor * low:
                inside = False
                low = min(low, v)
        elif v > factor * low:
            spikes += 1
            inside = True
        else:
            low = min(low, v)
    return spikes


def half_time(loss) -> int:
    """The first step at which a loss curve has fallen to half its initial value (the curve's length if never).

    Parameters
    ----------
    loss : sequence of float
        The loss per step.

    Returns
    -------
    int
        The step index (:func:`first_reaching` with ``below=True``), or ``len(loss)``.

    Examples
    --------
    >>> half_time([4.0, 3.0, 2.0, 1.0])
    2
    """
    return first_reaching(range(len(loss)), loss, 0.5 * loss[0], below=True, default=len(loss))


def rescaled_gap(a, b, grid) -> float:
    """RMS distance between two loss curves in log10 after dividing each one's time by its :func:`half_time`: how
    far two curves are from collapsing onto one shape.

    Parameters
    ----------
    a, b : sequence of float
        Loss curves (losses are floored at 1e-12 before the logarithm).
    grid : array-like
        The rescaled times (step / half-time) at which both are interpolated; points past a curve's end are left out.

    Returns
    -------
    float
        ``sqrt(mean((log10 a - log10 b)^2))`` over the grid points both curves reach.
    """
    def rescaled(c):
        th = max(half_time(c), 1)
        return np.interp(grid, np.arange(len(c)) / th, np.log10(np.maximum(c, 1e-12)), right=np.nan)

    ra, rb = rescaled(a), rescaled(b)
    ok = np.isfinite(ra) & np.isfinite(rb)
    return float(np.sqrt(np.mean((ra[ok] - rb[ok]) ** 2)))


def largest_spike(losses, *, window: int = 10) -> dict:
    """The largest spike of a loss curve: the step where the loss rises most above its running minimum, and the
    lowest loss of the ``window`` steps before it.

    Parameters
    ----------
    losses : sequence of float
        The loss after every step (at least two).
    window : int, default=10
        How many steps before the peak to search for the pre-spike low.

    Returns
    -------
    dict
        ``peak`` (the step), ``ratio`` (the loss there over the running minimum of the steps before), ``pre`` (the
        step of the lowest loss in ``[peak - window, peak)``).
    """
    L = _series(losses, "losses")
    jump = L[1:] / np.minimum.accumulate(L)[:-1]
    peak = int(np.argmax(jump)) + 1
    start = max(0, peak - window)
    return dict(peak=peak, ratio=float(jump[peak - 1]), pre=start + int(np.argmin(L[start:peak])))
