r"""Modular arithmetic: the data of the grokking experiments, and the circulant and Fourier tools that read the
learned features.

Mallinar, Beaglehole, Zhu, Radhakrishnan, Pandit & Belkin, "Emergence in non-neural models: grokking modular
arithmetic via average gradient outer product" (arXiv 2407.20199, ICML 2025), with the conventions of their code
(``nmallinar/rfm-grokking``):

* **data** -- all pairs (x, y) in Z_p^2 (y != 0 for division) with label x o y mod p, o in {+, -, *, /}; the input
  is the concatenation of the one-hot codes of x and y (R^{2p}), the target the one-hot code of the label (R^p);
  a seeded random fraction of the pairs is the training set.
* **the off-diagonal block** -- a feature matrix M (2p x 2p) acts on the pair through its p x p blocks; the
  block M[:p, p:] couples the digits x and y, and it is where the solution shows. For x + y it becomes *circulant*
  (B[i, j] depends on (i - j) mod p only); the other operations are circulant after re-indexing the digits
  (:func:`reindex_block`): y -> -y for x - y, the discrete logarithm (via a primitive root, dropping the digit 0)
  for x * y, both for x / y.
* **progress measures** -- :func:`circulant_deviation` (how far the re-indexed block is from circulant) and
  :func:`agop_alignment` (cosine between the off-diagonal blocks of two feature matrices).
* **Fourier view** -- the unitary DFT diagonalises every circulant matrix (:func:`dft_matrix`,
  :func:`fourier_diagonalize`, :func:`circulant_spectrum`).
* **random circulant features** -- the paper's "no learning needed" control (:func:`random_circulant_features`).
* **a small network** -- one hidden layer with quadratic activation trained by AdamW with weight decay
  (:class:`QuadraticNet`, :func:`train_quadratic_net`), whose neural feature matrix W1^T W1 is compared with M.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from .._checks import check_number, resolve_dtype
from ..metrics import matrix_correlation
from ..utils import get_device, make_generator, psd_power

OPERATIONS = ("add", "sub", "mul", "div")
_ALIASES = {"+": "add", "x+y": "add", "-": "sub", "x-y": "sub", "*": "mul", "x*y": "mul", "/": "div", "x/y": "div"}
SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_DUAL = {"add": "sub", "sub": "add", "mul": "div", "div": "mul"}


def canonical_operation(operation: str) -> str:
    """``"add"``, ``"sub"``, ``"mul"`` or ``"div"`` (also accepted: ``"+"``, ``"x+y"``, ... )."""
    op = _ALIASES.get(operation, operation)
    if op not in OPERATIONS:
        raise ValueError(f"operation must be one of {list(OPERATIONS)} (or + - * /), got {operation!r}")
    return op


def dual_operation(operation: str) -> str:
    """The operation whose re-indexing makes a block that is a function of x o y itself circulant: "sub" for
    "add", "add" for "sub", "div" for "mul", "mul" for "div" (see :func:`block_orders`)."""
    return _DUAL[canonical_operation(operation)]


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    return all(n % k for k in range(2, int(n**0.5) + 1))


def _check_prime(p):
    check_number("p", p, low=2, integer=True)
    if not is_prime(int(p)):
        raise ValueError(f"p must be a prime (division and the discrete logarithm need a field), got {p}")
    return int(p)


# ----------------------------------------------------------------------------------------------------------------
# Data


def modular_labels(x: torch.Tensor, y: torch.Tensor, p: int, operation: str = "add") -> torch.Tensor:
    """x o y mod p elementwise, for integer tensors with entries in [0, p) (y != 0 for division)."""
    p, op = _check_prime(p), canonical_operation(operation)
    x, y = torch.as_tensor(x).long(), torch.as_tensor(y).long()
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
    """y^{-1} mod p = y^{p-2} mod p (Fermat), elementwise, for y != 0."""
    y = torch.as_tensor(y).long() % p
    out = torch.ones_like(y)
    base, e = y.clone(), p - 2
    while e:
        if e & 1:
            out = (out * base) % p
        base = (base * base) % p
        e >>= 1
    return out


def one_hot_pairs(pairs: torch.Tensor, p: int, dtype="float64") -> torch.Tensor:
    """The inputs of the paper: [one_hot(x), one_hot(y)] in R^{2p} for each row (x, y) of ``pairs``."""
    pairs = torch.as_tensor(pairs).long()
    if pairs.ndim != 2 or pairs.shape[1] != 2:
        raise ValueError(f"pairs must have shape (n, 2), got {tuple(pairs.shape)}")
    return torch.nn.functional.one_hot(pairs, p).reshape(len(pairs), 2 * p).to(resolve_dtype(dtype))


@dataclass(frozen=True)
class ModularData:
    """A train/test split of x o y mod p. ``X_*`` are (n, 2p) one-hot inputs, ``Y_*`` (n, p) one-hot targets,
    ``pairs_*`` the (n, 2) integer pairs (x, y), ``y_*`` the integer labels."""
    p: int
    operation: str
    X_train: torch.Tensor
    Y_train: torch.Tensor
    X_test: torch.Tensor
    Y_test: torch.Tensor
    pairs_train: torch.Tensor
    pairs_test: torch.Tensor

    @property
    def y_train(self) -> torch.Tensor:
        return self.Y_train.argmax(1)

    @property
    def y_test(self) -> torch.Tensor:
        return self.Y_test.argmax(1)


def all_pairs(p: int, operation: str = "add") -> torch.Tensor:
    """All (x, y) in Z_p^2 in lexicographic order, without y = 0 for division: (p^2, 2) or (p(p-1), 2)."""
    p, op = _check_prime(p), canonical_operation(operation)
    ys = torch.arange(1 if op == "div" else 0, p)
    return torch.cartesian_prod(torch.arange(p), ys)


def modular_arithmetic(p: int, operation: str = "add", train_fraction: float = 0.5, *, generator=0,
                       dtype="float64") -> ModularData:
    """All pairs of x o y mod p, split at random: ``int(train_fraction * N)`` training pairs (as in the paper's
    code), the rest for testing. ``generator`` is a seed or a ``torch.Generator``; tensors are on the CPU."""
    p, op = _check_prime(p), canonical_operation(operation)
    check_number("train_fraction", train_fraction, low=0, low_inclusive=False, high=1, high_inclusive=False)
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
    """The smallest generator g of the multiplicative group Z_p^* (its powers g^0..g^{p-2} are 1..p-1)."""
    p = _check_prime(p)
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
    addition mod p - 1: g^k * g^l = g^{k+l}."""
    p = _check_prime(p)
    g = primitive_root(p)
    return torch.tensor([pow(g, k, p) for k in range(p - 1)], dtype=torch.long)


