"""The closed-form ReLU NTK (rfm.core.ntk) against the empirical NTK of wide networks (torch.func, float64), known
closed values, an independent scalar implementation of the layer sum, and the kernel machinery that uses it."""
import math

import pytest
import torch

import rfm
from rfm import NTKKernel
from rfm.core.cg import KernelOperator
from rfm.core.kernels import kernel_blocks

# ------------------------------------------------------------------ references

def ntk_scalar_ref(x, z, depth, bias=0.0, bandwidth=1.0):
    """Theta(x, z) as the layer sum of Arora et al. (2019, eq. (5)), one pair at a time in Python floats:
    Theta = sum_{h=1}^{L+1} S_h(x, z) prod_{h'=h}^{L} Sdot_{h'}(x, z)."""
    b2 = bias**2
    sxz = float(x @ z) / bandwidth**2 + b2
    sxx = float(x @ x) / bandwidth**2 + b2
    szz = float(z @ z) / bandwidth**2 + b2
    S, Sdot = [sxz], []
    for _ in range(depth):
        c = max(-1.0, min(1.0, sxz / math.sqrt(sxx * szz)))
        t = math.acos(c)
        Sdot.append((math.pi - t) / math.pi)
        sxz = math.sqrt(sxx * szz) * (math.sin(t) + (math.pi - t) * c) / math.pi + b2
        sxx, szz = sxx + b2, szz + b2
        S.append(sxz)
    return sum(S[h] * math.prod(Sdot[h:]) for h in range(depth + 1))


def ntk_network(d, width, depth, bias, bandwidth, seed):
    """Parameters (N(0, 1)) and the function f(params, x) of a ReLU network in the NTK parametrisation."""
    g = torch.Generator().manual_seed(seed)
    dims = [d] + [width] * depth + [1]
    params = {}
    for h, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        params[f"W{h}"] = torch.randn(b, a, generator=g, dtype=torch.float64)
        if bias:
            params[f"b{h}"] = torch.randn(b, generator=g, dtype=torch.float64)

    def f(p, x):
        h = x / bandwidth
        for layer in range(depth + 1):
            scale = 1.0 if layer == 0 else math.sqrt(2.0 / width)
            pre = (scale * torch.relu(h) if layer else h) @ p[f"W{layer}"].T
            if bias:
                pre = pre + bias * p[f"b{layer}"]
            h = pre
        return h[..., 0]

    return params, f


def empirical_ntk(X, width, depth, bias=0.0, bandwidth=1.0, seed=0):
    """sum over parameters of df(x_i)/dp df(x_j)/dp, with torch.func.jacrev (float64)."""
    params, f = ntk_network(X.shape[1], width, depth, bias, bandwidth, seed)
    J = torch.func.jacrev(f)(params, X)  # {name: (n, *shape)}
    return sum(j.reshape(X.shape[0], -1) @ j.reshape(X.shape[0], -1).T for j in J.values())


def _points(n=4, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=torch.float64)


def _rel(K, ref):
    return float((K - ref).norm() / ref.norm())


# ------------------------------------------------------------------ (a) the empirical NTK of wide networks

@pytest.mark.parametrize("depth,bias", [(1, 0.0), (1, 0.5), (2, 0.0), (3, 0.3)])
def test_closed_form_is_the_infinite_width_limit_of_the_empirical_ntk(depth, bias):
    """The empirical NTK at initialisation approaches the closed form as the width grows (error ~ 1/sqrt(width));
    averaged over three initialisations so that one lucky draw cannot pass the test."""
    X = _points(4, 5, seed=1)
    K = NTKKernel(depth=depth, bias=bias, bandwidth=1.5)(X)
    widths = (256, 4096) if depth > 1 else (256, 16384)
    errs = [sum(_rel(empirical_ntk(X, w, depth, bias, 1.5, seed=s), K) for s in range(3)) / 3 for w in widths]
    # 16x (64x) the width: the error should fall about 4x (8x); ask for 2.5x, and a small error at the larger width
    assert errs[1] < errs[0] / 2.5, errs
    assert errs[1] < (0.03 if depth == 1 else 0.06), errs


# ------------------------------------------------------------------ (b) closed values and an independent reference

