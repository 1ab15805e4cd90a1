"""rfm.theory.eigenframework against brute force, Monte Carlo and its own limits."""
import math

import numpy as np
import pytest
import torch
from scipy.optimize import brentq

from rfm.theory.eigenframework import (
    RidgePath,
    cost_of_overfitting,
    effective_regularization,
    gaussian_design_risks,
    krr_risk,
    learnabilities,
    optimal_ridge,
    power_law_task,
    rf_risk,
    spectral_task,
)


def test_kappa_matches_brute_force_root():
    lam, _, _ = power_law_task(500, 1.3, 1.5)
    for n, ridge in [(10, 0.0), (100, 0.0), (50, 0.3), (700, 2.0)]:
        kap = effective_regularization(lam, n, ridge)
        g = lambda k, n=n, ridge=ridge: (lam / (lam + k)).sum() + ridge / k - n
        ref = brentq(lambda t, g=g: g(math.exp(t)), -80, 20, xtol=1e-14)
        assert kap == pytest.approx(math.exp(ref), rel=1e-9)
        assert (lam / (lam + kap)).sum() + ridge / kap == pytest.approx(n, rel=1e-9)


def test_ridgeless_kappa_interpolation_threshold_and_least_squares():
    with pytest.raises(ValueError, match="threshold"):
        effective_regularization(np.ones(10), 10, 0.0)
    assert effective_regularization(np.ones(10), 5, 0.0) == pytest.approx(1.0)    # 10/(1+k) = 5
    # n > modes: least squares on 10 directions, E_0 = n / (n - 10), train = noise (1 - 10/n)
    r = krr_risk(np.ones(10), np.ones(10), 40, 0.0, 0.3)
    assert (r.kappa, r.e0, r.test, r.train) == pytest.approx((0.0, 4 / 3, 0.4, 0.3 * 0.75))


def test_krr_prediction_matches_monte_carlo_on_gaussian_design():
    lam, v, _ = power_law_task(400, 1.5, 1.5)
    ridges = np.array([0.0, 1e-3, 1e-1])
    meas = np.mean([gaussian_design_risks(lam, v, 100, ridges, noise=0.05, generator=s)[0] for s in range(30)], 0)
    pred = np.array([krr_risk(lam, v, 100, r, 0.05).test for r in ridges])
    np.testing.assert_allclose(meas, pred, rtol=0.1)


def test_rf_prediction_matches_monte_carlo_both_sides_of_the_threshold():
    lam, v, _ = power_law_task(400, 1.5, 1.5)
    for k, ridge in [(40, 0.0), (300, 0.0), (100, 1e-2)]:
        meas = np.mean([gaussian_design_risks(lam, v, 100, [ridge], k=k, noise=0.05, generator=s)[0][0]
                        for s in range(30)])
        assert meas == pytest.approx(rf_risk(lam, v, 100, k, ridge, 0.05).test, rel=0.12)


def test_rf_tends_to_kernel_as_features_grow():
    lam, v, _ = power_law_task(300, 1.5, 1.2)
    kern = krr_risk(lam, v, 50, 1e-2, 0.1).test
    gaps = [abs(rf_risk(lam, v, 50, k, 1e-2, 0.1).test - kern) for k in (100, 1_000, 10_000, 100_000)]
    assert all(b < a for a, b in zip(gaps, gaps[1:])) and gaps[-1] < 1e-3 * kern
    assert rf_risk(lam, v, 50, math.inf, 1e-2, 0.1).test == pytest.approx(kern)


def test_limits_large_ridge_and_many_samples():
    lam, v, _ = power_law_task(200, 1.5, 1.5)
    # ridge -> infinity: nothing is learnt, the risk is the target's power plus the noise
    assert krr_risk(lam, v, 50, 1e12, 0.2).test == pytest.approx((v ** 2).sum() + 0.2, rel=1e-6)
    assert rf_risk(lam, v, 50, 80, 1e12, 0.2).test == pytest.approx((v ** 2).sum() + 0.2, rel=1e-6)
    # n -> infinity at a fixed ridge: every mode is learnt, only the noise is left
    assert krr_risk(lam, v, 1e9, 1.0, 0.2).test == pytest.approx(0.2, rel=1e-4)