def block_orders(p: int, operation: str = "add"):
    """(rows, cols): the digit orders in which the off-diagonal block learned by a *kernel* for ``operation`` is
    circulant, as in the paper's random-circulant construction.

    A kernel compares two inputs u = (x, y) and u' = (x', y') through |u - u'|_M^2, whose cross terms are
    B[x, y'] + B[x', y]. Two pairs with the same sum have x - y' = x' - y, so a block that is a function of the
    difference gives them equal cross terms. In the same way the block of each operation is a function of the
    *dual* combination (measured in the chapter; this is the reason, not a proof):

    * x + y: of x - y, circulant in the natural order;
    * x - y: of x + y (a Hankel matrix); y -> -y makes it circulant;
    * x * y: of x / y; in discrete-log order (digit 0 dropped) log x - log y, circulant;
    * x / y: of x * y; logarithms with y -> -log y.

    A block that is a function of x o y itself (the quadratic network's, see the chapter) is circulant in the
    orders of :func:`dual_operation`."""
    p, op = _check_prime(p), canonical_operation(operation)
    if op in ("add", "sub"):
        rows = torch.arange(p)
        return rows, (rows if op == "add" else (-rows) % p)
    logs = discrete_log_order(p)
    k = torch.arange(p - 1)
    return logs, (logs if op == "mul" else logs[(-k) % (p - 1)])


