"""The Features at Convergence Theorem: network FACT, kernel FACT, FACT-RFM updates, sparse parities."""
import numpy as np
import pytest
import torch

import rfm
from rfm.core.fact import UPDATES, fact_feature_matrix, fact_update_target, kernel_fact
from rfm.data.parity import parity_support, sparse_parity, support_recovered
from rfm.nets import MLP
from rfm.nets.fact import fact_matrix, fact_residual, fact_table, gradient_norm, layer_loss_gradients, polish_lbfgs

D64 = torch.float64


def _rand_psd(d, g):
    A = torch.randn(d, d, generator=g, dtype=D64)
    return A @ A.T / d + 0.1 * torch.eye(d, dtype=D64)


# -- the network FACT --------------------------------------------------------------------------------------------

def test_fact_holds_at_closed_form_critical_point_of_weight_decayed_linear_regression():
    """f(x) = W x, L = (1/(n c)) sum |W x_i - y_i|^2 + (lam/2)|W|^2: the minimiser is
    W = Y^T X (X^T X + (lam n c / 2) I)^{-1}, and there W^T W = FACT to round-off."""
    g = torch.Generator().manual_seed(0)
    n, d, c, lam = 40, 6, 3, 0.05
    X = torch.randn(n, d, generator=g, dtype=D64)
    Y = torch.randn(n, c, generator=g, dtype=D64)
    W = Y.T @ X @ torch.linalg.inv(X.T @ X + (lam * n * c / 2) * torch.eye(d, dtype=D64))
    net = MLP(d, [], c, dtype="float64")
    with torch.no_grad():
        net.weight(0).copy_(W)
    assert gradient_norm(net, X, Y, weight_decay=lam) < 1e-12
    assert fact_residual(net, X, Y, 0, weight_decay=lam) < 1e-10
    # away from the critical point the identity fails
    with torch.no_grad():
        net.weight(0).mul_(1.1)
    assert fact_residual(net, X, Y, 0, weight_decay=lam) > 1e-2


@pytest.mark.parametrize("layer", [0, 1])
def test_autograd_fact_equals_closed_form_one_hidden_layer(layer):
    """f(x) = V tanh(W x): grad_h l_i = (2/c) V^T r_i at the read-out (h = tanh(W x_i)) and
    (2/c) W^T (tanh'(W x_i) * V^T r_i) at the first layer (h = x_i), with r_i = f(x_i) - y_i."""
    g = torch.Generator().manual_seed(1)
    n, d, m, c, lam = 30, 5, 7, 2, 0.3
    X = torch.randn(n, d, generator=g, dtype=D64)
    Y = torch.randn(n, c, generator=g, dtype=D64)
    net = MLP(d, [m], c, activation="tanh", dtype="float64", generator=3)
    W, V = net.weight(0).detach(), net.weight(1).detach()
    Z = X @ W.T
    Hd = torch.tanh(Z)
    R = Hd @ V.T - Y
    back = (2.0 / c) * R @ V                       # (n, m): grad wrt the hidden activations
    if layer == 1:
        H, G = Hd, back
    else:
        H, G = X, (back * (1 - torch.tanh(Z) ** 2)) @ W
    closed = -(G.T @ H) / (n * lam)
    auto = fact_matrix(net, X, Y, layer, weight_decay=lam)
    assert torch.allclose(auto, closed, rtol=1e-12, atol=1e-14)
    H2, G2 = layer_loss_gradients(net, X, Y, layer)
    assert torch.allclose(H2, H) and torch.allclose(G2, G)


