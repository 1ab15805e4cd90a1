"""The deep linear network baselines of lin-RFM (rfm.nets.linear), on known answers."""
import warnings

import numpy as np
import pytest
import torch

from rfm.nets import linear as NL


def _problem(n=30, d=80, s=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = np.zeros(d)
    w[rng.choice(d, s, replace=False)] = rng.standard_normal(s)
    return X, w, X @ w


def _low_rank(d=30, r=2, ratio=4.0, seed=0):
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal((d, r)) @ rng.standard_normal((r, d))
    Y *= d / np.linalg.norm(Y)
    k = int(ratio * r * (2 * d - r))
    mask = np.zeros(d * d, bool)
    mask[rng.choice(d * d, k, replace=False)] = True
    return Y, mask.reshape(d, d)


def test_deep_linear_depth_one_keeps_unobserved_entries_at_their_initial_values():
    # depth 1: the completion is the weight matrix itself and an unobserved entry gets no gradient
    Y, mask = _low_rank(d=12, r=1, ratio=3.0)
    untrained = NL.deep_linear_completion(Y, mask, depth=1, steps=0, seed=3)["Y"]
    res = NL.deep_linear_completion(Y, mask, depth=1, steps=2000, lr=1e-2, seed=3, Y_eval=Y)
    np.testing.assert_allclose(res["Y"][~mask], untrained[~mask], atol=1e-12)
    np.testing.assert_allclose(res["Y"][mask], Y[mask], atol=1e-3)
    assert res["train_error"][-1] < 1e-3 < res["train_error"][0]
    assert len(res["train_error"]) == len(res["eval_error"]) == len(res["time"]) == 2000 // 100 + 1


def test_deep_linear_is_seeded_and_torch_in_torch_out():
    Y, mask = _low_rank(d=10, r=1, ratio=3.0)
    a = NL.deep_linear_completion(Y, mask, steps=20, seed=1)
    b = NL.deep_linear_completion(torch.from_numpy(Y), torch.from_numpy(mask), steps=20, seed=1)
    assert isinstance(a["Y"], np.ndarray) and isinstance(b["Y"], torch.Tensor)
    np.testing.assert_allclose(a["Y"], b["Y"].numpy(), atol=1e-12)
    with pytest.raises(ValueError, match="depth"):
        NL.deep_linear_completion(Y, mask, depth=0)


def test_diagonal_network_depth_one_converges_to_the_minimum_norm_solution():
    # depth 1: w = u - v moves by gradient steps of a linear model from w = 0, which stay in the row space of X
    X, w, y = _problem(n=20, d=40, s=3)
    res = NL.diagonal_network_regression(X, y, depth=1, lr=0.05, steps=4000, w_true=w)
    np.testing.assert_allclose(res["w"], np.linalg.pinv(X) @ y, atol=1e-6)
    assert res["train_error"][-1] < 1e-6 < res["train_error"][0] == pytest.approx(1.0)


def test_diagonal_network_is_gradient_descent_on_u_and_v():
    # one step by hand: L = mean((X w - y)^2), w = u^2 - v^2, dL/du = 2 u g, dL/dv = -2 v g with g = 2 X^T r / n
    X, w, y = _problem(n=10, d=6, s=2)
    s, lr = 0.3, 0.01
    res = NL.diagonal_network_regression(X, y, depth=2, init_scale=s, lr=lr, steps=1)
    g = 2 * X.T @ (X @ np.zeros(6) - y) / len(y)
    u, v = s - lr * 2 * s * g, s + lr * 2 * s * g
    np.testing.assert_allclose(res["w"], u ** 2 - v ** 2, rtol=1e-12, atol=1e-15)


def test_diagonal_network_small_initialisation_beats_minimum_norm():
    X, w, y = _problem(n=40, d=100, s=4)
    res = NL.diagonal_network_regression(X, y, depth=2, init_scale=1e-3, lr=1e-2, steps=5000, w_true=w)
    min_norm = np.linalg.norm(np.linalg.pinv(X) @ y - w) / np.linalg.norm(w)
    assert res["eval_error"][-1] < 0.2 * min_norm
    b = NL.diagonal_network_regression(torch.from_numpy(X), torch.from_numpy(y), depth=2, steps=10)
    assert isinstance(b["w"], torch.Tensor)
    with pytest.raises(ValueError, match="depth"):
        NL.diagonal_network_regression(X, y, depth=0)


def test_the_old_rfm_models_linear_names_warn_and_are_the_same_functions():
    from rfm.models import linear as L
    for name in ("deep_linear_completion", "diagonal_network_regression"):
        with pytest.warns(DeprecationWarning, match=f"rfm.models.linear.{name} moved to rfm.nets.linear"):
            assert getattr(L, name) is getattr(NL, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        L.lin_rfm_sparse  # noqa: B018 (the names that stayed do not warn)


def test_train_tol_stops_at_the_first_record_at_or_below_it_and_says_so():
    X, w, y = _problem(n=20, d=40, s=3)
    full = NL.diagonal_network_regression(X, y, depth=1, lr=0.05, steps=4000, eval_every=50)
    res = NL.diagonal_network_regression(X, y, depth=1, lr=0.05, steps=4000, eval_every=50, train_tol=1e-3)
    k = res["steps"]
    assert res["converged"] is True and 0 < k < 4000 and k % 50 == 0
    assert res["train_residual"] == res["train_error"][-1] <= 1e-3 < res["train_error"][-2]
    assert len(res["train_error"]) == len(res["time"]) == k // 50 + 1
    # the first record of the uncapped run at or below the tolerance is the stopping point, with the same weights
    first = next(i for i, e in enumerate(full["train_error"]) if e <= 1e-3)
    assert first * 50 == k and full["train_error"][first] == res["train_residual"]
    # a cap too small to get there: all the steps, converged False, the residual above the tolerance
    short = NL.diagonal_network_regression(X, y, depth=1, lr=0.05, steps=100, eval_every=50, train_tol=1e-3)
    assert short["steps"] == 100 and short["converged"] is False and short["train_residual"] > 1e-3
    # without a tolerance: every step, converged None
    assert full["steps"] == 4000 and full["converged"] is None
    with pytest.raises(ValueError, match="train_tol"):
        NL.diagonal_network_regression(X, y, train_tol=0.0)


def test_train_tol_for_the_deep_linear_network_and_none_changes_nothing():
    Y, mask = _low_rank(d=12, r=1, ratio=3.0)
    res = NL.deep_linear_completion(Y, mask, depth=1, steps=2000, lr=1e-2, seed=3, Y_eval=Y, train_tol=1e-2)
    assert res["converged"] is True and res["steps"] < 2000 and res["train_residual"] <= 1e-2 < res["train_error"][-2]
    assert len(res["eval_error"]) == res["steps"] // 100 + 1
    # train_tol=None and a tolerance never reached give the same numbers, bit for bit
    a = NL.deep_linear_completion(Y, mask, depth=2, steps=300, seed=3, Y_eval=Y)
    b = NL.deep_linear_completion(Y, mask, depth=2, steps=300, seed=3, Y_eval=Y, train_tol=1e-300)
    assert np.array_equal(a["Y"], b["Y"]) and a["train_error"] == b["train_error"] and a["steps"] == b["steps"] == 300
    assert a["converged"] is None and b["converged"] is False
    X, w, y = _problem(n=10, d=20, s=2)
    c = NL.diagonal_network_regression(X, y, steps=300, w_true=w)
    e = NL.diagonal_network_regression(X, y, steps=300, w_true=w, train_tol=1e-300)
    assert np.array_equal(c["w"], e["w"]) and c["eval_error"] == e["eval_error"]


def test_diagonal_network_at_small_initialisation_interpolates_near_the_sparse_vector():
    # Woodworth et al. (2020): trained to interpolation, u^2 - v^2 from a small initialisation approaches the
    # minimum-l1 interpolant (here the sparse vector itself, checked by a linear programme); from a large one, a
    # dense interpolant
    from scipy.optimize import linprog
    X, w, y = _problem(n=16, d=32, s=2, seed=1)
    d = X.shape[1]
    lp = linprog(np.ones(2 * d), A_eq=np.hstack([X, -X]), b_eq=y, bounds=(0, None), method="highs")
    np.testing.assert_allclose(lp.x[:d] - lp.x[d:], w, atol=1e-8)
    small = NL.diagonal_network_regression(X, y, depth=2, init_scale=1e-3, lr=0.05, steps=20000, w_true=w,
                                           train_tol=1e-3)
    large = NL.diagonal_network_regression(X, y, depth=2, init_scale=0.3, lr=0.05, steps=20000, w_true=w,
                                           train_tol=1e-3)
    assert small["converged"] and large["converged"]
    assert small["eval_error"][-1] < 0.02 and large["eval_error"][-1] > 10 * small["eval_error"][-1]
