r"""Learning one feature at a time: the stepwise dynamics of small-initialisation training.

Four models that, started from small weights, pick up one direction after another in a staircase; each has its own
module, and this one gathers their names (``from rfm.nets import stepwise as sw`` keeps working):

* the measures of the staircase and the closed form of one mode -- :mod:`rfm.nets.curves` (:func:`mode_onsets`,
  :func:`loss_drops`, :func:`count_drops`, :func:`plateau_fraction`, :func:`plateau_levels`,
  :func:`logistic_mode`, :func:`logistic_onset`);
* quadratic word embeddings -- :mod:`rfm.nets.qwem`;
* linearised Barlow Twins -- :mod:`rfm.nets.barlow_twins`;
* the saddle-escape direction of a bias-free network -- :mod:`rfm.nets.saddle`;
* modular addition through a template of chosen Fourier magnitudes -- :func:`rfm.data.modular.template_addition`
  and :func:`rfm.data.modular.fourier_residuals`; the network is :func:`rfm.nets.quadratic_net` trained by
  :func:`rfm.nets.optim.train_full_batch`.

Conventions: time in the closed forms is ``lr * step`` (gradient flow), every function takes and returns torch
tensors (float64 unless said), and every random draw comes from a seed or a ``torch.Generator``.
"""
from __future__ import annotations

from ..data.modular import fourier_residuals, template_addition
from .barlow_twins import barlow_twins_onsets, cross_view_matrix, linear_barlow_twins, two_view_data
from .curves import (
                     count_drops,
                     logistic_mode,
                     logistic_onset,
                     loss_drops,
                     mode_onsets,
                     plateau_fraction,
                     plateau_levels,
)
from .qwem import (
                     analogy_accuracy,
                     factorization_gd,
                     factorization_onsets,
                     planted_analogies,
                     planted_cooccurrence,
                     positive_part,
                     qwem_target,
)
from .saddle import (
                     escape_direction,
                     escape_objective,
                     gd_layer_spectra,
                     layer_singular_values,
                     layer_top_ratios,
                     random_sphere_direction,
)

__all__ = ["analogy_accuracy", "barlow_twins_onsets", "count_drops", "cross_view_matrix", "escape_direction",
           "escape_objective", "factorization_gd", "factorization_onsets", "fourier_residuals",
           "gd_layer_spectra", "layer_singular_values", "layer_top_ratios", "linear_barlow_twins", "logistic_mode",
           "logistic_onset",
           "loss_drops", "mode_onsets", "planted_analogies", "planted_cooccurrence", "plateau_fraction",
           "plateau_levels", "positive_part", "qwem_target", "random_sphere_direction", "template_addition",
           "two_view_data"]
