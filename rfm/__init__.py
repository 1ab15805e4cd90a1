"""rfm: Recursive Feature Machines and the Average Gradient Outer Product, in torch.

The package behind the executable replication book. Its folders are its architecture:

* :mod:`rfm.core` -- the kernel-machine core: kernels with a feature matrix M, the fitted
  :class:`KernelMachine` (predictions, input gradients, closed-form AGOP), the AGOP of any torch function, the
  AGOP -> M map, kernel ridge regression solvers, and the block/memory and coincident-point policies
* :mod:`rfm.estimators` -- :class:`RFMRegressor` and :class:`RFMClassifier` (scikit-learn estimators)
* :mod:`rfm.tabular` -- the tabular benchmark protocol (folds, validation grids, baselines, UCI-style summaries)
* :mod:`rfm.conv` -- convolutions through their patches: the filter matrix W^T W, the patch-AGOP of a conv layer
  (the convolutional NFA), a small bias-free CNN, and ConvRFM (an aligned-patch kernel with a learned patch metric)
* :mod:`rfm.icl` -- in-context learning on synthetic prompts: task pools, the attention feature map psi, SGPT,
  MLPs on the prompt and online training
* :mod:`rfm.linear` -- linear RFM (lin-RFM) and IRLS: sparse regression and low-rank matrix completion
* :mod:`rfm.transfer` -- transfer learning with kernels: projection and translation of a fitted source model,
  the comparison against the number of target samples, power-law fits
* :mod:`rfm.matrix_inversion` -- matrix inversion by SGD with an adaptive (self-preconditioned) step, fixed-step
  SGD, Newton--Schulz, and an empirical order of convergence
* :mod:`rfm.metrics` -- matrix correlations, subspace overlaps, prediction metrics
* :mod:`rfm.nets` -- networks and their training dynamics: :class:`rfm.nets.MLP` and its training loop, neural
  feature matrices and the NFA (``rfm.nets``), the pre-activation tangent kernel and feature correlations
  (``rfm.nets.alignment``), Speed Limited Optimization (``rfm.nets.optim``)
* :mod:`rfm.data` -- tasks and data sets: synthetic targets and offline loaders (``rfm.data``), modular arithmetic
  (``rfm.data.modular``), planted-signal image tasks (``rfm.data.images``), offline tables (``rfm.data.tabular``)
* :mod:`rfm.book` -- book support (profiles, Checks, measured values) and figures (``rfm.book.plots``); not
  imported by ``import rfm``
* :mod:`rfm.utils` -- device, seeding, PSD powers

Everything a user of the core needs is importable from ``rfm`` itself.
"""
from ._checks import DegenerateAGOPError
from .core.agop import AGOPAccumulator, agop, jacobians
from .core.feature_matrix import FeatureMatrix, as_feature_matrix, feature_matrix_from_agop, feature_update
from .core.kernels import (GaussianKernel, Kernel, LaplaceKernel, PolynomialKernel, QuadraticKernel, get_kernel,
                           kernel_matrix)
from .core.ntk import NTKKernel
from .core.machine import KernelMachine, kernel_agop, kernel_gradients
from .core.cg import AutoSolver, CGSolver
from .core.solvers import DirectSolver, get_solver, solve_krr
from .estimators import RFMClassifier, RFMRegressor
from .metrics import accuracy, matrix_correlation, mse, r2_score, subspace_overlap, top_eigenspace_overlap
from .utils import get_device, make_generator, psd_power, seed_everything, to_numpy, top_eigenvectors
from . import core, data, estimators, linear, metrics, nets, utils  # noqa: E402
from . import conv  # noqa: E402
from . import icl  # noqa: E402
from . import transfer  # noqa: E402
from . import matrix_inversion  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "AGOPAccumulator", "AutoSolver", "CGSolver", "DegenerateAGOPError", "DirectSolver", "FeatureMatrix", "GaussianKernel", "Kernel",
    "KernelMachine", "LaplaceKernel", "NTKKernel", "PolynomialKernel", "QuadraticKernel", "RFMClassifier", "RFMRegressor",
    "accuracy", "agop", "as_feature_matrix", "feature_matrix_from_agop", "feature_update", "get_device",
    "get_kernel", "get_solver", "jacobians", "kernel_agop", "kernel_gradients", "kernel_matrix", "make_generator",
    "matrix_correlation", "mse", "psd_power", "r2_score", "seed_everything", "solve_krr", "subspace_overlap",
    "to_numpy", "top_eigenspace_overlap", "top_eigenvectors",
    "conv", "core", "data", "estimators", "icl", "linear", "matrix_inversion", "metrics", "nets", "transfer", "utils",
]
