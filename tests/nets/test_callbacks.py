"""The progress callbacks on modular arithmetic (a network's epochs, an RFM's iterations) and the quadratic network
of the grokking paper, on known answers."""
import numpy as np
import pytest
import torch

import rfm
from rfm import nets
from rfm.data import modular as mod
from rfm.nets.callbacks import GrokkingProgress, NetworkProgress

# -- network -------------------------------------------------------------------------------------------------------

def test_quadratic_net_forward_nfm_and_initialisation():
    """f(x) = W2 (W1 x)^2 without biases, U[-s/sqrt(fan_in), s/sqrt(fan_in)] init; its NFM is W1^T W1."""
    net = nets.quadratic_net(5, 6, init_scale=0.5, generator=0)  # 2p = 10 inputs, width 6, p = 5 outputs
    assert isinstance(net, nets.MLP) and net.activation == "quadratic"
    assert all(lin.bias is None for lin in net.layers)
    W1, W2 = net.weight(0).detach(), net.weight(1).detach()
    assert W1.shape == (6, 10) and W2.shape == (5, 6) and W1.dtype == torch.float64
    assert float(W1.abs().max()) <= 0.5 / 10**0.5 and float(W2.abs().max()) <= 0.5 / 6**0.5
    x = torch.randn(4, 10, dtype=torch.float64)
    assert torch.allclose(net(x), (x @ W1.T).square() @ W2.T)
    assert torch.allclose(nets.nfm(net, 0), W1.T @ W1)


def _train_quadratic(d, *, width=64, epochs=40, lr=1e-2, weight_decay=1e-3, batch_size=20, nfm_every=20, seed=0,
                     stop_at_test_acc=None):
    g = torch.Generator().manual_seed(seed)
    model = nets.quadratic_net(d.p, width, generator=g)
    progress = NetworkProgress(d, nfm_every=nfm_every, stop_at_test_acc=stop_at_test_acc)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=weight_decay)
    nets.train(model, d.X_train, d.Y_train, optimizer=opt, epochs=epochs, batch_size=batch_size, generator=g,
               record_initial=True, callback=progress, threads=1)
    return model, progress.records


def test_quadratic_net_trained_by_nets_train_records_history_and_fits_the_training_set():
    d = mod.modular_arithmetic(5, "add", train_fraction=0.8, generator=0)
    threads = torch.get_num_threads()
    model, hist = _train_quadratic(d)
    assert torch.get_num_threads() == threads
    assert [h["epoch"] for h in hist] == list(range(41))
    assert "nfm" in hist[0] and "nfm" in hist[20] and "nfm" not in hist[1]
    assert hist[0]["time_s"] == 0.0
    assert hist[-1]["train_mse"] < hist[0]["train_mse"]
    assert hist[-1]["train_acc"] == 1.0
    torch.testing.assert_close(hist[-1]["nfm"] if "nfm" in hist[-1] else hist[40]["nfm"], nets.nfm(model, 0))


def test_quadratic_net_records_match_a_direct_evaluation():
    d = mod.modular_arithmetic(7, "add", train_fraction=0.6, generator=1)
    model, hist = _train_quadratic(d, epochs=3, nfm_every=1)
    with torch.no_grad():
        out = model(d.X_test)
    assert hist[-1]["test_acc"] == float((out.argmax(1) == d.y_test).double().mean())
    assert hist[-1]["test_mse"] == pytest.approx(float(torch.nn.functional.mse_loss(out, d.Y_test)), rel=1e-12)


def test_quadratic_net_training_is_reproducible_with_the_seed():
    d = mod.modular_arithmetic(7, "add", train_fraction=0.6, generator=1)
    runs = [_train_quadratic(d, epochs=5, nfm_every=1, seed=s) for s in (3, 3, 4)]
    (m1, h1), (m2, h2), (m3, h3) = runs
    torch.testing.assert_close(m1.weight(0), m2.weight(0), rtol=0, atol=0)
    assert [h["test_mse"] for h in h1] == [h["test_mse"] for h in h2]
    torch.testing.assert_close(h1[-1]["nfm"], h2[-1]["nfm"], rtol=0, atol=0)
    assert not torch.equal(m1.weight(0), m3.weight(0))