def test_depth_one_closed_values():
    e1, e2 = torch.eye(2, dtype=torch.float64)
    k = NTKKernel(depth=1)
    X = torch.stack([e1, e2, -e1, 3 * e1])
    K = k(X)
    # orthogonal unit vectors: S_1 = 0, theta = pi/2: Theta = 0 * 1/2 + 1/pi
    assert K[0, 1].item() == pytest.approx(1 / math.pi, rel=1e-14)
    # equal inputs: cos = 1, Theta = 2 |x|^2
    assert K[0, 0].item() == pytest.approx(2.0, rel=1e-14)
    assert K[3, 3].item() == pytest.approx(18.0, rel=1e-14)
    # opposite inputs: theta = pi, both terms vanish
    assert K[0, 2].item() == pytest.approx(0.0, abs=1e-14)
    # parallel inputs of different norms: Theta = 2 |x| |z|
    assert K[0, 3].item() == pytest.approx(6.0, rel=1e-14)


def test_depth_one_is_the_arc_cosine_formula():
    """Theta = <x, z> (pi - theta) / pi + |x||z| (sin theta + (pi - theta) cos theta) / pi (Cho and Saul's
    arc-cosine kernels of degree 0 and 1, times 2)."""
    X = _points(6, 4, seed=3)
    K = NTKKernel(depth=1)(X)
    nx = X.norm(dim=1)
    cos = ((X @ X.T) / (nx[:, None] * nx[None, :])).clamp(-1, 1)
    t = torch.arccos(cos)
    ref = (X @ X.T) * (math.pi - t) / math.pi + nx[:, None] * nx[None, :] * (t.sin() + (math.pi - t) * cos) / math.pi
    off = ~torch.eye(6, dtype=torch.bool)
    torch.testing.assert_close(K[off], ref[off], rtol=1e-12, atol=1e-12)
    # on the diagonal the reference's arccos(1 - eps) = 1e-8 is round-off; the kernel snaps it: exactly 2 |x|^2
    torch.testing.assert_close(K.diagonal(), 2 * nx**2, rtol=1e-14, atol=0)


