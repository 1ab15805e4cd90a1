"""rfm.nets.parametrisation and rfm.selection.tuning against known answers."""
import math

import numpy as np
import pytest
import torch

from rfm.nets import parametrisation as P
from rfm.selection import tuning as T


def test_spectral_init_norm_matches_gaussian_edge():
    """||W||_2 of a Gaussian b x a matrix with entry std s is s (sqrt(a) + sqrt(b)) to within a few per cent."""
    net = P.make_mlp(400, [800, 800], 1, "spectral", generator=0, dtype="float64")
    for l, (a, b) in enumerate([(400, 800), (800, 800)]):
        s = P.init_std("spectral", a, b)
        assert P.spectral_norm(net.weight(l)) == pytest.approx(s * (math.sqrt(a) + math.sqrt(b)), rel=0.03)
    # the spectral condition: ||W_l||_2 = Theta(sqrt(fan_out / fan_in)), here within [1, 2] times it
    for l, (a, b) in enumerate([(400, 800), (800, 800), (800, 1)]):
        ratio = P.spectral_norm(net.weight(l)) / math.sqrt(b / a)
        assert 0.9 < ratio < 2.1


def test_schemes_init_and_lr():
    assert P.init_std("sp", 100, 10) == pytest.approx(0.1)
    assert P.init_std("mup", 100, 1, readout=True) == pytest.approx(0.01)
    assert P.init_std("spectral", 100, 25) == pytest.approx(0.1 * 0.5)   # 1/sqrt(a) * sqrt(b/a)
    assert P.init_std("mup", 100, 25) == pytest.approx(0.1)              # muP keeps 1/sqrt(fan_in) there
    assert P.lr_multiplier("ntp", 64, 8) == pytest.approx(1 / 64)
    assert P.lr_multiplier("mup", 64, 8) == pytest.approx(8 / 64)
    net = P.make_mlp(4, [16], 2, "mup", generator=0)
    groups = P.lr_groups(net, "mup", 0.5)
    assert [g["lr"] for g in groups] == pytest.approx([0.5 * 16 / 4, 0.5 * 2 / 16])
    with pytest.raises(ValueError, match="scheme"):
        P.make_mlp(4, [16], 1, "xavier")
    with pytest.raises(TypeError, match="scheme"):
        P.lr_groups(net, 3, 0.1)


def test_one_example_step_has_stable_rank_one():
    out = P.one_step_change(8, [32, 32], "spectral", 0.1, generator=3, updates=True)
    assert out["dW_stable_rank"] == pytest.approx([1.0, 1.0, 1.0], abs=1e-8)
    # rank one: the spectral norm equals the Frobenius norm
    assert all(s > 0 for s in out["dW_spectral"])


def test_stable_rank_values():
    assert P.stable_rank(torch.eye(5)) == pytest.approx(5.0)
    assert P.stable_rank(torch.outer(torch.arange(1.0, 4.0), torch.ones(3))) == pytest.approx(1.0)
    assert P.stable_rank(torch.zeros(3, 3)) == 0.0
    with pytest.raises(ValueError, match="matrix"):
        P.stable_rank(torch.ones(3))


def test_output_scaled_is_centred_and_scaled():
    net = P.make_mlp(3, [8], 1, "mup", generator=1, dtype="float64")
    X = torch.randn(5, 3, dtype=torch.float64)
    f = P.OutputScaled(net, gamma=4.0)
    assert torch.allclose(f(X), torch.zeros(5, 1, dtype=torch.float64))
    with torch.no_grad():
        net.layers[-1].weight.add_(1.0)
    delta = (net(X) - net.initial()(X)) / 4.0
    assert torch.allclose(f(X), delta)
    assert torch.allclose(P.OutputScaled(net, 2.0, center=False)(X), net(X) / 2.0)
    with pytest.raises(ValueError, match="gamma"):
        P.OutputScaled(net, 0.0)


