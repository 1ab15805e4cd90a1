r"""Training dynamics beyond the kernel regime: linearised and quadratic models of any network, loss spikes.

Everything here uses the squared loss L(w) = (1/2n) sum_i (f(w; x_i) - y_i)^2 and full-batch gradient descent
w <- w - eta grad L(w). Zhu, Liu, Radhakrishnan & Belkin (ICLR 2024) write L = (1/2) sum_i r_i^2 without the 1/n;
their sharpness lambda and learning rate eta differ from ours by the factor n, and the multiple c in
eta = c 2 / lambda is the same.

**Linearised and quadratic models** of any ``torch.nn.Module`` f with parameters w_0 (:class:`LinearizedModel`,
:class:`QuadraticModel`)::

    f_lin(w)  = f(w_0) + J(w_0) (w - w_0)
    f_quad(w) = f_lin(w) + (1/2) (w - w_0)^T H_f(w_0) (w - w_0)       (the neural quadratic model, NQM)

built from forward-mode derivatives (``torch.func.jvp``: J Delta is one jvp, Delta^T H Delta a jvp of a jvp),
so they never form J or H. Both are ``nn.Module`` s whose parameters are w (starting at w_0): train them like the
network (e.g. with :func:`rfm.nets.optim.train_full_batch`).

**Spikes.** :func:`rfm.nets.curves.count_spikes` counts loss spikes by a fixed rule (see there), for catapults in GD
and SGD.

The empirical NTK, the sharpness lambda = lambda_max(K) / n and the learning rates c 2 / lambda are in
:mod:`rfm.nets.tangent_kernel`; the closed-form two-layer ReLU network of Zhu et al. (outputs, gradients, NTK, GD,
SGD, AGOP of the network, its linearisation and its NQM) in :mod:`rfm.nets.two_layer`. Their names are importable
from here too, as before.
"""
from __future__ import annotations

import copy

import torch
from torch import nn
from torch.func import functional_call, jvp

# the empirical NTK, the two-layer fast path and the spike counter have their own modules; their names stay
# importable from here
from .curves import count_spikes
from .tangent_kernel import (
    check_module,
    empirical_ntk,
    lr_for_sharpness,
    parameter_jacobian,
    residual_in_top_eigenspace,
    sharpness,
    top_ntk_eigen,
)
from .two_layer import KINDS, two_layer_gd, two_layer_gradients, two_layer_init, two_layer_ntk, two_layer_outputs

__all__ = ["KINDS", "LinearizedModel", "QuadraticModel", "count_spikes", "empirical_ntk", "lr_for_sharpness",
           "parameter_jacobian", "residual_in_top_eigenspace", "sharpness", "top_ntk_eigen", "two_layer_gd",
           "two_layer_gradients", "two_layer_init", "two_layer_ntk", "two_layer_outputs"]



# ----------------------------------------------------------------------------------------------------------------
# Generic linearised and quadratic models of any torch.nn.Module


class _TaylorModel(nn.Module):
    """Shared set-up: a frozen copy of the network, its initial parameters w_0 and trainable parameters w."""

    def __init__(self, model: nn.Module):
        super().__init__()
        model = check_module(model)
        base = copy.deepcopy(model)
        for p in base.parameters():
            p.requires_grad_(False)
        self._base = (base,)            # a tuple: not registered, so its parameters are not the model's
        self._names = [name for name, _ in model.named_parameters()]
        self.params = nn.ParameterList([nn.Parameter(p.detach().clone()) for _, p in model.named_parameters()])
        for i, (_, p) in enumerate(model.named_parameters()):
            self.register_buffer(f"w0_{i}", p.detach().clone())

    def _w0(self) -> dict:
        return {name: getattr(self, f"w0_{i}") for i, name in enumerate(self._names)}

    def _delta(self) -> dict:
        return {name: p - getattr(self, f"w0_{i}") for i, (name, p) in enumerate(zip(self._names, self.params))}

    def _f(self, x):
        base = self._base[0]
        return lambda w: functional_call(base, w, (x,))


class LinearizedModel(_TaylorModel):
    """The linearisation f_lin(w) = f(w_0) + J(w_0)(w - w_0) of ``model`` around its current parameters w_0.

    The parameters of this module are w (a copy of w_0 at construction; ``model`` itself is not changed). Its
    tangent kernel is the network's at initialisation, at every w.

    Parameters
    ----------
    model : torch.nn.Module
        The network (copied; not changed).

    Examples
    --------
    >>> import torch
    >>> from rfm.nets import MLP
    >>> from rfm.nets.dynamics import LinearizedModel
    >>> net = MLP(3, [8], dtype="float64")
    >>> lin = LinearizedModel(net)
    >>> X = torch.randn(4, 3, dtype=torch.float64)
    >>> bool(torch.allclose(lin(X), net(X)))      # equal at w = w_0
    True
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """f(w_0; x) + J(w_0; x)(w - w_0), by one forward-mode derivative.

        Parameters
        ----------
        x : torch.Tensor
            A batch of inputs, as the network takes them.

        Returns
        -------
        torch.Tensor
            The model's output, shaped as the network's.
        """
        f0, df = jvp(self._f(x), (self._w0(),), (self._delta(),))
        return f0 + df


class QuadraticModel(_TaylorModel):
    """The neural quadratic model f_quad(w) = f(w_0) + J(w_0)(w - w_0) + (1/2)(w - w_0)^T H_f(w_0)(w - w_0).

    The second-order Taylor expansion of ``model`` in its parameters around their current values w_0 (Zhu, Liu,
    Radhakrishnan & Belkin, ICLR 2024). The Hessian term is a forward-mode derivative of a forward-mode
    derivative (two nested ``torch.func.jvp``); neither J nor H is formed. A network that is itself quadratic in
    its parameters (a two-layer network with a linear activation) equals its NQM at every w.

    Parameters
    ----------
    model : torch.nn.Module
        The network (copied; not changed).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """f(w_0; x) + J(w_0; x) Delta + (1/2) Delta^T H(w_0; x) Delta, Delta = w - w_0.

        Parameters
        ----------
        x : torch.Tensor
            A batch of inputs, as the network takes them.

        Returns
        -------
        torch.Tensor
            The model's output, shaped as the network's.
        """
        f, w0, delta = self._f(x), self._w0(), self._delta()

        def directional(w):              # J(w) Delta
            return jvp(f, (w,), (delta,))[1]

        with torch.no_grad():
            f0 = f(w0)
        jd, hdd = jvp(directional, (w0,), (delta,))   # J(w_0) Delta and Delta^T H(w_0) Delta
        return f0 + jd + 0.5 * hdd
