"""RFM models: the recursive feature machine loop and the estimators built on it.

* :mod:`~rfm.models.loop`       -- the one RFM loop (solve, record/keep-best, AGOP, update M) over a step object
* :mod:`~rfm.models.estimators` -- :class:`RFMRegressor` and :class:`RFMClassifier` (scikit-learn estimators)
* :mod:`~rfm.models.conv`       -- ConvRFM and deep ConvRFM (an aligned-patch kernel with a learned patch metric)
* :mod:`~rfm.models.linear`     -- linear RFM (lin-RFM) and IRLS: sparse regression and low-rank matrix completion
* :mod:`~rfm.models.transfer`   -- transfer learning with kernels: projection and translation of a fitted source
  model
"""
from . import conv, estimators, linear, loop, transfer
from .estimators import RFMClassifier, RFMRegressor

__all__ = ["RFMClassifier", "RFMRegressor", "conv", "estimators", "linear", "loop", "transfer"]
