"""rfm.core.patches, rfm.nets.conv, rfm.models.conv and the local-signal image tasks: known answers (conv2d, closed
forms, float64 autograd and finite differences, a brute-force double loop), batching, seeds and bad inputs."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.exceptions import NotFittedError
from torch import nn

import rfm
import rfm.models.conv
from rfm.core.patches import patches
from rfm.data.images import STAR, bars_task, noisy_frame, star_task
from rfm.models.conv import ConvRFM, ConvRFMClassifier, DeepConvRFM
from rfm.nets.conv import (
    ConvNet,
    conv_from_feature_matrix,
    conv_layers,
    conv_patches,
    filter_nfm,
    patch_agop,
    patch_gradients,
)

f64 = torch.float64


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


# ----------------------------------------------------------------------------------------------------------------
# Patches and the filter matrix


@pytest.mark.filterwarnings("ignore:Using padding=.same. with even kernel")
@pytest.mark.parametrize("kw", [dict(), dict(padding=1), dict(padding="same"), dict(stride=2, padding=(1, 2)),
                                dict(dilation=2, padding="same"), dict(q=(3, 5), padding="valid"),
                                dict(q=(2, 4), padding="same")])
def test_patches_times_filters_is_conv2d(kw):
    g = _gen()
    kw = dict(kw)
    q = kw.pop("q", 3)
    qh, qw = (q, q) if isinstance(q, int) else q
    X = torch.randn(3, 2, 9, 11, generator=g, dtype=f64)
    W = torch.randn(4, 2, qh, qw, generator=g, dtype=f64)
    U = patches(X, q, **kw)
    ref = F.conv2d(X, W, **kw)
    out = (U @ W.reshape(4, -1).T).transpose(1, 2).reshape(ref.shape)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)


def test_patches_of_flattened_images_and_circular_padding():
    g = _gen(1)
    X = torch.randn(2, 3, 6, 6, generator=g, dtype=f64)
    W = torch.randn(5, 3, 3, 3, generator=g, dtype=f64)
    conv = nn.Conv2d(3, 5, 3, padding="same", padding_mode="circular", bias=False, dtype=f64)
    with torch.no_grad():
        conv.weight.copy_(W)
        ref = conv(X)
    U = patches(X.reshape(2, -1), 3, padding="same", shape=(3, 6, 6), padding_mode="circular")
    torch.testing.assert_close((U @ W.reshape(5, -1).T).transpose(1, 2).reshape(ref.shape), ref)
    torch.testing.assert_close(conv_patches(conv, X), U)
    # a single-channel (n, H, W) batch is read as C = 1
    assert patches(X[:, 0], 3).shape == (2, 16, 9)


def test_filter_nfm_is_the_sum_of_filter_outer_products():
    conv = nn.Conv2d(3, 7, 3, bias=False)
    W = conv.weight.detach().to(f64)
    expected = sum(torch.outer(W[o].reshape(-1), W[o].reshape(-1)) for o in range(7))
    torch.testing.assert_close(filter_nfm(conv), expected)
    torch.testing.assert_close(filter_nfm(conv.weight), expected)
    assert filter_nfm(conv).dtype == f64 and filter_nfm(conv).shape == (27, 27)


# ----------------------------------------------------------------------------------------------------------------
# The patch-AGOP of a network


class _MeanConv(nn.Module):
    """f(x) = mean over positions of a one-filter linear convolution (no nonlinearity)."""

    def __init__(self, w, padding):
        super().__init__()
        self.conv = nn.Conv2d(w.shape[1], 1, w.shape[-1], padding=padding, bias=False, dtype=w.dtype)
        with torch.no_grad():
            self.conv.weight.copy_(w)

    def forward(self, x):
        return self.conv(x).mean((2, 3))


@pytest.mark.parametrize("padding", [0, "same"])
def test_patch_agop_of_a_linear_one_filter_conv_is_w_wT_over_P(padding):
    """f = (1/P) sum_p w.u_p: every patch gradient is w / P, so the patch-AGOP (sum over patches, mean over images)
    is P (w / P)(w / P)^T = w w^T / P."""
    g = _gen(2)
    w = torch.randn(1, 2, 3, 3, generator=g, dtype=f64)
    X = torch.randn(5, 2, 7, 8, generator=g, dtype=f64)
    P = 7 * 8 if padding == "same" else 5 * 6
    A = patch_agop(_MeanConv(w, padding), X)
    torch.testing.assert_close(A, torch.outer(w.reshape(-1), w.reshape(-1)) / P, rtol=1e-12, atol=1e-15)


def _net(channels=(3, 4), d_out=2, shape=(1, 6, 6), seed=0):
    return ConvNet(shape, channels, d_out, dtype="float64", generator=seed)


def test_patch_gradients_fold_back_to_the_input_gradient():
    """Chain rule: summing the patch gradients back onto the pixels (F.fold) gives grad_x f (layer 0) and the
    gradient with respect to the second layer's input (layer 1)."""
    net = _net()
    X = torch.randn(4, 36, generator=_gen(3), dtype=f64)
    G = patch_gradients(net, X, 0)  # (n, c, P, D)
    n, c, P, D = G.shape
    assert (n, c, P, D) == (4, 2, 36, 9)
    for k in range(c):
        Xr = X.clone().requires_grad_(True)
        (gx,) = torch.autograd.grad(net(Xr)[:, k].sum(), Xr)
        folded = F.fold(G[:, k].transpose(1, 2), (6, 6), 3, padding=1).reshape(4, -1)
        torch.testing.assert_close(folded, gx, rtol=1e-10, atol=1e-12)
    G1 = patch_gradients(net, X, 1)
    h1 = torch.relu(net.convs[0](X.reshape(4, 1, 6, 6))).detach().requires_grad_(True)
    out = net.readout(torch.relu(net.convs[1](h1)).mean((2, 3)))
    for k in range(c):
        (gh,) = torch.autograd.grad(out[:, k].sum(), h1, retain_graph=True)
        folded = F.fold(G1[:, k].transpose(1, 2), (6, 6), 3, padding=1)
        torch.testing.assert_close(folded, gh, rtol=1e-10, atol=1e-12)


