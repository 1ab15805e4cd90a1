r"""The Features at Convergence Theorem (FACT) for kernel machines, and the FACT-RFM feature updates.

**The theorem** (Boix-Adsera, Mallinar, Simon & Belkin, arXiv 2507.05644). If a model uses a weight matrix W only
through the product W h(x) and its parameters are a critical point of L_lambda = (1/n) sum_i l_i + (lambda/2)
‖theta‖^2 with lambda > 0, then

    W^T W = FACT := -(1 / (n lambda)) sum_i grad_h l_i  h(x_i)^T,

with grad_h l_i the gradient of the i-th loss with respect to the layer input, through W only (proof: left-multiply
grad_W L_lambda = lambda W + (1/n) sum_i (grad_{Wh} l_i) h_i^T = 0 by W^T). The network version is
:mod:`rfm.nets.fact`.

**A kernel version (our reconstruction).** For the kernel machine f(z) = sum_j alpha_j k(W z, W x_j) with M = W^T W,
take W as the first layer, h = x, the centres held fixed (the convention of the AGOP), and the square loss
l_i = ‖f(x_i) - y_i‖^2 / 2. Kernel ridge regression with ridge ``reg`` has residuals f(x_i) - y_i = -reg alpha_i,
so grad_x l_i = -reg sum_c alpha_ic grad f_c(x_i) and the FACT is, up to the positive factor reg / lambda that the
kernel analogy does not fix,

    F = (1/n) sum_i sum_c alpha_ic grad_x f_c(x_i) x_i^T                       (d x d, in general not symmetric).

:func:`kernel_fact` computes it in closed form: sum_c alpha_ic grad f_c(x_i) is the vector-Jacobian product of the
predictor with cotangent alpha, which :class:`rfm.KernelMachine` evaluates by its closed-form backward pass. For an
inner-product kernel k(x^T M z) it is F = (1/n) sum_ij k'(x_i^T M x_j) (alpha_i . alpha_j) M x_j x_i^T, the form with
the weights k'(x_i^T M x_j) where the AGOP has (1/n) sum_l k'(x_l^T M x_i) k'(x_l^T M x_j).

**FACT-RFM updates** (exponents chosen so that a fixed point satisfies W^T W = FACT):

* ``"fact"``: M_{t+1} = (F_t F_t^T)^{1/2}, i.e. W_{t+1} = (F F^T)^{1/4};
* ``"fact_geometric"``: M_{t+1} = (F_t M_t^2 F_t^T)^{1/4}, the geometric-mean variant.

Both are computed from one SVD (:func:`fact_feature_matrix`): with F = U S V^T, (F F^T)^{1/2} = U S U^T; with
G = F M = U S V^T, (G G^T)^{1/4} = U S^{1/2} U^T. If F = M (the FACT holds exactly) both return M. The estimators
take them as ``update="fact"`` / ``"fact_geometric"`` (:class:`rfm.RFMRegressor`), followed by the same
normalisation as the AGOP update.
"""
from __future__ import annotations

import torch

from .._checks import check_choice, check_matrix
from .machine import KernelMachine

#: The feature updates of the RFM estimators (``update=``); a callable is accepted too.
UPDATES = ("agop", "fact", "fact_geometric")


