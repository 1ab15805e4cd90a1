"""rfm.nets.baselines: spectrum- and column-norm-matched random weights and networks, the NFA controls."""
import math

import pytest
import torch

import rfm
from rfm import nets
from rfm.nets import baselines as bl


def _W(shape=(7, 5), seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _net(widths=(9, 6), d=5, d_out=2, seed=1, bias=False):
    return nets.MLP(d, list(widths), d_out, bias=bias, dtype="float64", generator=seed)


@pytest.mark.parametrize("shape", [(7, 5), (5, 7), (6, 6), (1, 4)])
@pytest.mark.parametrize("sides", ["both", "left", "right"])
def test_spectrum_is_preserved_exactly(shape, sides):
    W = _W(shape)
    W2 = nets.spectrum_matched_weights(W, 3, sides=sides)
    assert W2.shape == W.shape and W2.dtype == W.dtype
    torch.testing.assert_close(torch.linalg.svdvals(W2), torch.linalg.svdvals(W), rtol=1e-12, atol=1e-12)
    assert not torch.allclose(W2, W)


def test_left_keeps_the_nfm_and_right_keeps_the_gram_of_the_rows():
    W = _W((8, 5))
    left = nets.spectrum_matched_weights(W, 1, sides="left")
    right = nets.spectrum_matched_weights(W, 1, sides="right")
    torch.testing.assert_close(left.T @ left, W.T @ W, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(right @ right.T, W @ W.T, rtol=1e-10, atol=1e-12)
    assert not torch.allclose(left @ left.T, W @ W.T, atol=1e-3)
    both = nets.spectrum_matched_weights(W, 1)
    assert not torch.allclose(both.T @ both, W.T @ W, atol=1e-3)


def test_singular_vectors_are_random_and_reproducible():
    W = _W((6, 4))
    a, b = nets.spectrum_matched_weights(W, 5), nets.spectrum_matched_weights(W, 5)
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not torch.allclose(a, nets.spectrum_matched_weights(W, 6))


def test_singular_vectors_are_haar_distributed():
    # For a uniformly random unit vector u in R^k, E[(u . e)^2] = 1/k and E[(u . e)^4] = 3/(k(k+2)): check both for
    # the top right and left singular vectors of the matched matrix (a rank-one W makes them well defined).
    k_out, k_in, draws = 6, 4, 800
    W = torch.outer(torch.arange(1.0, k_out + 1, dtype=torch.float64), torch.ones(k_in, dtype=torch.float64))
    W = W + 1e-3 * _W((k_out, k_in))
    g = torch.Generator().manual_seed(0)
    u2, v2, u4, v4 = [], [], [], []
    for _ in range(draws):
        U, _, Vh = torch.linalg.svd(nets.spectrum_matched_weights(W, g), full_matrices=False)
        u2.append(U[0, 0] ** 2), v2.append(Vh[0, 0] ** 2), u4.append(U[0, 0] ** 4), v4.append(Vh[0, 0] ** 4)
    for vals, exact in [(u2, 1 / k_out), (v2, 1 / k_in), (u4, 3 / (k_out * (k_out + 2))),
                        (v4, 3 / (k_in * (k_in + 2)))]:
        vals = torch.stack(vals)
        se = float(vals.std()) / math.sqrt(draws)
        assert abs(float(vals.mean()) - exact) < 4 * se, (float(vals.mean()), exact, se)


def test_float32_and_device_are_kept():
    W = _W((5, 3), dtype=torch.float32)
    for W2 in (nets.spectrum_matched_weights(W, 0), nets.column_norm_matched_weights(W, 0)):
        assert W2.dtype == torch.float32 and W2.device == W.device


def test_column_norms_are_preserved_exactly_and_directions_are_random():
    W = _W((40, 6))
    W[:, 2] = 0.0
    W2 = nets.column_norm_matched_weights(W, 2)
    torch.testing.assert_close(W2.norm(dim=0), W.norm(dim=0), rtol=1e-12, atol=0)
    torch.testing.assert_close(torch.diagonal(W2.T @ W2), torch.diagonal(W.T @ W), rtol=1e-12, atol=0)
    assert bool((W2[:, 2] == 0).all())
    cos = (W2 * W).sum(0) / (W2.norm(dim=0) * W.norm(dim=0)).clamp_min(1e-300)
    assert float(cos.abs().max()) < 0.7          # 40-dimensional directions: |cos| ~ 0.16
    assert not torch.allclose(W2, nets.column_norm_matched_weights(W, 3))


@pytest.mark.parametrize("layer", [0, 1, 2])
@pytest.mark.parametrize("match", ["spectrum", "column_norms"])
def test_matched_network_replaces_one_layer_only(layer, match):
    net = _net(bias=True)
    before = [w.detach().clone() for w in net.parameters()]
    c = nets.matched_network(net, layer, 4, match=match)
    for l in range(net.n_layers):
        same = torch.equal(c.weight(l), net.weight(l))
        assert same == (l != layer)
        torch.testing.assert_close(c.initial_weight(l), net.initial_weight(l), rtol=0, atol=0)
        torch.testing.assert_close(c.layers[l].bias, net.layers[l].bias, rtol=0, atol=0)
    for w, w0 in zip(net.parameters(), before):                     # the model itself is untouched
        torch.testing.assert_close(w, w0, rtol=0, atol=0)
    W, W2 = net.weight(layer).detach(), c.weight(layer).detach()
    if match == "spectrum":
        torch.testing.assert_close(torch.linalg.svdvals(W2), torch.linalg.svdvals(W), rtol=1e-12, atol=1e-12)
    else:
        torch.testing.assert_close(W2.norm(dim=0), W.norm(dim=0), rtol=1e-12, atol=0)
    X = _W((11, 5))
    out = c(X)
    assert out.shape == (11, 2) and out.dtype == torch.float64 and bool(torch.isfinite(out).all())


def test_matched_network_forward_is_the_network_with_the_new_weights():
    net = _net(widths=(8,), d_out=1)
    c = nets.matched_network(net, 0, 7)
    X = _W((13, 5), seed=3)
    expected = torch.relu(X @ c.weight(0).T) @ net.weight(1).T
    torch.testing.assert_close(c(X), expected, rtol=1e-12, atol=1e-12)


def test_matched_nfa_is_computed_like_nfa_table():
    net = _net(widths=(8, 7))
    X = _W((30, 5), seed=2)
    for layer in (0, 1):
        vals = nets.matched_nfa(net, X, layer, draws=3, generator=9, power=0.5)
        g = torch.Generator().manual_seed(9)
        for v in vals:
            c = nets.matched_network(net, layer, g)
            (row,) = nets.nfa_table(c, X, layers=[layer], powers=[0.5], kinds=["pearson"])
            assert v == pytest.approx(row["trained"], abs=1e-12)
    diag = nets.matched_nfa(net, X, 0, draws=1, generator=9, diagonal=True, kind="cosine")
    c = nets.matched_network(net, 0, 9)
    F, G = nets.nfm(c, 0), nets.layer_agop(c, X, 0, power=0.5)
    assert diag[0] == pytest.approx(rfm.matrix_correlation(F.diagonal(), G.diagonal(), "cosine"), abs=1e-12)


def test_isotropic_inputs_make_the_nfa_blind_to_the_right_singular_vectors():
    # With rotation-invariant inputs, W V' has the same law as W: the cosine NFA of a one-hidden-layer network is
    # (up to sampling) unchanged when only the right singular vectors are redrawn; a known answer on average.
    torch.manual_seed(0)
    d, n = 6, 20000
    net = _net(widths=(10,), d=d, d_out=1, seed=5)
    X = torch.randn(n, d, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    F, G = nets.nfm(net, 0), nets.layer_agop(net, X, 0, power=0.5)
    base = rfm.matrix_correlation(F, G, "cosine")
    right = nets.matched_nfa(net, X, 0, draws=4, generator=2, sides="right", kind="cosine")
    assert max(abs(v - base) for v in right) < 5e-3


def test_bad_arguments():
    net = _net()
    with pytest.raises(ValueError, match="sides"):
        nets.spectrum_matched_weights(_W(), 0, sides="up")
    with pytest.raises(ValueError, match="match"):
        nets.matched_network(net, 0, 0, match="eigen")
    with pytest.raises(ValueError, match="layer"):
        nets.matched_network(net, 3, 0)
    with pytest.raises(TypeError, match="MLP"):
        nets.matched_network(torch.nn.Linear(3, 2), 0, 0)
    with pytest.raises(ValueError, match="2-D"):
        nets.spectrum_matched_weights(torch.ones(3), 0)
    with pytest.raises(ValueError, match="NaN"):
        nets.column_norm_matched_weights(torch.full((2, 2), float("nan")), 0)
    with pytest.raises(ValueError, match="draws"):
        nets.matched_nfa(net, _W((4, 5)), 0, draws=0)
    assert bl.MATCHES == ("spectrum", "column_norms")
