r"""Infinitely wide and deep networks on the sphere: dual activations iterated to depth L, and the classifiers they
become (Radhakrishnan, Belkin and Uhler, "Wide and deep neural networks achieve consistency for classification",
PNAS 2023).

For inputs on the unit sphere, the NNGP kernel of a fully connected network of infinite width with L hidden layers
and activation sigma is a function of the cosine t = <x, z> alone: K_L(x, z) = psi^{oL}(t), the L-fold composition
of the *dual activation* psi(t) = E[sigma(u) sigma(v)], (u, v) standard normals with correlation t, normalised so
that psi(1) = 1. The NTK follows the recursion Theta_0 = t, Theta_{h+1} = psi(t_h) + Theta_h psi'(t_h),
t_{h+1} = psi(t_h).

**The duals.** ``DUALS`` holds the dual activations of the authors' code, ``models.py`` of
``uhlerlab/inf_depth_ntks`` (function ``dual_act`` and its derivative ``d_dual_act``), copied exactly:

* ``relu``: (t (pi - arccos t) + sqrt(1 - t^2)) / pi, the arc-cosine kernel of degree 1 (times 2);
* ``erf``: arcsin(2t/3) / arcsin(2/3);
* ``sine_<a>``: sinh(a t) / sinh(a), the dual of sin(sqrt(a) x) (``sine_1``, ``sine_2.676``, ``sine_6.13539``,
  ``sine_13.8258`` in the code);
* ``2d_opt`` t^7/2 + t/2; ``3d_opt`` t^3/2 + t/2; ``5d_opt`` t^3/4 + t^2/2 + t/4; ``9d_opt`` t^3/16 + 7 t^2/8 + t/16;
* ``hermite_<k>``: t^k, the dual of the normalised Hermite polynomial of degree k.

:func:`get_dual` builds one by name; :meth:`DualActivation.activation` evaluates the activation sigma itself (for
the polynomial duals, sum_k sqrt(c_k) He_k(x) / sqrt(k!), the Hermite expansion of psi(t) = sum_k c_k t^k).

**Three limits.** With psi(1) = 1 and psi(0) = 0, the iterated kernel decays like psi'(0)^L c(t) away from t = 1;
if psi'(1) > 1 > psi'(0) > 0, c(t) ~ (1 - t)^{-gamma} near t = 1 with gamma = log psi'(0) / (-log psi'(1))
(:func:`singular_exponent`), a singular kernel proportional to ``||x - z||^{-2 gamma}``; ``2d_opt`` has
gamma = 1/2, the Hilbert kernel ``||x - z||^{-1}`` on the circle S^1. With psi'(0) = 0 (psi = t^2) the kernel is
dominated by the nearest training point: 1-NN. With psi'(1) <= 1 (ReLU) every cosine tends to 1 and the classifier
tends to the majority vote.

**Numerics of deep compositions.** :func:`deep_dual_kernel` computes psi^{oL} stably for very deep L: the gaps
1 - t of nearly equal points are carried exactly (``DualActivation.one_minus``, no cancellation), so that two points
at angle 1e-9 remain distinct; and values that fall below 1e-100 continue in the log domain through psi's leading
term at 0 (c_m t^m), so that t^(2^L) at L = 25 is exp(2^25 log t) rather than 0. :func:`interpolate_sign` fits the
interpolating kernel machine (ridge 0, as the code's ``solve(K, y)``) and predicts from the log-domain test kernel,
rescaled per test point (which leaves the sign, hence the predicted class, unchanged).

The ReLU NTK reuses :func:`rfm.core.ntk.relu_ntk` (unit norms, no biases: the same recursion).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch

from .._checks import check_matrix, check_number
from ..core.ntk import relu_ntk
from ..core.solvers import solve_krr

TINY = 1e-100     # below this magnitude a value continues in the log domain
NEAR = 1e-3       # gaps 1 - t below this are carried exactly
# distances from coordinate differences (torch.cdist's matrix-product shortcut loses ~1e-8 near 0, which deep
# compositions with psi'(1) > 1 amplify: the diagonal of a deep kernel would not stay 1)
EXACT = "donot_use_mm_for_euclid_dist"


def _poly_one_minus(coefs):
    """u -> 1 - psi(1 - u) for psi(t) = sum_k c_k t^k with sum_k c_k = 1, without cancellation."""
    def f(u):
        out = torch.zeros_like(u)
        lu = torch.log1p(-u)
        for k, c in coefs.items():
            if k and c:
                out = out - c * torch.expm1(k * lu)
        return out
    return f


@dataclass(frozen=True)
class DualActivation:
    """A dual activation psi on [-1, 1] with psi(1) = 1: its values, derivative, exact gap and leading term at 0.

    ``psi`` and ``dpsi`` are the dual and its derivative (on tensors); ``one_minus(u)`` is 1 - psi(1 - u) computed
    without cancellation for small u; ``lead = (c, m)`` is psi's leading term c t^m at t = 0 (m = 0 when
    psi(0) != 0); ``hermite`` holds the coefficients {k: c_k} of psi(t) = sum c_k t^k when psi is a polynomial.

    Parameters
    ----------
    name : str
        The name.
    psi, dpsi : callable
        The dual and its derivative.
    one_minus : callable
        u -> 1 - psi(1 - u).
    lead : tuple (float, int)
        (c, m).
    hermite : dict or None, default None
        The polynomial coefficients.
    sine_a : float or None, default None
        The frequency a of the sine family.
    """

    name: str
    psi: Callable = field(repr=False)
    dpsi: Callable = field(repr=False)
    one_minus: Callable = field(repr=False)
    lead: tuple
    hermite: dict | None = None
    sine_a: float | None = None

    def __call__(self, t):
        return self.psi(t)

    def activation(self, x):
        """The activation sigma whose dual is psi (E[sigma(u)^2] = 1 for u ~ N(0, 1)), on a tensor or array.

        Parameters
        ----------
        x : float, array-like or torch.Tensor
            Inputs.

        Returns
        -------
        torch.Tensor, float64, the shape of x
        """
        xt = torch.as_tensor(x, dtype=torch.float64)
        if self.hermite is not None:
            out = torch.zeros_like(xt)
            for k, c in self.hermite.items():
                he = np.polynomial.hermite_e.HermiteE.basis(k)
                coef = torch.tensor(he.convert(kind=np.polynomial.Polynomial).coef, dtype=torch.float64)
                val = sum(float(coef[j]) * xt**j for j in range(len(coef)))
                out = out + math.sqrt(c / math.factorial(k)) * val
            return out
        if self.name == "relu":
            return math.sqrt(2.0) * torch.relu(xt)
        if self.name == "erf":
            return torch.erf(xt) / math.sqrt(2 / math.pi * math.asin(2 / 3))
        if self.sine_a is not None:
            a = self.sine_a
            return torch.sin(math.sqrt(a) * xt) / math.sqrt(math.exp(-a) * math.sinh(a))
        raise NotImplementedError(f"no activation for {self.name}")


def _power(t, k):
    """t^k by repeated squaring (torch's pow with an integer exponent is several times slower)."""
    out, base = None, t
    while k:
        if k & 1:
            out = base.clone() if out is None else out.mul_(base)
        k >>= 1
        if k:
            base = base * base
    return out


def _polynomial(name, coefs):
    coefs = dict(coefs)
    m = min(k for k, c in coefs.items() if c)

    def psi(t):
        out = None
        for k, c in sorted(coefs.items()):
            term = _power(t, k).mul_(c) if k else torch.full_like(t, c)
            out = term if out is None else out.add_(term)
        return out
    return DualActivation(
        name,
        psi=psi,
        dpsi=lambda t: sum(k * c * t**(k - 1) for k, c in coefs.items() if k),
        one_minus=_poly_one_minus(coefs), lead=(coefs[m], m), hermite=coefs)


def _relu():
    def psi(t):
        return (t * (math.pi - torch.arccos(t)) + torch.sqrt(1 - t**2)) / math.pi

    def dpsi(t):
        return (math.pi - torch.arccos(t)) / math.pi

    def one_minus(u):  # 1 - psi(1 - u); psi'(1) = 1, so the gap shrinks; accurate to rounding of psi near 1
        return 1 - psi(1 - u)
    return DualActivation("relu", psi, dpsi, one_minus, lead=(1 / math.pi, 0))


def _erf():
    s = math.asin(2 / 3)

    def one_minus(u):  # (asin x - asin y) / asin(2/3), x = 2/3, y = 2/3 (1 - u): asin of (x^2 - y^2) / (...)
        x, y = 2 / 3, 2 / 3 * (1 - u)
        num = (2 / 3 * u) * (x + y)                     # x - y = 2u/3 exactly
        den = x * torch.sqrt(1 - y**2) + y * math.sqrt(1 - x**2)
        return torch.asin(num / den) / s
    return DualActivation("erf", psi=lambda t: torch.asin(2 * t / 3) / s,
                          dpsi=lambda t: 1 / s / torch.sqrt(1 - 4 * t**2 / 9) * 2 / 3,
                          one_minus=one_minus, lead=(2 / 3 / s, 1))


def _sine(a):
    sa = math.sinh(a)

    def one_minus(u):  # (sinh a - sinh(a - a u)) / sinh a = 2 cosh(a - a u / 2) sinh(a u / 2) / sinh a
        return 2 * torch.cosh(a - a * u / 2) * torch.sinh(a * u / 2) / sa
    return DualActivation(f"sine_{a:g}", psi=lambda t: torch.sinh(a * t) / sa,
                          dpsi=lambda t: a * torch.cosh(a * t) / sa, one_minus=one_minus, lead=(a / sa, 1),
                          sine_a=float(a))


# the dual activations of the authors' code (models.py of uhlerlab/inf_depth_ntks), copied exactly
DUALS = {
    "relu": _relu(),
    "erf": _erf(),
    "2d_opt": _polynomial("2d_opt", {7: 0.5, 1: 0.5}),
    "3d_opt": _polynomial("3d_opt", {3: 0.5, 1: 0.5}),
    "5d_opt": _polynomial("5d_opt", {3: 0.25, 2: 0.5, 1: 0.25}),
    "9d_opt": _polynomial("9d_opt", {3: 1 / 16, 2: 7 / 8, 1: 1 / 16}),
}
# the sine_a the code pairs with data in 2, 3, 5 and 9 dimensions (main.py), and the opt polynomial beside it
TUNED = {2: ("sine_1", "2d_opt"), 3: ("sine_2.676", "3d_opt"), 5: ("sine_6.13539", "5d_opt"),
         9: ("sine_13.8258", "9d_opt")}


def get_dual(name) -> DualActivation:
    """A dual activation by name: a key of ``DUALS``, ``"sine_<a>"`` (a > 0) or ``"hermite_<k>"`` (k >= 1).

    Parameters
    ----------
    name : str or DualActivation
        The name (an instance is returned as it is).

    Returns
    -------
    DualActivation

    Raises
    ------
    TypeError
        If ``name`` is neither a string nor a DualActivation.

    Examples
    --------
    >>> import torch
    >>> from rfm.theory.infinite_depth import get_dual
    >>> get_dual("2d_opt")(torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64))
    tensor([0.0000, 0.2539, 1.0000], dtype=torch.float64)
    """
    if isinstance(name, DualActivation):
        return name
    if not isinstance(name, str):
        raise TypeError(f"act must be a DualActivation or its name, got {type(name).__name__}")
    if name in DUALS:
        return DUALS[name]
    if name.startswith("sine_"):
        try:
            a = float(name[5:])
        except ValueError:
            a = float("nan")
        if not a > 0 or not math.isfinite(a):
            raise ValueError(f"act {name!r}: sine_<a> needs a positive number a")
        return _sine(a)
    if name.startswith("hermite_") and name[8:].isdigit() and int(name[8:]) >= 1:
        k = int(name[8:])
        return _polynomial(name, {k: 1.0})
    raise ValueError(f"act must be one of {sorted(DUALS)}, 'sine_<a>' or 'hermite_<k>', got {name!r}")


def singular_exponent(act) -> float:
    """gamma = log psi'(0) / (-log psi'(1)): the deep kernel behaves as (1 - t)^(-gamma) ~ ``||x - z||^(-2 gamma)``.

    Infinite when psi'(0) = 0 (the 1-NN limit); NaN when psi'(1) <= 1 (no singular limit: ReLU's majority vote).

    Parameters
    ----------
    act : str or DualActivation
        The dual activation (:func:`get_dual`).

    Returns
    -------
    float
    """
    act = get_dual(act)
    one, zero = torch.ones((), dtype=torch.float64), torch.zeros((), dtype=torch.float64)
    d1, d0 = float(act.dpsi(one)), float(act.dpsi(zero))
    if d1 <= 1:
        return float("nan")
    if d0 <= 0:
        return float("inf")
    return math.log(d0) / -math.log(d1)


class DeepKernel(NamedTuple):
    """psi^{oL}(t) as ``value`` (may underflow to 0), ``log_abs`` = log|value| (exact below 1e-100), ``sign``, and
    ``gap`` = 1 - value (exact near 1). :func:`deep_dual_kernel` continues the composition from one.

    Parameters
    ----------
    value, log_abs, sign, gap : torch.Tensor
        As above, of one shape.
    """

    value: torch.Tensor
    log_abs: torch.Tensor
    sign: torch.Tensor
    gap: torch.Tensor


def cosines(X, Z):
    """The cosines <x_i, z_j> (n, m) of unit vectors and their exact gaps 1 - <x_i, z_j> = ``||x_i - z_j||^2`` / 2.

    Rows must have unit norm (to 1e-8).

    Parameters
    ----------
    X : torch.Tensor, shape (n, d)
        Unit rows.
    Z : torch.Tensor, shape (m, d)
        Unit rows.

    Returns
    -------
    t, gap : torch.Tensor, float64, shape (n, m)

    Raises
    ------
    ValueError
        If a row does not have unit norm.
    """
    X = check_matrix(X, "X", dtype=torch.float64)
    Z = check_matrix(Z, "Z", dtype=torch.float64, device=X.device)
    if X.shape[1] != Z.shape[1]:
        raise ValueError(f"X has {X.shape[1]} columns, Z has {Z.shape[1]}")
    for name, A in (("X", X), ("Z", Z)):
        if ((A.norm(dim=1) - 1).abs() > 1e-8).any():
            raise ValueError(f"the rows of {name} must be unit vectors (points on the sphere)")
    t = (X @ Z.T).clamp_(-1.0, 1.0)
    gap = torch.cdist(X, Z, compute_mode=EXACT).pow_(2).mul_(0.5)
    return t, gap


def deep_dual_kernel(t, act, depth: int, *, gap=None) -> DeepKernel:
    """psi^{o depth}(t), elementwise, stable for very deep compositions (see :mod:`rfm.theory.infinite_depth`).

    Parameters
    ----------
    t : torch.Tensor or DeepKernel
        Cosines in [-1, 1] (any shape, floating).
    act : str or DualActivation
        The dual activation (:func:`get_dual`).
    depth : int
        Number of compositions L >= 0.
    gap : torch.Tensor, optional
        1 - t computed exactly, e.g. ``||x - z||^2 / 2`` (:func:`cosines`); default 1 - t. Ignored when ``t`` is
        a :class:`DeepKernel`: the composition then continues from it, so that a sweep over depths composes once.

    Returns
    -------
    DeepKernel
        Of t's shape.
    """
    act = get_dual(act)
    depth = int(check_number("depth", depth, low=0, integer=True))
    c, m = act.lead
    log_c = math.log(abs(c))
    if isinstance(t, DeepKernel):                       # continue a composition
        K = t
        shape = K.value.shape
        t, u = K.value.reshape(-1).clone(), K.gap.reshape(-1)
        small = torch.nonzero(K.log_abs.reshape(-1) < math.log(TINY)).reshape(-1)
        lg_small, sg_small = K.log_abs.reshape(-1)[small], K.sign.reshape(-1)[small]
        if m == 0 and small.numel():                    # psi(0) != 0: no log domain needed
            small = small[:0]
    else:
        t = torch.as_tensor(t)
        if not t.is_floating_point():
            raise TypeError("t must be a floating tensor of cosines")
        _check_cosines(t)
        t = t.clone().clamp_(-1.0, 1.0)
        shape = t.shape
        t = t.reshape(-1)
        u = (1 - t) if gap is None else torch.as_tensor(gap, dtype=t.dtype, device=t.device).reshape(-1)
        if u.shape != t.shape:
            raise ValueError(f"gap must have the shape of t {tuple(shape)}")
        small = torch.zeros(0, dtype=torch.long, device=t.device)   # entries in the log domain
        lg_small = torch.zeros(0, dtype=t.dtype, device=t.device)
        sg_small = torch.zeros(0, dtype=t.dtype, device=t.device)
    near = torch.nonzero(u < NEAR).reshape(-1)           # entries whose gap 1 - t is carried exactly
    u_near = u[near]
    in_small = torch.zeros(t.shape, dtype=torch.bool, device=t.device)
    in_small[small] = True
    sgn_c = 1.0 if c > 0 else -1.0
    for _ in range(depth):
        if m > 0 and float(t.abs().amin()) < TINY:        # entries entering the log domain
            new = torch.nonzero((t.abs() < TINY) & ~in_small).reshape(-1)
            if new.numel():
                in_small[new] = True
                small = torch.cat([small, new])
                lg_small = torch.cat([lg_small, torch.log(t[new].abs().clamp_min(torch.finfo(t.dtype).tiny))])
                sg_small = torch.cat([sg_small, torch.where(t[new] < 0, -1.0, 1.0).to(t.dtype)])
        t = act.psi(t).clamp_(-1.0, 1.0)                 # in the log domain the bulk value is only a placeholder
        if near.numel():
            u_near = act.one_minus(u_near)
            t[near] = 1 - u_near
            keep = u_near < NEAR
            near, u_near = near[keep], u_near[keep]
        if small.numel():
            lg_small = lg_small.mul_(m).add_(log_c)
            if m % 2 == 0:
                sg_small = torch.full_like(sg_small, sgn_c)
            elif sgn_c < 0:
                sg_small = -sg_small
    if small.numel():
        t[small] = sg_small * torch.exp(lg_small)
    log_abs = torch.log(t.abs())
    sign = torch.sign(t)
    if small.numel():
        log_abs[small] = lg_small
        sign[small] = sg_small
    gap_out = 1 - t
    gap_out[near] = u_near
    return DeepKernel(t.reshape(shape), log_abs.reshape(shape), sign.reshape(shape), gap_out.reshape(shape))


def dual_ntk(t, act, depth: int) -> torch.Tensor:
    """The NTK on the sphere to ``depth`` L: Theta_0 = t, Theta_{h+1} = psi(t_h) + Theta_h psi'(t_h).

    The recursion of the authors' ``ntk_kernel``; for ``act = "relu"`` it is :func:`rfm.core.ntk.relu_ntk` with
    unit norms and no biases (the same recursion), which this function calls. No log domain: for the duals with
    psi'(0) > 0 at moderate depth and for ReLU (whose values grow like L) it is not needed.

    Parameters
    ----------
    t : torch.Tensor
        Cosines in [-1, 1].
    act : str or DualActivation
        The dual activation (:func:`get_dual`).
    depth : int
        L (>= 0).

    Returns
    -------
    torch.Tensor, float64, the shape of t
    """
    act = get_dual(act)
    depth = int(check_number("depth", depth, low=0, integer=True))
    t = torch.as_tensor(t)
    if not t.is_floating_point():
        raise TypeError("t must be a floating tensor of cosines")
    t = t.clamp(-1.0, 1.0)
    if act.name == "relu":
        S = t.reshape(1, -1) if t.ndim < 2 else t.reshape(-1, t.shape[-1])
        ones_r = torch.ones(S.shape[0], dtype=t.dtype, device=t.device)
        ones_c = torch.ones(S.shape[1], dtype=t.dtype, device=t.device)
        return relu_ntk(S.clone(), ones_c, ones_r, depth).reshape(t.shape)
    theta = t.clone()
    for _ in range(depth):
        nxt = act.psi(t).clamp_(-1.0, 1.0)
        theta = nxt + theta * act.dpsi(t)
        t = nxt
    return theta


# ---------------------------------------------------------------------------------------------------------------
# the reference classifiers (labels +1 / -1, float64)

def _labels(y, n, name="y_train"):
    y = torch.as_tensor(y, dtype=torch.float64).reshape(-1)
    if y.numel() != n:
        raise ValueError(f"{name} has {y.numel()} labels for {n} points")
    if not bool(((y == 1) | (y == -1)).all()):
        raise ValueError(f"{name} must hold labels +1 and -1")
    return y


def _sign(f):
    return torch.where(f < 0, -1.0, 1.0).to(torch.float64)


def one_nn(X_train, y_train, X_test) -> torch.Tensor:
    """The 1-nearest-neighbour classifier (Euclidean distance): the label of each test point's nearest training point.

    Parameters
    ----------
    X_train : torch.Tensor, shape (n, d)
        Training points.
    y_train : torch.Tensor, shape (n,)
        Their labels (+1 / -1).
    X_test : torch.Tensor, shape (m, d)
        Test points.

    Returns
    -------
    torch.Tensor, shape (m,)
        The predicted labels.
    """
    X_train = check_matrix(X_train, "X_train", dtype=torch.float64)
    X_test = check_matrix(X_test, "X_test", dtype=torch.float64, device=X_train.device)
    y = _labels(y_train, len(X_train)).to(X_train.device)
    return y[torch.cdist(X_test, X_train, compute_mode=EXACT).argmin(1)]


def majority_vote(y_train, n_test: int) -> torch.Tensor:
    """The majority vote: every test point gets the more frequent training label (-1 on a tie, as the code).

    Parameters
    ----------
    y_train : torch.Tensor, shape (n,)
        Labels (+1 / -1).
    n_test : int
        Test points.

    Returns
    -------
    torch.Tensor, shape (n_test,)
    """
    y = torch.as_tensor(y_train, dtype=torch.float64).reshape(-1)
    y = _labels(y, y.numel())
    n_test = int(check_number("n_test", n_test, low=0, integer=True))
    label = 1.0 if int((y > 0).sum()) > int((y < 0).sum()) else -1.0
    return torch.full((n_test,), label, dtype=torch.float64)


def hilbert_estimate(X_train, y_train, X_test, dim: int | None = None) -> torch.Tensor:
    """The Hilbert (Devroye) estimate: sign of sum_i y_i ``||x - x_i||^(-dim)``.

    ``dim`` defaults to the dimension of the sphere, d - 1 for points in R^d (the code's ``devroye_classifier``:
    "dimension corrected by subtracting 1"). The weights are computed in the log domain, rescaled per test point.

    Parameters
    ----------
    X_train : torch.Tensor, shape (n, d)
        Training points.
    y_train : torch.Tensor, shape (n,)
        Their labels (+1 / -1).
    X_test : torch.Tensor, shape (m, d)
        Test points.
    dim : int, optional
        The exponent (default d - 1).

    Returns
    -------
    torch.Tensor, shape (m,)
        +1 / -1.
    """
    X_train = check_matrix(X_train, "X_train", dtype=torch.float64)
    X_test = check_matrix(X_test, "X_test", dtype=torch.float64, device=X_train.device)
    y = _labels(y_train, len(X_train)).to(X_train.device)
    dim = X_train.shape[1] - 1 if dim is None else int(check_number("dim", dim, low=1, integer=True))
    dist = torch.cdist(X_test, X_train, compute_mode=EXACT)
    logw = -dim * torch.log(dist.clamp_min(torch.finfo(torch.float64).tiny))
    w = torch.exp(logw - logw.max(1, keepdim=True).values)
    return _sign(w @ y)


def interpolate_sign(K_train, y_train, K_test: DeepKernel, info: dict | None = None) -> torch.Tensor:
    """Labels of the interpolating kernel machine (ridge 0): sign of sum_i alpha_i K(x, x_i), K_train alpha = y.

    ``K_train`` (n, n) holds the training kernel's values, ``K_test`` the (n_test, n) test kernel as a
    :class:`DeepKernel` (its log domain keeps the prediction exact where the values underflow). ``info``, a dict,
    receives the solver's ``"method"``: ``"lu"``, or ``"lstsq"`` where K_train is numerically singular (then
    :func:`rfm.core.solvers.solve_krr` warns and the machine fits the labels in least squares, not exactly).

    Parameters
    ----------
    K_train : torch.Tensor, shape (n, n)
        The training kernel.
    y_train : torch.Tensor, shape (n,)
        Labels.
    K_test : DeepKernel
        The (m, n) test kernel.
    info : dict, optional
        Receives ``"method"``.

    Returns
    -------
    torch.Tensor, shape (m,)
        +1 / -1.
    """
    y = _labels(y_train, K_train.shape[0])
    alpha, method = solve_krr(K_train, y.to(K_train.device), 0.0, method="lu", check_symmetric=False)
    if info is not None:
        info["method"] = method
    lg, sg = K_test.log_abs, K_test.sign
    if lg.shape[-1] != len(alpha):
        raise ValueError(f"K_test has {lg.shape[-1]} columns for {len(alpha)} training points")
    w = sg * torch.exp(lg - lg.max(1, keepdim=True).values)
    return _sign(w @ alpha)


def agreement(a, b) -> float:
    """The share of points on which two label vectors agree.

    Parameters
    ----------
    a, b : array-like, shape (n,)
        Labels.

    Returns
    -------
    float
        In [0, 1].
    """
    a, b = torch.as_tensor(a).reshape(-1), torch.as_tensor(b).reshape(-1)
    if a.shape != b.shape:
        raise ValueError(f"label vectors of different lengths: {a.numel()} and {b.numel()}")
    return float((a.cpu() == b.cpu()).double().mean())


def depth_sweep(X_train, y_train, X_test, act, depths, *, ntk: bool = False, methods: dict | None = None) -> dict:
    """Predicted labels of the deep kernel machine at each depth in ``depths`` (one incremental composition).

    NNGP (``ntk=False``): psi^{oL} with :func:`deep_dual_kernel`, predicted with :func:`interpolate_sign`;
    NTK (``ntk=True``): :func:`dual_ntk` at each depth (no log domain). Returns {depth: labels}; ``methods``, a
    dict, receives {depth: solver method} (see :func:`interpolate_sign`).

    Parameters
    ----------
    X_train : torch.Tensor, shape (n, d)
        Training points.
    y_train : torch.Tensor, shape (n,)
        Their labels (+1 / -1).
    X_test : torch.Tensor, shape (m, d)
        Test points.
    act : str or DualActivation
        The dual activation (:func:`get_dual`).
    depths : iterable of int
        Depths, in any order.
    ntk : bool, default False
        The NTK instead of the NNGP.
    methods : dict, optional
        Receives the solver methods.

    Returns
    -------
    dict
        {depth: labels (m,)}.
    """
    depths = sorted(int(check_number("depths", d, low=0, integer=True)) for d in depths)
    tr, gtr = cosines(X_train, X_train)
    te, gte = cosines(X_test, X_train)
    out = {}
    if ntk:
        for L in depths:
            Ktr, Kte = dual_ntk(tr, act, L), dual_ntk(te, act, L)
            info = {}
            out[L] = interpolate_sign(Ktr, y_train, DeepKernel(Kte, torch.log(Kte.abs()), torch.sign(Kte), 1 - Kte),
                                      info)
            if methods is not None:
                methods[L] = info["method"]
        return out
    done = 0
    Ktr, Kte = deep_dual_kernel(tr, act, 0, gap=gtr), deep_dual_kernel(te, act, 0, gap=gte)
    for L in depths:
        Ktr = deep_dual_kernel(Ktr, act, L - done)
        Kte = deep_dual_kernel(Kte, act, L - done)
        done = L
        info = {}
        out[L] = interpolate_sign(Ktr.value, y_train, Kte, info)
        if methods is not None:
            methods[L] = info["method"]
    return out



def _check_cosines(t: torch.Tensor):
    """t must hold cosines: values outside [-1, 1] by more than rounding (1e-4, far above the few units in the last
    place of a float32 cosine) are an error rather than clamped; NaN too."""
    if t.numel() == 0:
        return
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"t must be cosines in [-1, 1], but it has {int((~torch.isfinite(t)).sum())} NaN or infinite "
                         "value(s)")
    worst = float(t.abs().max())
    if worst > 1 + 1e-4:
        raise ValueError(f"t must be cosines in [-1, 1], got a value of absolute size {worst:g}: normalise the "
                         "inner products by the norms (rfm.theory.infinite_depth.cosines)")