def test_polished_network_satisfies_fact_every_layer():
    """A small float64 GELU network trained by GD then L-BFGS to |grad L| < 1e-6: FACT residual < 1e-4 per layer,
    while at initialisation it is far from 0."""
    g = torch.Generator().manual_seed(2)
    X = torch.randn(40, 4, generator=g, dtype=D64)
    Y = torch.sin(X[:, :1]) + X[:, 1:2] * X[:, 2:3]
    lam = 1e-2
    net = MLP(4, [12, 12], 1, activation="gelu", dtype="float64", generator=0)
    init_res = fact_residual(net, X, Y, 0, weight_decay=lam)
    rfm.nets.train(net, X, Y, lr=0.05, epochs=200, weight_decay=lam)
    hist = polish_lbfgs(net, X, Y, weight_decay=lam, tol=1e-6, max_rounds=20)
    assert hist[-1]["grad_norm"] < 1e-6
    rows = fact_table(net, X, Y, weight_decay=lam)
    assert [r["layer"] for r in rows] == [0, 1, 2]
    for r in rows:
        assert r["residual"] < 1e-4
        assert r["fact_corr"] > 1 - 1e-6
    assert init_res > 0.5


def test_fact_cross_entropy_critical_point():
    g = torch.Generator().manual_seed(4)
    X = torch.randn(30, 3, generator=g, dtype=D64)
    y = (X[:, 0] > 0).long()
    net = MLP(3, [], 2, dtype="float64")
    polish_lbfgs(net, X, y, weight_decay=0.1, loss="ce", tol=1e-11)
    assert fact_residual(net, X, y, 0, weight_decay=0.1, loss="ce") < 1e-6


def test_polish_lbfgs_without_weight_decay_reaches_least_squares():
    """weight_decay=0 minimises the plain loss: for f(x) = W x the minimiser is W = Y^T X (X^T X)^{-1}."""
    g = torch.Generator().manual_seed(5)
    X, Y = torch.randn(40, 4, generator=g, dtype=D64), torch.randn(40, 2, generator=g, dtype=D64)
    net = MLP(4, [], 2, dtype="float64")
    hist = polish_lbfgs(net, X, Y, weight_decay=0.0, tol=1e-10)
    assert hist[-1]["grad_norm"] < 1e-10
    torch.testing.assert_close(net.weight(0).detach(), Y.T @ X @ torch.linalg.inv(X.T @ X), atol=1e-8, rtol=0)


def test_network_fact_bad_inputs():
    net = MLP(3, [4], 1, dtype="float64")
    X = torch.randn(5, 3, dtype=D64)
    with pytest.raises(ValueError, match="weight_decay"):
        fact_matrix(net, X, torch.zeros(5, 1, dtype=D64), 0, weight_decay=0.0)
    with pytest.raises(ValueError, match="features"):
        fact_matrix(net, torch.randn(5, 2, dtype=D64), torch.zeros(5, 1, dtype=D64), 0, weight_decay=1.0)
    with pytest.raises(ValueError, match="layer"):
        fact_matrix(net, X, torch.zeros(5, 1, dtype=D64), 5, weight_decay=1.0)


# -- the kernel FACT ---------------------------------------------------------------------------------------------

def _autograd_kernel_fact(kernel, X, alpha, M):
    """(1/n) sum_i sum_c alpha_ic grad f_c(x_i) x_i^T by autograd through an explicit torch kernel, centres fixed,
    the self term k(x_i, x_i) left out (its gradient is 0: exactly for the Gaussian, by convention for Laplace)."""
    n = X.shape[0]
    Z = X.clone().requires_grad_(True)
    diff = Z[:, None, :] - X[None, :, :]
    sq = torch.einsum("ijd,de,ije->ij", diff, M, diff)
    off = ~torch.eye(n, dtype=torch.bool)
    sq = torch.where(off, sq, torch.ones_like(sq))          # keep sqrt differentiable on the diagonal
    if kernel == "gaussian":
        K = torch.exp(-sq / (2 * 1.5 ** 2))
    else:
        K = torch.exp(-sq.sqrt() / 3.0)
    K = torch.where(off, K, torch.ones_like(K).detach())     # the self term: constant in z
    out = K @ alpha
    (B,) = torch.autograd.grad(out, Z, grad_outputs=alpha)
    return B.T @ X / n


