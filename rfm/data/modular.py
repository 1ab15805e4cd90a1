r"""Modular arithmetic: the data of the grokking experiments, and the circulant and Fourier tools that read the
learned features.

Mallinar, Beaglehole, Zhu, Radhakrishnan, Pandit & Belkin, "Emergence in non-neural models: grokking modular
arithmetic via average gradient outer product" (arXiv 2407.20199, ICML 2025), with the conventions of their code
(``nmallinar/rfm-grokking``):

* **data** -- all pairs (x, y) in Z_p^2 (y != 0 for division) with label ``x o y mod p``, ``o in {+, -, *, /}``; the
  input is the concatenation of the one-hot codes of x and y (R^{2p}), the target the one-hot code of the label
  (R^p); a seeded random fraction of the pairs is the training set.
* **the off-diagonal block** -- a feature matrix M (2p x 2p) acts on the pair through its p x p blocks; the
  block M[:p, p:] couples the digits x and y, and it is where the solution shows. For x + y it becomes *circulant*
  (B[i, j] depends on (i - j) mod p only); the other operations are circulant after re-indexing the digits
  (:func:`reindex_block`): y -> -y for x - y, the discrete logarithm (via a primitive root, dropping the digit 0)
  for x * y, both for x / y.
* **progress measures** -- :func:`circulant_deviation` (how far the re-indexed block is from circulant, as an
  energy fraction or on the rolled-row variance scale, 1/p of it), :func:`agop_alignment` (cosine between two
  whole feature matrices, the paper's measure, or between their off-diagonal blocks) and :func:`correct_class_mse`
  (the loss of the true class's output only, ``correct_logit_loss`` of the paper's code).
* **Fourier view** -- the unitary DFT diagonalises every circulant matrix (:func:`dft_matrix`,
  :func:`fourier_diagonalize`, :func:`circulant_spectrum`).
* **random circulant features** -- the paper's "no learning needed" control (:func:`random_circulant_features`).
* **addition through a template** (Kunin et al., arXiv 2506.06489) -- a template x in R^p with chosen Fourier
  magnitudes, the pair (a, b) encoded by the cyclic shifts (rho^a x, rho^b x) and the target rho^{a+b} x
  (:func:`template_addition`), and the per-frequency residual energy of a prediction (:func:`fourier_residuals`).

The paper's network (:func:`rfm.nets.mlp.quadratic_net`) and the progress recorders of a network's training and of
an RFM's iterations (:mod:`rfm.nets.callbacks`) live with the networks.
"""
from __future__ import annotations

import importlib
import math
import numbers
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from .._checks import check_matrix, check_number, resolve_dtype
from ..metrics import matrix_correlation
from ..utils import make_generator, psd_power

OPERATIONS = ("add", "sub", "mul", "div")
_ALIASES = {"+": "add", "x+y": "add", "-": "sub", "x-y": "sub", "*": "mul", "x*y": "mul", "/": "div", "x/y": "div"}
SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_DUAL = {"add": "sub", "sub": "add", "mul": "div", "div": "mul"}
#: The normalisations of :func:`circulant_deviation`: the energy fraction in [0, 1], or that fraction / n.
SCALES = ("fraction", "rolled_variance")
#: What :func:`agop_alignment` compares: the whole feature matrices (the paper's measure) or their coupling blocks.
PARTS = ("whole", "off_diagonal")


def canonical_operation(operation: str) -> str:
    """``"add"``, ``"sub"``, ``"mul"`` or ``"div"`` (also accepted: ``"+"``, ``"x+y"``, ... ).

    Parameters
    ----------
    operation : str
        A name or alias.

    Returns
    -------
    str

    Raises
    ------
    TypeError, ValueError
        If it is not a string, or not an operation.
    """
    if not isinstance(operation, str):
        raise TypeError(f"operation must be a string, one of {list(OPERATIONS)} (or + - * /), got {operation!r} of "
                        f"type {type(operation).__name__}")
    op = _ALIASES.get(operation, operation)
    if op not in OPERATIONS:
        raise ValueError(f"operation must be one of {list(OPERATIONS)} (or + - * /), got {operation!r}")
    return op


def dual_operation(operation: str) -> str:
    """The operation whose re-indexing makes a block that is a function of x o y itself circulant: "sub" for
    "add", "add" for "sub", "div" for "mul", "mul" for "div" (see :func:`block_orders`).

    Parameters
    ----------
    operation : str
        An operation.

    Returns
    -------
    str
    """
    return _DUAL[canonical_operation(operation)]


def is_prime(n: int) -> bool:
    """Whether the integer ``n`` is a prime (trial division).

    Parameters
    ----------
    n : int
        The number.

    Returns
    -------
    bool
    """
    check_number("n", n, integer=True)
    n = int(n)
    if n < 2:
        return False
    return all(n % k for k in range(2, int(n**0.5) + 1))


