"""Networks and their training dynamics.

* ``rfm.nets`` (this package, from :mod:`rfm.nets.mlp`) -- :class:`MLP` (any depth, width, activation; the
  quadratic network of the grokking paper is :func:`quadratic_net`), training on (X, y) :func:`train`, neural
  feature matrices :func:`nfm`, per-layer AGOPs :func:`layer_agop` and the Neural Feature Ansatz table
  :func:`nfa_table`
* :mod:`rfm.nets.training` -- the one training loop :func:`fit` (zero the gradients, a loss, backward, step, a
  callback that records and may stop), which :func:`train`, full-batch training, online in-context training and
  the deep linear baselines drive
* :mod:`rfm.nets.curves` -- measures of training curves: first step to reach a level, mode onsets, plateaus, drops
* :mod:`rfm.nets.linear` -- deep linear networks: the matrix-completion and diagonal sparse-regression baselines
* :mod:`rfm.nets.alignment` -- the pre-activation tangent kernel, AGOP = W^T K W, centred and uncentred neural
  feature correlations, the free-probability predictions
* :mod:`rfm.nets.optim` -- Speed Limited Optimization and full-batch training with any torch optimizer
* :mod:`rfm.nets.baselines` -- untrained controls for the NFA: a trained layer's singular values (or column norms)
  with random directions (:func:`matched_network`, :func:`matched_nfa`)
* :mod:`rfm.nets.classifier` -- an MLP as a classifier on the least-squares label codes of :class:`rfm.RFMClassifier`
* :mod:`rfm.nets.dynamics` -- training dynamics beyond the kernel regime: the linearised and the quadratic model
  (NQM) of any network, a spike counter
* :mod:`rfm.nets.tangent_kernel` -- the empirical NTK, its sharpness, learning rates as multiples of 2 / lambda_0
* :mod:`rfm.nets.two_layer` -- the functional two-layer ReLU network (and its linearisation and NQM) in closed form:
  outputs, gradients, NTK, GD, SGD, AGOP
* :mod:`rfm.nets.catapults` -- catapults in GD: multi-stage gradient descent above the stability edge
* :mod:`rfm.nets.stepwise` -- learning one feature at a time, gathering :mod:`rfm.nets.qwem` (quadratic word
  embeddings), :mod:`rfm.nets.barlow_twins` (linearised Barlow Twins), :mod:`rfm.nets.saddle` (the saddle-escape
  direction) and the modular addition through a template of chosen Fourier magnitudes of :mod:`rfm.data.modular`
* :mod:`rfm.nets.parametrisation` -- SP, NTP, muP and spectral parametrisations (initialisation and per-layer
  learning rates), the output scale gamma, spectral norms, stable ranks and relative feature change
* :mod:`rfm.nets.callbacks` -- progress recorders for training on modular arithmetic (a network's epochs, an
  RFM's iterations)
* :mod:`rfm.nets.fact` -- the Features at Convergence Theorem per layer (W^T W against the FACT matrix), and
  L-BFGS polishing of a weight-decayed loss to a critical point
"""
from . import (
                  alignment,
                  barlow_twins,
                  baselines,
                  callbacks,
                  catapults,
                  classifier,
                  conv,
                  curves,
                  dynamics,
                  fact,
                  linear,
                  optim,
                  parametrisation,
                  qwem,
                  saddle,
                  stepwise,
                  tangent_kernel,
                  training,
                  two_layer,
)
from .baselines import column_norm_matched_weights, matched_network, matched_nfa, spectrum_matched_weights
from .mlp import (
                  ACTIVATIONS,
                  INITS,
                  LOSSES,
                  MLP,
                  OPTIMIZERS,
                  format_nfa_table,
                  layer_agop,
                  nfa_table,
                  nfm,
                  quadratic_net,
                  train,
)
from .training import fit, num_threads

__all__ = ["ACTIVATIONS", "INITS", "LOSSES", "MLP", "OPTIMIZERS", "alignment", "barlow_twins", "baselines", "callbacks",
           "catapults", "classifier", "curves", "dynamics", "fact", "column_norm_matched_weights", "conv", "fit",
           "format_nfa_table", "layer_agop", "linear", "matched_network", "matched_nfa", "nfa_table", "nfm",
           "num_threads", "optim", "parametrisation", "quadratic_net", "qwem", "saddle", "spectrum_matched_weights",
           "stepwise", "tangent_kernel", "train", "training", "two_layer"]