def test_ridgeless_least_squares_limit_of_rf():
    lam = np.ones(50)
    v = np.ones(50) / math.sqrt(50)
    # k < n features, ridgeless: ordinary least squares on k of them, E = n / (n - k)
    assert rf_risk(lam, v, 40, 10, 0.0, 0.3).e == pytest.approx(4 / 3)
    with pytest.raises(ValueError, match="interpolation threshold"):
        rf_risk(lam, v, 20, 20, 0.0)


def test_worked_example_and_learnabilities_type():
    r = krr_risk([1.0, 1.0], [1.0, 0.0], n=1)
    assert (r.kappa, r.e0, r.test) == pytest.approx((1.0, 2.0, 0.5))
    assert isinstance(learnabilities(torch.tensor([1.0, 3.0]), 1.0), torch.Tensor)
    np.testing.assert_allclose(learnabilities([1.0, 3.0], 1.0), [0.5, 0.75])


def test_cost_of_overfitting_is_at_most_e0_and_at_least_one():
    i = np.arange(1, 801.0)
    v = np.where(i <= 3, 1.0, 0.0)
    for lam in (i ** -1.5, np.exp(-i / 10), np.where(i <= 3, 1.0, 1e-3)):
        for n in (8, 64, 256):
            c, e0 = cost_of_overfitting(lam, v, n, 0.1)
            assert 1.0 <= c <= e0 * (1 + 1e-9)


def test_ridge_path_matches_direct_solves():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(30, 5, generator=g, dtype=torch.float64)
    K = torch.exp(-torch.cdist(X, X))
    y = torch.randn(30, generator=g, dtype=torch.float64)
    path = RidgePath(K, y)
    for j, r in enumerate([1e-6, 0.1, 3.0]):
        a = torch.linalg.solve(K + r * torch.eye(30, dtype=torch.float64), y)
        torch.testing.assert_close(path.coefficients([1e-6, 0.1, 3.0])[:, j], a, rtol=1e-6, atol=1e-8)
        assert path.train_mse([r])[0].item() == pytest.approx(((y - K @ a) ** 2).mean().item(), rel=1e-6)
    # ridge 0 on a singular K: the least-squares fit (projection onto K's range)
    F = torch.randn(30, 4, generator=g, dtype=torch.float64)
    P = RidgePath(F @ F.T, y)
    fit = F @ torch.linalg.lstsq(F, y[:, None]).solution[:, 0]
    assert P.train_mse([0.0])[0].item() == pytest.approx(((y - fit) ** 2).mean().item(), rel=1e-8)


def test_spectral_task_reconstructs_kernel_and_target():
    g = torch.Generator().manual_seed(1)
    X = torch.randn(40, 3, generator=g, dtype=torch.float64)
    K = torch.exp(-torch.cdist(X, X) ** 2)
    f = X[:, 0]
    lam, v = spectral_task(K, f)
    assert (np.diff(lam) <= 1e-12).all()
    assert (v ** 2).sum() == pytest.approx((f ** 2).mean().item())     # Parseval on the pool
    assert lam.sum() * 40 == pytest.approx(torch.trace(K).item())


def test_optimal_ridge_and_errors():
    assert optimal_ridge([3.0, 1.0, 2.0], [0.1, 1.0, 10.0]) == (1.0, 1.0, 1)
    assert optimal_ridge(lambda r: (r - 2) ** 2, [0.0, 2.0, 5.0])[0] == 2.0
    with pytest.raises(ValueError, match="one value per ridge"):
        optimal_ridge([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="non-negative"):
        krr_risk([-1.0, 1.0], [1.0, 1.0], 1)
    with pytest.raises(ValueError, match="one coefficient per eigenvalue"):
        krr_risk([1.0, 1.0], [1.0], 1)
    with pytest.raises(ValueError, match="non-negative"):
        RidgePath(torch.eye(2), torch.ones(2)).coefficients([-1.0])


def test_gaussian_design_is_repeatable():
    lam, v, _ = power_law_task(50, 1.5, 1.5)
    a = gaussian_design_risks(lam, v, 20, [0.0, 0.1], k=30, generator=3)
    b = gaussian_design_risks(lam, v, 20, [0.0, 0.1], k=30, generator=3)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