def check_prime(p, name="p") -> int:
    """Check that ``p`` is a prime (division and the discrete logarithm need a field); return it as an int.

    Parameters
    ----------
    p : int
        The modulus.
    name : str
        Its name, for the error message.

    Returns
    -------
    int
        ``p``.
    """
    check_number(name, p, low=2, integer=True)
    if not is_prime(int(p)):
        raise ValueError(f"{name} must be a prime (division and the discrete logarithm need a field), got {p}; "
                         "e.g. 61 or 97")
    return int(p)


# ----------------------------------------------------------------------------------------------------------------
# Argument checks (private; the shared ones are in rfm._checks)


def _tensor(x, name: str) -> torch.Tensor:
    """``x`` as a real tensor (dtype kept); None, strings, Python objects and complex values are errors."""
    if x is None:
        raise ValueError(f"{name} is None; pass an array")
    if isinstance(x, str):
        raise TypeError(f"{name} must be an array of numbers, got the string {x!r}")
    if isinstance(x, torch.Tensor):
        t = x
    else:
        arr = np.asarray(x)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be an array of real numbers, got dtype {arr.dtype} (strings, ragged rows "
                            "or complex values?)")
        t = torch.from_numpy(np.ascontiguousarray(arr))
    if t.is_complex():
        raise TypeError(f"{name} must be real-valued, got dtype {t.dtype}")
    return t


def _integers(x, name: str, p: int | None = None, *, low: int = 0) -> torch.Tensor:
    """``x`` as a long tensor of integers, each in [low, p) when p is given."""
    t = _tensor(x, name)
    if t.is_floating_point():
        if not bool(torch.isfinite(t).all()) or not bool((t == t.round()).all()):
            raise ValueError(f"{name} must hold integers (digits of Z_p), got non-integer or non-finite values")
    elif t.dtype == torch.bool:
        raise TypeError(f"{name} must hold integers, got dtype torch.bool")
    t = t.long()
    if p is not None and t.numel() and (int(t.min()) < low or int(t.max()) >= p):
        raise ValueError(f"{name} must hold digits in [{low}, {p}) for p = {p}, got values from {int(t.min())} to "
                         f"{int(t.max())}; reduce them mod p first")
    return t


def _matrix(A, name: str, *, square: bool = True, finite: bool = True) -> torch.Tensor:
    """``A`` as a real 2-D (square) tensor, dtype kept, optionally with finite entries only."""
    t = _tensor(A, name)
    if t.ndim != 2 or (square and t.shape[0] != t.shape[1]):
        what = "a square matrix (n, n)" if square else "a 2-D matrix"
        raise ValueError(f"{name} must be {what}, got shape {tuple(t.shape)}")
    if t.numel() == 0:
        raise ValueError(f"{name} is empty (shape {tuple(t.shape)}); pass a non-empty matrix")
    if finite and t.is_floating_point() and not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains NaN or infinite values; check the computation that produced it")
    return t


def _check_seed(generator) -> torch.Generator:
    if isinstance(generator, torch.Generator):
        return generator
    if isinstance(generator, bool) or not isinstance(generator, numbers.Integral):
        raise TypeError(f"generator must be an integer seed or a torch.Generator, got {generator!r} of type "
                        f"{type(generator).__name__}")
    return make_generator(int(generator))


# ----------------------------------------------------------------------------------------------------------------
# Data


def modular_labels(x: torch.Tensor, y: torch.Tensor, p: int, operation: str = "add") -> torch.Tensor:
    """x o y mod p elementwise, for integer tensors with entries in [0, p) (y != 0 for division).

    Parameters
    ----------
    x, y : torch.Tensor of int
        Operands of the same shape, in [0, p).
    p : int
        A prime.
    operation : str, default "add"
        "add", "sub", "mul" or "div" (or an alias, :func:`canonical_operation`).

    Returns
    -------
    torch.Tensor of int64, the shape of x
    """
    p, op = check_prime(p), canonical_operation(operation)
    x, y = _integers(x, "x", p), _integers(y, "y", p)
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same shape (one pair per entry), got {tuple(x.shape)} and "
                         f"{tuple(y.shape)}")
    if op == "add":
        return (x + y) % p
    if op == "sub":
        return (x - y) % p
    if op == "mul":
        return (x * y) % p
    if bool((y % p == 0).any()):
        raise ValueError("division by 0: y must be non-zero mod p for operation='div'")
    return (x * modular_inverse(y, p)) % p


def modular_inverse(y: torch.Tensor, p: int) -> torch.Tensor:
    """y^{-1} mod p = y^{p-2} mod p (Fermat), elementwise, for integer y; 0 (which has no inverse) maps to 0.

    Parameters
    ----------
    y : torch.Tensor of int
        Values (taken mod p).
    p : int
        A prime.

    Returns
    -------
    torch.Tensor of int64, the shape of y
    """
    p = check_prime(p)
    y = _integers(y, "y") % p
    out = torch.ones_like(y)
    base, e = y.clone(), p - 2
    while e:
        if e & 1:
            out = (out * base) % p
        base = (base * base) % p
        e >>= 1
    return out


