"""Measures of catapults in the two-layer network (rfm.nets.catapults.residual_shares, batches_above_edge) and of
spikes in a loss curve (rfm.nets.curves.largest_spike), on known answers."""
import numpy as np
import pytest
import torch

import rfm
from rfm.nets import catapults as cat
from rfm.nets import dynamics as dyn
from rfm.nets.curves import largest_spike


def _net(n=12, d=3, m=16):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = X[:, 0] * X[:, 1]
    U, v = dyn.two_layer_init(d, m, generator=1)
    return X, y, U, v


def test_residual_shares_split_the_loss_along_the_tangent_kernel():
    X, y, U, v = _net()
    loss, shares = cat.residual_shares(U, v, X, y, [1, 3, len(y)])
    r = dyn.two_layer_outputs("network", U, v, U, v, X) - y
    assert loss == pytest.approx(0.5 * float(r @ r) / len(y), rel=1e-15)
    assert loss == pytest.approx(cat.two_layer_loss(U, v, X, y), rel=1e-12)
    K = dyn.two_layer_ntk("network", U, v, U, v, X)
    evals, evecs = torch.linalg.eigh(K)
    top = evecs[:, -3:]
    assert shares[3] == pytest.approx(float((top.T @ r).square().sum() / (r @ r)), abs=1e-12)
    assert shares[1] <= shares[3] and shares[len(y)] == pytest.approx(1.0, abs=1e-12)  # all directions: all of it


def test_batches_above_edge_counts_batches_whose_sharpness_passes_two_over_lr():
    X, y, U, v = _net()
    lam = dyn.sharpness(dyn.two_layer_ntk("network", U, v, U, v, X))
    # full batch: every draw is the whole set, so the share is 0 or 1 around the edge 2/lr = lam
    assert cat.batches_above_edge(U, v, X, [len(X)], 2 / (lam * 0.99), draws=3) == {len(X): 1.0}
    assert cat.batches_above_edge(U, v, X, [len(X)], 2 / (lam * 1.01), draws=3) == {len(X): 0.0}
    # against the draws written out, from one stream over the sizes in order
    out = cat.batches_above_edge(U, v, X, [4, 2], 2 / lam, draws=5, generator=7)
    g = rfm.make_generator(7)
    for b in (4, 2):
        hits = sum(dyn.sharpness(dyn.two_layer_ntk("network", U, v, U, v, X[torch.randperm(len(X), generator=g)[:b]]))
                   > lam for _ in range(5))
        assert out[b] == hits / 5


def test_largest_spike_finds_the_biggest_rise_over_the_running_minimum():
    loss = [10, 5, 4, 8, 3, 2.5, 2, 1, 6, 0.5]
    s = largest_spike(loss)
    assert s["peak"] == 8 and s["ratio"] == 6.0 and s["pre"] == 7
    assert largest_spike(loss, window=1)["pre"] == 7
    assert largest_spike([1.0, 0.9, 5.0, 0.1], window=1) == dict(peak=2, ratio=5.0 / 0.9, pre=1)
    with pytest.raises(ValueError):
        largest_spike([1.0])
    assert np.isfinite(s["ratio"])
