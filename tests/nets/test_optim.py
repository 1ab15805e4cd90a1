"""Speed Limited Optimization and the full-batch training loop."""
import pytest
import torch

from rfm import nets
from rfm.nets import optim


def _setup(seed=0, bias=False):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(30, 5, generator=g, dtype=torch.float64)
    y = torch.randn(30, generator=g, dtype=torch.float64)
    net = nets.MLP(5, [6, 4], 1, bias=bias, dtype="float64", generator=seed)
    return net, X, y


def _gradients(net, X, y):
    net.zero_grad()
    torch.nn.functional.mse_loss(net(X)[:, 0], y).backward()
    return [[p.grad.clone() for p in layer.parameters()] for layer in net.layers]


def _params(net):
    return [[p.detach().clone() for p in layer.parameters()] for layer in net.layers]


@pytest.mark.parametrize("bias", [False, True])
def test_slo_step_moves_each_layer_by_lr_times_speed_against_its_gradient(bias):
    net, X, y = _setup(bias=bias)
    speeds, lr = (5.0, 0.5, 0.0), 0.01
    before, grads = _params(net), _gradients(net, X, y)
    opt = optim.SLO(optim.layer_groups(net, speeds), lr=lr)
    opt.step()
    for l, (old, new, g) in enumerate(zip(before, _params(net), grads)):
        step = torch.cat([(n - o).reshape(-1) for n, o in zip(new, old)])
        grad = torch.cat([x.reshape(-1) for x in g])
        assert float(step.norm()) == pytest.approx(lr * speeds[l], rel=1e-12, abs=1e-15)
        if speeds[l] > 0:
            torch.testing.assert_close(step, -lr * speeds[l] * grad / grad.norm(), rtol=1e-12, atol=1e-15)


def test_slo_with_eps_divides_by_eps_plus_the_gradient_norm():
    net, X, y = _setup()
    before, grads = _params(net), _gradients(net, X, y)
    optim.SLO(optim.layer_groups(net, (2.0, 1.0, 1.0)), lr=0.1, eps=0.5).step()
    for l, speed in enumerate((2.0, 1.0, 1.0)):
        g = grads[l][0]
        torch.testing.assert_close(_params(net)[l][0] - before[l][0], -0.1 * speed * g / (0.5 + g.norm()),
                                   rtol=1e-12, atol=1e-15)


def test_slo_does_not_move_a_layer_with_zero_gradient():
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.zeros(3)
    optim.SLO([p], lr=1.0, speed=3.0).step()
    torch.testing.assert_close(p.detach(), torch.ones(3))


def test_layer_groups_need_one_speed_per_layer():
    net, _, _ = _setup()
    with pytest.raises(ValueError, match="one value per layer \\(3\\)"):
        optim.layer_groups(net, (1.0, 1.0))
    with pytest.raises(ValueError, match="speed must be >= 0"):
        optim.layer_groups(net, (1.0, -1.0, 1.0))
    with pytest.raises(ValueError, match="lr must be > 0"):
        optim.SLO(net.parameters(), lr=0.0)


def test_full_batch_gradient_descent_matches_nets_train():
    net_a, X, y = _setup(seed=2)
    net_b, _, _ = _setup(seed=2)
    nets.train(net_a, X, y, optimizer="sgd", lr=0.05, epochs=20, batch_size=None)
    history = optim.train_full_batch(net_b, X, y, torch.optim.SGD(net_b.parameters(), lr=0.05), steps=20,
                                     record_every=5)
    for a, b in zip(net_a.parameters(), net_b.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)
    assert [r["step"] for r in history] == [0, 5, 10, 15, 20]
    assert history[-1]["train_loss"] < history[0]["train_loss"]


def test_full_batch_training_records_validation_and_stops_on_request():
    net, X, y = _setup()
    seen = []
    history = optim.train_full_batch(net, X, y, optim.SLO(optim.layer_groups(net, (1, 1, 1)), lr=0.01), steps=50,
                                     X_val=X[:10], y_val=y[:10], metric=lambda out, t: -1.0,
                                     callback=lambda m, rec: seen.append(rec["step"]) or rec["step"] >= 3)
    assert seen == [0, 1, 2, 3] and len(history) == 4
    assert {"val_loss", "val_metric"} <= set(history[-1]) and history[-1]["val_metric"] == -1.0
    with pytest.raises(ValueError, match="X_val and y_val must be given together"):
        optim.train_full_batch(net, X, y, torch.optim.SGD(net.parameters(), lr=0.1), steps=1, X_val=X)
