"""Tests of rfm.nets.stepwise against closed forms: Eckart-Young, the logistic solution of one mode, the top
eigenspace of Barlow Twins, the rank-one escape direction of a deep linear network."""
import math

import numpy as np
import pytest
import torch

from rfm.metrics import subspace_overlap
from rfm.nets import MLP
from rfm.nets import stepwise as sw
from rfm.utils import top_eigenvectors


def _sym(V, seed, spectrum):
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(V, V, generator=g, dtype=torch.float64))
    lam = torch.tensor(spectrum, dtype=torch.float64)
    return (Q[:, :len(lam)] * lam) @ Q[:, :len(lam)].T, Q, lam


def test_small_init_gd_reaches_rank_k_positive_part():
    # eigenvalues 4, 2, 1, -3: with d = 3 the end point is the rank-3 positive part, the -3 mode is never learned
    M, Q, lam = _sym(8, 0, [4.0, 2.0, 1.0, -3.0])
    r = sw.factorization_gd(M, 3, init_scale=1e-6, lr=0.05, steps=4000, record_every=100, generator=1)
    target = sw.positive_part(M, 3)
    assert float((r["W"] @ r["W"].T - target).norm() / target.norm()) < 1e-6
    assert torch.allclose(r["sq_sv"][-1], torch.tensor([4.0, 2.0, 1.0], dtype=torch.float64), atol=1e-6)
    # d = 4 > number of positive modes: the fourth direction stays at ~0 (positive part of rank 3)
    r4 = sw.factorization_gd(M, 4, init_scale=1e-6, lr=0.05, steps=4000, record_every=100, generator=1)
    assert float((r4["W"] @ r4["W"].T - sw.positive_part(M, 4)).norm()) < 1e-5
    assert float(r4["sq_sv"][-1, 3]) < 1e-8


def test_positive_part_is_eckart_young():
    M, Q, lam = _sym(6, 2, [3.0, -5.0, 1.0])
    P = sw.positive_part(M, 2)
    ev = torch.linalg.eigvalsh(P)
    assert torch.allclose(ev[-2:], torch.tensor([1.0, 3.0], dtype=torch.float64), atol=1e-10)
    assert float(ev[:-2].abs().max()) < 1e-10


def test_single_mode_onset_matches_logistic_closed_form():
    # one mode: W W^T - M with M = lam u u^T and W0 along u; x = ||u^T W||^2 is logistic with rate 2 lam
    lam, x0, lr = 3.0, 1e-8, 1e-3
    u = torch.zeros(5, 1, dtype=torch.float64)
    u[0] = 1
    M = lam * u @ u.T
    W0 = math.sqrt(x0) * u
    r = sw.factorization_gd(M, 1, lr=lr, steps=6000, record_every=1, W0=W0)
    t = torch.tensor(r["steps"], dtype=torch.float64) * lr
    x_closed = sw.logistic_mode(t, 2 * lam, x0, lam)
    assert float((r["sq_sv"][:, 0] - x_closed).abs().max()) < 0.01 * lam  # discrete GD vs the flow
    meas = sw.mode_onsets(r["steps"], r["sq_sv"][:, :1], [lam])[0]
    pred = sw.factorization_onsets(M, W0, 1, lr)[0]
    assert abs(meas - pred) / pred < 0.01
    assert abs(pred * lr - math.log(lam / x0 - 1) / (2 * lam)) < 1e-12


def test_logistic_onset_inverts_logistic_mode():
    t = sw.logistic_onset(2.0, 1e-4, 5.0, 0.3)
    assert abs(float(sw.logistic_mode(t, 2.0, 1e-4, 5.0)) - 1.5) < 1e-9


def test_linear_barlow_twins_fixed_point_is_top_k_eigenspace():
    D = sw.two_view_data(3000, [3.0, 2.0, 1.4, 0.8], 10, noise=0.3, nuisance=3.0, generator=0)
    r = sw.linear_barlow_twins(D["X1"], D["X2"], 3, init_scale=1e-4, lr=2e-3, steps=6000, record_every=50)
    G = r["Gamma"]
    assert subspace_overlap(top_eigenvectors(G, 3), r["W"].T) > 0.999
    C = r["W"] @ G @ r["W"].T
    assert torch.allclose(C, torch.eye(3, dtype=torch.float64), atol=1e-6)
    assert float(r["loss"][-1]) < 1e-10 and abs(float(r["loss"][0]) - 3) < 1e-6
    # the views' own covariance has the nuisance direction on top: plain PCA is not what BT learns
    pca = top_eigenvectors(sw.cross_view_matrix(D["X1"], D["X1"]), 3)
    assert subspace_overlap(pca, D["v"].reshape(-1, 1)) > 0.9


def test_barlow_twins_single_mode_onset_closed_form():
    # Gamma with one positive eigenvalue: c = gamma ||W u||^2 is logistic with rate 8 gamma
    X = torch.zeros(2, 3, dtype=torch.float64)
    X[0, 0], X[1, 0] = 1.0, -1.0  # centred; Gamma = diag(1, 0, 0)
    lr = 1e-3
    r = sw.linear_barlow_twins(X, X, 1, init_scale=1e-3, lr=lr, steps=4000, record_every=1, generator=3)
    pred = sw.barlow_twins_onsets(r["Gamma"], r["W0"], 1, lr)[0]
    meas = sw.mode_onsets(r["steps"], r["eig_C"], [1.0])[0]
    assert abs(meas - pred) / pred < 0.01


