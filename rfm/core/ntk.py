r"""The neural tangent kernel (NTK) of a fully connected ReLU network, in closed form (the arc-cosine recursion).

The network has ``depth`` = L hidden layers of width m -> infinity, in the NTK parametrisation, with weights and
biases N(0, 1) at initialisation::

    f^(1)(x)   = W^(1) x / bandwidth + bias * b^(1)
    f^(h+1)(x) = W^(h+1) sqrt(2 / m) relu(f^(h)(x)) + bias * b^(h+1),    h = 1, ..., L,    f = f^(L+1)

(``bias = 0``: no biases). With S_1(x, z) = <x, z> / bandwidth^2 + bias^2, the covariance of the pre-activations,
the recursion over h = 1, ..., L is (theta_h is the angle between x and z under S_h)::

    cos theta_h     = S_h(x, z) / sqrt(S_h(x, x) S_h(z, z))      clamped to [-1, 1], set to +-1 within 4 machine
                                                                   epsilons of it (arccos cannot resolve the angle)
    S_{h+1}(x, z)   = sqrt(S_h(x, x) S_h(z, z)) (sin theta_h + (pi - theta_h) cos theta_h) / pi + bias^2
    Sdot_h(x, z)    = (pi - theta_h) / pi
    Theta_1 = S_1,    Theta_{h+1} = Theta_h Sdot_h + S_{h+1},    Theta = Theta_{L+1}

(the arc-cosine kernels of degree 1 and 0 of Cho and Saul 2009, times the ReLU's normalising factor 2; Jacot et
al. 2018; Arora et al. 2019, eq. (4)-(5)). ``depth = L`` counts hidden layers: ``depth=1`` is a network with one
hidden layer. At finite width the empirical NTK (the sum over parameters of df(x)/dp df(z)/dp) fluctuates around
Theta by O(1/sqrt(m)); ``tests/test_ntk.py`` tests this against torch autograd in float64.

Without biases the diagonal is preserved, S_h(x, x) = ``||x||^2`` / bandwidth^2 at every layer, and
Theta(x, x) = (L + 1) ``||x||^2`` / bandwidth^2.

The kernel needs the norms of both points besides their inner product, so it is not a function of the block of
inner products alone: :func:`rfm.core.kernels.kernel_blocks` hands it the squared norms (``uses_norms = True``).
It is a fixed kernel (a baseline): its input gradients, hence the AGOP and RFM iterations with it, are not
implemented. Use float64 for very deep recursions (hundreds of layers and more), where cosines approach 1.
"""
from __future__ import annotations

import math

import torch

from .._checks import check_number
from .kernels import KERNELS, Kernel


def relu_dual_(S: torch.Tensor, norm: torch.Tensor) -> torch.Tensor:
    """One ReLU layer of the recursion, in place: the covariances after the activation sqrt(2) relu, and the
    derivative kernel.

    ``S`` holds pre-activation covariances S(x, z) and ``norm`` (broadcastable to S) sqrt(S(x, x) S(z, z)). S is
    overwritten with norm (sin theta + (pi - theta) cos theta) / pi (no bias added) and Sdot = (pi - theta) / pi is
    returned, theta the angle arccos(S / norm), clamped and snapped to +-1 within 4 machine epsilons. Shared by the
    fully connected NTK (:func:`relu_ntk`) and the convolutional one (:mod:`rfm.core.cntk`).

    Parameters
    ----------
    S : torch.Tensor
        Pre-activation covariances (overwritten).
    norm : torch.Tensor
        sqrt(S(x, x) S(z, z)), broadcastable to S.

    Returns
    -------
    torch.Tensor
        Sdot, the shape of S.
    """
    tiny, snap = torch.finfo(S.dtype).tiny, 4 * torch.finfo(S.dtype).eps
    norm = norm.expand_as(S)
    cos = torch.div(S, norm.clamp_min(tiny)).clamp_(-1.0, 1.0)
    # within round-off of +-1 the angle is not resolved (arccos(1 - eps) = sqrt(2 eps)): snap, so that equal and
    # opposite points get exact values
    cos.masked_fill_(cos > 1.0 - snap, 1.0).masked_fill_(cos < snap - 1.0, -1.0)
    angle = torch.arccos(cos)
    sdot = torch.sub(math.pi, angle).div_(math.pi)        # (pi - theta) / pi
    # norm (sin + (pi - theta) cos) / pi, in S's buffer
    S.copy_(angle.sin_()).add_(cos.mul_(sdot).mul_(math.pi)).mul_(norm).div_(math.pi)
    return sdot