def off_diagonal_block(M, p: int | None = None) -> torch.Tensor:
    """M[:p, p:], the block coupling the first digit with the second (p defaults to half the size of M)."""
    M = torch.as_tensor(M)
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] % 2:
        raise ValueError(f"M must be a square matrix of even size 2p, got shape {tuple(M.shape)}")
    p = M.shape[0] // 2 if p is None else p
    if 2 * p != M.shape[0]:
        raise ValueError(f"M has size {M.shape[0]}, not 2p = {2 * p}")
    return M[:p, p:]


def reindex_block(B, operation: str = "add") -> torch.Tensor:
    """The p x p block ``B`` with its rows and columns in the orders of :func:`block_orders` (p - 1 x p - 1 for
    multiplication and division, whose digit 0 is dropped)."""
    B = torch.as_tensor(B)
    rows, cols = block_orders(B.shape[0], operation)
    return B[rows][:, cols]


def unreindex_block(C, p: int, operation: str = "add") -> torch.Tensor:
    """The inverse of :func:`reindex_block`: a p x p block whose re-indexed form is ``C`` (row and column 0 are
    zero for multiplication and division)."""
    C = torch.as_tensor(C)
    rows, cols = block_orders(p, operation)
    if C.shape != (len(rows), len(cols)):
        raise ValueError(f"C must have shape {(len(rows), len(cols))} for p={p} and {operation!r}, got {tuple(C.shape)}")
    B = torch.zeros(p, p, dtype=C.dtype)
    B[rows[:, None], cols[None, :]] = C
    return B


# ----------------------------------------------------------------------------------------------------------------
# Circulant matrices and the Fourier view


def circulant(c) -> torch.Tensor:
    """The circulant matrix C[i, j] = c[(i - j) mod n] (``scipy.linalg.circulant``'s convention: c is the first
    column, each column the previous one shifted down by one)."""
    c = torch.as_tensor(c)
    n = c.shape[0]
    idx = (torch.arange(n)[:, None] - torch.arange(n)[None, :]) % n
    return c[idx]


def circulant_projection(A) -> torch.Tensor:
    """The nearest circulant matrix to a square ``A`` in Frobenius norm: each wrapped diagonal (i - j = const mod n)
    replaced by its mean."""
    A = torch.as_tensor(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"expected a square matrix, got shape {tuple(A.shape)}")
    n = A.shape[0]
    diag_id = (torch.arange(n)[:, None] - torch.arange(n)[None, :]) % n
    c = torch.zeros(n, dtype=A.dtype).index_add_(0, diag_id.reshape(-1), A.reshape(-1)) / n
    return circulant(c)


def circulant_deviation(A) -> float:
    r"""How far a square matrix is from circulant, as the fraction of its energy off the circulant subspace:

        D(A) = |A - circ(A)|_F^2 / |A|_F^2,   circ(A) = A averaged along its wrapped diagonals,

    in [0, 1]: 0 exactly when A is circulant, about 1 - 1/n for a random n x n matrix. It equals
    (n / |A|_F^2) sum_k Var_i(S[i, k]), where row i of S is row i of A rolled by -i (the column-variance form of the
    progress measure, up to the factor n that puts it in [0, 1]). A zero matrix gives NaN: there are no features
    to judge (the off-diagonal block of M_0 = I is zero)."""
    A = torch.as_tensor(A).detach().to(torch.float64).cpu()
    total = float(A.square().sum())
    if total == 0:
        return float("nan")
    return float((A - circulant_projection(A)).square().sum()) / total


