"""rfm.nets.catapults (multi-stage GD, mini-batch SGD, the two-layer network's AGOP) and the tangent-kernel facts the
catapult chapter rests on, against known answers: exact linear-model algebra, float64 autograd Hessians, rfm.agop,
and step-by-step equality with rfm.nets.dynamics.two_layer_gd."""
import math

import pytest
import torch
from torch import nn

import rfm
from rfm.nets import MLP
from rfm.nets import catapults as cat
from rfm.nets import dynamics as dyn


def _problem(d=4, m=32, n=12, seed=0):
    U0, v0 = dyn.two_layer_init(d, m, seed)
    g = torch.Generator().manual_seed(seed + 1)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = X[:, 0] * X[:, 1]
    return U0, v0, X, y


def test_ntk_of_a_linear_model_is_the_gram_matrix():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(9, 5, generator=g, dtype=torch.float64)
    lin = nn.Linear(5, 1, bias=False).double()
    K = dyn.empirical_ntk(lin, X)
    assert torch.allclose(K, X @ X.T, atol=1e-12)
    # sharpness = lambda_max(X X^T / n): the top eigenvalue of the Hessian X^T X / n of L = (1/2n)||X w - y||^2
    assert dyn.sharpness(K) == pytest.approx(float(torch.linalg.eigvalsh(X.T @ X / 9)[-1]), rel=1e-10)
    lin_b = nn.Linear(5, 1).double()                           # a bias adds the constant feature 1
    assert torch.allclose(dyn.empirical_ntk(lin_b, X), X @ X.T + 1, atol=1e-12)


def test_hessian_at_zero_residual_has_the_ntk_eigenvalues():
    """At zero residual the Hessian of L = (1/2n) sum r_i^2 is the Gauss-Newton matrix J^T J / n, whose nonzero
    eigenvalues are those of K / n = J J^T / n (float64 autograd Hessian of a small MLP)."""
    torch.manual_seed(0)
    net = MLP(3, [6], dtype="float64", generator=3)
    X = torch.randn(5, 3, dtype=torch.float64)
    with torch.no_grad():
        y = net(X)                                             # targets = outputs: zero residual
    names = [k for k, _ in net.named_parameters()]
    shapes = [p.shape for p in net.parameters()]
    w0 = torch.cat([p.detach().reshape(-1) for p in net.parameters()])

    def loss(w):
        params, i = {}, 0
        for k, s in zip(names, shapes):
            params[k] = w[i:i + s.numel()].reshape(s)
            i += s.numel()
        r = torch.func.functional_call(net, params, (X,)) - y
        return 0.5 * (r ** 2).sum() / X.shape[0]

    H = torch.autograd.functional.hessian(loss, w0)
    h = torch.linalg.eigvalsh(H)
    k = torch.linalg.eigvalsh(dyn.empirical_ntk(net, X)) / X.shape[0]
    top = h.flip(0)[:5]                                        # rank <= n = 5
    assert torch.allclose(top, k.flip(0), rtol=1e-8, atol=1e-12)
    assert float(h.flip(0)[5:].abs().max()) < 1e-10 * float(top[0])


def test_spike_counter_on_synthetic_sgd_curves():
    g = torch.Generator().manual_seed(0)
    t = torch.arange(400, dtype=torch.float64)
    base = torch.exp(-t / 60) * (1 + 0.2 * torch.rand(400, generator=g, dtype=torch.float64))   # noise < 2x
    assert dyn.count_spikes(base) == 0
    spiky = base.clone()
    for s in (50, 120, 300):                                   # three catapults: up 20x over 3 steps, then back
        spiky[s:s + 3] *= torch.tensor([3.0, 20.0, 4.0], dtype=torch.float64)
    assert dyn.count_spikes(spiky) == 3
    assert dyn.count_spikes(spiky, factor=50) == 0


def test_sgd_with_full_batches_is_gd():
    U0, v0, X, y = _problem()
    lam0 = dyn.sharpness(dyn.two_layer_ntk("network", U0, v0, U0, v0, X))
    lr = dyn.lr_for_sharpness(0.7, lam0)
    gd = dyn.two_layer_gd("network", X, y, U0, v0, lr=lr, steps=30)
    sgd = cat.two_layer_sgd(X, y, U0, v0, lr=lr, batch_size=X.shape[0], epochs=30, generator=1)
    assert sgd["steps"] == 30 and not sgd["diverged"]
    assert torch.allclose(torch.tensor(sgd["loss"]), torch.tensor(gd["loss"]), rtol=1e-12)
    assert torch.allclose(sgd["U"], gd["U"]) and torch.allclose(sgd["v"], gd["v"])


