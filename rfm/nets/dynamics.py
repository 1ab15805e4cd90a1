r"""Training dynamics beyond the kernel regime: linearised and quadratic models, the empirical NTK, catapults.

**Loss and sharpness.** Everything here uses the squared loss L(w) = (1/2n) sum_i (f(w; x_i) - y_i)^2 and full-batch
gradient descent w <- w - eta grad L(w). With J the n x p parameter Jacobian of the outputs, the tangent kernel
(empirical NTK) is K = J J^T, and the Gauss-Newton part of the loss Hessian, J^T J / n, has the same nonzero
eigenvalues as K / n. We call **lambda = lambda_max(K) / n** the sharpness of the model at w (at zero residual it
is the top eigenvalue of the loss Hessian). For a model linear in w the residual obeys r <- (I - eta K / n) r, so
gradient descent converges exactly when eta < 2 / lambda_0 (:func:`lr_for_sharpness` gives eta = c 2 / lambda_0).
Zhu, Liu, Radhakrishnan & Belkin (ICLR 2024) write L = (1/2) sum_i r_i^2 without the 1/n; their lambda and eta
differ from these by the factor n, and the multiple c is the same.

**Linearised and quadratic models** of any ``torch.nn.Module`` f with parameters w_0 (:class:`LinearizedModel`,
:class:`QuadraticModel`)::

    f_lin(w)  = f(w_0) + J(w_0) (w - w_0)
    f_quad(w) = f_lin(w) + (1/2) (w - w_0)^T H_f(w_0) (w - w_0)       (the neural quadratic model, NQM)

built from forward-mode derivatives (``torch.func.jvp``: J Delta is one jvp, Delta^T H Delta a jvp of a jvp),
so they never form J or H. Both are ``nn.Module`` s whose parameters are w (starting at w_0): train them like the
network (e.g. with :func:`rfm.nets.optim.train_full_batch`).

**Closed-form fast path** for the two-layer ReLU network of Zhu et al. (their Eq. (9)), in the NTK
parametrisation::

    f(U, v; x) = (1/sqrt(m)) sum_i v_i relu(u_i^T x / sqrt(d)),   u_i ~ N(0, I_d),  v_i uniform on {-1, 1}

Since relu'' = 0 almost everywhere, the only second derivatives are the cross terms d^2 f / (dv_i du_i) =
relu'(a_i) x / sqrt(md), and the NQM is (a_i = u_i^T x / sqrt(d); Delta = current minus initial values)::

    f_quad = f(w_0) + (1/sqrt(m)) sum_i [ Delta v_i relu(a_{0,i}) + v_i relu'(a_{0,i}) Delta u_i^T x / sqrt(d) ]

with v_i = v_{0,i} + Delta v_i (the linear model has v_{0,i} there). :func:`two_layer_outputs`,
:func:`two_layer_gradients` and :func:`two_layer_ntk` give the outputs, the loss gradients and the tangent kernel of
the three models in closed form; :func:`two_layer_gd` runs gradient descent on them. The tests check the closed
forms against :class:`QuadraticModel` and autograd in float64.

**Spikes.** :func:`count_spikes` counts loss spikes by a fixed rule (see there), for catapults in GD and SGD.
"""
from __future__ import annotations

import copy
import math

import torch
from torch import nn
from torch.func import functional_call, jacrev, jvp, vmap

from .._checks import check_matrix, check_number, resolve_dtype
from ..utils import make_generator

#: The models of the closed-form fast path (``kind=``): the network, its linearisation and its NQM.
KINDS = ("network", "linear", "quadratic")


# ----------------------------------------------------------------------------------------------------------------
# Generic linearised and quadratic models of any torch.nn.Module


def _check_module(model, name="model"):
    if not isinstance(model, nn.Module):
        raise TypeError(f"{name} must be a torch.nn.Module (e.g. rfm.nets.MLP), got {type(model).__name__}")
    if not any(True for _ in model.parameters()):
        raise ValueError(f"{name} has no parameters: there is nothing to expand around")
    return model


