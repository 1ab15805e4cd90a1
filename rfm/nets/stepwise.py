r"""Learning one feature at a time: the stepwise dynamics of small-initialisation training.

Four models that, started from small weights, pick up one direction after another in a staircase:

* **stepwise measures** -- :func:`mode_onsets` (when each mode's series crosses a fraction of its target),
  :func:`loss_drops` / :func:`count_drops` (distinct drops of a loss curve), :func:`plateau_fraction` (how long the
  loss stays at its initial value), and the closed form of one mode, :func:`logistic_mode` and
  :func:`logistic_onset` (the solution of dx/dt = r x (1 - x / x_inf));
* **quadratic word embeddings** (QWEM; Karkada, Simon, Bahri & DeWeese, arXiv 2502.09863) -- the target
  :func:`qwem_target` M* = 2 (P_ij - P_i P_j) / (P_ij + P_i P_j) of the authors' code (``dkarkada/qwem``,
  ``qwem.py``), gradient descent on 1/4 ||W W^T - M*||_F^2 (:func:`factorization_gd`), its Eckart-Young end point
  :func:`positive_part` and per-mode onsets :func:`factorization_onsets`; a planted-attribute corpus
  (:func:`planted_cooccurrence`) and its analogies (:func:`planted_analogies`, :func:`analogy_accuracy`);
* **linearised Barlow Twins** (Simon, Knutins, Ziyin, Geisz, Fetterman & Albrecht, ICML 2023) -- two views
  (:func:`two_view_data`), the cross-view matrix Gamma and gradient descent on ||W Gamma W^T - I||_F^2
  (:func:`linear_barlow_twins`), with per-mode onsets :func:`barlow_twins_onsets`;
* **the saddle-escape direction** of a bias-free network (Bantzis, Simon & Jacot, arXiv 2505.21722) -- the
  maximiser of g(theta) = <Y, f_theta(X)> / n over unit-Frobenius layers, by normalised ascent on each layer's
  sphere (:func:`escape_direction`), a random point of the same spheres (:func:`random_sphere_direction`) and
  per-layer spectra (:func:`layer_singular_values`);
* **alternating gradient flows' modular addition** (Kunin et al., arXiv 2506.06489) -- a template x in R^p with
  chosen Fourier magnitudes, the pair (a, b) encoded by the cyclic shifts (rho^a x, rho^b x) and the target
  rho^{a+b} x (:func:`template_addition`; our reading of the task, see the chapter), and the per-frequency
  residual energy of a prediction (:func:`fourier_residuals`). The network is :func:`rfm.data.modular.quadratic_net`
  trained by :func:`rfm.nets.optim.train_full_batch`.

Conventions: time in the closed forms is ``lr * step`` (gradient flow), every function takes and returns torch
tensors (float64 unless said), and every random draw comes from a seed or a ``torch.Generator``.
"""
from __future__ import annotations

import copy
import math

import numpy as np
import torch

from .._checks import check_matrix, check_number, check_square, resolve_dtype
from ..data.modular import all_pairs, check_prime
from ..utils import make_generator, symmetrize
from .curves import count_drops, loss_drops, mode_onsets, plateau_fraction, plateau_levels
from .mlp import MLP

__all__ = ["analogy_accuracy", "barlow_twins_onsets", "count_drops", "cross_view_matrix", "escape_direction", "escape_objective", "factorization_gd",
           "factorization_onsets", "fourier_residuals", "layer_singular_values", "linear_barlow_twins",
           "logistic_mode", "logistic_onset", "loss_drops", "mode_onsets", "planted_analogies",
           "planted_cooccurrence", "plateau_fraction", "plateau_levels", "positive_part", "qwem_target", "random_sphere_direction",
           "template_addition", "two_view_data"]


def _gen(generator) -> torch.Generator:
    if isinstance(generator, torch.Generator):
        return generator
    if isinstance(generator, bool) or not isinstance(generator, (int, np.integer)):
        raise TypeError(f"generator must be an integer seed or a torch.Generator, got {generator!r}")
    return make_generator(int(generator))


