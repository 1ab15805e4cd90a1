"""rfm.nets.dynamics: the linearised and quadratic models of a network, the empirical NTK, the closed-form two-layer
ReLU fast path, learning rates and the spike counter, against known answers (float64 autograd, exact algebra)."""
import math

import pytest
import torch
from torch import nn

from rfm.nets import MLP
from rfm.nets import dynamics as dyn


class TwoLayer(nn.Module):
    """The two-layer ReLU network of Zhu et al. in the NTK parametrisation, written with autograd-able ops only
    (an independent implementation for the closed forms)."""

    def __init__(self, U, v):
        super().__init__()
        self.U, self.v = nn.Parameter(U.clone()), nn.Parameter(v.clone())

    def forward(self, x):
        m, d = self.U.shape
        return (torch.relu(x @ self.U.T / math.sqrt(d)) @ self.v / math.sqrt(m))[:, None]


def _problem(d=3, m=16, n=5, seed=0):
    U0, v0 = dyn.two_layer_init(d, m, seed)
    g = torch.Generator().manual_seed(seed + 1)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = torch.randn(n, generator=g, dtype=torch.float64)
    dU = 0.3 * torch.randn(m, d, generator=g, dtype=torch.float64)
    dv = 0.3 * torch.randn(m, generator=g, dtype=torch.float64)
    return U0, v0, X, y, dU, dv


def _shift(model, deltas):
    with torch.no_grad():
        for p, dlt in zip(model.parameters(), deltas):
            p.add_(dlt)
    return model


def test_init_is_gaussian_and_signs():
    U, v = dyn.two_layer_init(4, 1000, 0)
    assert U.shape == (1000, 4) and v.shape == (1000,)
    assert set(v.tolist()) == {-1.0, 1.0}
    assert abs(float(U.std()) - 1) < 0.05
    U2, v2 = dyn.two_layer_init(4, 1000, 0)
    assert torch.equal(U, U2) and torch.equal(v, v2)


def test_nqm_equals_network_for_linear_activation():
    """A two-layer network with a linear activation is exactly quadratic in its parameters: NQM = network at any w,
    far from w_0; the linearisation is not."""
    net = MLP(3, [7], activation="linear", dtype="float64", generator=1)
    quad, lin = dyn.QuadraticModel(net), dyn.LinearizedModel(net)
    g = torch.Generator().manual_seed(2)
    deltas = [torch.randn(p.shape, generator=g, dtype=torch.float64) for p in net.parameters()]
    _shift(quad, deltas), _shift(lin, deltas), _shift(net, deltas)
    X = torch.randn(6, 3, generator=g, dtype=torch.float64)
    assert torch.allclose(quad(X), net(X), atol=1e-12)
    assert (lin(X) - net(X)).abs().max() > 1e-2


def test_generic_models_equal_relu_closed_form():
    U0, v0, X, y, dU, dv = _problem()
    net = TwoLayer(U0, v0)
    for kind, cls in (("quadratic", dyn.QuadraticModel), ("linear", dyn.LinearizedModel)):
        model = _shift(cls(net), [dU, dv])
        closed = dyn.two_layer_outputs(kind, U0 + dU, v0 + dv, U0, v0, X)
        assert torch.allclose(model(X)[:, 0], closed, atol=1e-13)
        # loss gradients: autograd through the jvp-built model against the closed form
        loss = 0.5 * ((model(X)[:, 0] - y) ** 2).mean()
        gU, gv = torch.autograd.grad(loss, list(model.parameters()))
        L, cU, cv = dyn.two_layer_gradients(kind, U0 + dU, v0 + dv, U0, v0, X, y)
        assert math.isclose(L, float(loss.detach()), rel_tol=1e-12)
        assert torch.allclose(gU, cU, atol=1e-13) and torch.allclose(gv, cv, atol=1e-13)
        assert torch.allclose(dyn.empirical_ntk(model, X), dyn.two_layer_ntk(kind, U0 + dU, v0 + dv, U0, v0, X),
                              atol=1e-12)
    moved = TwoLayer(U0 + dU, v0 + dv)
    assert torch.allclose(moved(X)[:, 0], dyn.two_layer_outputs("network", U0 + dU, v0 + dv, U0, v0, X), atol=1e-13)
    assert torch.allclose(dyn.empirical_ntk(moved, X), dyn.two_layer_ntk("network", U0 + dU, v0 + dv, U0, v0, X),
                          atol=1e-12)


