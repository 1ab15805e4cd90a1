r"""The feature matrix M, and the one map from an AGOP to the next M.

M (d x d, PSD) enters every kernel through the transformed inputs x~ = L^T x with M = L L^T. :class:`FeatureMatrix`
holds it in one of four forms: the identity, ``full`` (d x d), ``diag`` (a vector) or ``factor`` (F with M = F F^T,
d x r); the transform is computed once per M and the kernels work on the transformed points.

:func:`feature_matrix_from_agop` is the RFM update M_{t+1} = normalize(AGOP(f_t)^power), optionally restricted to
the diagonal or to a rank-r factor, with one eigendecomposition that gives both M and its square-root factor.
:func:`feature_update` is the same map returning a plain matrix (for chapters that compare matrices).
"""
from __future__ import annotations

import torch

from .._checks import DegenerateAGOPError, check_choice, check_matrix, check_number, to_tensor
from ..utils import psd_eigh, symmetrize

NORMALIZATIONS = (None, "max", "trace", "fro")
_PSD_RTOL = 1e-5  # negative eigenvalues up to this fraction of the largest are float round-off


class FeatureMatrix:
    """A PSD feature matrix M in ``identity``, ``full``, ``diag`` or ``factor`` form.

    Build one with :meth:`identity`, :meth:`full`, :meth:`diag` or :meth:`factor`, or let :func:`as_feature_matrix`
    read a tensor (1-D -> diag, square -> full).

    Parameters
    ----------
    kind : {"identity", "full", "diag", "factor"}
        The form.
    data : torch.Tensor or None
        None (identity), M (d, d) (full), its diagonal (d,) (diag), or F (d, r) with M = F F^T (factor); not checked
        here (the named constructors check it).
    dim : int
        d.
    sqrt : torch.Tensor, shape (d, r), optional
        A float64 square-root factor of a full M, when already computed.

    Raises
    ------
    ValueError
        If ``kind`` is unknown.

    Examples
    --------
    >>> import torch
    >>> from rfm import FeatureMatrix
    >>> fm = FeatureMatrix.diag(torch.tensor([4.0, 0.0]))
    >>> fm.transform(torch.tensor([[1.0, 1.0]]))
    tensor([[2., 0.]])
    """

    _KINDS = ("identity", "full", "diag", "factor")

    def __init__(self, kind: str, data: torch.Tensor | None, dim: int, *, sqrt: torch.Tensor | None = None):
        if kind not in self._KINDS:
            raise ValueError(f"kind must be one of {self._KINDS}, got {kind!r}")
        self.kind, self.data, self.dim = kind, data, int(dim)
        self._sqrt = sqrt  # float64 square-root factor of a full M, computed once

    # -- constructors ------------------------------------------------------------------------------------------
    @classmethod
    def identity(cls, d: int) -> FeatureMatrix:
        """M = I_d.

        Parameters
        ----------
        d : int
            The dimension (>= 1).

        Returns
        -------
        FeatureMatrix
        """
        check_number("d", d, low=1, integer=True)
        return cls("identity", None, d)

    @classmethod
    def full(cls, M) -> FeatureMatrix:
        """A full symmetric PSD matrix (d, d). A matrix that is not symmetric, or has a negative eigenvalue beyond
        round-off (1e-5 of the largest), is an error: clamp it first with :func:`rfm.psd_power` (power 1).

        Parameters
        ----------
        M : array-like or torch.Tensor, shape (d, d)
            The matrix (symmetrised; negative round-off eigenvalues are clamped in its square-root factor).

        Returns
        -------
        FeatureMatrix

        Raises
        ------
        ValueError
            If M is not square, not symmetric (beyond 1e-4 of its largest entry) or not PSD.
        """
        M = check_matrix(M, "M")
        if M.shape[0] != M.shape[1]:
            raise ValueError(f"a full feature matrix M must be square (d, d), got shape {tuple(M.shape)}")
        scale = float(M.abs().max())
        if scale > 0 and float((M - M.T).abs().max()) > 1e-4 * scale:
            raise ValueError("a full feature matrix M must be symmetric (|M - M^T| is more than 1e-4 of max|M|); "
                             "use (M + M.T) / 2 if the asymmetry is round-off")
        M = symmetrize(M)
        evals, evecs = torch.linalg.eigh(M.to(torch.float64))
        if scale > 0 and float(evals[0]) < -_PSD_RTOL * float(evals[-1].abs()):
            raise ValueError(f"a full feature matrix M must be positive semidefinite, but its smallest eigenvalue is "
                             f"{float(evals[0]):.3g} (largest {float(evals[-1]):.3g}); clamp the negative eigenvalues "
                             "first, e.g. rfm.psd_power(M, 1)")
        return cls("full", M, M.shape[0], sqrt=evecs * evals.clamp_min(0).sqrt())

    @classmethod
    def diag(cls, m) -> FeatureMatrix:
        """A diagonal M given by its diagonal, a 1-D vector of non-negative numbers.

        Parameters
        ----------
        m : array-like or torch.Tensor, shape (d,)
            The diagonal.

        Returns
        -------
        FeatureMatrix

        Raises
        ------
        ValueError
            If m is not 1-D, not finite, or has a negative entry.
        """
        m = torch.as_tensor(m)
        if m.ndim != 1:
            raise ValueError(f"a diagonal feature matrix is given by a 1-D vector, got shape {tuple(m.shape)}")
        m = check_matrix(m[:, None], "M (diagonal)")[:, 0]
        if bool((m < 0).any()):
            raise ValueError(f"a diagonal feature matrix must have non-negative entries (M must be PSD); "
                             f"the smallest is {float(m.min()):.3g}")
        return cls("diag", m, m.shape[0])

    @classmethod
    def factor(cls, F) -> FeatureMatrix:
        """M = F F^T for a (d, r) factor F.

        Parameters
        ----------
        F : array-like or torch.Tensor, shape (d, r)
            The factor.

        Returns
        -------
        FeatureMatrix
        """
        F = check_matrix(F, "F")
        return cls("factor", F, F.shape[0])

    # -- conversions -------------------------------------------------------------------------------------------
    def to(self, device=None, dtype=None) -> FeatureMatrix:
        """The same M with its data on ``device`` / in ``dtype`` (the float64 square-root factor is shared).

        Parameters
        ----------
        device : torch.device or str, optional
            The device (None: unchanged).
        dtype : torch.dtype, optional
            The dtype (None: unchanged).

        Returns
        -------
        FeatureMatrix
            A new object.
        """
        data = None if self.data is None else self.data.to(device=device, dtype=dtype)
        return FeatureMatrix(self.kind, data, self.dim, sqrt=self._sqrt)

    def dense(self, dtype=torch.float64, device=None) -> torch.Tensor:
        """M as a (d, d) matrix.

        Parameters
        ----------
        dtype : torch.dtype, default torch.float64
            The dtype of the result.
        device : torch.device or str, optional
            Its device (None: the CPU for the identity, else the data's device).

        Returns
        -------
        torch.Tensor, shape (d, d)
        """
        if self.kind == "identity":
            return torch.eye(self.dim, dtype=dtype, device=device)
        if self.kind == "diag":
            return torch.diag(self.data).to(dtype=dtype, device=device)
        if self.kind == "factor":
            return (self.data @ self.data.T).to(dtype=dtype, device=device)
        return self.data.to(dtype=dtype, device=device)

    def snapshot(self) -> torch.Tensor:
        """A CPU copy for records: the diagonal vector of a diagonal M, else the dense float64 matrix.

        Returns
        -------
        torch.Tensor, shape (d,) (diag, in the data's dtype) or (d, d) (float64)
        """
        if self.kind == "diag":
            return self.data.detach().cpu().clone()
        return self.dense(dtype=torch.float64).cpu()

    def sqrt_factor(self, dtype, device):
        """L with M = L L^T: ``None`` (identity), a vector (diag), or a matrix (d, r).

        Parameters
        ----------
        dtype : torch.dtype
            The dtype of the result.
        device : torch.device or str
            Its device.

        Returns
        -------
        torch.Tensor or None
            None for the identity, sqrt of the diagonal (d,) for diag, F (d, r) for factor, and for full the
            eigenvector factor V sqrt(Lambda) (d, d) (computed once in float64, negative eigenvalues clamped).
        """
        if self.kind == "identity":
            return None
        if self.kind == "diag":
            return self.data.to(dtype=dtype, device=device).clamp_min(0).sqrt()
        if self.kind == "factor":
            return self.data.to(dtype=dtype, device=device)
        if self._sqrt is None:
            evals, evecs = psd_eigh(self.data.to(torch.float64))
            self._sqrt = evecs * evals.sqrt()
        return self._sqrt.to(dtype=dtype, device=device)

    def transform(self, X: torch.Tensor) -> torch.Tensor:
        """x~ = L^T x for every row of X.

        Parameters
        ----------
        X : torch.Tensor, shape (n, d)
            Points.

        Returns
        -------
        torch.Tensor, shape (n, r)
            X itself for the identity (r = d), else a new tensor in X's dtype and device.
        """
        L = self.sqrt_factor(X.dtype, X.device)
        if L is None:
            return X
        return X * L if L.ndim == 1 else X @ L

    def pullback(self, G: torch.Tensor) -> torch.Tensor:
        """Map gradients from transformed to input coordinates: grad_z = L grad_z~ (on the last axis).

        Parameters
        ----------
        G : torch.Tensor, shape (..., r)
            Gradients in transformed coordinates.

        Returns
        -------
        torch.Tensor, shape (..., d)
        """
        L = self.sqrt_factor(G.dtype, G.device)
        if L is None:
            return G
        return G * L if L.ndim == 1 else G @ L.T

    def pullback_agop(self, A: torch.Tensor) -> torch.Tensor:
        """L A L^T for an AGOP computed in transformed coordinates (A a matrix, or a vector for diagonal L).

        Parameters
        ----------
        A : torch.Tensor, shape (r, r) or (r,)
            The AGOP in transformed coordinates (a vector: its diagonal, with a diagonal M).

        Returns
        -------
        torch.Tensor, shape (d, d) or (d,)
            In A's dtype and device.
        """
        L = self.sqrt_factor(A.dtype, A.device)
        if L is None:
            return A
        if L.ndim == 1:
            return A * L.square() if A.ndim == 1 else L[:, None] * A * L[None, :]
        return L @ A @ L.T

    @property
    def is_diagonal(self) -> bool:
        """Whether M is the identity or diagonal (its AGOP diagonal can then be computed alone)."""
        return self.kind in ("identity", "diag")

    def __repr__(self):
        return f"FeatureMatrix(kind={self.kind!r}, dim={self.dim})"