# ----------------------------------------------------------------------------------------------------------------
# Stepwise measures


def logistic_mode(t, rate: float, x0: float, x_inf: float):
    """x(t) = x_inf / (1 + (x_inf / x0 - 1) exp(-rate t)), the solution of dx/dt = rate x (1 - x / x_inf) with
    x(0) = x0: one mode of a small-initialisation factorisation (x = its squared singular value)."""
    check_number("rate", rate, low=0, low_inclusive=False)
    check_number("x0", x0, low=0, low_inclusive=False)
    check_number("x_inf", x_inf, low=0, low_inclusive=False)
    t = torch.as_tensor(t, dtype=torch.float64)
    return x_inf / (1 + (x_inf / x0 - 1) * torch.exp(-rate * t))


def logistic_onset(rate: float, x0: float, x_inf: float, fraction: float = 0.5) -> float:
    """The time at which :func:`logistic_mode` reaches ``fraction * x_inf``: log((x_inf/x0 - 1) f / (1 - f)) / rate."""
    check_number("rate", rate, low=0, low_inclusive=False)
    check_number("x0", x0, low=0, low_inclusive=False)
    check_number("x_inf", x_inf, low=0, low_inclusive=False)
    check_number("fraction", fraction, low=0, low_inclusive=False, high=1, high_inclusive=False)
    return math.log((x_inf / x0 - 1) * fraction / (1 - fraction)) / rate


# ----------------------------------------------------------------------------------------------------------------
# Quadratic word embeddings: symmetric matrix factorisation of M*


def qwem_target(counts, ns_weight: float = 1.0) -> torch.Tensor:
    """M*_ij = 2 (P_ij - q P_i P_j) / (P_ij + q P_i P_j) from symmetric co-occurrence counts (V, V), with
    P_ij = counts / total, P_i the row sums of P and q = ``ns_weight`` (as in ``qwem.py`` of ``dkarkada/qwem``)."""
    C = check_square(counts, "counts", symmetric=True).to(torch.float64)
    if bool((C < 0).any()):
        raise ValueError("counts must be non-negative")
    check_number("ns_weight", ns_weight, low=0, low_inclusive=False)
    P = C / C.sum()
    Pi = P.sum(1)
    if bool((Pi <= 0).any()):
        raise ValueError(f"{int((Pi <= 0).sum())} word(s) never co-occur with any word (zero rows of counts); drop "
                         "them from the vocabulary")
    PP = ns_weight * torch.outer(Pi, Pi)
    return 2 * (P - PP) / (P + PP)


def positive_part(M, k: int) -> torch.Tensor:
    """The best rank-``k`` positive semi-definite approximation of symmetric M (Eckart-Young): the top-k eigen-
    pairs with negative eigenvalues set to 0. It is where 1/4 ||W W^T - M||^2 with W (V, k) ends from small init."""
    M = check_square(M, "M", symmetric=True).to(torch.float64)
    check_number("k", k, low=1, high=M.shape[0], integer=True)
    lam, U = torch.linalg.eigh(symmetrize(M))
    lam, U = lam[-k:].clamp_min(0), U[:, -k:]
    return (U * lam) @ U.T


