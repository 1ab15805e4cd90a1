"""The experiment plumbing of rfm.nets.alignment (the alignment chapter's tasks, tracked runs, reversing sweep) and
the double- / PTK-centred correlations of Appendix C, against brute force and closed forms."""
import math

import pytest
import torch

import rfm
from rfm import nets
from rfm.nets import alignment as al
from rfm.nets import optim


def test_chain_task_is_low_rank_polynomial_with_unit_label_std():
    X, y, Xt, yt = al.chain_task(100, 12, 4, data_seed=3, n_test=50)
    X0, y0 = rfm.data.low_rank_polynomial(100, 12, "chain", r=4, generator=6, dtype="float32")
    Xt0, yt0 = rfm.data.low_rank_polynomial(50, 12, "chain", r=4, generator=7, dtype="float32")
    assert torch.equal(X, X0) and torch.equal(Xt, Xt0)
    assert torch.allclose(y, y0 / y0.std()) and torch.allclose(yt, yt0 / y0.std())
    assert float(y.std()) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("decay", [1.0, 2.0])
def test_decay_covariance_has_the_stated_spectrum(decay):
    S = al.decay_covariance(20, decay, generator=1)
    k = torch.arange(1, 21, dtype=torch.float64)
    lam = 1 / (1 + k ** decay)
    lam = lam / lam.mean()
    assert torch.allclose(torch.linalg.eigvalsh(S), lam.sort().values, atol=1e-12)
    assert torch.allclose(S, S.T)
    assert torch.equal(al.decay_covariance(5, 0.0), torch.eye(5, dtype=torch.float64))


def test_chain_inputs_with_decay_have_that_covariance():
    Z = al.chain_inputs(200_000, 6, decay=1.0, generator=0, basis=4)
    emp = Z.T @ Z / Z.shape[0]
    assert torch.allclose(emp, al.decay_covariance(6, 1.0, generator=4), atol=0.02)


def test_chain_egop_block():
    E = al.chain_egop(8, 5, samples=200_000)
    exact = torch.zeros(8, 8, dtype=torch.float64)
    # grad_k y = x_{k-1} + x_{k+1} (mod 5): E[g_k g_j] = 2 on the diagonal, 1 for j = k +- 2 (one common neighbour)
    for k in range(5):
        exact[k, k] = 2.0
        exact[k, (k + 2) % 5] = exact[k, (k - 2) % 5] = 1.0
    assert torch.allclose(E, exact, atol=0.03)


def test_tracked_gd_run_is_plain_sgd_and_reports_the_last_record():
    X, y, Xt, yt = al.chain_task(40, 6, 3, data_seed=0, n_test=30, dtype="float64")
    run = al.tracked_run(X, y, Xt, yt, method="gd", lr=0.05, steps=6, widths=(7, 5), init_scale=0.5,
                         readout_scale=0.1, record_every=3, generator=2, egop=torch.eye(6, dtype=torch.float64))
    net = nets.MLP(6, [7, 5], 1, init="uniform", init_scale=[0.5, 1.0, 0.1], generator=2, dtype=torch.float64)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    for _ in range(6):
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(X).squeeze(1), y).backward()
        opt.step()
    for l in range(3):
        assert torch.allclose(run["net"].weight(l), net.weight(l), atol=1e-12)
    last = al.feature_correlations(net, X, [0])[0]
    assert run["tracker"].times == [0, 3, 6]
    assert run["uc"] == pytest.approx(last["uc_nfc"]) and run["c"] == pytest.approx(last["c_nfc"])
    assert run["ratio"] == pytest.approx(last["cu_ratio"])
    assert torch.allclose(run["agop"], nets.layer_agop(net, X, 0).to(torch.float64), atol=1e-10)
    assert run["nfm_egop"] == pytest.approx(rfm.matrix_correlation(nets.nfm(net, 0), torch.eye(6), "cosine"))
    with torch.no_grad():
        assert run["test"] == pytest.approx(float(torch.nn.functional.mse_loss(net(Xt).squeeze(1), yt)))


def test_tracked_slo_run_moves_each_layer_by_its_speed():
    X, y, _, _ = al.chain_task(30, 5, 3, data_seed=1, n_test=10, dtype="float64")
    run = al.tracked_run(X, y, method="slo", lr=0.1, steps=1, widths=(6, 4), speeds=(3.0, 0.5, 0.0), eps=0.0,
                         record_every=1, generator=0)
    net = run["net"]
    moved = [float((net.weight(l).detach() - net.initial_weight(l)).norm()) for l in range(3)]
    assert moved == pytest.approx([0.3, 0.05, 0.0], abs=1e-12)
    with pytest.raises(ValueError, match="one speed per layer"):
        al.tracked_run(X, y, method="slo", lr=0.1, steps=1, widths=(6, 4), speeds=(1.0, 1.0))


