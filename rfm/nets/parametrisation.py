r"""Parametrisations of :class:`rfm.nets.MLP`, the output scale gamma, and measures of feature learning.

A *parametrisation* fixes, for every layer l with fan-in a and fan-out b, the standard deviation of the initial
weights and the learning rate of (plain) SGD on that layer, as multiples of a base ``sigma`` and a base ``lr``.
Every scheme is written directly on the network's weights W_l: a multiplier in the forward pass, as NTP writes it,
is turned into its equivalent initialisation and learning rate (W = w / sqrt(a) with w ~ N(0, 1) trained at rate
eta is W ~ N(0, 1/a) trained at rate eta / a). The schemes (initial standard deviation; learning rate):

* ``"sp"``, standard: ``sigma / sqrt(a)``; ``lr`` for every layer;
* ``"ntp"``, neural tangent: ``sigma / sqrt(a)``; ``lr / a``;
* ``"mup"``, maximal update: ``sigma / sqrt(a)``, and ``sigma / a`` for the read-out; ``lr * b / a``;
* ``"spectral"``: ``sigma / sqrt(a) * min(1, sqrt(b / a))``; ``lr * b / a``.

``"spectral"`` is the spectral scaling of Yang, Simon & Bernstein (2023) in the form our notes give it (the chapter
says what we read): a Gaussian b x a matrix with entries of standard deviation s has a spectral norm close to
``s (sqrt(a) + sqrt(b))``, so this initialisation gives ``||W_l||_2 = Theta(sqrt(b / a))``, i.e.
Theta(sqrt(fan_out / fan_in)); and a gradient step on one example is a rank-one matrix (its stable rank is one),
whose spectral norm is its Frobenius norm, so the rate ``lr * b / a`` makes the update's spectral norm scale like
sqrt(fan_out / fan_in) too. For an MLP whose hidden layers do not narrow, ``"mup"`` and ``"spectral"`` are the same
scheme (the spectral condition derives muP); they differ on a layer with fan_out < fan_in other than the read-out,
where ``"mup"`` keeps the 1/sqrt(fan_in) entries.

:class:`OutputScaled` divides a network's output by gamma (and removes its output at initialisation), the
feature-learning strength of Atanasov, Meterez, Simon & Pehlevan (ICLR 2025). :func:`toy_eta_max` is the largest
stable gradient-descent step of a deep scalar toy model, ``f = (a_1 ... a_L - 1) / gamma``, and
:func:`mlp_eta_edge` scans the learning rate of an MLP.
"""
from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import torch
from torch import nn

from .._checks import check_choice, check_number
from .._compat import renamed_keyword
from ..metrics import fit_scaling_law
from . import curves
from .mlp import MLP, check_mlp, check_widths, train
from .optim import train_full_batch

#: The parametrisations of :func:`make_mlp` and :func:`lr_groups`.
SCHEMES = ("sp", "ntp", "mup", "spectral")


def _check_scheme(scheme) -> str:
    if not isinstance(scheme, str):
        raise TypeError(f"scheme must be one of {SCHEMES}, got {scheme!r} of type {type(scheme).__name__}")
    return check_choice("scheme", scheme, SCHEMES)


def init_std(scheme: str, fan_in: int, fan_out: int, *, readout: bool = False, sigma: float = 1.0) -> float:
    """The standard deviation of the initial entries of a fan_in -> fan_out layer under ``scheme``.

    Parameters
    ----------
    scheme : {"sp", "ntp", "mup", "spectral"}
        The parametrisation.
    fan_in, fan_out : int
        The layer's sizes.
    readout : bool, default False
        The last layer (muP scales it by 1 / fan_in).
    sigma : float, default 1.0
        The base scale.

    Returns
    -------
    float
    """
    _check_scheme(scheme)
    check_number("fan_in", fan_in, low=1, integer=True)
    check_number("fan_out", fan_out, low=1, integer=True)
    check_number("sigma", sigma, low=0)
    a, b = float(fan_in), float(fan_out)
    if scheme == "spectral":
        return sigma / math.sqrt(a) * min(1.0, math.sqrt(b / a))
    if scheme == "mup" and readout:
        return sigma / a
    return sigma / math.sqrt(a)