def factorization_gd(M, d: int, *, init_scale: float = 1e-6, lr: float = 0.1, steps: int = 1000,
                     record_every: int = 10, generator=0, W0=None) -> dict:
    """Gradient descent on L(W) = 1/4 ||W W^T - M||_F^2 with W (V, d) from W0 ~ N(0, init_scale^2 / d) (the
    initialisation of ``qwem.py``) or the given ``W0``. Returns {"W", "W0", "steps", "loss", "sq_sv"}: the loss
    and the squared singular values of W (descending, (T, d)) every ``record_every`` steps (and at 0)."""
    M = check_square(M, "M", symmetric=True).to(torch.float64)
    V = M.shape[0]
    check_number("d", d, low=1, high=V, integer=True)
    check_number("lr", lr, low=0, low_inclusive=False)
    check_number("steps", steps, low=0, integer=True)
    check_number("record_every", record_every, low=1, integer=True)
    if W0 is None:
        check_number("init_scale", init_scale, low=0, low_inclusive=False)
        W0 = torch.randn(V, d, generator=_gen(generator), dtype=torch.float64) * (init_scale / math.sqrt(d))
    else:
        W0 = check_matrix(W0, "W0", dtype=torch.float64)
        if W0.shape != (V, d):
            raise ValueError(f"W0 must have shape ({V}, {d}), got {tuple(W0.shape)}")
    W = W0.clone().to(M.device)
    rec_steps, losses, svs = [], [], []
    for s in range(steps + 1):
        R = W @ W.T - M
        if s % record_every == 0 or s == steps:
            rec_steps.append(s)
            losses.append(float(0.25 * R.square().sum()))
            svs.append(torch.linalg.eigvalsh(W.T @ W).flip(0).clamp_min(0))
        if s == steps:
            break
        W = W - lr * (R @ W)
        if not bool(torch.isfinite(W).all()):
            raise FloatingPointError(f"factorization_gd diverged at step {s}; lower lr (now {lr}) below about "
                                     f"1 / (2 lambda_max(M)) = {0.5 / float(torch.linalg.eigvalsh(M).abs().max()):.3g}")
    return {"W": W, "W0": W0, "steps": rec_steps, "loss": torch.tensor(losses), "sq_sv": torch.stack(svs)}


def factorization_onsets(M, W0, k: int, lr: float, fraction: float = 0.5) -> list[float]:
    """Predicted steps at which the top ``k`` modes of 1/4 ||W W^T - M||^2 reach ``fraction`` of their eigenvalue:
    each mode's squared size x = ||u_j^T W||^2 follows dx/dt = 2 x (lambda_j - x) (:func:`logistic_onset` with
    rate 2 lambda_j, x0 = ||u_j^T W0||^2), with t = lr * step; modes are taken as uncoupled."""
    M = check_square(M, "M", symmetric=True).to(torch.float64)
    W0 = check_matrix(W0, "W0", dtype=torch.float64)
    check_number("k", k, low=1, high=M.shape[0], integer=True)
    check_number("lr", lr, low=0, low_inclusive=False)
    lam, U = torch.linalg.eigh(symmetrize(M))
    lam, U = lam.flip(0)[:k], U.flip(1)[:, :k]
    if bool((lam <= 0).any()):
        raise ValueError(f"only {int((lam > 0).sum())} of the top {k} eigenvalues of M are positive: a mode with "
                         "lambda <= 0 is never learned")
    x0 = (U.T @ W0.to(U.device)).square().sum(1)
    return [logistic_onset(2 * float(l), float(x), float(l), fraction) / lr for l, x in zip(lam, x0)]


def planted_cooccurrence(n_attributes: int, strengths, *, n_pairs: int | None = None, generator=0) -> dict:
    """A corpus with planted analogies: one word per sign vector s in {-1, +1}^a (V = 2^a words, all equally
    frequent), co-occurring with probability P_ij = P_i P_j (1 + sum_k beta_k s_ik s_jk) (beta = ``strengths``,
    sum < 1), so that M* = 2x / (2 + x) with x = sum_k beta_k s_ik s_jk is a function of s_i * s_j and its
    eigenvectors are the Walsh functions of the attributes, the single attributes on top. With ``n_pairs`` the counts are a
    multinomial sample of that many pairs (symmetrised); else the exact P. Returns {"counts", "signs", "P"}."""
    check_number("n_attributes", n_attributes, low=1, high=12, integer=True)
    beta = torch.as_tensor(strengths, dtype=torch.float64).reshape(-1)
    if beta.numel() != n_attributes:
        raise ValueError(f"strengths must have one value per attribute ({n_attributes}), got {beta.numel()}")
    if bool((beta <= 0).any()) or float(beta.sum()) >= 1:
        raise ValueError(f"strengths must be positive with a sum below 1 (so that P_ij > 0), got {beta.tolist()}")
    g = _gen(generator)
    a = n_attributes
    signs = torch.tensor([[1.0 if (i >> k) & 1 else -1.0 for k in range(a)] for i in range(2 ** a)],
                         dtype=torch.float64)
    P = (1 + (signs * beta) @ signs.T) / 4 ** a  # sums to 1, and every row to 1 / V: P_i = 1 / V
    if n_pairs is None:
        counts = P.clone()
    else:
        check_number("n_pairs", n_pairs, low=1, integer=True)
        idx = torch.multinomial(P.reshape(-1), int(n_pairs), replacement=True, generator=g)
        counts = torch.bincount(idx, minlength=P.numel()).reshape(P.shape).to(torch.float64)
        counts = counts + counts.T
    return {"counts": counts, "signs": signs, "P": P}