def block_circulant_deviation(M, operation: str = "add") -> float:
    """:func:`circulant_deviation` of the off-diagonal block of a 2p x 2p feature matrix ``M``, re-indexed for
    ``operation`` by :func:`reindex_block`: the progress measure of the grokking paper."""
    return circulant_deviation(reindex_block(off_diagonal_block(M), operation))


def dft_matrix(n: int, dtype=torch.complex128) -> torch.Tensor:
    """The unitary DFT matrix F[j, k] = exp(-2 pi i jk / n) / sqrt(n); F x = ``torch.fft.fft(x, norm="ortho")``."""
    check_number("n", n, low=1, integer=True)
    k = torch.arange(n, dtype=torch.float64)
    return torch.polar(torch.full((n, n), n**-0.5, dtype=torch.float64), -2 * torch.pi * torch.outer(k, k) / n).to(dtype)


def fourier_diagonalize(A) -> torch.Tensor:
    """F A F^H with the unitary DFT F. For a circulant A = circulant(c) this is diag(fft(c)): the Fourier modes
    are the eigenvectors of every circulant matrix. Its off-diagonal energy fraction is
    :func:`circulant_deviation` (F is unitary and the diagonal of F A F^H is the spectrum of circ(A))."""
    A = torch.as_tensor(A).detach().to(torch.float64).cpu()
    F = dft_matrix(A.shape[0])
    return F @ A.to(F.dtype) @ F.conj().T


def circulant_spectrum(A) -> torch.Tensor:
    """The diagonal of F A F^H: the eigenvalues (frequency k = 0..n-1) of the circulant part of ``A``."""
    return torch.diagonal(fourier_diagonalize(A)).clone()


# ----------------------------------------------------------------------------------------------------------------
# Progress measures and the random circulant control


def agop_alignment(M, M_ref, p: int | None = None) -> float:
    """Cosine between the off-diagonal blocks of two feature matrices, <B, B_ref>_F / (|B|_F |B_ref|_F).

    Only the block coupling the two digits is compared: the diagonal blocks of any M are dominated by the
    near-identity part (M_0 = I alone would give a large cosine), and the off-diagonal block is where the solution
    shows. Used with M_ref = the final M (alignment with where RFM ends) or an ideal one."""
    return matrix_correlation(off_diagonal_block(M, p), off_diagonal_block(M_ref, p), kind="cosine")


class GrokkingProgress:
    """A ``callback(model, record)`` for :class:`rfm.RFMClassifier` (or :class:`rfm.RFMRegressor` on one-hot
    targets) fitted on ``data``: after each solve it records, next to the estimator's own record,

    * ``test_acc``, ``test_mse`` -- of the current predictor on the held-out pairs (recorded only: the test set is
      never passed to ``fit``, so it selects nothing);
    * ``train_mse_measured``, ``train_residual`` -- mean squared and largest error of the predictor evaluated
      on the training inputs (the estimator's ``train_mse`` is derived from the solve, ``Y - reg * alpha``);
    * ``circulant_deviation`` -- :func:`block_circulant_deviation` of the M used in this solve;
    * ``M`` -- that M.

    :meth:`alignment` then gives the AGOP alignment of every M with a reference (default: the last one)."""

    def __init__(self, data: ModularData):
        self.data = data
        self.records = []

    def _outputs(self, model, X):
        f = model.decision_function if hasattr(model, "decision_function") else model.predict
        return torch.as_tensor(f(X)).detach().cpu().to(torch.float64).reshape(len(X), -1)

    def __call__(self, model, record):
        d = self.data
        test = self._outputs(model, d.X_test)
        train = self._outputs(model, d.X_train)
        if test.shape[1] != d.p:
            raise ValueError(f"the model predicts {test.shape[1]} outputs, not p = {d.p} (a class missing from "
                             "the training set?)")
        self.records.append({
            "iteration": record["iteration"], "solver": record.get("solver"),
            "train_acc": float((train.argmax(1) == d.y_train).double().mean()),
            "train_mse_measured": float((train - d.Y_train).square().mean()),
            "train_residual": float((train - d.Y_train).abs().max()),
            "test_acc": float((test.argmax(1) == d.y_test).double().mean()),
            "test_mse": float((test - d.Y_test).square().mean()),
            "circulant_deviation": block_circulant_deviation(record["M"], d.operation),
            "M": record["M"].detach().cpu().to(torch.float64),
        })
        return False

    def column(self, key):
        return [r[key] for r in self.records]

    def alignment(self, reference=None):
        """AGOP alignment of each recorded M with ``reference`` (default: the last M); NaN for M_0 = I, whose
        off-diagonal block is zero."""
        ref = self.records[-1]["M"] if reference is None else torch.as_tensor(reference)
        out = []
        for r in self.records:
            B = off_diagonal_block(r["M"])
            out.append(float("nan") if float(B.abs().max()) == 0 else agop_alignment(r["M"], ref))
        return out