def lr_multiplier(scheme: str, fan_in: int, fan_out: int) -> float:
    """The factor that multiplies the base learning rate of a fan_in -> fan_out layer under ``scheme``.

    Parameters
    ----------
    scheme : {"sp", "ntp", "mup", "spectral"}
        The parametrisation.
    fan_in, fan_out : int
        The layer's sizes.

    Returns
    -------
    float
        1 (sp), 1 / fan_in (ntp), fan_out / fan_in (mup, spectral).
    """
    _check_scheme(scheme)
    check_number("fan_in", fan_in, low=1, integer=True)
    check_number("fan_out", fan_out, low=1, integer=True)
    if scheme == "sp":
        return 1.0
    if scheme == "ntp":
        return 1.0 / fan_in
    return fan_out / fan_in


def make_mlp(d_in: int, widths, d_out: int = 1, scheme: str = "spectral", *, sigma: float = 1.0,
             activation: str = "relu", generator=0, dtype="float32", device=None) -> MLP:
    """A bias-free :class:`rfm.nets.MLP` initialised under ``scheme`` (see the module's table), base scale sigma.

    Parameters
    ----------
    d_in : int
        Input dimension.
    widths : sequence of int
        Hidden widths.
    d_out : int, default 1
        Outputs.
    scheme : {"sp", "ntp", "mup", "spectral"}, default "spectral"
        The parametrisation.
    sigma : float, default 1.0
        The base scale.
    activation : str, default "relu"
        As in :class:`rfm.nets.MLP`.
    generator : int or torch.Generator, default 0
        Seeds the draws.
    dtype : str or torch.dtype, default "float32"
        The dtype.
    device : torch.device or str, optional
        The device.

    Returns
    -------
    MLP
    """
    _check_scheme(scheme)
    check_number("sigma", sigma, low=0, low_inclusive=False)
    dims = [int(d_in), *check_widths(widths), int(d_out)]
    scales = [init_std(scheme, a, b, readout=(l == len(dims) - 2), sigma=sigma) * math.sqrt(a)
              for l, (a, b) in enumerate(zip(dims[:-1], dims[1:]))]
    return MLP(d_in, widths, d_out, activation=activation, bias=False, init="normal", init_scale=scales,
               generator=generator, dtype=dtype, device=device)


def lr_groups(model, scheme: str, lr: float) -> list[dict]:
    """SGD parameter groups of an MLP, one per layer, with the learning rate ``lr * lr_multiplier(...)``.

    ``model`` is an :class:`rfm.nets.MLP` or an :class:`OutputScaled` around one. Use them as
    ``torch.optim.SGD(lr_groups(net, "mup", 0.1))``.

    Parameters
    ----------
    model : MLP or OutputScaled
        The network.
    scheme : {"sp", "ntp", "mup", "spectral"}
        The parametrisation.
    lr : float
        The base learning rate (> 0).

    Returns
    -------
    list of dict
        ``{"params", "lr"}`` per layer.
    """
    _check_scheme(scheme)
    check_number("lr", lr, low=0, low_inclusive=False)
    net = check_mlp(model.net if isinstance(model, OutputScaled) else model)
    return [{"params": list(layer.parameters()), "lr": lr * lr_multiplier(scheme, layer.in_features,
                                                                          layer.out_features)}
            for layer in net.layers]


