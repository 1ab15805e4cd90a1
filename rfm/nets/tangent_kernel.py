r"""The empirical neural tangent kernel of a network, its sharpness, and learning rates as multiples of 2 / lambda.

Everything here uses the squared loss L(w) = (1/2n) sum_i (f(w; x_i) - y_i)^2. With J the n x p parameter Jacobian of
the outputs, the tangent kernel (empirical NTK) is K = J J^T (:func:`empirical_ntk`), and the Gauss-Newton part of
the loss Hessian, J^T J / n, has the same nonzero eigenvalues as K / n. **lambda = lambda_max(K) / n** is the
sharpness (:func:`sharpness`); a model linear in w converges under gradient descent exactly when eta < 2 / lambda
(:func:`lr_for_sharpness` gives eta = c 2 / lambda). The closed-form kernel of the two-layer ReLU network is
:func:`rfm.nets.two_layer.two_layer_ntk`.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call, jacrev, vmap

from .._checks import check_matrix, check_number

__all__ = ["check_module", "empirical_ntk", "lr_for_sharpness", "parameter_jacobian", "residual_in_top_eigenspace",
           "sharpness", "top_ntk_eigen"]


def check_module(model, name="model"):
    """Raise unless ``model`` is a ``torch.nn.Module`` with parameters.

    Parameters
    ----------
    model : object
        The model to check.
    name : str
        Its name, for the error message.

    Returns
    -------
    torch.nn.Module
        ``model``.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"{name} must be a torch.nn.Module (e.g. rfm.nets.MLP), got {type(model).__name__}")
    if not any(True for _ in model.parameters()):
        raise ValueError(f"{name} has no parameters: there is nothing to expand around")
    return model


def _scalar_outputs(model, X):
    with torch.no_grad():
        out = model(X[:1])
    if out.ndim != 2 or out.shape[1] != 1:
        raise ValueError(f"the model returns outputs of shape {tuple(out.shape)} for one input; the empirical NTK "
                         "here is for models with one output, shape (n, 1)")


def parameter_jacobian(model: nn.Module, X) -> torch.Tensor:
    """The (n, p) Jacobian of a one-output ``model``'s outputs at the rows of X with respect to all its parameters
    (in the order of ``model.named_parameters()``), by ``torch.func.jacrev`` and ``vmap``.

    Parameters
    ----------
    model : torch.nn.Module
        A one-output network.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.

    Returns
    -------
    torch.Tensor, shape (n, p)
        p the number of parameters; in the model's dtype and device.
    """
    model = check_module(model)
    p0 = next(model.parameters())
    X = check_matrix(X, "X", dtype=p0.dtype, device=p0.device)
    _scalar_outputs(model, X)
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = dict(model.named_buffers())

    def f(w, x):
        return functional_call(model, (w, buffers), (x[None],)).reshape(())

    jac = vmap(jacrev(f), in_dims=(None, 0))(params, X)
    return torch.cat([j.reshape(X.shape[0], -1) for j in jac.values()], dim=1)


def empirical_ntk(model: nn.Module, X, Z=None) -> torch.Tensor:
    """The tangent kernel K(x_i, z_j) = <grad_w f(x_i), grad_w f(z_j)> of a one-output ``model`` at its current
    parameters, an (n, n) matrix for Z None (Z = X), else (n, n_Z).

    Parameters
    ----------
    model : torch.nn.Module
        A one-output network.
    X : array-like or torch.Tensor, shape (n, d)
        Inputs.
    Z : array-like or torch.Tensor, shape (n_Z, d), optional
        Other inputs (None: X).

    Returns
    -------
    torch.Tensor, shape (n, n) or (n, n_Z)
        In the model's dtype.
    """
    J = parameter_jacobian(model, X)
    return J @ J.T if Z is None else J @ parameter_jacobian(model, Z).T


def _check_kernel(K, name="K"):
    if not isinstance(K, torch.Tensor) or K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be a square (n, n) tensor, got "
                         f"{tuple(K.shape) if isinstance(K, torch.Tensor) else type(K).__name__}")
    if not bool(torch.isfinite(K).all()):
        raise ValueError(f"{name} has NaN or infinite entries")
    return K


def top_ntk_eigen(K: torch.Tensor, k: int = 1):
    """The k largest eigenvalues (descending) and their eigenvectors (columns) of a symmetric kernel matrix K.

    Parameters
    ----------
    K : torch.Tensor, shape (n, n)
        A symmetric kernel matrix.
    k : int, default 1
        How many.

    Returns
    -------
    values : torch.Tensor, shape (k,)
    vectors : torch.Tensor, shape (n, k)
    """
    K = _check_kernel(K)
    check_number("k", k, low=1, high=K.shape[0], integer=True)
    vals, vecs = torch.linalg.eigh(0.5 * (K + K.T))
    return vals.flip(0)[:k], vecs.flip(1)[:, :k]


def sharpness(K: torch.Tensor) -> float:
    """lambda = lambda_max(K) / n: the top eigenvalue of the Gauss-Newton matrix of L = (1/2n) sum r_i^2.

    Parameters
    ----------
    K : torch.Tensor, shape (n, n)
        A symmetric kernel matrix.

    Returns
    -------
    float
    """
    K = _check_kernel(K)
    return float(torch.linalg.eigvalsh(0.5 * (K + K.T))[-1]) / K.shape[0]


def lr_for_sharpness(c: float, lam: float) -> float:
    """The learning rate eta = c * 2 / lam: c < 1 is below the linear model's critical rate 2 / lam.

    Parameters
    ----------
    c : float
        The multiple of the critical rate.
    lam : float
        The sharpness.

    Returns
    -------
    float
    """
    check_number("c", c, low=0, low_inclusive=False)
    check_number("lam", lam, low=0, low_inclusive=False)
    return 2.0 * float(c) / float(lam)


def residual_in_top_eigenspace(K: torch.Tensor, residual, k: int = 1) -> float:
    """The share ||P_k r||^2 / ||r||^2 of the residual r in the span of K's top-k eigenvectors.

    Parameters
    ----------
    K : torch.Tensor, shape (n, n)
        A symmetric kernel matrix.
    residual : array-like, shape (n,)
        The residual r.
    k : int, default 1
        The number of eigenvectors.

    Returns
    -------
    float
        In [0, 1]; 0 for a zero residual.
    """
    K = _check_kernel(K)
    r = torch.as_tensor(residual, dtype=K.dtype, device=K.device).reshape(-1)
    if r.shape[0] != K.shape[0]:
        raise ValueError(f"residual has {r.shape[0]} entries but K is {K.shape[0]} x {K.shape[0]}")
    _, V = top_ntk_eigen(K, k)
    total = float(r @ r)
    return float(((V.T @ r) ** 2).sum()) / total if total > 0 else 0.0