def planted_analogies(signs, n: int = 200, *, generator=0) -> torch.Tensor:
    """``n`` analogy quadruples (a, b, c, d) over words given by sign vectors: b is a with one attribute k
    flipped, c another word with a's value of attribute k, d is c with attribute k flipped (a : b :: c : d). (n, 4) integer tensor."""
    S = check_matrix(signs, "signs")
    V, A = S.shape
    check_number("n", n, low=1, integer=True)
    index = {tuple(r.tolist()): i for i, r in enumerate(S)}
    g = _gen(generator)
    out = []
    while len(out) < n:
        i, j = torch.randint(V, (2,), generator=g).tolist()
        k = int(torch.randint(A, (1,), generator=g))
        if i == j or S[i, k] != S[j, k]:  # c must share a's value of attribute k: d = c + (b - a)
            continue
        si, sj = S[i].clone(), S[j].clone()
        si[k], sj[k] = -si[k], -sj[k]
        b, d = index[tuple(si.tolist())], index[tuple(sj.tolist())]
        if len({i, b, j, d}) == 4:
            out.append([i, b, j, d])
    return torch.tensor(out)


def analogy_accuracy(E, quads) -> float:
    """The fraction of quadruples (a, b, c, d) for which d is the word whose embedding (rows of ``E``) has the
    largest cosine with E[b] - E[a] + E[c], the three query words excluded (the usual word2vec rule)."""
    E = check_matrix(E, "E", dtype=torch.float64)
    Q = torch.as_tensor(quads, dtype=torch.long)
    if Q.ndim != 2 or Q.shape[1] != 4:
        raise ValueError(f"quads must be (n, 4) word indices, got shape {tuple(Q.shape)}")
    En = E / E.norm(dim=1, keepdim=True).clamp_min(1e-300)
    q = E[Q[:, 1]] - E[Q[:, 0]] + E[Q[:, 2]]
    sims = (q / q.norm(dim=1, keepdim=True).clamp_min(1e-300)) @ En.T
    rows = torch.arange(len(Q))
    for c in range(3):
        sims[rows, Q[:, c]] = -math.inf
    return float((sims.argmax(1) == Q[:, 3]).double().mean())


# ----------------------------------------------------------------------------------------------------------------
# Linearised Barlow Twins


def two_view_data(n: int, spectrum, d: int, *, noise: float = 0.5, nuisance: float = 0.0, generator=0) -> dict:
    """Two augmented views of n points: a latent z ~ N(0, diag(spectrum^2)) in a random orthonormal basis Q of R^d
    (len(spectrum) <= d), plus independent view noise: isotropic with std ``noise`` and, along one more random
    unit direction v orthogonal to Q's columns, std ``nuisance``. So the cross-view covariance is Q diag(s^2) Q^T
    while each view's covariance adds noise^2 I + nuisance^2 v v^T. Returns {"X1", "X2", "Q", "v"}."""
    check_number("n", n, low=2, integer=True)
    check_number("d", d, low=2, integer=True)
    s = torch.as_tensor(spectrum, dtype=torch.float64).reshape(-1)
    if s.numel() >= d:
        raise ValueError(f"spectrum must have fewer than d = {d} values (one direction is kept for the nuisance)")
    check_number("noise", noise, low=0)
    check_number("nuisance", nuisance, low=0)
    g = _gen(generator)
    Qfull, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    Q, v = Qfull[:, :s.numel()], Qfull[:, s.numel()]
    Z = torch.randn(n, s.numel(), generator=g, dtype=torch.float64) * s
    views = []
    for _ in range(2):
        E = noise * torch.randn(n, d, generator=g, dtype=torch.float64)
        E = E + nuisance * torch.randn(n, 1, generator=g, dtype=torch.float64) * v
        views.append(Z @ Q.T + E)
    return {"X1": views[0], "X2": views[1], "Q": Q, "v": v}


