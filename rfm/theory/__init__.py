"""Theory: closed forms that the chapters compare measurements with.

* :mod:`~rfm.theory.agf`             -- alternating gradient flows: predicted jump times and loss levels of a
  two-layer network trained from small initialisation
* :mod:`~rfm.theory.eigenframework`   -- the omniscient risk of kernel ridge regression and random features, the
  cost of overfitting
* :mod:`~rfm.theory.infinite_depth`   -- wide and deep networks: activations, their duals and very deep compositions
* :mod:`~rfm.theory.matrix_inversion` -- matrix inversion by SGD with an adaptive step, Newton--Schulz, orders of
  convergence
"""
from . import agf, eigenframework, infinite_depth, matrix_inversion

__all__ = ["agf", "eigenframework", "infinite_depth", "matrix_inversion"]