def one_hot_pairs(pairs: torch.Tensor, p: int, dtype="float64") -> torch.Tensor:
    """The inputs of the paper: [one_hot(x), one_hot(y)] in R^{2p} for each row (x, y) of ``pairs``.

    Parameters
    ----------
    pairs : torch.Tensor of int, shape (n, 2)
        Entries in [0, p).
    p : int
        A prime.
    dtype : str or torch.dtype, default "float64"
        The dtype.

    Returns
    -------
    torch.Tensor, shape (n, 2p)
    """
    check_number("p", p, low=1, integer=True)
    dtype = resolve_dtype(dtype)
    pairs = _integers(pairs, "pairs")
    if pairs.ndim != 2 or pairs.shape[1] != 2:
        raise ValueError(f"pairs must have shape (n, 2), one row (x, y) per example, got {tuple(pairs.shape)}")
    pairs = _integers(pairs, "pairs", p)
    return torch.nn.functional.one_hot(pairs, p).reshape(len(pairs), 2 * p).to(dtype)


@dataclass(frozen=True)
class ModularData:
    """A train/test split of x o y mod p. ``X_*`` are (n, 2p) one-hot inputs, ``Y_*`` (n, p) one-hot targets,
    ``pairs_*`` the (n, 2) integer pairs (x, y), ``y_*`` the integer labels.

    Parameters
    ----------
    p : int
        A prime.
    operation : str
        The canonical operation name.
    X_train, X_test : torch.Tensor, shape (n, 2p)
        One-hot inputs.
    Y_train, Y_test : torch.Tensor, shape (n, p)
        One-hot targets.
    pairs_train, pairs_test : torch.Tensor of int64, shape (n, 2)
        The pairs (x, y).

    Raises
    ------
    ValueError
        If p is not prime, the operation not canonical, or the shapes do not match.
    """
    p: int
    operation: str
    X_train: torch.Tensor
    Y_train: torch.Tensor
    X_test: torch.Tensor
    Y_test: torch.Tensor
    pairs_train: torch.Tensor
    pairs_test: torch.Tensor

    def __post_init__(self):
        p = check_prime(self.p)
        if canonical_operation(self.operation) != self.operation:
            raise ValueError(f"operation must be the canonical name {canonical_operation(self.operation)!r}, got "
                             f"{self.operation!r}")
        for part in ("train", "test"):
            X, Y, pairs = (getattr(self, f"{k}_{part}") for k in ("X", "Y", "pairs"))
            if X.ndim != 2 or X.shape[1] != 2 * p or Y.ndim != 2 or Y.shape[1] != p or pairs.shape[-1:] != (2,) \
                    or not len(X) == len(Y) == len(pairs):
                raise ValueError(f"ModularData for p={p}: X_{part} must be (n, {2 * p}), Y_{part} (n, {p}) and "
                                 f"pairs_{part} (n, 2) with the same n, got {tuple(X.shape)}, {tuple(Y.shape)}, "
                                 f"{tuple(pairs.shape)}; build it with modular_arithmetic(p, operation)")

    @property
    def y_train(self) -> torch.Tensor:
        return self.Y_train.argmax(1)

    @property
    def y_test(self) -> torch.Tensor:
        return self.Y_test.argmax(1)


def all_pairs(p: int, operation: str = "add") -> torch.Tensor:
    """All (x, y) in Z_p^2 in lexicographic order, without y = 0 for division: (p^2, 2) or (p(p-1), 2).

    Parameters
    ----------
    p : int
        A prime.
    operation : str, default "add"
        "add", "sub", "mul" or "div" (or an alias, :func:`canonical_operation`).

    Returns
    -------
    torch.Tensor of int64, shape (p^2, 2) or (p (p - 1), 2)
    """
    p, op = check_prime(p), canonical_operation(operation)
    ys = torch.arange(1 if op == "div" else 0, p)
    return torch.cartesian_prod(torch.arange(p), ys)


def modular_arithmetic(p: int, operation: str = "add", train_fraction: float = 0.5, *, generator=0,
                       dtype="float64") -> ModularData:
    """All pairs of x o y mod p, split at random: ``int(train_fraction * N)`` training pairs (as in the paper's
    code), the rest for testing. ``generator`` is a seed or a ``torch.Generator``; tensors are on the CPU.

    Parameters
    ----------
    p : int
        A prime.
    operation : str, default "add"
        "add", "sub", "mul" or "div" (or an alias, :func:`canonical_operation`).
    train_fraction : float, default 0.5
        The training share of the N pairs.
    generator : int or torch.Generator, default 0
        Seeds the draw.
    dtype : str or torch.dtype, default "float64"
        The dtype.

    Returns
    -------
    ModularData
    """
    p, op = check_prime(p), canonical_operation(operation)
    check_number("train_fraction", train_fraction, low=0, low_inclusive=False, high=1, high_inclusive=False)
    dtype = resolve_dtype(dtype)
    generator = _check_seed(generator)
    pairs = all_pairs(p, op)
    n_train = int(train_fraction * len(pairs))
    if not 0 < n_train < len(pairs):
        raise ValueError(f"train_fraction={train_fraction} leaves an empty train or test set for p={p}")
    perm = torch.randperm(len(pairs), generator=make_generator(generator))
    pairs = pairs[perm]
    labels = modular_labels(pairs[:, 0], pairs[:, 1], p, op)
    X = one_hot_pairs(pairs, p, dtype)
    Y = torch.nn.functional.one_hot(labels, p).to(X.dtype)
    tr, te = slice(0, n_train), slice(n_train, None)
    return ModularData(p, op, X[tr], Y[tr], X[te], Y[te], pairs[tr], pairs[te])


