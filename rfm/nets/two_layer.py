r"""The functional two-layer ReLU network of Zhu, Liu, Radhakrishnan & Belkin: outputs, gradients, NTK, GD, SGD,
AGOP, in closed form, for the network, its linearisation and its neural quadratic model (NQM).

In the NTK parametrisation (their Eq. (9))::

    f(U, v; x) = (1/sqrt(m)) sum_i v_i relu(u_i^T x / sqrt(d)),   u_i ~ N(0, I_d),  v_i uniform on {-1, 1}

Since relu'' = 0 almost everywhere, the only second derivatives are the cross terms d^2 f / (dv_i du_i) =
relu'(a_i) x / sqrt(md), and the NQM is (a_i = u_i^T x / sqrt(d); Delta = current minus initial values)::

    f_quad = f(w_0) + (1/sqrt(m)) sum_i [ Delta v_i relu(a_{0,i}) + v_i relu'(a_{0,i}) Delta u_i^T x / sqrt(d) ]

with v_i = v_{0,i} + Delta v_i (the linear model has v_{0,i} there). The loss is L = (1/2n) sum_i r_i^2.

* :func:`two_layer_init` -- the initial (U_0, v_0);
* :func:`features` -- the outputs and the Jacobian's pieces, from which everything else is built;
  :func:`two_layer_outputs`, :func:`two_layer_gradients`, :func:`two_layer_ntk` (K = J J^T) and
  :func:`two_layer_loss`;
* :func:`two_layer_gd` -- full-batch gradient descent on any of the three models, with the sharpness along the way;
  :func:`two_layer_sgd` -- mini-batch SGD on the network;
* :func:`two_layer_input_gradients` and :func:`two_layer_agop` -- grad_x f = U^T (v * relu'(U x / sqrt(d))) /
  sqrt(md) and the AGOP (1/n) sum_i grad f(x_i) grad f(x_i)^T.

The tests check the closed forms against :class:`rfm.nets.dynamics.QuadraticModel`, :func:`rfm.agop` and autograd
in float64. GD and SGD here update (U, v) by these formulas, not through :func:`rfm.nets.training.fit`: they are the
fast path, and their floating-point operations are the ones the catapult chapters were calibrated with.
"""
from __future__ import annotations

import math

import torch

from .._checks import check_matrix, check_number, resolve_dtype
from ..utils import make_generator
from .tangent_kernel import sharpness

__all__ = ["KINDS", "check_data", "check_two_layer", "features", "two_layer_agop", "two_layer_gd",
           "two_layer_gradients", "two_layer_init", "two_layer_input_gradients", "two_layer_loss", "two_layer_ntk",
           "two_layer_outputs", "two_layer_sgd"]

#: The models of the closed-form fast path (``kind=``): the network, its linearisation and its NQM.
KINDS = ("network", "linear", "quadratic")


def two_layer_init(d: int, m: int, generator=0, dtype="float64"):
    """Initial parameters (U_0, v_0) of the two-layer network: U_0 (m, d) with N(0, 1) entries, v_0 (m,) uniform on
    {-1, 1} (the initialisation of Zhu et al., section 3).

    Parameters
    ----------
    d, m : int
        Input dimension and width.
    generator : int or torch.Generator
        Seed or generator of the draws.
    dtype : str or torch.dtype
        "float32" or "float64".

    Returns
    -------
    (torch.Tensor, torch.Tensor)
        U_0 and v_0.
    """
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


def check_two_layer(U, v, U0, v0, X):
    """Check the parameters (U, v), the initial ones (U0, v0) and the inputs X of the two-layer network.

    Parameters
    ----------
    U, v, U0, v0 : torch.Tensor
        (m, d), (m,), (m, d), (m,).
    X : array-like
        (n, d) inputs.

    Returns
    -------
    torch.Tensor
        X as a finite tensor of U's dtype and device.
    """
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


