"""RFMRegressor against the RFM loop written out from its definition (tests/_reference.py: float64 dense solves,
kernel values from explicit differences, the AGOP by autograd), sharing no code with the package."""
import pytest
import torch
from _reference import agop_ref, kernel_ref, predictor_ref, rfm_ref

import rfm


def _task(n=60, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = X[:, 0] * X[:, 1] + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    return X, y


@pytest.mark.parametrize("power,centre", [(1.0, True), (1.0, False), (0.5, True)])
def test_rfm_regressor_iterates_equal_the_reference_loop(power, centre):
    X, y = _task()
    model = rfm.RFMRegressor(kernel="laplace", bandwidth=3.0, reg=1e-3, iters=3, agop_power=power, center=centre,
                             normalize="max", dtype="float64", solver="cholesky").fit(X, y)
    Ms, alphas = rfm_ref(X, y, 3, bandwidth=3.0, reg=1e-3, power=power, centre=centre, normalize="max")
    assert len(model.history_) == 4
    for t, record in enumerate(model.history_):
        torch.testing.assert_close(record["M"], Ms[t], rtol=1e-7, atol=1e-9)
    torch.testing.assert_close(model.alpha_.reshape(-1, 1), alphas[-1], rtol=1e-6, atol=1e-8)
    Z = torch.randn(7, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    ref = predictor_ref("laplace", X, alphas[-1], Ms[-1], bandwidth=3.0)
    torch.testing.assert_close(model.predict(Z).reshape(-1, 1), ref(Z), rtol=1e-7, atol=1e-9)


def test_closed_form_agop_of_a_fitted_model_equals_the_independent_autograd_agop():
    """The closed-form AGOP at training points (cusp term 0) and at new points, for a learned M != I."""
    X, y = _task()
    model = rfm.RFMRegressor(bandwidth=3.0, reg=1e-3, iters=2, dtype="float64").fit(X, y)
    f = predictor_ref("laplace", X, model.alpha_.reshape(len(X), -1), model.M_, bandwidth=3.0)
    Z = torch.cat([X[:10], torch.randn(10, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)])
    for centre in (False, True):
        torch.testing.assert_close(model.agop(Z, center=centre), agop_ref(f, Z, centre=centre), rtol=1e-9,
                                   atol=1e-11)
        torch.testing.assert_close(model.agop(center=centre), agop_ref(f, X, centre=centre), rtol=1e-9, atol=1e-11)


def test_reference_laplace_gradient_matches_the_hand_derivative():
    """The reference itself, against grad_z exp(-|z - x|_M / L) = -k (M (z - x)) / (L |z - x|_M) written out."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1, 4, generator=g, dtype=torch.float64)
    z = torch.randn(1, 4, generator=g, dtype=torch.float64)
    F = torch.randn(4, 4, generator=g, dtype=torch.float64)
    M = F @ F.T
    L = 2.0
    v = (z - x)[0]
    r = torch.sqrt(v @ M @ v)
    expected = -torch.exp(-r / L) * (M @ v) / (L * r)
    zz = z.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(kernel_ref("laplace", zz, x, M, bandwidth=L).sum(), zz)
    torch.testing.assert_close(grad[0], expected, rtol=1e-12, atol=1e-14)
    zz = x.clone().requires_grad_(True)   # at the cusp: gradient 0 by convention
    (grad,) = torch.autograd.grad(kernel_ref("laplace", zz, x, M, bandwidth=L).sum(), zz)
    assert bool((grad == 0).all())
