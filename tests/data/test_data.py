"""Offline image loaders and the torchvision code paths (on small fake data sets in torchvision's formats)."""
import sys

import numpy as np
import pytest
import torch

import rfm
from rfm import data


@pytest.fixture(scope="module")
def mnist():
    return data.load_mnist_5k(n_train=4000)


def test_mnist_5k_holds_5000_real_digits_scaled_to_unit_interval(mnist):
    assert mnist.X_train.shape == (4000, 784) and mnist.X_test.shape == (1000, 784)
    assert mnist.X_train.dtype == torch.float32 and mnist.y_train.dtype == torch.int64
    X = torch.cat([mnist.X_train, mnist.X_test])
    assert float(X.min()) == 0.0 and float(X.max()) == 1.0
    counts = torch.bincount(torch.cat([mnist.y_train, mnist.y_test]))
    assert counts.tolist() == [500] * 10
    # digits are centred: the border pixels are almost always blank, the centre is not
    img = X.mean(0).reshape(28, 28)
    assert float(img[0].max()) < 0.01 and float(img[10:18, 10:18].mean()) > 0.2


def test_mnist_split_is_seeded_and_disjoint(mnist):
    again = data.load_mnist_5k(n_train=4000)
    assert torch.equal(mnist.X_train, again.X_train) and torch.equal(mnist.y_test, again.y_test)
    other = data.load_mnist_5k(n_train=4000, generator=1)
    assert not torch.equal(mnist.y_train, other.y_train)
    # the 5,000 digits contain no exact duplicates, so a shared row would mean a leak
    train_rows = {tuple(r) for r in (mnist.X_train * 255).round().to(torch.uint8).tolist()}
    assert not any(tuple(r) in train_rows for r in (mnist.X_test * 255).round().to(torch.uint8).tolist())


def test_class_selection_relabels_in_the_order_given():
    s = data.load_mnist_5k(n_train=800, n_test=150, classes=(8, 3))
    assert s.X_train.shape == (800, 784) and s.X_test.shape == (150, 784)
    assert set(s.y_train.tolist()) == {0, 1}
    # label 0 holds the 8s: their mean image is that of the 8s of the full set
    full = data.load_mnist_5k(n_train=4000)
    mean8 = full.X_train[full.y_train == 8].mean(0)
    torch.testing.assert_close(s.X_train[s.y_train == 0].mean(0), mean8, atol=0.05, rtol=0)


def test_unit_norm_puts_every_image_on_the_sphere():
    s = data.load_digits_8x8(unit_norm=True)
    torch.testing.assert_close(s.X_train.norm(dim=1), torch.ones(len(s.X_train)))


def test_sklearn_digits_are_8x8_scaled_to_unit_interval():
    s = data.load_digits_8x8(n_train=1000, n_test=797, dtype="float64")
    assert s.X_train.shape == (1000, 64) and s.X_test.shape == (797, 64) and s.X_train.dtype == torch.float64
    assert float(torch.cat([s.X_train, s.X_test]).max()) == 1.0


def test_split_errors_name_the_problem():
    X, y = np.zeros((10, 4)), np.arange(10) % 2
    with pytest.raises(ValueError, match="do not occur"):
        data.split_data(X, y, classes=(0, 7))
    with pytest.raises(ValueError, match="n_train"):
        data.split_data(X, y, n_train=10)
    with pytest.raises(ValueError, match="at least two"):
        data.split_data(X, y, classes=(1,))


def test_loaders_are_exported_by_the_data_module():
    for name in ("load_mnist_5k", "load_digits_8x8", "load_svhn", "load_cifar10", "load_celeba", "split_data"):
        assert callable(getattr(rfm.data, name))


# -- torchvision code paths ---------------------------------------------------------------------------------------


def test_online_loaders_say_how_to_get_torchvision(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchvision", None)
    monkeypatch.setitem(sys.modules, "torchvision.datasets", None)
    with pytest.raises(ImportError, match="pip install torchvision"):
        data.load_svhn("/nonexistent")


def test_svhn_loader_flattens_channel_first_and_subsamples(fake_torchvision, tmp_path):
    s = data.load_svhn(tmp_path, n_train=12, classes=(1, 2, 3))
    assert s.X_train.shape == (9, 3 * 32 * 32)  # only 9 training images have labels 1, 2, 3
    assert s.X_test.shape == (6, 3 * 32 * 32)
    assert set(s.y_train.tolist()) == {0, 1, 2}
    raw = fake_torchvision.datasets.SVHN(tmp_path, "test")
    rows = {tuple(r) for r in (raw.data.reshape(20, -1) / 255.0).astype(np.float32).round(6).tolist()}
    assert all(tuple(r) in rows for r in s.X_test.numpy().round(6).tolist())
    s2 = data.load_svhn(tmp_path, n_train=5)
    assert s2.X_train.shape == (5, 3072) and s2.X_test.shape == (20, 3072)


def test_cifar10_loader_matches_svhn_layout(fake_torchvision, tmp_path):
    s = data.load_cifar10(tmp_path)
    assert s.X_train.shape == (30, 3072) and s.X_test.shape == (20, 3072)
    raw = fake_torchvision.datasets.CIFAR10(tmp_path, train=False)
    first = torch.as_tensor(raw.data[0].transpose(2, 0, 1).reshape(-1) / 255.0, dtype=torch.float32)
    assert any(torch.allclose(first, row) for row in s.X_test)


def test_celeba_loader_balances_the_attribute_and_normalises(fake_torchvision, tmp_path):
    s = data.load_celeba(tmp_path, 15, size=8, n_train=16)
    assert s.X_train.shape == (16, 3 * 8 * 8)
    assert torch.bincount(s.y_train).tolist() == [8, 8]
    assert torch.bincount(s.y_test).tolist() == [6, 6]  # 24 test images, 6 with the attribute
    torch.testing.assert_close(s.X_train.norm(dim=1), torch.ones(16))
