"""Normalised ascent on a sphere (rfm.nets.saddle.SphereAscent), on known answers."""
import math

import torch

from rfm.nets.saddle import SphereAscent
from rfm.nets.training import fit


def test_sphere_ascent_finds_the_maximiser_of_a_linear_objective_on_the_sphere():
    # max <a, w> over ||w|| = 1 is a / ||a||; the angle to it shrinks by about 1 / (1 + lr) a step; ||w|| stays 1
    a = torch.tensor([3.0, 4.0], dtype=torch.float64)
    w = torch.tensor([1.0, 0.0], dtype=torch.float64, requires_grad=True)
    norms = []
    fit(SphereAscent([w], lr=0.5), lambda t: a @ w, 100, callback=lambda t, v: norms.append(float(w.detach().norm())),
        diverged=None)
    torch.testing.assert_close(w.detach(), a / 5, rtol=0, atol=1e-12)
    assert all(math.isclose(n, 1.0, abs_tol=1e-15) for n in norms)


def test_one_sphere_ascent_step_by_hand():
    w = torch.tensor([0.6, 0.8], dtype=torch.float64, requires_grad=True)
    opt = SphereAscent([w], lr=0.1)
    (w[0] * 2.0).backward()                         # gradient (2, 0), normalised (1, 0)
    opt.step()
    expected = torch.tensor([0.7, 0.8], dtype=torch.float64)
    torch.testing.assert_close(w.detach(), expected / expected.norm(), rtol=0, atol=1e-15)


def test_layer_top_ratios_of_known_matrices():
    from rfm.nets import MLP
    from rfm.nets.saddle import layer_top_ratios
    net = MLP(3, [3], 2, activation="relu", bias=False, dtype="float64", generator=0)
    with torch.no_grad():
        net.layers[0].weight.copy_(torch.diag(torch.tensor([4.0, -2.0, 1.0], dtype=torch.float64)))
        net.layers[1].weight.copy_(torch.tensor([[1.0, 0, 0], [0, 0, 0]], dtype=torch.float64))  # rank one
    r = layer_top_ratios(net)
    assert float(r[0]) == 2.0 and math.isinf(float(r[1]))


def test_escape_direction_records_ratios_aligned_with_the_objective():
    # a deep linear network: the recorded ratios start at the starting point's, end at the final model's, and
    # the objective history has one entry per recorded row (row t and entry t: after t steps)
    from rfm.nets import MLP
    from rfm.nets.saddle import escape_direction, layer_top_ratios
    g = torch.Generator().manual_seed(0)
    X = torch.randn(100, 5, generator=g, dtype=torch.float64)
    Y = X @ torch.randn(5, 3, generator=g, dtype=torch.float64)
    net = MLP(5, [4, 4], 3, activation="linear", bias=False, dtype="float64", generator=1)
    start = net.layers[0].weight.detach().clone()
    r = escape_direction(net, X, Y, steps=40, lr=0.5, restarts=1, generator=2, record_ratios=True)
    assert r["ratios"].shape == (41, 3) and len(r["objective"]) == 41
    s0 = torch.linalg.svdvals(start)
    torch.testing.assert_close(r["ratios"][0, 0], s0[0] / s0[1])
    torch.testing.assert_close(r["ratios"][-1], layer_top_ratios(r["model"]))
    # the escape of a linear network is rank one in every layer: the ratios grow without bound
    assert bool((r["ratios"][-1] > 1e3).all()) and bool((r["ratios"][0] < 10).all())


def _positive_two_layer():
    # a bias-free 2-layer ReLU network whose hidden pre-activations are all positive on positive data: linear there
    from rfm.nets import MLP
    net = MLP(3, [4], 2, activation="relu", bias=False, dtype="float64", generator=0)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        net.layers[0].weight.copy_(torch.rand(4, 3, generator=g, dtype=torch.float64) + 0.1)
        net.layers[1].weight.copy_(torch.rand(2, 4, generator=g, dtype=torch.float64) - 0.5)
    X = torch.rand(5, 3, generator=g, dtype=torch.float64) + 0.1
    Y = torch.rand(5, 2, generator=g, dtype=torch.float64)
    return net, X, Y


def test_gd_layer_spectra_one_gradient_step_by_hand():
    from rfm.nets.saddle import gd_layer_spectra
    net, X, Y = _positive_two_layer()
    W1, W2 = (lin.weight.detach().clone() for lin in net.layers)
    lr = 0.3
    out = gd_layer_spectra(net, X, Y, torch.optim.SGD(net.parameters(), lr=lr), steps=1, record_every=1, top=3)
    # L = mean over n x c of (X W1^T W2^T - Y)^2 (linear here): the gradients in closed form
    H = X @ W1.T
    R = H @ W2.T - Y
    c = 2.0 / R.numel()
    G2, G1 = c * R.T @ H, c * (R @ W2).T @ X
    E1, E2 = W1 - lr * G1, W2 - lr * G2
    assert out["steps"] == [0, 1]
    torch.testing.assert_close(out["weights"][0][0], W1, rtol=0, atol=0)
    torch.testing.assert_close(out["weights"][1][0], E1, rtol=0, atol=1e-14)
    torch.testing.assert_close(out["weights"][1][1], E2, rtol=0, atol=1e-14)
    assert math.isclose(out["loss"][0], float(R.square().mean()), rel_tol=1e-13)
    assert math.isclose(out["loss"][1], float((X @ E1.T @ E2.T - Y).square().mean()), rel_tol=1e-13)
    # the top-3 singular values of each layer; the 2 x 4 output layer has two, padded with NaN
    assert out["sv"].shape == (2, 2, 3)
    torch.testing.assert_close(out["sv"][1, 0], torch.linalg.svdvals(E1)[:3], rtol=0, atol=1e-14)
    torch.testing.assert_close(out["sv"][1, 1, :2], torch.linalg.svdvals(E2), rtol=0, atol=1e-14)
    assert math.isnan(float(out["sv"][1, 1, 2]))


def test_gd_layer_spectra_normalised_steps_have_fixed_length_and_records_every_k():
    from rfm.nets.optim import SLO
    from rfm.nets.saddle import gd_layer_spectra
    net, X, Y = _positive_two_layer()
    out = gd_layer_spectra(net, X, Y, SLO(net.parameters(), lr=0.01), steps=7, record_every=3)
    assert out["steps"] == [0, 3, 6, 7]
    # one parameter group, eps = 0: each step moves the whole parameter vector by exactly lr
    flat = [torch.cat([W.flatten() for W in ws]) for ws in out["weights"]]
    assert math.isclose(float((flat[3] - flat[2]).norm()), 0.01, rel_tol=1e-12)
    assert out["loss"][-1] < out["loss"][0]


def test_gd_layer_spectra_rejects_a_network_with_biases():
    import pytest

    from rfm.nets import MLP
    from rfm.nets.saddle import gd_layer_spectra
    net = MLP(3, [4], 2, bias=True, dtype="float64", generator=0)
    X, Y = torch.ones(5, 3, dtype=torch.float64), torch.zeros(5, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="bias-free"):
        gd_layer_spectra(net, X, Y, torch.optim.SGD(net.parameters(), lr=0.1), steps=1)
