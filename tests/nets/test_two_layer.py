"""The one functional two-layer network (rfm.nets.two_layer): one place for its GD, SGD, NTK and AGOP."""
import math

import torch

from rfm import agop
from rfm.nets import catapults, dynamics, tangent_kernel, two_layer


def test_dynamics_and_catapults_use_the_one_two_layer_network():
    for name in ("two_layer_init", "two_layer_outputs", "two_layer_gradients", "two_layer_ntk", "two_layer_gd",
                 "KINDS"):
        assert getattr(dynamics, name) is getattr(two_layer, name)
    for name in ("two_layer_sgd", "two_layer_input_gradients", "two_layer_agop"):
        assert getattr(catapults, name) is getattr(two_layer, name)
    for name in ("empirical_ntk", "sharpness", "lr_for_sharpness", "top_ntk_eigen", "residual_in_top_eigenspace",
                 "parameter_jacobian"):
        assert getattr(dynamics, name) is getattr(tangent_kernel, name)


def test_full_batch_sgd_is_gd_and_the_loss_is_half_the_mse():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(12, 3, generator=g, dtype=torch.float64)
    y = X[:, 0] * X[:, 1]
    U0, v0 = two_layer.two_layer_init(3, 32, generator=1)
    gd = two_layer.two_layer_gd("network", X, y, U0, v0, lr=0.3, steps=6)
    sgd = two_layer.two_layer_sgd(X, y, U0, v0, lr=0.3, batch_size=12, epochs=6)
    torch.testing.assert_close(torch.tensor(sgd["loss"]), torch.tensor(gd["loss"]), rtol=1e-12, atol=0)
    out = two_layer.two_layer_outputs("network", U0, v0, U0, v0, X)
    assert two_layer.two_layer_loss(U0, v0, X, y) == gd["loss"][0] == 0.5 * float(((out - y) ** 2).mean())


def test_the_closed_form_agop_and_ntk_are_autograds():
    g = torch.Generator().manual_seed(2)
    X = torch.randn(9, 4, generator=g, dtype=torch.float64)
    U, v = two_layer.two_layer_init(4, 16, generator=3)
    m, d = U.shape
    f = lambda x: (torch.relu(x @ U.T / math.sqrt(d)) @ v / math.sqrt(m))[:, None]
    torch.testing.assert_close(two_layer.two_layer_agop(U, v, X), agop(f, X), rtol=1e-10, atol=1e-12)
    Uw, vw = U.clone().requires_grad_(), v.clone().requires_grad_()
    J = []
    for x in X:
        out = torch.relu(Uw @ x / math.sqrt(d)) @ vw / math.sqrt(m)
        gu, gv = torch.autograd.grad(out, (Uw, vw))
        J.append(torch.cat([gu.reshape(-1), gv]))
    J = torch.stack(J)
    torch.testing.assert_close(two_layer.two_layer_ntk("network", U, v, U, v, X), J @ J.T, rtol=1e-10, atol=1e-12)


def test_sgd_sharpness_record_equals_gd_at_full_batch():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(12, 3, generator=g, dtype=torch.float64)
    y = X[:, 0] * X[:, 1]
    U0, v0 = two_layer.two_layer_init(3, 32, generator=1)
    gd = two_layer.two_layer_gd("network", X, y, U0, v0, lr=0.3, steps=6, kernel_every=2)
    sgd = two_layer.two_layer_sgd(X, y, U0, v0, lr=0.3, batch_size=12, epochs=6, kernel_every=2)
    assert [t for t, _ in sgd["sharpness"]] == [t for t, _ in gd["sharpness"]] == [0, 2, 4, 6]
    torch.testing.assert_close(torch.tensor([s for _, s in sgd["sharpness"]]),
                               torch.tensor([s for _, s in gd["sharpness"]]), rtol=1e-10, atol=0)
    assert "sharpness" not in two_layer.two_layer_sgd(X, y, U0, v0, lr=0.3, batch_size=4, epochs=1)
