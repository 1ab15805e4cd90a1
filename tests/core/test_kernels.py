"""Kernels, feature-matrix forms and closed-form input gradients, against float64 references and autograd."""
import pytest
import torch
from _reference import jacobian_ref, kernel_ref, predictor_ref, random_psd

import rfm
from rfm import FeatureMatrix

KERNELS = [
    ("laplace", dict(bandwidth=2.0, exponent=1.0)),
    ("laplace", dict(bandwidth=2.0, exponent=0.7)),
    ("laplace", dict(bandwidth=2.0, exponent=1.5)),
    ("gaussian", dict(bandwidth=1.5)),
    ("polynomial", dict(degree=3, c=1.0, bandwidth=2.0)),
    ("quadratic", dict(bandwidth=1.0)),
]
FORMS = ["identity", "full", "diag", "factor"]


def _feature_matrix(form, d, g):
    """(FeatureMatrix, dense M for the reference)."""
    if form == "identity":
        return FeatureMatrix.identity(d), None
    if form == "full":
        M = random_psd(d, generator=g)
        return FeatureMatrix.full(M), M
    if form == "diag":
        m = torch.rand(d, generator=g, dtype=torch.float64) + 0.1
        return FeatureMatrix.diag(m), m
    F = torch.randn(d, 2, generator=g, dtype=torch.float64)
    return FeatureMatrix.factor(F), F @ F.T


def _data(n=12, m=5, d=4, c=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    Z = torch.randn(m, d, generator=g, dtype=torch.float64)
    alpha = torch.randn(n, c, generator=g, dtype=torch.float64)
    return X, Z, alpha, g


@pytest.mark.parametrize("name,params", KERNELS)
@pytest.mark.parametrize("form", FORMS)
def test_kernel_matrix_matches_reference(name, params, form):
    X, Z, _, g = _data()
    fm, M = _feature_matrix(form, X.shape[1], g)
    K = rfm.get_kernel(name, **params).matrix(X, Z, fm)
    torch.testing.assert_close(K, kernel_ref(name, X, Z, M, **params), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,params", KERNELS)
@pytest.mark.parametrize("form", FORMS)
def test_closed_form_gradient_matches_autograd_at_new_and_training_points(name, params, form):
    X, Z, alpha, g = _data()
    fm, M = _feature_matrix(form, X.shape[1], g)
    points = torch.cat([Z, X[:4]])  # the last four are centers: their self-pair is excluded by index
    G = rfm.kernel_gradients(rfm.get_kernel(name, **params), X, alpha, points, fm)
    ref = jacobian_ref(predictor_ref(name, X, alpha, M, **params), points)
    torch.testing.assert_close(G, ref, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name,params", KERNELS)
def test_prediction_backward_is_the_closed_form_gradient(name, params):
    X, Z, alpha, g = _data()
    fm, M = _feature_matrix("full", X.shape[1], g)
    kernel = rfm.get_kernel(name, **params)
    points = torch.cat([Z, X[:3]]).requires_grad_(True)
    out = rfm.KernelMachine(kernel, X, alpha, fm).predict(points)
    torch.testing.assert_close(out, predictor_ref(name, X, alpha, M, **params)(points.detach()), rtol=1e-10,
                               atol=1e-12)
    w = torch.randn(out.shape, dtype=out.dtype, generator=g)
    (grad,) = torch.autograd.grad((out * w).sum(), points)
    ref = torch.einsum("mc,mcd->md", w, jacobian_ref(predictor_ref(name, X, alpha, M, **params), points.detach()))
    torch.testing.assert_close(grad, ref, rtol=1e-9, atol=1e-11)


def test_the_three_forms_of_the_same_matrix_give_the_same_kernel():
    X, Z, _, g = _data(d=5)
    m = torch.rand(5, generator=g, dtype=torch.float64)
    F = torch.randn(5, 5, generator=g, dtype=torch.float64)
    k = rfm.LaplaceKernel(bandwidth=3.0)
    torch.testing.assert_close(k(X, Z, FeatureMatrix.diag(m)), k(X, Z, FeatureMatrix.full(torch.diag(m))))
    torch.testing.assert_close(k(X, Z, FeatureMatrix.factor(F)), k(X, Z, FeatureMatrix.full(F @ F.T)))
    torch.testing.assert_close(k(X, Z, m), k(X, Z, FeatureMatrix.diag(m)))  # a vector is read as a diagonal


def test_duplicate_training_points_get_the_convention_gradient_not_nan():
    X, _, alpha, _ = _data()
    X = torch.cat([X, X[:2]])  # exact duplicates of two centers
    alpha = torch.cat([alpha, alpha[:2]])
    G = rfm.kernel_gradients(rfm.LaplaceKernel(bandwidth=1.0), X, alpha, X[:3])
    assert torch.isfinite(G).all()
    ref = jacobian_ref(predictor_ref("laplace", X, alpha, bandwidth=1.0), X[:3])
    torch.testing.assert_close(G, ref, rtol=1e-9, atol=1e-11)


def test_get_kernel_names_and_instances():
    assert isinstance(rfm.get_kernel("Laplace"), rfm.LaplaceKernel)
    k = rfm.GaussianKernel(bandwidth=2.0)
    assert rfm.get_kernel(k) is k
    assert rfm.get_kernel("quadratic").degree == 2
    assert rfm.get_kernel("laplace", bandwidth=3.0) == rfm.LaplaceKernel(bandwidth=3.0)


def test_coincident_pairs_finds_every_identical_row():
    from rfm.core.coincident import coincident_pairs, row_ids

    X = torch.tensor([[0.0, 1.0], [2.0, 3.0], [0.0, 1.0], [5.0, 5.0]])
    Z = torch.tensor([[5.0, 5.0], [0.0, 1.0], [9.0, 9.0]])
    rows, cols = coincident_pairs(*row_ids(Z, X))
    assert sorted(zip(rows.tolist(), cols.tolist())) == [(0, 3), (1, 0), (1, 2)]
    assert rows.tolist() == sorted(rows.tolist())
