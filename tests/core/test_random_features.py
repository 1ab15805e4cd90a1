"""Random Fourier features: their kernel tends to the Gaussian kernel, and a seed fixes them."""
import math

import pytest
import torch

from rfm.core.kernels import GaussianKernel, random_fourier_features


def test_feature_kernel_tends_to_the_gaussian_kernel():
    X = torch.randn(6, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    F = random_fourier_features(X, 200_000, 1.5, torch.Generator().manual_seed(0))
    K = GaussianKernel(bandwidth=1.5)(X).to(torch.float64)
    assert float((F @ F.T - K).abs().max()) < 0.02


def test_features_are_the_stated_formula_for_a_seed():
    X = torch.randn(4, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    g = torch.Generator().manual_seed(7)
    W = torch.randn(2, 5, generator=g, dtype=torch.float64) / 0.5
    b = 2 * math.pi * torch.rand(5, generator=g, dtype=torch.float64)
    F = random_fourier_features(X, 5, 0.5, torch.Generator().manual_seed(7))
    assert torch.equal(F, math.sqrt(2 / 5) * torch.cos(X @ W + b))


def test_bad_sizes_are_refused():
    X = torch.zeros(3, 2, dtype=torch.float64)
    with pytest.raises(ValueError):
        random_fourier_features(X, 0, 1.0)
    with pytest.raises(ValueError):
        random_fourier_features(X, 3, 0.0)
