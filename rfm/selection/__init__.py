"""Model selection: evaluation protocols and hyper-parameter search.

* :mod:`~rfm.selection.protocol` -- the tabular benchmark protocol (folds, validation grids, baselines, UCI-style
  summaries)
* :mod:`~rfm.selection.tuning`   -- CARBS (cost-aware Pareto search), random search, Pareto fronts, scaling laws
"""
from . import protocol, tuning

__all__ = ["protocol", "tuning"]
