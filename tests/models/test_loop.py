"""rfm.models.loop: the one RFM loop, on a scripted step whose every call is recorded, and lin-RFM's step against
the loop written out by hand."""
import torch

from rfm.models.linear import _weighted_min_norm, lin_rfm_sparse
from rfm.models.loop import rfm_loop


class ScriptedStep:
    """M is a number; solve returns model 10 M + t and the score of a script; agop returns the model, update M + 1."""

    def __init__(self, scores=None, stop_at=None, degenerate_at=None):
        self.calls, self.scores, self.stop_at, self.degenerate_at = [], scores, stop_at, degenerate_at

    def solve(self, M, t):
        self.calls.append(("solve", M, t))
        return 10 * M + t, {"iteration": t}, f"scratch{t}"

    def score(self, record):
        return None if self.scores is None else self.scores[record["iteration"]]

    def stop(self, model, history, best_iter):
        self.calls.append(("stop", len(history), best_iter))
        return history[-1]["iteration"] == self.stop_at

    def agop(self, model, M, scratch):
        self.calls.append(("agop", model, scratch))
        return model

    def update(self, A, M, t):
        self.calls.append(("update", A, M))
        return M + 1, t == self.degenerate_at


def test_loop_solves_iters_plus_one_times_and_updates_between_solves():
    step = ScriptedStep()
    res = rfm_loop(step, 0, 2)
    assert step.calls == [("solve", 0, 0), ("stop", 1, 0), ("agop", 0, "scratch0"), ("update", 0, 0),
                          ("solve", 1, 1), ("stop", 2, 1), ("agop", 11, "scratch1"), ("update", 11, 1),
                          ("solve", 2, 2), ("stop", 3, 2)]
    assert [r["iteration"] for r in res.history] == [0, 1, 2] and all(r["time_s"] >= 0 for r in res.history)
    assert (res.model, res.best_iter, res.M) == (22, 2, 2)  # no score: the last iterate, and the M it was solved with


def test_loop_keeps_the_first_best_score_and_passes_it_to_stop():
    step = ScriptedStep(scores=[1.0, 3.0, 3.0, 2.0])
    res = rfm_loop(step, 0, 3)
    assert (res.model, res.best_iter) == (11, 1)  # a tie does not replace the kept iterate
    assert [c[2] for c in step.calls if c[0] == "stop"] == [0, 1, 1, 1]


def test_loop_stops_without_updating_when_told_and_on_a_degenerate_update():
    stopped = ScriptedStep(stop_at=1)
    res = rfm_loop(stopped, 0, 5)
    assert len(res.history) == 2 and res.M == 1 and ("update", 11, 1) not in stopped.calls
    degenerate = ScriptedStep(degenerate_at=0)
    res = rfm_loop(degenerate, 0, 5)
    assert len(res.history) == 1 and res.M == 1  # the update ran (and said stop): no second solve


def test_zero_iterations_is_one_solve_and_no_update():
    step = ScriptedStep()
    res = rfm_loop(step, 7, 0)
    assert [c[0] for c in step.calls] == ["solve", "stop"] and res.model == 70 and res.M == 7


def test_lin_rfm_sparse_through_the_loop_equals_the_loop_written_out():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(15, 40, generator=g, dtype=torch.float64)
    w_true = torch.zeros(40, dtype=torch.float64)
    w_true[[3, 17, 29]] = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    y = X @ w_true
    w = _weighted_min_norm(X, y, torch.ones(40, dtype=torch.float64), 0.0)
    path = [w]
    for _ in range(6):
        w = _weighted_min_norm(X, y, w.abs() ** (4 * 0.25), 0.0)
        path.append(w)
    got, got_path = lin_rfm_sparse(X, y, iters=6, alpha=0.25, return_path=True)
    assert torch.equal(got, w) and torch.equal(got_path, torch.stack(path))