def test_escape_direction_of_deep_linear_network_is_rank_one_top_pair():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(200, 6, generator=g, dtype=torch.float64)
    Y = X @ torch.randn(6, 3, generator=g, dtype=torch.float64) + 0.1 * torch.randn(200, 3, generator=g,
                                                                                    dtype=torch.float64)
    A = Y.T @ X / X.shape[0]  # (out, in): the objective is <A, W_L ... W_1>
    U, S, Vh = torch.linalg.svd(A)
    net = MLP(6, [5, 4], 3, activation="linear", bias=False, dtype="float64", generator=1)
    r = sw.escape_direction(net, X, Y, steps=300, lr=1.0, restarts=2, generator=2)
    assert abs(r["best"] - float(S[0])) < 1e-8 * float(S[0])
    svs = sw.layer_singular_values(r["model"])
    for s in svs:
        assert abs(float(s[0]) - 1) < 1e-6 and float(s[1]) < 1e-4
    W1, WL = r["model"].layers[0].weight.detach(), r["model"].layers[-1].weight.detach()
    v1 = torch.linalg.svd(W1).Vh[0]
    uL = torch.linalg.svd(WL).U[:, 0]
    assert abs(float(v1 @ Vh[0])) > 1 - 1e-6 and abs(float(uL @ U[:, 0])) > 1 - 1e-6
    # a random point of the same spheres is full rank and scores far lower
    rnd = sw.random_sphere_direction(net, generator=5)
    assert all(float(s[0] / s[1]) < 3 for s in sw.layer_singular_values(rnd))
    assert float(sw.escape_objective(rnd, X, Y).detach()) < 0.5 * float(S[0])


def test_escape_direction_rejects_biases():
    net = MLP(3, [4], 1, bias=True, dtype="float64")
    with pytest.raises(ValueError, match="bias-free"):
        sw.escape_direction(net, torch.zeros(5, 3), torch.zeros(5, 1))


def test_drops_and_plateau():
    loss = np.concatenate([np.full(30, 3.0), np.full(30, 2.0), np.full(30, 1.0), np.linspace(1.0, 0.9, 10)])
    drops = sw.loss_drops(loss, rel_drop=0.1, window=0.01)
    assert len(drops) == 2 and all(abs(d["size"] - 1) < 1e-12 for d in drops)
    assert sw.plateau_fraction(loss) == 0.30
    assert sw.plateau_levels(loss, [0, 1, 2, 3]) == [1, 2, 3]
    assert sw.plateau_levels(np.linspace(3, 0, 1000), [0, 1, 2, 3], min_fraction=0.1) == []
    assert sw.count_drops(np.linspace(3, 0, 100), rel_drop=0.04, window=0.05) == 1  # a smooth decline: one drop
    assert sw.mode_onsets(range(4), [[0, 0], [1, 0], [2, 3], [2, 4]], fraction=0.5) == [1, 2]
    assert sw.mode_onsets(range(3), [[1.0], [0.6], [0.2]], [1.0], below=True) == [2]


def test_qwem_target_and_planted_corpus():
    C = sw.planted_cooccurrence(3, [0.3, 0.2, 0.1], generator=0)
    M = sw.qwem_target(C["counts"])
    x = (C["signs"] * torch.tensor([0.3, 0.2, 0.1], dtype=torch.float64)) @ C["signs"].T
    assert torch.allclose(M, 2 * x / (2 + x), atol=1e-12)  # P_ij = P_i P_j (1 + x): M* = 2x / (2 + x)
    # the single-attribute (Walsh) vectors are the top eigenvectors, in the order of the strengths
    U = top_eigenvectors(M, 3)
    for k in range(3):
        assert abs(float(U[:, k] @ C["signs"][:, k])) / C["signs"][:, k].norm() > 1 - 1e-9
    Q = sw.planted_analogies(C["signs"], 50, generator=1)
    E = C["signs"] * torch.tensor([3.0, 2.0, 1.0], dtype=torch.float64)
    assert sw.analogy_accuracy(E, Q) == 1.0
    assert sw.analogy_accuracy(E[:, :1], Q) < 1.0  # one attribute is not enough to find d
    with pytest.raises(ValueError, match="sum below 1"):
        sw.planted_cooccurrence(2, [0.6, 0.5])


def test_template_addition_and_fourier_residuals():
    p, mags = 11, [1.0, 0.5, 0.25]
    T = sw.template_addition(p, mags, generator=0)
    assert T["X"].shape == (p * p, 2 * p) and T["Y"].shape == (p * p, p)
    assert abs(float(T["x"].norm()) ** 2 - p) < 1e-9
    m = T["magnitudes"]
    assert torch.allclose(m[:3] / m[0], torch.tensor(mags, dtype=torch.float64), atol=1e-12)
    assert float(m[3:].abs().max()) < 1e-12
    a, b = T["pairs"][5].tolist()
    assert torch.allclose(T["Y"][5], torch.roll(T["x"], (a + b) % p))
    assert torch.allclose(T["X"][5, :p], torch.roll(T["x"], a))
    R = sw.fourier_residuals(T["Y"], torch.zeros_like(T["Y"]))
    assert torch.allclose(R[:3], torch.ones(3, dtype=torch.float64)) and bool(torch.isnan(R[3:]).all())
    assert torch.allclose(sw.fourier_residuals(T["Y"], T["Y"])[:3], torch.zeros(3, dtype=torch.float64))
