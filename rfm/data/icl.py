r"""In-context learning tasks: prompts, pools of tasks, and the prompt's representations.

The setting of Abedsoltan, Radhakrishnan, Wu & Belkin, *Context-scaling versus task-scaling in in-context
learning* (arXiv 2410.12783). A **prompt** (:class:`Prompts`, a batch) holds n context examples (x_j, y_j),
x_j in R^d, and a query x_q whose label y_q is to be predicted; all n + 1 labels come from one **task** f, drawn
from a pool of T tasks fixed before training (``n_tasks=T``) or fresh for every prompt (``n_tasks=None``).

* tasks: :class:`LinearTasks` (y = <w, x> + noise, x ~ N(0, I_d), w ~ N(0, I_d), the convention of Garg et al.) and
  :class:`ReLUTeacherTasks` (y = sum_k a_k relu(<v_k, x>) + noise, a two-layer ReLU teacher); their ``sample``
  method returns a :class:`Prompts` batch, deterministically for a seed, and their ``sampler`` method the
  function :func:`rfm.nets.icl.train_online` draws from;
* representations: :func:`vectorise` (the flattened prompt, the input of an MLP) and :func:`tokens` (the n + 1
  tokens of a sequence model);
* :func:`ridge_predict`: ridge regression on each prompt (with ridge = noise variance the Bayes-optimal predictor
  of :class:`LinearTasks`, whose prior is w ~ N(0, I_d)).

The networks, the attention feature map psi and online training are in :mod:`rfm.nets.icl`.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

from .._checks import check_number, resolve_dtype
from ..utils import check_generator

__all__ = ["LinearTasks", "Prompts", "ReLUTeacherTasks", "check_prompts", "ridge_predict", "tokens", "vectorise"]


# ----------------------------------------------------------------------------------------------------------------
# Prompts


@dataclass
class Prompts:
    """A batch of B prompts with n context examples each.

    Parameters
    ----------
    X : torch.Tensor, shape (B, n, d)
        Context inputs (floating point, finite; so are the others).
    y : torch.Tensor, shape (B, n)
        Their labels.
    x_query : torch.Tensor, shape (B, d)
        The query inputs.
    y_query : torch.Tensor, shape (B,)
        The query's label (the target).
    task_index : torch.Tensor of int64, shape (B,), optional
        The pool index of each prompt's task (-1 for fresh tasks).

    Raises
    ------
    TypeError
        If a field is not a floating-point tensor.
    ValueError
        If the shapes do not match, n = 0, or a value is not finite.
    """

    X: torch.Tensor
    y: torch.Tensor
    x_query: torch.Tensor
    y_query: torch.Tensor
    task_index: torch.Tensor | None = None

    def __post_init__(self):
        for name in ("X", "y", "x_query", "y_query"):
            if not isinstance(getattr(self, name), torch.Tensor):
                raise TypeError(f"Prompts.{name} must be a torch.Tensor, got {type(getattr(self, name)).__name__}")
        if self.X.ndim != 3:
            raise ValueError(f"Prompts.X must have shape (B, n, d), got {tuple(self.X.shape)}")
        B, n, d = self.X.shape
        if n < 1:
            raise ValueError("Prompts.X has no context examples (n = 0); a prompt needs n >= 1")
        if tuple(self.y.shape) != (B, n):
            raise ValueError(f"Prompts.y must have shape (B, n) = {(B, n)} to match X, got {tuple(self.y.shape)}")
        if tuple(self.x_query.shape) != (B, d):
            raise ValueError(f"Prompts.x_query must have shape (B, d) = {(B, d)}, got {tuple(self.x_query.shape)}")
        if tuple(self.y_query.shape) != (B,):
            raise ValueError(f"Prompts.y_query must have shape (B,) = {(B,)}, got {tuple(self.y_query.shape)}")
        for name in ("X", "y", "x_query", "y_query"):
            t = getattr(self, name)
            if not t.is_floating_point():
                raise TypeError(f"Prompts.{name} must be a floating-point tensor, got {t.dtype}")
            if not torch.isfinite(t).all():
                raise ValueError(f"Prompts.{name} contains NaN or infinite values")

    def __len__(self) -> int:
        return self.X.shape[0]

    @property
    def n_context(self) -> int:
        return self.X.shape[1]

    @property
    def d(self) -> int:
        return self.X.shape[2]

    def to(self, dtype=None, device=None) -> Prompts:
        """A copy with the tensors in ``dtype`` (float32/float64) and on ``device``.

        Parameters
        ----------
        dtype : str or torch.dtype, optional
            The dtype (None: unchanged).
        device : torch.device or str, optional
            The device (None: unchanged).

        Returns
        -------
        Prompts
            ``task_index`` is shared, not copied.
        """
        dtype = resolve_dtype(dtype) if dtype is not None else self.X.dtype
        conv = lambda t: t.to(dtype=dtype, device=device)
        return Prompts(conv(self.X), conv(self.y), conv(self.x_query), conv(self.y_query), self.task_index)

    def __getitem__(self, idx) -> Prompts:
        """The prompts ``idx`` (an int, slice or index tensor), as a batch."""
        if isinstance(idx, numbers.Integral):
            idx = slice(int(idx), int(idx) + 1) if idx != -1 else slice(-1, None)
        ti = None if self.task_index is None else self.task_index[idx]
        return Prompts(self.X[idx], self.y[idx], self.x_query[idx], self.y_query[idx], ti)


def check_prompts(prompts, name="prompts") -> Prompts:
    """Raise unless ``prompts`` is a :class:`Prompts` batch.

    Parameters
    ----------
    prompts : object
        The batch.
    name : str
        Its name, for the error message.

    Returns
    -------
    Prompts
        ``prompts``.
    """
    if not isinstance(prompts, Prompts):
        raise TypeError(f"{name} must be an rfm.data.icl.Prompts batch (e.g. from LinearTasks(d).sample(...)), got "
                        f"{type(prompts).__name__}")
    return prompts


# ----------------------------------------------------------------------------------------------------------------
# Tasks


class _Tasks:
    """Shared machinery: a pool of ``n_tasks`` task parameters drawn once from ``generator``, or fresh ones."""

    def __init__(self, d, *, n_tasks=None, noise=0.0, generator=0, dtype="float32"):
        check_number("d", d, low=1, integer=True)
        if n_tasks is not None:
            check_number("n_tasks", n_tasks, low=1, integer=True)
        check_number("noise", noise, low=0)
        self.d, self.n_tasks, self.noise = int(d), (None if n_tasks is None else int(n_tasks)), float(noise)
        self.dtype = resolve_dtype(dtype)
        self.pool = None
        if self.n_tasks is not None:
            self.pool = self._draw_params(self.n_tasks, check_generator(generator))

    def _draw_params(self, m, g):  # pragma: no cover - abstract
        raise NotImplementedError

    def _labels(self, params, X):  # pragma: no cover - abstract
        raise NotImplementedError

    def sample(self, n_prompts: int, n_context: int, generator=0) -> Prompts:
        """``n_prompts`` prompts with ``n_context`` examples each, drawn from ``generator`` (a seed or a CPU
        ``torch.Generator``): a task per prompt (uniform over the pool, or fresh), x ~ N(0, I_d) for the n + 1
        points, labels with N(0, noise^2) noise on every label, the query's included. Float64 draws, returned in
        the tasks' dtype, so a seed gives the same prompts in float32 and float64."""
        check_number("n_prompts", n_prompts, low=1, integer=True)
        check_number("n_context", n_context, low=1, integer=True)
        g = check_generator(generator)
        B, n = int(n_prompts), int(n_context)
        if self.pool is None:
            params = self._draw_params(B, g)
            index = torch.full((B,), -1, dtype=torch.long)
        else:
            index = torch.randint(self.n_tasks, (B,), generator=g)
            params = tuple(p[index] for p in self.pool)
        Xall = torch.randn(B, n + 1, self.d, generator=g, dtype=torch.float64)
        yall = self._labels(params, Xall)
        if self.noise > 0:
            yall = yall + self.noise * torch.randn(B, n + 1, generator=g, dtype=torch.float64)
        c = lambda t: t.to(self.dtype)
        return Prompts(c(Xall[:, :n]), c(yall[:, :n]), c(Xall[:, n]), c(yall[:, n]), index)


    def sampler(self, n_context):
        """A function ``sample(batch_size, generator) -> Prompts`` for :func:`rfm.nets.icl.train_online`.

        ``n_context`` an int (every batch has that many context examples) or a sequence of ints (each batch draws
        its length uniformly from them, from the same generator, so that one sequence model is trained for all
        of them at once)."""
        if isinstance(n_context, numbers.Integral):
            check_number("n_context", n_context, low=1, integer=True)
            n = int(n_context)
            return lambda b, g: self.sample(b, n, g)
        try:
            lengths = [int(check_number("n_context", v, low=1, integer=True)) for v in n_context]
        except TypeError:
            raise TypeError(f"n_context must be an int or a sequence of ints, got {n_context!r}") from None
        if not lengths:
            raise ValueError("n_context is an empty sequence; give at least one context length")

        def sample(b, g):
            g = check_generator(g)
            n = lengths[int(torch.randint(len(lengths), (1,), generator=g))]
            return self.sample(b, n, g)
        return sample


