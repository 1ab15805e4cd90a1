"""The PTK, its feature covariance, the AGOP decomposition, centred correlations, second derivatives at
initialisation and the alignment reversing data, against closed forms in float64."""
import math

import pytest
import torch

import rfm
from rfm import nets
from rfm.nets import alignment as al


def _data(n=40, d=6, seed=0):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _net(activation="relu", bias=False, d_out=1, seed=1, widths=(7, 5)):
    return nets.MLP(6, list(widths), d_out, activation=activation, bias=bias, dtype="float64", generator=seed)


@pytest.mark.parametrize("activation", ["relu", "tanh", "quadratic"])
@pytest.mark.parametrize("layer", [0, 1, 2])
def test_agop_is_w_transpose_ptk_covariance_w(activation, layer):
    # Proposition 2: df/dx_l = W_l^T df/dh_l, so AGOP_l = W_l^T K_l W_l, here with biases and two outputs
    net = _net(activation, bias=True, d_out=2)
    X = _data()
    K = al.ptk_covariance(net, X, layer)
    A = nets.layer_agop(net, X, layer)
    torch.testing.assert_close(al.agop_from_ptk(net.weight(layer), K), A, rtol=1e-12, atol=1e-12 * float(A.abs().max()))


def test_ptk_covariance_is_the_mean_outer_product_of_the_ptk_features():
    net = _net("tanh", d_out=3)
    X = _data()
    J = al.ptk_features(net, X, 1)                       # (n, c, k)
    assert J.shape == (40, 3, 5)
    torch.testing.assert_close(al.ptk_covariance(net, X, 1), torch.einsum("ick,icl->kl", J, J) / 40,
                               rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(al.ptk(net, X, 1).trace() / 40, al.ptk_covariance(net, X, 1).trace(),
                               rtol=1e-12, atol=0)


def test_one_hidden_layer_ptk_features_match_the_explicit_formula():
    # f(x) = a . relu(W x): df/dh = a * relu'(W x)
    net = nets.MLP(6, [7], 1, dtype="float64", generator=2)
    X = _data()
    W, a = net.weight(0).detach(), net.weight(1).detach()[0]
    expected = a * (X @ W.T > 0).double()
    torch.testing.assert_close(al.ptk_features(net, X, 0)[:, 0], expected, rtol=0, atol=0)


def test_ptk_times_input_gram_is_the_layer_ntk():
    # Proposition 4: <df(x)/dW_l, df(z)/dW_l> = K^(l)(x, z) * x_l . z_l
    net = _net("tanh")
    X, Z = _data(5), _data(4, seed=1)
    layer = 1

    def weight_grads(P):
        rows = []
        for p in P:
            net.zero_grad()
            net(p[None]).sum().backward()
            rows.append(net.weight(layer).grad.reshape(-1).clone())
        return torch.stack(rows)

    ntk = weight_grads(X) @ weight_grads(Z).T
    inputs = net.layer_input(X, layer) @ net.layer_input(Z, layer).T
    torch.testing.assert_close(ntk, al.ptk(net, X, layer, Z) * inputs, rtol=1e-12, atol=1e-14)


def test_readout_ptk_covariance_is_the_identity_and_its_nfc_is_one():
    # df_c/dh_L = e_c, so K = I and AGOP = W^T W: the NFA holds trivially (the paper's "K is the identity" case)
    net = _net(d_out=3)
    X = _data()
    last = net.n_layers - 1
    torch.testing.assert_close(al.ptk_covariance(net, X, last), torch.eye(3, dtype=torch.float64))
    assert al.nfc(net.weight(last), torch.eye(3, dtype=torch.float64)) == pytest.approx(1.0, abs=1e-12)


def test_centred_quantities_use_the_change_of_the_weights():
    net = _net()
    X = _data()
    W0 = net.initial_weight(0).clone()
    V = 0.3 * torch.randn(W0.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    with torch.no_grad():
        net.weight(0).add_(V)
    K = al.ptk_covariance(net, X, 0)
    W = net.weight(0).detach()
    row = al.feature_correlations(net, X, layers=[0])[0]
    assert row["uc_nfc"] == pytest.approx(rfm.matrix_correlation(W.T @ W, W.T @ K @ W, "cosine"), abs=1e-12)
    assert row["c_nfc"] == pytest.approx(rfm.matrix_correlation(V.T @ V, V.T @ K @ V, "cosine"), abs=1e-12)
    ratio = torch.trace(V.T @ V @ V.T @ K @ V) / torch.trace(W.T @ W @ W.T @ K @ W)
    assert row["cu_ratio"] == pytest.approx(float(ratio), rel=1e-10)
    assert row["weight_change"] == pytest.approx(float(V.norm() / W.norm()), rel=1e-12)


def test_from_zero_initial_weights_centred_and_uncentred_coincide():
    net = nets.MLP(6, [7, 5], 1, init_scale=[0.0, 1.0, 1.0], dtype="float64", generator=3)
    with torch.no_grad():
        net.weight(0).copy_(torch.randn(7, 6, generator=torch.Generator().manual_seed(4), dtype=torch.float64))
    row = al.feature_correlations(net, _data(), layers=[0], kind="pearson")[0]
    assert row["c_nfc"] == pytest.approx(row["uc_nfc"], abs=1e-12)
    assert row["cu_ratio"] == pytest.approx(1.0, abs=1e-12)


def test_centred_quantities_are_undefined_at_initialisation():
    row = al.feature_correlations(_net(), _data(), layers=[1])[0]
    assert math.isnan(row["c_nfc"]) and math.isnan(row["cu_ratio"]) and row["weight_change"] == 0


def test_spectrum_matched_control_keeps_the_spectrum_and_changes_the_eigenvectors():
    net = _net()
    X = _data()
    K = al.ptk_covariance(net, X, 0)
    Q = al.spectrum_matched(K, generator=0)
    torch.testing.assert_close(Q, Q.T)
    torch.testing.assert_close(torch.linalg.eigvalsh(Q), torch.linalg.eigvalsh(K), rtol=1e-10, atol=1e-12)
    assert float((Q - K).norm()) > 0.1 * float(K.norm())
    O = al.haar_orthogonal(8, generator=1)
    torch.testing.assert_close(O.T @ O, torch.eye(8, dtype=torch.float64))
    draws = al.random_eigenvector_nfc(net, X, 0, draws=3, generator=0, K=K)
    assert len(draws) == 3 and draws[0] == pytest.approx(al.nfc(net.weight(0), Q), abs=1e-12)


def test_haar_orthogonal_is_the_q_factor_with_a_positive_r_diagonal():
    # the sign convention that makes the QR factor Haar-distributed (Mezzadri 2007): O^T G upper triangular, diag > 0
    O = al.haar_orthogonal(6, generator=3)
    G = torch.randn(6, 6, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    R = O.T @ G
    torch.testing.assert_close(torch.tril(R, -1), torch.zeros(6, 6, dtype=torch.float64), rtol=0, atol=1e-12)
    assert bool((R.diagonal() > 0).all())


@pytest.mark.parametrize("layer", [0, 1, 2])
def test_weight_velocity_is_minus_the_loss_gradient(layer):
    net = _net("tanh", d_out=2)
    X = _data()
    Y = torch.randn(40, 2, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    residual = Y - net(X).detach()
    net.zero_grad()
    (0.5 * (net(X) - Y).square().sum()).backward()
    torch.testing.assert_close(al.weight_velocity(net, X, residual, layer), -net.weight(layer).grad,
                               rtol=1e-12, atol=1e-12)


def test_quadratic_network_second_derivatives_are_crc_and_crbrc():
    # f(x) = a^T (W x)^2: PTK(x, z) = 4 x^T R z, so Wdot^T Wdot = 4 C R C and Wdot^T K Wdot = 16 C R B R C
    net = nets.MLP(6, [9], 1, activation="quadratic", dtype="float64", generator=2)
    X = _data()
    y = torch.randn(40, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    R = al.quadratic_readout_gram(net)
    C, A, B = al.data_matrices(X, y)
    N2, G2 = al.second_derivatives(net, X, y)
    torch.testing.assert_close(N2, 4 * C @ R @ C, rtol=1e-12, atol=1e-10)
    torch.testing.assert_close(G2, 16 * C @ R @ B @ R @ C, rtol=1e-12, atol=1e-8)
    assert al.second_derivative_correlation(net, X, y) == pytest.approx(
        rfm.matrix_correlation(C @ R @ C, C @ R @ B @ R @ C, "cosine"), abs=1e-12)


def _data_side(d=60, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(2 * d, d, generator=g, dtype=torch.float64) * torch.linspace(0.3, 2.0, d, dtype=torch.float64)
    y = torch.randn(2 * d, generator=g, dtype=torch.float64)
    _, A, B = al.data_matrices(X, y)
    return A / A.diagonal().mean(), B / B.diagonal().mean()


def test_free_traces_are_exact_for_a_multiple_of_the_identity():
    A, B = _data_side()
    tr = lambda M: float(M.diagonal().mean())
    c = 2.5
    num, den1, den2 = al.free_second_derivative_traces(A, B, [c, c ** 2, c ** 3, c ** 4])
    assert num == pytest.approx(c ** 3 * tr(A @ A @ B), rel=1e-10)
    assert den1 == pytest.approx(c ** 2 * tr(A @ A), rel=1e-10)
    assert den2 == pytest.approx(c ** 4 * tr(A @ B @ A @ B), rel=1e-10)
    assert al.free_second_derivative_correlation(A, B, [1, 1, 1, 1]) == pytest.approx(
        tr(A @ A @ B) / math.sqrt(tr(A @ A) * tr(A @ B @ A @ B)), rel=1e-10)


def test_free_traces_match_averages_over_haar_rotated_r():
    # freeness is what a Haar rotation of R gives; at d = 100 the finite-size and Monte-Carlo errors are ~2 %.
    # The paper's Eq. 26 as printed misses b^2 m2^2 tr(Ab^2), about 17 % of tr(ARBRARBR) here: caught at 6 %.
    d, draws = 100, 100
    A, B = _data_side(d)
    g = torch.Generator().manual_seed(1)
    W = torch.randn(d, d, generator=g, dtype=torch.float64) / d ** 0.5
    R = W.T @ (2 * torch.rand(d, 1, generator=g, dtype=torch.float64) * W)
    predicted = al.free_second_derivative_traces(A, B, al.spectral_moments(R))
    tr = lambda M: float(M.diagonal().mean())
    values = []
    with nets.num_threads(1):  # small products: one thread is fastest, and fair to a busy machine
        for _ in range(draws):
            O = al.haar_orthogonal(d, g)
            Rr = O @ R @ O.T
            AR = A @ Rr
            values.append([tr(AR @ AR @ B @ Rr), tr(AR @ AR), tr(AR @ B @ Rr @ AR @ B @ Rr)])
    mean = torch.tensor(values).mean(0)
    for p, m in zip(predicted, mean):
        assert abs(p - float(m)) < 0.06 * abs(p)


def test_spectral_moments_are_normalised_traces_of_powers():
    R = torch.diag(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
    assert al.spectral_moments(R) == pytest.approx([2.0, 14 / 3, 12.0, 98 / 3])


def test_alignment_reversing_data_inverts_the_labelled_gram_when_it_is_invertible():
    # with n1, n2 >= d and no added noise, X2^T X2 = (X1^T X1)^{-2} exactly (Appendix F)
    X, y = al.alignment_reversing_data(60, 10, 0.5, eps2=0.0, generator=3)
    X1, X2 = X[:30], X[30:]
    G1 = X1.T @ X1
    torch.testing.assert_close(X2.T @ X2, torch.linalg.inv(G1 @ G1), rtol=1e-8, atol=1e-14)
    torch.testing.assert_close(y, torch.cat([torch.ones(30), torch.zeros(30)]).double() + 1e-5)


def test_alignment_reversing_data_shapes_balance_and_seeding():
    X, y = al.alignment_reversing_data(40, 8, 0.25, generator=0)
    assert X.shape == (40, 8) and X.dtype == torch.float64
    assert int((y > 0.5).sum()) == 10
    X_again, _ = al.alignment_reversing_data(40, 8, 0.25, generator=0)
    torch.testing.assert_close(X, X_again, rtol=0, atol=0)
    X_all, y_all = al.alignment_reversing_data(40, 8, 1.0, generator=0)
    assert bool((y_all > 0.5).all())
    # the labelled part has covariance 1 1^T + eps1 I: its mean coordinate dominates
    assert float(X_all.mean(1).var()) > 0.5
    # floored singular values keep X2 bounded when X1^T X1 is singular (n1 < d)
    X_floor, _ = al.alignment_reversing_data(40, 32, 0.25, rcond=1e-4, generator=0)
    X_exact, _ = al.alignment_reversing_data(40, 32, 0.25, generator=0)
    assert float(X_floor.abs().max()) < float(X_exact.abs().max())


def test_bad_arguments_are_named():
    net = _net()
    with pytest.raises(ValueError, match="layer must be <= 2"):
        al.ptk_covariance(net, _data(), 3)
    with pytest.raises(ValueError, match="kind must be one of"):
        al.feature_correlations(net, _data(), kind="spearman")
    with pytest.raises(ValueError, match="balance must be > 0"):
        al.alignment_reversing_data(10, 4, 0.0)
    with pytest.raises(ValueError, match="residual has 2 column"):
        al.weight_velocity(net, _data(), torch.zeros(40, 2), 0)
    with pytest.raises(ValueError, match="one-hidden-layer"):
        al.quadratic_readout_gram(net)


def test_tracker_records_feature_correlations_during_training():
    from rfm.nets import optim

    net = _net()
    X = _data()
    y = torch.randn(40, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    tracker = al.CorrelationTracker(X, layers=[0, 1])
    optim.train_full_batch(net, X, y, torch.optim.SGD(net.parameters(), lr=0.05), steps=6, record_every=3,
                           callback=tracker)
    assert tracker.times == [0, 3, 6]
    assert math.isnan(tracker.series("c_nfc", 1)[0])
    assert tracker.series("uc_nfc", 1)[-1] == pytest.approx(al.feature_correlations(net, X, [1])[0]["uc_nfc"])
    with pytest.raises(ValueError, match="layer 2 was not tracked"):
        tracker.series("uc_nfc", 2)