@pytest.mark.parametrize("name,kernel", [("gaussian", rfm.GaussianKernel(1.5)), ("laplace", rfm.LaplaceKernel(3.0))])
def test_kernel_fact_equals_autograd(name, kernel):
    g = torch.Generator().manual_seed(5)
    X = torch.randn(25, 4, generator=g, dtype=D64)
    alpha = torch.randn(25, 3, generator=g, dtype=D64)
    M = _rand_psd(4, g)
    F = kernel_fact(rfm.KernelMachine(kernel, X, alpha, M))
    ref = _autograd_kernel_fact(name, X, alpha, M)
    assert torch.allclose(F, ref, rtol=1e-10, atol=1e-12)


def test_kernel_fact_inner_product_closed_form():
    """Quadratic kernel k = (x^T M z)^2: F = (1/n) sum_ij 2 (x_i^T M x_j) (alpha_i . alpha_j) M x_j x_i^T."""
    g = torch.Generator().manual_seed(6)
    X = torch.randn(10, 3, generator=g, dtype=D64)
    alpha = torch.randn(10, 2, generator=g, dtype=D64)
    M = _rand_psd(3, g)
    F = kernel_fact(rfm.KernelMachine(rfm.QuadraticKernel(), X, alpha, M))
    kp = 2 * (X @ M @ X.T)
    ref = sum(kp[i, j] * float(alpha[i] @ alpha[j]) * torch.outer(M @ X[j], X[i])
              for i in range(10) for j in range(10)) / 10
    assert torch.allclose(F, ref, rtol=1e-10)


def test_fact_feature_matrix_forms():
    g = torch.Generator().manual_seed(7)
    F = torch.randn(5, 5, generator=g, dtype=D64)
    M = _rand_psd(5, g)
    S = fact_feature_matrix(F)
    assert torch.allclose(S @ S, F @ F.T, atol=1e-10)
    T = fact_feature_matrix(F, M, geometric=True)
    T4 = T @ T @ T @ T
    assert torch.allclose(T4, F @ M @ M @ F.T, atol=1e-9)
    assert float(torch.linalg.eigvalsh(S).min()) > -1e-12 and float(torch.linalg.eigvalsh(T).min()) > -1e-12
    with pytest.raises(ValueError, match="needs the current"):
        fact_feature_matrix(F, geometric=True)


def test_fact_fixed_point_is_fixed_point_of_both_updates():
    """If FACT = M (the theorem's relation), M maps to itself under both updates; also for FACT = M Q with Q
    orthogonal under the plain update (it only sees F F^T)."""
    g = torch.Generator().manual_seed(8)
    M = _rand_psd(6, g)
    assert torch.allclose(fact_feature_matrix(M), M, atol=1e-12)
    assert torch.allclose(fact_feature_matrix(M, M, geometric=True), M, atol=1e-12)
    Q, _ = torch.linalg.qr(torch.randn(6, 6, generator=g, dtype=D64))
    assert torch.allclose(fact_feature_matrix(M @ Q), M, atol=1e-12)
    # and not a fixed point when FACT differs from M
    assert not torch.allclose(fact_feature_matrix(2 * M + torch.eye(6, dtype=D64)), M, atol=1e-3)