def as_feature_matrix(M, d: int | None = None) -> FeatureMatrix:
    """Read ``None`` (identity), a :class:`FeatureMatrix`, a 1-D vector (diagonal) or a square matrix (full).

    Parameters
    ----------
    M : None, FeatureMatrix, array-like or torch.Tensor
        The feature matrix, in any of those forms.
    d : int, optional
        The number of features M must act on (required for None).

    Returns
    -------
    FeatureMatrix

    Raises
    ------
    ValueError
        If M is None without d, acts on another number of features than d, or is not a valid diagonal or full M.
    """
    if M is None:
        if d is None:
            raise ValueError("M=None needs the input dimension d")
        return FeatureMatrix.identity(d)
    if isinstance(M, FeatureMatrix):
        fm = M
    else:
        t = to_tensor(M, "M")
        fm = FeatureMatrix.diag(t) if t.ndim == 1 else FeatureMatrix.full(t)
    if d is not None and fm.dim != d:
        raise ValueError(f"M acts on {fm.dim} features but X has {d}: M must be ({d}, {d}) or a vector of {d}")
    return fm


def _check_agop(A: torch.Tensor):
    if not bool(torch.isfinite(A).all()):
        raise FloatingPointError(
            "the AGOP has NaN or infinite entries: the kernel values or gradients overflowed. The usual cause is "
            "features far larger than the bandwidth (scale the features, or raise the bandwidth), or a float32 "
            "overflow (use dtype='float64')")
    if not float(A.abs().max()) > 0:
        raise DegenerateAGOPError(
            "the AGOP is zero: the predictor's gradient vanishes at every evaluation point (a constant target, "
            "identical rows, a single sample, or features so far apart against the bandwidth that every kernel "
            "value underflows to 0)")