def test_sgd_step_is_the_minibatch_gradient_step():
    """One SGD step on batch B equals a GD step on (X[B], y[B]); epochs of ceil(n/b) steps; seeds repeat."""
    U0, v0, X, y = _problem(n=10)
    a = cat.two_layer_sgd(X, y, U0, v0, lr=0.3, batch_size=4, epochs=2, generator=5)
    assert a["steps"] == 2 * math.ceil(10 / 4)
    b = cat.two_layer_sgd(X, y, U0, v0, lr=0.3, batch_size=4, epochs=2, generator=5)
    assert a["loss"] == b["loss"]
    order = torch.randperm(10, generator=torch.Generator().manual_seed(5))
    one = cat.two_layer_sgd(X, y, U0, v0, lr=0.3, batch_size=4, epochs=1, generator=5)
    U, v = U0, v0
    for i in range(0, 10, 4):
        idx = order[i:i + 4]
        rec = dyn.two_layer_gd("network", X[idx], y[idx], U, v, lr=0.3, steps=1)
        U, v = rec["U"], rec["v"]
    assert torch.allclose(one["U"], U, atol=1e-13) and torch.allclose(one["v"], v, atol=1e-13)
    full = 0.5 * float(((dyn.two_layer_outputs("network", U, v, U, v, X) - y) ** 2).mean())
    assert one["loss"][-1] == pytest.approx(full, rel=1e-12)


def test_multi_stage_gd_raises_the_rate_from_the_current_sharpness():
    U0, v0, X, y = _problem()
    rec = cat.multi_stage_gd(X, y, U0, v0, stages=3, steps=20, c_first=0.5, c_raise=1.2, X_test=X, y_test=y)
    assert rec["stage_starts"] == [0, 20, 40] and len(rec["loss"]) == 61
    lam0 = dyn.sharpness(dyn.two_layer_ntk("network", U0, v0, U0, v0, X))
    assert rec["lrs"][0] == pytest.approx(1.0 / lam0)
    # stage 2 continues from stage 1's end with eta = 1.2 * 2 / lambda(end of stage 1)
    s1 = dyn.two_layer_gd("network", X, y, U0, v0, lr=rec["lrs"][0], steps=20)
    lam1 = dyn.sharpness(dyn.two_layer_ntk("network", s1["U"], s1["v"], s1["U"], s1["v"], X))
    assert rec["sharpness_start"][1] == pytest.approx(lam1, rel=1e-12)
    assert rec["lrs"][1] == pytest.approx(2.4 / lam1, rel=1e-12)
    assert rec["loss"][:21] == s1["loss"]
    s2 = dyn.two_layer_gd("network", X, y, s1["U"], s1["v"], lr=rec["lrs"][1], steps=20)
    assert rec["loss"][20:41] == s2["loss"]
    assert rec["test"][1] == pytest.approx(s2["loss"][-1], rel=1e-12)   # test data = training data here
    assert len(rec["params"]) == 3 and torch.equal(rec["params"][1][0], s2["U"])


def test_two_layer_agop_equals_autograd_agop():
    U0, v0, X, _ = _problem(d=5, m=40, n=30)
    U, v = U0 + 0.1, v0 * 0.7
    G = cat.two_layer_agop(U, v, X)
    ref = rfm.agop(lambda Z: dyn.two_layer_outputs("network", U, v, U, v, Z), X)
    assert torch.allclose(G, ref, atol=1e-12)
    grads = cat.two_layer_input_gradients(U, v, X)
    assert grads.shape == (30, 5)


def test_bad_inputs():
    U0, v0, X, y = _problem()
    with pytest.raises(ValueError, match="batch_size"):
        cat.two_layer_sgd(X, y, U0, v0, lr=0.1, batch_size=0, epochs=1)
    with pytest.raises(ValueError, match="batch_size"):
        cat.two_layer_sgd(X, y, U0, v0, lr=0.1, batch_size=X.shape[0] + 1, epochs=1)
    with pytest.raises(ValueError, match="y has"):
        cat.two_layer_sgd(X, y[:-1], U0, v0, lr=0.1, batch_size=2, epochs=1)
    with pytest.raises(ValueError, match="together"):
        cat.multi_stage_gd(X, y, U0, v0, stages=1, steps=1, c_first=0.5, c_raise=1.5, X_test=X)
    with pytest.raises(ValueError, match="stages"):
        cat.multi_stage_gd(X, y, U0, v0, stages=0, steps=1, c_first=0.5, c_raise=1.5)
    with pytest.raises(ValueError, match="features"):
        cat.two_layer_agop(U0, v0, X[:, :2])


def test_sgd_max_steps_replays_the_same_run():
    U0, v0, X, y = _problem(n=10)
    whole = cat.two_layer_sgd(X, y, U0, v0, lr=0.3, batch_size=3, epochs=3, generator=7)
    for t in (0, 2, 5, whole["steps"]):
        part = cat.two_layer_sgd(X, y, U0, v0, lr=0.3, batch_size=3, epochs=3, generator=7, max_steps=t)
        assert part["steps"] == t and part["loss"] == whole["loss"][:t + 1]
    with pytest.raises(ValueError, match="max_steps"):
        cat.two_layer_sgd(X, y, U0, v0, lr=0.3, batch_size=3, epochs=1, max_steps=-1)