class _TaylorModel(nn.Module):
    """Shared set-up: a frozen copy of the network, its initial parameters w_0 and trainable parameters w."""

    def __init__(self, model: nn.Module):
        super().__init__()
        model = _check_module(model)
        base = copy.deepcopy(model)
        for p in base.parameters():
            p.requires_grad_(False)
        self._base = (base,)            # a tuple: not registered, so its parameters are not the model's
        self._names = [name for name, _ in model.named_parameters()]
        self.params = nn.ParameterList([nn.Parameter(p.detach().clone()) for _, p in model.named_parameters()])
        for i, (_, p) in enumerate(model.named_parameters()):
            self.register_buffer(f"w0_{i}", p.detach().clone())

    def _w0(self) -> dict:
        return {name: getattr(self, f"w0_{i}") for i, name in enumerate(self._names)}

    def _delta(self) -> dict:
        return {name: p - getattr(self, f"w0_{i}") for i, (name, p) in enumerate(zip(self._names, self.params))}

    def _f(self, x):
        base = self._base[0]
        return lambda w: functional_call(base, w, (x,))


class LinearizedModel(_TaylorModel):
    r"""The linearisation f_lin(w) = f(w_0) + J(w_0)(w - w_0) of ``model`` around its current parameters w_0.

    The parameters of this module are w (a copy of w_0 at construction; ``model`` itself is not changed). Its
    tangent kernel is the network's at initialisation, at every w.

    Examples
    --------
    >>> import torch
    >>> from rfm.nets import MLP
    >>> from rfm.nets.dynamics import LinearizedModel
    >>> net = MLP(3, [8], dtype="float64")
    >>> lin = LinearizedModel(net)
    >>> X = torch.randn(4, 3, dtype=torch.float64)
    >>> bool(torch.allclose(lin(X), net(X)))      # equal at w = w_0
    True
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f0, df = jvp(self._f(x), (self._w0(),), (self._delta(),))
        return f0 + df


class QuadraticModel(_TaylorModel):
    r"""The neural quadratic model f_quad(w) = f(w_0) + J(w_0)(w - w_0) + (1/2)(w - w_0)^T H_f(w_0)(w - w_0).

    The second-order Taylor expansion of ``model`` in its parameters around their current values w_0 (Zhu, Liu,
    Radhakrishnan & Belkin, ICLR 2024). The Hessian term is a forward-mode derivative of a forward-mode
    derivative (two nested ``torch.func.jvp``); neither J nor H is formed. A network that is itself quadratic in
    its parameters (a two-layer network with a linear activation) equals its NQM at every w.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f, w0, delta = self._f(x), self._w0(), self._delta()

        def directional(w):              # J(w) Delta
            return jvp(f, (w,), (delta,))[1]

        with torch.no_grad():
            f0 = f(w0)
        jd, hdd = jvp(directional, (w0,), (delta,))   # J(w_0) Delta and Delta^T H(w_0) Delta
        return f0 + jd + 0.5 * hdd


# ----------------------------------------------------------------------------------------------------------------
# The empirical NTK and learning rates


def _scalar_outputs(model, X):
    with torch.no_grad():
        out = model(X[:1])
    if out.ndim != 2 or out.shape[1] != 1:
        raise ValueError(f"the model returns outputs of shape {tuple(out.shape)} for one input; the empirical NTK "
                         "here is for models with one output, shape (n, 1)")


def parameter_jacobian(model: nn.Module, X) -> torch.Tensor:
    """The (n, p) Jacobian of a one-output ``model``'s outputs at the rows of X with respect to all its parameters
    (in the order of ``model.named_parameters()``), by ``torch.func.jacrev`` and ``vmap``."""
    model = _check_module(model)
    p0 = next(model.parameters())
    X = check_matrix(X, "X", dtype=p0.dtype, device=p0.device)
    _scalar_outputs(model, X)
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = dict(model.named_buffers())

    def f(w, x):
        return functional_call(model, (w, buffers), (x[None],)).reshape(())

    jac = vmap(jacrev(f), in_dims=(None, 0))(params, X)
    return torch.cat([j.reshape(X.shape[0], -1) for j in jac.values()], dim=1)