def cross_view_matrix(X1, X2) -> torch.Tensor:
    """Gamma = (X1^T X2 + X2^T X1) / (2 n) of the centred views: the matrix whose top eigenvectors linear Barlow
    Twins learns."""
    X1, X2 = check_matrix(X1, "X1", dtype=torch.float64), check_matrix(X2, "X2", dtype=torch.float64)
    if X1.shape != X2.shape:
        raise ValueError(f"X1 and X2 must have the same shape (two views of the same points), got "
                         f"{tuple(X1.shape)} and {tuple(X2.shape)}")
    X1, X2 = X1 - X1.mean(0), X2 - X2.mean(0)
    return symmetrize(X1.T @ X2) / X1.shape[0]


def linear_barlow_twins(X1, X2, k: int, *, init_scale: float = 1e-4, lr: float = 1e-3, steps: int = 5000,
                        record_every: int = 10, generator=0) -> dict:
    """Gradient descent on the linear Barlow Twins loss ||W Gamma W^T - I_k||_F^2, W (k, d) from N(0, s^2 / d)
    (s = ``init_scale``), Gamma = :func:`cross_view_matrix` (the symmetrised cross-correlation of the embeddings
    of the two views is C = W Gamma W^T). Returns {"W", "W0", "Gamma", "steps", "loss", "eig_C"} with the loss and
    the eigenvalues of C (descending, (T, k)) every ``record_every`` steps."""
    G = cross_view_matrix(X1, X2)
    d = G.shape[0]
    check_number("k", k, low=1, high=d, integer=True)
    check_number("init_scale", init_scale, low=0, low_inclusive=False)
    check_number("lr", lr, low=0, low_inclusive=False)
    check_number("steps", steps, low=0, integer=True)
    check_number("record_every", record_every, low=1, integer=True)
    W0 = torch.randn(k, d, generator=_gen(generator), dtype=torch.float64) * (init_scale / math.sqrt(d))
    W, I = W0.clone(), torch.eye(k, dtype=torch.float64)
    rec_steps, losses, eigs = [], [], []
    for s in range(steps + 1):
        C = symmetrize(W @ G @ W.T)
        if s % record_every == 0 or s == steps:
            rec_steps.append(s)
            losses.append(float((C - I).square().sum()))
            eigs.append(torch.linalg.eigvalsh(C).flip(0))
        if s == steps:
            break
        W = W - lr * 4 * (C - I) @ W @ G
        if not bool(torch.isfinite(W).all()):
            raise FloatingPointError(f"linear_barlow_twins diverged at step {s}; lower lr (now {lr})")
    return {"W": W, "W0": W0, "Gamma": G, "steps": rec_steps, "loss": torch.tensor(losses),
            "eig_C": torch.stack(eigs)}


def barlow_twins_onsets(Gamma, W0, k: int, lr: float, fraction: float = 0.5) -> list[float]:
    """Predicted steps at which the top ``k`` modes of linear Barlow Twins reach ``fraction`` of 1: mode j's
    eigenvalue c = gamma_j ||W u_j||^2 follows dc/dt = 8 gamma_j c (1 - c) (:func:`logistic_onset` with rate
    8 gamma_j, c0 from W0), t = lr * step; modes are taken as uncoupled."""
    G = check_square(Gamma, "Gamma", symmetric=True).to(torch.float64)
    W0 = check_matrix(W0, "W0", dtype=torch.float64)
    check_number("k", k, low=1, high=G.shape[0], integer=True)
    check_number("lr", lr, low=0, low_inclusive=False)
    lam, U = torch.linalg.eigh(G)
    lam, U = lam.flip(0)[:k], U.flip(1)[:, :k]
    if bool((lam <= 0).any()):
        raise ValueError("a mode with a non-positive eigenvalue of Gamma is never learned")
    c0 = lam * (W0 @ U).square().sum(0)
    return [logistic_onset(8 * float(l), float(c), 1.0, fraction) / lr for l, c in zip(lam, c0)]


