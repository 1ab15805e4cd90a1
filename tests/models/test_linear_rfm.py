"""rfm.models.linear: lin-RFM and IRLS on known answers (float64)."""
import numpy as np
import pytest
import torch

from rfm.models import linear as L


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


def _low_rank(d=30, r=2, ratio=4.0, seed=0):
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal((d, r)) @ rng.standard_normal((r, d))
    Y *= d / np.linalg.norm(Y)
    k = int(ratio * r * (2 * d - r))
    mask = np.zeros(d * d, bool)
    mask[rng.choice(d * d, k, replace=False)] = True
    return Y, mask.reshape(d, d)


@pytest.mark.parametrize("reg", [0.0, 1e-3])
def test_batched_row_solves_equal_one_row_at_a_time(reg):
    rng = np.random.default_rng(0)
    Y = torch.from_numpy(rng.standard_normal((50, 40)))
    m = torch.from_numpy(rng.random((50, 40)) < 0.3)
    m[3], m[4] = False, True                         # a row with nothing observed, a fully observed one
    A = rng.standard_normal((40, 5))
    P = torch.from_numpy(A @ A.T)                    # rank 5: singular blocks, the pseudo-inverse path
    ref = L._predict_rowwise(Y, m, P, reg, True)
    for chunk in (2 ** 24, 500):                     # one batch, and many small chunks
        np.testing.assert_allclose(L._predict(Y, m, P, reg, True, max_elements=chunk), ref, atol=1e-9)
    assert torch.all(L._predict(Y, m, P, reg)[3] == 0)


@pytest.mark.parametrize("p", [1.0, 0.0, -1.0])
def test_irls_completion_without_smoothing_is_lin_rfm_at_the_matched_power(p):
    Y, mask = _low_rank(d=20, r=2, ratio=3.0)
    a = L.irls_completion(Y, mask, iters=4, p=p, eps=0.0, eps_min=0.0)
    b = L.lin_rfm_completion(Y, mask, iters=4, alpha=L.irls_p_to_alpha(p), reg=0.0, svd_free=False)
    np.testing.assert_allclose(a["Y"], b["Y"], atol=1e-7)


def test_completion_recovers_low_rank_where_controls_fail():
    Y, mask = _low_rank()
    res = L.lin_rfm_completion(Y, mask, iters=150, Y_eval=Y)
    assert res["eval_error"][0] == pytest.approx(1.0)          # iteration 0 fills zeros
    assert res["eval_error"][-1] < 1e-4
    nuc = L.lin_rfm_completion(Y, mask, iters=150, alpha=0.25, svd_free=False, Y_eval=Y)
    assert nuc["eval_error"][-1] > 10 * res["eval_error"][-1]
    assert len(res["time"]) == len(res["metric_time"]) == 151 and res["metric_time"][-1] <= res["time"][-1]


def test_holdout_stopping_never_reads_unobserved_entries():
    Y, mask = _low_rank(seed=1)
    Y_nan = np.where(mask, Y, np.nan)
    a = L.lin_rfm_completion(Y_nan, mask, iters=50, holdout=0.1, patience=10, seed=0)
    b = L.lin_rfm_completion(np.where(mask, Y, 1e6), mask, iters=50, holdout=0.1, patience=10, seed=0)
    np.testing.assert_array_equal(a["Y"], b["Y"])
    assert a["iteration"] == int(np.nanargmin(a["holdout_error"]))


def test_problem_generators():
    from rfm.data import low_rank_completion, sparse_regression
    X, y, w = sparse_regression(20, 50, 4, generator=2)
    assert X.shape == (20, 50) and int((w != 0).sum()) == 4
    torch.testing.assert_close(y, X @ w)
    torch.testing.assert_close(sparse_regression(20, 50, 4, generator=2)[2], w)
    Y, mask = low_rank_completion(30, 3, 200, n_rows=25, generator=1)
    assert Y.shape == mask.shape == (25, 30) and int(mask.sum()) == 200 and mask.dtype == torch.bool
    assert int(torch.linalg.matrix_rank(Y)) == 3 and float(torch.linalg.norm(Y)) == pytest.approx(30.0)
    with pytest.raises(ValueError, match="rank"):
        low_rank_completion(5, 6, 3)
    with pytest.raises(ValueError, match="exceeds"):
        low_rank_completion(5, 1, 26)
    with pytest.raises(ValueError, match="do not fit"):
        sparse_regression(5, 3, 4)