def test_models_agree_at_initialisation():
    U0, v0, X, *_ = _problem()
    outs = [dyn.two_layer_outputs(k, U0, v0, U0, v0, X) for k in dyn.KINDS]
    kers = [dyn.two_layer_ntk(k, U0, v0, U0, v0, X) for k in dyn.KINDS]
    for o, K in zip(outs[1:], kers[1:]):
        assert torch.allclose(o, outs[0], atol=1e-14) and torch.allclose(K, kers[0], atol=1e-14)


def test_linearized_kernel_is_the_networks_at_init_everywhere():
    net = MLP(4, [12, 9], dtype="float64", generator=3)
    X = torch.randn(7, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    K0 = dyn.empirical_ntk(net, X)
    lin = dyn.LinearizedModel(net)
    assert torch.allclose(dyn.empirical_ntk(lin, X), K0, atol=1e-12)
    _shift(lin, [torch.ones_like(p) for p in lin.parameters()])      # far from w_0
    assert torch.allclose(dyn.empirical_ntk(lin, X), K0, atol=1e-12)
    quad = _shift(dyn.QuadraticModel(net), [torch.ones_like(p) for p in net.parameters()])
    assert (dyn.empirical_ntk(quad, X) - K0).abs().max() > 1e-3      # the NQM's kernel moves


def test_ntk_equals_finite_differences():
    net = MLP(3, [10], activation="tanh", dtype="float64", generator=5)
    X = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    J = dyn.parameter_jacobian(net, X)
    params = list(net.parameters())
    cols, h = [], 1e-6
    with torch.no_grad():
        for p in params:
            flat = p.view(-1)
            for i in range(flat.numel()):
                old = float(flat[i])
                flat[i] = old + h
                up = net(X)[:, 0].clone()
                flat[i] = old - h
                down = net(X)[:, 0].clone()
                flat[i] = old
                cols.append((up - down) / (2 * h))
    J_fd = torch.stack(cols, dim=1)
    assert torch.allclose(J, J_fd, atol=1e-7)
    assert torch.allclose(dyn.empirical_ntk(net, X), J_fd @ J_fd.T, atol=1e-6)


def test_linear_model_gd_converges_exactly_below_two_over_lambda():
    """GD on the linear model: r <- (I - eta K / n) r, so it converges iff eta < 2 / lambda_0 (tiny problem)."""
    U0, v0 = dyn.two_layer_init(2, 8, 7)
    g = torch.Generator().manual_seed(8)
    X = torch.randn(3, 2, generator=g, dtype=torch.float64)
    y = torch.randn(3, generator=g, dtype=torch.float64)
    lam0 = dyn.sharpness(dyn.two_layer_ntk("linear", U0, v0, U0, v0, X))
    below = dyn.two_layer_gd("linear", X, y, U0, v0, lr=dyn.lr_for_sharpness(0.98, lam0), steps=3000)
    above = dyn.two_layer_gd("linear", X, y, U0, v0, lr=dyn.lr_for_sharpness(1.02, lam0), steps=3000)
    assert not below["diverged"] and below["loss"][-1] < 1e-10 * below["loss"][0]
    assert above["diverged"]
    # the top eigen-direction of the residual grows by |1 - eta lambda_0| = 1.04 per step: exactly
    K = dyn.two_layer_ntk("linear", U0, v0, U0, v0, X)
    vals, vecs = dyn.top_ntk_eigen(K, 1)
    assert math.isclose(float(vals[0]) / 3, lam0, rel_tol=1e-12)
    eta = dyn.lr_for_sharpness(1.02, lam0)
    r = dyn.two_layer_outputs("linear", U0, v0, U0, v0, X) - y
    U, v = U0.clone(), v0.clone()
    for _ in range(5):
        _, gU, gv = dyn.two_layer_gradients("linear", U, v, U0, v0, X, y)
        U, v = U - eta * gU, v - eta * gv
    r5 = dyn.two_layer_outputs("linear", U, v, U0, v0, X) - y
    p = vecs[:, 0]
    assert math.isclose(float(p @ r5), float(p @ r) * (1 - eta * lam0) ** 5, rel_tol=1e-9)


def test_gd_matches_closed_form_gradients_and_records():
    U0, v0, X, y, *_ = _problem(n=6)
    lam0 = dyn.sharpness(dyn.two_layer_ntk("network", U0, v0, U0, v0, X))
    out = dyn.two_layer_gd("quadratic", X, y, U0, v0, lr=dyn.lr_for_sharpness(0.5, lam0), steps=4,
                           X_test=X, y_test=y, kernel_every=2, test_every=2)
    U, v = U0.clone(), v0.clone()
    for t in range(4):
        L, gU, gv = dyn.two_layer_gradients("quadratic", U, v, U0, v0, X, y)
        assert math.isclose(out["loss"][t], L, rel_tol=1e-12)
        U, v = U - dyn.lr_for_sharpness(0.5, lam0) * gU, v - dyn.lr_for_sharpness(0.5, lam0) * gv
    assert torch.allclose(out["U"], U) and torch.allclose(out["v"], v)
    assert [s for s, _ in out["sharpness"]] == [0, 2, 4] and [s for s, _ in out["test"]] == [0, 2, 4]
    assert math.isclose(out["test"][-1][1], out["loss"][-1], rel_tol=1e-12)   # test data = training data here


def test_sharpness_and_lr():
    K = torch.diag(torch.tensor([4.0, 1.0], dtype=torch.float64))
    assert dyn.sharpness(K) == 2.0
    assert dyn.lr_for_sharpness(1.5, 2.0) == 1.5
    vals, vecs = dyn.top_ntk_eigen(K, 2)
    assert vals.tolist() == [4.0, 1.0] and abs(float(vecs[0, 0])) == 1.0
    assert dyn.residual_in_top_eigenspace(K, [3.0, 4.0], 1) == pytest.approx(9 / 25)
    with pytest.raises(ValueError, match="lam"):
        dyn.lr_for_sharpness(1.0, 0.0)
    with pytest.raises(ValueError, match="square"):
        dyn.sharpness(torch.ones(2, 3))


def test_count_spikes():
    assert dyn.count_spikes([1.0, 0.5, 0.25, 0.1]) == 0                    # monotone
    assert dyn.count_spikes([1.0, 1.5, 0.9, 1.2, 0.5]) == 0                 # wiggles within the factor
    assert dyn.count_spikes([1.0, 0.5, 30.0, 100.0, 2.0, 0.4, 0.1]) == 1    # one catapult
    assert dyn.count_spikes([1.0, 0.5, 3.0, 0.4, 0.2, 5.0, 0.1]) == 2
    assert dyn.count_spikes([1.0, 3.0, 9.0, 27.0]) == 1                     # divergence: one spike that stays
    assert dyn.count_spikes([1.0, 0.5, float("inf")]) == 1
    assert dyn.count_spikes([1.0, 0.5, 3.0, 0.4], factor=10) == 0
    with pytest.raises(ValueError, match="factor"):
        dyn.count_spikes([1.0], factor=1.0)


def test_bad_inputs():
    U0, v0, X, y, *_ = _problem()
    with pytest.raises(ValueError, match="kind"):
        dyn.two_layer_outputs("cubic", U0, v0, U0, v0, X)
    with pytest.raises(ValueError, match="features"):
        dyn.two_layer_outputs("network", U0, v0, U0, v0, X[:, :2])
    with pytest.raises(TypeError, match="model"):
        dyn.QuadraticModel("not a module")
    with pytest.raises(ValueError, match="one output"):
        dyn.empirical_ntk(MLP(3, [4], d_out=2, dtype="float64"), X)
    with pytest.raises(ValueError, match="lr"):
        dyn.two_layer_gd("network", X, y, U0, v0, lr=-1.0, steps=3)
