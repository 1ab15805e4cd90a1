"""rfm.models.transfer (projection, translation, scaling-law fit) and the image corruptions of rfm.data.images."""
import numpy as np
import pytest
import torch

import rfm
from rfm.core.kernels import get_kernel, kernel_matrix
from rfm.data import images as I
from rfm.models.transfer import ProjectedKernel, TranslatedKernel, fit_scaling_law, source_outputs


def _data(n=40, d=5, c=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    Y = torch.randn(n, c, generator=g, dtype=torch.float64)
    return X, Y


def _krr(X, Y, Z, reg, bandwidth=10.0):
    k = get_kernel("laplace", bandwidth=bandwidth)
    K = kernel_matrix(k, X)
    alpha = torch.linalg.solve(K + reg * torch.eye(len(X), dtype=X.dtype), Y)
    return kernel_matrix(k, Z, X) @ alpha


def _source(seed=1):
    Xs, Ys = _data(60, seed=seed)
    return rfm.RFMRegressor(iters=0, reg=1e-3, dtype="float64").fit(Xs, Ys)


def test_translation_without_target_data_is_the_source():
    src = _source()
    Z, _ = _data(10, seed=3)
    tk = TranslatedKernel(src).fit(torch.zeros(0, 5, dtype=torch.float64), torch.zeros(0, 3, dtype=torch.float64))
    assert tk.correction_ is None
    torch.testing.assert_close(tk.predict(Z), torch.as_tensor(src.predict(Z)), rtol=0, atol=0)


def test_translation_is_krr_on_the_residuals():
    src = _source()
    X, Y = _data(30, seed=4)
    Z, _ = _data(12, seed=5)
    fs = lambda A: torch.as_tensor(src.predict(A))
    want = fs(Z) + _krr(X, Y - fs(X), Z, 1e-2)
    got = TranslatedKernel(src, reg=1e-2).fit(X, Y).predict(Z)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)
    # numpy in gives numpy out, the same values
    got_np = TranslatedKernel(src, reg=1e-2).fit(X.numpy(), Y.numpy()).predict(Z.numpy())
    assert isinstance(got_np, np.ndarray)
    np.testing.assert_allclose(got_np, want.numpy(), rtol=1e-9, atol=1e-9)


def test_translation_interpolates_with_zero_ridge():
    src = _source()
    X, Y = _data(20, seed=6)
    torch.testing.assert_close(TranslatedKernel(src, reg=0.0).fit(X, Y).predict(X), Y, rtol=1e-7, atol=1e-7)


def test_projection_with_identity_source_is_the_base_kernel():
    X, Y = _data(30, seed=7)
    Z, _ = _data(9, seed=8)
    got = ProjectedKernel(lambda A: A, reg=1e-3).fit(X, Y).predict(Z)
    torch.testing.assert_close(got, _krr(X, Y, Z, 1e-3), rtol=1e-9, atol=1e-9)
    same = rfm.RFMRegressor(iters=0, reg=1e-3, dtype="float64").fit(X, Y).predict(Z)
    torch.testing.assert_close(got, torch.as_tensor(same), rtol=1e-8, atol=1e-8)


def test_projection_is_krr_on_source_outputs_with_other_labels():
    src = _source()
    X, _ = _data(25, seed=9)
    y = torch.arange(25, dtype=torch.float64) % 2          # one output, the source has three
    Z, _ = _data(7, seed=10)
    F = lambda A: torch.as_tensor(src.predict(A))
    got = ProjectedKernel(src, reg=1e-3).fit(X, y).predict(Z)
    torch.testing.assert_close(got, _krr(F(X), y[:, None], F(Z), 1e-3)[:, 0], rtol=1e-9, atol=1e-9)  # 1-D y: 1-D out


def test_classifier_and_machine_sources_give_raw_outputs():
    Xs, _ = _data(60, seed=11)
    ys = (Xs[:, 0] > 0).long() + (Xs[:, 1] > 0).long()        # three classes
    clf = rfm.RFMClassifier(iters=0, dtype="float64").fit(Xs, ys)
    Z, _ = _data(8, seed=12)
    raw = source_outputs(clf, Z)
    assert raw.shape == (8, 3)
    torch.testing.assert_close(raw, clf.machine_.predict(Z).detach())
    torch.testing.assert_close(source_outputs(clf.machine_, Z), raw)
    assert (raw.argmax(1).numpy() == clf.predict(Z).numpy()).all()


def test_transfer_errors_name_the_argument():
    src = _source()
    X, Y = _data(10, seed=13)
    with pytest.raises(ValueError, match="source predicts 3"):
        TranslatedKernel(src).fit(X, Y[:, :2])
    with pytest.raises(ValueError, match="reg"):
        TranslatedKernel(src, reg=-1).fit(X, Y)
    with pytest.raises(TypeError, match="source"):
        ProjectedKernel(3).fit(X, Y)
    with pytest.raises(ValueError, match="features"):
        TranslatedKernel(src).fit(X, Y).predict(X[:, :4])


def test_fit_scaling_law_recovers_a_power_law():
    n = np.array([10, 20, 50, 100, 400])
    law = fit_scaling_law(n, 3.0 * n ** -0.7)
    assert abs(law.slope + 0.7) < 1e-12 and abs(law.coef - 3.0) < 1e-10 and abs(law.r2 - 1) < 1e-12
    np.testing.assert_allclose(law(n), 3.0 * n ** -0.7)
    with pytest.raises(ValueError, match="err"):
        fit_scaling_law(n, np.zeros(5))
    with pytest.raises(ValueError, match="n must"):
        fit_scaling_law([1], [1.0])


