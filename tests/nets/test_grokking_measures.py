"""The measures a grokking chapter reads from its runs (rfm.nets.callbacks.grokking_curves, grokking_summary,
nfa_correlations, grokking_network_summary), on known answers."""
import numpy as np
import torch

import rfm
from rfm import nets
from rfm.data import modular as mod
from rfm.nets.callbacks import (
    GrokkingProgress,
    NetworkProgress,
    grokking_curves,
    grokking_network_summary,
    grokking_summary,
    nfa_correlations,
)


class _Records:
    """A stand-in for GrokkingProgress with given columns (alignment: a given list)."""

    def __init__(self, test_acc, dev, align=None):
        n = len(test_acc)
        self.cols = dict(iteration=list(range(n)), train_acc=[1.0] * n, test_acc=test_acc, test_mse=[1.0] * n,
                         test_correct_mse=[1.0] * n, train_mse_measured=[0.0] * n, circulant_deviation=dev,
                         train_residual=[0.0] * n)
        self.align = align if align is not None else list(np.linspace(0.5, 1.0, n))

    def column(self, key):
        return self.cols[key]

    def alignment(self, part="whole"):
        return self.align if part == "whole" else [float("nan")] + self.align[1:]


def test_grokking_curves_finds_the_last_flat_and_the_first_above_half():
    r = _Records([0.0, 0.01, 0.05, 0.2, 0.6, 1.0], [np.nan, 0.9, 0.7, 0.4, 0.2, 0.1])
    c = grokking_curves(r)
    assert c["last_flat"] == 2 and c["first_half"] == 4
    assert c["test_acc"].dtype == float and np.isnan(c["align_block"][0])
    never = grokking_curves(_Records([0.2, 0.3, 0.4], [np.nan, 0.5, 0.4]))
    assert never["last_flat"] == 0 and never["first_half"] is None


def test_grokking_summary_counts_updates_that_do_not_lower_the_deviation():
    r = _Records([0.0, 0.0, 0.01, 0.02, 0.5, 0.9, 0.95, 0.99, 1.0, 1.0],
                 [np.nan, 0.9, 0.8, 0.8, 0.5, 0.6, 0.3, 0.2, 0.1, 0.05],
                 align=[0.5, 0.6, 0.6, 0.7, 0.8, 0.9, 0.95, 0.97, 0.99, 1.0])
    s = grokking_summary(grokking_curves(r))
    assert s["dev_increases"] == 2  # 0.8 -> 0.8 and 0.5 -> 0.6
    assert s["align_increases"] == 1  # 0.6 -> 0.6
    assert (s["dev1"], s["final_dev"], s["acc0"], s["final_acc"]) == (0.9, 0.05, 0.0, 1.0)
    assert s["max_early_acc"] == 0.99  # iterations 0-7
    assert grokking_summary(grokking_curves(r), early=4)["max_early_acc"] == 0.02


def test_grokking_curves_of_an_rfm_run_match_the_progress_columns():
    d = mod.modular_arithmetic(7, "add", 0.6, generator=0)
    prog = GrokkingProgress(d)
    rfm.RFMClassifier(kernel="gaussian", bandwidth=2.5, reg=0.0, agop_power=0.5, dtype="float64", iters=2,
                      random_state=0, callback=prog).fit(d.X_train, d.y_train)
    c = grokking_curves(prog)
    assert np.array_equal(c["test_acc"], np.array(prog.column("test_acc")))
    assert c["align"][-1] == 1.0 or abs(c["align"][-1] - 1.0) < 1e-12


def test_nfa_correlations_are_pearson_over_all_and_off_diagonal_entries():
    g = torch.Generator().manual_seed(0)
    W = torch.randn(5, 4, generator=g, dtype=torch.float64)
    A = W.T @ W
    G2 = A @ A  # AGOP = (W^T W)^2, so AGOP^1/2 = W^T W: both correlations are 1
    full, off = nfa_correlations(A, G2)
    assert abs(full - 1) < 1e-10 and abs(off - 1) < 1e-10
    B = torch.randn(4, 4, generator=g, dtype=torch.float64)
    B = B @ B.T
    full, off = nfa_correlations(A, B)
    S = rfm.psd_power(B, 0.5)
    mask = ~torch.eye(4, dtype=torch.bool)
    assert abs(full - np.corrcoef(A.flatten(), S.flatten())[0, 1]) < 1e-12
    assert abs(off - np.corrcoef(A[mask], S[mask])[0, 1]) < 1e-12


def test_grokking_network_summary_reads_the_records_and_the_matched_controls():
    d = mod.modular_arithmetic(5, "add", 0.6, generator=0)
    g = rfm.make_generator(0)
    net = nets.quadratic_net(5, 16, generator=g)
    prog = NetworkProgress(d, nfm_every=5, agop=True)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
    nets.train(net, d.X_train, d.Y_train, loss="mse", optimizer=opt, epochs=10, batch_size=5, generator=g,
               record_initial=True, callback=prog)
    s = grokking_network_summary(net, prog, d.X_train, matched_seeds=[3, 4])
    assert s["matched"].shape == (2,) and len(s["nfa"]) == len(s["snaps"]) == len(s["nfm_ep"])
    m = nets.matched_network(net, 0, generator=3)
    X = d.X_train.to(torch.float64)
    assert s["matched"][0] == nfa_correlations(nets.nfm(m, 0), nets.layer_agop(m, X, 0))[0]
    assert s["nfm_dev"][0] == mod.block_circulant_deviation(s["snaps"][0]["nfm"], "sub")
    assert s["agop_align"][-1] == mod.agop_alignment(s["snaps"][-1]["agop"], s["snaps"][-1]["agop"])
    assert np.array_equal(s["ep"], [h["epoch"] for h in prog.records])
