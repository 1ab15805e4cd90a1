"""rfm.metrics.flip_rate: the share of samples whose predicted label a perturbation changes."""
import numpy as np
import pytest
import torch

from rfm.metrics import flip_rate


def sign(Z):
    return (torch.as_tensor(Z)[:, 0] > 0).long()


def test_flip_rate_counts_the_rows_whose_label_changes():
    X = torch.tensor([[1.0], [2.0], [-1.0], [-3.0]])
    # rows 0 and 2 cross zero, rows 1 and 3 do not: half of the labels flip
    assert flip_rate(sign, X, X - torch.tensor([[2.0], [1.0], [-2.0], [1.0]])) == 0.5


def test_no_perturbation_flips_nothing_and_numpy_predictions_count_too():
    X = np.array([[0.5], [-0.5], [1.5]])
    assert flip_rate(lambda Z: (Z[:, 0] > 0).astype(int), X, X) == 0.0
    assert flip_rate(lambda Z: (Z[:, 0] > 0).astype(int), X, -X) == 1.0


def test_predictions_of_different_shapes_are_refused():
    with pytest.raises(ValueError, match="shapes"):
        flip_rate(lambda Z: torch.zeros(len(Z) if len(Z) == 2 else 3), torch.zeros(2, 1), torch.zeros(3, 1))