@pytest.mark.parametrize("depth", [1, 2, 5, 20])
@pytest.mark.parametrize("bias", [0.0, 0.7])
def test_matches_the_layer_sum_one_pair_at_a_time(depth, bias):
    X, Z = _points(5, 3, seed=4), _points(3, 3, seed=5) * 2.0
    K = NTKKernel(depth=depth, bias=bias, bandwidth=1.3)(X, Z)
    ref = torch.tensor([[ntk_scalar_ref(x, z, depth, bias, 1.3) for z in Z] for x in X], dtype=torch.float64)
    torch.testing.assert_close(K, ref, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("depth,bias", [(1, 0.0), (4, 0.0), (3, 0.5)])
def test_diagonal_closed_form(depth, bias):
    X = _points(5, 3, seed=6)
    k = NTKKernel(depth=depth, bias=bias, bandwidth=2.0)
    torch.testing.assert_close(k.diagonal_values(X.square().sum(1)), k(X).diagonal(), rtol=1e-12, atol=1e-12)


def test_positive_homogeneity_without_bias_and_bandwidth_scaling():
    X, Z = _points(4, 3, seed=7), _points(3, 3, seed=8)
    k = NTKKernel(depth=3)
    torch.testing.assert_close(k(2.0 * X, 0.5 * Z), k(X, Z), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(NTKKernel(depth=3, bias=0.4, bandwidth=2.5)(X, Z),
                               NTKKernel(depth=3, bias=0.4)(X / 2.5, Z / 2.5), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ (c) symmetry, PSD, numerical safety

@pytest.mark.parametrize("depth,bias", [(1, 0.0), (2, 0.0), (6, 0.3)])
def test_symmetric_and_positive_semidefinite(depth, bias):
    X = _points(40, 6, seed=9)
    k = NTKKernel(depth=depth, bias=bias)
    K = k(X)
    torch.testing.assert_close(K, K.T, rtol=0, atol=1e-12)
    assert torch.linalg.eigvalsh(K).min().item() > -1e-10 * K.abs().max().item()
    Z = _points(7, 6, seed=10)
    torch.testing.assert_close(k(X, Z), k(Z, X).T, rtol=1e-13, atol=1e-13)


def test_cosines_are_clamped_and_deep_recursions_stay_finite():
    g = torch.Generator().manual_seed(11)
    x = torch.randn(1, 50, generator=g)
    X = torch.cat([x, 3.0 * x, x * (1 + 1e-7), -x])  # cosines at 1 (up to float32 round-off) and -1
    for dtype, depth in ((torch.float32, 50), (torch.float64, 2000)):
        K = NTKKernel(depth=depth)(X.to(dtype))
        assert torch.isfinite(K).all()
        assert (K.diagonal() > 0).all()
    # equal and opposite points get exact values after the clamp: Theta(x, 3x) = 3 Theta(x, x), Theta(x, -x) follows
    # the layer sum
    x = x.double()
    X = torch.cat([x, 3.0 * x, x, -x])  # exact multiples in float64
    K = NTKKernel(depth=3)(X)
    assert K[0, 1].item() == pytest.approx(3 * K[0, 0].item(), rel=1e-14)
    # (the unsnapped reference's arccos(-1 + eps) is off by sqrt(eps) ~ 1e-8: that is its tolerance)
    assert K[0, 3].item() == pytest.approx(ntk_scalar_ref(X[0], X[3], 3), rel=1e-7)


def test_bad_parameters_and_no_gradients():
    with pytest.raises(ValueError):
        NTKKernel(depth=0)
    with pytest.raises(ValueError):
        NTKKernel(bias=-1.0)
    with pytest.raises(ValueError):
        rfm.get_kernel("ntk", exponent=2)
    X = _points(6, 3, seed=13)
    machine = rfm.KernelMachine(NTKKernel(depth=2), X, torch.ones(6, dtype=torch.float64))
    with pytest.raises(NotImplementedError):
        machine.agop()
    with pytest.raises(NotImplementedError):
        rfm.RFMRegressor(kernel=NTKKernel(), iters=1, dtype="float64").fit(X, torch.arange(6.0, dtype=torch.float64))


# ------------------------------------------------------------------ the machinery that uses it

def test_blocks_feature_matrix_and_cg_operator_agree_with_the_matrix():
    X, Z = _points(30, 4, seed=14), _points(9, 4, seed=15)
    k = rfm.get_kernel("ntk", depth=2, bias=0.2, bandwidth=2.0)
    K = k(Z, X)
    # tiny memory budget: many blocks
    out = torch.cat([B.clone() for _, B in kernel_blocks(k, Z, X, mem_bytes=2000)])
    torch.testing.assert_close(out, K, rtol=1e-13, atol=1e-13)
    # a feature matrix enters through x -> L^T x
    M = torch.diag(torch.tensor([2.0, 1.0, 0.5, 0.0], dtype=torch.float64))
    torch.testing.assert_close(k(Z, X, M), k(Z @ M.sqrt(), X @ M.sqrt()), rtol=1e-12, atol=1e-12)
    op = KernelOperator(k, X, store=False)
    Kxx = k(X)
    idx = torch.tensor([0, 5, 7])
    torch.testing.assert_close(op.columns(idx), Kxx[:, idx], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(op.diagonal(), Kxx.diagonal(), rtol=1e-12, atol=1e-12)
    V = torch.randn(30, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(op.matmul(V), Kxx @ V, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("solver", ["cholesky", "cg"])
def test_kernel_ridge_regression_with_the_ntk(solver):
    """RFM at iteration 0 with the NTK is NTK ridge regression: predictions K(Z, X) (K(X, X) + reg I)^-1 y."""
    X, Z = _points(60, 5, seed=16), _points(10, 5, seed=17)
    y = torch.sin(X[:, 0]) + X[:, 1] * X[:, 2]
    k = NTKKernel(depth=2)
    reg = 1e-2
    model = rfm.RFMRegressor(kernel=k, iters=0, reg=reg, solver=solver, dtype="float64").fit(X, y)
    alpha, _ = rfm.solve_krr(k(X), y, reg)
    torch.testing.assert_close(torch.as_tensor(model.predict(Z), dtype=torch.float64), k(Z, X) @ alpha,
                               rtol=1e-5, atol=1e-6)
