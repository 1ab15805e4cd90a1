r"""Cost-aware hyper-parameter search: a compact CARBS, random search, Pareto fronts and hypervolumes.

CARBS (Cost-Aware pareto-Region Bayesian Search; Fetterman et al. 2023) searches *locally around the
performance-cost Pareto front* of the observations made so far. This module is our own small version of it, on
scikit-learn's :class:`~sklearn.gaussian_process.GaussianProcessRegressor` (Imbue's package is not on PyPI, and the
PyPI package called ``carbs`` is an unrelated one). One step of :class:`CARBS`:

1. every hyper-parameter lives in a *search space* coordinate (log10 of the value for a ``log`` parameter, the value
   itself otherwise), with a scale (the width one unit of the search radius means);
2. two Gaussian processes are fitted: one to the observed values (the loss, to be minimised), one to log10 of the
   observed costs;
3. candidates are drawn around the members of the current Pareto set, ``x + radius * scale * N(0, I)``;
4. each candidate's acquisition is the expected improvement of its predicted loss over the Pareto front's loss at
   its predicted cost (the best loss observed at no greater cost); the cost at which the front is read is clamped at
   a random threshold, drawn between the cheapest and the dearest Pareto point, which biases the search towards
   higher costs (the "cost-aware" part);
5. the candidate with the highest acquisition is suggested.

The first ``n_initial`` suggestions are drawn around the search centre. What we left out of Imbue's CARBS: the
failure-probability model, Thompson sampling of outstanding suggestions (we suggest one point at a time), the
periodic re-sampling of Pareto points and the Gaussian process on the Pareto front (we read the front exactly).

:func:`random_search` draws uniformly in the same box, the control. :func:`pareto_front` and :func:`hypervolume`
measure a set of (cost, loss) observations, both to be minimised.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtr
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

from .._checks import check_number

__all__ = ["CARBS", "Param", "chinchilla_loss", "chinchilla_optimal_exponent", "hypervolume", "hypervolume_curve",
           "pareto_front", "pareto_slope", "random_search", "run_search", "search_space_box"]


@dataclass
class Param:
    """One hyper-parameter of a search, and its search coordinate (log10 of the value, or the value).

    Parameters
    ----------
    name : str
        The hyper-parameter's name (the key of the suggested dicts).
    low, high : float
        Its bounds, in its own units (``low > 0`` for a log parameter).
    log : bool, default=True
        Whether it is searched in log10.
    center : float or None, default=None
        The search centre, in its own units; None: the middle of the box in search coordinates.
    scale : float, default=1.0
        The width of one search-radius unit in search coordinates (1: one decade for a log parameter).
    """

    name: str
    low: float
    high: float
    log: bool = True
    center: float | None = None
    scale: float = 1.0

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"Param name must be a non-empty string, got {self.name!r}")
        check_number(f"low of {self.name}", self.low)
        check_number(f"high of {self.name}", self.high)
        if not self.high > self.low:
            raise ValueError(f"Param {self.name}: high ({self.high}) must exceed low ({self.low})")
        if self.log and self.low <= 0:
            raise ValueError(f"Param {self.name}: a log parameter needs low > 0, got {self.low}")
        check_number(f"scale of {self.name}", self.scale, low=0, low_inclusive=False)

    def to_search(self, value):
        """The search coordinate of a value.

        Parameters
        ----------
        value : float or array-like
            Values in the parameter's units.

        Returns
        -------
        float or ndarray
            ``log10(value)`` for a log parameter, else the value.
        """
        return np.log10(value) if self.log else np.asarray(value, dtype=float)

    def from_search(self, u):
        """The value at a search coordinate (the inverse of :meth:`to_search`).

        Parameters
        ----------
        u : float or ndarray
            Search coordinates.

        Returns
        -------
        float or ndarray
            ``10 ** u`` for a log parameter, else ``u``.
        """
        return 10.0 ** u if self.log else u

    @property
    def bounds(self):
        """The bounds in search coordinates, ``(low, high)``."""
        return float(self.to_search(self.low)), float(self.to_search(self.high))


def search_space_box(params) -> np.ndarray:
    """The bounds of the search coordinates of ``params``.

    Parameters
    ----------
    params : list of Param
        The hyper-parameters (unique names).

    Returns
    -------
    ndarray of shape (k, 2)
        Each parameter's (low, high) in search coordinates.
    """
    return np.array([p.bounds for p in _check_params(params)])


def _check_params(params) -> list:
    params = list(params)
    if not params or not all(isinstance(p, Param) for p in params):
        raise TypeError("params must be a non-empty list of rfm.selection.tuning.Param")
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise ValueError(f"params have repeated names: {names}")
    return params


# ----------------------------------------------------------------------------------------------------------------
# Pareto fronts and hypervolume (both coordinates minimised)


def _costs_values(costs, values):
    c, v = np.asarray(costs, dtype=float).reshape(-1), np.asarray(values, dtype=float).reshape(-1)
    if c.shape != v.shape:
        raise ValueError(f"costs and values must have the same length, got {c.shape[0]} and {v.shape[0]}")
    if not (np.isfinite(c).all() and np.isfinite(v).all()):
        raise ValueError("costs and values must be finite")
    return c, v


def pareto_front(costs, values) -> np.ndarray:
    """The non-dominated points: no other point is at most as costly and at most as bad, and better in one.

    Parameters
    ----------
    costs, values : array-like of shape (n,)
        Each point's cost and value, both minimised, finite.

    Returns
    -------
    ndarray of int
        The indices of the Pareto points, by increasing cost (of exact duplicates, the first).
    """
    c, v = _costs_values(costs, values)
    order = np.lexsort((np.arange(len(c)), v, c))  # by cost, then value, then index
    keep, best = [], math.inf
    for i in order:
        if v[i] < best:
            keep.append(int(i))
            best = v[i]
    return np.asarray(keep, dtype=int)


def hypervolume(costs, values, ref) -> float:
    """The area dominated by the points and bounded by a reference point.

    The measure of {(x, y): some point has cost <= x <= ref[0] and value <= y <= ref[1]}; points beyond ``ref`` add
    nothing. Pass log costs to measure in log cost.

    Parameters
    ----------
    costs, values : array-like of shape (n,)
        Each point's cost and value, both minimised, finite.
    ref : tuple of float
        The reference point (cost, value).

    Returns
    -------
    float
        The dominated area (0 when no point is inside ``ref``).
    """
    c, v = _costs_values(costs, values)
    rc, rv = float(ref[0]), float(ref[1])
    inside = (c < rc) & (v < rv)
    if not inside.any():
        return 0.0
    c, v = c[inside], v[inside]
    idx = pareto_front(c, v)
    area = 0.0
    for k, i in enumerate(idx):
        right = c[idx[k + 1]] if k + 1 < len(idx) else rc
        area += (right - c[i]) * (rv - v[i])
    return float(area)


# ----------------------------------------------------------------------------------------------------------------
# The search


def _gp(dim: int, seed: int):
    kernel = (ConstantKernel(1.0, (1e-3, 1e3)) * Matern(length_scale=np.ones(dim), length_scale_bounds=(1e-2, 1e2),
                                                       nu=2.5) + WhiteKernel(1e-3, (1e-8, 1e0)))
    return GaussianProcessRegressor(kernel=kernel, normalize_y=True, random_state=seed)


def _norm_pdf(z):
    return np.exp(-0.5 * z ** 2) / math.sqrt(2 * math.pi)


def _norm_cdf(z):
    return ndtr(z)


@dataclass
class CARBS:
    """A compact CARBS (see the module's description).

    :meth:`suggest` returns a dict of hyper-parameter values, :meth:`observe` records a result; :func:`run_search`
    loops the two.

    Parameters
    ----------
    params : list of Param
        The hyper-parameters searched.
    radius : float, default=0.3
        The standard deviation of the candidates around Pareto points, in scale units (Imbue's default, from its
        README).
    n_candidates : int, default=500
        Candidates drawn per step.
    n_initial : int, default=4
        First suggestions, drawn around the centre.
    refit_every : int, default=5
        The Gaussian processes' kernel hyper-parameters are re-fitted (by maximum likelihood) every this many
        observations and kept in between.
    seed : int, default=0
        Makes the search repeatable.
    X, values, costs : list, optional
        The observations so far (search coordinates, values, costs), filled by :meth:`observe`.
    """

    params: list
    radius: float = 0.3
    n_candidates: int = 500
    n_initial: int = 4
    refit_every: int = 5
    seed: int = 0
    X: list = field(default_factory=list)
    values: list = field(default_factory=list)
    costs: list = field(default_factory=list)

    def __post_init__(self):
        self.params = _check_params(self.params)
        check_number("radius", self.radius, low=0, low_inclusive=False)
        check_number("n_candidates", self.n_candidates, low=1, integer=True)
        check_number("n_initial", self.n_initial, low=1, integer=True)
        check_number("refit_every", self.refit_every, low=1, integer=True)
        self._kernels = None
        self.box = search_space_box(self.params)
        self.scale = np.array([p.scale for p in self.params])
        self.center = np.array([float(p.to_search(p.center)) if p.center is not None else self.box[i].mean()
                                for i, p in enumerate(self.params)])
        self.rng = np.random.default_rng(self.seed)

    def _clip(self, U):
        return np.clip(U, self.box[:, 0], self.box[:, 1])

    def _to_dict(self, u) -> dict:
        return {p.name: float(p.from_search(u[i])) for i, p in enumerate(self.params)}

    def _norm(self, U):
        return (U - self.box[:, 0]) / (self.box[:, 1] - self.box[:, 0])

    def suggest(self) -> dict:
        """The next point to evaluate.

        Returns
        -------
        dict of str to float
            A value for each hyper-parameter.
        """
        k = len(self.params)
        if len(self.X) < self.n_initial:
            u = self._clip(self.center + self.radius * self.scale * self.rng.standard_normal(k))
            return self._to_dict(u)
        X = np.asarray(self.X)
        y = np.asarray(self.values)
        logc = np.log10(np.asarray(self.costs))
        refit = self._kernels is None or len(self.X) % self.refit_every == 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gps = []
            for j, target in enumerate((y, logc)):
                gp = _gp(k, self.seed)
                if not refit:
                    gp.set_params(kernel=self._kernels[j], optimizer=None)
                gps.append(gp.fit(self._norm(X), target))
            gp_y, gp_c = gps
            self._kernels = [gp.kernel_ for gp in gps]
        front = pareto_front(logc, y)
        centres = X[front][self.rng.integers(0, len(front), self.n_candidates)]
        U = self._clip(centres + self.radius * self.scale * self.rng.standard_normal((self.n_candidates, k)))
        mu, sd = gp_y.predict(self._norm(U), return_std=True)
        c_hat = gp_c.predict(self._norm(U))
        # the Pareto front read at the (clamped) predicted cost: the best value observed at no greater cost
        threshold = self.rng.uniform(logc[front].min(), logc[front].max()) if len(front) > 1 else logc[front][0]
        c_read = np.minimum(c_hat, max(threshold, logc[front].min()))
        fc, fv = logc[front], y[front]  # sorted by cost, values decreasing
        pos = np.searchsorted(fc, c_read, side="right") - 1
        ref = np.where(pos >= 0, fv[np.clip(pos, 0, None)], y.max())
        sd = np.maximum(sd, 1e-12)
        z = (ref - mu) / sd
        ei = (ref - mu) * _norm_cdf(z) + sd * _norm_pdf(z)
        return self._to_dict(U[int(np.argmax(ei))])

    def observe(self, suggestion: dict, value: float, cost: float):
        """Record the result of evaluating a point.

        Parameters
        ----------
        suggestion : dict of str to float
            The point (as :meth:`suggest` returned it, or any point in the box).
        value : float
            Its value (minimised).
        cost : float
            Its cost, > 0.
        """
        check_number("value", value)
        check_number("cost", cost, low=0, low_inclusive=False)
        u = np.array([float(p.to_search(suggestion[p.name])) for p in self.params])
        self.X.append(u)
        self.values.append(float(value))
        self.costs.append(float(cost))


def random_search(params, n: int, seed: int = 0) -> list[dict]:
    """Points drawn uniformly in the search coordinates (log-uniform for log parameters): the control of CARBS.

    Parameters
    ----------
    params : list of Param
        The hyper-parameters.
    n : int
        The number of points.
    seed : int, default=0
        The seed of the draw.

    Returns
    -------
    list of dict of str to float
        ``n`` points.
    """
    params = _check_params(params)
    check_number("n", n, low=1, integer=True)
    box = search_space_box(params)
    U = np.random.default_rng(seed).uniform(box[:, 0], box[:, 1], size=(int(n), len(params)))
    return [{p.name: float(p.from_search(u[i])) for i, p in enumerate(params)} for u in U]


def run_search(objective, params, n_evals: int, *, method: str = "carbs", seed: int = 0, **carbs_kwargs) -> dict:
    """Run evaluations of an objective with CARBS or random search.

    Parameters
    ----------
    objective : callable
        ``objective(point) -> (value, cost)`` for a dict of hyper-parameter values.
    params : list of Param
        The hyper-parameters.
    n_evals : int
        The number of evaluations.
    method : {"carbs", "random"}, default="carbs"
        :class:`CARBS` or :func:`random_search`.
    seed : int, default=0
        The search's seed.
    **carbs_kwargs
        Further arguments of :class:`CARBS`.

    Returns
    -------
    dict
        ``points`` (the dicts), ``values`` and ``costs`` (arrays), in the order evaluated.
    """
    check_number("n_evals", n_evals, low=1, integer=True)
    if method not in ("carbs", "random"):
        raise ValueError(f"method must be 'carbs' or 'random', got {method!r}")
    points, values, costs = [], [], []
    if method == "random":
        for s in random_search(params, n_evals, seed):
            v, c = objective(s)
            _check_observation(v, c, s)
            points.append(s), values.append(float(v)), costs.append(float(c))
    else:
        opt = CARBS(list(params), seed=seed, **carbs_kwargs)
        for _ in range(int(n_evals)):
            s = opt.suggest()
            v, c = objective(s)
            _check_observation(v, c, s)
            opt.observe(s, v, c)
            points.append(s), values.append(float(v)), costs.append(float(c))
    return dict(points=points, values=np.asarray(values), costs=np.asarray(costs))


# ----------------------------------------------------------------------------------------------------------------
# The Chinchilla-form test objective

#: E, A, B, alpha, beta of the parametric fit ``L(N, D) = E + A / N^alpha + B / D^beta`` of Hoffmann et al. (2022),
#: as quoted by a secondary source (the chapter says where); a test objective, not a measured law.
CHINCHILLA = dict(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)


def chinchilla_loss(N, D, *, E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28):
    """The Chinchilla form of a language model's loss, ``L(N, D) = E + A / N^alpha + B / D^beta``.

    Parameters
    ----------
    N, D : float or array-like
        Parameters and training tokens (broadcast together).
    E, A, B, alpha, beta : float
        The fit's constants (``CHINCHILLA``).

    Returns
    -------
    float or ndarray
        The loss.
    """
    N, D = np.asarray(N, dtype=float), np.asarray(D, dtype=float)
    return E + A / N ** alpha + B / D ** beta


def chinchilla_optimal_exponent(alpha=0.34, beta=0.28) -> float:
    """The exponent of the loss-minimising model size in compute, ``beta / (alpha + beta)``.

    At compute C = 6 N D, the loss-minimising N of :func:`chinchilla_loss` grows like ``C^(beta / (alpha + beta))``.

    Parameters
    ----------
    alpha, beta : float, default=0.34, 0.28
        The exponents of N and D.

    Returns
    -------
    float
        ``beta / (alpha + beta)``.
    """
    return beta / (alpha + beta)


def _check_observation(value, cost, point):
    """An objective's (value, cost) must be finite numbers: a NaN value would be neither better nor worse than any
    other, and CARBS would fit its surrogate through it without a word."""
    for name, x in (("value", value), ("cost", cost)):
        try:
            x = float(x)
        except (TypeError, ValueError):
            raise TypeError(f"objective must return (value, cost) as numbers, got {name} {x!r} at {point}") from None
        if not np.isfinite(x):
            raise ValueError(f"objective returned a non-finite {name} ({x}) at {point}: make it return a finite "
                             "number (e.g. a large loss for a diverged run)")


def pareto_slope(result: dict, name: str = "N") -> float:
    """The slope of log10 of one hyper-parameter against log10 cost over a search's Pareto set: the scaling law the
    search found (Chinchilla's N proportional to C^(beta / (alpha + beta)) for ``name="N"``).

    Parameters
    ----------
    result : dict
        What :func:`run_search` returns (``costs``, ``values``, ``points``).
    name : str, default="N"
        The hyper-parameter.

    Returns
    -------
    float
        The least-squares slope, or NaN when the Pareto set has fewer than two points.
    """
    f = pareto_front(np.log10(result["costs"]), result["values"])
    v = np.array([result["points"][i][name] for i in f])
    return float(np.polyfit(np.log10(result["costs"][f]), np.log10(v), 1)[0]) if len(f) > 1 else float("nan")


def hypervolume_curve(result: dict, ref) -> np.ndarray:
    """The :func:`hypervolume` (in log10 cost and loss) of a search's first m observations, for every m.

    Parameters
    ----------
    result : dict
        What :func:`run_search` returns.
    ref : tuple of float
        The reference point (log10 cost, loss), worse than every observation.

    Returns
    -------
    numpy.ndarray
        One hypervolume per number of evaluations.
    """
    lc = np.log10(result["costs"])
    return np.array([hypervolume(lc[:m], result["values"][:m], ref) for m in range(1, len(lc) + 1)])
