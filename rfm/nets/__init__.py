"""Networks and their training dynamics.

* ``rfm.nets`` (this package, from :mod:`rfm.nets.mlp`) -- :class:`MLP` (any depth, width, activation; the
  quadratic network of the grokking paper is ``MLP(d, [w], c, activation="quadratic", init="uniform")``), the one
  training loop :func:`train`, neural feature matrices :func:`nfm`, per-layer AGOPs :func:`layer_agop` and the
  Neural Feature Ansatz table :func:`nfa_table`
* :mod:`rfm.nets.alignment` -- the pre-activation tangent kernel, AGOP = W^T K W, centred and uncentred neural
  feature correlations, the free-probability predictions
* :mod:`rfm.nets.optim` -- Speed Limited Optimization and full-batch training with any torch optimizer
* :mod:`rfm.nets.baselines` -- untrained controls for the NFA: a trained layer's singular values (or column norms)
  with random directions (:func:`matched_network`, :func:`matched_nfa`)
* :mod:`rfm.nets.classifier` -- an MLP as a classifier on the least-squares label codes of :class:`rfm.RFMClassifier`
* :mod:`rfm.nets.dynamics` -- training dynamics beyond the kernel regime: the linearised and the quadratic model
  (NQM) of any network, the empirical NTK and its sharpness, learning rates as multiples of 2 / lambda_0, a spike
  counter, and a closed-form fast path for two-layer ReLU networks
* :mod:`rfm.nets.stepwise` -- learning one feature at a time: mode onsets and loss drops, the logistic closed form
  of one mode, quadratic word embeddings, linearised Barlow Twins, the saddle-escape direction, modular addition
  through a template of chosen Fourier magnitudes
* :mod:`rfm.nets.parametrisation` -- SP, NTP, muP and spectral parametrisations (initialisation and per-layer
  learning rates), the output scale gamma, spectral norms, stable ranks and relative feature change
* :mod:`rfm.nets.fact` -- the Features at Convergence Theorem per layer (W^T W against the FACT matrix), and
  L-BFGS polishing of a weight-decayed loss to a critical point
"""
from .mlp import (ACTIVATIONS, INITS, LOSSES, MLP, OPTIMIZERS, format_nfa_table, layer_agop, nfa_table, nfm,
                  num_threads, train)
from . import alignment, optim  # noqa: E402
from . import baselines  # noqa: E402
from . import classifier  # noqa: E402
from . import dynamics  # noqa: E402
from . import stepwise  # noqa: E402
from . import parametrisation  # noqa: E402
from . import fact  # noqa: E402
from . import conv  # noqa: E402
from .baselines import (column_norm_matched_weights, matched_network, matched_nfa,  # noqa: E402
                        spectrum_matched_weights)

__all__ = ["ACTIVATIONS", "INITS", "LOSSES", "MLP", "OPTIMIZERS", "alignment", "baselines", "classifier", "dynamics", "fact",
           "column_norm_matched_weights", "format_nfa_table", "layer_agop", "matched_network", "matched_nfa",
           "nfa_table", "nfm", "num_threads", "optim", "parametrisation", "spectrum_matched_weights", "stepwise",
           "train"]
