"""Feature matrices on pairs of digits (rfm.data.modular.centred_identity, coupled_features,
centred_identity_distance), on known answers."""
import torch

import rfm
from rfm.data import modular as mod


def test_centred_identity_is_the_projection_off_the_ones_vector():
    P, ones = mod.centred_identity(5), torch.ones(5, dtype=torch.float64)
    assert torch.allclose(P @ P, P) and torch.allclose(P @ ones, 0 * ones)


def test_coupled_features_is_the_square_root_of_the_block_matrix():
    C = mod.random_circulant_block(7, "mul", generator=1)
    P = torch.eye(7, dtype=torch.float64) - 1.0 / 7
    A = torch.cat([torch.cat([P, C], 1), torch.cat([C.T, P], 1)])
    assert torch.equal(mod.coupled_features(C), rfm.psd_power(A, 0.5))
    # the random circulant features are the coupled features of the random circulant block, bit for bit
    assert torch.equal(mod.random_circulant_features(7, "mul", generator=1), mod.coupled_features(C))
    zero = mod.coupled_features(torch.zeros(7, 7, dtype=torch.float64))  # P is a projection: its root is itself
    assert torch.allclose(zero[:7, :7], P, atol=1e-12) and torch.allclose(zero[:7, 7:], 0 * P, atol=1e-12)


def test_centred_identity_distance_is_zero_on_multiples_and_known_elsewhere():
    p = 5
    M = torch.zeros(2 * p, 2 * p, dtype=torch.float64)
    M[:p, :p] = 3.0 * mod.centred_identity(p)
    assert mod.centred_identity_distance(M) < 1e-15
    M[:p, :p] = torch.eye(p, dtype=torch.float64)  # I = P + 11^T/p: the part off P has norm 1 of norm sqrt(p)
    assert abs(mod.centred_identity_distance(M, p) - (1 / p) ** 0.5) < 1e-12
