"""rfm.nets.qwem.analogy_accuracy_path: the descent of factorization_gd, read every few steps."""
import pytest
import torch

from rfm.nets.qwem import (
    analogy_accuracy,
    analogy_accuracy_path,
    factorization_gd,
    planted_analogies,
    planted_cooccurrence,
    qwem_target,
)


@pytest.fixture(scope="module")
def corpus():
    c = planted_cooccurrence(3, [0.3, 0.2, 0.1], n_pairs=20_000, generator=0)
    return qwem_target(c["counts"]), planted_analogies(c["signs"], 50, generator=0)


def test_the_path_reads_the_descent_of_factorization_gd(corpus):
    M, quads = corpus
    run = factorization_gd(M, 3, init_scale=1e-3, lr=0.05, steps=40, record_every=1, generator=0)
    steps, accs = analogy_accuracy_path(M, run["W0"], quads, lr=0.05, steps=40, every=5)
    assert steps == list(range(0, 41, 5))
    assert accs[0] == analogy_accuracy(run["W0"], quads)
    # the same updates: the accuracy at the last step read equals that of factorization_gd's end point
    assert accs[-1] == analogy_accuracy(run["W"], quads)


def test_the_path_is_the_hand_written_replay(corpus):
    M, quads = corpus
    W0 = torch.randn(M.shape[0], 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 1e-3
    W, want = W0.clone(), []
    for s in range(13):
        if s % 4 == 0:
            want.append(analogy_accuracy(W, quads))
        W = W - 0.1 * ((W @ W.T - M) @ W)
    assert analogy_accuracy_path(M, W0, quads, lr=0.1, steps=12, every=4) == ([0, 4, 8, 12], want)
