"""Fixtures shared by the unit tests (the repository's conftest.py holds the chapter-execution cache).

The tests are in folders that mirror ``rfm/`` (core, models, nets, data, theory, selection, book), plus
``chapters/`` (notebook pairs, reruns, chapter paths) and ``package/`` (installation, wheel, pins). This folder is on
``sys.path`` while they run, so ``_reference`` (the RFM loop written out from its definition) imports from any of them.
"""
from __future__ import annotations

import functools
import sys
import types

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch


@pytest.fixture
def close_figures():
    """Close every matplotlib figure a test opened."""
    yield
    plt.close("all")


@pytest.fixture
def results(tmp_path, monkeypatch):
    """An empty committed-results folder that rfm.book reads instead of the repository's (checks raise)."""
    monkeypatch.setenv("RFM_BOOK_RESULTS", str(tmp_path))
    monkeypatch.delenv("RFM_BOOK_CHECKS", raising=False)
    return tmp_path


# -- a fake torchvision: the data sets' layouts, tiny and offline --------------------------------------------------
# (tests/fixtures/fake_torchvision is the same idea at the paper's sizes, for a whole chapter run in a subprocess)


class _FakeSVHN:
    """torchvision.datasets.SVHN's format: .data (N, 3, 32, 32) uint8 and .labels (N,) int64."""

    def __init__(self, root, split="train", download=False):
        n = 30 if split == "train" else 20
        rng = np.random.default_rng(0 if split == "train" else 1)
        self.data = rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8)
        self.labels = np.arange(n) % 10


class _FakeCIFAR10:
    """torchvision.datasets.CIFAR10's format: .data (N, 32, 32, 3) uint8 and .targets, a list of ints."""

    def __init__(self, root, train=True, download=False, transform=None):
        n = 30 if train else 20
        rng = np.random.default_rng(2 if train else 3)
        self.data = rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
        self.targets = [i % 10 for i in range(n)]


class _FakeCelebA:
    """torchvision.datasets.CelebA's format: .attr (N, 40) of 0/1, items (transform(image), attr)."""

    def __init__(self, root, split="train", target_type="attr", transform=None, download=False):
        n = 40 if split == "train" else 24
        g = torch.Generator().manual_seed(4 if split == "train" else 5)
        self.attr = (torch.rand(n, 40, generator=g) < 0.25).long()
        self.attr[:, 15] = (torch.arange(n) % 4 == 0).long()  # a minority attribute: 1 in 4
        self.images = torch.rand(n, 3, 12, 12, generator=g)
        self.transform = transform

    def __getitem__(self, i):
        return self.transform(self.images[i]), self.attr[i]


class _FakeSTL10:
    """torchvision.datasets.STL10's format: .data (N, 3, 96, 96) uint8, .labels (N,) int."""

    def __init__(self, root, split="train", download=False):
        n = 20 if split == "train" else 10
        self.data = np.random.default_rng(0).integers(0, 256, size=(n, 3, 96, 96), dtype=np.uint8)
        self.labels = np.arange(n) % 10


class _FakeMNIST:
    """torchvision.datasets.MNIST's format: .data (N, 28, 28) uint8 tensor, .targets (N,) int64 tensor."""

    def __init__(self, root, train=True, download=False):
        n = 12 if train else 6
        self.data = torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
        self.targets = torch.arange(n) % 10


@pytest.fixture
def fake_torchvision(monkeypatch):
    """A torchvision in sys.modules whose datasets (SVHN, CIFAR10, CelebA, STL10, MNIST) are small random sets in
    torchvision's layouts, and whose transforms (Compose, Resize, CenterCrop, ToTensor) act on tensors."""
    tv = types.ModuleType("torchvision")
    tv.datasets = types.ModuleType("torchvision.datasets")
    tv.datasets.SVHN, tv.datasets.CIFAR10, tv.datasets.CelebA = _FakeSVHN, _FakeCIFAR10, _FakeCelebA
    tv.datasets.STL10, tv.datasets.MNIST = _FakeSTL10, _FakeMNIST
    tv.transforms = types.ModuleType("torchvision.transforms")
    tv.transforms.Compose = lambda fs: (lambda x: functools.reduce(lambda acc, f: f(acc), fs, x))
    tv.transforms.Resize = lambda size: (lambda x: torch.nn.functional.interpolate(x[None], size=(size, size))[0])
    tv.transforms.CenterCrop = lambda size: (lambda x: x)
    tv.transforms.ToTensor = lambda: (lambda x: x)
    for name, mod in (("torchvision", tv), ("torchvision.datasets", tv.datasets),
                      ("torchvision.transforms", tv.transforms)):
        monkeypatch.setitem(sys.modules, name, mod)
    return tv
