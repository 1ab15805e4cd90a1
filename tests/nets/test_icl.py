"""rfm.nets.icl against known answers: one gradient step, the closed-form risk, the explicit attention formula."""
import math

import numpy as np
import pytest
import torch

from rfm.nets import icl


def test_psi_linear_is_one_gradient_step_from_zero():
    """<w_1, x_q> with w_1 = 0 - 1 * grad of (1/(2n)) sum_j (y_j - <w, x_j>)^2 at 0, by float64 autograd."""
    p = icl.LinearTasks(5, noise=0.3, dtype="float64").sample(7, 9, generator=3)
    preds = []
    for b in range(len(p)):
        w = torch.zeros(5, dtype=torch.float64, requires_grad=True)
        loss = 0.5 * ((p.y[b] - p.X[b] @ w) ** 2).mean()
        (grad,) = torch.autograd.grad(loss, w)
        preds.append(float((0.0 - 1.0 * grad) @ p.x_query[b]))
    np.testing.assert_allclose(icl.psi_linear(p).numpy(), preds, rtol=1e-12, atol=1e-12)
    # and it is the label coordinate of psi with linear attention
    np.testing.assert_allclose(icl.psi(p, "linear")[:, -1].numpy(), icl.psi_linear(p).numpy(), rtol=1e-12)


@pytest.mark.parametrize("n,noise", [(5, 0.0), (10, 0.0), (20, 0.0), (10, 0.5)])
def test_psi_linear_risk_matches_closed_form(n, noise):
    """Monte Carlo risk on 200,000 fresh isotropic prompts within 4 standard errors of the closed form."""
    d = 4
    p = icl.LinearTasks(d, noise=noise, dtype="float64").sample(200_000, n, generator=n)
    err = (icl.psi_linear(p) - p.y_query) ** 2
    mc, se = float(err.mean()), float(err.std()) / math.sqrt(len(err))
    closed = icl.psi_linear_risk(n, d, noise)
    assert abs(mc - closed) < 4 * se, (mc, closed, se)
    if noise == 0:
        assert closed / d == pytest.approx((d + 1) / n)


def _explicit_attention(Z, attention, causal, scale):
    B, L, D = Z.shape
    out = torch.zeros_like(Z)
    for b in range(B):
        for i in range(L):
            keys = range(i + 1) if causal else range(L)
            s = torch.stack([Z[b, i] @ Z[b, j] for j in keys])
            if attention == "linear":
                a = s / len(s)
            elif attention == "l1":
                a = s / s.abs().sum()
            else:
                e = torch.exp(scale * s - (scale * s).max())
                a = e / e.sum()
            out[b, i] = sum(a[k] * Z[b, j] for k, j in enumerate(keys))
    return out