def relu_ntk(S: torch.Tensor, sxx: torch.Tensor, szz: torch.Tensor, depth: int, bias: float = 0.0) -> torch.Tensor:
    """The ReLU NTK from the first layer's pre-activation covariances.

    ``S`` (m, n) holds S_1(z_j, x_i) = <z_j, x_i> / bandwidth^2 + bias^2; ``szz`` (m,) and ``sxx`` (n,) the
    diagonal values S_1(z_j, z_j) and S_1(x_i, x_i). ``S`` is overwritten (it becomes Theta, which is returned).
    Works for any depth >= 0 (depth 0: the linear kernel S_1 itself).

    Parameters
    ----------
    S : torch.Tensor, shape (m, n)
        First-layer covariances (overwritten).
    sxx : torch.Tensor, shape (n,)
        S_1(x_i, x_i).
    szz : torch.Tensor, shape (m,)
        S_1(z_j, z_j).
    depth : int
        Hidden layers (>= 0).
    bias : float, default 0.0
        The bias factor (its square is added at each layer).

    Returns
    -------
    torch.Tensor, shape (m, n)
        Theta(z_j, x_i), in ``S``'s buffer and dtype.
    """
    b2 = float(bias) ** 2
    szz, sxx = szz[:, None].clone(), sxx[None, :].clone()
    theta = S.clone()                                     # Theta_1 = S_1
    for _ in range(depth):
        sdot = relu_dual_(S, (szz * sxx).sqrt_())         # S <- S_{h+1} - bias^2, sdot = Sdot_h
        S.add_(b2)
        theta.mul_(sdot).add_(S)                          # Theta_{h+1} = Theta_h Sdot_h + S_{h+1}
        if b2:                                            # diagonals: S(x, x) + bias^2 (the ReLU keeps the norm)
            szz.add_(b2)
            sxx.add_(b2)
    return S.copy_(theta)


class NTKKernel(Kernel):
    r"""The NTK of a fully connected ReLU network with ``depth`` hidden layers (closed form, see :mod:`rfm.core.ntk`).

    Parameters
    ----------
    depth : int, default 1
        Hidden layers L >= 1 (``depth=2``: the two-hidden-layer networks of the RFM paper's image experiments).
    bias : float, default 0.0
        Standard deviation factor of the biases (0: no biases).
    bandwidth : float, default 1.0
        Inputs enter as x / bandwidth (``bandwidth = sqrt(d)`` is a first layer W x / sqrt(d)).

    A feature matrix M enters as for the other kernels, through x -> L^T x with M = L L^T (the identity by
    default). The kernel is a fixed baseline: it has no closed-form input gradient here, so ``KernelMachine.agop``
    and RFM iterations (``iters > 0``) with it raise ``NotImplementedError``.

    Examples
    --------
    >>> import torch
    >>> from rfm import NTKKernel
    >>> X = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    >>> NTKKernel(depth=1)(X)  # orthogonal unit inputs: 1/pi off the diagonal, depth + 1 on it
    tensor([[2.0000, 0.3183],
            [0.3183, 2.0000]], dtype=torch.float64)
    """

    name = "ntk"
    radial = False
    uses_norms = True
    buffers = 6  # n-wide numbers per row of a block: B and the recursion's five temporaries

    def __init__(self, depth: int = 1, bias: float = 0.0, bandwidth: float = 1.0):
        super().__init__(bandwidth)
        self.depth = int(check_number("depth", depth, low=1, integer=True))
        self.bias = float(check_number("bias", bias, low=0))

    def norm_values_(self, B, zz, xx):
        """Kernel values from the block B (m, n) of inner products <z~_j, x~_i> and the squared norms zz (m,),
        xx (n,) of the transformed points; B is overwritten and returned.

        Parameters
        ----------
        B : torch.Tensor, shape (m, n)
            Inner products (overwritten).
        zz : torch.Tensor, shape (m,)
            Squared norms of the rows' points.
        xx : torch.Tensor, shape (n,)
            Squared norms of the columns' points.

        Returns
        -------
        torch.Tensor, shape (m, n)
            The NTK values, in B.
        """
        s = 1.0 / self.bandwidth**2
        b2 = self.bias**2
        S = B.mul_(s).add_(b2)
        return relu_ntk(S, torch.mul(xx, s).add_(b2), torch.mul(zz, s).add_(b2), self.depth, self.bias)

    def values_(self, B):
        """Not available for the NTK: its values need the points' norms (:meth:`norm_values_`).

        Parameters
        ----------
        B : torch.Tensor
            A block of inner products.

        Raises
        ------
        NotImplementedError
            Always.
        """
        raise NotImplementedError("the NTK kernel needs the norms of the points, not only their inner products: "
                                  "its values come from norm_values_(B, zz, xx) (kernel_blocks passes them)")

    def diagonal_values(self, sq_norms):
        # cos = 1 at every layer: S_h(x, x) = |x|^2 / L^2 + h bias^2, Sdot_h = 1, Theta(x, x) = sum_h S_h(x, x)
        """k(x, x) for points with squared (transformed) norms ``sq_norms``, as a new tensor.

        At every layer cos = 1, so ``S_h(x, x) = |x|^2 / bandwidth^2 + h bias^2`` and ``Theta(x, x) = sum_h S_h(x, x)``.

        Parameters
        ----------
        sq_norms : torch.Tensor, shape (n,)
            Squared norms.

        Returns
        -------
        torch.Tensor, shape (n,)
        """
        s, b2, L = 1.0 / self.bandwidth**2, self.bias**2, self.depth
        return torch.mul(sq_norms, s * (L + 1)).add_(b2 * (L + 1) * (L + 2) / 2)

    def weights_(self, B):
        """Not available: the NTK is a fixed baseline kernel, without closed-form input gradients.

        Parameters
        ----------
        B : torch.Tensor
            A block of inner products.

        Raises
        ------
        NotImplementedError
            Always (hence the AGOP and RFM iterations with ``iters > 0`` raise).
        """
        raise NotImplementedError("NTKKernel is a fixed baseline kernel: its input gradients (hence the AGOP and RFM "
                                  "iterations, iters > 0) are not implemented")


KERNELS["ntk"] = NTKKernel
