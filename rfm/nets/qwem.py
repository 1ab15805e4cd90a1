r"""Quadratic word embeddings (QWEM): symmetric matrix factorisation of M*, learned one mode at a time.

Karkada, Simon, Bahri & DeWeese (arXiv 2502.09863): the target :func:`qwem_target` M* = 2 (P_ij - P_i P_j) /
(P_ij + P_i P_j) of the authors' code (``dkarkada/qwem``, ``qwem.py``), gradient descent on 1/4 ||W W^T - M*||_F^2
from a small initialisation (:func:`factorization_gd`), its Eckart-Young end point :func:`positive_part` and the
predicted per-mode onsets :func:`factorization_onsets` (each mode a logistic curve,
:func:`rfm.nets.curves.logistic_onset`); a planted-attribute corpus (:func:`planted_cooccurrence`) and its analogies
(:func:`planted_analogies`, :func:`analogy_accuracy`).

Gradient descent here is the closed-form update W <- W - lr (W W^T - M) W, not :func:`rfm.nets.training.fit`
(no network, no autograd). Time in the closed forms is ``lr * step``.
"""
from __future__ import annotations

import math

import torch

from .._checks import check_matrix, check_number, check_square
from ..utils import check_generator, symmetrize
from .curves import logistic_onset

__all__ = ["analogy_accuracy", "analogy_accuracy_path", "factorization_gd", "factorization_onsets", "planted_analogies",
           "planted_cooccurrence", "positive_part", "qwem_target"]


