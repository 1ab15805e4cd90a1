"""rfm: Recursive Feature Machines and the Average Gradient Outer Product, in torch.

The package behind the executable replication book. Its folders are its architecture:

* :mod:`rfm.core` -- kernel machines and solvers: kernels with a feature matrix M, the fitted
  :class:`KernelMachine` (predictions, input gradients, closed-form AGOP), the AGOP of any torch function, the
  AGOP -> M map, kernel ridge regression solvers (Cholesky, CG, EigenPro), the block/memory and coincident-point
  policies
* :mod:`rfm.models` -- RFM models: :class:`RFMRegressor` and :class:`RFMClassifier`, ConvRFM, lin-RFM, transfer
* :mod:`rfm.nets` -- networks and their training: MLPs, convolutional networks and the convolutional NFA,
  in-context learners, neural feature matrices, alignment, dynamics (catapults, NQM), parametrisations, FACT
* :mod:`rfm.data` -- tasks and data sets: synthetic targets and offline loaders, modular arithmetic, parities,
  planted-signal images, offline tables
* :mod:`rfm.theory` -- closed forms: the eigenframework of kernel ridge regression, infinitely deep networks,
  matrix inversion by adaptive SGD
* :mod:`rfm.selection` -- model selection: the tabular benchmark protocol, CARBS and random search
* :mod:`rfm.metrics` -- matrix correlations, subspace overlaps, prediction metrics
* :mod:`rfm.book` -- book support (profiles, Checks, measured values) and figures (``rfm.book.plots``); not
  imported by ``import rfm``
* :mod:`rfm.utils` -- device, seeding, PSD powers

Pre-0.2 module paths (``rfm.conv``, ``rfm.tabular``, ...) still import, with a DeprecationWarning
(:mod:`rfm._compat`, CHANGELOG.md).

Everything a user of the core needs is importable from ``rfm`` itself.
"""
from . import core, data, metrics, models, nets, selection, theory, utils
from ._checks import DegenerateAGOPError
from ._compat import install_moved_module_aliases
from .core.agop import AGOPAccumulator, agop, jacobians
from .core.auto import AutoSolver
from .core.cg import CGSolver
from .core.feature_matrix import FeatureMatrix, as_feature_matrix, feature_matrix_from_agop, feature_update
from .core.kernels import (
    GaussianKernel,
    Kernel,
    LaplaceKernel,
    PolynomialKernel,
    QuadraticKernel,
    get_kernel,
    kernel_matrix,
)
from .core.machine import KernelMachine, kernel_agop, kernel_gradients
from .core.ntk import NTKKernel
from .core.solvers import DirectSolver, get_solver, solve_krr
from .metrics import accuracy, matrix_correlation, mse, r2_score, subspace_overlap, top_eigenspace_overlap
from .models.estimators import RFMClassifier, RFMRegressor
from .utils import get_device, make_generator, psd_power, seed_everything, to_numpy, top_eigenvectors

install_moved_module_aliases()

__version__ = "0.1.0"


def __getattr__(name):  # rfm.conv and the other pre-0.2 module attributes, with a DeprecationWarning
    from ._compat import MOVED_MODULES, moved_module
    if f"rfm.{name}" in MOVED_MODULES:
        return moved_module(f"rfm.{name}")
    raise AttributeError(f"module 'rfm' has no attribute {name!r}")

__all__ = [
    "AGOPAccumulator", "AutoSolver", "CGSolver", "DegenerateAGOPError", "DirectSolver", "FeatureMatrix",
    "GaussianKernel", "Kernel", "KernelMachine", "LaplaceKernel", "NTKKernel", "PolynomialKernel", "QuadraticKernel",
    "RFMClassifier", "RFMRegressor",
    "accuracy", "agop", "as_feature_matrix", "feature_matrix_from_agop", "feature_update", "get_device",
    "get_kernel", "get_solver", "jacobians", "kernel_agop", "kernel_gradients", "kernel_matrix", "make_generator",
    "matrix_correlation", "mse", "psd_power", "r2_score", "seed_everything", "solve_krr", "subspace_overlap",
    "to_numpy", "top_eigenspace_overlap", "top_eigenvectors",
    "core", "data", "metrics", "models", "nets", "selection", "theory", "utils",
]
