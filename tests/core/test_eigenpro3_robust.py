"""EigenPro 3 after feature updates: the centres' kernel factored robustly (the jitter recorded), and default centres
that learn."""
import pytest
import torch

import rfm
from rfm.core.eigenpro import EP3_MAX_CENTRES, EigenPro3Solver, centre_factor


def test_centre_factor_raises_the_jitter_until_cholesky_succeeds_and_records_it():
    g = torch.Generator().manual_seed(0)
    Z = torch.randn(50, 3, generator=g, dtype=torch.float64)
    Z[10] = Z[4]  # a repeated centre: K(Z, Z) is singular, Cholesky without jitter fails
    f = centre_factor(rfm.GaussianKernel(5.0), Z, jitter=0.0)
    assert f.tries >= 2 and f.jitter > 0
    K = rfm.kernel_matrix(rfm.GaussianKernel(5.0), Z)
    torch.testing.assert_close(f.L @ f.L.T, K + f.jitter * torch.eye(50, dtype=torch.float64), rtol=1e-9,
                               atol=1e-9)
    ok = centre_factor(rfm.LaplaceKernel(3.0), Z[:10], jitter=1e-7)
    assert ok.tries == 1


def test_default_centres_are_all_points_up_to_the_cap():
    s = EigenPro3Solver()
    assert s.n_centres(2000) == 2000 and s.n_centres(10**6) == EP3_MAX_CENTRES
    assert EigenPro3Solver(centers=0.1).n_centres(2000) == 200 and EigenPro3Solver(centers=300).n_centres(200) == 200


def test_eigenpro3_default_learns_after_feature_updates_where_ten_percent_centres_did_not():
    g = torch.Generator().manual_seed(1)
    X = torch.randn(700, 8, generator=g)
    y = X[:, 0] * X[:, 1]
    Xt, yt = X[500:], y[500:]
    X, y = X[:500], y[:500]
    fit = lambda s: rfm.RFMRegressor(iters=2, bandwidth=5.0, reg=1e-3, solver=s).fit(X, y)
    m = fit(EigenPro3Solver(epochs=5))
    few = fit(EigenPro3Solver(centers=0.1, epochs=5))
    mse = lambda est: float((est.predict(Xt).ravel() - yt).square().mean())
    assert all("ep_jitter" in h for h in m.history_) and m.history_[-1]["ep_centres"] == 500
    assert mse(m) < 0.5 * mse(few)
    assert mse(m) < 0.5 * float(yt.var())


def test_centres_is_a_deprecated_alias_of_centers():
    with pytest.warns(DeprecationWarning, match="renamed .*centers"):
        old = EigenPro3Solver(centres=0.1)
    assert old.centers == EigenPro3Solver(centers=0.1).centers == 0.1
    assert old.n_centres(2000) == EigenPro3Solver(centers=0.1).n_centres(2000) == 200
