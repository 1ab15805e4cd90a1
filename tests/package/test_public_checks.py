"""The validation helpers shared across rfm's modules (rfm._checks, rfm.utils.check_generator) answer as stated."""
import numpy as np
import pytest
import torch

from rfm._checks import (
    check_bool,
    check_choice_str,
    check_iterations,
    check_mask,
    check_observed,
    check_regression_data,
    check_square,
    check_vector,
)
from rfm.utils import check_generator


def test_check_square_accepts_symmetric_matrices_and_names_what_is_wrong():
    A = check_square([[1, 2], [2, 3]], "A", symmetric=True)
    assert A.dtype == torch.float64 and A.tolist() == [[1.0, 2.0], [2.0, 3.0]]
    with pytest.raises(ValueError, match="square"):
        check_square(torch.zeros(2, 3), "M")
    with pytest.raises(ValueError, match="M must be symmetric"):
        check_square([[1.0, 1.0], [0.0, 1.0]], "M", symmetric=True)
    with pytest.raises(ValueError, match="NaN"):
        check_square([[np.nan]], "M")


def test_small_checks():
    assert check_bool("flag", np.bool_(True)) is True
    with pytest.raises(TypeError, match="flag must be True or False"):
        check_bool("flag", 1)
    assert check_choice_str("loss", "mse", ("mse", "ce")) == "mse"
    with pytest.raises(TypeError, match="loss must be a string"):
        check_choice_str("loss", 0, ("mse", "ce"))
    assert check_iterations(3) == 3
    with pytest.raises(ValueError, match="non-negative"):
        check_iterations(-1)


def test_check_generator_seeds_and_passes_cpu_generators_through():
    g = torch.Generator().manual_seed(5)
    assert check_generator(g) is g
    assert torch.equal(torch.rand(3, generator=check_generator(5)),
                       torch.rand(3, generator=torch.Generator().manual_seed(5)))
    with pytest.raises(ValueError, match=">= 0"):
        check_generator(-1)


def test_linear_model_inputs():
    X, y = check_regression_data(np.ones((3, 2)), [[1.0], [2.0], [3.0]])
    assert X.shape == (3, 2) and y.tolist() == [1.0, 2.0, 3.0] and y.dtype == X.dtype
    with pytest.raises(ValueError, match="length 2"):
        check_vector([1.0, 2.0, 3.0], 2, X)
    Y, m, numpy_out = check_observed(np.array([[1.0, np.nan], [3.0, 4.0]]), [[1, 0], [1, 1]])
    assert numpy_out and Y.tolist() == [[1.0, 0.0], [3.0, 4.0]] and m.tolist() == [[True, False], [True, True]]
    with pytest.raises(ValueError, match="no observed entry"):
        check_mask(np.zeros((2, 2)), (2, 2), "cpu")