def empirical_ntk(model: nn.Module, X, Z=None) -> torch.Tensor:
    """The tangent kernel K(x_i, z_j) = <grad_w f(x_i), grad_w f(z_j)> of a one-output ``model`` at its current
    parameters, an (n, n) matrix for Z None (Z = X), else (n, n_Z)."""
    J = parameter_jacobian(model, X)
    return J @ J.T if Z is None else J @ parameter_jacobian(model, Z).T


def _check_kernel(K, name="K"):
    if not isinstance(K, torch.Tensor) or K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be a square (n, n) tensor, got "
                         f"{tuple(K.shape) if isinstance(K, torch.Tensor) else type(K).__name__}")
    if not bool(torch.isfinite(K).all()):
        raise ValueError(f"{name} has NaN or infinite entries")
    return K


def top_ntk_eigen(K: torch.Tensor, k: int = 1):
    """The k largest eigenvalues (descending) and their eigenvectors (columns) of a symmetric kernel matrix K."""
    K = _check_kernel(K)
    check_number("k", k, low=1, high=K.shape[0], integer=True)
    vals, vecs = torch.linalg.eigh(0.5 * (K + K.T))
    return vals.flip(0)[:k], vecs.flip(1)[:, :k]


def sharpness(K: torch.Tensor) -> float:
    """lambda = lambda_max(K) / n: the top eigenvalue of the Gauss-Newton matrix of L = (1/2n) sum r_i^2."""
    K = _check_kernel(K)
    return float(torch.linalg.eigvalsh(0.5 * (K + K.T))[-1]) / K.shape[0]


def lr_for_sharpness(c: float, lam: float) -> float:
    """The learning rate eta = c * 2 / lam: c < 1 is below the linear model's critical rate 2 / lam."""
    check_number("c", c, low=0, low_inclusive=False)
    check_number("lam", lam, low=0, low_inclusive=False)
    return 2.0 * float(c) / float(lam)


def residual_in_top_eigenspace(K: torch.Tensor, residual, k: int = 1) -> float:
    """The share ||P_k r||^2 / ||r||^2 of the residual r in the span of K's top-k eigenvectors."""
    K = _check_kernel(K)
    r = torch.as_tensor(residual, dtype=K.dtype, device=K.device).reshape(-1)
    if r.shape[0] != K.shape[0]:
        raise ValueError(f"residual has {r.shape[0]} entries but K is {K.shape[0]} x {K.shape[0]}")
    _, V = top_ntk_eigen(K, k)
    total = float(r @ r)
    return float(((V.T @ r) ** 2).sum()) / total if total > 0 else 0.0


def count_spikes(losses, factor: float = 2.0) -> int:
    """The number of loss spikes in a sequence of training losses, by a fixed rule.

    A spike starts at step t when the loss exceeds ``factor`` times the lowest loss seen before t, and ends at the
    first later step where the loss is back below ``factor`` times that lowest loss (the running minimum is frozen
    during the spike). A run that diverges (the loss grows and never returns, or becomes NaN or infinite) counts
    as one spike. Monotone or slowly oscillating losses (within the factor) have none."""
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


# ----------------------------------------------------------------------------------------------------------------
# The closed-form fast path: the two-layer ReLU network of Zhu et al., its linearisation and its NQM


def two_layer_init(d: int, m: int, generator=0, dtype="float64"):
    """Initial parameters (U_0, v_0) of the two-layer network: U_0 (m, d) with N(0, 1) entries, v_0 (m,) uniform on
    {-1, 1} (the initialisation of Zhu et al., section 3)."""
    check_number("d", d, low=1, integer=True)
    check_number("m", m, low=1, integer=True)
    g = make_generator(generator)
    dtype = resolve_dtype(dtype)
    U = torch.randn(m, d, generator=g, dtype=dtype)
    v = (2 * torch.randint(0, 2, (m,), generator=g) - 1).to(dtype)
    return U, v


def _check_kind(kind):
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return kind