class LinearTasks(_Tasks):
    """Linear regression tasks y = <w, x> + noise with w ~ N(0, I_d) and x ~ N(0, I_d).

    ``n_tasks`` T: a pool of T weight vectors drawn once from ``generator`` (the pre-training tasks); None: a fresh
    w for every prompt. ``noise`` the label noise's standard deviation. ``weights`` is the pool (T, d) or None.

    Parameters
    ----------
    d : int
        The input dimension.
    n_tasks : int, optional
        T, the size of the task pool (None: a fresh task for every prompt).
    noise : float, default 0.0
        The label noise's standard deviation.
    generator : int or torch.Generator, default 0
        Seeds the pool.
    dtype : str or torch.dtype, default "float32"
        The dtype of the prompts.
    """

    def _draw_params(self, m, g):
        return (torch.randn(m, self.d, generator=g, dtype=torch.float64),)

    def _labels(self, params, X):
        (w,) = params
        return torch.einsum("bnd,bd->bn", X, w)

    @property
    def weights(self):
        return None if self.pool is None else self.pool[0]


class ReLUTeacherTasks(_Tasks):
    """Two-layer ReLU teacher tasks y = sqrt(2 / width) sum_k a_k relu(<v_k, x>) + noise.

    Every task has its own v_k ~ N(0, I_d) (k = 1..``width``) and a_k ~ N(0, 1); the factor sqrt(2 / width) makes
    E[y^2] = d for x ~ N(0, I_d) (E relu(g)^2 = 1/2 for g ~ N(0, 1), times E[v_k^2 sum] = d), the label scale of
    :class:`LinearTasks`. ``n_tasks`` and ``noise`` as there.

    Parameters
    ----------
    d : int
        The input dimension.
    width : int, default 100
        The teacher's hidden units.
    n_tasks : int, optional
        T, the size of the task pool (None: a fresh task for every prompt).
    noise : float, default 0.0
        The label noise's standard deviation.
    generator : int or torch.Generator, default 0
        Seeds the pool.
    dtype : str or torch.dtype, default "float32"
        The dtype of the prompts.
    """

    def __init__(self, d, *, width=100, n_tasks=None, noise=0.0, generator=0, dtype="float32"):
        check_number("width", width, low=1, integer=True)
        self.width = int(width)
        super().__init__(d, n_tasks=n_tasks, noise=noise, generator=generator, dtype=dtype)

    def _draw_params(self, m, g):
        V = torch.randn(m, self.width, self.d, generator=g, dtype=torch.float64)
        a = torch.randn(m, self.width, generator=g, dtype=torch.float64)
        return V, a

    def _labels(self, params, X):
        V, a = params
        H = torch.relu(torch.einsum("bnd,bkd->bnk", X, V))
        return math.sqrt(2.0 / self.width) * torch.einsum("bnk,bk->bn", H, a)