@pytest.mark.parametrize("attention", icl.ATTENTIONS)
@pytest.mark.parametrize("causal", [True, False])
def test_identity_attention_equals_explicit_formula(attention, causal):
    Z = torch.randn(3, 6, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    got = icl.identity_attention(Z, attention, causal=causal)
    want = _explicit_attention(Z, attention, causal, 1 / math.sqrt(5))
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_psi_is_query_attention_over_context():
    """psi = the explicit identity-KQV attention of [x_q, 0] over the context tokens [x_j, y_j] only."""
    p = icl.LinearTasks(3, dtype="float64").sample(4, 5, generator=2)
    for attention in icl.ATTENTIONS:
        got = icl.psi(p, attention)
        for b in range(len(p)):
            ctx = torch.cat([p.X[b], p.y[b, :, None]], 1)
            s = p.X[b] @ p.x_query[b]
            if attention == "linear":
                a = s / 5
            elif attention == "l1":
                a = s / s.abs().sum()
            else:
                a = torch.softmax(s / 2.0, 0)  # 1/sqrt(d + 1) = 1/2
            torch.testing.assert_close(got[b], a @ ctx, rtol=1e-12, atol=1e-12)


def test_one_sgpt_block_with_identity_read_in_is_attention_then_mlp():
    p = icl.LinearTasks(3, dtype="float64").sample(4, 6, generator=0)
    model = icl.SGPT(3, n_layers=1, width=16, attention="linear", dtype="float64", generator=5)
    Z = icl.tokens(p)
    h = Z + icl.identity_attention(Z, "linear")
    h = h + model.mlps[0](h)
    torch.testing.assert_close(model(p), model.read_out(h[:, -1]).squeeze(-1))
    # the query's attention output over tokens 0..n (itself included, causal) at the last position
    q = icl.identity_attention(Z, "linear")[:, -1]
    n = p.n_context
    ctx_part = icl.psi(p, "linear") * n
    self_part = (p.x_query.square().sum(1, keepdim=True)) * Z[:, -1]
    torch.testing.assert_close(q, (ctx_part + self_part) / (n + 1))


def test_learned_kqv_at_identity_is_sgpt_and_layer_norm_block_formula():
    p = icl.LinearTasks(3, dtype="float64").sample(4, 6, generator=0)
    kw = dict(n_layers=2, width=8, embed_dim=5, attention="softmax", dtype="float64", generator=3)
    sgpt = icl.SGPT(3, **kw)
    std = icl.SGPT(3, learned_kqv=True, **kw)
    with torch.no_grad():
        for layer in std.kqv:
            layer.layers[0].weight.copy_(torch.eye(5, dtype=torch.float64).repeat(3, 1))
    torch.testing.assert_close(std(p), sgpt(p), rtol=1e-12, atol=1e-12)
    # one pre-norm block with learned W_Q, W_K, W_V, by hand
    net = icl.SGPT(3, n_layers=1, width=8, attention="softmax", learned_kqv=True, layer_norm=True,
                   dtype="float64", generator=4)
    with torch.no_grad():
        for ln in net.norms:
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-0.5, 0.5)
    h = icl.tokens(p)
    u = net.norms[0](h)
    W = net.kqv[0].layers[0].weight
    Q, K, V = u @ W[:4].T, u @ W[4:8].T, u @ W[8:].T
    L = h.shape[1]
    S = (Q @ K.transpose(1, 2)) / 2.0 + torch.full((L, L), float("-inf"), dtype=torch.float64).triu(1)
    h = h + torch.softmax(S, -1) @ V
    h = h + net.mlps[0](net.norms[1](h))
    torch.testing.assert_close(net(p), net.read_out(net.norms[2](h)[:, -1]).squeeze(-1))


def test_vectorise_and_tokens_layout():
    p = icl.LinearTasks(2, dtype="float64").sample(2, 3, generator=0)
    v = icl.vectorise(p)
    assert v.shape == (2, 3 * 3 + 2)
    torch.testing.assert_close(v[0, :3], torch.cat([p.X[0, 0], p.y[0, :1]]))
    torch.testing.assert_close(v[0, -2:], p.x_query[0])
    Z = icl.tokens(p)
    assert Z.shape == (2, 4, 3) and float(Z[:, -1, -1].abs().sum()) == 0.0


@pytest.mark.parametrize("tasks", [icl.LinearTasks(3, n_tasks=8, noise=0.1, generator=4),
                                   icl.LinearTasks(3), icl.ReLUTeacherTasks(3, width=7, n_tasks=5)])
def test_samplers_are_deterministic_under_a_seed(tasks):
    a, b = tasks.sample(10, 4, generator=11), tasks.sample(10, 4, generator=11)
    c = tasks.sample(10, 4, generator=12)
    for name in ("X", "y", "x_query", "y_query"):
        assert torch.equal(getattr(a, name), getattr(b, name))
    assert not torch.equal(a.X, c.X)


def test_task_pool_is_fixed_and_used():
    tasks = icl.LinearTasks(3, n_tasks=4, generator=0, dtype="float64")
    again = icl.LinearTasks(3, n_tasks=4, generator=0, dtype="float64")
    assert torch.equal(tasks.weights, again.weights)
    p = tasks.sample(50, 6, generator=1)
    assert p.task_index.min() >= 0 and p.task_index.max() < 4 and len(set(p.task_index.tolist())) == 4
    w = tasks.weights[p.task_index]
    torch.testing.assert_close(p.y, torch.einsum("bnd,bd->bn", p.X, w))
    torch.testing.assert_close(p.y_query, (p.x_query * w).sum(1))
    assert icl.LinearTasks(3).weights is None


