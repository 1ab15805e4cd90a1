"""rfm.theory.infinite_depth and rfm.data.dirichlet: dual activations, deep kernels, reference classifiers, Dirichlet
data."""
import math

import pytest
import torch

from rfm.core.ntk import relu_ntk
from rfm.data.dirichlet import bayes_dirichlet, dirichlet_sphere
from rfm.theory.infinite_depth import (
    DUALS,
    cosines,
    deep_dual_kernel,
    depth_sweep,
    dual_ntk,
    get_dual,
    hilbert_estimate,
    interpolate_sign,
    majority_vote,
    one_nn,
    singular_exponent,
)

NAMES = sorted(DUALS) + ["sine_1", "sine_2.676", "hermite_2", "hermite_3"]
T = torch.linspace(-1, 1, 201, dtype=torch.float64)


@pytest.mark.parametrize("name", NAMES)
def test_psi_of_one_is_one_and_derivative_and_gap(name):
    act = get_dual(name)
    one = torch.ones((), dtype=torch.float64)
    assert abs(float(act(one)) - 1) < 1e-15
    # the derivative against central differences, inside (-1, 1)
    t = torch.linspace(-0.9, 0.9, 37, dtype=torch.float64)
    h = 1e-6
    fd = (act(t + h) - act(t - h)) / (2 * h)
    assert torch.allclose(act.dpsi(t), fd, atol=1e-7, rtol=1e-6)
    # the exact gap 1 - psi(1 - u) against the plain formula where both are accurate, and positive at tiny u
    u = torch.tensor([1e-1, 1e-2, 1e-3], dtype=torch.float64)
    assert torch.allclose(act.one_minus(u), 1 - act(1 - u), rtol=1e-10, atol=0)
    if name != "relu":
        tiny = torch.tensor([1e-20], dtype=torch.float64)
        assert abs(float(act.one_minus(tiny)) / 1e-20 - float(act.dpsi(one))) < 1e-8
    # the leading term at 0
    c, m = act.lead
    s = torch.tensor([1e-9], dtype=torch.float64)
    assert abs(float(act(s)) - c * 1e-9**m) <= 1e-6 * abs(c * 1e-9**m)


def _mc_dual(act, t, n=400_000, seed=0):
    """Monte Carlo estimate of E[sigma(u) sigma(v)], corr(u, v) = t, and five of its standard errors."""
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(n, generator=g, dtype=torch.float64)
    w = torch.randn(n, generator=g, dtype=torch.float64)
    v = t * u + math.sqrt(1 - t * t) * w
    prod = act.activation(u) * act.activation(v)
    return float(prod.mean()), 5 * float(prod.std()) / math.sqrt(n)


@pytest.mark.parametrize("name", ["relu", "erf", "5d_opt", "sine_1", "hermite_2"])
def test_dual_is_the_expectation_over_correlated_gaussians(name):
    act = get_dual(name)
    for t in (-0.5, 0.0, 0.3, 0.8):
        mc, tol = _mc_dual(act, t)
        assert tol < 0.05
        assert abs(mc - float(act(torch.tensor(t, dtype=torch.float64)))) < tol, (name, t, mc)
    # the normalisation E[sigma(u)^2] = psi(1) = 1
    mc, tol = _mc_dual(act, 1.0)
    assert abs(mc - 1) < tol


@pytest.mark.parametrize("name", ["2d_opt", "3d_opt", "5d_opt", "9d_opt", "hermite_3"])
def test_polynomial_duals_by_exact_gauss_hermite_quadrature(name):
    # E[sigma(u) sigma(v)] with u = a, v = t a + sqrt(1 - t^2) b, (a, b) iid N(0, 1): a 2-D Gauss-Hermite rule with
    # 20 nodes per axis is exact for these polynomial activations (degree <= 7 each)
    import numpy as np
    x, w = np.polynomial.hermite_e.hermegauss(20)
    w = w / w.sum()
    a, b = np.meshgrid(x, x, indexing="ij")
    W = torch.tensor(np.outer(w, w), dtype=torch.float64)
    a, b = torch.tensor(a), torch.tensor(b)
    act = get_dual(name)
    for t in (-0.7, 0.0, 0.4, 0.95, 1.0):
        v = t * a + math.sqrt(1 - t * t) * b
        val = float((W * act.activation(a) * act.activation(v)).sum())
        assert val == pytest.approx(float(act(torch.tensor(t, dtype=torch.float64))), abs=1e-10)


