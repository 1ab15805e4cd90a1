"""rfm.metrics.eigenvector_mass: the share of each top eigenvector on chosen coordinate axes."""
import math

import torch

from rfm.metrics import eigenvector_mass


def test_a_diagonal_matrix_has_the_axes_as_eigenvectors():
    M = torch.diag(torch.tensor([1.0, 5.0, 3.0, 0.5]))
    # eigenvectors by decreasing eigenvalue: e2, e3, e1, e4
    torch.testing.assert_close(eigenvector_mass(M, [1], k=4), torch.tensor([1.0, 0, 0, 0], dtype=torch.float64))
    torch.testing.assert_close(eigenvector_mass(M, [0, 2], k=3), torch.tensor([0.0, 1, 1], dtype=torch.float64))


def test_a_rotated_eigenvector_splits_its_mass_by_the_squared_cosines():
    c, s = math.cos(0.3), math.sin(0.3)
    v = torch.tensor([c, s, 0.0], dtype=torch.float64)
    M = 4 * torch.outer(v, v) + torch.diag(torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64))
    shares = eigenvector_mass(M, [0], k=2)
    torch.testing.assert_close(shares, torch.tensor([c * c, 0.0], dtype=torch.float64))