def test_estimator_fact_fixed_point_via_callable_and_fact_update():
    """Inside the estimator: a callable update returning the current M leaves M unchanged (normalize None), and
    update="fact" applies (F F^T)^{1/2} of the iterate's kernel FACT, normalised by its max."""
    g = torch.Generator().manual_seed(9)
    X = torch.randn(60, 4, generator=g, dtype=D64)
    y = X[:, 0] * X[:, 1]
    M0 = _rand_psd(4, g)
    est = rfm.RFMRegressor(kernel="gaussian", bandwidth=2.0, reg=1e-3, iters=2, normalize=None, dtype="float64",
                           M_init=M0, update=lambda machine, M: M).fit(X, y)
    assert torch.allclose(est.M_, M0, atol=1e-10)
    est1 = rfm.RFMRegressor(kernel="gaussian", bandwidth=2.0, reg=1e-3, iters=1, dtype="float64",
                            update="fact").fit(X, y)
    e0 = rfm.RFMRegressor(kernel="gaussian", bandwidth=2.0, reg=1e-3, iters=0, dtype="float64").fit(X, y)
    S = fact_feature_matrix(e0.fact())
    assert torch.allclose(est1.M_, S / S.abs().max(), atol=1e-10)
    eg = rfm.RFMRegressor(kernel="gaussian", bandwidth=2.0, reg=1e-3, iters=1, dtype="float64",
                          update="fact_geometric").fit(X, y)
    T = fact_update_target("fact_geometric", e0.machine_, torch.eye(4, dtype=D64))
    assert torch.allclose(eg.M_, T / T.abs().max(), atol=1e-10)
    # the default update is unchanged: the AGOP
    ea = rfm.RFMRegressor(kernel="gaussian", bandwidth=2.0, reg=1e-3, iters=1, dtype="float64").fit(X, y)
    A = e0.agop()
    assert torch.allclose(ea.M_, A / A.abs().max(), atol=1e-10)


def test_estimator_update_bad_inputs():
    X, y = np.random.default_rng(0).standard_normal((20, 3)), np.arange(20.0)
    with pytest.raises(ValueError, match="update"):
        rfm.RFMRegressor(update="nfa").fit(X, y)
    with pytest.raises(TypeError, match="update"):
        rfm.RFMRegressor(update=3).fit(X, y)
    with pytest.raises(ValueError, match="agop_power"):
        rfm.RFMRegressor(update="fact", agop_power=0.5).fit(X, y)
    with pytest.raises(ValueError, match="center"):
        rfm.RFMClassifier(update="fact_geometric", center=True).fit(X, (y > 10).astype(int))
    assert UPDATES == ("agop", "fact", "fact_geometric")


def test_fact_rfm_learns_parity_support():
    """FACT-RFM recovers a 2-sparse parity support in d = 8 (n = 400), which the fixed Laplace kernel
    (iteration 0) does not classify."""
    S = [1, 5]
    X, y = sparse_parity(400, 8, S, generator=0)
    Xt, yt = sparse_parity(500, 8, S, generator=1)
    est = rfm.RFMClassifier(bandwidth=10.0, reg=1e-3, iters=5, update="fact", dtype="float64").fit(X, y)
    assert support_recovered(est.M_, S)
    assert est.score(Xt, yt) > 0.95


# -- sparse parity data ------------------------------------------------------------------------------------------

def test_sparse_parity_encodings_and_seed():
    X, y = sparse_parity(200, 10, [0, 3, 7], generator=3)
    assert set(X.unique().tolist()) == {-1.0, 1.0}
    assert torch.equal(y, X[:, [0, 3, 7]].prod(1))
    X2, y2 = sparse_parity(200, 10, [0, 3, 7], generator=3)
    assert torch.equal(X, X2) and torch.equal(y, y2)
    B, z = sparse_parity(200, 10, [0, 3, 7], encoding="01", generator=3)
    assert set(B.unique().tolist()) == {0.0, 1.0}
    assert torch.equal(z, B[:, [0, 3, 7]].sum(1) % 2)
    assert abs(float(y.mean())) < 0.2
    S = parity_support(30, 4, generator=0)
    assert len(S) == 4 and len(set(S)) == 4 and S == sorted(S) and max(S) < 30
    assert support_recovered(torch.tensor([0.1, 5.0, 0.2, 4.0]), [1, 3])
    assert not support_recovered(torch.tensor([0.1, 5.0, 0.2, 4.0]), [0, 3])


def test_sparse_parity_bad_inputs():
    with pytest.raises(ValueError, match="support"):
        sparse_parity(10, 5, [0, 5])
    with pytest.raises(ValueError, match="repeated"):
        sparse_parity(10, 5, [1, 1])
    with pytest.raises(ValueError, match="encoding"):
        sparse_parity(10, 5, [1], encoding="pm")
