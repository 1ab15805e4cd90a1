"""rfm.metrics.relative_error on known answers."""
import pytest
import torch

from rfm.metrics import relative_error


def test_relative_error_is_the_norm_of_the_difference_over_the_norm_of_the_truth():
    truth = torch.tensor([3.0, 4.0], dtype=torch.float64)  # norm 5
    assert relative_error(torch.tensor([3.0, 4.0], dtype=torch.float64), truth) == 0.0
    assert relative_error(torch.tensor([0.0, 0.0], dtype=torch.float64), truth) == 1.0
    assert relative_error(torch.tensor([3.0, 5.0], dtype=torch.float64), truth) == pytest.approx(0.2, rel=1e-15)
    A = torch.eye(2, dtype=torch.float64)  # Frobenius norm sqrt(2)
    assert relative_error(2 * A, A) == pytest.approx(1.0, rel=1e-15)
