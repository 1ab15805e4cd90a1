"""The eigenframework's sweeps along a ridge path: equal to the single-point functions they loop over."""
import numpy as np
import pytest
import torch

from rfm.theory.eigenframework import (
    RidgePath,
    gaussian_design_mean_risks,
    gaussian_design_risks,
    krr_risk,
    optimal_fitting_ratio,
    power_law_task,
    rf_risk,
    rf_risk_path,
    ridge_path_risk,
)

RIDGES = np.array([0.0, 1e-3, 1e-1, 10.0])


def test_mean_risks_are_the_mean_and_standard_error_of_the_draws():
    lam, v, _ = power_law_task(50, 1.5, 1.5)
    draws = [gaussian_design_risks(lam, v, 20, RIDGES, k=10, noise=0.1, generator=s) for s in (3, 4, 5)]
    te, se, tr = gaussian_design_mean_risks(lam, v, 20, RIDGES, k=10, noise=0.1, generators=(3, 4, 5))
    tests = np.array([d[0] for d in draws])
    np.testing.assert_array_equal(te, tests.mean(0))
    np.testing.assert_array_equal(se, tests.std(0, ddof=1) / np.sqrt(3))
    np.testing.assert_array_equal(tr, np.array([d[1] for d in draws]).mean(0))


def test_one_draw_has_no_standard_error():
    lam, v, _ = power_law_task(30, 1.5, 1.5)
    _, se, _ = gaussian_design_mean_risks(lam, v, 10, RIDGES, generators=(0,))
    assert np.isnan(se).all()


def test_rf_risk_path_is_rf_risk_per_ridge_with_nan_at_the_ridgeless_threshold():
    lam, v, _ = power_law_task(200, 1.5, 1.5)
    path = rf_risk_path(lam, v, 40, 40, RIDGES, 0.01)          # k = n: ridge 0 diverges
    assert np.isnan(path[0])
    assert path[1:].tolist() == [rf_risk(lam, v, 40, 40, r, 0.01).test for r in RIDGES[1:]]
    kernel = rf_risk_path(lam, v, 40, None, RIDGES, 0.01)
    assert kernel.tolist() == [krr_risk(lam, v, 40, r, 0.01).test for r in RIDGES]


def test_optimal_fitting_ratio_is_train_over_test_at_the_best_ridge():
    lam, v, _ = power_law_task(100, 1.5, 1.5)
    best = min((krr_risk(lam, v, 30, r, 0.05) for r in RIDGES), key=lambda r: r.test)
    assert optimal_fitting_ratio(lam, v, 30, RIDGES, 0.05) == best.train / best.test
    # n equal to the number of modes: ridge 0 is skipped, not a division by zero
    flat = (np.ones(8), np.ones(8) / np.sqrt(8))
    ratio = optimal_fitting_ratio(*flat, 8, RIDGES, 0.05)
    best = min((krr_risk(*flat, 8, r, 0.05) for r in RIDGES[1:]), key=lambda r: r.test)
    assert ratio == best.train / best.test


def test_ridge_path_risk_is_the_pool_mse_plus_noise():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(12, 3, generator=g, dtype=torch.float64)
    K = X @ X.T + torch.eye(12, dtype=torch.float64)
    target = X[:, 0]
    idx = torch.arange(5)
    y = target[idx] + 0.1
    risk = ridge_path_risk(K[idx][:, idx], K[:, idx], y, target, RIDGES, noise=0.2)
    for r, value in zip(RIDGES, risk):
        alpha = torch.linalg.solve(K[idx][:, idx] + r * torch.eye(5, dtype=torch.float64), y)
        assert value == pytest.approx(float(((K[:, idx] @ alpha - target) ** 2).mean()) + 0.2, rel=1e-10)
    path = RidgePath(K[idx][:, idx], y)
    assert risk.shape == (len(RIDGES),) and path.predict(K[:, idx], RIDGES).shape == (12, len(RIDGES))
