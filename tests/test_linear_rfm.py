"""rfm.linear: lin-RFM and IRLS on known answers (float64)."""
import numpy as np
import pytest
import torch

from rfm import linear as L


def _problem(n=30, d=80, s=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = np.zeros(d)
    w[rng.choice(d, s, replace=False)] = rng.standard_normal(s)
    return X, w, X @ w


def test_alpha_p_map():
    assert L.alpha_to_irls_p(0.25) == 1.0 and L.alpha_to_irls_p(0.5) == 0.0
    assert L.irls_p_to_alpha(L.alpha_to_irls_p(0.3)) == pytest.approx(0.3)


@pytest.mark.parametrize("alpha", [0.1, 0.25, 0.4, 0.5])
def test_one_lin_rfm_step_is_one_irls_step(alpha):
    X, _, y = _problem()
    w = np.random.default_rng(1).standard_normal(X.shape[1])   # dense, no zero weight
    a = L.lin_rfm_sparse_step(X, y, w, alpha=alpha)
    b = L.irls_step(X, y, w, p=L.alpha_to_irls_p(alpha))
    np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
    # IRLS's step is the weighted minimum-norm interpolant: check its KKT system directly
    c = np.abs(w) ** (L.alpha_to_irls_p(alpha) - 2)
    n, d = X.shape
    K = np.block([[2 * np.diag(c), X.T], [X, np.zeros((n, n))]])
    sol = np.linalg.solve(K, np.concatenate([np.zeros(d), y]))[:d]
    np.testing.assert_allclose(b, sol, rtol=1e-6, atol=1e-8)


def test_iteration_zero_is_min_norm():
    X, _, y = _problem()
    w0, path = L.lin_rfm_sparse(X, y, iters=3, return_path=True)
    np.testing.assert_allclose(path[0], np.linalg.pinv(X) @ y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(L.lin_rfm_sparse(X, y, iters=0), np.linalg.pinv(X) @ y, rtol=1e-10, atol=1e-12)
    assert path.shape == (4, X.shape[1]) and np.array_equal(path[-1], w0)


@pytest.mark.parametrize("alpha", [0.25, 0.5])
def test_sparse_truth_is_a_fixed_point(alpha):
    X, w, y = _problem()
    np.testing.assert_allclose(L.lin_rfm_sparse_step(X, y, w, alpha=alpha), w, atol=1e-10)


def test_basis_pursuit_power_recovers_sparse_vector():
    X, w, y = _problem(n=40, d=100, s=4)
    w_hat = L.lin_rfm_sparse(X, y, iters=60, alpha=0.25, reg=1e-10)
    assert np.linalg.norm(w_hat - w) / np.linalg.norm(w) < 1e-6
    assert np.linalg.norm(np.linalg.pinv(X) @ y - w) / np.linalg.norm(w) > 0.3   # the min-norm control fails


def test_fully_observed_matrix_is_recovered_in_one_step():
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((12, 3)) @ rng.standard_normal((3, 10))
    mask = np.ones_like(Y, dtype=bool)
    res = L.lin_rfm_completion(Y, mask, iters=0)
    np.testing.assert_allclose(res["Y"], Y, atol=1e-10)
    P = L.completion_metric(rng.standard_normal((12, 10)), alpha=0.3, svd_free=False)   # any PD metric
    np.testing.assert_allclose(L.completion_predict(Y, mask, P), Y, atol=1e-8)


def test_completion_iteration_zero_fills_zeros_and_reads_only_observed():
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((8, 6))
    mask = rng.random((8, 6)) < 0.5
    Y_nan = np.where(mask, Y, np.nan)        # unobserved entries are never read
    out = L.completion_predict(Y_nan, mask, np.eye(6))
    np.testing.assert_allclose(out, np.where(mask, Y, 0.0), atol=1e-12)


def test_svd_and_svd_free_agree_at_half():
    rng = np.random.default_rng(0)
    O = rng.standard_normal((20, 3)) @ rng.standard_normal((3, 15))
    a = L.completion_metric(O, alpha=0.5, svd_free=True)
    b = L.completion_metric(O, alpha=0.5, svd_free=False)
    np.testing.assert_allclose(a, b, atol=1e-10)
    Y = O
    mask = rng.random(O.shape) < 0.6
    r1 = L.lin_rfm_completion(Y, mask, iters=5, svd_free=True, reg=1e-6)
    r2 = L.lin_rfm_completion(Y, mask, iters=5, svd_free=False, reg=1e-6)
    np.testing.assert_allclose(r1["Y"], r2["Y"], atol=1e-6)
    c = L.completion_metric(O, alpha=0.25, svd_free=False)   # (W^T W)^{1/2} differs
    assert np.abs(c - a).max() > 1e-3


def test_holdout_is_seeded_and_repeatable():
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((15, 2)) @ rng.standard_normal((2, 15))
    mask = rng.random(Y.shape) < 0.5
    r1 = L.lin_rfm_completion(Y, mask, iters=4, holdout=0.1, seed=3, reg=1e-6)
    r2 = L.lin_rfm_completion(Y, mask, iters=4, holdout=0.1, seed=3, reg=1e-6)
    assert r1["holdout_error"] == r2["holdout_error"] and np.array_equal(r1["Y"], r2["Y"])


def test_bad_inputs():
    X, w, y = _problem()
    with pytest.raises(ValueError):
        L.lin_rfm_sparse(X, y[:-1])
    with pytest.raises(ValueError):
        L.lin_rfm_sparse(X[0], y)
    with pytest.raises(ValueError):
        L.lin_rfm_sparse(X, y, iters=-1)
    with pytest.raises(ValueError):
        L.lin_rfm_sparse_step(X, y, w[:-1])
    with pytest.raises(ValueError):
        L.irls_step(X, y, w, p=3.0)
    Y = np.ones((4, 5))
    with pytest.raises(ValueError, match="SVD-free"):
        L.lin_rfm_completion(Y, np.ones((4, 5), bool), alpha=0.25, svd_free=True)
    with pytest.raises(ValueError, match="shape"):
        L.lin_rfm_completion(Y, np.ones((5, 4), bool))
    with pytest.raises(ValueError, match="no observed"):
        L.lin_rfm_completion(Y, np.zeros((4, 5), bool))


def test_torch_in_torch_out_numpy_in_numpy_out():
    X, w, y = _problem()
    a = L.lin_rfm_sparse(X, y, iters=2, alpha=0.25)
    b = L.lin_rfm_sparse(torch.from_numpy(X), torch.from_numpy(y), iters=2, alpha=0.25)
    assert isinstance(a, np.ndarray) and isinstance(b, torch.Tensor) and b.dtype == torch.float64
    np.testing.assert_allclose(a, b.numpy(), rtol=1e-10, atol=1e-12)
    Y = np.random.default_rng(0).standard_normal((6, 5))
    mask = np.ones_like(Y, dtype=bool)
    rt = L.lin_rfm_completion(torch.from_numpy(Y), torch.from_numpy(mask), iters=1)
    assert isinstance(rt["Y"], torch.Tensor)
    np.testing.assert_allclose(rt["Y"].numpy(), L.lin_rfm_completion(Y, mask, iters=1)["Y"], atol=1e-12)


def test_replace_puts_observed_values_back():
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((8, 6))
    mask = rng.random((8, 6)) < 0.5
    mask[:, 0] = True
    P = L.completion_metric(rng.standard_normal((10, 6)), alpha=0.5)
    shrunk = L.completion_predict(Y, mask, P, reg=10.0)
    kept = L.completion_predict(Y, mask, P, reg=10.0, replace=True)
    np.testing.assert_allclose(kept[mask], Y[mask], atol=1e-12)
    np.testing.assert_allclose(kept[~mask], shrunk[~mask], atol=1e-12)
    assert np.abs(shrunk[mask] - Y[mask]).max() > 1e-2     # reg > 0 shrinks the fit without it
