r"""Feature learning as alignment: the pre-activation tangent kernel and the centred neural feature correlation.

Notation of "Feature learning as alignment: a structural property of gradient descent in non-linear neural networks"
(seed 004, Sections 2-4 and Appendices E-F), for an :class:`rfm.nets.MLP` whose layer l computes the
pre-activation h_l = W_l x_l (+ b_l) from its input x_l:

* the **pre-activation tangent kernel** (PTK) of layer l is K^(l)(x, z) = sum_c <df_c(x)/dh_l, df_c(z)/dh_l>, an
  n x m matrix on data points (:func:`ptk`); its features df/dh_l are :func:`ptk_features`;
* the **PTK feature covariance** K_l = (1/n) sum_i sum_c df_c(x_i)/dh_l df_c(x_i)/dh_l^T (k_{l+1} x k_{l+1}) is the
  AGOP of the network with respect to the pre-activations (:func:`ptk_covariance`, computed by :func:`rfm.agop`);
  we average over the points, as the AGOP does (the paper's K omits the 1/n; no correlation depends on it);
* since df/dx_l = W_l^T df/dh_l, the AGOP with respect to the layer's input is **AGOP_l = W_l^T K_l W_l**
  (:func:`agop_from_ptk`; Proposition 2 of the paper);
* the **uncentred neural feature correlation** UC-NFC = rho(W^T W, W^T K W) is the usual NFA correlation, and the
  **centred** C-NFC = rho(Wb^T Wb, Wb^T K Wb) with Wb = W - W_0 uses only the change of the weights since
  initialisation (:func:`nfc`, :func:`feature_correlations`);
* the **C/UC ratio** tr(Wb^T Wb Wb^T K Wb) / tr(W^T W W^T K W) measures how much of the unnormalised UC-NFC the
  centred term carries (:func:`cu_ratio`, Section 5).

The correlation rho is the paper's uncentred cosine ``tr(A^T B) / (|A|_F |B|_F)`` (``kind="cosine"``, the default
here); the authors' code and Appendix L use the Pearson form, which subtracts each matrix's mean entry first
(``kind="pearson"``), see :func:`rfm.metrics.matrix_correlation`.

At initialisation (Proposition 3) the centred NFM and AGOP vanish with their first time derivatives, and under
gradient flow on ``L = 1/2 sum_i |f(x_i) - y_i|^2`` their second derivatives are 2 Wdot^T Wdot and 2 Wdot^T K Wdot, with
Wdot = -dL/dW = sum_c J_c^T diag(r_c) X_l (:func:`weight_velocity`, residuals r = y - f). Their correlation is
:func:`second_derivative_correlation`; for a one-hidden-layer quadratic network f(x) = a^T (W x)^2 the paper
predicts it from traces of data matrices and moments of R = W^T diag(a^2) W by free probability
(:func:`free_second_derivative_correlation`, Appendix E), on the *alignment reversing* data of Appendix F
(:func:`alignment_reversing_data`).
"""
from __future__ import annotations

import math
import numbers

import torch

from .._checks import check_choice, check_matrix, check_number, check_square, resolve_dtype, to_tensor
from .._compat import renamed_keyword
from ..core.agop import agop, jacobians
from ..data.datasets import chain_monomial
from ..metrics import matrix_correlation
from ..utils import make_generator
from . import optim
from .mlp import MLP, nfm

KINDS = ("cosine", "pearson")


# ----------------------------------------------------------------------------------------------------------------
# The pre-activation tangent kernel of an MLP


def _check_model(model) -> MLP:
    if not isinstance(model, MLP):
        raise TypeError(f"model must be an rfm.nets.MLP (its layers, weights and initial weights are read), got "
                        f"{type(model).__name__}; build the network with rfm.nets.MLP(d_in, [width], d_out)")
    return model


def _check_layer(model, layer: int) -> int:
    _check_model(model)
    check_number("layer", layer, low=0, high=model.n_layers - 1, integer=True)
    return layer


def _check_layers(model, layers) -> list[int]:
    if layers is None:
        return list(range(max(1, model.n_layers - 1)))
    if isinstance(layers, numbers.Integral):
        layers = [layers]
    return [_check_layer(model, l) for l in layers]


def _as_input(model, X, name: str = "X") -> torch.Tensor:
    _check_model(model)
    param = next(model.parameters())
    X = check_matrix(X, name, dtype=param.dtype, device=param.device).detach()
    d = model.layers[0].in_features
    if X.shape[1] != d:
        raise ValueError(f"{name} has {X.shape[1]} features (columns) but the network's input dimension d_in is {d}; "
                         f"pass data with {d} columns")
    return X


def _matrix(W, name: str) -> torch.Tensor:
    """A finite 2-D float64 tensor (detached), for weights and their differences."""
    W = to_tensor(W, name).detach()
    if W.ndim != 2:
        raise ValueError(f"{name} must be a 2-D weight matrix (k_out, k_in), got shape {tuple(W.shape)}")
    W = W.to(torch.float64)
    if not bool(torch.isfinite(W).all()):
        raise ValueError(f"{name} contains {int((~torch.isfinite(W)).sum())} NaN or infinite value(s) (did training "
                         "diverge?)")
    return W


def _ptk_matrix(K, k: int, name: str = "K") -> torch.Tensor:
    """The PTK covariance of a layer with ``k`` outputs: a finite symmetric (k, k) matrix."""
    K = check_square(K, name, symmetric=True).detach()
    if K.shape[0] != k:
        raise ValueError(f"{name} is {K.shape[0]} x {K.shape[0]} but W has {k} rows (outputs): K must be the "
                         f"{k} x {k} PTK covariance of the same layer")
    return K


def from_preactivation(model, layer: int):
    """The map h_l -> f(x) from the pre-activation of layer ``layer`` to the output (the identity for the read-out).

    Parameters
    ----------
    model : MLP
        The network.
    layer : int
        The layer (its weights W_l, shape (k_{l+1}, k_l)).

    Returns
    -------
    callable
        h (n, k_{l+1}) -> f (n, c).
    """
    _check_layer(model, layer)
    if layer == model.n_layers - 1:
        return lambda h: h
    return lambda h: model.forward_from(model.act(h), layer + 1)