# ----------------------------------------------------------------------------------------------------------------
# The saddle-escape direction of a bias-free network


def _check_bias_free(model) -> MLP:
    if not isinstance(model, MLP):
        raise TypeError(f"model must be an rfm.nets.MLP, got {type(model).__name__}")
    if any(lin.bias is not None for lin in model.layers):
        raise ValueError("model must be bias-free (MLP(..., bias=False)): the escape direction is defined for "
                         "homogeneous networks")
    return model


def _normalise_layers(net: MLP):
    with torch.no_grad():
        for lin in net.layers:
            lin.weight.div_(lin.weight.norm())


def random_sphere_direction(model: MLP, generator=0) -> MLP:
    """A copy of ``model`` with every layer replaced by an i.i.d. Gaussian matrix scaled to unit Frobenius norm:
    a uniformly random point of the product of the layers' spheres (the control for :func:`escape_direction`)."""
    net = copy.deepcopy(_check_bias_free(model))
    g = _gen(generator)
    with torch.no_grad():
        for lin in net.layers:
            lin.weight.copy_(torch.randn(lin.weight.shape, generator=g, dtype=torch.float64))
    _normalise_layers(net)
    return net


def escape_objective(model: MLP, X, Y) -> torch.Tensor:
    """g(theta) = <Y, f_theta(X)> / n, the first-order term of the loss decrease near the origin saddle
    (for the squared loss 1/(2n) ||f(X) - Y||^2, -g is the linear part of the loss in f)."""
    return (Y * model(X)).sum() / X.shape[0]


def escape_direction(model: MLP, X, Y, *, steps: int = 2000, lr: float = 1.0, restarts: int = 1,
                     generator=0) -> dict:
    """The optimal escape direction from the origin saddle: the maximiser of g(theta) = <Y, f_theta(X)> / n over
    networks whose layers all have unit Frobenius norm, by normalised ascent on each layer's sphere,
    W_l <- (W_l + lr G_l / ||G_l||) / ||...|| with G_l = dg / dW_l (at a maximiser G_l is parallel to W_l, so
    it is a fixed point). ``restarts`` random starts (the first from ``model``'s own weights); the best is kept.
    Returns {"model", "objective" (history of the best start), "best", "all_best"}."""
    model = _check_bias_free(model)
    p = next(model.parameters())
    X = check_matrix(X, "X", dtype=p.dtype, device=p.device)
    Y = check_matrix(Y, "Y", dtype=p.dtype, device=p.device)
    if Y.shape[0] != X.shape[0]:
        raise ValueError(f"X and Y must have the same number of rows, got {X.shape[0]} and {Y.shape[0]}")
    if Y.shape[1] != model.layers[-1].weight.shape[0]:
        raise ValueError(f"Y has {Y.shape[1]} columns but the model has {model.layers[-1].weight.shape[0]} outputs")
    check_number("steps", steps, low=1, integer=True)
    check_number("lr", lr, low=0, low_inclusive=False)
    check_number("restarts", restarts, low=1, integer=True)
    g = _gen(generator)
    best, results = None, []
    for r in range(restarts):
        net = copy.deepcopy(model)
        if r > 0:
            net = random_sphere_direction(net, g)
        _normalise_layers(net)
        hist = []
        for _ in range(steps):
            net.zero_grad()
            obj = escape_objective(net, X, Y)
            obj.backward()
            hist.append(float(obj.detach()))
            with torch.no_grad():
                for lin in net.layers:
                    G = lin.weight.grad
                    gn = G.norm()
                    if float(gn) > 0:
                        lin.weight.add_(lr * G / gn)
                        lin.weight.div_(lin.weight.norm())
        with torch.no_grad():
            hist.append(float(escape_objective(net, X, Y)))
        results.append(hist[-1])
        if best is None or hist[-1] > best[1][-1]:
            best = (net, hist)
    return {"model": best[0], "objective": best[1], "best": best[1][-1], "all_best": results}


