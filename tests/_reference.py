"""Reference implementations for the tests: kernels from explicit differences, gradients by autograd.

They share no code with the package: distances are computed as |L^T (x - z)| from broadcast differences (exact zeros
at coincident points), and the norm's gradient at 0 is defined as 0, the convention of the closed forms."""
import torch


def safe_norm(V):
    """|v| along the last axis with gradient 0 at v = 0 (instead of NaN)."""
    sq = V.square().sum(-1)
    pos = sq > 0
    return torch.where(pos, torch.where(pos, sq, torch.ones_like(sq)).sqrt(), torch.zeros_like(sq))


def transform(X, M):
    """X @ L with M = L L^T, from the dense M (eigen-decomposition in float64)."""
    if M is None:
        return X
    if M.ndim == 1:
        return X * M.sqrt()
    evals, evecs = torch.linalg.eigh(M)
    return X @ (evecs * evals.clamp_min(0).sqrt())


def kernel_ref(name, Z, X, M=None, bandwidth=1.0, exponent=1.0, degree=2, c=0.0):
    """k_M(z_j, x_i) as an (m, n) matrix, differentiable in Z."""
    Zt, Xt = transform(Z, M), transform(X, M)
    if name in ("polynomial", "quadratic"):
        return (Zt @ Xt.T / bandwidth**2 + c) ** degree
    r = safe_norm(Zt[:, None, :] - Xt[None, :, :])
    if name == "laplace":
        return torch.exp(-((r / bandwidth) ** exponent))
    if name == "gaussian":
        return torch.exp(-r.square() / (2 * bandwidth**2))
    raise ValueError(name)


def predictor_ref(name, X, alpha, M=None, **kw):
    """f(z) = K(z, X) alpha as a function of z (batch)."""
    return lambda Z: kernel_ref(name, Z, X, M, **kw) @ alpha


def jacobian_ref(f, Z):
    """Per-point Jacobians (m, c, d) of a row-wise function by autograd."""
    Z = Z.detach().clone().requires_grad_(True)
    out = f(Z)
    out = out.reshape(Z.shape[0], -1)
    rows = [torch.autograd.grad(out[:, k].sum(), Z, retain_graph=True)[0] for k in range(out.shape[1])]
    return torch.stack(rows, 1)


def agop_ref(f, Z, centre=False):
    J = jacobian_ref(f, Z)
    A = torch.einsum("mcd,mce->de", J, J) / Z.shape[0]
    if centre:
        mean = J.mean(0)
        A = A - mean.T @ mean
    return A


def random_psd(d, rank=None, generator=None, dtype=torch.float64):
    F = torch.randn(d, rank or d, generator=generator, dtype=dtype) / d**0.5
    return F @ F.T + (0 if rank else 0.1 * torch.eye(d, dtype=dtype))