def test_plateau_ridge_waits_for_the_held_out_error_and_needs_a_holdout():
    ridge = L._PlateauRidge(0.1, 0.5, 1e-3, patience=2)
    assert ridge(0, None) == 0.1
    assert [ridge(t, e) for t, e in enumerate([1.0, 0.5, 0.5, 0.5], 1)] == [0.1, 0.1, 0.1, 0.05]   # 2 stalls: lower
    assert ridge(5, 0.49) == 0.05 and ridge(6, 0.2) == 0.05             # progress (from the reset best) keeps it
    Y, mask = _low_rank()
    with pytest.raises(ValueError, match="holdout"):
        L.lin_rfm_completion(Y, mask, reg_schedule="plateau")
    with pytest.raises(ValueError, match="reg_schedule"):
        L.lin_rfm_completion(Y, mask, reg_schedule="cosine")
    res = L.lin_rfm_completion(Y, mask, iters=150, reg=0.05, reg_decay=0.3, reg_schedule="plateau", holdout=0.1,
                               Y_eval=Y)
    assert res["eval_error"][res["iteration"]] < 1e-3 < res["eval_error"][0]


def test_switch_ridge_is_the_authors_rule_once_and_for_good():
    ridge = L._SwitchRidge(0.05, 1e-3, 0.1, "holdout")
    assert ridge(0, None) == 0.05 and ridge(1, 0.4) == 0.05            # 0.4^2 = 0.16 > 0.1: keep
    assert ridge(2, 0.3) == 1e-3 and ridge.switched_at == 2             # 0.09 < 0.1: switch
    assert ridge(3, 0.9) == 1e-3                                        # for good
    Y, mask = _low_rank()
    with pytest.raises(ValueError, match="holdout"):
        L.lin_rfm_completion(Y, mask, reg_schedule="switch")
    with pytest.raises(ValueError, match="Y_eval"):
        L.lin_rfm_completion(Y, mask, reg_schedule="switch", switch_on="eval")
    for how, kw in (("eval", {}), ("holdout", dict(holdout=0.1))):
        res = L.lin_rfm_completion(Y, mask, iters=150, reg=0.05, reg_min=1e-3, reg_schedule="switch", switch_on=how,
                                   Y_eval=Y, **kw)
        errs = res["holdout_error"] if how == "holdout" else res["eval_error"]
        t = res["switched_at"]
        assert t is not None and errs[t - 1] ** 2 < 0.1 <= min(e ** 2 for e in errs[:t - 1])
        assert res["eval_error"][res["iteration"]] < 1e-2 < res["eval_error"][0]


def test_lin_rfm_regressor_is_lin_rfm_sparse_with_agop_power_twice_alpha():
    from rfm.models.linear import LinRFMRegressor

    rng = np.random.default_rng(3)
    X = rng.standard_normal((15, 30))
    w = np.zeros(30)
    w[[2, 11]] = [1.5, -1.0]
    model = LinRFMRegressor(iters=30, agop_power=0.5).fit(X, X @ w)
    ref, path = L.lin_rfm_sparse(X, X @ w, iters=30, alpha=0.25, return_path=True)
    assert np.array_equal(model.coef_, ref) and np.array_equal(model.path_, path)
    np.testing.assert_allclose(model.predict(X), X @ w, atol=1e-10)
    two = LinRFMRegressor(iters=30, agop_power=0.5).fit(X, np.stack([X @ w, -(X @ w)], 1))
    np.testing.assert_array_equal(two.coef_[0], ref)
    assert two.predict(X).shape == (15, 2)
