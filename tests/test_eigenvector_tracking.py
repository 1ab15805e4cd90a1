"""rfm.metrics' eigenvector statistics: per-vector overlap, sign alignment and Gorlla's entry-sum drift."""
import torch

from rfm.metrics import align_signs, entry_sum_drift, per_vector_overlap, subspace_overlap


def _rotation(theta):
    c, s = torch.cos(torch.tensor(theta)), torch.sin(torch.tensor(theta))
    return torch.stack([torch.stack([c, -s]), torch.stack([s, c])])


def test_swapped_eigenvectors_keep_the_subspace_but_not_the_per_vector_overlap():
    U = torch.eye(3)[:, :2]
    V = U[:, [1, 0]]
    assert subspace_overlap(U, V) == 1.0
    assert per_vector_overlap(U, V) == 0.0
    assert per_vector_overlap(U, -U) == 1.0


def test_align_signs_undoes_the_eigensolvers_flips():
    U0 = torch.eye(3)[:, :2]
    flipped = U0 * torch.tensor([-1.0, 1.0])
    again = U0 * torch.tensor([1.0, -1.0])
    aligned = align_signs([U0, flipped, again])
    assert all(torch.equal(A, U0) for A in aligned)


def test_a_zero_inner_product_keeps_the_sign():
    U0 = torch.eye(2)
    U1 = -torch.eye(2)[:, [1, 0]]            # each column orthogonal to its predecessor
    assert torch.equal(align_signs([U0, U1])[1], U1)


def test_entry_sum_drift_by_hand_and_its_sign_artefact():
    U0 = torch.eye(2)
    # a sign flip of both vectors moves each entry sum from 1 to -1: drift 2, though nothing changed
    assert entry_sum_drift([U0, -U0]) == [0.0, 2.0]
    assert entry_sum_drift(align_signs([U0, -U0])) == [0.0, 0.0]
    # a rotation by 90 degrees: sums (1, 1) -> (1, -1), changes |0| and |-2|; torch's median of an even count is
    # the lower middle value
    R = U0 @ _rotation(torch.pi / 2).T
    assert abs(entry_sum_drift([U0, R])[1]) < 1e-6
