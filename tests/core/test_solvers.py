"""Kernel ridge regression: blocked kernel matrices and the Cholesky solve with its fallbacks."""
import warnings

import pytest
import torch

import rfm
from rfm import FeatureMatrix


def _data(n=50, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=torch.float64), torch.randn(n, 2, generator=g, dtype=torch.float64)


def test_blocked_kernel_matrix_equals_one_block():
    X, _ = _data()
    fm = FeatureMatrix.diag(torch.linspace(0.1, 1.0, 4, dtype=torch.float64))
    k = rfm.LaplaceKernel(bandwidth=2.0)
    torch.testing.assert_close(rfm.kernel_matrix(k, X, fm=fm, mem_bytes=2048), rfm.kernel_matrix(k, X, fm=fm))
    torch.testing.assert_close(rfm.kernel_matrix(k, X, X[:7], fm=fm, mem_bytes=512), k.matrix(X, X[:7], fm))


def test_kernel_matrix_has_an_exact_unit_diagonal_in_float32():
    X, _ = _data(n=200, d=100)
    K = rfm.kernel_matrix(rfm.LaplaceKernel(bandwidth=1.0), X.float())
    assert torch.equal(K.diagonal(), torch.ones(200))


def test_cholesky_solve_matches_a_direct_solve():
    X, Y = _data()
    K = rfm.LaplaceKernel(bandwidth=2.0).matrix(X)
    alpha, method = rfm.solve_krr(K, Y, reg=1e-2)
    assert method == "cholesky"
    torch.testing.assert_close(alpha, torch.linalg.solve(K + 1e-2 * torch.eye(50, dtype=K.dtype), Y))


def test_zero_ridge_interpolates():
    X, Y = _data()
    K = rfm.GaussianKernel(bandwidth=1.0).matrix(X)
    alpha, _ = rfm.solve_krr(K, Y, reg=0.0)
    torch.testing.assert_close(K @ alpha, Y, rtol=1e-8, atol=1e-8)


def test_overwrite_adds_the_ridge_in_place():
    X, Y = _data()
    K = rfm.LaplaceKernel(bandwidth=2.0).matrix(X)
    K0 = K.clone()
    rfm.solve_krr(K, Y, reg=0.5, overwrite=True)
    torch.testing.assert_close(K, K0 + 0.5 * torch.eye(50, dtype=K.dtype))


def test_indefinite_system_falls_back_to_lu_with_a_warning():
    X, Y = _data()
    K = rfm.LaplaceKernel(bandwidth=2.0).matrix(X)
    K[0, 0] = -5.0  # no longer positive definite, still invertible
    with pytest.warns(RuntimeWarning, match="falling back from Cholesky to an LU solve"):
        alpha, method = rfm.solve_krr(K, Y, reg=0.0)
    assert method == "lu"
    torch.testing.assert_close(K @ alpha, Y)


def test_singular_system_falls_back_to_least_squares_with_a_warning():
    X, Y = _data()
    X = torch.cat([X, X[:1]])  # a duplicated point makes K singular at reg = 0
    Y = torch.cat([Y, Y[:1]])
    K = rfm.LaplaceKernel(bandwidth=2.0).matrix(X)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alpha, method = rfm.solve_krr(K, Y, reg=0.0)
    assert method in ("lu", "lstsq")
    assert any("positive definite" in str(w.message) for w in caught)
    torch.testing.assert_close(K @ alpha, Y, rtol=1e-6, atol=1e-6)


def test_bad_ridge_and_shapes_are_rejected():
    X, Y = _data()
    K = rfm.LaplaceKernel().matrix(X)
    with pytest.raises(ValueError, match="reg must be >= 0"):
        rfm.solve_krr(K, Y, reg=-1.0)
    with pytest.raises(ValueError, match="K must be square"):
        rfm.solve_krr(K[:, :10], Y)
    with pytest.raises(ValueError, match="Y must have shape .* got shape \\(3,"):
        rfm.solve_krr(K, Y[:3])
