"""Preconditioned CG against the exact path: the kernel operator, RPCholesky, the Nystrom preconditioner, PCG, and
the whole RFM loop with solver="cg" against solver="cholesky"."""
import numpy as np
import pytest
import torch

import rfm
from rfm.core.auto import AutoSolver
from rfm.core.cg import CGSolver, KernelOperator, NystromPreconditioner, lanczos_condition, pcg, rpcholesky
from rfm.core.coincident import find_pairs


def _points(n=300, d=6, seed=0, dtype=torch.float64, duplicates=True):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=dtype)
    if duplicates:
        X[5] = X[3]  # a duplicated row: its distance to row 3 must be exactly 0
    return X


@pytest.mark.parametrize("store", [True, False])
@pytest.mark.parametrize("kernel", [rfm.LaplaceKernel(3.0), rfm.GaussianKernel(2.0), rfm.QuadraticKernel(c=1.0)])
def test_operator_products_columns_and_diagonal_equal_the_kernel_matrix(store, kernel):
    X = _points()
    pairs = find_pairs(X) if kernel.radial else None
    K = rfm.kernel_matrix(kernel, X)
    op = KernelOperator(kernel, X, pairs=pairs, store=store, mem_bytes=20_000)
    V = torch.randn(300, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(op.matmul(V), K @ V, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(op.matmul_accurate(V), K @ V, rtol=1e-12, atol=1e-12)
    idx = torch.tensor([3, 5, 0, 299])
    torch.testing.assert_close(op.columns(idx), K[:, idx], rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(op.diagonal(), K.diagonal(), rtol=1e-12, atol=1e-14)
    assert op.stored == store


def test_float32_accurate_products_accumulate_in_float64():
    X = _points(dtype=torch.float32)
    op = KernelOperator(rfm.LaplaceKernel(3.0), X, pairs=find_pairs(X))
    V = torch.randn(300, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    ref = op.K.to(torch.float64) @ V
    torch.testing.assert_close(op.matmul_accurate(V), ref, rtol=1e-12, atol=1e-12)


def test_rpcholesky_at_full_rank_reproduces_the_kernel():
    X = _points(n=120, duplicates=False)
    op = KernelOperator(rfm.LaplaceKernel(3.0), X, pairs=find_pairs(X))
    F, pivots = rpcholesky(op, 120, block=16, generator=0)
    torch.testing.assert_close(F @ F.T, op.K, rtol=1e-8, atol=1e-8)
    assert len(set(pivots.tolist())) == len(pivots)  # no pivot drawn twice


def test_rpcholesky_low_rank_error_falls_with_the_rank_and_is_seeded():
    X = _points(n=200)
    op = KernelOperator(rfm.GaussianKernel(3.0), X, pairs=find_pairs(X))
    errs = [float((op.K - F @ F.T).diagonal().sum()) for F, _ in (rpcholesky(op, k, generator=0) for k in (10, 40, 80))]
    assert errs[0] > errs[1] > errs[2] >= 0
    torch.testing.assert_close(rpcholesky(op, 30, generator=5)[0], rpcholesky(op, 30, generator=5)[0])


def test_nystrom_preconditioner_is_the_inverse_of_F_Ft_plus_reg():
    g = torch.Generator().manual_seed(3)
    F = torch.randn(50, 8, generator=g, dtype=torch.float64)
    P = NystromPreconditioner(F, 0.1)
    V = torch.randn(50, 2, generator=g, dtype=torch.float64)
    ref = torch.linalg.solve(F @ F.T + 0.1 * torch.eye(50, dtype=torch.float64), V)
    torch.testing.assert_close(P.apply(V), ref, rtol=1e-9, atol=1e-10)
    with pytest.raises(ValueError, match="needs reg > 0"):
        NystromPreconditioner(F, 0.0)


@pytest.mark.parametrize("rank", [0, 30])
def test_pcg_reaches_the_exact_solution_with_several_outputs(rank):
    X = _points()
    op = KernelOperator(rfm.LaplaceKernel(3.0), X, pairs=find_pairs(X))
    Y = torch.randn(300, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    precond = NystromPreconditioner(rpcholesky(op, rank)[0], 1e-2) if rank else None
    alpha, info = pcg(op, Y, 1e-2, precond=precond, tol=1e-11, maxiter=2000)
    exact, _ = rfm.solve_krr(op.K, Y, 1e-2)
    assert info.converged and info.relres <= 1e-11
    torch.testing.assert_close(alpha, exact, rtol=1e-8, atol=1e-9)
    R = Y - (op.K @ alpha + 1e-2 * alpha)
    torch.testing.assert_close(info.residual, R, rtol=1e-6, atol=1e-12)


def test_float32_pcg_converges_where_plain_float32_cg_stalls():
    """float32 products, a learnt-like ill-conditioned kernel (small bandwidth ratio, reg 1e-3): refinement on the
    float64-accumulated residual reaches 1e-4, and the answer matches the float64 exact solve."""
    X = _points(n=1500, d=10, seed=5, dtype=torch.float32, duplicates=False)
    op = KernelOperator(rfm.LaplaceKernel(4.0), X, pairs=find_pairs(X))
    Y = (X[:, 0] * X[:, 1])[:, None]
    precond = NystromPreconditioner(rpcholesky(op, 60)[0], 1e-3)
    alpha, info = pcg(op, Y, 1e-3, precond=precond, tol=1e-4, maxiter=1000)
    assert info.converged, info.relres
    exact, _ = rfm.solve_krr(op.K.double(), Y.double(), 1e-3)
    rel = float((alpha.double() - exact).norm() / exact.norm())
    assert rel < 2e-2  # alpha of a reg=1e-3 system: residual 1e-4 leaves a percent-level coefficient error


def test_cg_that_does_not_converge_warns_and_falls_back_or_says_it_is_inexact():
    X = _points(n=200)
    Y = X[:, :1] * X[:, 1:2]
    with pytest.warns(RuntimeWarning, match="falling back to a Cholesky solve"):
        res = CGSolver(tol=1e-12, rank=0, maxiter=2).solve(rfm.LaplaceKernel(3.0), X, Y, 1e-3, pairs=find_pairs(X))
    assert res.method == "cg->cholesky"
    with pytest.warns(RuntimeWarning, match="The solution is inexact"):
        res = CGSolver(tol=1e-12, rank=0, maxiter=2, store=False).solve(rfm.LaplaceKernel(3.0), X, Y, 1e-3,
                                                                        pairs=find_pairs(X))
    assert res.method == "cg" and res.info["cg_relres"] > 1e-12


def test_cg_needs_a_ridge():
    X = _points(n=50)
    with pytest.raises(ValueError, match="solver='cg' needs reg > 0"):
        rfm.RFMRegressor(iters=1, reg=0, solver="cg").fit(X, X[:, 0])


def _task(n, d=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n + 500, d, generator=g)
    y = X[:, 0] * X[:, 1]
    return X[:n], y[:n], X[n:], y[n:]


@pytest.mark.slow
@pytest.mark.parametrize("kernel,dtype", [("laplace", "float32"), ("laplace", "float64"), ("gaussian", "float32"),
                                          ("gaussian", "float64")])
def test_whole_rfm_loop_with_cg_matches_the_exact_float64_solve(kernel, dtype):
    """The issue's acceptance test: CG at tol 1e-4 over the whole loop keeps every iteration's validation MSE within
    1e-3 relative, and the final M within 1e-2, of the exact float64 Cholesky path (n = 1500, five updates). In
    float32 this is tighter than float32 Cholesky itself gets (1.3 % off for the Gaussian kernel, measured when
    this test was written): CG refines on a float64-accumulated residual."""
    X, y, Xv, yv = _task(1500)
    kw = dict(kernel=kernel, bandwidth=10.0 if kernel == "laplace" else 5.0, reg=1e-3, iters=5)
    ref = rfm.RFMRegressor(solver="cholesky", dtype="float64", **kw).fit(X.double(), y.double(), Xv.double(),
                                                                          yv.double())
    cg = rfm.RFMRegressor(solver=CGSolver(tol=1e-4, rank=150), dtype=dtype, **kw).fit(X, y, Xv, yv)
    for a, b in zip(ref.history_, cg.history_):
        assert abs(a["val_mse"] - b["val_mse"]) <= 1e-3 * a["val_mse"]
        assert b["cg_relres"] <= 1e-4
    dM = float((cg.history_[-1]["M"] - ref.history_[-1]["M"]).norm() / ref.history_[-1]["M"].norm())
    assert dM < 1e-2


def test_several_outputs_through_the_classifier():
    X, y, Xv, yv = _task(600)
    labels = (torch.bucketize(y, torch.tensor([-0.5, 0.5]))).numpy()
    a = rfm.RFMClassifier(iters=2, solver="cholesky", dtype="float64").fit(X.double(), labels)
    b = rfm.RFMClassifier(iters=2, solver=CGSolver(tol=1e-8), dtype="float64").fit(X.double(), labels)
    np.testing.assert_allclose(b.decision_function(Xv.double()).numpy(), a.decision_function(Xv.double()).numpy(),
                               rtol=1e-4, atol=1e-6)


def test_inexact_training_predictions_include_the_residual():
    X, y, *_ = _task(400)
    model = rfm.RFMRegressor(iters=0, solver=CGSolver(tol=1e-2, rank=0), dtype="float64").fit(X.double(), y.double())
    measured = float((model.predict(X.double()) - y.double()).square().mean())
    assert abs(model.history_[0]["train_mse"] - measured) <= 1e-9 * max(measured, 1e-12) + 1e-12


def test_auto_picks_cholesky_for_small_problems_and_interpolation_and_cg_above_the_crossover():
    auto = AutoSolver()
    assert auto.choose(1000, 1e-3, "cpu") == "cholesky"
    assert auto.choose(50_000, 1e-3, "cpu") == "cg"
    assert auto.choose(50_000, 0.0, "cpu") == "cholesky"
    assert AutoSolver(crossover=10).choose(100, 1e-3, "cpu") == "cg"
    X, y, *_ = _task(200)
    assert rfm.RFMRegressor(iters=0).fit(X, y).history_[0]["solver"] == "cholesky"
    assert rfm.RFMRegressor(iters=0, solver=AutoSolver(crossover=100)).fit(X, y).history_[0]["solver"] == "cg"


def test_bad_input_to_the_cg_pieces_is_named():
    X = _points(n=20)
    with pytest.raises(TypeError, match="kernel must be an rfm.Kernel instance"):
        KernelOperator("laplace", X)
    with pytest.raises(TypeError, match="Xt must be a 2-D floating torch tensor"):
        KernelOperator(rfm.LaplaceKernel(), X[:, 0])
    op = KernelOperator(rfm.LaplaceKernel(), X)
    with pytest.raises(ValueError, match="Y must be a tensor of shape .* n = 20"):
        pcg(op, torch.ones(19, dtype=torch.float64), 1e-3)
    with pytest.raises(ValueError, match="Y contains NaN"):
        pcg(op, torch.full((20,), float("nan"), dtype=torch.float64), 1e-3)
    with pytest.raises(ValueError, match="rank must be <= 20"):
        rpcholesky(op, 21)
    with pytest.raises(ValueError, match="tol must be > 0"):
        CGSolver(tol=0)
    with pytest.raises(ValueError, match="crossover must be >= 0"):
        AutoSolver(crossover=-1)


def test_lanczos_condition_matches_numpy_cond_on_a_small_spd_matrix():
    g = np.random.default_rng(0)
    Q, _ = np.linalg.qr(g.standard_normal((60, 60)))
    evals = np.geomspace(1e-3, 1e2, 60)
    A = (Q * evals) @ Q.T
    est = lanczos_condition(torch.tensor(A), steps=60)
    assert est.cond == pytest.approx(np.linalg.cond(A), rel=1e-6)
    # with a ridge: the condition number of A + reg I
    est = lanczos_condition(torch.tensor(A), reg=0.5, steps=60)
    assert est.cond == pytest.approx(np.linalg.cond(A + 0.5 * np.eye(60)), rel=1e-8)


def test_lanczos_condition_with_few_steps_is_a_lower_bound_with_an_accurate_top():
    g = np.random.default_rng(1)
    Q, _ = np.linalg.qr(g.standard_normal((300, 300)))
    evals = np.geomspace(1e-4, 1.0, 300)
    A = torch.tensor((Q * evals) @ Q.T)
    est = lanczos_condition(A, steps=30)
    assert est.steps == 30
    assert est.lam_max == pytest.approx(1.0, rel=1e-3)
    assert est.lam_min >= 1e-4 * (1 - 1e-9) and est.cond <= 1e4 * (1 + 1e-9)


def test_lanczos_condition_of_a_kernel_operator_matches_the_dense_kernel():
    X = torch.randn(80, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    op = KernelOperator(rfm.LaplaceKernel(2.0), X, store=False)
    K = rfm.kernel_matrix(rfm.LaplaceKernel(2.0), X).numpy()
    est = lanczos_condition(op, reg=1e-3, steps=80)
    assert est.cond == pytest.approx(np.linalg.cond(K + 1e-3 * np.eye(80)), rel=1e-6)
