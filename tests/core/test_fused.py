"""The fused Triton kernel product (rfm.core.fused) against the blocked torch path and float64 brute force.

On a CPU the kernel runs in Triton's interpreter (TRITON_INTERPRET=1, set per test), so CI covers it without a GPU;
the tests skip when triton is not installed (it is an optional dependency: the ``gpu`` and ``test`` extras)."""
import pytest
import torch

import rfm
from rfm.core import fused
from rfm.core.auto import AutoSolver
from rfm.core.cg import CGSolver, KernelOperator, pcg
from rfm.core.coincident import find_pairs
from rfm.core.kernels import kernel_matrix
from rfm.core.machine import _gradient_block

pytestmark = pytest.mark.skipif(not fused.triton_importable(), reason="triton is not installed (the 'gpu' extra)")

KERNELS = [rfm.LaplaceKernel(3.0), rfm.GaussianKernel(2.0), rfm.LaplaceKernel(3.0, exponent=2.0)]


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def _points(n, d, seed, dtype=torch.float32, dup=(5, 3)):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    if dup:
        X[dup[0]] = X[dup[1]]  # a duplicated row: distance exactly 0, weight exactly 0
    return X.to(dtype)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("d", [7, 150])  # one chunk of the feature dimension, and a loop over chunks (BD = 128)
