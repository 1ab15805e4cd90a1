"""The kernel-machine core: KernelMachine against brute force, the one AGOP -> M map, the solver strategy, the
coincident-point and block helpers."""
import numpy as np
import pytest
import torch
from _reference import agop_ref, jacobian_ref, kernel_ref, predictor_ref, random_psd

import rfm
from rfm.core.coincident import coincident_pairs, find_pairs, row_ids, subset_pairs
from rfm.core.kernels import kernel_blocks
from rfm.core.solvers import DirectSolver, SolveResult


def _machine(n=40, d=5, c=3, seed=0, kernel="laplace", M="full", **kw):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    alpha = torch.randn(n, c, generator=g, dtype=torch.float64)
    Md = {"full": random_psd(d, generator=g), "identity": None}[M]
    return rfm.KernelMachine(rfm.get_kernel(kernel, bandwidth=2.0), X, alpha, Md, **kw), X, alpha, Md, g


@pytest.mark.parametrize("kernel", ["laplace", "gaussian", "quadratic"])
def test_machine_predictions_gradients_and_agop_equal_brute_force(kernel):
    f, X, alpha, M, g = _machine(kernel=kernel)
    Z = torch.cat([torch.randn(7, 5, generator=g, dtype=torch.float64), X[:3]])  # three points are centres
    ref = predictor_ref(kernel, X, alpha, M, bandwidth=2.0)
    torch.testing.assert_close(f.predict(Z), ref(Z), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(f.gradients(Z), jacobian_ref(ref, Z), rtol=1e-9, atol=1e-11)
    torch.testing.assert_close(f.agop(Z), agop_ref(ref, Z), rtol=1e-9, atol=1e-11)
    torch.testing.assert_close(f.agop(), agop_ref(ref, X), rtol=1e-9, atol=1e-11)


def test_machine_blocks_do_not_change_the_results():
    big, X, *_ = _machine(n=60)
    small = rfm.KernelMachine(big.kernel, X, big.alpha, big.fm, mem_bytes=2048)  # a few rows per block
    torch.testing.assert_close(big.predict(X), small.predict(X), rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(big.gradients(X), small.gradients(X), rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(big.agop(center=True), small.agop(center=True), rtol=1e-12, atol=1e-13)


def test_machine_agop_on_a_sample_equals_the_agop_of_that_sample():
    f, X, *_ = _machine(n=50)
    A = f.agop(max_points=20, generator=3)
    idx = torch.randperm(50, generator=torch.Generator().manual_seed(3))[:20]
    torch.testing.assert_close(A, f.agop(X[idx]), rtol=1e-12, atol=1e-13)


def test_machine_prediction_is_differentiable_and_the_estimator_uses_it():
    f, X, *_ = _machine()
    Z = X[:4].clone().requires_grad_(True)
    f.predict(Z).sum().backward()
    torch.testing.assert_close(Z.grad, f.gradients(X[:4]).sum(1), rtol=1e-10, atol=1e-12)
    model = rfm.RFMRegressor(iters=1, dtype="float64").fit(X.numpy(), X[:, 0].numpy())
    assert isinstance(model.machine_, rfm.KernelMachine)
    np.testing.assert_allclose(model.predict(X.numpy()), model.machine_.predict(X)[:, 0].numpy())
    torch.testing.assert_close(model.agop(), model.machine_.agop())


@pytest.mark.parametrize("power,normalize", [(1.0, "max"), (0.5, None), (0.5, "trace"), (2.0, "fro")])
def test_feature_matrix_from_agop_is_the_normalised_psd_power(power, normalize):
    A = random_psd(6, generator=torch.Generator().manual_seed(1))
    fm = rfm.feature_matrix_from_agop(A, power=power, normalize=normalize)
    evals, evecs = torch.linalg.eigh(A)
    ref = (evecs * evals.clamp_min(0) ** power) @ evecs.T
    scale = {None: 1.0, "max": ref.abs().max(), "trace": ref.trace(), "fro": ref.norm()}[normalize]
    torch.testing.assert_close(fm.dense(), ref / scale, rtol=1e-10, atol=1e-12)
    L = fm.sqrt_factor(torch.float64, "cpu")
    torch.testing.assert_close(L @ L.T, fm.dense(), rtol=1e-10, atol=1e-12)  # the same eigh gives the factor


def test_feature_matrix_from_agop_rank_and_diagonal():
    A = random_psd(6, generator=torch.Generator().manual_seed(2))
    fm = rfm.feature_matrix_from_agop(A, rank=2, normalize=None)
    assert fm.kind == "factor" and fm.data.shape == (6, 2)
    evals, evecs = torch.linalg.eigh(A)
    torch.testing.assert_close(fm.dense(), (evecs[:, -2:] * evals[-2:]) @ evecs[:, -2:].T, rtol=1e-10, atol=1e-12)
    d = rfm.feature_matrix_from_agop(A, diag=True, power=0.5, normalize="max")
    torch.testing.assert_close(d.data, A.diagonal().sqrt() / A.diagonal().sqrt().max())
    torch.testing.assert_close(rfm.feature_update(A, 0.5, "max"),
                               rfm.feature_matrix_from_agop(A, power=0.5, normalize="max").dense())


def test_direct_solver_equals_solve_krr_and_gives_training_predictions():
    f, X, *_ = _machine(n=30, c=2)
    Y = torch.randn(30, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    Xt = f.fm.transform(X)
    res = DirectSolver().solve(f.kernel, Xt, Y, 1e-2, pairs=find_pairs(X))
    alpha, method = rfm.solve_krr(rfm.kernel_matrix(f.kernel, X, fm=f.fm), Y, 1e-2)
    torch.testing.assert_close(res.alpha, alpha)
    assert res.method == method == "cholesky"
    g = rfm.KernelMachine(f.kernel, X, res.alpha, f.fm)
    torch.testing.assert_close(res.train_pred, g.predict(X), rtol=1e-8, atol=1e-10)


def test_a_solver_object_plugs_into_the_estimator():
    calls = []

    class Recording(DirectSolver):
        def solve(self, kernel, Xt, Y, reg, *, pairs=None, mem_bytes=None):
            calls.append(Xt.shape)
            res = super().solve(kernel, Xt, Y, reg, pairs=pairs, mem_bytes=mem_bytes)
            return SolveResult(res.alpha, "recording", None)

    X = np.random.default_rng(0).normal(size=(40, 3))
    model = rfm.RFMRegressor(iters=2, solver=Recording()).fit(X, X[:, 0])
    assert calls == [(40, 3)] * 3 and [r["solver"] for r in model.history_] == ["recording"] * 3
    ref = rfm.RFMRegressor(iters=2).fit(X, X[:, 0])
    np.testing.assert_allclose(model.predict(X), ref.predict(X), rtol=1e-5, atol=1e-6)


def test_kernel_blocks_build_the_kernel_matrix():
    _, X, _, M, _ = _machine(n=25)
    kernel = rfm.LaplaceKernel(2.0)
    fm = rfm.as_feature_matrix(M)
    Xt = fm.transform(X)
    K = torch.empty(25, 25, dtype=torch.float64)
    for sl, block in kernel_blocks(kernel, Xt, Xt, pairs=find_pairs(X), mem_bytes=1024):
        K[sl] = block
    torch.testing.assert_close(K, kernel_ref("laplace", X, X, M, bandwidth=2.0), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(K, kernel(X, M=M), rtol=1e-12, atol=1e-14)


def test_subset_pairs_equal_the_pairs_of_the_subset():
    X = torch.tensor([[0.0], [1.0], [0.0], [2.0], [1.0]])
    pairs = find_pairs(X)
    idx = torch.tensor([4, 0, 3])
    rows, cols = subset_pairs(pairs, idx, 5)
    ref_rows, ref_cols = coincident_pairs(row_ids(X)[0][idx], row_ids(X)[0])
    assert sorted(zip(rows.tolist(), cols.tolist())) == sorted(zip(ref_rows.tolist(), ref_cols.tolist()))


def test_fit_is_repeatable_and_batch_independent():
    X = np.random.default_rng(1).normal(size=(80, 4))
    y = X[:, 0] * X[:, 1]
    a = rfm.RFMRegressor(iters=2, max_agop_points=50, dtype="float64").fit(X, y)
    b = rfm.RFMRegressor(iters=2, max_agop_points=50, dtype="float64").fit(X, y)
    c = rfm.RFMRegressor(iters=2, max_agop_points=50, dtype="float64", mem_gb=1e-5).fit(X, y)
    torch.testing.assert_close(a.M_, b.M_, rtol=0, atol=0)
    torch.testing.assert_close(a.M_, c.M_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a.predict(X), c.predict(X), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("module", ["rfm.core.feature_matrix", "rfm.core.kernels", "rfm.core.machine", "rfm.core.agop",
                                    "rfm.core.direct", "rfm.models.estimators"])
def test_docstring_examples_run(module):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(module),
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("kernel", [rfm.LaplaceKernel(2.0), rfm.LaplaceKernel(2.0, exponent=0.7),
                                    rfm.LaplaceKernel(2.0, exponent=1.5), rfm.LaplaceKernel(2.0, exponent=2.0),
                                    rfm.GaussianKernel(1.5)])
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 2e-4)])
def test_agop_from_the_solves_kernel_matrix_equals_the_agop_from_distances(kernel, dtype, tol):
    """Radial kernels' gradient weights follow from their values: an AGOP computed from the K kept by the solve
    (no distance products) equals the usual one, duplicated rows and sampled points included."""
    g = torch.Generator().manual_seed(7)
    X = torch.randn(80, 6, generator=g, dtype=torch.float64)
    X[10] = X[4]
    f = rfm.KernelMachine(kernel, X.to(dtype), torch.randn(80, 2, generator=g, dtype=torch.float64).to(dtype),
                          random_psd(6, generator=g))
    K = rfm.kernel_matrix(kernel, f.centers_t, transformed=True, pairs=find_pairs(f.centers))
    pairs = find_pairs(f.centers)
    for kw in ({}, {"centre": True}, {"diag": True}, {"max_points": 30, "generator": 2}):
        ref = f.agop(pairs=pairs, **kw)
        torch.testing.assert_close(f.agop(pairs=pairs, K=K, **kw), ref, rtol=tol, atol=tol * float(ref.abs().max()))


def test_polynomial_kernels_ignore_a_kernel_matrix():
    g = torch.Generator().manual_seed(8)
    X = torch.randn(30, 4, generator=g, dtype=torch.float64)
    f = rfm.KernelMachine(rfm.QuadraticKernel(c=1.0), X, torch.randn(30, generator=g, dtype=torch.float64))
    K = rfm.kernel_matrix(f.kernel, X)
    torch.testing.assert_close(f.agop(K=K), f.agop())
    with pytest.raises(ValueError, match="can only be reused with Z=None"):
        f.agop(X[:3], K=K)


def test_book_root_is_the_repository_root():
    import rfm.book
    assert (rfm.book.ROOT / "_toc.yml").exists() and rfm.book.RESULTS == rfm.book.ROOT / "results"


def test_psd_power_zero_is_the_range_projector_for_a_diagonal_as_for_a_matrix():
    d = torch.tensor([2.0, 0.0, 0.5], dtype=torch.float64)
    assert torch.equal(rfm.psd_power(d, 0), torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64))
    assert torch.allclose(rfm.psd_power(torch.diag(d), 0), torch.diag(rfm.psd_power(d, 0)), atol=1e-12)
    assert torch.allclose(rfm.psd_power(d, 0.5), d.sqrt())