def test_seed_means_averages_present_keys():
    rows = [dict(uc=0.5, c=1.0, test=2.0), dict(uc=0.7, c=0.0, test=4.0)]
    assert al.seed_means(rows) == dict(uc=0.6, c=0.5, test=3.0)
    with pytest.raises(ValueError):
        al.seed_means([])


def test_reversing_curve_is_the_loop_over_balances():
    net = nets.MLP(12, [12], 1, activation="quadratic", dtype="float64", generator=3)
    moments = al.spectral_moments(al.quadratic_readout_gram(net))
    obs, pred = al.reversing_curve(net, moments, 12, 12, (1.0, 0.5), generator=5, rcond=1e-10)
    for g, o, p in zip((1.0, 0.5), obs, pred):
        X, y = al.alignment_reversing_data(12, 12, g, rcond=1e-10, generator=5)
        assert o == pytest.approx(al.second_derivative_correlation(net, X, y))
        assert p == pytest.approx(al.predicted_second_derivative_correlation(X, y, moments))


def _quadratic_pair(seed=0):
    """A one-hidden-layer quadratic network whose first layer moved (read-out unchanged) and its initial copy."""
    net = nets.MLP(5, [6], 1, activation="quadratic", dtype="float64", generator=seed)
    with torch.no_grad():
        net.layers[0].weight.add_(0.3 * torch.randn(6, 5, generator=torch.Generator().manual_seed(seed + 1),
                                                    dtype=torch.float64))
    return net, net.initial()


def test_centred_ptk_covariance_closed_form_for_the_quadratic_network():
    # f = a^T (W x)^2: df/dh = 2 a * (W x); with a fixed, J - J0 = 2 a * ((W - W0) x)
    net, init = _quadratic_pair()
    X = torch.randn(30, 5, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    a = net.weight(1).detach()[0]
    Wb = (net.weight(0) - net.initial_weight(0)).detach()
    D = 2 * a * (X @ Wb.T)
    assert torch.allclose(al.centred_ptk_covariance(net, X, 0, init), D.T @ D / 30, atol=1e-12)
    assert torch.allclose(al.centred_ptk_covariance(net, X, 0), D.T @ D / 30, atol=1e-12)


def test_double_and_ptk_centred_correlations():
    net, init = _quadratic_pair(2)
    X = torch.randn(30, 5, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    row = al.feature_correlations(net, X, [0], centrings=True)[0]
    W, W0 = net.weight(0).detach(), net.initial_weight(0)
    Wb = W - W0
    K = al.ptk_covariance(net, X, 0)
    Kb = al.centred_ptk_covariance(net, X, 0)
    cos = lambda A, B: float((A * B).sum() / (A.norm() * B.norm()))
    assert row["dc_nfc"] == pytest.approx(cos(Wb.T @ Wb, Wb.T @ Kb @ Wb))
    assert row["ptk_c_nfc"] == pytest.approx(cos(W0.T @ W0, W0.T @ Kb @ W0))
    ratio = torch.trace(Wb.T @ Wb @ Wb.T @ Kb @ Wb) / torch.trace(Wb.T @ Wb @ Wb.T @ K @ Wb)
    assert row["dc_ratio"] == pytest.approx(float(ratio))
    # at initialisation every centred quantity is undefined
    row0 = al.feature_correlations(init, X, [0], centrings=True)[0]
    assert all(math.isnan(row0[k]) for k in ("c_nfc", "dc_nfc", "ptk_c_nfc", "dc_ratio"))


def test_tracker_offset_and_centrings():
    net = nets.MLP(4, [5, 3], 1, generator=0, dtype=torch.float64)
    X = torch.randn(20, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = torch.randn(20, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    tr = al.CorrelationTracker(X, layers=[0, 1], centrings=True, offset=1)
    optim.train_full_batch(net, X, y, torch.optim.SGD(net.parameters(), lr=0.1), steps=4, record_every=2,
                           callback=tr)
    assert tr.times == [1, 3, 5]
    assert tr.series("dc_ratio", 1)[-1] == pytest.approx(
        al.feature_correlations(net, X, [1], centrings=True)[0]["dc_ratio"])
    plain = al.CorrelationTracker(X, layers=[0])
    plain(net, {"step": 0})
    with pytest.raises(ValueError, match="centrings=True"):
        plain.series("dc_nfc", 0)