def test_arc_cosine_dual_closed_form():
    act = get_dual("relu")
    t = torch.tensor([0.0, 1.0, -1.0], dtype=torch.float64)
    assert torch.allclose(act(t), torch.tensor([1 / math.pi, 1.0, 0.0], dtype=torch.float64), atol=1e-15)


def test_ntk_depth_one_equals_its_closed_form_and_relu_ntk():
    t = torch.linspace(-0.99, 0.99, 50, dtype=torch.float64)
    theta = (t * (math.pi - torch.arccos(t)) + (t * (math.pi - torch.arccos(t)) + torch.sqrt(1 - t**2))) / math.pi
    assert torch.allclose(dual_ntk(t, "relu", 1), theta, atol=1e-14)
    # the generic recursion with the relu dual gives what rfm.core.ntk.relu_ntk gives, at any depth
    act = DUALS["relu"]
    for L in (1, 5, 40):
        tt, th = t.clone(), t.clone()
        for _ in range(L):
            nxt = act(tt)
            th = nxt + th * act.dpsi(tt)
            tt = nxt
        ref = relu_ntk(t[None].clone(), torch.ones(50, dtype=torch.float64), torch.ones(1, dtype=torch.float64), L)
        assert torch.allclose(th, ref[0], atol=1e-12)
    # a generic dual: depth 1 is psi(t) + t psi'(t)
    a = get_dual("2d_opt")
    assert torch.allclose(dual_ntk(t, a, 1), a(t) + t * a.dpsi(t), atol=1e-15)


def test_singular_exponents():
    assert singular_exponent("2d_opt") == pytest.approx(0.5, abs=1e-12)
    assert singular_exponent("3d_opt") == pytest.approx(1.0, abs=1e-12)
    assert singular_exponent("5d_opt") == pytest.approx(2.0, abs=1e-12)
    assert singular_exponent("9d_opt") == pytest.approx(4.0, abs=1e-12)
    assert math.isinf(singular_exponent("hermite_2"))
    assert math.isnan(singular_exponent("relu"))


def test_deep_kernel_matches_direct_composition_and_log_domain():
    t = torch.tensor([0.1, 0.5, 0.9, 0.999, -0.3], dtype=torch.float64)
    act = get_dual("2d_opt")
    ref = t.clone()
    for _ in range(30):
        ref = act(ref)
    K = deep_dual_kernel(t, act, 30)
    assert torch.allclose(K.value, ref, rtol=1e-12, atol=0)
    # psi = t^2: psi^L(t) = t^(2^L), in the log domain far below float64's range
    K = deep_dual_kernel(t, "hermite_2", 25)
    ref_log = (2.0**25) * torch.log(t.abs())
    assert torch.allclose(K.log_abs, ref_log, rtol=1e-12)
    assert torch.equal(K.sign, torch.ones(5, dtype=torch.float64))
    # continuing from a DeepKernel equals composing at once
    K1 = deep_dual_kernel(deep_dual_kernel(t, "hermite_2", 10), "hermite_2", 15)
    assert torch.allclose(K1.log_abs, ref_log, rtol=1e-12)
    # exact gaps: two points at angle 1e-9 stay distinct (t rounds to 1 in float64, the gap does not)
    gap = torch.tensor([0.5e-18], dtype=torch.float64)
    K = deep_dual_kernel(1 - gap, "2d_opt", 20, gap=gap)
    assert float(K.gap[0]) == pytest.approx(0.5e-18 * 4.0**20, rel=1e-6)


def test_very_deep_square_ranks_as_one_nn():
    data = dirichlet_sphere(400, [1, 2], [2, 1], 0.4, generator=3)
    Xtr, ytr, Xte = data.X[:200], data.y[:200], data.X[200:]
    t, gap = cosines(Xte, Xtr)
    K = deep_dual_kernel(t, "hermite_2", 40, gap=gap)
    assert torch.equal(K.log_abs.argmax(1), torch.cdist(Xte, Xtr).argmin(1))
    Ktr = deep_dual_kernel(*cosines(Xtr, Xtr)[:1], "hermite_2", 40, gap=cosines(Xtr, Xtr)[1])
    pred = interpolate_sign(Ktr.value, ytr, K)
    assert torch.equal(pred, one_nn(Xtr, ytr, Xte))