def random_circulant_block(p: int, operation: str = "add", *, generator=0, dtype="float64") -> torch.Tensor:
    """A random p x p block that is circulant in the digit order of ``operation``: c ~ U[0, 1] (length p, or p - 1
    for * and /), mean-centred, placed with :func:`unreindex_block`."""
    p, op = _check_prime(p), canonical_operation(operation)
    n = p if op in ("add", "sub") else p - 1
    c = torch.rand(n, generator=make_generator(generator), dtype=resolve_dtype(dtype))
    return unreindex_block(circulant(c - c.mean()), p, op)


def random_circulant_features(p: int, operation: str = "add", *, generator=0, dtype="float64") -> torch.Tensor:
    r"""The paper's random block-circulant feature matrix (``train_random_circulant_kernel.py``):

        M = sqrtm([[I - 11^T/p, C], [C^T, I - 11^T/p]])

    with C = :func:`random_circulant_block`. The construction matters: the centred identity blocks remove the
    digit-independent direction, and the square root. The matrix inside is usually indefinite (the eigenvalues are
    1 +- |fft(c)_k|, and |fft(c)_k| > 1 for most k); the code takes the real part of scipy's principal square root,
    which for a symmetric matrix is V max(lambda, 0)^{1/2} V^T, i.e. :func:`rfm.utils.psd_power` with power 1/2."""
    p = _check_prime(p)
    C = random_circulant_block(p, operation, generator=generator, dtype=dtype)
    P = torch.eye(p, dtype=C.dtype) - torch.full((p, p), 1.0 / p, dtype=C.dtype)
    A = torch.cat([torch.cat([P, C], 1), torch.cat([C.T, P], 1)], 0)
    return psd_power(A, 0.5)


# ----------------------------------------------------------------------------------------------------------------
# A one-hidden-layer network with quadratic activation (the paper's ``OneLayerFCN`` with ``act="quadratic"``)


class QuadraticNet(torch.nn.Module):
    """f(x) = W2 (W1 x)^2, no biases, with the scaled Kaiming-uniform initialisation of the paper's code:
    every entry of a layer with fan-in m is U[-s/sqrt(m), s/sqrt(m)], s = ``init_scale``."""

    def __init__(self, d_in: int, width: int, d_out: int, *, init_scale: float = 1.0, generator=0,
                 dtype="float64"):
        super().__init__()
        dtype = resolve_dtype(dtype)
        g = make_generator(generator)
        self.fc1 = torch.nn.Linear(d_in, width, bias=False, dtype=dtype)
        self.out = torch.nn.Linear(width, d_out, bias=False, dtype=dtype)
        with torch.no_grad():
            for layer in (self.fc1, self.out):
                bound = init_scale / layer.weight.shape[1] ** 0.5
                layer.weight.copy_((2 * torch.rand(layer.weight.shape, generator=g, dtype=dtype) - 1) * bound)

    def forward(self, x):
        return self.out(self.fc1(x).square())

    def nfm(self) -> torch.Tensor:
        """The neural feature matrix W1^T W1 of the first layer (d_in x d_in, float64, CPU)."""
        W = self.fc1.weight.detach().to(torch.float64).cpu()
        return W.T @ W


