"""The one training loop, rfm.nets.training.fit, and the drivers over it, on known answers."""
import math

import pytest
import torch

from rfm import nets
from rfm.nets.training import fit, num_threads


def test_fit_is_gradient_descent_step_for_step():
    # on L(w) = (w - 3)^2 gradient descent with step 0.1 gives w_t = 3 - 3 * 0.8^t
    w = torch.zeros((), dtype=torch.float64, requires_grad=True)
    seen = []
    taken = fit(torch.optim.SGD([w], lr=0.1), lambda t: (w - 3) ** 2, 5,
                callback=lambda t, loss: seen.append((t, float(loss))) and False)
    assert taken == 5
    assert float(w.detach()) == pytest.approx(3 - 3 * 0.8 ** 5, rel=1e-14)
    # the callback sees the loss at which each step was taken: (3 * 0.8^(t-1))^2
    assert [t for t, _ in seen] == [1, 2, 3, 4, 5]
    assert [v for _, v in seen] == pytest.approx([(3 * 0.8 ** (t - 1)) ** 2 for t in range(1, 6)], rel=1e-14)


def test_fit_stops_when_the_callback_returns_true_and_takes_no_step_for_zero_steps():
    w = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.5)
    assert fit(opt, lambda t: ((w - 1) ** 2).sum(), 100, callback=lambda t, loss: t == 3) == 3
    assert float(w.detach()) == 1.0                                   # lr 0.5 on (w - 1)^2 jumps to 1 in one step
    assert fit(opt, lambda t: pytest.fail("no step is taken"), 0) == 0


def test_fit_raises_before_the_update_on_a_non_finite_loss():
    w = torch.ones(1, requires_grad=True)
    losses = [torch.tensor(1.0), torch.tensor(math.inf)]
    with pytest.raises(FloatingPointError, match="at step 2"):
        fit(torch.optim.SGD([w], lr=0.1), lambda t: (w * losses[t - 1]).sum(), 3)
    assert float(w.detach()) == pytest.approx(0.9)                    # step 1 was taken, step 2 was not
    with pytest.raises(ZeroDivisionError):                   # a caller's own error
        fit(torch.optim.SGD([w], lr=0.1), lambda t: (w * math.inf).sum(), 1,
            diverged=lambda t, v: ZeroDivisionError(f"step {t}"))


def test_fit_trains_under_no_grad_and_restores_the_thread_count():
    before = torch.get_num_threads()
    w = torch.zeros(1, requires_grad=True)
    with torch.no_grad():
        fit(torch.optim.SGD([w], lr=0.25), lambda t: ((w - 2) ** 2).sum(), 1, threads=1)
    assert float(w.detach()) == pytest.approx(1.0) and torch.get_num_threads() == before
    with num_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_train_full_batch_equals_the_loop_written_out():
    X = torch.randn(20, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = X[:, :1] - X[:, 1:2]
    a, b = nets.MLP(3, [8], 1, generator=1, dtype="float64"), nets.MLP(3, [8], 1, generator=1, dtype="float64")
    hist = nets.train(a, X, y, lr=0.1, epochs=4)
    opt = torch.optim.SGD(b.parameters(), lr=0.1)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(b(X), y)
        losses.append(float(loss))
        loss.backward()
        opt.step()
    assert [h["train_loss"] for h in hist] == losses
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)


def test_train_mini_batches_see_every_sample_once_per_epoch():
    X = torch.arange(10, dtype=torch.float64)[:, None]
    seen = []

    class Probe(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1, 1, dtype=torch.float64))

        def forward(self, x):
            seen.append(x[:, 0].tolist())
            return x @ self.w

    hist = nets.train(Probe(), X, X, lr=1e-3, epochs=2, batch_size=4, generator=0)
    assert [len(b) for b in seen] == [4, 4, 2, 4, 4, 2]
    assert sorted(sum(seen[:3], [])) == sorted(sum(seen[3:], [])) == list(range(10))
    assert [h["epoch"] for h in hist] == [1, 2]
