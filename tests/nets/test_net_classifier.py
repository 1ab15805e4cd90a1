"""rfm.nets.classifier: the least-squares label codes (shared with RFMClassifier) and an MLP trained on them."""
import numpy as np
import pytest
import torch

import rfm
from rfm import nets
from rfm.nets.classifier import decode_label_codes, fit_mlp_classifier, label_codes, predict_classes


def test_label_codes_two_classes_are_one_0_1_column():
    Y = label_codes(torch.tensor([0, 1, 1, 0]))
    assert Y.shape == (4, 1)
    torch.testing.assert_close(Y[:, 0], torch.tensor([0.0, 1.0, 1.0, 0.0]))


def test_label_codes_more_classes_are_one_hot_and_decode_back():
    y = torch.tensor([2, 0, 1, 2, 1])
    Y = label_codes(y, 4, dtype=torch.float64)
    assert Y.shape == (5, 4) and Y.dtype == torch.float64
    assert torch.equal(Y.sum(1), torch.ones(5, dtype=torch.float64))
    assert torch.equal(decode_label_codes(Y), y)
    assert torch.equal(decode_label_codes(label_codes(torch.tensor([1, 0, 1]))), torch.tensor([1, 0, 1]))


def test_decode_one_column_thresholds_at_one_half():
    out = torch.tensor([[0.49], [0.5], [0.51], [-3.0], [7.0]])
    assert decode_label_codes(out).tolist() == [0, 0, 1, 0, 1]


@pytest.mark.parametrize("bad, err", [(torch.tensor([0, 3]), ValueError), (torch.tensor([-1, 1]), ValueError),
                                      (torch.tensor([[0, 1]]), ValueError), (torch.tensor([0.5, 1.0]), ValueError),
                                      (torch.tensor([True, False]), TypeError)])
def test_label_codes_reject_bad_labels(bad, err):
    with pytest.raises(err):
        label_codes(bad, 3)


def test_rfm_classifier_uses_the_same_codes():
    # the kernel classifier encodes its (sorted) classes with label_codes: the targets it regresses are these
    rng = np.random.default_rng(0)
    rng.standard_normal((60, 3))
    for labels, n_classes in ((np.array(["b", "a"])[rng.integers(0, 2, 60)], 2), (rng.integers(0, 3, 60), 3)):
        clf = rfm.RFMClassifier(iters=0, bandwidth=3.0)
        Y = clf._encode_fit_targets(labels, 60, torch.float64, torch.device("cpu"))[0]
        idx = torch.as_tensor(np.searchsorted(np.unique(labels), labels))
        torch.testing.assert_close(Y, label_codes(idx, n_classes, dtype=torch.float64))


def test_fit_mlp_classifier_is_mlp_plus_train_on_the_codes():
    # the same seed gives the same network as building it and calling nets.train by hand
    g = torch.Generator().manual_seed(1)
    X = torch.randn(50, 4, generator=g)
    y = (X[:, 0] > 0).long()
    net = fit_mlp_classifier(X, y, 2, [8], init_scale=[0.5, 1.0], lr=0.2, epochs=7, batch_size=10, generator=3,
                             threads=1)
    ref = nets.MLP(4, [8], 1, init_scale=[0.5, 1.0], generator=3)
    nets.train(ref, X, y.float()[:, None], loss="mse", optimizer="sgd", lr=0.2, epochs=7, batch_size=10,
               generator=3, threads=1)
    for a, b in zip(net.layers, ref.layers):
        torch.testing.assert_close(a.weight, b.weight, rtol=0, atol=0)
    torch.testing.assert_close(net.initial_weight(0), ref.initial_weight(0), rtol=0, atol=0)


def test_fit_mlp_classifier_learns_separable_classes():
    g = torch.Generator().manual_seed(0)
    centres = 3 * torch.eye(3, 5)
    y = torch.arange(3).repeat_interleave(40)
    X = centres[y] + 0.3 * torch.randn(120, 5, generator=g)
    net = fit_mlp_classifier(X, y, 3, [32], lr=0.2, epochs=200, batch_size=None, generator=0, threads=1)
    assert net.layers[-1].out_features == 3
    pred = predict_classes(net, X)
    assert pred.dtype == torch.long and pred.device.type == "cpu"
    assert rfm.accuracy(y, pred) == 1.0


def test_fit_mlp_classifier_checks_its_inputs():
    X = torch.randn(10, 3)
    with pytest.raises(ValueError, match="rows"):
        fit_mlp_classifier(X, torch.zeros(9, dtype=torch.long), 2, [4])
    with pytest.raises(ValueError, match="n_classes"):
        fit_mlp_classifier(X, torch.zeros(10, dtype=torch.long), 1, [4])
    with pytest.raises(TypeError, match="MLP"):
        predict_classes(torch.nn.Linear(3, 1), X)


def test_nfm_diagonal_is_the_diagonal_of_the_nfm():
    net = nets.MLP(6, [5], 2, generator=0, dtype="float64")
    for sub in (False, True):
        torch.testing.assert_close(nets.nfm(net, 0, subtract_init=sub, diagonal=True),
                                   nets.nfm(net, 0, subtract_init=sub).diagonal(), rtol=1e-14, atol=1e-14)