def test_network_progress_stops_at_the_test_accuracy_threshold():
    d = mod.modular_arithmetic(5, "add", train_fraction=0.8, generator=0)
    _, hist = _train_quadratic(d, epochs=200, lr=3e-2, nfm_every=1000, stop_at_test_acc=0.0)
    assert [h["epoch"] for h in hist] == [0]            # the threshold 0 is reached at once
    assert "nfm" in hist[0]                             # the stopping record always has its NFM


# -- RFM end to end ------------------------------------------------------------------------------------------------

def _fit_rfm(data, iters):
    progress = GrokkingProgress(data)
    rfm.RFMClassifier(kernel="gaussian", bandwidth=2.5, reg=0.0, agop_power=0.5, center=True, normalize=None,
                      dtype="float64", iters=iters, max_agop_points=None, callback=progress,
                      device="cpu").fit(data.X_train, data.y_train)
    return progress


def test_grokking_progress_records_each_iteration():
    data = mod.modular_arithmetic(11, "add", train_fraction=0.7, generator=0)
    progress = _fit_rfm(data, iters=2)
    assert progress.column("iteration") == [0, 1, 2]
    assert all(r < 1e-9 for r in progress.column("train_residual"))       # ridge 0 interpolates
    assert progress.column("train_acc") == [1.0, 1.0, 1.0]
    dev = progress.column("circulant_deviation")
    assert np.isnan(dev[0]) and 0 < dev[1] < 1                             # M_0 = I has a zero block
    align = progress.alignment()                                           # the paper's: whole matrices
    assert 0 < align[0] < 1 and align[-1] == pytest.approx(1.0)
    _M0, MT = progress.records[0]["M"], progress.records[-1]["M"]
    assert align[0] == pytest.approx(float(torch.trace(MT) / ((2 * data.p) ** 0.5 * MT.norm())), rel=1e-10)
    block = progress.alignment(part="off_diagonal")
    assert np.isnan(block[0]) and block[-1] == pytest.approx(1.0)
    # the correct-class loss is the mean of (f_y(x) - 1)^2 over the test pairs
    assert all(0 <= c for c in progress.column("test_correct_mse"))
    # every gradient sums to zero over a digit's one-hot coordinates, so every block of M has zero row sums (up to
    # the square root of round-off, ~1e-8, that AGOP^(1/2) makes of the AGOP's zero eigenvalues)
    M, p = progress.records[-1]["M"], data.p
    for block in (M[:p, :p], M[:p, p:], M[p:, p:]):
        assert float(block.sum(1).abs().max()) < 1e-6 * float(M.abs().max())


@pytest.mark.slow
def test_rfm_on_small_modular_addition_generalises_only_after_learning_circulant_features():
    """p = 13 is too small for 100% (too few pairs), but the transition is there: 0 test accuracy with M = I,
    then a rise while the block becomes circulant."""
    data = mod.modular_arithmetic(13, "add", train_fraction=0.7, generator=0)
    progress = _fit_rfm(data, iters=15)
    acc, dev = progress.column("test_acc"), progress.column("circulant_deviation")
    assert max(acc[:5]) == 0.0 and acc[-1] >= 0.45
    assert dev[-1] < 0.2 * dev[1]


def test_network_progress_records_the_agop_and_the_correct_class_loss():
    d = mod.modular_arithmetic(5, "add", train_fraction=0.8, generator=0)
    g = torch.Generator().manual_seed(0)
    model = nets.quadratic_net(d.p, 8, generator=g)
    progress = NetworkProgress(d, nfm_every=2, agop=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    nets.train(model, d.X_train, d.Y_train, optimizer=opt, epochs=4, batch_size=10, generator=g,
               record_initial=True, callback=progress, threads=1)
    snaps = [h for h in progress.records if "nfm" in h]
    assert [h["epoch"] for h in snaps] == [0, 2, 4] and all("agop" in h for h in snaps)
    assert torch.allclose(snaps[-1]["agop"], nets.layer_agop(model, d.X_train, 0), atol=1e-12)
    with torch.no_grad():
        out = model(d.X_test)
    expected = float(((out.gather(1, d.y_test[:, None]).squeeze(1) - 1) ** 2).mean())
    assert progress.records[-1]["test_correct_mse"] == pytest.approx(expected, rel=1e-10)
    with pytest.raises(TypeError):
        NetworkProgress(d, agop=1)