def test_values_product_equals_float64_brute_force(interpret, kernel, d):
    X = _points(157, d, seed=d)
    Z = torch.cat([X[:20], _points(13, d, seed=99, dup=None)])  # evaluation points: some are centres, some not
    V = torch.randn(157, 3, generator=torch.Generator().manual_seed(1))
    pairs = find_pairs(Z, X)
    ref = kernel_matrix(kernel, Z.double(), X.double(), transformed=True, pairs=pairs) @ V.double()
    out = fused.kernel_product(kernel, Z, X, V, pairs=pairs, out_dtype=torch.float64)
    assert float((out - ref).norm() / ref.norm()) < 1e-6
    out64 = fused.kernel_product(kernel, Z.double(), X.double(), V.double(), pairs=pairs)
    torch.testing.assert_close(out64, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kernel", KERNELS)
def test_values_product_agrees_with_the_blocked_path_to_float32_round_off(interpret, kernel):
    X = _points(300, 20, seed=3)
    V = torch.randn(300, 2, generator=torch.Generator().manual_seed(4))
    blocked = KernelOperator(kernel, X, pairs=find_pairs(X), store=False, fused=False)
    op = KernelOperator(kernel, X, pairs=find_pairs(X), store=False)
    assert op.fused and not blocked.fused
    a, b = op.matmul(V), blocked.matmul(V)
    assert a.dtype == torch.float32 and a.shape == (300, 2)
    assert float((a - b).norm() / b.norm()) < 1e-6
    # float64 accumulation: the same float32 entries times a float64 V, summed in float64
    V64 = V.double() / 3
    ref = kernel_matrix(kernel, X, transformed=True, pairs=find_pairs(X)).double() @ V64
    acc = op.matmul_accurate(V64)
    assert acc.dtype == torch.float64
    assert float((acc - ref).norm() / ref.norm()) < 1e-6


def test_coincident_pairs_are_exact(interpret):
    """A duplicated row: its kernel value with its twin is exactly 1 (the Laplace cusp), its weight exactly 0,
    also where far-from-origin points make |z|^2 + |x|^2 - 2 z.x round to a nonzero number in float32."""
    kernel = rfm.LaplaceKernel(1.0)
    X = _points(40, 16, seed=5) + 300.0
    E = torch.zeros(40, 1)
    E[3] = 1.0  # picks column 3 of K: K[5, 3] must be exactly 1 (rows 3 and 5 are equal)
    out = fused.kernel_product(kernel, X, X, E, pairs=find_pairs(X))
    assert float(out[5, 0]) == 1.0 and float(out[3, 0]) == 1.0
    W = fused.kernel_product(kernel, X, X, E, pairs=find_pairs(X), what="weights")
    assert float(W[5, 0]) == 0.0 and float(W[3, 0]) == 0.0


@pytest.mark.parametrize("kernel", KERNELS)
def test_gradients_equal_the_blocked_closed_form(interpret, kernel):
    X = _points(120, 9, seed=6)
    Z = torch.cat([X[:30], _points(10, 9, seed=7, dup=None)])
    alpha = torch.randn(120, 2, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    pairs = find_pairs(Z, X)
    from rfm.core.coincident import block_pairs
    ref = _gradient_block(kernel, Z.double(), X.double(), alpha, block_pairs(pairs, slice(0, 40)))
    G = fused.kernel_gradients(kernel, Z.double(), X.double(), alpha, pairs=pairs)
    torch.testing.assert_close(G, ref, rtol=1e-10, atol=1e-12)
    G32 = fused.kernel_gradients(kernel, Z, X, alpha.float(), pairs=pairs)
    assert G32.dtype == torch.float32
    assert float((G32.double() - ref).norm() / ref.norm()) < 1e-5


def test_pair_ids_match_exactly_the_coincident_pairs():
    X = _points(30, 3, seed=9)
    X[7] = X[3]
    Z = torch.cat([X[[3, 0, 12]], _points(2, 3, seed=10, dup=None)])
    pairs = find_pairs(Z, X)
    zi, xi = fused.pair_ids(pairs, 5, 30, "cpu")
    same = (zi[:, None] == xi[None, :])
    expect = torch.zeros(5, 30, dtype=torch.bool)
    expect[pairs] = True
    assert torch.equal(same, expect)


def test_pcg_on_the_fused_operator_solves_the_system(interpret):
    kernel = rfm.LaplaceKernel(3.0)
    X = _points(200, 6, seed=11)
    y = torch.randn(200, generator=torch.Generator().manual_seed(12))
    stored = KernelOperator(kernel, X, pairs=find_pairs(X), store=True)
    op = KernelOperator(kernel, X, pairs=find_pairs(X), fused=True)
    assert op.fused and not op.stored
    a, info = pcg(op, y, 1e-2, tol=1e-5, maxiter=300)
    ref = torch.linalg.solve(stored.K.double() + 1e-2 * torch.eye(200, dtype=torch.float64), y.double())
    assert info.converged
    assert float((a.double() - ref).norm() / ref.norm()) < 1e-3


def test_rfm_fit_with_fused_cg_equals_blocked_cg(interpret):
    X = _points(150, 5, seed=13)
    y = (X[:, 0] * X[:, 1]).float()
    fits = [rfm.RFMRegressor(iters=1, bandwidth=3.0, reg=1e-2, solver=CGSolver(store=False, fused=f, tol=1e-4))
            .fit(X, y) for f in (True, False)]
    assert fits[0].history_[0]["K_fused"] and not fits[1].history_[0]["K_fused"]
    p0, p1 = (m.predict(X[:40]) for m in fits)
    assert float((p0 - p1).norm() / p1.norm()) < 1e-3


def test_availability_and_refusals(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert not fused.available(rfm.LaplaceKernel(1.0), "cpu")  # no GPU, no interpreter: the torch path
    assert not fused.supports(rfm.LaplaceKernel(1.0, exponent=1.5)) and not fused.supports(rfm.QuadraticKernel())
    X = _points(20, 3, seed=14)
    with pytest.raises(RuntimeError, match="not available"):
        KernelOperator(rfm.LaplaceKernel(1.0), X, fused=True)
    assert not KernelOperator(rfm.LaplaceKernel(1.0), X, store=False).fused
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert fused.available(rfm.GaussianKernel(1.0), "cpu")
    assert not fused.available(rfm.QuadraticKernel(), "cpu")
    with pytest.raises(ValueError, match="what"):
        fused.kernel_product(rfm.LaplaceKernel(1.0), X, X, torch.ones(20), what="grad")


def test_auto_solver_plans_by_size_and_memory_and_records_its_choice():
    k = rfm.LaplaceKernel(10.0)
    auto = AutoSolver()
    gib = 2**30
    assert auto.plan(1000, 1e-3, "cpu", 4, k, available=64 * gib)["auto"] == "cholesky"
    assert auto.plan(10_000, 1e-3, "cpu", 4, k, available=64 * gib)["auto"] == "cg/stored"
    assert auto.plan(10_000, 0.0, "cpu", 4, k, available=64 * gib)["auto"] == "cholesky"
    big = auto.plan(200_000, 1e-3, "cpu", 4, k, available=64 * gib)
    assert big["solver"] == "cg" and big["auto"] in ("cg/blocks", "cg/fused") and "does not fit" in big["reason"]
    assert AutoSolver(beyond_memory="eigenpro3").plan(200_000, 1e-3, "cpu", 4, k, available=gib)["solver"] == \
        "eigenpro3"
    gpu_big = auto.plan(1_000_000, 1e-3, "cuda", 4, k, available=140 * gib)  # measured: EigenPro 3 past memory
    assert gpu_big["solver"] == "eigenpro3" and gpu_big["auto"] == "eigenpro3"
    assert auto.plan(100_000, 1e-3, "cuda", 4, k, available=140 * gib)["auto"] == "cg/stored"
    assert auto.plan(8_000, 1e-3, "cuda", 4, k, available=140 * gib)["auto"] == "cholesky"
    X = _points(120, 4, seed=15)
    m = rfm.RFMRegressor(iters=1, bandwidth=3.0, reg=1e-3, solver=AutoSolver(crossover=50)).fit(X, X[:, 0])
    assert m.history_[0]["auto"] == "cg/stored" and "fits" in m.history_[0]["auto_reason"]


@pytest.mark.parametrize("c", [1, 2, 3, 5])
def test_every_precision_mode_computes_the_same_product_in_the_interpreter(interpret, c):
    """The modes differ only on a GPU's matrix units; here each code path (a tl.dot with V, or float32 FMAs for at
    most 4 columns of V) must give the float64 product to float32 round-off."""
    kernel = rfm.LaplaceKernel(4.0)
    X = _points(90, 12, seed=20 + c)
    V = torch.randn(90, c, generator=torch.Generator().manual_seed(c))
    pairs = find_pairs(X)
    ref = kernel_matrix(kernel, X.double(), transformed=True, pairs=pairs) @ V.double()
    for prec in fused.PRECISIONS:
        out = fused.kernel_product(kernel, X, X, V, pairs=pairs, precision=prec, out_dtype=torch.float64)
        assert out.shape == (90, c)
        assert float((out - ref).norm() / ref.norm()) < 1e-6, prec
    with pytest.raises(ValueError, match="precision"):
        fused.kernel_product(kernel, X, X, V, precision="bf16")