def features(kind, U, v, U0, v0, X, initial=None):
    """The outputs out (n,) and the pieces of the Jacobian: Fv (n, m) = sqrt(m) df/dv and Cu (n, m) with
    df/du_i = Cu[:, i] x / sqrt(md), of the model ``kind`` at (U, v) around (U0, v0). Unchecked (the public
    functions check their inputs).

    Parameters
    ----------
    kind : {"network", "linear", "quadratic"}
        The model.
    U, v, U0, v0 : torch.Tensor
        The parameters and the initial ones.
    X : torch.Tensor
        (n, d) inputs.
    initial : tuple, optional
        relu(A_0), relu'(A_0) and f(w_0) at X, when already computed (they do not change during training).

    Returns
    -------
    (torch.Tensor, torch.Tensor, torch.Tensor)
        out, Fv, Cu.
    """
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
    ("quadratic") around (U0, v0), at parameters (U, v).

    Parameters
    ----------
    kind : {"network", "linear", "quadratic"}
        The model.
    U, v, U0, v0 : torch.Tensor
        The parameters (m, d), (m,) and the initial ones the linearisation and the NQM expand around.
    X : array-like
        (n, d) inputs.

    Returns
    -------
    torch.Tensor
        (n,) outputs.
    """
    _check_kind(kind)
    X = check_two_layer(U, v, U0, v0, X)
    return features(kind, U, v, U0, v0, X)[0]


def two_layer_gradients(kind: str, U, v, U0, v0, X, y):
    """(loss, grad_U, grad_v) of L = (1/2n) sum_i (f(x_i) - y_i)^2 for the model ``kind``, in closed form.

    Parameters
    ----------
    kind : {"network", "linear", "quadratic"}
        The model.
    U, v, U0, v0 : torch.Tensor
        The parameters (m, d), (m,) and the initial ones the linearisation and the NQM expand around.
    X, y : array-like
        (n, d) inputs and (n,) targets.

    Returns
    -------
    (float, torch.Tensor, torch.Tensor)
        The loss and its gradients with respect to U and v.
    """
    _check_kind(kind)
    X = check_two_layer(U, v, U0, v0, X)
    y = torch.as_tensor(y, dtype=X.dtype, device=X.device).reshape(-1)
    n, (m, d) = X.shape[0], U.shape
    out, Fv, Cu = features(kind, U, v, U0, v0, X)
    r = out - y
    gv = Fv.T @ r / (n * math.sqrt(m))
    gU = (Cu * r[:, None]).T @ X / (n * math.sqrt(m * d))
    return 0.5 * float(r @ r) / n, gU, gv


def two_layer_ntk(kind: str, U, v, U0, v0, X) -> torch.Tensor:
    """The tangent kernel K = J J^T (n, n) of the model ``kind`` at (U, v), in closed form:
    K = (F F^T + (C C^T) * (X X^T) / d) / m with F = sqrt(m) df/dv and df/du_i = C_i x / sqrt(md).

    Parameters
    ----------
    kind : {"network", "linear", "quadratic"}
        The model.
    U, v, U0, v0 : torch.Tensor
        The parameters (m, d), (m,) and the initial ones the linearisation and the NQM expand around.
    X : array-like
        (n, d) inputs.

    Returns
    -------
    torch.Tensor
        (n, n) kernel matrix.
    """
    _check_kind(kind)
    X = check_two_layer(U, v, U0, v0, X)
    m, d = U.shape
    _, Fv, Cu = features(kind, U, v, U0, v0, X)
    return (Fv @ Fv.T + (Cu @ Cu.T) * (X @ X.T) / d) / m


def check_data(U0, v0, X, y, X_test=None, y_test=None):
    """The training (and test) data of a two-layer run, checked against (U0, v0) and as tensors of X's dtype.

    Parameters
    ----------
    U0, v0 : torch.Tensor
        The initial parameters.
    X, y : array-like
        The training inputs (n, d) and targets (n,).
    X_test, y_test : array-like, optional
        Test data, given together.

    Returns
    -------
    tuple
        (X, y, X_test, y_test) as tensors (the test ones None when not given).
    """
    X = check_two_layer(U0, v0, U0, v0, X)
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
    test data are given (test loss (1/2n) sum (f - y)^2 like the training loss), and the final ``U``, ``v``.

    Parameters
    ----------
    kind : {"network", "linear", "quadratic"}
        The model.
    X, y : array-like
        Training inputs (n, d) and targets (n,).
    U0, v0 : torch.Tensor
        The start (and the point the linearisation and the NQM expand around).
    lr : float
        The learning rate.
    steps : int
        The number of steps.
    X_test, y_test : array-like, optional
        Test data, measured every ``test_every`` steps.
    kernel_every, test_every : int
        How often the sharpness and the test loss are measured.
    blowup : float
        The divergence threshold, relative to the initial loss.

    Returns
    -------
    dict
        ``loss``, ``diverged``, ``sharpness``, ``test``, ``U``, ``v`` as above.
    """
    _check_kind(kind)
    check_number("lr", lr, low=0, low_inclusive=False)
    check_number("steps", steps, low=0, integer=True)
    check_number("kernel_every", kernel_every, low=0, integer=True)
    check_number("test_every", test_every, low=1, integer=True)
    check_number("blowup", blowup, low=1, low_inclusive=False)
    X, y, X_test, y_test = check_data(U0, v0, X, y, X_test, y_test)
    U, v = U0.clone(), v0.clone()
    n, (m, d) = X.shape[0], U.shape
    losses, lams, tests, diverged = [], [], [], False
    init = None if kind == "network" else _initial_pieces(U0, v0, X)
    init_test = None if kind == "network" or X_test is None else _initial_pieces(U0, v0, X_test)

    def lam_now():
        _, Fv, Cu = features(kind, U, v, U0, v0, X, init)
        return sharpness((Fv @ Fv.T + (Cu @ Cu.T) * (X @ X.T) / d) / m)

    def test_now():
        r = features(kind, U, v, U0, v0, X_test, init_test)[0] - y_test
        return 0.5 * float(r @ r) / r.shape[0]

    lams.append((0, lam_now()))
    for t in range(steps + 1):
        out, Fv, Cu = features(kind, U, v, U0, v0, X, init)
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


