"""Networks, training, neural feature matrices and per-layer AGOPs, against closed forms in float64."""
import functools

import pytest
import torch

import rfm
from rfm import nets

# small networks train fastest on one CPU thread (and the thread count is restored afterwards)
train = functools.partial(nets.train, threads=1)


def _data(n=40, d=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("layer", [0, 1, 2])
def test_linear_network_layer_agop_is_gram_of_the_later_weights(layer):
    # f(h) = P h with P = W_2 ... W_layer for every input, so AGOP_layer = P^T P whatever the data
    net = nets.MLP(6, [5, 4], 3, activation="linear", dtype="float64", generator=1)
    X = _data()
    P = torch.eye(net.weight(layer).shape[1], dtype=torch.float64)
    for l in range(layer, net.n_layers):
        P = net.weight(l).detach() @ P
    torch.testing.assert_close(nets.layer_agop(net, X, layer), P.T @ P, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("activation,derivative", [
    ("relu", lambda z: (z > 0).double()),
    ("tanh", lambda z: 1 - torch.tanh(z) ** 2),
])
def test_one_hidden_layer_agop_matches_explicit_formula(activation, derivative):
    # f_c(x) = a_c . sigma(W x + b) + b'_c:  grad f_c(x) = W^T (a_c * sigma'(W x + b))
    net = nets.MLP(6, [7], 2, activation=activation, bias=True, dtype="float64", generator=2)
    with torch.no_grad():
        for lin in net.layers:
            lin.bias.normal_(generator=torch.Generator().manual_seed(3))
    X = _data()
    W, b = net.layers[0].weight.detach(), net.layers[0].bias.detach()
    A = net.layers[1].weight.detach()  # (c, k)
    D = derivative(X @ W.T + b)  # (n, k)
    grads = torch.einsum("ck,nk,kd->ncd", A, D, W)
    expected = torch.einsum("ncd,nce->de", grads, grads) / X.shape[0]
    torch.testing.assert_close(nets.layer_agop(net, X, 0), expected, rtol=1e-12, atol=1e-12)
    centred = expected - torch.einsum("cd,ce->de", grads.mean(0), grads.mean(0))
    torch.testing.assert_close(nets.layer_agop(net, X, 0, center=True), centred, rtol=1e-10, atol=1e-12)


def test_hidden_layer_agop_is_taken_at_the_layer_inputs():
    # AGOP w.r.t. the input of layer 1 of a 2-hidden-layer relu net = explicit formula at h_1 = relu(W_0 x)
    net = nets.MLP(5, [6, 4], 1, dtype="float64", generator=4)
    X = _data(d=5)
    H = torch.relu(X @ net.weight(0).detach().T)
    W1, a = net.weight(1).detach(), net.weight(2).detach()[0]
    grads = (a * (H @ W1.T > 0).double()) @ W1  # (n, 6)
    torch.testing.assert_close(nets.layer_agop(net, X, 1), grads.T @ grads / X.shape[0], rtol=1e-12, atol=1e-12)


def test_readout_layer_agop_equals_its_neural_feature_matrix():
    net = nets.MLP(4, [8], 3, dtype="float64", generator=5)
    torch.testing.assert_close(nets.layer_agop(net, _data(d=4), 1), nets.nfm(net, 1), rtol=1e-12, atol=1e-12)


def test_layer_agop_power_and_normalisation_follow_feature_update():
    net = nets.MLP(6, [8], 1, dtype="float64", generator=6)
    X = _data()
    A = nets.layer_agop(net, X, 0)
    torch.testing.assert_close(nets.layer_agop(net, X, 0, power=0.5, normalize="max"),
                               rfm.feature_update(A, 0.5, "max"))


def test_nfm_is_gram_of_weights_and_vanishes_at_init_with_init_removed():
    net = nets.MLP(6, [8], 1, generator=7)
    W = net.weight(0).detach().double()
    torch.testing.assert_close(nets.nfm(net, 0), W.T @ W)
    assert float(nets.nfm(net, 0, subtract_init=True).abs().max()) == 0.0


def test_initial_restores_the_weights_of_a_trained_network():
    net = nets.MLP(6, [8], 1, bias=True, generator=8)
    W0 = net.weight(0).detach().clone()
    X = _data().float()
    train(net, X, X[:, 0] * X[:, 1], optimizer="adam", lr=1e-2, epochs=5)
    assert not torch.equal(net.weight(0), W0)
    net0 = net.initial()
    torch.testing.assert_close(net0.weight(0).detach(), W0, rtol=0, atol=0)
    assert float(net0.layers[0].bias.detach().abs().max()) == 0.0
    assert not torch.equal(net.weight(0), W0)  # the original is untouched


@pytest.mark.parametrize("init", ["normal", "uniform"])
def test_init_scale_sets_the_weight_scale_per_layer(init):
    net = nets.MLP(400, [300], 1, init=init, init_scale=[0.1, 1.0], generator=9)
    std = float(net.weight(0).detach().std())
    expected = 0.1 / 400**0.5 * (1.0 if init == "normal" else 3**-0.5)  # U(-b, b) has std b / sqrt(3)
    assert abs(std / expected - 1) < 0.02


def test_same_seed_gives_the_same_network_and_the_same_training():
    X = _data().float()
    y = X[:, 0] * X[:, 1]
    runs = []
    for _ in range(2):
        net = nets.MLP(6, [16], 1, generator=3)
        hist = train(net, X, y, optimizer="sgd", lr=0.05, epochs=3, batch_size=8, generator=11)
        runs.append((net.weight(0).detach().clone(), [h["train_loss"] for h in hist]))
    torch.testing.assert_close(runs[0][0], runs[1][0], rtol=0, atol=0)
    assert runs[0][1] == runs[1][1]


@pytest.mark.parametrize("optimizer,batch_size", [("sgd", None), ("sgd", 16), ("adam", None), ("adam", 16)])
def test_training_fits_a_small_regression(optimizer, batch_size):
    X = _data(n=64).float()
    y = X[:, 0] - 2 * X[:, 1]
    net = nets.MLP(6, [32], 1, generator=0)
    lr = 0.05 if optimizer == "sgd" else 1e-2
    hist = train(net, X, y, optimizer=optimizer, lr=lr, epochs=150, batch_size=batch_size, X_val=X, y_val=y)
    assert hist[-1]["val_loss"] < 0.05 * float(y.var())


def test_cross_entropy_training_classifies_and_reports_the_metric():
    X = _data(n=80).float()
    labels = (X[:, 0] > 0).long() + (X[:, 1] > 0).long()
    net = nets.MLP(6, [32], 3, generator=0)
    acc = lambda out, y: (out.argmax(1) == y).double().mean()
    hist = train(net, X, labels, loss="ce", optimizer="adam", lr=1e-2, epochs=200, X_val=X, y_val=labels,
                      metric=acc, eval_every=50)
    assert [h["epoch"] for h in hist] == [50, 100, 150, 200]
    assert hist[-1]["val_metric"] >= 0.95


def test_cross_entropy_needs_integer_labels():
    X = _data().float()
    with pytest.raises(ValueError, match="integer class labels"):
        train(nets.MLP(6, [4], 2), X, X[:, :2], loss="ce", epochs=1)


def test_callback_can_stop_training():
    X = _data().float()
    hist = train(nets.MLP(6, [4], 1), X, X[:, 0], epochs=50, callback=lambda m, r: r["epoch"] == 3)
    assert [h["epoch"] for h in hist] == [1, 2, 3]


def test_num_threads_is_restored_after_the_block():
    before = torch.get_num_threads()
    with nets.num_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="activation"):
        nets.MLP(3, [4], activation="swish")
    with pytest.raises(ValueError, match="init_scale"):
        nets.MLP(3, [4, 4], init_scale=[1.0, 1.0])
    with pytest.raises(ValueError, match="layer"):
        nets.layer_agop(nets.MLP(3, [4]), torch.randn(5, 3), 2)
    with pytest.raises(ValueError, match="optimizer"):
        train(nets.MLP(3, [4]), torch.randn(5, 3), torch.randn(5), optimizer="lbfgs")


def test_nfa_table_reports_every_hidden_layer_power_and_kind():
    net = nets.MLP(6, [8, 8], 1, dtype="float64", generator=0)
    rows = nets.nfa_table(net, _data(), powers=(0.5, 1.0), kinds=("pearson", "cosine"))
    assert [(r["layer"], r["power"], r["kind"]) for r in rows] == [
        (l, p, k) for l in (0, 1) for p in (0.5, 1.0) for k in ("pearson", "cosine")]
    for r in rows:
        assert -1 <= r["trained"] <= 1 and -1 <= r["init"] <= 1
        assert r["trained"] == pytest.approx(r["init"])  # an untrained network is its own initialisation
        assert r["init"] == pytest.approx(r["init_nfa"])
    assert "trained" in nets.format_nfa_table(rows)


def test_nfa_holds_exactly_for_the_readout_layer_with_power_one():
    net = nets.MLP(5, [8], 3, dtype="float64", generator=1)
    (row,) = nets.nfa_table(net, _data(d=5), layers=[1], powers=(1.0,), kinds=("pearson",))
    assert row["trained"] == pytest.approx(1.0, abs=1e-12)


def test_training_makes_the_first_layer_nfm_match_the_agop_on_a_low_rank_task():
    X, y = rfm.data.low_rank_polynomial(600, 10, generator=0, dtype="float32")
    net = nets.MLP(10, [64], 1, init_scale=[0.1, 1.0], generator=0)
    train(net, X, y, optimizer="adam", lr=3e-3, epochs=60, batch_size=32)
    (row,) = nets.nfa_table(net, X, powers=(0.5,), kinds=("pearson",))
    assert row["trained"] >= 0.9 and row["trained"] >= row["init"] + 0.3


def test_train_works_when_called_under_no_grad():
    from rfm import nets

    X, y = rfm.data.low_rank_polynomial(32, 4, generator=0, dtype="float32")
    model = nets.MLP(4, [8], 1, generator=0)
    with torch.no_grad():
        history = nets.train(model, X, y, epochs=2, lr=0.01)
    assert len(history) == 2 and history[-1]["train_loss"] > 0


def test_train_accepts_an_optimizer_instance_and_records_the_start():
    from rfm import nets

    X, y = rfm.data.low_rank_polynomial(32, 4, generator=0, dtype="float32")
    model = nets.MLP(4, [8], 1, generator=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    history = nets.train(model, X, y, optimizer=opt, epochs=3, record_initial=True)
    assert [r["epoch"] for r in history] == [0, 1, 2, 3]
    with torch.no_grad():
        first = float(((nets.MLP(4, [8], 1, generator=0)(X)[:, 0] - y) ** 2).mean())
        assert history[0]["train_loss"] == pytest.approx(first)
    with pytest.raises(ValueError, match="optimizer must be one of"):
        nets.train(model, X, y, optimizer="rmsprop", epochs=1)


def test_quadratic_uniform_init_is_the_papers_scaled_kaiming_uniform():
    # the paper's code: every entry of a layer with fan-in m is U[-s/sqrt(m), s/sqrt(m)], drawn layer by layer
    s, d_in, width, d_out = 0.5, 22, 64, 11
    net = nets.MLP(d_in, [width], d_out, activation="quadratic", init="uniform", init_scale=s, bias=False,
                   dtype="float64", generator=torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(5)
    for layer, (rows, fan_in) in enumerate([(width, d_in), (d_out, width)]):
        W = net.weight(layer).detach()
        expected = (2 * torch.rand(rows, fan_in, generator=g, dtype=torch.float64) - 1) * (s / fan_in**0.5)
        torch.testing.assert_close(W, expected, rtol=0, atol=0)
        bound = s / fan_in**0.5
        assert float(W.abs().max()) <= bound and float(W.abs().max()) > 0.9 * bound  # fills the interval
    assert all(lin.bias is None for lin in net.layers)
    x = torch.randn(3, d_in, dtype=torch.float64)
    W1, W2 = net.weight(0).detach(), net.weight(1).detach()
    torch.testing.assert_close(net(x), (x @ W1.T).square() @ W2.T)


def test_training_with_an_adamw_instance_is_reproducible_with_the_seed():
    X = _data(n=48)
    Y = torch.nn.functional.one_hot((X[:, 0] > 0).long(), 2).double()
    runs = []
    for seed in (7, 7, 8):
        g = torch.Generator().manual_seed(seed)
        net = nets.MLP(6, [16], 2, activation="quadratic", init="uniform", dtype="float64", generator=g)
        opt = torch.optim.AdamW(net.parameters(), lr=1e-2, betas=(0.9, 0.98), weight_decay=1.0)
        hist = train(net, X, Y, optimizer=opt, epochs=4, batch_size=8, generator=g, record_initial=True)
        runs.append((nets.nfm(net, 0), [h["train_loss"] for h in hist]))
    torch.testing.assert_close(runs[0][0], runs[1][0], rtol=0, atol=0)
    assert runs[0][1] == runs[1][1] and len(runs[0][1]) == 5
    assert not torch.equal(runs[0][0], runs[2][0])