class OutputScaled(nn.Module):
    """``f(x) = (net(x) - net_0(x)) / gamma``: the output scaled down by the feature-learning strength gamma.

    With ``center`` (the default) the output of the network at initialisation (a frozen copy) is removed, so that
    f = 0 at the start whatever gamma.

    Parameters
    ----------
    net : MLP
        The network.
    gamma : float, default 1.0
        The feature-learning strength (> 0).
    center : bool, default True
        Subtract the output of the network at initialisation.
    centre : bool or None, default None
        Deprecated name of ``center`` (used when given, with a DeprecationWarning).
    """

    def __init__(self, net: MLP, gamma: float = 1.0, *, center: bool = True, centre: bool | None = None):
        super().__init__()
        center = renamed_keyword("OutputScaled", "centre", "center", centre, center)
        self.net = check_mlp(net, "net")
        check_number("gamma", gamma, low=0, low_inclusive=False)
        self.gamma = float(gamma)
        self.center = bool(center)
        self.net0 = copy.deepcopy(net.initial()) if center else None
        if self.net0 is not None:
            for q in self.net0.parameters():
                q.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(net(x) - net_0(x)) / gamma (net(x) / gamma without ``center``).

        Parameters
        ----------
        x : torch.Tensor, shape (n, d)
            Inputs.

        Returns
        -------
        torch.Tensor, shape (n, c)
        """
        out = self.net(x)
        if self.net0 is not None:
            with torch.no_grad():
                out0 = self.net0(x)
            out = out - out0
        return out / self.gamma


# ----------------------------------------------------------------------------------------------------------------
# Measures


def _matrix(W, name="W") -> torch.Tensor:
    if isinstance(W, nn.Linear):
        W = W.weight
    if not isinstance(W, torch.Tensor):
        W = torch.as_tensor(np.asarray(W, dtype=float))
    if W.ndim != 2:
        raise ValueError(f"{name} must be a matrix (2-D), got shape {tuple(W.shape)}")
    return W.detach().to(torch.float64)


def spectral_norm(W) -> float:
    """The spectral norm (largest singular value) of a matrix or of an ``nn.Linear``'s weight.

    Parameters
    ----------
    W : torch.Tensor or torch.nn.Linear
        A matrix, or a layer whose weight is used.

    Returns
    -------
    float
    """
    return float(torch.linalg.matrix_norm(_matrix(W), ord=2))


def spectral_norms(model, *, initial: bool = False, change: bool = False) -> list[float]:
    """The spectral norm of every layer's weights W_l of an MLP (of W_l at initialisation with ``initial``, of
    ``W_l - W_l(0)`` with ``change``).

    Parameters
    ----------
    model : MLP or OutputScaled
        The network.
    initial : bool, default False
        Of the initial weights.
    change : bool, default False
        Of W_l - W_l(0).

    Returns
    -------
    list of float
        One per layer.
    """
    net = check_mlp(model.net if isinstance(model, OutputScaled) else model)
    out = []
    for l in range(net.n_layers):
        W = net.initial_weight(l) if initial else net.weight(l)
        if change:
            W = net.weight(l) - net.initial_weight(l)
        out.append(spectral_norm(W))
    return out


def stable_rank(W) -> float:
    """``||W||_F^2 / ||W||_2^2``: between 1 (rank one) and the rank; 0 for the zero matrix.

    Parameters
    ----------
    W : torch.Tensor or torch.nn.Linear
        A matrix, or a layer whose weight is used.

    Returns
    -------
    float
    """
    M = _matrix(W)
    s = torch.linalg.svdvals(M)
    if float(s[0]) == 0.0:
        return 0.0
    return float((s ** 2).sum() / s[0] ** 2)


@torch.no_grad()
def relative_feature_change(before: MLP, after: MLP, X) -> dict:
    """How much the hidden features and the output moved between two copies of one MLP, at the rows of X.

    Returns ``{"h1": ||h_1' - h_1|| / ||h_1||, ..., "f": mean |f' - f|}`` for the hidden layers' outputs h_l
    (after the activation; Frobenius norms over the rows of X).

    Parameters
    ----------
    before, after : MLP
        Two copies of one network.
    X : array-like, shape (n, d)
        Inputs.

    Returns
    -------
    dict of float

    Raises
    ------
    ValueError
        If the networks' parameter shapes differ.
    """
    before, after = check_mlp(before, "before"), check_mlp(after, "after")
    if [w.shape for w in before.parameters()] != [w.shape for w in after.parameters()]:
        raise ValueError("before and after must be the same architecture (two copies of one network)")
    p = next(before.parameters())
    X = torch.as_tensor(X, dtype=p.dtype, device=p.device)
    out = {}
    for l in range(1, before.n_layers):
        h0, h1 = before.layer_input(X, l), after.layer_input(X, l)
        out[f"h{l}"] = float((h1 - h0).norm() / h0.norm().clamp_min(1e-30))
    out["f"] = float((after(X) - before(X)).abs().mean())
    return out


def one_step_change(d_in: int, widths, scheme: str, lr: float, *, sigma: float = 1.0, generator=0,
                    activation: str = "relu", updates: bool = False) -> dict:
    """One SGD step of a fresh MLP under ``scheme`` on one Gaussian example x ~ N(0, I) with target 1 (MSE).

    Returns :func:`relative_feature_change` at x; with ``updates`` also "dW_stable_rank" (the stable rank of each
    layer's update) and "dW_spectral" (their spectral norms), two SVDs per layer (slow for wide layers).

    Parameters
    ----------
    d_in : int
        Input dimension.
    widths : sequence of int
        Hidden widths.
    scheme : {"sp", "ntp", "mup", "spectral"}
        The parametrisation.
    lr : float
        The base learning rate.
    sigma : float, default 1.0
        The base scale.
    generator : int, default 0
        Seed of the network and the example.
    activation : str, default "relu"
        The activation.
    updates : bool, default False
        Also the updates' stable ranks and spectral norms.

    Returns
    -------
    dict
        The entries of :func:`relative_feature_change`, and with ``updates`` two lists per layer.
    """
    g = torch.Generator().manual_seed(int(generator))
    net = make_mlp(d_in, widths, 1, scheme, sigma=sigma, activation=activation, generator=g, dtype="float64")
    x = torch.randn(1, d_in, generator=g, dtype=torch.float64)
    before = copy.deepcopy(net)
    opt = torch.optim.SGD(lr_groups(net, scheme, lr))
    train(net, x, torch.ones(1, 1, dtype=torch.float64), optimizer=opt, epochs=1)
    out = relative_feature_change(before, net, x)
    if updates:
        out["dW_stable_rank"] = [stable_rank(net.weight(l) - net.initial_weight(l)) for l in range(net.n_layers)]
        out["dW_spectral"] = spectral_norms(net, change=True)
    return out


def loglog_slope(x, y) -> float:
    """The least-squares slope of log y against log x (positive x, y): the exponent of
    :func:`rfm.models.transfer.fit_scaling_law`, the package's one log-log fit.

    Parameters
    ----------
    x, y : array-like
        Positive values of the same length.

    Returns
    -------
    float
    """
    return fit_scaling_law(x, y).slope


# ----------------------------------------------------------------------------------------------------------------
# The deep scalar toy of Atanasov et al. and the learning-rate edge


def toy_eta_max(gammas, depth: int, *, steps: int = 3000, target: float = 1.0, lo: float = 1e-6,
                hi: float = 1e6, grid: int = 400, refine: int = 2, blowup: float = 1e6) -> np.ndarray:
    """The largest stable GD step of ``f = (a_1 ... a_L - 1) / gamma``, ``a_l(0) = 1``, loss ``(f - target)^2 / 2``.

    A step is stable when the loss stays finite and below ``blowup`` times its initial value for ``steps`` steps.
    All gammas and a log-spaced grid of ``grid`` steps between ``lo`` and ``hi`` run at once (numpy arrays); the
    grid is then refined ``refine`` times around the edge. By symmetry all a_l stay equal (to u), so one scalar is
    simulated per (gamma, step): ``u <- u - eta (f - target) u^(L-1) / gamma``. For L = 1 the edge is 2 gamma^2,
    two over the curvature 1 / gamma^2.

    Parameters
    ----------
    gammas : array-like of float
        Positive gammas.
    depth : int
        L.
    steps : int, default 3000
        GD steps.
    target : float, default 1.0
        The target.
    lo, hi : float, default 1e-6, 1e6
        The range of steps searched.
    grid : int, default 400
        Grid points.
    refine : int, default 2
        Refinements.
    blowup : float, default 1e6
        The blow-up factor.

    Returns
    -------
    numpy.ndarray of float, shape (len(gammas),)
        The largest stable step per gamma.

    Raises
    ------
    ValueError
        If a gamma is not positive, or every step of the range is unstable.
    """
    gammas = np.asarray(gammas, dtype=float).reshape(-1)
    if (gammas <= 0).any():
        raise ValueError(f"gammas must be positive, got {gammas}")
    check_number("depth", depth, low=1, integer=True)
    check_number("steps", steps, low=1, integer=True)
    check_number("grid", grid, low=4, integer=True)
    L = int(depth)
    lo_e = np.full(len(gammas), math.log(lo))
    hi_e = np.full(len(gammas), math.log(hi))
    edge = np.empty(len(gammas))
    for _ in range(refine + 1):
        log_eta = lo_e[:, None] + (hi_e - lo_e)[:, None] * np.linspace(0, 1, grid)[None, :]
        eta = np.exp(log_eta)
        g = gammas[:, None]
        u = np.ones_like(eta)
        loss0 = 0.5 * target ** 2
        alive = np.ones_like(eta, dtype=bool)
        with np.errstate(over="ignore", invalid="ignore"):
            for _ in range(steps):
                f = (u ** L - 1.0) / g
                r = f - target
                u = np.where(alive, u - eta * r * u ** (L - 1) / g, u)
                bad = ~np.isfinite(u) | (0.5 * r ** 2 > blowup * loss0)
                alive &= ~bad
                u = np.where(alive, u, 1.0)
        # the edge: the last stable step before the first unstable one
        for i in range(len(gammas)):
            unstable = np.nonzero(~alive[i])[0]
            j = (unstable[0] - 1) if len(unstable) else grid - 1
            if j < 0:
                raise ValueError(f"every step in [{lo}, {hi}] is unstable at gamma={gammas[i]}; lower lo")
            edge[i] = log_eta[i, j]
            step = (hi_e[i] - lo_e[i]) / (grid - 1)
            lo_e[i], hi_e[i] = edge[i] - step, edge[i] + step
    return np.exp(edge)


def mlp_eta_edge(make_model, X, y, *, lrs, steps: int, scheme: str = "mup", blowup: float = 10.0,
                 skip_after: int | None = 2, threads: int | None = 1) -> dict:
    """Train a fresh ``make_model()`` by full-batch GD at each base learning rate of ``lrs`` (per-layer rates of
    ``scheme``); return {"lrs", "final" (last loss, inf when it blew up), "curves" (loss per step), "eta_max" (the
    largest lr that did not blow up), "eta_star" (the lr of the lowest final loss)}.

    A run blows up when its loss becomes non-finite or exceeds ``blowup`` times the initial loss; it stops there.
    The ``lrs`` are run in increasing order; after ``skip_after`` consecutive blow-ups the larger ones are counted
    as blown up without running them (None runs all).

    Parameters
    ----------
    make_model : callable
        Returns a fresh network.
    X, y : torch.Tensor
        Training data.
    lrs : iterable of float
        Base learning rates.
    steps : int
        GD steps per run.
    scheme : {"sp", "ntp", "mup", "spectral"}, default "mup"
        The per-layer rates.
    blowup : float, default 10.0
        The blow-up factor.
    skip_after : int or None, default 2
        Consecutive blow-ups after which larger rates are skipped.
    threads : int or None, default 1
        As in :func:`rfm.nets.train`.

    Returns
    -------
    dict
        As described above.
    """
    lrs = sorted(float(v) for v in lrs)
    finals, curves = [], []
    for lr in lrs:
        if skip_after is not None and len(finals) >= skip_after and all(
                not math.isfinite(v) for v in finals[-skip_after:]):
            finals.append(float("inf"))
            curves.append(np.asarray([np.nan]))
            continue
        model = make_model()
        opt = torch.optim.SGD(lr_groups(model, scheme, lr))
        losses = []

        def stop(net, rec, losses=losses):
            losses.append(rec["train_loss"])
            return (not math.isfinite(rec["train_loss"])) or rec["train_loss"] > blowup * losses[0]

        try:
            train_full_batch(model, X, y, opt, steps=steps, callback=stop, threads=threads)
        except FloatingPointError:
            losses.append(float("inf"))
        blew = (not math.isfinite(losses[-1])) or losses[-1] > blowup * losses[0]
        finals.append(float("inf") if blew else float(losses[-1]))
        curves.append(np.asarray(losses, dtype=float))
    finals = np.asarray(finals)
    stable = np.isfinite(finals)
    eta_max = max((lr for lr, s in zip(lrs, stable) if s), default=float("nan"))
    eta_star = lrs[int(np.argmin(finals))] if stable.any() else float("nan")
    return dict(lrs=np.asarray(lrs), final=finals, curves=curves, eta_max=eta_max, eta_star=eta_star)


def plateau_fraction(losses, *, tol: float = 0.05) -> float:
    """Deprecated: :func:`rfm.nets.curves.plateau_fraction` (whose default ``tol`` is 0.01) with ``tol=0.05``.

    Parameters
    ----------
    losses : sequence of float
        A finite loss curve of at least two values.
    tol : float
        The relative drop that ends the plateau.

    Returns
    -------
    float
        The plateau fraction.
    """
    warnings.warn("rfm.nets.parametrisation.plateau_fraction is rfm.nets.curves.plateau_fraction(losses, tol=0.05) "
                  "since rfm 0.2; the old name will be removed in 0.3", DeprecationWarning, stacklevel=2)
    return curves.plateau_fraction(losses, tol=tol)


__all__ = ["SCHEMES", "OutputScaled", "init_std", "lr_groups", "lr_multiplier", "loglog_slope", "make_mlp",
           "mlp_eta_edge", "one_step_change", "plateau_fraction", "relative_feature_change", "spectral_norm",
           "spectral_norms", "stable_rank", "toy_eta_max"]