def two_layer_loss(U, v, X, y) -> float:
    """The loss L = (1/2n) sum_i (f(x_i) - y_i)^2 of the network at (U, v) on (X, y), as a float.

    Parameters
    ----------
    U, v : torch.Tensor
        The parameters, (m, d) and (m,).
    X : torch.Tensor
        (n, d) inputs (checked by the caller).
    y : torch.Tensor
        (n,) targets.

    Returns
    -------
    float
        The loss.
    """
    r = features("network", U, v, U, v, X)[0] - y
    return 0.5 * float(r @ r) / r.shape[0]


def two_layer_sgd(X, y, U0, v0, *, lr: float, batch_size: int, epochs: int, generator=0, X_test=None,
                  y_test=None, blowup: float = 1e8, max_steps: int | None = None, kernel_every: int = 0) -> dict:
    """Mini-batch SGD on the two-layer network from (U0, v0), on L_B = (1/2b) sum_{i in B} r_i^2.

    Each epoch draws a random permutation of the n training points (``generator`` seeds it) and takes
    ceil(n / batch_size) steps on consecutive batches (the last one may be smaller). ``batch_size = n`` is
    full-batch GD, step for step equal to :func:`two_layer_gd`. Returns a dict with ``loss``
    (the full-batch training loss before each step and after the last), ``steps``, ``diverged`` (the full-batch
    loss passed ``blowup`` times its initial value or became non-finite; the run stops there), ``test`` (the
    final test loss, None without test data or after divergence) and the final ``U``, ``v``. ``max_steps`` stops the
    run after that many steps, with the batches of the whole run (to replay a run up to a step of interest).
    ``kernel_every > 0`` adds ``sharpness`` [(step, lambda_max(K)/n)], the full-batch tangent kernel's sharpness
    at step 0 and after every ``kernel_every`` steps (the quantity :func:`two_layer_gd` records).

    Parameters
    ----------
    X, y : array-like
        Training inputs (n, d) and targets (n,).
    U0, v0 : torch.Tensor
        The start.
    lr : float
        The learning rate.
    batch_size, epochs : int
        Batch size (<= n) and number of epochs.
    generator : int or torch.Generator
        Seed or generator of the permutations.
    X_test, y_test : array-like, optional
        Test data, measured at the end.
    blowup : float
        The divergence threshold, relative to the initial loss.
    max_steps : int, optional
        Stop after this many steps.
    kernel_every : int, default=0
        How often the full-batch sharpness is measured (0: never).

    Returns
    -------
    dict
        ``loss``, ``steps``, ``diverged``, ``test``, ``U``, ``v`` as above, and ``sharpness`` when
        ``kernel_every > 0``.
    """
    check_number("lr", lr, low=0, low_inclusive=False)
    check_number("epochs", epochs, low=1, integer=True)
    check_number("blowup", blowup, low=1, low_inclusive=False)
    if max_steps is not None:
        check_number("max_steps", max_steps, low=0, integer=True)
    check_number("kernel_every", kernel_every, low=0, integer=True)
    X, y, X_test, y_test = check_data(U0, v0, X, y, X_test, y_test)
    n, (m, d) = X.shape[0], U0.shape
    check_number("batch_size", batch_size, low=1, high=n, integer=True)
    g = make_generator(generator)
    U, v = U0.clone(), v0.clone()
    losses, diverged = [two_layer_loss(U, v, X, y)], False

    def lam_now():
        _, Fv, Cu = features("network", U, v, U, v, X)
        return sharpness((Fv @ Fv.T + (Cu @ Cu.T) * (X @ X.T) / d) / m)

    lams = [(0, lam_now())] if kernel_every else None

    def stop():
        return max_steps is not None and len(losses) - 1 >= max_steps

    for _ in range(epochs):
        order = torch.randperm(n, generator=g).to(X.device)
        for i in range(0, n, batch_size):
            if stop():
                break
            idx = order[i:i + batch_size]
            Xb, rb_y = X[idx], y[idx]
            out, Fv, Cu = features("network", U, v, U, v, Xb)
            r = out - rb_y
            b = Xb.shape[0]
            U = U - (lr / (b * math.sqrt(m * d))) * ((Cu * r[:, None]).T @ Xb)
            v = v - (lr / (b * math.sqrt(m))) * (Fv.T @ r)
            loss = two_layer_loss(U, v, X, y)
            losses.append(loss)
            if not math.isfinite(loss) or loss > blowup * max(losses[0], 1e-300):
                diverged = True
                break
            if kernel_every and (len(losses) - 1) % kernel_every == 0:
                lams.append((len(losses) - 1, lam_now()))
        if diverged or stop():
            break
    test = two_layer_loss(U, v, X_test, y_test) if X_test is not None and not diverged else None
    out = {"loss": losses, "steps": len(losses) - 1, "diverged": diverged, "test": test, "U": U, "v": v}
    if kernel_every:
        out["sharpness"] = lams
    return out


