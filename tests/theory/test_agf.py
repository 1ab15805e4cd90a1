"""Alternating gradient flows (rfm.theory.agf) against known answers."""
import math

import numpy as np
import pytest
import torch

from rfm.data.modular import fourier_residuals, template_addition
from rfm.theory.agf import agf_predict, agf_staircase, neuron_outputs


def test_diagonal_linear_jump_times_and_levels_closed_form():
    # diagonal linear network f(x) = sum_i a_i w_i x_i on X = I, y = beta: neuron i sees only coordinate i, grows
    # as alpha exp(2 beta_i t / d) from w = a = alpha, and reaches norm 1 at t_i = d log(1 / (sqrt(2) alpha)) /
    # (2 beta_i); after it the least-squares fit removes coordinate i from the loss
    d, alpha = 4, 1e-3
    beta = torch.tensor([3.0, 2.0, 1.2, 0.7], dtype=torch.float64)
    X, Y = torch.eye(d, dtype=torch.float64), beta[:, None].clone()
    r = agf_predict(X, Y, alpha * torch.eye(d, dtype=torch.float64), alpha * torch.ones(d, 1, dtype=torch.float64),
                    power=1, mask=torch.eye(d, dtype=torch.float64), rel_step=2e-3, loss_tol=1e-12)
    t_closed = d * math.log(1 / (math.sqrt(2) * alpha)) / (2 * beta.numpy())
    np.testing.assert_allclose(r["times"], t_closed, rtol=5e-3)
    assert r["neurons"] == [0, 1, 2, 3]
    levels = [float(beta[k + 1:].square().sum()) / d for k in range(d)]
    np.testing.assert_allclose(r["losses"], levels, atol=1e-10)
    assert r["loss0"] == pytest.approx(float(beta.square().sum()) / d)
    # time ~ log(1/alpha) / beta: halving the targets doubles the times, as the closed form says
    r2 = agf_predict(X, Y / 2, alpha * torch.eye(d, dtype=torch.float64), alpha * torch.ones(d, 1, dtype=torch.float64),
                     power=1, mask=torch.eye(d, dtype=torch.float64), rel_step=2e-3, max_rounds=1)
    assert r2["times"][0] == pytest.approx(2 * t_closed[0], rel=5e-3)


def test_linear_network_levels_are_eckart_young():
    # whitened inputs (X^T X / n = I), Y = X B: L(M) = ||B - M||_F^2 / c, so with k active neurons (rank k) the cost
    # minimum is the tail of B's squared singular values (Eckart-Young), reached one singular mode per jump
    g = torch.Generator().manual_seed(0)
    n, d, c, N = 40, 5, 4, 6
    Q, _ = torch.linalg.qr(torch.randn(n, d, generator=g, dtype=torch.float64))
    X = math.sqrt(n) * Q
    U, _, Vh = torch.linalg.svd(torch.randn(d, c, generator=g, dtype=torch.float64), full_matrices=False)
    s = torch.tensor([2.0, 1.3, 0.8, 0.4], dtype=torch.float64)
    B = U @ torch.diag(s) @ Vh
    Y = X @ B
    W0 = 1e-3 * torch.randn(N, d, generator=g, dtype=torch.float64)
    A0 = 1e-3 * torch.randn(N, c, generator=g, dtype=torch.float64)
    r = agf_predict(X, Y, W0, A0, power=1, max_rounds=3, rel_step=0.01)
    tails = [float(s[k + 1:].square().sum()) / c for k in range(3)]
    np.testing.assert_allclose(r["losses"], tails, rtol=1e-6, atol=1e-10)
    assert np.all(np.diff(r["times"]) > 0)
    # the first jump waits longer for a weaker top mode: scaling B by 1/2 roughly doubles the first time
    r2 = agf_predict(X, Y / 2, W0, A0, power=1, max_rounds=1, rel_step=0.01)
    assert 1.6 < r2["times"][0] / r["times"][0] < 2.4


def test_quadratic_cost_step_is_least_squares_optimal():
    # brute force: at the returned input weights of the active neurons, the reported loss is the least-squares loss
    # over the output weights, and no least-squares refit improves it
    g = torch.Generator().manual_seed(1)
    n, d, c, N = 30, 6, 3, 8
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    Y = torch.randn(n, c, generator=g, dtype=torch.float64)
    W0 = 1e-2 * torch.randn(N, d, generator=g, dtype=torch.float64)
    A0 = 1e-2 * torch.randn(N, c, generator=g, dtype=torch.float64)
    r = agf_predict(X, Y, W0, A0, power=2, max_rounds=2, rel_step=0.02)
    idx = r["neurons"]
    Phi = (X @ r["W"][idx].T).square()
    A_ls = torch.linalg.lstsq(Phi, Y, driver="gelsd").solution
    loss_ls = float((Y - Phi @ A_ls).square().mean())
    assert r["losses"][-1] == pytest.approx(loss_ls, rel=1e-8)
    F = neuron_outputs(r["W"][idx], r["A"][idx], X, 2)
    assert float((Y - F).square().mean()) == pytest.approx(r["losses"][-1], rel=1e-8)
    assert r["losses"][0] < r["loss0"] and r["losses"][1] <= r["losses"][0] + 1e-12


def test_template_addition_learns_the_largest_magnitude_first():
    T = template_addition(7, [1.0, 0.5], generator=0)
    g = torch.Generator().manual_seed(0)
    W0 = 1e-2 * torch.randn(12, 14, generator=g, dtype=torch.float64)
    A0 = 1e-2 * torch.randn(12, 7, generator=g, dtype=torch.float64)
    r = agf_predict(T["X"], T["Y"], W0, A0, power=2, max_rounds=2, rel_step=0.03, cost_iters=50)
    res = fourier_residuals(T["Y"], r["outputs"][0]).numpy()
    assert res[0] < 0.99 and res[1] > 0.99


def test_staircase_and_bad_inputs():
    assert agf_staircase([1.0, 2.0], [0.5, 0.1], 1.0, [0.0, 1.0, 1.5, 3.0]).tolist() == [1.0, 0.5, 0.5, 0.1]
    with pytest.raises(ValueError):
        agf_staircase([2.0, 1.0], [0.5, 0.1], 1.0, [0.0])
    X, Y = torch.eye(3, dtype=torch.float64), torch.ones(3, 1, dtype=torch.float64)
    with pytest.raises(ValueError):
        agf_predict(X, Y, torch.ones(2, 4, dtype=torch.float64), torch.ones(2, 1, dtype=torch.float64))
    with pytest.raises(ValueError):
        agf_predict(X, Y, torch.ones(2, 3, dtype=torch.float64), torch.ones(2, 1, dtype=torch.float64),
                    mask=torch.ones(3, 3, dtype=torch.float64))