@pytest.mark.parametrize("kind,severity", [("noise", 0.1), ("impulse", 0.2), ("shift", 1), ("contrast", 0.3),
                                           ("blur", 0.8), ("rotation", 20.0)])
def test_corruptions_are_deterministic_and_keep_shape(kind, severity):
    X = torch.rand(6, 64, generator=torch.Generator().manual_seed(0))
    a = I.corrupt(X, kind, severity, shape=(8, 8), generator=5)
    b = I.corrupt(X, kind, severity, shape=(8, 8), generator=5)
    assert a.shape == X.shape and a.dtype == X.dtype
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not torch.equal(a, X)


def test_corruptions_known_answers():
    X = torch.arange(16, dtype=torch.float64).reshape(1, 16)       # one 4 x 4 image
    img = X.reshape(4, 4)
    s = I.shift_images(X, (1, -1), (4, 4)).reshape(4, 4)
    want = torch.zeros(4, 4, dtype=torch.float64)
    want[1:, :3] = img[:3, 1:]
    torch.testing.assert_close(s, want)
    torch.testing.assert_close(I.adjust_contrast(X, 0.5, 0.1), 0.5 * X + 0.1)
    # impulse: the fraction of changed pixels, values 0 or 1 where changed
    Z = torch.full((200, 100), 0.5, dtype=torch.float64)
    out = I.impulse_noise(Z, 0.2, generator=0)
    hit = out != 0.5
    assert abs(hit.double().mean().item() - 0.2) < 0.01 and set(out[hit].unique().tolist()) <= {0.0, 1.0}
    noise = I.gaussian_noise(torch.zeros(200, 100, dtype=torch.float64), 0.3, generator=1)
    assert abs(noise.std().item() - 0.3) < 0.01
    # blur: a centred delta becomes the normalised separable Gaussian; a constant image keeps its interior value
    d = torch.zeros(1, 81, dtype=torch.float64)
    d[0, 40] = 1.0
    b = I.blur_images(d, 1.0, (9, 9)).reshape(9, 9)
    t = torch.arange(-3, 4, dtype=torch.float64)
    w = torch.exp(-t ** 2 / 2)
    w = w / w.sum()
    torch.testing.assert_close(b[1:8, 1:8], torch.outer(w, w))
    torch.testing.assert_close(I.blur_images(torch.ones(1, 81, dtype=torch.float64), 0.0, (9, 9)),
                               torch.ones(1, 81, dtype=torch.float64))
    with pytest.raises(ValueError, match="kind"):
        I.corrupt(X, "fog", 1.0, shape=(4, 4))
    with pytest.raises(ValueError, match="frac"):
        I.impulse_noise(X, 1.5)
    with pytest.raises(ValueError, match="shape"):
        I.blur_images(X, 1.0, (5, 5))


def test_transfer_curves_shapes_and_no_data_translation():
    from rfm.models.transfer import transfer_curves
    g = torch.Generator().manual_seed(0)
    centres = torch.randn(3, 6, generator=g, dtype=torch.float64) * 3
    lab = torch.arange(120) % 3
    X = centres[lab] + torch.randn(120, 6, generator=g, dtype=torch.float64)
    src = rfm.RFMClassifier(iters=0, dtype="float64").fit(X[:60], lab[:60])
    r = transfer_curves(src, X[60:100], lab[60:100], X[100:], lab[100:], [0, 5, 20], draws=3, generator=1)
    assert r["baseline"].shape == (3, 3) and list(r["n_targets"]) == [0, 5, 20]
    np.testing.assert_array_equal(r["translated"][0], r["direct"][0])      # no target data: the source itself
    assert np.isnan(r["projected"][0]).all() and np.isfinite(r["projected"][1:]).all()
    again = transfer_curves(src, X[60:100], lab[60:100], X[100:], lab[100:], [0, 5, 20], draws=3, generator=1)
    for m in ("baseline", "translated", "projected"):
        np.testing.assert_array_equal(r[m], again[m])                       # seeded draws


def test_load_cifar10_c_reads_one_severity_from_a_folder(tmp_path):
    from rfm.data import load_cifar10_c
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, size=(50, 32, 32, 3), dtype=np.uint8)          # 5 severities x 10 images
    labels = np.arange(50) % 10
    np.save(tmp_path / "fog.npy", imgs)
    np.save(tmp_path / "labels.npy", labels)
    s = load_cifar10_c(tmp_path, "fog", severity=3, n_test=4)
    assert s.X_train.shape == (6, 3072) and s.X_test.shape == (4, 3072)
    got = np.concatenate([s.X_train.numpy(), s.X_test.numpy()]) * 255
    want = imgs[20:30].transpose(0, 3, 1, 2).reshape(10, -1).astype(np.float32)
    # the same ten images of severity 3 (any order), channel-first, scaled to [0, 1]
    np.testing.assert_allclose(np.sort(got.sum(1)), np.sort(want.sum(1)), rtol=1e-5)
    assert sorted(np.concatenate([s.y_train.numpy(), s.y_test.numpy()]).tolist()) == sorted(labels[20:30].tolist())
    with pytest.raises(FileNotFoundError, match="snow.npy"):
        load_cifar10_c(tmp_path, "snow")
    with pytest.raises(ValueError, match="severity"):
        load_cifar10_c(tmp_path, "fog", severity=6)