def normalization_scale(M: torch.Tensor, normalize: str | None) -> torch.Tensor:
    """The number M is divided by under ``normalize`` (1 for None); M is a matrix or a diagonal vector.

    Parameters
    ----------
    M : torch.Tensor, shape (d, d) or (d,)
        The matrix, or its diagonal.
    normalize : {None, "max", "trace", "fro"}
        Largest absolute entry, trace, Frobenius norm (of the vector for a diagonal), or 1.

    Returns
    -------
    torch.Tensor, 0-d, M's dtype and device

    Raises
    ------
    DegenerateAGOPError
        If the scale is not positive (M is 0).
    """
    check_choice("normalize", normalize, NORMALIZATIONS)
    if normalize is None:
        return torch.ones((), dtype=M.dtype, device=M.device)
    if normalize == "max":
        scale = M.abs().max()
    elif normalize == "trace":
        scale = M.sum() if M.ndim == 1 else M.diagonal().sum()
    else:
        scale = M.norm()
    if not float(scale) > 0:
        raise DegenerateAGOPError(f"cannot normalise a zero matrix (normalize={normalize!r}): the AGOP is 0")
    return scale


def feature_update(A: torch.Tensor, power: float = 1.0, normalize: str | None = None) -> torch.Tensor:
    """M = A^power (PSD power of the symmetric part; elementwise for a 1-D diagonal), then divided as ``normalize``
    says (None, "max": largest absolute entry, "trace", "fro": Frobenius norm).

    Parameters
    ----------
    A : torch.Tensor, shape (d, d) or (d,)
        The AGOP (or its diagonal).
    power : float, default 1.0
        The exponent (> 0).
    normalize : {None, "max", "trace", "fro"}, default None
        The normalisation.

    Returns
    -------
    torch.Tensor, the shape of A
        In A's dtype and device (float64 for an integer A).

    Examples
    --------
    >>> import torch
    >>> from rfm import feature_update
    >>> feature_update(torch.diag(torch.tensor([4.0, 1.0])), 0.5, "max")
    tensor([[1.0000, 0.0000],
            [0.0000, 0.5000]])
    """
    A = torch.as_tensor(A)
    fm = feature_matrix_from_agop(A, power=power, normalize=normalize, check=False)
    return fm.data.to(device=A.device, dtype=A.dtype if A.is_floating_point() else torch.float64)