def _eval(model, X, Y):
    with torch.no_grad():
        out = model(X)
        return float((out.argmax(1) == Y.argmax(1)).double().mean()), float((out - Y).square().mean())


def train_quadratic_net(data: ModularData, *, width: int = 256, epochs: int = 1000, lr: float = 1e-3,
                        weight_decay: float = 1.0, betas=(0.9, 0.98), batch_size: int = 32, init_scale: float = 1.0,
                        generator=0, dtype="float64", device=None, nfm_every: int = 1, stop_at_test_acc=None,
                        num_threads: int | None = None):
    """Train a :class:`QuadraticNet` on ``data`` as the paper's ``train_net.py`` does: MSE on one-hot targets
    (torch's mean over all entries), AdamW(lr, betas, weight_decay), shuffled mini-batches.

    Returns ``(model, history)``; ``history`` has one record per epoch (and one for the initialisation, epoch 0)
    with train/test accuracy and MSE, the wall time, and the NFM W1^T W1 every ``nfm_every`` epochs. With
    ``stop_at_test_acc`` training stops after the first epoch that reaches it. ``num_threads`` sets torch's CPU
    threads for the duration of the training only (restored after): for matrices this small one thread is several
    times faster than two on a busy 2-core machine."""
    check_number("width", width, low=1, integer=True)
    check_number("epochs", epochs, low=0, integer=True)
    check_number("batch_size", batch_size, low=1, integer=True)
    check_number("nfm_every", nfm_every, low=1, integer=True)
    if num_threads is not None:
        check_number("num_threads", num_threads, low=1, integer=True)
        saved = torch.get_num_threads()
        torch.set_num_threads(num_threads)
        try:
            return train_quadratic_net(data, width=width, epochs=epochs, lr=lr, weight_decay=weight_decay,
                                       betas=betas, batch_size=batch_size, init_scale=init_scale,
                                       generator=generator, dtype=dtype, device=device, nfm_every=nfm_every,
                                       stop_at_test_acc=stop_at_test_acc)
        finally:
            torch.set_num_threads(saved)
    g = make_generator(generator)
    device = get_device(device)
    dtype = resolve_dtype(dtype)
    model = QuadraticNet(2 * data.p, width, data.p, init_scale=init_scale, generator=g, dtype=dtype).to(device)
    Xtr, Ytr = data.X_train.to(device, dtype), data.Y_train.to(device, dtype)
    Xte, Yte = data.X_test.to(device, dtype), data.Y_test.to(device, dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=tuple(betas), weight_decay=weight_decay)
    history = []

    def record(epoch, seconds):
        tr_acc, tr_mse = _eval(model, Xtr, Ytr)
        te_acc, te_mse = _eval(model, Xte, Yte)
        rec = {"epoch": epoch, "train_acc": tr_acc, "train_mse": tr_mse, "test_acc": te_acc, "test_mse": te_mse,
               "time_s": seconds}
        if epoch % nfm_every == 0:
            rec["nfm"] = model.nfm()
        history.append(rec)
        return rec

    record(0, 0.0)
    n = len(Xtr)
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        perm = torch.randperm(n, generator=g).to(device)
        for start in range(0, n, batch_size):
            idx = perm[start:start + batch_size]
            opt.zero_grad(set_to_none=True)
            loss = (model(Xtr[idx]) - Ytr[idx]).square().mean()
            loss.backward()
            opt.step()
        rec = record(epoch, time.perf_counter() - t0)
        if stop_at_test_acc is not None and rec["test_acc"] >= stop_at_test_acc:
            if "nfm" not in rec:
                rec["nfm"] = model.nfm()
            break
    return model, history