def test_patch_gradients_of_a_generic_model_with_bias_and_stride():
    """Any module with a Conv2d inside (here with a bias, stride 2, then an in-place ReLU and max pooling, as in
    VGG): the folded patch gradients are grad_x f."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(2, 3, 3, stride=2, padding=1, bias=True), nn.ReLU(inplace=True), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(3 * 2 * 2, 2)).to(f64)
    with torch.no_grad():
        net[0].bias.normal_()
    X = torch.randn(3, 2, 8, 8, generator=_gen(11), dtype=f64)
    G = patch_gradients(net, X)
    assert G.shape == (3, 2, 16, 18)
    for k in range(2):
        Xr = X.clone().requires_grad_(True)
        (gx,) = torch.autograd.grad(net(Xr)[:, k].sum(), Xr)
        folded = F.fold(G[:, k].transpose(1, 2), (8, 8), 3, padding=1, stride=2)
        torch.testing.assert_close(folded, gx, rtol=1e-10, atol=1e-12)


def test_patch_agop_equals_finite_differences():
    """Central differences of f when the conv output at position p moves by eps W[:, k] (a change of patch entry
    u_p[k] by eps), in float64; the AGOP built from them matches patch_agop."""
    net = _net(channels=(2, 3), d_out=2, shape=(1, 5, 5), seed=4)
    X = torch.randn(2, 25, generator=_gen(5), dtype=f64)
    conv = net.convs[1]
    Wf = conv.weight.detach().reshape(conv.weight.shape[0], -1)
    eps = 1e-6
    n, P, D, c = 2, 25, Wf.shape[1], 2

    def f_shifted(p, k, delta):
        def hook(mod, inp, out):
            out = out.clone()
            out[:, :, p // 5, p % 5] += delta * Wf[:, k]
            return out
        h = conv.register_forward_hook(hook)
        try:
            with torch.no_grad():
                return net(X)
        finally:
            h.remove()

    G = torch.empty(n, c, P, D, dtype=f64)
    with rfm.nets.num_threads(1):  # 900 tiny forward passes: threads only add overhead
        for p in range(P):
            for k in range(D):
                G[:, :, p, k] = (f_shifted(p, k, eps) - f_shifted(p, k, -eps)) / (2 * eps)
    torch.testing.assert_close(patch_gradients(net, X, 1), G, rtol=1e-6, atol=1e-8)
    flat = G.reshape(-1, D)
    torch.testing.assert_close(patch_agop(net, X, 1), flat.T @ flat / n, rtol=1e-6, atol=1e-9)


def test_patch_agop_does_not_depend_on_the_batch_size_and_selects_layers():
    net = _net()
    X = torch.randn(7, 36, generator=_gen(6), dtype=f64)
    A = patch_agop(net, X, 1)
    torch.testing.assert_close(patch_agop(net, X, 1, batch_size=3), A, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(patch_agop(net, X, 1, batch_size=7), A, rtol=1e-12, atol=1e-14)
    names = [name for name, _ in conv_layers(net)]
    assert names == ["convs.0", "convs.1"]
    torch.testing.assert_close(patch_agop(net, X, "convs.1"), A)
    torch.testing.assert_close(patch_agop(net, X, net.convs[1]), A)
    torch.testing.assert_close(patch_agop(net, X, -1), A)
    M = patch_agop(net, X, 1, power=0.5, normalize="max")
    torch.testing.assert_close(M, rfm.feature_update(A, 0.5, "max"))


def test_patch_agop_of_a_trained_linear_net_and_bad_inputs():
    net = _net()
    X = torch.randn(3, 36, dtype=f64)
    with pytest.raises(ValueError, match="no Conv2d named"):
        patch_agop(net, X, "readout")
    with pytest.raises(ValueError, match="layer"):
        patch_agop(net, X, 2)
    with pytest.raises(ValueError, match="not part of model"):
        patch_agop(net, X, nn.Conv2d(1, 1, 3))
    with pytest.raises(ValueError, match="no torch.nn.Conv2d"):
        patch_agop(nn.Linear(36, 1), X)
    with pytest.raises(ValueError, match="grouped"):
        patch_agop(nn.Sequential(nn.Conv2d(2, 2, 3, groups=2), nn.Flatten()), torch.randn(2, 2, 5, 5))
    with pytest.raises(ValueError, match="NaN"):
        patch_agop(net, torch.full((2, 36), float("nan")))
    with pytest.raises(ValueError, match="batch_size"):
        patch_agop(net, X, batch_size=0)
    with pytest.raises(TypeError, match="Module"):
        patch_agop("net", X)
    with pytest.raises(TypeError, match="Conv2d"):
        filter_nfm(nn.Linear(3, 3))
    with pytest.raises(ValueError, match="4-D"):
        filter_nfm(torch.ones(3, 3))


# ----------------------------------------------------------------------------------------------------------------
# The CNN


def test_convnet_is_seeded_takes_flat_or_4d_input_and_trains_with_rfm_train():
    a, b = ConvNet((1, 8, 8), (4,), 2, generator=3), ConvNet((1, 8, 8), (4,), 2, generator=3)
    assert torch.equal(a.convs[0].weight, b.convs[0].weight)
    assert not torch.equal(a.convs[0].weight, ConvNet((1, 8, 8), (4,), 2, generator=4).convs[0].weight)
    assert all(m.bias is None for m in a.convs) and a.readout.bias is None
    X = torch.randn(20, 64, generator=_gen(7))
    torch.testing.assert_close(a(X), a(X.reshape(20, 1, 8, 8)))
    # weights ~ N(0, s^2 / fan_in)
    big = ConvNet((3, 8, 8), (4000,), init_scale=2.0)
    assert abs(float(big.convs[0].weight.detach().std()) - 2.0 / math.sqrt(27)) < 0.01
    y = (X[:, :32].sum(1) > 0).long()
    hist = rfm.nets.train(a, X, y, loss="ce", optimizer="adam", lr=1e-2, epochs=30, record_initial=True)
    assert hist[-1]["train_loss"] < hist[0]["train_loss"]
    init = a.initial()
    assert torch.equal(init.convs[0].weight, b.convs[0].weight)
    assert not torch.equal(a.convs[0].weight, b.convs[0].weight)
    with pytest.raises(ValueError, match="channels"):
        ConvNet((8, 8), ())
    with pytest.raises(ValueError, match="shape"):
        ConvNet((8,), (4,))


# ----------------------------------------------------------------------------------------------------------------
# ConvRFM


def _brute_kernel(Xa, Xb, L, pad=1):
    """K(a, b) = (1/P) sum_p exp(-|u_p(a) - u_p(b)| / L), with explicit loops over images and positions."""
    A = F.pad(Xa, (pad,) * 4)
    B = F.pad(Xb, (pad,) * 4)
    H, W = Xa.shape[-2:]
    K = torch.zeros(len(Xa), len(Xb), dtype=f64)
    for i in range(len(Xa)):
        for j in range(len(Xb)):
            total = 0.0
            for r in range(H):
                for c in range(W):
                    d = (A[i, :, r:r + 3, c:c + 3] - B[j, :, r:r + 3, c:c + 3]).norm()
                    total += math.exp(-float(d) / L)
            K[i, j] = total / (H * W)
    return K


def test_convrfm_kernel_equals_a_double_loop_at_M_identity():
    g = _gen(8)
    X = torch.randn(6, 2, 5, 5, generator=g, dtype=f64)
    Z = torch.randn(4, 2, 5, 5, generator=g, dtype=f64)
    y = torch.randn(6, generator=g, dtype=f64)
    model = ConvRFM(iters=0, bandwidth=3.0, reg=1e-2, dtype="float64").fit(X, y)
    K = _brute_kernel(X, X, 3.0)
    Uz, Ux = model.patches(Z), model.patches(X)
    torch.testing.assert_close(model.kernel_matrix(Uz, Ux), _brute_kernel(Z, X, 3.0), rtol=1e-10, atol=1e-12)
    alpha = torch.linalg.solve(K + 1e-2 * torch.eye(6, dtype=f64), y)
    torch.testing.assert_close(model.predict(Z), _brute_kernel(Z, X, 3.0) @ alpha, rtol=1e-8, atol=1e-10)
    assert model.predict(Z).shape == (4,)


def test_convrfm_blocks_do_not_change_the_kernel():
    g = _gen(9)
    U = torch.randn(7, 20, 9, generator=g, dtype=f64)
    V = torch.randn(5, 20, 9, generator=g, dtype=f64)
    K = ConvRFM(dtype="float64").kernel_matrix(U, V)
    tiny = ConvRFM(dtype="float64", mem_gb=1e-9)  # one row and one position per block
    torch.testing.assert_close(tiny.kernel_matrix(U, V), K, rtol=1e-12, atol=1e-14)
    alpha = torch.randn(5, 2, generator=g, dtype=f64)
    torch.testing.assert_close(tiny._patch_agop(U, V, alpha), ConvRFM(dtype="float64")._patch_agop(U, V, alpha),
                               rtol=1e-10, atol=1e-14)


def _autograd_patch_agop(model, Z, exclude=None):
    """The patch-AGOP of the fitted predictor by float64 autograd, with explicit differences (no coincident points
    unless excluded: ``exclude[j]`` is a training row whose aligned pairs are left out for image j)."""
    Ux = model.patches(model._train_images)  # untransformed training patches
    L = model.M_.sqrt_factor(f64, "cpu")
    L = torch.eye(Ux.shape[2], dtype=f64) if L is None else L
    alpha = model.alpha_
    bw = model.kernel_.bandwidth
    Uz = model.patches(Z).clone().requires_grad_(True)
    Uz.shape[1]
    total = torch.zeros(Ux.shape[2], Ux.shape[2], dtype=f64)
    for j in range(len(Z)):
        keep = [i for i in range(len(Ux)) if exclude is None or i != exclude[j]]
        diff = (Uz[j][None] - Ux[keep]) @ L  # (n', P, r)
        k = torch.exp(-diff.norm(dim=2) / bw).mean(1)  # (n',)
        out = k @ alpha[keep]
        for cidx in range(out.shape[0]):
            (gz,) = torch.autograd.grad(out[cidx], Uz, retain_graph=True)
            total += gz[j].T @ gz[j]
    return total / len(Z)


def test_convrfm_patch_agop_closed_form_equals_autograd():
    task = bars_task(12, size=6, bar=(1, 3), sigma=0.3, generator=1, dtype="float64")
    X = task.X.reshape(12, 1, 6, 6)
    model = ConvRFMClassifier(iters=1, bandwidth=2.0, dtype="float64").fit(X[:8], task.y[:8])
    model._train_images = X[:8]
    # at new images: no coincident pairs
    torch.testing.assert_close(model.patch_agop(X[8:]), _autograd_patch_agop(model, X[8:]), rtol=1e-8,
                               atol=1e-12)
    # at the training images (the update inside fit): the aligned self pairs carry weight 0
    first = ConvRFMClassifier(iters=0, bandwidth=2.0, dtype="float64").fit(X[:8], task.y[:8])
    first._train_images = X[:8]
    expected = _autograd_patch_agop(first, X[:8], exclude=list(range(8)))
    torch.testing.assert_close(model.agops_[0], expected, rtol=1e-8, atol=1e-12)
    torch.testing.assert_close(model.Ms_[1], rfm.feature_update(expected, 1.0, "trace"), rtol=1e-7, atol=1e-12)


def test_convrfm_patch_agop_leaves_out_the_pairs_it_is_told_to():
    """``self_index[j] = i`` drops the aligned pairs of evaluation image j with training image i (the training
    image j itself in fit, where the Laplace kernel has its cusp); checked against autograd without those pairs."""
    g = _gen(12)
    Ux = torch.randn(5, 4, 3, generator=g, dtype=f64)
    Uz = torch.randn(3, 4, 3, generator=g, dtype=f64)
    alpha = torch.randn(5, 2, generator=g, dtype=f64)
    model = ConvRFM(bandwidth=1.5, dtype="float64")
    A = model._patch_agop(Uz, Ux, alpha, self_index=torch.tensor([2, -1, 0]))
    Z = Uz.clone().requires_grad_(True)
    total = torch.zeros(3, 3, dtype=f64)
    for j, skip in enumerate([2, -1, 0]):
        keep = [i for i in range(5) if i != skip]
        out = torch.exp(-(Z[j][None] - Ux[keep]).norm(dim=2) / 1.5).mean(1) @ alpha[keep]
        for c in range(2):
            (gz,) = torch.autograd.grad(out[c], Z, retain_graph=True)
            total += gz[j].T @ gz[j]
    torch.testing.assert_close(A, total / 3, rtol=1e-10, atol=1e-14)
    assert not torch.allclose(A, model._patch_agop(Uz, Ux, alpha))


def test_convrfm_is_seeded_and_records_its_history():
    task = star_task(24, size=16, generator=3)
    kw = dict(shape=(3, 16, 16), iters=2, bandwidth=5.0, max_agop_points=10)
    a = ConvRFMClassifier(**kw, random_state=1).fit(task.X[:16], task.y[:16], task.X[16:], task.y[16:])
    b = ConvRFMClassifier(**kw, random_state=1).fit(task.X[:16], task.y[:16], task.X[16:], task.y[16:])
    c = ConvRFMClassifier(**kw, random_state=2).fit(task.X[:16], task.y[:16], task.X[16:], task.y[16:])
    assert torch.equal(a.Ms_[-1], b.Ms_[-1]) and not torch.equal(a.Ms_[-1], c.Ms_[-1])
    assert [r["iteration"] for r in a.history_] == [0, 1, 2]
    assert all(0 <= r["val_accuracy"] <= 1 for r in a.history_)
    assert a.history_[-1]["val_accuracy"] == a.score(task.X[16:], task.y[16:])
    assert len(a.agops_) == 2 and a.Ms_[0].shape == (27, 27)
    assert torch.equal(a.Ms_[0], torch.eye(27, dtype=f64))
    assert a.predict(task.X[16:]).dtype == torch.long


def test_convrfm_bad_inputs():
    X = torch.randn(6, 1, 5, 5)
    y = torch.tensor([0, 1, 0, 1, 0, 1])
    with pytest.raises(ValueError, match="radial"):
        ConvRFM(kernel="quadratic").fit(X, y)
    with pytest.raises(ValueError, match="reg"):
        ConvRFM(reg=-1).fit(X, y)
    with pytest.raises(ValueError, match="padding"):
        ConvRFM(padding="full").fit(X, y)
    with pytest.raises(ValueError, match="padding_mode"):
        ConvRFM(padding_mode="mirror").fit(X, y)
    with pytest.raises(NotFittedError):
        ConvRFM().predict(X)
    with pytest.raises(ValueError, match="columns but shape"):
        ConvRFM(shape=(1, 4, 4)).fit(X.reshape(6, -1), y)
    with pytest.raises(ValueError, match="rows"):
        ConvRFM().fit(X, torch.ones(5))
    with pytest.raises(ValueError, match="together"):
        ConvRFM().fit(X, y.double(), X_val=X)
    with pytest.raises(ValueError, match="NaN"):
        ConvRFM().fit(torch.full((2, 1, 5, 5), float("nan")), torch.ones(2))
    with pytest.raises(ValueError, match="continuous"):
        ConvRFMClassifier().fit(X, y + 0.5)
    m = ConvRFMClassifier(bandwidth=2.0).fit(X, y)
    with pytest.raises(ValueError, match="expecting 25 features"):
        m.predict(torch.randn(2, 1, 6, 6))
    with pytest.raises(ValueError, match="fitted on"):
        m.predict(torch.randn(2, 1, 25, 1))
    with pytest.raises(ValueError, match="do not fit"):
        patches(torch.randn(1, 1, 2, 2), 3)


def test_convrfm_reads_rows_without_a_shape_as_one_by_d_signals():
    g = _gen(14)
    X, y = torch.randn(8, 10, generator=g, dtype=f64), torch.randn(8, generator=g, dtype=f64)
    rows = ConvRFM(iters=1, bandwidth=3.0, dtype="float64").fit(X, y)
    images = ConvRFM(iters=1, bandwidth=3.0, dtype="float64").fit(X.reshape(8, 1, 1, 10), y)
    assert rows.image_shape_ == (1, 1, 10) and rows.n_features_in_ == 10
    assert torch.equal(rows.predict(X), images.predict(X.reshape(8, 1, 1, 10)))


def test_convrfm_arrays_in_give_arrays_out_with_the_values_of_tensors():
    task = star_task(20, size=16, generator=5, dtype="float64")
    model = ConvRFMClassifier((3, 16, 16), iters=1, bandwidth=5.0, dtype="float64").fit(task.X[:14], task.y[:14])
    arr = model.decision_function(task.X[14:].numpy())
    assert isinstance(arr, np.ndarray) and arr.dtype == np.float64
    np.testing.assert_array_equal(arr, model.decision_function(task.X[14:]).numpy())
    labels = ConvRFMClassifier((3, 16, 16), iters=1, bandwidth=5.0, dtype="float64").fit(
        task.X[:14].numpy(), np.where(task.y[:14].numpy() == 1, "star", "noise"))
    assert set(labels.predict(task.X[14:].numpy())) <= {"star", "noise"}
    np.testing.assert_array_equal(labels.predict(task.X[14:].numpy()) == "star",
                                  model.predict(task.X[14:]).numpy() == 1)


def test_convrfm_deprecated_names_still_work():
    task = star_task(12, size=16, generator=6, dtype="float64")
    kw = dict(shape=(3, 16, 16), iters=1, bandwidth=5.0, dtype="float64", max_agop_points=5)
    new = ConvRFMClassifier(agop_power=0.5, random_state=3, **kw).fit(task.X, task.y)
    with pytest.warns(DeprecationWarning, match="power was renamed agop_power"):
        with pytest.warns(DeprecationWarning, match="generator was renamed random_state"):
            old = ConvRFMClassifier(power=0.5, generator=3, **kw).fit(task.X, task.y)
    assert torch.equal(old.Ms_[-1], new.Ms_[-1])


def test_filters_drawn_from_M_have_its_covariance_and_range():
    g = _gen(13)
    B = torch.randn(9, 9, generator=g, dtype=f64)
    M = B @ B.T
    conv = conv_from_feature_matrix(M, 1, 40_000, 3, generator=1, dtype="float64")
    assert conv.bias is None and not conv.weight.requires_grad and conv.weight.shape == (40_000, 1, 3, 3)
    target = M / M.trace()
    emp = filter_nfm(conv) / 40_000
    assert float((emp - target).norm() / target.norm()) < 0.03  # sampling error about sqrt(d / width) = 0.015
    # a rank-one M: every filter is a multiple of its eigenvector
    v = torch.randn(18, generator=g, dtype=f64)
    W = conv_from_feature_matrix(torch.outer(v, v), 2, 50, 3, generator=2, dtype="float64").weight.reshape(50, -1)
    # atol: the square roots of round-off eigenvalues
    torch.testing.assert_close(W - (W @ v)[:, None] * v / v.dot(v), torch.zeros_like(W), rtol=0, atol=1e-6)
    same = conv_from_feature_matrix(M, 1, 10, 3, generator=5).weight
    assert torch.equal(same, conv_from_feature_matrix(M, 1, 10, 3, generator=5).weight)
    with pytest.raises(ValueError, match="patch entries"):
        conv_from_feature_matrix(M, 2, 10, 3)
    with pytest.raises(ValueError, match="zero"):
        conv_from_feature_matrix(torch.zeros(9, 9), 1, 10, 3)


def test_deep_convrfm_stages():
    task = star_task(40, size=16, generator=4)
    kw = dict(iters=1, bandwidth=10.0, dtype="float64")
    one = DeepConvRFM((3, 16, 16), depth=1, random_state=0, **kw).fit(task.X[:24], task.y[:24])
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=_gen(0)))
    plain = ConvRFMClassifier((3, 16, 16), random_state=seed, **kw).fit(task.X[:24], task.y[:24])
    torch.testing.assert_close(one.decision_function(task.X[24:]), plain.decision_function(task.X[24:]))
    two = DeepConvRFM((3, 16, 16), depth=2, width=8, activation="relu", random_state=0, **kw)
    two.fit(task.X[:24], task.y[:24], task.X[24:], task.y[24:])
    assert len(two.models_) == 2 and len(two.layers_) == 1 and two.layers_[0].weight.shape == (8, 3, 3, 3)
    assert two.models_[1].Ms_[0].shape == (72, 72) and len(two.history_[1]) == 2
    H = torch.relu(F.conv2d(task.X[24:].reshape(-1, 3, 16, 16).double(), two.layers_[0].weight, padding=1))
    torch.testing.assert_close(two.decision_function(task.X[24:]), two.models_[1].decision_function(H))
    assert two.history_[1][-1]["val_accuracy"] == two.score(task.X[24:], task.y[24:])
    with pytest.raises(NotFittedError):
        DeepConvRFM(depth=2).predict(task.X)
    with pytest.raises(ValueError, match="activation"):
        DeepConvRFM(activation="tanh").fit(task.X[:24], task.y[:24])
    with pytest.raises(ValueError, match="stride"):
        DeepConvRFM(depth=2, stride=2).fit(task.X[:24], task.y[:24])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_convrfm_and_patch_agop_on_cuda_match_cpu():
    task = star_task(20, size=16, generator=0, dtype="float64")
    kw = dict(shape=(3, 16, 16), iters=1, bandwidth=5.0, dtype="float64")
    cpu = ConvRFMClassifier(**kw).fit(task.X[:12], task.y[:12])
    gpu = ConvRFMClassifier(**kw).fit(task.X[:12].cuda(), task.y[:12].cuda())
    torch.testing.assert_close(gpu.Ms_[-1], cpu.Ms_[-1], rtol=1e-8, atol=1e-12)
    out = gpu.decision_function(task.X[12:].cuda())
    assert out.device.type == "cuda"
    torch.testing.assert_close(out.cpu(), cpu.decision_function(task.X[12:]), rtol=1e-8, atol=1e-10)
    net = _net()
    X = torch.randn(5, 36, dtype=f64)
    A = patch_agop(net, X, 1)
    Ag = patch_agop(net.cuda(), X.cuda(), 1)
    assert Ag.device.type == "cuda"
    torch.testing.assert_close(Ag.cpu(), A, rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------------------------------------------
# The tasks


def test_bars_task_plants_oriented_bars_and_is_seeded():
    t = bars_task(40, generator=5)
    assert t.X.shape == (40, 256) and t.mask.shape == (40, 256)
    assert int((t.y == 0).sum()) == 20
    for i in range(40):
        m = t.mask[i].reshape(16, 16)
        rows, cols = m.any(1).sum().item(), m.any(0).sum().item()
        assert (rows, cols) == ((3, 7) if t.y[i] == 0 else (7, 3))
        assert int(m.sum()) == 21
    same = bars_task(40, generator=5)
    assert torch.equal(same.X, t.X) and torch.equal(same.y, t.y)
    assert not torch.equal(bars_task(40, generator=6).X, t.X)
    s = bars_task(4, sigma=0.0, amplitude=2.0)
    assert torch.equal(s.X, 2.0 * s.mask.float())
    with pytest.raises(ValueError, match="bar"):
        bars_task(4, bar=(3, 20))
    with pytest.raises(ValueError, match="sigma"):
        bars_task(4, sigma=-1)


def test_star_task_matches_its_template_and_is_seeded():
    t = star_task(30, generator=2)
    assert t.X.shape == (30, 3 * 32 * 32) and int(t.y.sum()) == 15
    for i in range(30):
        m = t.mask[i].reshape(3, 32, 32)
        if t.y[i] == 0:
            assert not m.any()
            continue
        assert not m[2].any() and torch.equal(m[0], m[1])
        r, c = torch.nonzero(m[0].any(1))[0, 0], torch.nonzero(m[0].any(0))[0, 0]
        assert 3 <= r <= 20 and 7 <= c <= 24
        assert torch.equal(m[0, r:r + 7, c:c + 7], STAR) and int(m[0].sum()) == int(STAR.sum())
    assert bool((t.X[t.mask] == 1.0).all())
    assert torch.equal(star_task(30, generator=2).X, t.X)
    added = star_task(30, generator=2, mode="add")
    noise_only = ~t.mask
    assert torch.equal(added.X[noise_only], t.X[noise_only])
    with pytest.raises(ValueError, match="star_channels"):
        star_task(4, channels=1)
    with pytest.raises(ValueError, match="mode"):
        star_task(4, mode="paint")


def test_noisy_frame_places_each_image_whole():
    X = torch.rand(5, 2 * 4 * 4, generator=_gen(3))
    t = noisy_frame(X, [0, 1, 2, 3, 4], shape=(2, 4, 4), frame=(9, 10), std=0.5, generator=1)
    assert t.X.shape == (5, 2 * 9 * 10)
    for i in range(5):
        m = t.mask[i].reshape(2, 9, 10)
        assert torch.equal(t.X[i].reshape(2, 9, 10)[m].reshape(2, 4, 4), X[i].reshape(2, 4, 4))
    assert torch.equal(noisy_frame(X, [0] * 5, shape=(2, 4, 4), frame=(9, 10), generator=1).mask, t.mask)
    with pytest.raises(ValueError, match="larger"):
        noisy_frame(X, [0] * 5, shape=(2, 4, 4), frame=(4, 10))


def test_patch_agop_sizes_its_batches_by_the_memory_budget(monkeypatch):
    net = _net()
    X = torch.randn(7, 36, generator=_gen(8), dtype=f64)
    full = patch_agop(net, X, 1, batch_size=7)
    sizes = []
    real = rfm.nets.conv.patch_gradients
    monkeypatch.setattr(rfm.nets.conv, "patch_gradients", lambda m, Xb, l: sizes.append(Xb.shape[0]) or real(m, Xb, l))
    # one image of layer 1: 36 patches of 2 x 9 numbers, 1 output: a budget of 1 byte gives one image per pass
    torch.testing.assert_close(patch_agop(net, X, 1, mem_bytes=1), full, rtol=1e-12, atol=1e-14)
    assert sizes == [1] * 7
    sizes.clear()
    patch_agop(net, X, 1, mem_bytes=2**30)
    assert sizes == [7]
    with pytest.raises(ValueError, match="mem_bytes"):
        patch_agop(net, X, mem_bytes=0)


def test_cnfa_table_measures_each_layer_against_its_controls():
    from rfm.nets.alignment import spectrum_matched
    from rfm.nets.conv import cnfa_table

    net = _net(seed=1)
    init = _net(seed=2)
    X = torch.randn(9, 36, generator=_gen(9), dtype=f64)
    rows = cnfa_table(net, X, initial=init, generator=5)
    assert [r["layer"] for r in rows] == [1, 2]
    for l, r in enumerate(rows):
        G, A = filter_nfm(net.convs[l]), patch_agop(net, X, l)
        torch.testing.assert_close(r["G"], G)
        torch.testing.assert_close(r["A"], A)
        assert r["trained"] == pytest.approx(float(rfm.matrix_correlation(G, A, "cosine")), rel=1e-12)
        G0, A0 = filter_nfm(init.convs[l]), patch_agop(init, X, l)
        assert r["init"] == pytest.approx(float(rfm.matrix_correlation(G0, A0, "cosine")), rel=1e-12)
    # the spectrum-matched control: the trained spectrum in the directions of one Haar draw per layer, in order
    g = torch.Generator().manual_seed(5)
    for r in rows:
        S = spectrum_matched(r["G"], g)
        torch.testing.assert_close(torch.linalg.eigvalsh(S), torch.linalg.eigvalsh(r["G"]), rtol=1e-9, atol=1e-12)
        assert r["spectrum-matched"] == pytest.approx(float(rfm.matrix_correlation(S, r["A"], "cosine")), rel=1e-9)
    only = cnfa_table(net, X, layers=[-1], generator=5)
    assert [r["layer"] for r in only] == [2] and "init" not in only[0]
    assert only[0]["trained"] == pytest.approx(rows[1]["trained"], rel=1e-12)
    with pytest.raises(ValueError, match="Conv2d layers"):
        cnfa_table(net, X, initial=_net(channels=(3,), seed=3))
    with pytest.raises(ValueError, match="layers"):
        cnfa_table(net, X, layers=[2])


def test_the_chapter_and_earlier_readers_import_paths_still_work():
    import rfm.core.patches
    import rfm.nets.conv

    assert rfm.models.conv.patches is rfm.core.patches.patches
    assert rfm.models.conv.as_images is rfm.core.patches.as_images
    for name in ("ConvNet", "cnfa_table", "conv_from_feature_matrix", "conv_layers", "conv_patches", "filter_nfm",
                 "patch_agop", "patch_gradients"):
        assert getattr(rfm.models.conv, name) is getattr(rfm.nets.conv, name)