def two_layer_input_gradients(U, v, X) -> torch.Tensor:
    """The gradients grad_x f (n, d) of the two-layer network f(x) = v^T relu(U x / sqrt(d)) / sqrt(m) at the rows
    of X, in closed form: U^T (v * relu'(U x / sqrt(d))) / sqrt(md).

    Parameters
    ----------
    U, v : torch.Tensor
        The parameters, (m, d) and (m,).
    X : array-like
        (n, d) inputs.

    Returns
    -------
    torch.Tensor
        (n, d) gradients.
    """
    X = check_two_layer(U, v, U, v, X)
    m, d = U.shape
    D = (X @ U.T > 0).to(X.dtype)                      # relu'(u_i^T x / sqrt(d)), (n, m)
    return (D * v) @ U / math.sqrt(m * d)


def two_layer_agop(U, v, X) -> torch.Tensor:
    """The AGOP (1/n) sum_i grad_x f(x_i) grad_x f(x_i)^T (d, d) of the two-layer network at the rows of X.

    Parameters
    ----------
    U, v : torch.Tensor
        The parameters, (m, d) and (m,).
    X : array-like
        (n, d) inputs.

    Returns
    -------
    torch.Tensor
        (d, d) AGOP.
    """
    G = two_layer_input_gradients(U, v, X)
    return G.T @ G / G.shape[0]