def test_float32_and_float64_draw_the_same_prompts():
    a = icl.LinearTasks(3, dtype="float32").sample(5, 4, generator=7)
    b = icl.LinearTasks(3, dtype="float64").sample(5, 4, generator=7)
    torch.testing.assert_close(a.X.double(), b.X, rtol=1e-6, atol=1e-6)


def test_relu_teacher_labels_and_scale():
    tasks = icl.ReLUTeacherTasks(4, width=50, n_tasks=3, generator=2, dtype="float64")
    p = tasks.sample(20, 5, generator=0)
    V, a = (t[p.task_index] for t in tasks.pool)
    y = math.sqrt(2 / 50) * torch.einsum("bnk,bk->bn", torch.relu(torch.einsum("bnd,bkd->bnk", p.X, V)), a)
    torch.testing.assert_close(p.y, y)
    big = icl.ReLUTeacherTasks(4, width=50).sample(20_000, 1, generator=0)
    assert float(big.y_query.var()) == pytest.approx(4.0, rel=0.1)


def test_batched_equals_unbatched():
    p = icl.LinearTasks(3, dtype="float64").sample(5, 4, generator=0)
    model = icl.PromptMLP(3, 4, ("psi", "vec"), [8], dtype="float64")
    sgpt = icl.SGPT(3, embed_dim=8, n_layers=2, width=8, attention="softmax", dtype="float64")
    std = icl.SGPT(3, embed_dim=8, n_layers=2, width=8, attention="softmax", learned_kqv=True, layer_norm=True,
                   dtype="float64")
    for f in (icl.vectorise, icl.psi, icl.psi_linear, icl.ridge_predict, model, sgpt, std):
        whole = f(p)
        parts = torch.cat([f(p[b]) for b in range(len(p))])
        torch.testing.assert_close(whole, parts, rtol=1e-12, atol=1e-12)


def test_ridge_predict_recovers_noiseless_tasks_and_is_bayes_formula():
    p = icl.LinearTasks(3, dtype="float64").sample(6, 8, generator=0)
    torch.testing.assert_close(icl.ridge_predict(p), p.y_query)
    lam = 0.7
    b = 2
    w = torch.linalg.solve(p.X[b].T @ p.X[b] + lam * torch.eye(3, dtype=torch.float64), p.X[b].T @ p.y[b])
    assert float(icl.ridge_predict(p, lam)[b]) == pytest.approx(float(w @ p.x_query[b]), rel=1e-12)
    under = icl.LinearTasks(5, dtype="float64").sample(3, 2, generator=0)  # n < d: minimum-norm interpolation
    assert torch.isfinite(icl.ridge_predict(under)).all()


def test_torch_in_torch_out_and_dtypes():
    p32 = icl.LinearTasks(3).sample(4, 5, generator=0)
    assert p32.X.dtype == torch.float32
    for f in (icl.vectorise, icl.psi, icl.psi_linear, icl.ridge_predict):
        out = f(p32)
        assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert icl.psi(p32.to("float64")).dtype == torch.float64


