r"""In-context learning: the attention feature map psi, networks on prompts (PromptMLP, SGPT), online training.

The setting of Abedsoltan, Radhakrishnan, Wu & Belkin, *Context-scaling versus task-scaling in in-context
learning* (arXiv 2410.12783). The prompts and task pools (:class:`~rfm.data.icl.Prompts`,
:class:`~rfm.data.icl.LinearTasks`, :class:`~rfm.data.icl.ReLUTeacherTasks`), the prompt's representations
(:func:`~rfm.data.icl.vectorise`, :func:`~rfm.data.icl.tokens`) and the Bayes-optimal ridge predictor
(:func:`~rfm.data.icl.ridge_predict`) are data, in :mod:`rfm.data.icl`; their names are importable from here too.
*Context-scaling* is a test error that falls with the context length n at a fixed number of tasks T;
*task-scaling* one that falls with T at fixed n.

What this module provides (the conventions below are ours unless said otherwise; see the chapter's notes on what
was read in the paper):

* :func:`identity_attention`: one attention layer with key, query and value weights equal to the identity,
  out_i = sum_{j <= i} a_ij z_j with scores <z_i, z_j> normalised by ``"linear"`` (a_ij = <z_i, z_j> / i),
  ``"l1"`` (a_ij = <z_i, z_j> / sum_{k <= i} abs(<z_i, z_k>)) or ``"softmax"`` (a_ij = softmax_j(s <z_i, z_j>));
* :func:`psi` and :func:`psi_linear`: the identity-KQV attention of the query token z_q = [x_q, 0] over the
  context tokens z_j = [x_j, y_j], the data-dependent feature map; its label coordinate with linear attention is
  psi_linear = (1/n) sum_j y_j <x_j, x_q>, the prediction of one gradient step of size 1 from w = 0 on the
  prompt's least squares loss (1/(2n)) sum_j (y_j - <w, x_j>)^2; :func:`psi_linear_risk` is its risk in closed
  form on isotropic linear tasks;
* :class:`PromptMLP`: an :class:`rfm.nets.MLP` on features of the prompt: ``("vec",)``, ``("psi",)`` or
  ``("psi", "vec")`` (concatenated);
* :class:`SGPT`: a simplified GPT: a linear read-in of the tokens, blocks of [identity-KQV causal attention +
  residual, MLP + residual] without layer normalisation, a linear read-out at the query; with learned key, query
  and value weights and layer normalisation the same module is the small standard transformer of the controls;
* :func:`train_online`: Adam (or SGD) on fresh prompts at every step, the loss the squared error at the query,
  through the one training loop :func:`rfm.nets.training.fit`; :func:`evaluate` is the mean squared error on a
  fixed batch of prompts.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .._checks import check_choice, check_number, resolve_dtype

# the prompts, task pools and their representations are data (rfm.data.icl); their names stay importable from here
from ..data.icl import LinearTasks, Prompts, ReLUTeacherTasks, check_prompts, ridge_predict, tokens, vectorise
from ..utils import check_generator, make_generator
from .mlp import MLP
from .training import fit

__all__ = ["ATTENTIONS", "FEATURES", "LinearTasks", "PromptMLP", "Prompts", "ReLUTeacherTasks", "SGPT", "evaluate",
           "identity_attention", "psi", "psi_linear", "psi_linear_risk", "ridge_predict", "tokens", "train_online",
           "vectorise"]

#: The normalisations of the identity-KQV attention (``attention=``).
ATTENTIONS = ("linear", "l1", "softmax")
#: The prompt features of :class:`PromptMLP` (``features=``).
FEATURES = ("psi", "vec")


# ----------------------------------------------------------------------------------------------------------------
# Features


def _check_attention(attention):
    if not isinstance(attention, str):
        raise TypeError(f"attention must be one of {list(ATTENTIONS)}, got {attention!r}")
    return check_choice("attention", attention, ATTENTIONS)


def _normalise(scores, attention, scale, mask=None):
    """Attention weights from scores (..., L, L) or (..., L); ``mask`` True where a key may be attended."""
    if attention == "softmax":
        s = scores * scale
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return torch.softmax(s, dim=-1)
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)
    if attention == "linear":
        count = mask.sum(-1, keepdim=True).to(scores.dtype) if mask is not None else scores.shape[-1]
        return scores / count
    denom = scores.abs().sum(-1, keepdim=True)
    return scores / denom.clamp_min(torch.finfo(scores.dtype).tiny)


def identity_attention(Z: torch.Tensor, attention: str = "linear", *, causal: bool = True,
                       scale: float | None = None) -> torch.Tensor:
    """One attention layer with key, query and value weights equal to the identity, on tokens Z (B, L, D).

    out_i = sum_j a_ij z_j over j <= i (``causal``) or all j, with scores <z_i, z_j> normalised by ``attention``:
    "linear" a_ij = <z_i, z_j> / (number of attended tokens), "l1" a_ij = <z_i, z_j> / sum_k abs(<z_i, z_k>),
    "softmax" a_ij = softmax_j(scale <z_i, z_j>) with ``scale`` 1/sqrt(D) by default (GPT-2's scaling).

    Parameters
    ----------
    Z : torch.Tensor, shape (B, L, D)
        Tokens.
    attention : {"linear", "l1", "softmax"}, default "linear"
        The normalisation of the scores.
    causal : bool, default True
        Attend to j <= i only.
    scale : float, optional
        The softmax scale.

    Returns
    -------
    torch.Tensor, shape (B, L, D)
    """
    if not isinstance(Z, torch.Tensor) or Z.ndim != 3:
        raise ValueError(f"Z must be a tensor of tokens of shape (B, L, D), got "
                         f"{tuple(Z.shape) if isinstance(Z, torch.Tensor) else type(Z).__name__}")
    _check_attention(attention)
    if scale is None:
        scale = 1.0 / math.sqrt(Z.shape[-1])
    check_number("scale", scale)
    return _attend(Z, Z, Z, attention, causal, scale)


def _attend(Q, K, V, attention, causal, scale):
    S = Q @ K.transpose(1, 2)
    mask = None
    if causal:
        L = Q.shape[1]
        mask = torch.ones(L, L, dtype=torch.bool, device=Q.device).tril()
    return _normalise(S, attention, scale, mask) @ V


def psi(prompts: Prompts, attention: str = "linear", *, scale: float | None = None) -> torch.Tensor:
    """The feature map psi: identity-KQV attention of the query token z_q = [x_q, 0] over the n context tokens
    z_j = [x_j, y_j] (the query does not attend to itself), shape (B, d + 1).

    The scores are <z_q, z_j> = <x_q, x_j>; the last coordinate is the attention-weighted label average, e.g.
    :func:`psi_linear` for ``attention="linear"``, a kernel smoother of the labels for the others. ``scale`` as in
    :func:`identity_attention` (1/sqrt(d + 1) by default).

    Parameters
    ----------
    prompts : Prompts
        A batch of B prompts (n context examples in dimension d).
    attention : {"linear", "l1", "softmax"}, default "linear"
        The normalisation of the scores.
    scale : float, optional
        The softmax scale.

    Returns
    -------
    torch.Tensor, shape (B, d + 1)
    """
    p = check_prompts(prompts)
    _check_attention(attention)
    if scale is None:
        scale = 1.0 / math.sqrt(p.d + 1)
    check_number("scale", scale)
    ctx = torch.cat([p.X, p.y.unsqueeze(-1)], dim=-1)  # (B, n, d + 1)
    scores = torch.einsum("bnd,bd->bn", p.X, p.x_query)
    a = _normalise(scores, attention, scale)
    return torch.einsum("bn,bnd->bd", a, ctx)


def psi_linear(prompts: Prompts) -> torch.Tensor:
    """psi_linear = (1/n) sum_j y_j <x_j, x_q>, shape (B,): the prediction <w_1, x_q> of one gradient step of size 1
    from w_0 = 0 on (1/(2n)) sum_j (y_j - <w, x_j>)^2, whose gradient at 0 is -(1/n) sum_j y_j x_j.

    Parameters
    ----------
    prompts : Prompts
        A batch of B prompts (n context examples in dimension d).

    Returns
    -------
    torch.Tensor, shape (B,)
    """
    p = check_prompts(prompts)
    return torch.einsum("bn,bnd,bd->b", p.y, p.X, p.x_query) / p.n_context


def psi_linear_risk(n_context: int, d: int, noise: float = 0.0) -> float:
    """E (psi_linear - y_q)^2 on :class:`LinearTasks` with fresh tasks: d (d + 1) / n + noise^2 d / n + noise^2.

    With S = (1/n) sum_j x_j x_j^T the error is x_q^T (S - I) w + x_q^T (1/n) sum_j x_j eps_j - eps_q; E over x_q
    and w ~ N(0, I_d) gives tr E (S - I)^2 = d (n + d + 1) / n - d = d (d + 1) / n (Wishart second moment
    E (sum_j x_j x_j^T)^2 = n (n + d + 1) I), the noise terms add noise^2 d / n and noise^2. Divided by d
    (the error normalised by the label variance d) the noiseless risk is (d + 1) / n.

    Parameters
    ----------
    n_context : int
        n.
    d : int
        The dimension.
    noise : float, default 0.0
        The label noise's standard deviation.

    Returns
    -------
    float
        d (d + 1) / n + noise^2 d / n + noise^2.
    """
    check_number("n_context", n_context, low=1, integer=True)
    check_number("d", d, low=1, integer=True)
    check_number("noise", noise, low=0)
    n, s2 = float(n_context), float(noise) ** 2
    return d * (d + 1) / n + s2 * d / n + s2


# ----------------------------------------------------------------------------------------------------------------
# Models


def _check_features(features):
    if isinstance(features, str):
        raise TypeError(f"features must be a tuple of names from {list(FEATURES)}, e.g. ('psi', 'vec'), got the "
                        f"string {features!r}; write ({features!r},)")
    features = tuple(features)
    if not features:
        raise ValueError(f"features is empty; give at least one of {list(FEATURES)}")
    for f in features:
        check_choice("features", f, FEATURES)
    if len(set(features)) != len(features):
        raise ValueError(f"features has a repeated name: {features}")
    return features


class PromptMLP(nn.Module):
    """An :class:`rfm.nets.MLP` on features of the prompt, predicting y_q.

    ``features`` a tuple from ``("psi", "vec")``: :func:`psi` (d + 1 numbers, with ``attention``), the
    vectorised prompt :func:`vectorise` (n (d + 1) + d numbers), or both concatenated ([psi, vec]). The input
    size depends on n for "vec": a network is built for one context length ``n_context``. ``widths``,
    ``activation``, ``bias`` (True by default here), ``generator``, ``dtype`` go to the MLP.

    Parameters
    ----------
    d : int
        Input dimension.
    n_context : int
        Context length n.
    features : tuple of {"psi", "vec"}, default ("vec",)
        The features.
    widths : sequence of int, default (256,)
        Hidden widths.
    attention : {"linear", "l1", "softmax"}, default "linear"
        The attention of :func:`psi`.
    activation : str, default "relu"
        As in :class:`rfm.nets.MLP`.
    bias : bool, default True
        Biases.
    generator : int or torch.Generator, default 0
        Seeds the initial weights.
    dtype : str or torch.dtype, default "float32"
        The dtype.
    """

    def __init__(self, d: int, n_context: int, features=("vec",), widths=(256,), *, attention: str = "linear",
                 activation: str = "relu", bias: bool = True, generator=0, dtype="float32"):
        super().__init__()
        check_number("d", d, low=1, integer=True)
        check_number("n_context", n_context, low=1, integer=True)
        self.features = _check_features(features)
        self.attention = _check_attention(attention)
        self.d, self.n_context = int(d), int(n_context)
        d_in = sum(self.d + 1 if f == "psi" else self.n_context * (self.d + 1) + self.d for f in self.features)
        self.mlp = MLP(d_in, widths, 1, activation=activation, bias=bias, generator=generator, dtype=dtype)

    def featurize(self, prompts: Prompts) -> torch.Tensor:
        """The network's input: the features of the prompts, concatenated in the order of ``features``.

        Parameters
        ----------
        prompts : Prompts
            A batch of B prompts (n context examples in dimension d).

        Returns
        -------
        torch.Tensor, shape (B, d_in)

        Raises
        ------
        ValueError
            If the prompts' n or d differ from the network's.
        """
        p = check_prompts(prompts)
        if (p.n_context, p.d) != (self.n_context, self.d):
            raise ValueError(f"the prompts have n = {p.n_context} context examples in d = {p.d}, but this network "
                             f"was built for n = {self.n_context}, d = {self.d}")
        parts = [psi(p, self.attention) if f == "psi" else vectorise(p) for f in self.features]
        return torch.cat(parts, dim=1)

    def forward(self, prompts: Prompts) -> torch.Tensor:
        """The predictions of y_q.

        Parameters
        ----------
        prompts : Prompts
            A batch of B prompts (n context examples in dimension d).

        Returns
        -------
        torch.Tensor, shape (B,)
        """
        return self.mlp(self.featurize(prompts)).squeeze(-1)


class SGPT(nn.Module):
    """A simplified GPT: key, query and value weights fixed to the identity, no layer normalisation.

    The prompt's n + 1 tokens :func:`tokens` (z_j = [x_j, y_j], z_q = [x_q, 0]) are mapped by a learned linear
    read-in to ``embed_dim`` (or kept, ``embed_dim=None``: D = d + 1, identity read-in), then ``n_layers`` blocks
    h <- h + A(h), h <- h + MLP(h), where A is :func:`identity_attention` (causal, ``attention``) and MLP a
    ReLU network D -> ``width`` -> D with biases, and a linear read-out of the query token gives the prediction.
    With the identity read-in one block is the attention feature map followed by an MLP.

    The control, a small standard transformer, is the same module with ``learned_kqv=True`` (trained query, key
    and value matrices D x D per block, one head, A(h) = attention(h W_Q^T, h W_K^T) h W_V^T) and ``layer_norm=True``
    (GPT-2's pre-norm: A and the MLP act on LayerNorm(h), and a last LayerNorm before the read-out), e.g.
    ``SGPT(d, embed_dim=64, n_layers=4, attention="softmax", learned_kqv=True, layer_norm=True)``; it has no
    positional embedding (the causal mask and the query's zero label mark the positions).

    Parameters
    ----------
    d : int
        Input dimension.
    n_layers : int, default 1
        Blocks.
    width : int, default 256
        Hidden width of each block's MLP.
    embed_dim : int, optional
        D (None: d + 1 with the identity read-in).
    attention : {"linear", "l1", "softmax"}, default "l1"
        As in :func:`identity_attention`.
    scale : float, optional
        The softmax scale (default 1/sqrt(D)).
    learned_kqv : bool, default False
        Train the query, key and value matrices.
    layer_norm : bool, default False
        GPT-2's pre-norm.
    generator : int or torch.Generator, default 0
        Seeds the initial weights.
    dtype : str or torch.dtype, default "float32"
        The dtype.
    """

    def __init__(self, d: int, *, n_layers: int = 1, width: int = 256, embed_dim: int | None = None,
                 attention: str = "l1", scale: float | None = None, learned_kqv: bool = False,
                 layer_norm: bool = False, generator=0, dtype="float32"):
        super().__init__()
        check_number("d", d, low=1, integer=True)
        check_number("n_layers", n_layers, low=1, integer=True)
        check_number("width", width, low=1, integer=True)
        if embed_dim is not None:
            check_number("embed_dim", embed_dim, low=1, integer=True)
        self.attention = _check_attention(attention)
        if scale is not None:
            check_number("scale", scale)
        self.d = int(d)
        D = self.d + 1 if embed_dim is None else int(embed_dim)
        self.embed_dim, self.scale = D, scale
        g = check_generator(generator)
        dt = resolve_dtype(dtype)
        for name, value in (("learned_kqv", learned_kqv), ("layer_norm", layer_norm)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be True or False, got {value!r}")
        self.learned_kqv, self.layer_norm = learned_kqv, layer_norm
        seeds = [int(torch.randint(2**31 - 1, (1,), generator=g)) for _ in range(n_layers + 2)]
        self.read_in = None
        if embed_dim is not None:
            self.read_in = MLP(self.d + 1, [], D, generator=seeds[-2], dtype=dt)
        self.mlps = nn.ModuleList([MLP(D, [width], D, bias=True, generator=s, dtype=dt) for s in seeds[:n_layers]])
        self.read_out = MLP(D, [], 1, bias=True, generator=seeds[-1], dtype=dt)
        self.kqv = None
        if learned_kqv:  # W_Q, W_K, W_V stacked as one (3D x D) bias-free layer per block, N(0, 1/D) entries
            self.kqv = nn.ModuleList([MLP(D, [], 3 * D, generator=s + 1, dtype=dt) for s in seeds[:n_layers]])
        self.norms = None
        if layer_norm:
            self.norms = nn.ModuleList([nn.LayerNorm(D, dtype=dt) for _ in range(2 * n_layers + 1)])

    def hidden(self, prompts: Prompts) -> torch.Tensor:
        """The tokens after the last block, shape (B, n + 1, D).

        Parameters
        ----------
        prompts : Prompts
            A batch of B prompts (n context examples in dimension d).

        Returns
        -------
        torch.Tensor, shape (B, n + 1, D)
        """
        p = check_prompts(prompts)
        if p.d != self.d:
            raise ValueError(f"the prompts have d = {p.d} but this SGPT was built for d = {self.d}")
        h = tokens(p)
        if self.read_in is not None:
            h = self.read_in(h)
        scale = 1.0 / math.sqrt(self.embed_dim) if self.scale is None else self.scale
        for l, mlp in enumerate(self.mlps):
            u = self.norms[2 * l](h) if self.norms is not None else h
            if self.kqv is None:
                h = h + _attend(u, u, u, self.attention, True, scale)
            else:
                Q, K, V = self.kqv[l](u).split(self.embed_dim, dim=-1)
                h = h + _attend(Q, K, V, self.attention, True, scale)
            u = self.norms[2 * l + 1](h) if self.norms is not None else h
            h = h + mlp(u)
        if self.norms is not None:
            h = self.norms[-1](h)
        return h

    def forward(self, prompts: Prompts) -> torch.Tensor:
        """The predictions of y_q: the read-out of the query token after the last block.

        Parameters
        ----------
        prompts : Prompts
            A batch of B prompts (n context examples in dimension d).

        Returns
        -------
        torch.Tensor, shape (B,)
        """
        return self.read_out(self.hidden(prompts)[:, -1]).squeeze(-1)


# ----------------------------------------------------------------------------------------------------------------
# Training


@torch.no_grad()
def evaluate(model, prompts: Prompts) -> float:
    """Mean squared error of ``model(prompts)`` against the query labels (prompts cast to the model's dtype).

    Parameters
    ----------
    model : torch.nn.Module
        A network on prompts.
    prompts : Prompts
        A batch of B prompts (n context examples in dimension d).

    Returns
    -------
    float
    """
    p = check_prompts(prompts)
    param = next(model.parameters())
    p = p.to(param.dtype, param.device)
    out = model(p)
    if out.shape != p.y_query.shape:
        raise ValueError(f"the model returns shape {tuple(out.shape)} for {len(p)} prompts; expected ({len(p)},)")
    return float(((out - p.y_query) ** 2).mean())


def train_online(model: nn.Module, sample, *, steps: int, batch_size: int = 64, lr: float = 1e-3,
                 optimizer: str = "adam", schedule: str = "constant", generator=0, threads: int | None = 1,
                 eval_prompts: Prompts | None = None, eval_every: int | None = None) -> list[dict]:
    """Train ``model`` (prompts -> (B,) predictions) in place on fresh prompts at every step; return its history.

    Each step draws a batch ``sample(batch_size, generator)`` from the one generator seeded by ``generator`` (so a
    seed fixes the whole stream of prompts) and is one step of :func:`rfm.nets.training.fit` on the mean squared
    error at the query. Every ``eval_every`` steps (and at the last) a record {"step", "train_loss" (mean over the
    steps since the last record), "eval_mse" (on ``eval_prompts``, if given)} is stored. A non-finite loss raises
    ``FloatingPointError``.

    Parameters
    ----------
    model : torch.nn.Module
        Maps a :class:`~rfm.data.icl.Prompts` batch to (B,) predictions; trained in place.
    sample : callable
        ``sample(batch_size, generator) -> Prompts``, e.g. ``tasks.sampler(n)``.
    steps, batch_size : int
        The number of steps and of prompts per step.
    lr : float
        The learning rate.
    optimizer : {"adam", "sgd"}
        The optimizer.
    schedule : {"constant", "cosine"}
        The learning rate kept constant, or decayed to 0 along a half cosine, lr (1 + cos(pi t / steps)) / 2 at
        step t + 1 (which lowers the noise of the last iterate).
    generator : int or torch.Generator
        Seed or generator of the prompts.
    threads : int, optional
        torch CPU threads during training (1 by default: small models are fastest on one thread).
    eval_prompts : Prompts, optional
        A fixed batch to measure at the records.
    eval_every : int, optional
        Record every this many steps (default: only at the end).

    Returns
    -------
    list of dict
        The records.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module taking Prompts, got {type(model).__name__}")
    if not callable(sample):
        raise TypeError(f"sample must be a function sample(batch_size, generator) -> Prompts, got "
                        f"{type(sample).__name__}")
    check_number("steps", steps, low=1, integer=True)
    check_number("batch_size", batch_size, low=1, integer=True)
    check_number("lr", lr, low=0, low_inclusive=False)
    if not isinstance(optimizer, str):
        raise TypeError(f"optimizer must be 'adam' or 'sgd', got {optimizer!r}")
    check_choice("optimizer", optimizer, ("adam", "sgd"))
    if not isinstance(schedule, str):
        raise TypeError(f"schedule must be 'constant' or 'cosine', got {schedule!r}")
    check_choice("schedule", schedule, ("constant", "cosine"))
    if eval_prompts is not None:
        check_prompts(eval_prompts, "eval_prompts")
    eval_every = int(steps) if eval_every is None else int(check_number("eval_every", eval_every, low=1,
                                                                          integer=True))
    g = make_generator(generator) if not isinstance(generator, torch.Generator) else generator
    param = next(model.parameters())
    opt = (torch.optim.Adam if optimizer == "adam" else torch.optim.SGD)(model.parameters(), lr=lr)
    total_steps = int(steps)
    factor = ((lambda t: 0.5 * (1.0 + math.cos(math.pi * t / total_steps))) if schedule == "cosine"
              else (lambda t: 1.0))
    history, running = [], {"total": 0.0, "count": 0}

    def prompt_loss(step):
        p = check_prompts(sample(int(batch_size), g), "sample(...)").to(param.dtype, param.device)
        for group in opt.param_groups:
            group["lr"] = lr * factor(step - 1)
        out = model(p)
        if step == 1 and out.shape != p.y_query.shape:
            raise ValueError(f"the model returns shape {tuple(out.shape)} for {len(p)} prompts; expected "
                             f"({len(p)},)")
        return ((out - p.y_query) ** 2).mean()

    def record(step, loss):
        running["total"], running["count"] = running["total"] + float(loss), running["count"] + 1
        if step % eval_every == 0 or step == steps:
            rec = {"step": step, "train_loss": running["total"] / running["count"]}
            if eval_prompts is not None:
                rec["eval_mse"] = evaluate(model, eval_prompts)
            history.append(rec)
            running["total"], running["count"] = 0.0, 0
        return False

    def diverged(step, value):
        return FloatingPointError(f"the training loss became {value} at step {step}: lower lr (now {lr:g})")

    model.train()
    fit(opt, prompt_loss, int(steps), callback=record, diverged=diverged, threads=threads)
    model.eval()
    return history