# ----------------------------------------------------------------------------------------------------------------
# Re-indexing: the digit orders in which the off-diagonal block of each operation is circulant


def primitive_root(p: int) -> int:
    """The smallest generator g of the multiplicative group Z_p^* (its powers g^0..g^{p-2} are 1..p-1).

    Parameters
    ----------
    p : int
        A prime.

    Returns
    -------
    int
        1 for p = 2.
    """
    p = check_prime(p)
    if p == 2:
        return 1
    factors = {q for q in range(2, p) if (p - 1) % q == 0 and is_prime(q)}
    for g in range(2, p):
        if all(pow(g, (p - 1) // q, p) != 1 for q in factors):
            return g
    raise AssertionError("unreachable: every prime has a primitive root")


def discrete_log_order(p: int) -> torch.Tensor:
    """The digits in discrete-log order: entry k is g^k mod p, k = 0..p-2, for the primitive root g.

    Indexing a vector over Z_p by it drops the digit 0 (which has no logarithm) and turns multiplication into
    addition mod p - 1: g^k * g^l = g^{k+l}.

    Parameters
    ----------
    p : int
        A prime.

    Returns
    -------
    torch.Tensor of int64, shape (p - 1,)
    """
    p = check_prime(p)
    g = primitive_root(p)
    return torch.tensor([pow(g, k, p) for k in range(p - 1)], dtype=torch.long)


def block_orders(p: int, operation: str = "add"):
    """(rows, cols): the digit orders in which the off-diagonal block learned by a *kernel* for ``operation`` is
    circulant, as in the paper's random-circulant construction.

    A kernel compares two inputs u = (x, y) and u' = (x', y') through ``|u - u'|_M^2``, whose cross terms are
    B[x, y'] + B[x', y]. Two pairs with the same sum have x - y' = x' - y, so a block that is a function of the
    difference gives them equal cross terms. In the same way the block of each operation is a function of the
    *dual* combination (measured in the chapter; this is the reason, not a proof):

    * x + y: of x - y, circulant in the natural order;
    * x - y: of x + y (a Hankel matrix); y -> -y makes it circulant;
    * x * y: of x / y; in discrete-log order (digit 0 dropped) log x - log y, circulant;
    * x / y: of x * y; logarithms with y -> -log y.

    A block that is a function of x o y itself (the quadratic network's, see the chapter) is circulant in the
    orders of :func:`dual_operation`.

    Parameters
    ----------
    p : int
        A prime.
    operation : str, default "add"
        "add", "sub", "mul" or "div" (or an alias, :func:`canonical_operation`).

    Returns
    -------
    rows, cols : torch.Tensor of int64
        Digit orders, of length p (add, sub) or p - 1 (mul, div).
    """
    p, op = check_prime(p), canonical_operation(operation)
    if op in ("add", "sub"):
        rows = torch.arange(p)
        return rows, (rows if op == "add" else (-rows) % p)
    logs = discrete_log_order(p)
    k = torch.arange(p - 1)
    return logs, (logs if op == "mul" else logs[(-k) % (p - 1)])


def off_diagonal_block(M, p: int | None = None) -> torch.Tensor:
    """M[:p, p:], the block coupling the first digit with the second (p defaults to half the size of M).

    Parameters
    ----------
    M : array-like or torch.Tensor, shape (2p, 2p)
        A feature matrix.
    p : int, optional
        The number of digits.

    Returns
    -------
    torch.Tensor, shape (p, p)

    Raises
    ------
    ValueError
        If M is not 2p x 2p.
    """
    M = _matrix(M, "M", finite=False)
    if M.shape[0] % 2:
        raise ValueError(f"M must be a square matrix of even size 2p, got shape {tuple(M.shape)}")
    if p is not None:
        check_number("p", p, low=1, integer=True)
    p = M.shape[0] // 2 if p is None else int(p)
    if 2 * p != M.shape[0]:
        raise ValueError(f"M has size {M.shape[0]}, not 2p = {2 * p}; pass the p of the data, or p=None")
    return M[:p, p:]


def reindex_block(B, operation: str = "add") -> torch.Tensor:
    """The p x p block ``B`` with its rows and columns in the orders of :func:`block_orders` (p - 1 x p - 1 for
    multiplication and division, whose digit 0 is dropped).

    Parameters
    ----------
    B : array-like or torch.Tensor, shape (p, p)
        The block.
    operation : str, default "add"
        "add", "sub", "mul" or "div" (or an alias, :func:`canonical_operation`).

    Returns
    -------
    torch.Tensor, shape (p, p) or (p - 1, p - 1)
    """
    B = _matrix(B, "B", finite=False)
    check_prime(B.shape[0], "the size of B (p)")
    rows, cols = block_orders(B.shape[0], operation)
    return B[rows][:, cols]


def unreindex_block(C, p: int, operation: str = "add") -> torch.Tensor:
    """The inverse of :func:`reindex_block`: a p x p block whose re-indexed form is ``C`` (row and column 0 are
    zero for multiplication and division).

    Parameters
    ----------
    C : array-like or torch.Tensor, shape (p, p) or (p - 1, p - 1)
        The re-indexed block.
    p : int
        A prime.
    operation : str, default "add"
        "add", "sub", "mul" or "div" (or an alias, :func:`canonical_operation`).

    Returns
    -------
    torch.Tensor, shape (p, p)
        In C's dtype.
    """
    C = _matrix(C, "C", square=False, finite=False)
    rows, cols = block_orders(p, operation)
    if C.shape != (len(rows), len(cols)):
        raise ValueError(f"C must have shape {(len(rows), len(cols))} for p={p} and {operation!r}, "
                         f"got {tuple(C.shape)}")
    B = torch.zeros(p, p, dtype=C.dtype)
    B[rows[:, None], cols[None, :]] = C
    return B


# ----------------------------------------------------------------------------------------------------------------
# Circulant matrices and the Fourier view


def circulant(c) -> torch.Tensor:
    """The circulant matrix C[i, j] = c[(i - j) mod n] (``scipy.linalg.circulant``'s convention: c is the first
    column, each column the previous one shifted down by one).

    Parameters
    ----------
    c : array-like or torch.Tensor, shape (n,)
        The first column (n >= 1).

    Returns
    -------
    torch.Tensor, shape (n, n)
        In c's dtype.
    """
    c = _tensor(c, "c")
    if c.ndim != 1 or c.shape[0] == 0:
        raise ValueError(f"c must be a non-empty 1-D vector (the first column), got shape {tuple(c.shape)}")
    n = c.shape[0]
    idx = (torch.arange(n)[:, None] - torch.arange(n)[None, :]) % n
    return c[idx]


def circulant_projection(A) -> torch.Tensor:
    """The nearest circulant matrix to a square ``A`` in Frobenius norm: each wrapped diagonal (i - j = const mod n)
    replaced by its mean.

    Parameters
    ----------
    A : array-like or torch.Tensor, shape (n, n)
        A square matrix.

    Returns
    -------
    torch.Tensor, shape (n, n)
    """
    A = _matrix(A, "A", finite=False)
    n = A.shape[0]
    diag_id = (torch.arange(n)[:, None] - torch.arange(n)[None, :]) % n
    c = torch.zeros(n, dtype=A.dtype).index_add_(0, diag_id.reshape(-1), A.reshape(-1)) / n
    return circulant(c)


def circulant_deviation(A, *, scale: str = "fraction") -> float:
    """How far a square matrix is from circulant, as the fraction of its energy off the circulant subspace::

        D(A) = |A - circ(A)|_F^2 / |A|_F^2,   circ(A) = A averaged along its wrapped diagonals,

    in [0, 1]: 0 exactly when A is circulant, about 1 - 1/n for a random n x n matrix. ``scale="rolled_variance"``
    returns the other common normalisation, ``sum_k Var_i(S[i, k]) / |A|_F^2`` where row i of S is row i of A rolled
    by -i (the variance of each column of the rolled matrix, summed): it is exactly D(A) / n, about (1 - 1/n) / n
    for a random matrix. A zero matrix gives NaN: there are no features to judge (the off-diagonal block of
    M_0 = I is zero).

    Parameters
    ----------
    A : array-like or torch.Tensor, shape (n, n)
        A square matrix.
    scale : {"fraction", "rolled_variance"}, default "fraction"
        The normalisation.

    Returns
    -------
    float
        In [0, 1] (``fraction``); NaN for a zero matrix.
    """
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {list(SCALES)}, got {scale!r}")
    A = _matrix(A, "A").detach().to(torch.float64).cpu()
    total = float(A.square().sum())
    if total == 0:
        return float("nan")
    D = float((A - circulant_projection(A)).square().sum()) / total
    return D if scale == "fraction" else D / A.shape[0]


def block_circulant_deviation(M, operation: str = "add", *, scale: str = "fraction") -> float:
    """:func:`circulant_deviation` of the off-diagonal block of a 2p x 2p feature matrix ``M``, re-indexed for
    ``operation`` by :func:`reindex_block`: the progress measure of the grokking paper (``scale`` as there).

    Parameters
    ----------
    M : array-like or torch.Tensor, shape (2p, 2p)
        A feature matrix.
    operation : str, default "add"
        "add", "sub", "mul" or "div" (or an alias, :func:`canonical_operation`).
    scale : {"fraction", "rolled_variance"}, default "fraction"
        The normalisation.

    Returns
    -------
    float
        NaN for a zero block.
    """
    return circulant_deviation(reindex_block(off_diagonal_block(M), operation), scale=scale)


def dft_matrix(n: int, dtype=torch.complex128) -> torch.Tensor:
    """The unitary DFT matrix F[j, k] = exp(-2 pi i jk / n) / sqrt(n); F x = ``torch.fft.fft(x, norm="ortho")``.

    Parameters
    ----------
    n : int
        The size.
    dtype : torch.complex64 or torch.complex128, default torch.complex128
        The dtype.

    Returns
    -------
    torch.Tensor, shape (n, n)
    """
    check_number("n", n, low=1, integer=True)
    if dtype not in (torch.complex64, torch.complex128):
        raise ValueError(f"dtype must be torch.complex64 or torch.complex128 (the DFT is complex), got {dtype!r}")
    k = torch.arange(n, dtype=torch.float64)
    return torch.polar(torch.full((n, n), n**-0.5, dtype=torch.float64),
                       -2 * torch.pi * torch.outer(k, k) / n).to(dtype)


def fourier_diagonalize(A) -> torch.Tensor:
    """F A F^H with the unitary DFT F. For a circulant A = circulant(c) this is diag(fft(c)): the Fourier modes
    are the eigenvectors of every circulant matrix. Its off-diagonal energy fraction is
    :func:`circulant_deviation` (F is unitary and the diagonal of F A F^H is the spectrum of circ(A)).

    Parameters
    ----------
    A : array-like or torch.Tensor, shape (n, n)
        A square matrix.

    Returns
    -------
    torch.Tensor of complex128, shape (n, n)
        On the CPU.
    """
    A = _matrix(A, "A").detach().to(torch.float64).cpu()
    F = dft_matrix(A.shape[0])
    return F @ A.to(F.dtype) @ F.conj().T


def circulant_spectrum(A) -> torch.Tensor:
    """The diagonal of F A F^H: the eigenvalues (frequency k = 0..n-1) of the circulant part of ``A``.

    Parameters
    ----------
    A : array-like or torch.Tensor, shape (n, n)
        A square matrix.

    Returns
    -------
    torch.Tensor of complex128, shape (n,)
    """
    return torch.diagonal(fourier_diagonalize(A)).clone()


# ----------------------------------------------------------------------------------------------------------------
# Progress measures and the random circulant control


def agop_alignment(M, M_ref, p: int | None = None, *, part: str = "whole") -> float:
    """Cosine between two feature matrices, ``<M, M_ref>_F / (||M||_F ||M_ref||_F)``: the AGOP alignment of the paper.

    ``part="whole"`` (the default) compares the whole 2p x 2p matrices. ``part="off_diagonal"`` compares only the
    blocks M[:p, p:] that couple the two digits (an addition of this book, not the paper's measure): the diagonal
    blocks of any M are dominated by a near-identity part, which keeps the whole-matrix cosine away from 0 (M_0 = I
    alone gives ``tr(M_ref) / (sqrt(2p) ||M_ref||_F)``), while the off-diagonal block is where the solution shows; it is
    undefined (ValueError) for M_0 = I, whose off-diagonal block is zero. Used with M_ref = the final M.

    Parameters
    ----------
    M, M_ref : array-like or torch.Tensor, shape (2p, 2p)
        Feature matrices.
    p : int, optional
        The number of digits (default: half the size).
    part : {"whole", "off_diagonal"}, default "whole"
        What is compared.

    Returns
    -------
    float
        In [-1, 1].

    Raises
    ------
    ValueError
        If a compared matrix is zero, or ``part`` is unknown.
    """
    if part not in PARTS:
        raise ValueError(f"part must be one of {list(PARTS)}, got {part!r}")
    if part == "whole":
        M, M_ref = _matrix(M, "M"), _matrix(M_ref, "M_ref")
        if M.shape != M_ref.shape:
            raise ValueError(f"M and M_ref must have the same size 2p, got {M.shape[0]} and {M_ref.shape[0]}")
        return matrix_correlation(M, M_ref, kind="cosine")
    B, B_ref = off_diagonal_block(M, p), off_diagonal_block(M_ref, p)
    if B.shape != B_ref.shape:
        raise ValueError(f"M and M_ref must have the same size 2p, got {2 * B.shape[0]} and {2 * B_ref.shape[0]}")
    return matrix_correlation(B, B_ref, kind="cosine")


def correct_class_mse(outputs, Y) -> float:
    """The correct-class loss of the paper's code (``correct_logit_loss`` in ``train_kernel.py``): the mean over
    examples of (f_y(x) - 1)^2, the squared error of the output of the true class only (Y one-hot, (n, p)).

    Parameters
    ----------
    outputs : array-like or torch.Tensor, shape (n, p)
        Model outputs.
    Y : array-like or torch.Tensor, shape (n, p)
        One-hot targets.

    Returns
    -------
    float
    """
    out, Y = _matrix(outputs, "outputs", square=False), _matrix(Y, "Y", square=False)
    if out.shape != Y.shape:
        raise ValueError(f"outputs and Y must have the same shape, got {tuple(out.shape)} and {tuple(Y.shape)}")
    picked = out.to(torch.float64).gather(1, Y.argmax(1, keepdim=True).to(out.device)).squeeze(1)
    return float((picked - 1).square().mean())


def random_circulant_block(p: int, operation: str = "add", *, generator=0, dtype="float64") -> torch.Tensor:
    """A random p x p block that is circulant in the digit order of ``operation``: c ~ U[0, 1] (length p, or p - 1
    for * and /), mean-centred, placed with :func:`unreindex_block`.

    Parameters
    ----------
    p : int
        A prime.
    operation : str, default "add"
        "add", "sub", "mul" or "div" (or an alias, :func:`canonical_operation`).
    generator : int or torch.Generator, default 0
        Seeds the draw.
    dtype : str or torch.dtype, default "float64"
        The dtype.

    Returns
    -------
    torch.Tensor, shape (p, p)
    """
    p, op = check_prime(p), canonical_operation(operation)
    n = p if op in ("add", "sub") else p - 1
    c = torch.rand(n, generator=_check_seed(generator), dtype=resolve_dtype(dtype))
    return unreindex_block(circulant(c - c.mean()), p, op)


def random_circulant_features(p: int, operation: str = "add", *, generator=0, dtype="float64") -> torch.Tensor:
    """The paper's random block-circulant feature matrix (``train_random_circulant_kernel.py``):

        M = sqrtm([[I - 11^T/p, C], [C^T, I - 11^T/p]])

    with C = :func:`random_circulant_block`. The construction matters: the centred identity blocks remove the
    digit-independent direction, and the square root. The matrix inside is usually indefinite (the eigenvalues are
    ``1 +- |fft(c)_k|``, and ``|fft(c)_k| > 1`` for most k); the code takes the real part of scipy's principal square
    root, which for a symmetric matrix is V max(lambda, 0)^{1/2} V^T, i.e. :func:`rfm.utils.psd_power` with power 1/2.

    Parameters
    ----------
    p : int
        A prime.
    operation : str, default "add"
        "add", "sub", "mul" or "div" (or an alias, :func:`canonical_operation`).
    generator : int or torch.Generator, default 0
        Seeds the draw.
    dtype : str or torch.dtype, default "float64"
        The dtype.

    Returns
    -------
    torch.Tensor, shape (2p, 2p)
        Symmetric PSD.
    """
    p = check_prime(p)
    return coupled_features(random_circulant_block(p, operation, generator=generator, dtype=dtype))


def template_addition(p: int, magnitudes, *, generator=0, dtype="float64") -> dict:
    """Modular addition encoded through a template: x in R^p with ``|x_hat[k]| = magnitudes[k-1]`` for
    k = 1..len(magnitudes) (<= (p-1)/2), zero elsewhere and at k = 0, random phases, scaled to ||x||^2 = p. The
    pair (a, b) is the input (rho^a x, rho^b x) in R^{2p}, the target rho^{a+b} x in R^p, with
    (rho^a x)[j] = x[(j - a) mod p]. All p^2 pairs (``rfm.data.modular.all_pairs``). Returns {"X", "Y", "x",
    "pairs", "magnitudes"} (magnitudes after scaling, per frequency 1..(p-1)/2).

    Parameters
    ----------
    p : int
        A prime.
    magnitudes : array-like of float
        ``|x_hat[k]|`` for k = 1..len(magnitudes), at most (p - 1) / 2 of them.
    generator : int or torch.Generator, default 0
        Seeds the draw.
    dtype : str or torch.dtype, default "float64"
        The dtype.

    Returns
    -------
    dict
        "X" (p^2, 2p), "Y" (p^2, p), "x" (p,), "pairs" (p^2, 2), "magnitudes" ((p - 1) // 2,).
    """
    p = check_prime(p)
    m = torch.as_tensor(magnitudes, dtype=torch.float64).reshape(-1)
    half = (p - 1) // 2
    if m.numel() < 1 or m.numel() > half:
        raise ValueError(f"magnitudes must have between 1 and (p-1)/2 = {half} values (frequencies 1, 2, ...), got "
                         f"{m.numel()}")
    if bool((m < 0).any()) or float(m.max()) <= 0:
        raise ValueError("magnitudes must be non-negative and not all zero")
    dtype = resolve_dtype(dtype)
    g = _check_seed(generator)
    phases = 2 * math.pi * torch.rand(m.numel(), generator=g, dtype=torch.float64)
    xhat = torch.zeros(p, dtype=torch.complex128)
    xhat[1:m.numel() + 1] = torch.polar(m, phases)
    xhat[p - m.numel():] = torch.polar(m, -phases).flip(0)
    x = torch.fft.ifft(xhat, norm="ortho").real
    x = x * math.sqrt(p) / x.norm()
    pairs = all_pairs(p, "add")
    j = torch.arange(p)
    shift = lambda a: x[(j[None, :] - a[:, None]) % p]
    X = torch.cat([shift(pairs[:, 0]), shift(pairs[:, 1])], 1).to(dtype)
    Y = shift((pairs[:, 0] + pairs[:, 1]) % p).to(dtype)
    mags = torch.fft.fft(x, norm="ortho").abs()[1:half + 1]
    return {"X": X, "Y": Y, "x": x.to(dtype), "pairs": pairs, "magnitudes": mags}


def fourier_residuals(Y, F) -> torch.Tensor:
    """The residual energy of a prediction F of targets Y (both (n, p), rows indexed by output position) at each
    frequency k = 1..(p-1)/2 of the output axis, as a fraction of Y's energy there (frequencies k and -k
    together). A frequency absent from Y gives NaN.

    Parameters
    ----------
    Y : array-like or torch.Tensor, shape (n, p)
        Targets.
    F : array-like or torch.Tensor, shape (n, p)
        Predictions.

    Returns
    -------
    torch.Tensor, float64, shape ((p - 1) // 2,)
    """
    Y = check_matrix(Y, "Y", dtype=torch.float64)
    F = check_matrix(F, "F", dtype=torch.float64)
    if Y.shape != F.shape:
        raise ValueError(f"Y and F must have the same shape, got {tuple(Y.shape)} and {tuple(F.shape)}")
    p = Y.shape[1]
    half = (p - 1) // 2
    R = torch.fft.fft(Y - F, dim=1).abs().square().sum(0)
    T = torch.fft.fft(Y, dim=1).abs().square().sum(0)
    k = torch.arange(1, half + 1)
    num, den = R[k] + R[p - k], T[k] + T[p - k]
    return torch.where(den > 1e-12 * float(T.sum()), num / den.clamp_min(1e-300), torch.full_like(num, math.nan))

def centred_identity(p: int, dtype=torch.float64) -> torch.Tensor:
    """The centred identity I - 11^T/p, the projection orthogonal to the all-ones vector of one digit.

    Parameters
    ----------
    p : int
        The size.
    dtype : torch.dtype, default=torch.float64
        Its dtype.

    Returns
    -------
    torch.Tensor of shape (p, p)
    """
    return torch.eye(p, dtype=dtype) - torch.full((p, p), 1.0 / p, dtype=dtype)


def coupled_features(C) -> torch.Tensor:
    """The feature matrix sqrt([[I - 11^T/p, C], [C^T, I - 11^T/p]]) (PSD part) with coupling block ``C``.

    :func:`random_circulant_features` is this with a random circulant ``C``; any other block (the same random block
    in the wrong order, say) makes a control.

    Parameters
    ----------
    C : torch.Tensor of shape (p, p)
        The block coupling the first digit with the second.

    Returns
    -------
    torch.Tensor of shape (2p, 2p)
        :func:`rfm.utils.psd_power` of the matrix, with power 1/2.
    """
    C = _matrix(C, "C")
    P = centred_identity(C.shape[0], C.dtype)
    return psd_power(torch.cat([torch.cat([P, C], 1), torch.cat([C.T, P], 1)], 0), 0.5)


def centred_identity_distance(M, p: int | None = None) -> float:
    """Relative Frobenius distance of the first diagonal block of M from its best multiple of I - 11^T/p.

    Parameters
    ----------
    M : array-like of shape (2p, 2p)
        A feature matrix on pairs of one-hot digits.
    p : int or None, default=None
        The modulus; None reads it from M (half its size).

    Returns
    -------
    float
        ``||D - k P|| / ||D||`` with D the block, P the centred identity and k the least-squares multiple.
    """
    M = _matrix(M, "M")
    p = M.shape[0] // 2 if p is None else p
    D = M[:p, :p].to(torch.float64)
    P = centred_identity(p)
    k = (D * P).sum() / P.square().sum()
    return float((D - k * P).norm() / D.norm())


# Names that moved to rfm.nets in 0.2 (a data module holds no network, training callback or curve measure):
# old -> new module.
MOVED = {"quadratic_net": "rfm.nets.mlp", "NetworkProgress": "rfm.nets.callbacks",
         "GrokkingProgress": "rfm.nets.callbacks", "first_reaching": "rfm.nets.curves"}


def __getattr__(name):
    """``rfm.data.modular.quadratic_net``, the two progress callbacks and ``first_reaching``, moved to
    :mod:`rfm.nets`, with a DeprecationWarning (for one release)."""
    if name in MOVED:
        warnings.warn(f"rfm.data.modular.{name} moved to {MOVED[name]}.{name} in rfm 0.2; the old path will be "
                      "removed in 0.3", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(MOVED[name]), name)
    raise AttributeError(f"module 'rfm.data.modular' has no attribute {name!r}")