def test_train_online_learns_and_is_reproducible():
    tasks = icl.LinearTasks(2)
    test = tasks.sample(500, 10, generator=99)

    def run():
        model = icl.PromptMLP(2, 10, ("psi",), [32], generator=0)
        before = icl.evaluate(model, test)
        hist = icl.train_online(model, lambda b, g: tasks.sample(b, 10, g), steps=150, batch_size=32, lr=3e-3,
                                generator=1, eval_prompts=test, eval_every=50)
        return before, hist

    before, hist = run()
    _, again = run()
    assert [r["step"] for r in hist] == [50, 100, 150]
    assert hist == again
    assert hist[-1]["eval_mse"] < 0.5 * before


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="d must be >= 1"):
        icl.LinearTasks(0)
    with pytest.raises(ValueError, match="n_tasks"):
        icl.LinearTasks(3, n_tasks=0)
    with pytest.raises(ValueError, match="noise"):
        icl.LinearTasks(3, noise=-1.0)
    with pytest.raises(ValueError, match="n_context"):
        icl.LinearTasks(3).sample(2, 0)
    with pytest.raises(TypeError, match="Prompts"):
        icl.psi(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="attention"):
        icl.psi(icl.LinearTasks(2).sample(2, 3), "cosine")
    with pytest.raises(ValueError, match="shape"):
        icl.Prompts(torch.zeros(2, 3, 4), torch.zeros(2, 2), torch.zeros(2, 4), torch.zeros(2))
    with pytest.raises(ValueError, match="NaN"):
        icl.Prompts(torch.full((1, 2, 2), float("nan")), torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1))
    with pytest.raises(TypeError, match="tuple of names"):
        icl.PromptMLP(2, 3, "vec")
    with pytest.raises(ValueError, match="built for n = 3"):
        icl.PromptMLP(2, 3)(icl.LinearTasks(2).sample(2, 4))
    with pytest.raises(ValueError, match="built for d = 2"):
        icl.SGPT(2)(icl.LinearTasks(3).sample(2, 4))
    with pytest.raises(ValueError, match="steps"):
        icl.train_online(icl.SGPT(2), lambda b, g: icl.LinearTasks(2).sample(b, 3, g), steps=0)
    with pytest.raises(TypeError, match="sample must be"):
        icl.train_online(icl.SGPT(2), None, steps=1)
    with pytest.raises(TypeError, match="learned_kqv"):
        icl.SGPT(2, learned_kqv=1)
    with pytest.raises(ValueError, match="Z must be"):
        icl.identity_attention(torch.zeros(3, 4))


def test_sampler_one_length_and_mixed_lengths():
    """sampler(n) draws what sample(b, n, g) draws; sampler([...]) draws every listed length, repeatably."""
    tasks = icl.LinearTasks(3, n_tasks=5, noise=0.1, generator=4)
    a = tasks.sampler(6)(8, torch.Generator().manual_seed(1))
    b = tasks.sample(8, 6, torch.Generator().manual_seed(1))
    assert torch.equal(a.X, b.X) and torch.equal(a.y_query, b.y_query)
    mixed = tasks.sampler([2, 5, 9])
    g = torch.Generator().manual_seed(0)
    lengths = [mixed(4, g).n_context for _ in range(60)]
    assert set(lengths) == {2, 5, 9}
    g = torch.Generator().manual_seed(0)
    assert lengths == [mixed(4, g).n_context for _ in range(60)]
    with pytest.raises(ValueError, match="empty"):
        tasks.sampler([])
    with pytest.raises(TypeError, match="n_context"):
        tasks.sampler("five")
    with pytest.raises(ValueError, match="n_context"):
        tasks.sampler([3, 0])


def test_cosine_schedule_decays_the_learning_rate_to_zero():
    """With SGD on a linear model the update of step t is lr_t * grad: the recorded lr_t follow the half cosine."""
    tasks = icl.LinearTasks(3, noise=0.1)

    class Spy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(3))

        def forward(self, p):
            return p.x_query @ self.w

    steps, lr = 8, 0.05
    net = Spy()
    lrs = []
    orig_step = torch.optim.SGD.step

    def spy_step(self, *a, **k):
        lrs.append(self.param_groups[0]["lr"])
        return orig_step(self, *a, **k)

    torch.optim.SGD.step = spy_step
    try:
        icl.train_online(net, tasks.sampler(4), steps=steps, lr=lr, optimizer="sgd", schedule="cosine")
        lrs_cos, lrs[:] = list(lrs), []
        icl.train_online(Spy(), tasks.sampler(4), steps=steps, lr=lr, optimizer="sgd")
    finally:
        torch.optim.SGD.step = orig_step
    expected = [lr * 0.5 * (1 + math.cos(math.pi * t / steps)) for t in range(steps)]
    np.testing.assert_allclose(lrs_cos, expected, rtol=1e-12)
    assert lrs_cos[0] == lr and lrs_cos[-1] < 0.04 * lr
    assert lrs == [lr] * steps
    with pytest.raises(ValueError, match="schedule"):
        icl.train_online(Spy(), tasks.sampler(4), steps=2, schedule="linear")