@torch.no_grad()
def preactivations(model, X, layer: int) -> torch.Tensor:
    """h_l = W_l x_l (+ b_l) at the rows of X, shape (n, k_{l+1}).

    Parameters
    ----------
    model : MLP
        The network.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    layer : int
        The layer (its weights W_l, shape (k_{l+1}, k_l)).

    Returns
    -------
    torch.Tensor, shape (n, k_{l+1})
        Without gradient.
    """
    _check_layer(model, layer)
    _check_finite_parameters(model)
    return model.layers[layer](model.layer_input(_as_input(model, X), layer))


def ptk_features(model, X, layer: int) -> torch.Tensor:
    """The PTK features df_c(x_i)/dh_l, shape (n, c, k_{l+1}), by one backward pass per output.

    The network acts row by row, so the gradient of sum_i f_c(x_i) with respect to the stacked pre-activations has
    df_c(x_i)/dh_l(x_i) as its row i.

    Parameters
    ----------
    model : MLP
        The network.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    layer : int
        The layer (its weights W_l, shape (k_{l+1}, k_l)).

    Returns
    -------
    torch.Tensor, shape (n, c, k_{l+1})
    """
    return jacobians(from_preactivation(model, layer), preactivations(model, X, layer))


def ptk(model, X, layer: int, Z=None) -> torch.Tensor:
    """The pre-activation tangent kernel matrix K^(l)(x_i, z_j) = sum_c <df_c(x_i)/dh_l, df_c(z_j)/dh_l> (float64).

    Parameters
    ----------
    model : MLP
        The network.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    layer : int
        The layer (its weights W_l, shape (k_{l+1}, k_l)).
    Z : array-like or torch.Tensor, shape (m, d), optional
        Other inputs (None: X).

    Returns
    -------
    torch.Tensor, float64, shape (n, n) or (n, m)
    """
    _check_layer(model, layer)
    if Z is not None:
        Z = _as_input(model, Z, "Z")
    J = ptk_features(model, X, layer).to(torch.float64)
    Jz = J if Z is None else ptk_features(model, Z, layer).to(torch.float64)
    return torch.einsum("ick,jck->ij", J, Jz)


def ptk_covariance(model, X, layer: int, *, center: bool = False, batch_size: int | None = None,
                   centre: bool | None = None) -> torch.Tensor:
    """The PTK feature covariance K_l = (1/n) sum_i sum_c J_ic J_ic^T.

    It is the AGOP of the network with respect to the pre-activations of layer ``layer``, computed by
    :func:`rfm.agop`.

    Parameters
    ----------
    model : MLP
        The network.
    X : array-like or torch.Tensor, shape (n, d)
        The data.
    layer : int
        The layer whose pre-activations the gradients are taken with respect to.
    center : bool, default False
        Subtract each output's mean gradient, as in :func:`rfm.agop`.
    batch_size : int or None, default None
        Rows per backward pass.
    centre : bool or None, default None
        Deprecated name of ``center`` (used when given, with a DeprecationWarning).

    Returns
    -------
    torch.Tensor, float64, shape (k, k)
        k the width of layer ``layer``'s output (k_{l+1}).
    """
    center = renamed_keyword("rfm.nets.ptk_covariance", "centre", "center", centre, center)
    H = preactivations(model, X, layer)
    return agop(from_preactivation(model, layer), H, center=center, batch_size=batch_size)


