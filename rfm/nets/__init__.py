"""Networks and their training dynamics.

* ``rfm.nets`` (this package, from :mod:`rfm.nets.mlp`) -- :class:`MLP` (any depth, width, activation; the
  quadratic network of the grokking paper is ``MLP(d, [w], c, activation="quadratic", init="uniform")``), the one
  training loop :func:`train`, neural feature matrices :func:`nfm`, per-layer AGOPs :func:`layer_agop` and the
  Neural Feature Ansatz table :func:`nfa_table`
* :mod:`rfm.nets.alignment` -- the pre-activation tangent kernel, AGOP = W^T K W, centred and uncentred neural
  feature correlations, the free-probability predictions
* :mod:`rfm.nets.optim` -- Speed Limited Optimization and full-batch training with any torch optimizer
"""
from .mlp import (ACTIVATIONS, INITS, LOSSES, MLP, OPTIMIZERS, format_nfa_table, layer_agop, nfa_table, nfm,
                  num_threads, train)
from . import alignment, optim  # noqa: E402

__all__ = ["ACTIVATIONS", "INITS", "LOSSES", "MLP", "OPTIMIZERS", "alignment", "format_nfa_table", "layer_agop",
           "nfa_table", "nfm", "num_threads", "optim", "train"]