def qwem_target(counts, ns_weight: float = 1.0) -> torch.Tensor:
    """M*_ij = 2 (P_ij - q P_i P_j) / (P_ij + q P_i P_j) from symmetric co-occurrence counts (V, V), with
    P_ij = counts / total, P_i the row sums of P and q = ``ns_weight`` (as in ``qwem.py`` of ``dkarkada/qwem``).

    Parameters
    ----------
    counts : array-like, shape (V, V)
        Symmetric non-negative co-occurrence counts.
    ns_weight : float, default 1.0
        q.

    Returns
    -------
    torch.Tensor, float64, shape (V, V)

    Raises
    ------
    ValueError
        If a count is negative or a word never occurs.
    """
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
    pairs with negative eigenvalues set to 0. It is where 1/4 ||W W^T - M||^2 with W (V, k) ends from small init.

    Parameters
    ----------
    M : array-like or torch.Tensor, shape (V, V)
        A symmetric matrix.
    k : int
        The rank.

    Returns
    -------
    torch.Tensor, float64, shape (V, V)
    """
    M = check_square(M, "M", symmetric=True).to(torch.float64)
    check_number("k", k, low=1, high=M.shape[0], integer=True)
    lam, U = torch.linalg.eigh(symmetrize(M))
    lam, U = lam[-k:].clamp_min(0), U[:, -k:]
    return (U * lam) @ U.T


def factorization_gd(M, d: int, *, init_scale: float = 1e-6, lr: float = 0.1, steps: int = 1000,
                     record_every: int = 10, generator=0, W0=None) -> dict:
    """Gradient descent on L(W) = 1/4 ||W W^T - M||_F^2 with W (V, d) from W0 ~ N(0, init_scale^2 / d) (the
    initialisation of ``qwem.py``) or the given ``W0``. Returns {"W", "W0", "steps", "loss", "sq_sv"}: the loss
    and the squared singular values of W (descending, (T, d)) every ``record_every`` steps (and at 0).

    Parameters
    ----------
    M : array-like or torch.Tensor, shape (V, V)
        A symmetric matrix.
    d : int
        The embedding dimension.
    init_scale : float, default 1e-6
        The initial scale.
    lr : float, default 0.1
        The step.
    steps : int, default 1000
        Steps.
    record_every : int, default 10
        Steps between records.
    generator : int or torch.Generator, default 0
        Seeds the draws.
    W0 : array-like, shape (V, d), optional
        A given start.

    Returns
    -------
    dict
        As described above.
    """
    M = check_square(M, "M", symmetric=True).to(torch.float64)
    V = M.shape[0]
    check_number("d", d, low=1, high=V, integer=True)
    check_number("lr", lr, low=0, low_inclusive=False)
    check_number("steps", steps, low=0, integer=True)
    check_number("record_every", record_every, low=1, integer=True)
    if W0 is None:
        check_number("init_scale", init_scale, low=0, low_inclusive=False)
        W0 = torch.randn(V, d, generator=check_generator(generator), dtype=torch.float64) * (init_scale / math.sqrt(d))
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
    rate 2 lambda_j, x0 = ||u_j^T W0||^2), with t = lr * step; modes are taken as uncoupled.

    Parameters
    ----------
    M : array-like or torch.Tensor, shape (V, V)
        A symmetric matrix.
    W0 : array-like, shape (V, d)
        The initial W.
    k : int
        Modes.
    lr : float
        The step.
    fraction : float, default 0.5
        The level, in (0, 1).

    Returns
    -------
    list of float
        One predicted step per mode, by decreasing eigenvalue.

    Raises
    ------
    ValueError
        If one of the top k eigenvalues of M is not positive.
    """
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
    eigenvectors are the Walsh functions of the attributes, the single attributes on top. With ``n_pairs`` the counts
    are a multinomial sample of that many pairs (symmetrised); else the exact P. Returns {"counts", "signs", "P"}.

    Parameters
    ----------
    n_attributes : int
        a.
    strengths : array-like of float, shape (a,)
        beta, positive with sum below 1.
    n_pairs : int, optional
        Sampled pairs (None: the exact P).
    generator : int or torch.Generator, default 0
        Seeds the draws.

    Returns
    -------
    dict
        "counts" (V, V), "signs" (V, a), "P" (V, V).
    """
    check_number("n_attributes", n_attributes, low=1, high=12, integer=True)
    beta = torch.as_tensor(strengths, dtype=torch.float64).reshape(-1)
    if beta.numel() != n_attributes:
        raise ValueError(f"strengths must have one value per attribute ({n_attributes}), got {beta.numel()}")
    if bool((beta <= 0).any()) or float(beta.sum()) >= 1:
        raise ValueError(f"strengths must be positive with a sum below 1 (so that P_ij > 0), got {beta.tolist()}")
    g = check_generator(generator)
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
    flipped, c another word with a's value of attribute k, d is c with attribute k flipped (a : b :: c : d). (n, 4)
    integer tensor.

    Parameters
    ----------
    signs : array-like, shape (V, a)
        The words' sign vectors.
    n : int, default 200
        Quadruples.
    generator : int or torch.Generator, default 0
        Seeds the draws.

    Returns
    -------
    torch.Tensor of int64, shape (n, 4)
    """
    S = check_matrix(signs, "signs")
    V, A = S.shape
    check_number("n", n, low=1, integer=True)
    index = {tuple(r.tolist()): i for i, r in enumerate(S)}
    g = check_generator(generator)
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
    largest cosine with E[b] - E[a] + E[c], the three query words excluded (the usual word2vec rule).

    Parameters
    ----------
    E : array-like, shape (V, d)
        Embeddings, one row per word.
    quads : array-like of int, shape (m, 4)
        Quadruples (a, b, c, d).

    Returns
    -------
    float
        In [0, 1].
    """
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


def analogy_accuracy_path(M, W0, quads, *, lr: float, steps: int, every: int = 5) -> tuple[list, list]:
    """Planted-analogy accuracy along gradient descent on 1/4 ||W W^T - M||_F^2 from W0: the same updates as
    :func:`factorization_gd` (``W <- W - lr (W W^T - M) W``), read every ``every`` steps.

    Parameters
    ----------
    M : torch.Tensor of shape (V, V)
        The symmetric target.
    W0 : torch.Tensor of shape (V, d)
        The initial embeddings (``factorization_gd(...)["W0"]`` replays that run).
    quads : torch.Tensor
        The analogies (:func:`planted_analogies`).
    lr : float
        Step size.
    steps : int
        Number of steps.
    every : int, default=5
        Read the accuracy at steps 0, every, 2 every, ... <= steps.

    Returns
    -------
    steps, accuracies : list of int, list of float
        The steps read and :func:`analogy_accuracy` at each.
    """
    check_number("every", every, low=1, integer=True)
    W, read, accs = W0.clone(), [], []
    for s in range(steps + 1):
        if s % every == 0:
            read.append(s)
            accs.append(analogy_accuracy(W, quads))
        W = W - lr * ((W @ W.T - M) @ W)
    return read, accs