def vectorise(prompts: Prompts) -> torch.Tensor:
    """The flattened prompt [x_1, y_1, x_2, y_2, ..., x_n, y_n, x_q], shape (B, n (d + 1) + d).

    Parameters
    ----------
    prompts : Prompts
        A batch of B prompts (n context examples in dimension d).

    Returns
    -------
    torch.Tensor, shape (B, n (d + 1) + d)
        In the prompts' dtype.
    """
    p = check_prompts(prompts)
    pairs = torch.cat([p.X, p.y.unsqueeze(-1)], dim=-1).reshape(len(p), -1)
    return torch.cat([pairs, p.x_query], dim=1)


def tokens(prompts: Prompts) -> torch.Tensor:
    """The prompt as n + 1 tokens z_j = [x_j, y_j] and z_q = [x_q, 0], shape (B, n + 1, d + 1).

    Parameters
    ----------
    prompts : Prompts
        A batch of B prompts (n context examples in dimension d).

    Returns
    -------
    torch.Tensor, shape (B, n + 1, d + 1)
        In the prompts' dtype.
    """
    p = check_prompts(prompts)
    ctx = torch.cat([p.X, p.y.unsqueeze(-1)], dim=-1)
    q = torch.cat([p.x_query, torch.zeros_like(p.x_query[:, :1])], dim=-1)
    return torch.cat([ctx, q.unsqueeze(1)], dim=1)


def ridge_predict(prompts: Prompts, ridge: float = 0.0) -> torch.Tensor:
    """Ridge regression on each prompt's context, evaluated at its query, shape (B,).

    w = (X^T X + ridge I)^{-1} X^T y; ridge = 0 gives the minimum-norm least squares solution (pseudo-inverse,
    also for n < d). For :class:`LinearTasks` (prior w ~ N(0, I_d)) ridge = noise^2 is the posterior mean, the
    Bayes-optimal predictor under squared error.

    Parameters
    ----------
    prompts : Prompts
        A batch of B prompts (n context examples in dimension d).
    ridge : float, default 0.0
        The ridge (>= 0).

    Returns
    -------
    torch.Tensor, shape (B,)
        Computed in float64, returned in the prompts' dtype.
    """
    p = check_prompts(prompts)
    check_number("ridge", ridge, low=0)
    X, y = p.X.to(torch.float64), p.y.to(torch.float64)
    if ridge > 0:
        G = X.transpose(1, 2) @ X + ridge * torch.eye(p.d, dtype=torch.float64, device=X.device)
        w = torch.linalg.solve(G, (X.transpose(1, 2) @ y.unsqueeze(-1))).squeeze(-1)
    else:
        w = (torch.linalg.pinv(X) @ y.unsqueeze(-1)).squeeze(-1)
    return torch.einsum("bd,bd->b", w, p.x_query.to(torch.float64)).to(p.X.dtype)