def agop_from_ptk(W: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """W^T K W: the AGOP with respect to the layer input, from the layer's weights and its PTK covariance.

    Parameters
    ----------
    W : torch.Tensor, shape (k, d)
        The layer's weights.
    K : torch.Tensor, shape (k, k)
        The PTK covariance of the layer.

    Returns
    -------
    torch.Tensor, shape (d, d)
        In W's dtype.
    """
    W = _matrix(W, "W")
    return W.T @ _ptk_matrix(K, W.shape[0]).to(W) @ W


# ----------------------------------------------------------------------------------------------------------------
# Uncentred and centred neural feature correlations


def _weights(model, layer):
    W = model.weight(layer).detach().to(torch.float64)
    W0 = model.initial_weight(layer).to(torch.float64)
    return W, W0


def _same_shape(W0, W, name="W0") -> torch.Tensor:
    W0 = _matrix(W0, name)
    if W0.shape != W.shape:
        raise ValueError(f"{name} has shape {tuple(W0.shape)} but W has {tuple(W.shape)}: {name} must be the initial "
                         "weights of the same layer")
    return W0


def nfc(W: torch.Tensor, K: torch.Tensor, W0: torch.Tensor | None = None, *, kind: str = "cosine") -> float:
    """rho(V^T V, V^T K V) with V = W (the UC-NFC) or V = W - W0 when ``W0`` is given (the C-NFC).

    Parameters
    ----------
    W : torch.Tensor, shape (k, d)
        The layer's weights.
    K : torch.Tensor, shape (k, k)
        The PTK covariance of the layer.
    W0 : torch.Tensor, shape (k, d), optional
        The initial weights (the C-NFC).
    kind : {"cosine", "pearson"}, default "cosine"
        The correlation (:func:`rfm.matrix_correlation`).

    Returns
    -------
    float
    """
    check_choice("kind", kind, KINDS)
    V = _matrix(W, "W")
    if W0 is not None:
        V = V - _same_shape(W0, V, "W0").to(V)
    return matrix_correlation(V.T @ V, agop_from_ptk(V, K), kind)


def cu_ratio(W: torch.Tensor, W0: torch.Tensor, K: torch.Tensor) -> float:
    """tr(Wb^T Wb Wb^T K Wb) / tr(W^T W W^T K W), Wb = W - W0: the share of the centred term in the unnormalised
    UC-NFC (Section 5 of the paper). tr(V^T V V^T K V) = tr(G K G) with G = V V^T, which avoids d x d products.

    Parameters
    ----------
    W : torch.Tensor, shape (k, d)
        The layer's weights.
    W0 : torch.Tensor, shape (k, d)
        The initial weights.
    K : torch.Tensor, shape (k, k)
        The PTK covariance of the layer.

    Returns
    -------
    float
    """
    W = _matrix(W, "W")
    V = W - _same_shape(W0, W).to(W)
    K = _ptk_matrix(K, W.shape[0]).to(W)
    num = torch.trace(V @ V.T @ K @ V @ V.T)
    den = torch.trace(W @ W.T @ K @ W @ W.T)
    if float(den) == 0 or not math.isfinite(float(num / den)):
        raise ValueError(f"the C/UC ratio is undefined: tr(W^T W W^T K W) = {float(den):.3g} (W or K is zero, or "
                         "the values overflow)")
    return float(num / den)


def _ptk_features_flat(model, X, layer):
    J = ptk_features(model, X, layer).to(torch.float64)               # (n, c, k)
    return J.reshape(-1, J.shape[-1])


def centred_ptk_covariance(model, X, layer: int, initial=None) -> torch.Tensor:
    """Kb_l = (1/n) sum_i sum_c (J_ic - J0_ic)(J_ic - J0_ic)^T: the covariance of the *change* of the PTK features
    df_c(x_i)/dh_l since initialisation (Appendix C of the paper), with J0 the features of ``initial`` (default
    ``model.initial()``, the network with its initial weights). float64, k_{l+1} x k_{l+1}.

    Parameters
    ----------
    model : MLP
        The network.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    layer : int
        The layer (its weights W_l, shape (k_{l+1}, k_l)).
    initial : MLP, optional
        The network at initialisation.

    Returns
    -------
    torch.Tensor, float64, shape (k_{l+1}, k_{l+1})
    """
    _check_layer(model, layer)
    initial = model.initial() if initial is None else _check_model(initial)
    X = _as_input(model, X)
    D = _ptk_features_flat(model, X, layer) - _ptk_features_flat(initial, X, layer)
    return D.T @ D / X.shape[0]


def _trace_ratio(V, K1, K2) -> float:
    """tr(V^T V V^T K1 V) / tr(V^T V V^T K2 V), through G = V V^T."""
    G = V @ V.T
    num, den = torch.trace(G @ K1.to(V) @ G), torch.trace(G @ K2.to(V) @ G)
    return float(num / den) if float(den) != 0 else math.nan


def feature_correlations(model, X, layers=None, *, kind: str = "cosine", batch_size: int | None = None,
                         centrings: bool = False, initial=None) -> list[dict]:
    """For every layer (default: all but the linear read-out): {"layer", "uc_nfc", "c_nfc", "cu_ratio",
    "weight_change"}, with ``weight_change = |W - W0|_F / |W|_F``. The PTK covariance is computed once per layer.

    With ``centrings`` (Appendix C of the paper) also, with Kb = :func:`centred_ptk_covariance` (``initial``: the
    network at initialisation, default ``model.initial()``): "dc_nfc" = rho(Wb^T Wb, Wb^T Kb Wb) (double-centred),
    "ptk_c_nfc" = rho(W0^T W0, W0^T Kb W0) (PTK-centred) and "dc_ratio" = tr(Wb^T Wb Wb^T Kb Wb) /
    tr(Wb^T Wb Wb^T K Wb) (the paper's Figure 5).

    At initialisation W = W0, so the centred quantities are undefined; they are reported as NaN there.

    Parameters
    ----------
    model : MLP
        The network.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    layers : iterable of int, optional
        The layers.
    kind : {"cosine", "pearson"}, default "cosine"
        The correlation (:func:`rfm.matrix_correlation`).
    batch_size : int, optional
        Rows per backward pass.
    centrings : bool, default False
        Also the Appendix C quantities.
    initial : MLP, optional
        The network at initialisation.

    Returns
    -------
    list of dict
        One per layer.
    """
    check_choice("kind", kind, KINDS)
    _check_model(model)
    layers = _check_layers(model, layers)
    X = _as_input(model, X)
    if centrings:
        initial = model.initial() if initial is None else _check_model(initial)
    rows = []
    for l in layers:
        W, W0 = _weights(model, l)
        K = ptk_covariance(model, X, l, batch_size=batch_size)
        change = float((W - W0).norm() / W.norm())
        moved = change > 0
        row = {"layer": l, "uc_nfc": nfc(W, K, kind=kind),
               "c_nfc": nfc(W, K, W0, kind=kind) if moved else math.nan,
               "cu_ratio": cu_ratio(W, W0, K) if moved else math.nan, "weight_change": change}
        if centrings:
            Kb = centred_ptk_covariance(model, X, l, initial) if moved else torch.zeros_like(K)
            ptk_moved = moved and float(Kb.abs().max()) > 0
            row.update(dc_nfc=nfc(W, Kb, W0, kind=kind) if ptk_moved else math.nan,
                       ptk_c_nfc=nfc(W0, Kb, kind=kind) if ptk_moved else math.nan,
                       dc_ratio=_trace_ratio(W - W0, Kb, K) if moved else math.nan)
        rows.append(row)
    return rows


class CorrelationTracker:
    """A training callback that records :func:`feature_correlations` at the points X, for
    :func:`rfm.nets.optim.train_full_batch` and :func:`rfm.nets.train` (both call ``callback(model, record)``).

    ``times`` holds the record's "step" (or "epoch") plus ``offset``, ``rows[t]`` the per-layer dicts at that time;
    ``series(key, layer)`` is one quantity over training, e.g. ``tracker.series("c_nfc", 0)``. ``centrings`` also
    records the double- and PTK-centred quantities (the network at initialisation is built once, at the first
    call). Never stops training.

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    layers : iterable of int, optional
        The layers.
    kind : {"cosine", "pearson"}, default "cosine"
        The correlation (:func:`rfm.matrix_correlation`).
    batch_size : int, optional
        Rows per backward pass.
    centrings : bool, default False
        Also the centred quantities.
    offset : int, default 0
        Added to the record's step.
    """

    KEYS = ("uc_nfc", "c_nfc", "cu_ratio", "weight_change", "dc_nfc", "ptk_c_nfc", "dc_ratio")

    def __init__(self, X, layers=None, *, kind: str = "cosine", batch_size: int | None = None,
                 centrings: bool = False, offset: int = 0):
        check_choice("kind", kind, KINDS)
        check_matrix(X, "X")
        if layers is not None:
            for l in [layers] if isinstance(layers, numbers.Integral) else layers:
                check_number("layer", l, low=0, integer=True)
        check_number("offset", offset, integer=True)
        self.X, self.layers, self.kind, self.batch_size = X, layers, kind, batch_size
        self.centrings, self.offset, self._initial = bool(centrings), offset, None
        self.times: list[int] = []
        self.rows: list[list[dict]] = []

    def __call__(self, model, record) -> bool:
        if self.centrings and self._initial is None:
            self._initial = _check_model(model).initial()
        self.times.append(record.get("step", record.get("epoch")) + self.offset)
        self.rows.append(feature_correlations(model, self.X, self.layers, kind=self.kind,
                                              batch_size=self.batch_size, centrings=self.centrings,
                                              initial=self._initial))
        return False

    def series(self, key: str, layer: int = 0) -> list[float]:
        """One quantity over training, for one layer.

        Parameters
        ----------
        key : str
            A key of :func:`feature_correlations`'s dicts.
        layer : int, default 0
            The layer.

        Returns
        -------
        list of float
            One per recorded time.

        Raises
        ------
        ValueError
            If the key was not recorded.
        """
        if key not in self.KEYS:
            raise ValueError(f"key must be one of {list(self.KEYS)}, got {key!r}")
        out = []
        for rows in self.rows:
            match = [r for r in rows if r["layer"] == layer]
            if not match:
                raise ValueError(f"layer {layer} was not tracked (tracked: {[r['layer'] for r in rows]})")
            if key not in match[0]:
                raise ValueError(f"{key!r} was not recorded: build the tracker with centrings=True")
            out.append(match[0][key])
        return out


def haar_orthogonal(d: int, generator=None, dtype=torch.float64) -> torch.Tensor:
    """A uniformly random (Haar) d x d orthogonal matrix: QR of a Gaussian matrix with the signs of R's diagonal
    moved into Q (Mezzadri 2007).

    Parameters
    ----------
    d : int
        The size.
    generator : int or torch.Generator, optional
        Seeds the draw.
    dtype : torch.dtype, default torch.float64
        The dtype.

    Returns
    -------
    torch.Tensor, shape (d, d)
    """
    check_number("d", d, low=1, integer=True)
    G = torch.randn(d, d, generator=make_generator(generator), dtype=resolve_dtype(dtype))
    Q, R = torch.linalg.qr(G)
    return Q * torch.sign(torch.sign(R.diagonal()) + 0.5)


def spectrum_matched(K: torch.Tensor, generator=None) -> torch.Tensor:
    """Q = O diag(eig(K)) O^T with O Haar-random: the same spectrum as K, eigenvectors independent of everything
    (the control of Figure 1 of the paper).

    Parameters
    ----------
    K : torch.Tensor, shape (k, k)
        A symmetric matrix.
    generator : int or torch.Generator, optional
        Seeds the draw.

    Returns
    -------
    torch.Tensor, shape (k, k)
    """
    K = check_square(K, "K", symmetric=True).detach().to(torch.float64)
    evals = torch.linalg.eigvalsh(0.5 * (K + K.T))
    O = haar_orthogonal(K.shape[0], generator).to(K.device)
    return (O * evals) @ O.T


def random_eigenvector_nfc(model, X, layer: int = 0, *, draws: int = 10, generator=None, kind: str = "cosine",
                           K: torch.Tensor | None = None) -> list[float]:
    """rho(W^T W, W^T Q W) for ``draws`` spectrum-matched random Q (:func:`spectrum_matched`) in place of K_l.

    Parameters
    ----------
    model : MLP
        The network.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    layer : int, default 0
        The layer.
    draws : int, default 10
        Random Q.
    generator : int or torch.Generator, optional
        Seeds the draw.
    kind : {"cosine", "pearson"}, default "cosine"
        The correlation (:func:`rfm.matrix_correlation`).
    K : torch.Tensor, shape (k, k), optional
        The PTK covariance, when already computed.

    Returns
    -------
    list of float
        One per draw.
    """
    check_number("draws", draws, low=1, integer=True)
    check_choice("kind", kind, KINDS)
    _check_layer(model, layer)
    W, _ = _weights(model, layer)
    K = ptk_covariance(model, X, layer) if K is None else _ptk_matrix(K, W.shape[0])
    g = make_generator(generator)
    return [nfc(W, spectrum_matched(K, g), kind=kind) for _ in range(draws)]


# ----------------------------------------------------------------------------------------------------------------
# Early times: second derivatives of the centred NFM and AGOP


def _velocity_and_features(model, X, residual, layer):
    X = _as_input(model, X)
    J = ptk_features(model, X, layer).to(torch.float64)                # (n, c, k)
    r = to_tensor(residual, "residual").detach().to(torch.float64).to(J.device)
    if r.ndim not in (1, 2) or r.shape[0] != J.shape[0]:
        raise ValueError(f"residual must have shape (n,) or (n, c) with n = {J.shape[0]} rows of X, got "
                         f"{tuple(r.shape)}")
    if not bool(torch.isfinite(r).all()):
        raise ValueError("residual contains NaN or infinite values")
    r = r.reshape(J.shape[0], -1)
    if r.shape[1] != J.shape[1]:
        raise ValueError(f"residual has {r.shape[1]} column(s) but the network has {J.shape[1]} output(s)")
    Xl = model.layer_input(X, layer).to(torch.float64)
    return (J * r[:, :, None]).sum(1).T @ Xl, J                          # x_l does not depend on the output c


def weight_velocity(model, X, residual, layer: int = 0) -> torch.Tensor:
    """Wdot = sum_c J_c^T diag(r_c) X_l = -dL/dW_l for ``L = 1/2 sum_i |f(x_i) - y_i|^2`` and residuals r = y - f
    (shape (n,) or (n, c)); float64, shape (k_{l+1}, k_l). With r = y it is the paper's L-dot = diag(y) at f = 0.

    Parameters
    ----------
    model : MLP
        The network.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    residual : array-like, shape (n,) or (n, c)
        r = y - f.
    layer : int, default 0
        The layer.

    Returns
    -------
    torch.Tensor, float64, shape (k_{l+1}, k_l)
    """
    return _velocity_and_features(model, X, residual, layer)[0]


def second_derivatives(model, X, residual, layer: int = 0):
    """(Wdot^T Wdot, Wdot^T K Wdot): half the second time derivatives of the centred NFM and AGOP at initialisation
    under gradient flow (Proposition 3), with K = sum_i sum_c J_ic J_ic^T summed over the points, as in the paper
    (n times :func:`ptk_covariance`).

    Parameters
    ----------
    model : MLP
        The network.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    residual : array-like, shape (n,) or (n, c)
        r = y - f.
    layer : int, default 0
        The layer.

    Returns
    -------
    nfm, agop : torch.Tensor, float64, shape (k_l, k_l)
    """
    Wdot, J = _velocity_and_features(model, X, residual, layer)
    Jf = J.reshape(-1, J.shape[-1])
    return Wdot.T @ Wdot, agop_from_ptk(Wdot, Jf.T @ Jf)


def second_derivative_correlation(model, X, residual, layer: int = 0, *, kind: str = "cosine") -> float:
    """rho(Wdot^T Wdot, Wdot^T K Wdot): how aligned the centred NFM and AGOP start to grow (Eq. 6 of the paper).

    Parameters
    ----------
    model : MLP
        The network.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    residual : array-like, shape (n,) or (n, c)
        r = y - f.
    layer : int, default 0
        The layer.
    kind : {"cosine", "pearson"}, default "cosine"
        The correlation (:func:`rfm.matrix_correlation`).

    Returns
    -------
    float
    """
    check_choice("kind", kind, KINDS)
    return matrix_correlation(*second_derivatives(model, X, residual, layer), kind)


def quadratic_readout_gram(model) -> torch.Tensor:
    """R = W^T diag(a^2) W for a one-hidden-layer network f(x) = a^T sigma(W x) (float64, d x d).

    For the quadratic activation the PTK is K(x, z) = 4 x^T R z, so the second derivatives of Proposition 3 are
    4 C R C and 16 C R B R C with C = X^T diag(y) X and B = X^T X.

    Parameters
    ----------
    model : MLP
        A one-hidden-layer network.

    Returns
    -------
    torch.Tensor, float64, shape (d, d)
    """
    _check_model(model)
    if model.n_layers != 2:
        raise ValueError(f"expected a one-hidden-layer network (2 layers), got {model.n_layers} layers")
    W = model.weight(0).detach().to(torch.float64)
    a = model.weight(1).detach().to(torch.float64)
    if a.shape[0] != 1:
        raise ValueError(f"expected a scalar output, got {a.shape[0]} outputs")
    return W.T @ (a[0, :, None] ** 2 * W)


def _ntr(M):
    """Normalised trace tr[M] = (1/d) sum_i M_ii."""
    return float(M.diagonal().sum()) / M.shape[0]


def spectral_moments(R: torch.Tensor, orders=(1, 2, 3, 4)) -> list[float]:
    """Normalised traces tr[R^j] = (1/d) sum_i lambda_i^j of a symmetric matrix.

    Parameters
    ----------
    R : torch.Tensor, shape (d, d)
        A symmetric matrix.
    orders : sequence of int, default (1, 2, 3, 4)
        The j.

    Returns
    -------
    list of float
        One per order.
    """
    R = check_square(R, "R", symmetric=True).detach().to(torch.float64)
    if isinstance(orders, numbers.Real):
        orders = [orders]
    orders = [check_number("order", j) for j in orders]
    evals = torch.linalg.eigvalsh(0.5 * (R + R.T))
    out = [float((evals ** j).mean()) for j in orders]
    bad = [j for j, m in zip(orders, out) if not math.isfinite(m)]
    if bad:
        raise ValueError(f"tr[R^j] is not finite for j = {bad}: a negative order needs R without zero eigenvalues")
    return out


def free_second_derivative_traces(A: torch.Tensor, B: torch.Tensor, moments) -> tuple[float, float, float]:
    """Free-probability values of tr(ARARBR), tr(ARAR) and tr(ARBRARBR), from A, B and m_j = tr[R^j].

    With R free from {A, B} and normalised traces tr[.] (Appendix E of the paper, Eqs. 18, 20, 26; Ab = A - tr[A],
    Bb = B - tr[B], a = tr[A], b = tr[B]):

    * tr(ARARBR) = a^2 b m3 + 2 a m1 m2 tr(Ab Bb) + b m1 m2 tr(Ab^2) + m1^3 tr(Ab^2 Bb);
    * tr(ARAR)   = tr(A^2) m1^2 + a^2 (m2 - m1^2);
    * tr(ARBRARBR) = m1^4 tr((Ab Bb)^2) + 2 m1^2 (m2 - m1^2) tr(Ab Bb)^2 + 2 m1^2 m2 (b tr(Ab^2 Bb) + a tr(Ab Bb^2))
      + 4 a b m1 m3 tr(Ab Bb) + a^2 b^2 m4 + m2^2 (a^2 tr(Bb^2) + b^2 tr(Ab^2)).

    The last term of the paper's Eq. 26 reads tr[Ab]^2 tr[B^2] tr[R^2]^2, which is 0 since tr[Ab] = 0; expanding
    Eq. 25 with Eq. 11 gives b^2 m2^2 tr(Ab^2), used here. For R = I the three values are exactly tr(A^2 B),
    tr(A^2) and tr(ABAB); the unit tests also check them against averages over Haar-rotated R.

    Parameters
    ----------
    A, B : torch.Tensor, shape (d, d)
        The data matrices (:func:`data_matrices`).
    moments : sequence of float
        m_1..m_4, as :func:`spectral_moments` gives them.

    Returns
    -------
    tuple of float
        tr(ARARBR), tr(ARAR), tr(ARBRARBR).
    """
    A = check_square(A, "A").detach().to(torch.float64)
    B = check_square(B, "B").detach().to(A)
    if A.shape != B.shape:
        raise ValueError(f"A and B must be square matrices of the same shape, got {tuple(A.shape)}, {tuple(B.shape)}")
    moments = list(moments) if hasattr(moments, "__iter__") else moments
    if not isinstance(moments, list) or len(moments) != 4:
        raise ValueError(f"moments must be the four normalised traces [tr R, tr R^2, tr R^3, tr R^4] (see "
                         f"spectral_moments), got {moments!r}")
    m1, m2, m3, m4 = [float(check_number("moment", float(m))) for m in moments]
    d = A.shape[0]
    eye = torch.eye(d, dtype=A.dtype, device=A.device)

    def ntr(X, Y):  # tr[X Y] = (1/d) sum_ij X_ij Y_ji, without forming X Y
        return float((X * Y.T).sum()) / d

    a, b = _ntr(A), _ntr(B)
    Ab, Bb = A - a * eye, B - b * eye
    AbBb, AbAb = Ab @ Bb, Ab @ Ab
    t_ab, t_aa, t_bb = _ntr(AbBb), _ntr(AbAb), ntr(Bb, Bb)
    t_aab, t_abb, t_abab = ntr(AbAb, Bb), ntr(AbBb, Bb), ntr(AbBb, AbBb)
    num = a * a * b * m3 + 2 * a * m1 * m2 * t_ab + b * m1 * m2 * t_aa + m1 ** 3 * t_aab
    den1 = ntr(A, A) * m1 ** 2 + a * a * (m2 - m1 ** 2)
    den2 = (m1 ** 4 * t_abab + 2 * m1 ** 2 * (m2 - m1 ** 2) * t_ab ** 2 + 2 * m1 ** 2 * m2 * (b * t_aab + a * t_abb)
            + 4 * a * b * m1 * m3 * t_ab + a * a * b * b * m4 + m2 ** 2 * (a * a * t_bb + b * b * t_aa))
    return num, den1, den2


def free_second_derivative_correlation(A: torch.Tensor, B: torch.Tensor, moments) -> float:
    """The free-probability prediction of rho(C R C, C R B R C) (cosine) from A = C^2, B and m_j = tr[R^j]:
    tr(ARARBR) / sqrt(tr(ARAR) tr(ARBRARBR)) with the traces of :func:`free_second_derivative_traces`
    (Assumption 7 of the paper: the expectation is taken inside the ratio).

    Parameters
    ----------
    A, B : torch.Tensor, shape (d, d)
        The data matrices (:func:`data_matrices`).
    moments : sequence of float
        m_1..m_4, as :func:`spectral_moments` gives them.

    Returns
    -------
    float
    """
    num, den1, den2 = free_second_derivative_traces(A, B, moments)
    if not den1 * den2 > 0:
        raise ValueError(f"the predicted correlation is undefined: tr(ARAR) tr(ARBRARBR) = {den1 * den2:.3g} is not "
                         "positive (are the moments those of a PSD R, and A, B not zero?)")
    return num / math.sqrt(den1 * den2)


def data_matrices(X, y):
    """C = X^T diag(y) X, A = C^2 and B = X^T X (float64), the data side of the quadratic network's prediction.

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    y : array-like, shape (n,)
        Labels.

    Returns
    -------
    C, A, B : torch.Tensor, float64, shape (d, d)
    """
    X = check_matrix(X, "X", dtype=torch.float64)
    y = to_tensor(y, "y").detach()
    if not (y.ndim == 1 or (y.ndim == 2 and y.shape[1] == 1)):
        raise ValueError(f"y must be a vector of labels (n,), one per row of X, got shape {tuple(y.shape)}")
    y = y.to(X).reshape(-1)
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y has {y.shape[0]} entries but X has {X.shape[0]} rows")
    if not bool(torch.isfinite(y).all()):
        raise ValueError("y contains NaN or infinite values")
    C = X.T @ (y[:, None] * X)
    return C, C @ C, X.T @ X


def predicted_second_derivative_correlation(X, y, moments) -> float:
    """The paper's prediction for a one-hidden-layer quadratic network with f = 0 at initialisation (L-dot =
    diag(y)), from the data and the moments of R (:func:`spectral_moments` of :func:`quadratic_readout_gram`,
    averaged over network seeds in the paper).

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    y : array-like, shape (n,)
        Labels.
    moments : sequence of float
        m_1..m_4, as :func:`spectral_moments` gives them.

    Returns
    -------
    float
    """
    _, A, B = data_matrices(X, y)
    return free_second_derivative_correlation(A, B, moments)


def alignment_reversing_data(n: int, d: int, balance: float, *, eps1: float = 0.5, eps2: float = 1e-2,
                             label_shift: float = 1e-5, rcond: float | None = None, generator=0):
    """The alignment reversing data set of Appendix F: (X, y) with n points in d dimensions (float64).

    A fraction ``balance`` (gamma) of the points, X1, has label 1 and rows ~ N(0, 1 1^T + eps1 I). The rest, X2,
    has label 0 and is built so that X2^T X2 = (X1^T X1)^{-2}:

    1. U1, S1 = the singular vectors and values of X1^T X1 (largest first);
    2. V2 = the left singular vectors of a fresh sample X~2 from the distribution of X1;
    3. X2 = V2 S1^{-1} U1^T, on the leading min(n2, d) singular directions (the recipe's shapes need this when
       n2 < d);
    4. X = [X1; X2] + eps2 Z with Z ~ N(0, I);
    5. y = [1, ..., 1, 0, ..., 0] + label_shift.

    When gamma n < d, X1^T X1 is singular: d - gamma n of its singular values are 0 in exact arithmetic and come out
    at the rounding level, so step 3 divides by them and X2 is huge in those directions. The recipe is then
    decided by rounding. We keep it as written (float64) by default; ``rcond`` floors the singular values at
    rcond * max(S1) instead (``rcond=1.2e-7`` mimics float32 rounding), to show how much the result depends on it.
    The paper's values: eps1 = 0.5, eps2 = 1e-2, n = d = 1024.

    Parameters
    ----------
    n : int
        Points.
    d : int
        Dimension.
    balance : float
        gamma, the share of label 1.
    eps1 : float, default 0.5
        As above.
    eps2 : float, default 1e-2
        As above.
    label_shift : float, default 1e-5
        As above.
    rcond : float, optional
        Cut-off of the small singular values of X1^T X1.
    generator : int or torch.Generator, default 0
        Seeds the draws.

    Returns
    -------
    X : torch.Tensor, float64, shape (n, d)
    y : torch.Tensor, float64, shape (n,)
    """
    n = check_number("n", n, low=2, integer=True)
    d = check_number("d", d, low=1, integer=True)
    check_number("balance", balance, low=0, low_inclusive=False, high=1)
    check_number("eps1", eps1, low=0, low_inclusive=False)
    check_number("eps2", eps2, low=0)
    check_number("label_shift", label_shift)
    if rcond is not None:
        check_number("rcond", rcond, low=0, low_inclusive=False, high=1)
    g = make_generator(generator)
    n1 = min(n, max(1, round(balance * n)))
    n2 = n - n1
    L = torch.linalg.cholesky(torch.ones(d, d, dtype=torch.float64) + eps1 * torch.eye(d, dtype=torch.float64))
    X1 = torch.randn(n1, d, generator=g, dtype=torch.float64) @ L.T
    parts = [X1]
    if n2 > 0:
        U1, S1, _ = torch.linalg.svd(X1.T @ X1)
        if rcond is not None:
            S1 = S1.clamp_min(rcond * S1[0])
        X2_tilde = torch.randn(n2, d, generator=g, dtype=torch.float64) @ L.T
        V2 = torch.linalg.svd(X2_tilde, full_matrices=False)[0]
        k = min(n2, d)
        parts.append((V2[:, :k] / S1[:k]) @ U1[:, :k].T)
    X = torch.cat(parts) + eps2 * torch.randn(n, d, generator=g, dtype=torch.float64)
    y = torch.cat([torch.ones(n1, dtype=torch.float64), torch.zeros(n2, dtype=torch.float64)]) + label_shift
    return X, y


# ----------------------------------------------------------------------------------------------------------------
# The paper's experiments: chain-monomial tasks, tracked GD / SLO runs, the alignment reversing sweep


def decay_covariance(d: int, decay: float, generator=None) -> torch.Tensor:
    """Sigma = O diag(lambda) O^T with lambda_k proportional to 1 / (1 + k^decay), k = 1..d, scaled to mean 1, and O
    Haar-random (``generator``): the Gaussian inputs of the paper's Figures 7-10 (decay 0: the identity; 1 and 2:
    Figures 9 and 10). The paper does not give the scale of the eigenvalues; the mean 1 is ours. float64, d x d.

    Parameters
    ----------
    d : int
        The dimension.
    decay : float
        The spectral decay (>= 0).
    generator : int or torch.Generator, optional
        Seeds the draw.

    Returns
    -------
    torch.Tensor, float64, shape (d, d)
    """
    check_number("d", d, low=1, integer=True)
    check_number("decay", decay, low=0)
    k = torch.arange(1, d + 1, dtype=torch.float64)
    lam = 1.0 / (1.0 + k ** decay)
    lam = lam / lam.mean()
    if decay == 0:
        return torch.eye(d, dtype=torch.float64)
    O = haar_orthogonal(d, generator)
    return (O * lam) @ O.T


def chain_inputs(n: int, d: int, *, decay: float = 0.0, generator=0, basis=0, dtype="float64") -> torch.Tensor:
    """n rows x ~ N(0, Sigma) with Sigma = :func:`decay_covariance` (``decay``, eigenbasis drawn from ``basis``);
    decay 0 is N(0, I), drawn exactly as :func:`rfm.data.low_rank_polynomial` draws its inputs.

    Parameters
    ----------
    n : int
        Rows.
    d : int
        Dimension.
    decay : float, default 0.0
        As in :func:`decay_covariance`.
    generator : int or torch.Generator, default 0
        Seeds the rows.
    basis : int or torch.Generator, default 0
        Seeds the eigenbasis.
    dtype : str or torch.dtype, default "float64"
        The dtype.

    Returns
    -------
    torch.Tensor, shape (n, d)
    """
    check_number("n", n, low=1, integer=True)
    check_number("decay", decay, low=0)
    g = make_generator(generator)
    if decay == 0:
        return torch.randn(n, d, generator=g, dtype=resolve_dtype(dtype))
    Z = torch.randn(n, d, generator=g, dtype=torch.float64)
    L = torch.linalg.cholesky(decay_covariance(d, decay, basis))
    return (Z @ L.T).to(resolve_dtype(dtype))


def chain_task(n: int, d: int = 32, r: int = 5, data_seed: int = 0, *, n_test: int = 2000, decay: float = 0.0,
               device=None, dtype="float32"):
    """Train and test sets of the chain monomial y = sum_k x_k x_{k+1 mod r} (:func:`rfm.data.chain_monomial`), the
    paper's task (Eq. 2): inputs from generators 2 s (train) and 2 s + 1 (test) for ``data_seed`` s, labels divided
    by the training labels' standard deviation (Appendix I). ``decay`` > 0 draws x ~ N(0, Sigma) with the spectral
    decay of :func:`decay_covariance` (eigenbasis from ``data_seed``). Returns (X, y, X_test, y_test) on ``device``.

    Parameters
    ----------
    n : int
        Training points.
    d : int, default 32
        Dimension.
    r : int, default 5
        The chain's length.
    data_seed : int, default 0
        s.
    n_test : int, default 2000
        Test points.
    decay : float, default 0.0
        As in :func:`decay_covariance`.
    device : torch.device or str, optional
        The device.
    dtype : str or torch.dtype, default "float32"
        The dtype.

    Returns
    -------
    X, y, X_test, y_test : torch.Tensor
        (n, d), (n,), (n_test, d), (n_test,).
    """
    check_number("n_test", n_test, low=1, integer=True)
    check_number("data_seed", data_seed, low=0, integer=True)
    Xtr = chain_inputs(n, d, decay=decay, generator=2 * data_seed, basis=data_seed, dtype=dtype)
    Xte = chain_inputs(n_test, d, decay=decay, generator=2 * data_seed + 1, basis=data_seed, dtype=dtype)
    ytr, yte = chain_monomial(Xtr, r=r), chain_monomial(Xte, r=r)
    scale = ytr.std()
    return tuple(t.to(device) for t in (Xtr, ytr / scale, Xte, yte / scale))


def chain_egop(d: int = 32, r: int = 5, *, decay: float = 0.0, basis=0, samples: int = 50_000, generator=0):
    """Monte-Carlo EGOP of the chain monomial under the inputs of :func:`chain_inputs` (float64, d x d); for
    decay 0 its exact value is 2 on the r x r block's diagonal, 1 between coordinates with a common neighbour.

    Parameters
    ----------
    d : int, default 32
        Dimension.
    r : int, default 5
        The chain's length.
    decay, basis
        As in :func:`chain_inputs`.
    samples : int, default 50000
        Monte-Carlo points.
    generator : int or torch.Generator, default 0
        Seeds them.

    Returns
    -------
    torch.Tensor, float64, shape (d, d)
    """
    Z = chain_inputs(samples, d, decay=decay, generator=generator, basis=basis)
    return agop(lambda x: chain_monomial(x, r=r), Z)


def tracked_run(X, y, X_test=None, y_test=None, *, method: str = "gd", lr: float, steps: int,
                widths=(256, 256), init_scale: float = 1.0, readout_scale: float = 1.0, speeds=None,
                eps: float = 0.1, record_every: int = 20, layers=(0, 1), centrings: bool = False, egop=None,
                generator=0, threads: int | None = None) -> dict:
    """Train a bias-free ReLU :class:`MLP` with full-batch gradient descent (``method="gd"``, learning rate ``lr``)
    or SLO (``"slo"``: :class:`rfm.nets.optim.SLO` with one ``speeds`` entry per layer and ``eps``) for ``steps``
    steps on the MSE, recording :func:`feature_correlations` of ``layers`` every ``record_every`` steps.

    The first layer starts at ``init_scale`` (the paper's s_0), the hidden ones at 1 and the read-out at
    ``readout_scale`` (times PyTorch's uniform default). Returns {"net", "tracker", "history", "train_loss" (the
    recorded losses), "test" (the last test MSE, when X_test is given), "uc", "c", "ratio" (first tracked layer, at
    the end), "agop" (W^T K W of the first layer on X, float64)} and, when ``egop`` is given, "nfm_egop" and
    "agop_egop": the cosines of the first layer's NFM and AGOP with it (the paper's feature quality).

    Parameters
    ----------
    X, y : torch.Tensor
        Training data.
    X_test, y_test : torch.Tensor, optional
        Test data.
    method : {"gd", "slo"}, default "gd"
        The optimiser.
    lr : float
        The learning rate.
    steps : int
        Steps.
    widths : sequence of int, default (256, 256)
        Hidden widths.
    init_scale : float, default 1.0
        s_0.
    readout_scale : float, default 1.0
        The read-out's scale.
    speeds : sequence of float, optional
        SLO's speeds (one per layer).
    eps : float, default 0.1
        SLO's eps.
    record_every : int, default 20
        Steps between records.
    layers : sequence of int, default (0, 1)
        Tracked layers.
    centrings : bool, default False
        As in :class:`CorrelationTracker`.
    egop : torch.Tensor, shape (d, d), optional
        The target's EGOP.
    generator : int or torch.Generator, default 0
        Seeds the network.
    threads : int, optional
        As in :func:`rfm.nets.train`.

    Returns
    -------
    dict
        As described above.
    """
    check_choice("method", method, ("gd", "slo"))
    X = check_matrix(X, "X")
    widths = list(widths)
    n_layers = len(widths) + 1
    net = MLP(X.shape[1], widths, 1 if y.ndim == 1 else y.shape[1], init="uniform",
              init_scale=[init_scale] + [1.0] * (len(widths) - 1) + [readout_scale], generator=generator,
              device=X.device, dtype=X.dtype)
    if method == "gd":
        opt = torch.optim.SGD(net.parameters(), lr=lr)
    else:
        if speeds is None or len(speeds) != n_layers:
            raise ValueError(f"SLO needs one speed per layer ({n_layers} for widths {widths}), got {speeds!r}")
        opt = optim.SLO(optim.layer_groups(net, speeds), lr=lr, eps=eps)
    tracker = CorrelationTracker(X, layers=list(layers), centrings=centrings)
    hist = optim.train_full_batch(net, X, y, opt, steps=steps, record_every=record_every, X_val=X_test,
                                  y_val=y_test, callback=tracker, threads=threads)
    first = list(layers)[0]
    W = net.weight(first).detach().to(torch.float64)
    out = dict(net=net, tracker=tracker, history=hist, train_loss=[h["train_loss"] for h in hist],
               test=hist[-1].get("val_loss"), uc=tracker.series("uc_nfc", first)[-1],
               c=tracker.series("c_nfc", first)[-1], ratio=tracker.series("cu_ratio", first)[-1],
               agop=agop_from_ptk(W, ptk_covariance(net, X, first)))
    if egop is not None:
        E = check_square(egop, "egop", symmetric=True).detach().to(torch.float64)
        out.update(nfm_egop=matrix_correlation(nfm(net, first).to(E), E, "cosine"),
                   agop_egop=matrix_correlation(out["agop"].to(E), E, "cosine"))
    return out


def seed_means(runs, keys=("uc", "c", "ratio", "test", "nfm_egop", "agop_egop")) -> dict:
    """The mean over runs (one per seed) of each of ``keys`` present in the runs' dicts (e.g. of :func:`tracked_run`).

    Parameters
    ----------
    runs : sequence of dict
        One per seed.
    keys : sequence of str, default ("uc", "c", "ratio", "test", "nfm_egop", "agop_egop")
        The keys.

    Returns
    -------
    dict of float
        Only the keys present in every run.
    """
    runs = list(runs)
    if not runs:
        raise ValueError("seed_means needs at least one run")
    return {k: float(sum(float(r[k]) for r in runs) / len(runs)) for k in keys if all(k in r for r in runs)}


def reversing_curve(observer, moments, n: int, d: int, balances, *, generator=0, rcond: float | None = None,
                    device=None):
    """The observed and predicted correlation of the second derivatives (:func:`second_derivative_correlation` of
    ``observer``, a one-hidden-layer quadratic MLP; :func:`predicted_second_derivative_correlation` from
    ``moments``) on :func:`alignment_reversing_data` (n points, d dimensions, ``rcond``, data ``generator``) for each
    balance. Returns two lists of floats, (observed, predicted), one entry per balance.

    Parameters
    ----------
    observer : MLP
        A one-hidden-layer quadratic network.
    moments : sequence of float
        m_1..m_4, as :func:`spectral_moments` gives them.
    n : int
        Points.
    d : int
        Dimension.
    balances : iterable of float
        The gammas.
    generator : int or torch.Generator, default 0
        Seeds the data.
    rcond : float, optional
        As in :func:`alignment_reversing_data`.
    device : torch.device or str, optional
        The device.

    Returns
    -------
    observed, predicted : list of float
    """
    _check_model(observer)
    obs, pred = [], []
    for gamma in balances:
        X, y = alignment_reversing_data(n, d, gamma, rcond=rcond, generator=generator)
        dev = next(observer.parameters()).device if device is None else device
        obs.append(second_derivative_correlation(observer, X.to(dev), y.to(dev)))
        pred.append(predicted_second_derivative_correlation(X, y, moments))
    return obs, pred


def _check_finite_parameters(model):
    """A network with NaN or infinite weights makes NaN features; say so, rather than blame the data later."""
    bad = [name for name, p in model.named_parameters() if not bool(torch.isfinite(p).all())]
    if bad:
        raise ValueError(f"the network's parameters {bad} contain NaN or infinite values (a diverged training run?); "
                         "X is not the problem")