def _check_two_layer(U, v, U0, v0, X):
    for name, t, nd in (("U", U, 2), ("v", v, 1), ("U0", U0, 2), ("v0", v0, 1)):
        if not isinstance(t, torch.Tensor) or t.ndim != nd:
            raise ValueError(f"{name} must be a {nd}-D tensor, got "
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
    if U.shape != U0.shape or v.shape != v0.shape or U.shape[0] != v.shape[0]:
        raise ValueError(f"U {tuple(U.shape)}, v {tuple(v.shape)}, U0 {tuple(U0.shape)} and v0 {tuple(v0.shape)} "
                         "must be (m, d), (m,), (m, d), (m,)")
    X = check_matrix(X, "X", dtype=U.dtype, device=U.device)
    if X.shape[1] != U.shape[1]:
        raise ValueError(f"X has {X.shape[1]} features but U has {U.shape[1]} columns")
    return X


def _initial_pieces(U0, v0, X):
    """relu(A_0), relu'(A_0) and f(w_0) at the rows of X (A_0 = X U_0^T / sqrt(d)), reused at every step."""
    m, d = U0.shape
    A0 = X @ U0.T / math.sqrt(d)
    S0 = torch.relu(A0)
    return S0, (A0 > 0).to(X.dtype), S0 @ v0 / math.sqrt(m)


def _features(kind, U, v, U0, v0, X, initial=None):
    """The outputs out (n,) and the pieces of the Jacobian: Fv (n, m) = sqrt(m) df/dv and Cu (n, m) with
    df/du_i = Cu[:, i] x / sqrt(md). ``initial``: :func:`_initial_pieces` at X, when already computed."""
    m, d = U.shape
    if kind == "network":
        A = X @ U.T / math.sqrt(d)
        Fv, Cu = torch.relu(A), (A > 0).to(X.dtype) * v
        out = Fv @ v / math.sqrt(m)
        return out, Fv, Cu
    S0, D0, f0 = _initial_pieces(U0, v0, X) if initial is None else initial
    P = X @ (U - U0).T / math.sqrt(d)                 # Delta u_i^T x / sqrt(d)
    dv = v - v0
    if kind == "linear":
        out = f0 + (S0 @ dv + (D0 * P) @ v0) / math.sqrt(m)
        return out, S0, D0 * v0
    out = f0 + (S0 @ dv + (D0 * P) @ v) / math.sqrt(m)
    return out, S0 + D0 * P, D0 * v


def two_layer_outputs(kind: str, U, v, U0, v0, X) -> torch.Tensor:
    """Outputs (n,) at the rows of X of the network (``kind="network"``), its linearisation ("linear") or its NQM
    ("quadratic") around (U0, v0), at parameters (U, v)."""
    _check_kind(kind)
    X = _check_two_layer(U, v, U0, v0, X)
    return _features(kind, U, v, U0, v0, X)[0]


def two_layer_gradients(kind: str, U, v, U0, v0, X, y):
    """(loss, grad_U, grad_v) of L = (1/2n) sum_i (f(x_i) - y_i)^2 for the model ``kind``, in closed form."""
    _check_kind(kind)
    X = _check_two_layer(U, v, U0, v0, X)
    y = torch.as_tensor(y, dtype=X.dtype, device=X.device).reshape(-1)
    n, (m, d) = X.shape[0], U.shape
    out, Fv, Cu = _features(kind, U, v, U0, v0, X)
    r = out - y
    gv = Fv.T @ r / (n * math.sqrt(m))
    gU = (Cu * r[:, None]).T @ X / (n * math.sqrt(m * d))
    return 0.5 * float(r @ r) / n, gU, gv


def two_layer_ntk(kind: str, U, v, U0, v0, X) -> torch.Tensor:
    """The tangent kernel K = J J^T (n, n) of the model ``kind`` at (U, v), in closed form:
    K = (F F^T + (C C^T) * (X X^T) / d) / m with F = sqrt(m) df/dv and df/du_i = C_i x / sqrt(md)."""
    _check_kind(kind)
    X = _check_two_layer(U, v, U0, v0, X)
    m, d = U.shape
    _, Fv, Cu = _features(kind, U, v, U0, v0, X)
    return (Fv @ Fv.T + (Cu @ Cu.T) * (X @ X.T) / d) / m


def _check_data(U0, v0, X, y, X_test=None, y_test=None):
    """The training (and test) data of a two-layer run, checked against (U0, v0) and as tensors of X's dtype."""
    X = _check_two_layer(U0, v0, U0, v0, X)
    y = torch.as_tensor(y, dtype=X.dtype, device=X.device).reshape(-1)
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y has {y.shape[0]} values but X has {X.shape[0]} rows")
    if (X_test is None) != (y_test is None):
        raise ValueError("X_test and y_test must be given together")
    if X_test is not None:
        X_test = check_matrix(X_test, "X_test", dtype=X.dtype, device=X.device)
        y_test = torch.as_tensor(y_test, dtype=X.dtype, device=X.device).reshape(-1)
        if y_test.shape[0] != X_test.shape[0]:
            raise ValueError(f"y_test has {y_test.shape[0]} values but X_test has {X_test.shape[0]} rows")
    return X, y, X_test, y_test


def two_layer_gd(kind: str, X, y, U0, v0, *, lr: float, steps: int, X_test=None, y_test=None,
                 kernel_every: int = 0, test_every: int = 10, blowup: float = 1e8) -> dict:
    """Full-batch gradient descent on the model ``kind`` ("network", "linear", "quadratic") from (U0, v0).

    Returns a dict with ``loss`` (the training loss before each step and after the last: steps + 1 values, fewer
    when the run diverged), ``diverged`` (the loss exceeded ``blowup`` times its initial value or became non-finite;
    the run stops there), ``sharpness`` [(step, lambda_max(K)/n)] every ``kernel_every`` steps and at the end
    (0: only at the start and the end), ``test`` [(step, test loss)] every ``test_every`` steps and at the end when
    test data are given (test loss (1/2n) sum (f - y)^2 like the training loss), and the final ``U``, ``v``."""
    _check_kind(kind)
    check_number("lr", lr, low=0, low_inclusive=False)
    check_number("steps", steps, low=0, integer=True)
    check_number("kernel_every", kernel_every, low=0, integer=True)
    check_number("test_every", test_every, low=1, integer=True)
    check_number("blowup", blowup, low=1, low_inclusive=False)
    X, y, X_test, y_test = _check_data(U0, v0, X, y, X_test, y_test)
    U, v = U0.clone(), v0.clone()
    n, (m, d) = X.shape[0], U.shape
    losses, lams, tests, diverged = [], [], [], False
    init = None if kind == "network" else _initial_pieces(U0, v0, X)
    init_test = None if kind == "network" or X_test is None else _initial_pieces(U0, v0, X_test)

    def lam_now():
        _, Fv, Cu = _features(kind, U, v, U0, v0, X, init)
        return sharpness((Fv @ Fv.T + (Cu @ Cu.T) * (X @ X.T) / d) / m)

    def test_now():
        r = _features(kind, U, v, U0, v0, X_test, init_test)[0] - y_test
        return 0.5 * float(r @ r) / r.shape[0]

    lams.append((0, lam_now()))
    for t in range(steps + 1):
        out, Fv, Cu = _features(kind, U, v, U0, v0, X, init)
        r = out - y
        loss = 0.5 * float(r @ r) / n
        losses.append(loss)
        if X_test is not None and (t % test_every == 0 or t == steps):
            tests.append((t, test_now()))
        if not math.isfinite(loss) or loss > blowup * max(losses[0], 1e-300):
            diverged = True
            break
        if kernel_every and t and t % kernel_every == 0 and t < steps:
            lams.append((t, lam_now()))
        if t == steps:
            break
        U -= (lr / (n * math.sqrt(m * d))) * ((Cu * r[:, None]).T @ X)
        v -= (lr / (n * math.sqrt(m))) * (Fv.T @ r)
    if not diverged:
        lams.append((steps, lam_now()))
    return {"loss": losses, "diverged": diverged, "sharpness": lams, "test": tests, "U": U, "v": v}