def test_deep_singular_kernel_is_the_hilbert_kernel_shape():
    # psi^L(t) / psi'(0)^L approaches c(t) ~ (1 - t)^(-1/2) near t = 1 for 2d_opt
    gaps = torch.tensor([1e-6, 1e-7], dtype=torch.float64)
    K = deep_dual_kernel(1 - gaps, "2d_opt", 60, gap=gaps)
    slope = float((K.log_abs[1] - K.log_abs[0]) / math.log(0.1))
    assert slope == pytest.approx(-0.5, abs=0.01)


def test_reference_classifiers():
    Xtr = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=torch.float64)
    ytr = torch.tensor([1.0, -1.0, -1.0], dtype=torch.float64)
    Xte = torch.tensor([[0.99, 0.141067], [0.5, 0.866025]], dtype=torch.float64)
    assert one_nn(Xtr, ytr, Xte).tolist() == [1.0, -1.0]
    assert majority_vote(ytr, 4).tolist() == [-1.0] * 4
    # Hilbert estimate on S^1: weights 1/||x - x_i||
    d = torch.cdist(Xte, Xtr)
    ref = torch.where((ytr / d).sum(1) < 0, -1.0, 1.0)
    assert torch.equal(hilbert_estimate(Xtr, ytr, Xte), ref.to(torch.float64))
    with pytest.raises(ValueError, match="y_train"):
        one_nn(Xtr, torch.tensor([0.0, 1.0, 1.0]), Xte)


def test_relu_ntk_deep_tends_to_majority_vote():
    data = dirichlet_sphere(300, [1, 2], [2, 1], 0.4, generator=1)
    Xtr, ytr, Xte = data.X[:5], data.y[:5], data.X[5:]
    preds = depth_sweep(Xtr, ytr, Xte, "relu", [2, 20000], ntk=True)
    mv = majority_vote(ytr, len(Xte))
    agree = {L: float((p == mv).double().mean()) for L, p in preds.items()}
    assert agree[20000] > agree[2]
    assert agree[20000] >= 0.95


def test_dirichlet_data_and_bayes():
    data = dirichlet_sphere(1000, [1, 2], [2, 1], 0.4, generator=0)
    assert torch.allclose(data.X.norm(dim=1), torch.ones(1000, dtype=torch.float64))
    assert int((data.y > 0).sum()) == 400 and (data.X > 0).all()
    again = dirichlet_sphere(1000, [1, 2], [2, 1], 0.4, generator=0)
    assert torch.equal(data.X, again.X)
    b = bayes_dirichlet(data.X, [1, 2], [2, 1], 0.4)
    # the Bayes rule is the best of all rules: it beats 1-NN on fresh data of a good size
    acc_b = float((b == data.y).double().mean())
    assert 0.7 < acc_b < 0.85
    # in 2-D the Bayes rule is a threshold on x1 / (x1 + x2): 0.4 s2 > 0.6 s1 * ... -> one switch point
    s = data.X[:, 0] / data.X.sum(1)
    order = s.argsort()
    assert int((b[order].diff() != 0).sum()) == 1
    with pytest.raises(ValueError, match="alpha"):
        dirichlet_sphere(10, [1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="unit"):
        cosines(data.X * 2, data.X)


def test_deep_kernel_diagonal_stays_one_on_many_points():
    # torch.cdist's matrix-product shortcut (used above 25 rows) leaves ~1e-8 on the diagonal of the distances; a
    # deep composition with psi'(1) = 4 would amplify it and drive K(x, x) to 0: cosines() must give exact zeros
    data = dirichlet_sphere(200, [1, 2], [2, 1], 0.4, generator=2)
    t, gap = cosines(data.X, data.X)
    assert float(gap.diagonal().abs().max()) == 0.0
    K = deep_dual_kernel(t, "2d_opt", 100, gap=gap)
    assert torch.equal(K.value.diagonal(), torch.ones(200, dtype=torch.float64))
    # and the deep machine on 40 points is the Hilbert estimate's close relative, not a constant
    Xtr, ytr, Xte = data.X[:40], data.y[:40], data.X[40:]
    pred = depth_sweep(Xtr, ytr, Xte, "2d_opt", [100])[100]
    assert 0 < float((pred > 0).double().mean()) < 1
    assert float((pred == hilbert_estimate(Xtr, ytr, Xte)).double().mean()) > 0.9