def kernel_fact(machine: KernelMachine, *, pairs=None) -> torch.Tensor:
    """The kernel FACT F = (1/n) sum_i sum_c alpha_ic grad f_c(x_i) x_i^T of a fitted kernel machine, summed over its
    centres (the training points), float64 (d, d); not symmetric in general.

    ``pairs`` are the coincident (centre, centre) pairs when known (:func:`rfm.core.coincident.find_pairs`; found by
    comparing rows otherwise): the kernel's gradient at its own centre is 0 there, as in the AGOP.

    Parameters
    ----------
    machine : KernelMachine
        The fitted kernel machine.
    pairs : tuple of index tensors, optional
        Coincident (centre, centre) pairs.

    Returns
    -------
    torch.Tensor, float64, shape (d, d)

    Raises
    ------
    TypeError
        If ``machine`` is not a :class:`rfm.KernelMachine`.

    Examples
    --------
    >>> import torch, rfm
    >>> from rfm.core.fact import kernel_fact
    >>> X = torch.randn(20, 3, dtype=torch.float64)
    >>> f = rfm.KernelMachine(rfm.GaussianKernel(2.0), X, torch.randn(20, dtype=torch.float64))
    >>> kernel_fact(f).shape
    torch.Size([3, 3])
    """
    if not isinstance(machine, KernelMachine):
        raise TypeError(f"machine must be a rfm.KernelMachine (e.g. model.machine_ of a fitted RFM), got "
                        f"{type(machine).__name__}")
    X = machine.centers.detach()
    Z = X.clone().requires_grad_(True)
    with torch.enable_grad():
        out = machine.predict(Z, pairs=pairs)
        (B,) = torch.autograd.grad(out, Z, grad_outputs=machine.alpha.detach().to(out.dtype))
    X64 = X.to(torch.float64)
    return B.detach().to(torch.float64).T @ X64 / X.shape[0]


def fact_feature_matrix(F, M=None, *, geometric: bool = False) -> torch.Tensor:
    """The FACT-RFM target matrix, symmetric PSD, float64 (d, d): (F F^T)^{1/2}, or with ``geometric``
    (F M^2 F^T)^{1/4} (M symmetric (d, d) required then).

    Parameters
    ----------
    F : array-like or torch.Tensor, shape (d, d)
        The FACT (:func:`kernel_fact`).
    M : array-like or torch.Tensor, shape (d, d), optional
        The current feature matrix (symmetrised here); required with ``geometric``.
    geometric : bool, default False
        Use the geometric form (F M^2 F^T)^{1/4}.

    Returns
    -------
    torch.Tensor, float64, shape (d, d)

    Raises
    ------
    ValueError
        If F is not square, or ``geometric`` is set without an M of F's shape.

    Examples
    --------
    >>> import torch
    >>> from rfm.core.fact import fact_feature_matrix
    >>> M = torch.tensor([[2.0, 1.0], [1.0, 2.0]], dtype=torch.float64)
    >>> torch.allclose(fact_feature_matrix(M), M), torch.allclose(fact_feature_matrix(M, M, geometric=True), M)
    (True, True)
    """
    F = check_matrix(F, "F").to(torch.float64)
    if F.shape[0] != F.shape[1]:
        raise ValueError(f"F must be a square (d, d) matrix, got shape {tuple(F.shape)}")
    if geometric:
        if M is None:
            raise ValueError("geometric=True needs the current feature matrix M")
        M = check_matrix(M, "M").to(device=F.device, dtype=torch.float64)
        if M.shape != F.shape:
            raise ValueError(f"M must have the shape of F {tuple(F.shape)}, got {tuple(M.shape)}")
        F = F @ (M + M.T) / 2
    U, S, _ = torch.linalg.svd(F)
    S = S.sqrt() if geometric else S
    out = (U * S) @ U.T
    return (out + out.T) / 2


def fact_update_target(update: str, machine: KernelMachine, M, *, pairs=None) -> torch.Tensor:
    """The matrix the ``"fact"`` or ``"fact_geometric"`` update maps to M (before normalisation): float64 (d, d).

    Parameters
    ----------
    update : {"fact", "fact_geometric"}
        The update.
    machine : KernelMachine
        The fitted kernel machine of this iteration.
    M : torch.Tensor, shape (d, d)
        The current feature matrix (used by "fact_geometric").
    pairs : tuple of index tensors, optional
        Coincident (centre, centre) pairs.

    Returns
    -------
    torch.Tensor, float64, shape (d, d)
        :func:`fact_feature_matrix` of :func:`kernel_fact`.
    """
    check_choice("update", update, UPDATES[1:])
    F = kernel_fact(machine, pairs=pairs)
    if update == "fact":
        return fact_feature_matrix(F)
    return fact_feature_matrix(F, M, geometric=True)