def test_relative_feature_change():
    net = P.make_mlp(3, [8, 8], 1, "sp", generator=0, dtype="float64")
    X = torch.randn(4, 3, dtype=torch.float64)
    same = P.relative_feature_change(net, net.initial(), X)
    assert same == {"h1": 0.0, "h2": 0.0, "f": 0.0}
    other = P.make_mlp(3, [8, 8], 1, "sp", generator=0, dtype="float64")
    with torch.no_grad():
        other.layers[0].weight.mul_(2.0)       # relu is 1-homogeneous: h1 doubles
    assert P.relative_feature_change(net, other, X)["h1"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="architecture"):
        P.relative_feature_change(net, P.make_mlp(3, [4, 8], 1, "sp"), X)


@pytest.mark.parametrize("gamma", [0.05, 1.0, 20.0])
def test_toy_eta_max_depth_one_is_two_over_curvature(gamma):
    # f = (a - 1) / gamma, loss (f - 1)^2 / 2: curvature 1 / gamma^2, GD stable below 2 gamma^2
    assert P.toy_eta_max([gamma], 1, steps=3000)[0] == pytest.approx(2 * gamma ** 2, rel=0.01)


def test_toy_eta_max_scalings():
    small, large = np.array([0.01, 0.03, 0.1]), np.array([30.0, 100.0, 300.0])
    e = P.toy_eta_max(np.r_[small, large], 2, steps=2000, grid=200, refine=1)
    assert P.loglog_slope(small, e[:3]) == pytest.approx(2.0, abs=0.15)
    assert P.loglog_slope(large, e[3:]) == pytest.approx(1.0, abs=0.15)


def test_loglog_slope_and_the_deprecated_plateau():
    assert P.loglog_slope([1, 10, 100], [3, 300, 30000]) == pytest.approx(2.0)
    with pytest.warns(DeprecationWarning):
        assert P.plateau_fraction([1.0, 0.99, 0.97, 0.5, 0.1]) == pytest.approx(0.6)
    with pytest.raises(ValueError, match="positive"):
        P.loglog_slope([1, 2], [0, 1])


def test_mlp_eta_edge_small_run():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(32, 4, generator=g)
    y = X[:, :1].clone()
    out = P.mlp_eta_edge(lambda: P.OutputScaled(P.make_mlp(4, [16], 1, "mup", generator=1), 1.0), X, y,
                         lrs=[1e-3, 1e-1, 1e4], steps=20)
    assert out["final"][-1] == np.inf and np.isfinite(out["final"][:2]).all()
    assert out["eta_max"] == pytest.approx(1e-1) and out["eta_star"] == pytest.approx(1e-1)


def test_pareto_front_hand_made():
    c = [1, 2, 3, 4, 2, 5]
    v = [5, 3, 4, 1, 3, 1]
    assert T.pareto_front(c, v).tolist() == [0, 1, 3]
    # front (1,5), (2,3), (4,1), reference (5, 6): 1*1 + 2*3 + 1*5
    assert T.hypervolume(c, v, (5, 6)) == pytest.approx(12.0)
    assert T.hypervolume(c, v, (0.5, 6)) == 0.0


def test_hypervolume_brute_force():
    rng = np.random.default_rng(0)
    c, v = rng.uniform(0, 1, 15), rng.uniform(0, 1, 15)
    xs = (np.arange(400) + 0.5) / 400
    X, Y = np.meshgrid(xs, xs)
    dominated = ((c[None, None, :] <= X[..., None]) & (v[None, None, :] <= Y[..., None])).any(-1)
    assert T.hypervolume(c, v, (1, 1)) == pytest.approx(dominated.mean(), abs=5e-3)


def test_carbs_and_random_search():
    params = [T.Param("N", 1e6, 1e9, center=3e6), T.Param("D", 1e6, 1e10, center=1e7)]

    def objective(s):
        return float(T.chinchilla_loss(s["N"], s["D"])), 6 * s["N"] * s["D"]

    a = T.run_search(objective, params, 12, seed=1)
    b = T.run_search(objective, params, 12, seed=1)
    assert np.array_equal(a["values"], b["values"])
    for s in a["points"] + T.random_search(params, 20, seed=0):
        assert 1e6 <= s["N"] <= 1e9 and 1e6 <= s["D"] <= 1e10
    assert T.chinchilla_optimal_exponent() == pytest.approx(0.28 / 0.62)
    with pytest.raises(ValueError, match="high"):
        T.Param("x", 2.0, 1.0)
    with pytest.raises(ValueError, match="method"):
        T.run_search(objective, params, 3, method="grid")