def layer_singular_values(model: MLP) -> list[torch.Tensor]:
    """The singular values (descending) of every layer's weight matrix, input layer first."""
    if not isinstance(model, MLP):
        raise TypeError(f"model must be an rfm.nets.MLP, got {type(model).__name__}")
    return [torch.linalg.svdvals(lin.weight.detach().to(torch.float64)) for lin in model.layers]


# ----------------------------------------------------------------------------------------------------------------
# Modular addition with a template of chosen Fourier magnitudes


def template_addition(p: int, magnitudes, *, generator=0, dtype="float64") -> dict:
    """Modular addition encoded through a template: x in R^p with ``|x_hat[k]| = magnitudes[k-1]`` for
    k = 1..len(magnitudes) (<= (p-1)/2), zero elsewhere and at k = 0, random phases, scaled to ||x||^2 = p. The
    pair (a, b) is the input (rho^a x, rho^b x) in R^{2p}, the target rho^{a+b} x in R^p, with
    (rho^a x)[j] = x[(j - a) mod p]. All p^2 pairs (``rfm.data.modular.all_pairs``). Returns {"X", "Y", "x",
    "pairs", "magnitudes"} (magnitudes after scaling, per frequency 1..(p-1)/2)."""
    p = check_prime(p)
    m = torch.as_tensor(magnitudes, dtype=torch.float64).reshape(-1)
    half = (p - 1) // 2
    if m.numel() < 1 or m.numel() > half:
        raise ValueError(f"magnitudes must have between 1 and (p-1)/2 = {half} values (frequencies 1, 2, ...), got "
                         f"{m.numel()}")
    if bool((m < 0).any()) or float(m.max()) <= 0:
        raise ValueError("magnitudes must be non-negative and not all zero")
    dtype = resolve_dtype(dtype)
    g = _gen(generator)
    phases = 2 * math.pi * torch.rand(m.numel(), generator=g, dtype=torch.float64)
    xhat = torch.zeros(p, dtype=torch.complex128)
    xhat[1:m.numel() + 1] = torch.polar(m, phases)
    xhat[p - m.numel():] = torch.polar(m, -phases).flip(0)
    x = torch.fft.ifft(xhat, norm="ortho").real
    x = x * math.sqrt(p) / x.norm()
    pairs = all_pairs(p, "add")
    j = torch.arange(p)
    shift = lambda a: x[(j[None, :] - a[:, None]) % p]  # noqa: E731
    X = torch.cat([shift(pairs[:, 0]), shift(pairs[:, 1])], 1).to(dtype)
    Y = shift((pairs[:, 0] + pairs[:, 1]) % p).to(dtype)
    mags = torch.fft.fft(x, norm="ortho").abs()[1:half + 1]
    return {"X": X, "Y": Y, "x": x.to(dtype), "pairs": pairs, "magnitudes": mags}


def fourier_residuals(Y, F) -> torch.Tensor:
    """The residual energy of a prediction F of targets Y (both (n, p), rows indexed by output position) at each
    frequency k = 1..(p-1)/2 of the output axis, as a fraction of Y's energy there (frequencies k and -k
    together). A frequency absent from Y gives NaN."""
    Y = check_matrix(Y, "Y", dtype=torch.float64)
    F = check_matrix(F, "F", dtype=torch.float64)
    if Y.shape != F.shape:
        raise ValueError(f"Y and F must have the same shape, got {tuple(Y.shape)} and {tuple(F.shape)}")
    p = Y.shape[1]
    half = (p - 1) // 2
    R = torch.fft.fft(Y - F, dim=1).abs().square().sum(0)
    T = torch.fft.fft(Y, dim=1).abs().square().sum(0)
    k = torch.arange(1, half + 1)
    num, den = R[k] + R[p - k], T[k] + T[p - k]
    return torch.where(den > 1e-12 * float(T.sum()), num / den.clamp_min(1e-300), torch.full_like(num, math.nan))