def feature_matrix_from_agop(A: torch.Tensor, *, power: float = 1.0, normalize: str | None = "max",
                             diag: bool = False, rank: int | None = None, check: bool = True) -> FeatureMatrix:
    """The RFM update: M = normalize(A^power) as a :class:`FeatureMatrix`, from one eigendecomposition of A.

    Parameters
    ----------
    A : torch.Tensor, shape (d, d), or (d,) for a diagonal AGOP
        The AGOP (symmetric PSD up to round-off; negative eigenvalues are clamped to 0).
    power : float, default 1.0
        The exponent (> 0): 1 in the Science paper and xRFM, 1/2 in the grokking paper.
    normalize : {None, "max", "trace", "fro"}, default "max"
        Divide M by its largest absolute entry, its trace or its Frobenius norm.
    diag : bool, default False
        Keep only the diagonal of A (M diagonal).
    rank : int or None, default None
        Keep the top ``rank`` eigenpairs (M = F F^T with F of shape (d, rank)).
    check : bool, default True
        Raise :class:`rfm.DegenerateAGOPError` for a zero A and ``FloatingPointError`` for a non-finite one.

    Returns
    -------
    FeatureMatrix
        "diag" (with ``diag`` or a 1-D A), "factor" (with ``rank``), else "full", with its square-root factor.

    Raises
    ------
    DegenerateAGOPError
        If A is 0 (with ``check``), or M cannot be normalised.
    FloatingPointError
        If A is not finite (with ``check``).
    ValueError
        If A is neither (d, d) nor (d,), or ``rank`` is out of [1, d].
    """
    check_number("power", power, low=0, low_inclusive=False)
    check_choice("normalize", normalize, NORMALIZATIONS)
    A = torch.as_tensor(A)
    if check:
        _check_agop(A)
    if diag or A.ndim == 1:
        a = (A.diagonal() if A.ndim == 2 else A).clamp_min(0) ** power
        return FeatureMatrix("diag", a / normalization_scale(a, normalize), A.shape[0])
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"the AGOP must be a square matrix (d, d) or a vector (d,), got shape {tuple(A.shape)}")
    d = A.shape[0]
    evals, evecs = psd_eigh(A.to(torch.float64))
    vals = evals ** power
    if rank is not None:
        check_number("rank", rank, low=1, high=d, integer=True)
        vals, evecs = vals[-rank:], evecs[:, -rank:]
    M = (evecs * vals) @ evecs.T
    scale = normalization_scale(M, normalize)
    F = evecs * (vals / scale).sqrt()
    if rank is not None:
        return FeatureMatrix("factor", F, d)
    return FeatureMatrix("full", symmetrize(M / scale), d, sqrt=F)
