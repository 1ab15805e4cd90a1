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
    # A point equal to a centre is at distance exactly 0 (the package's convention: coincident pairs add no
    # gradient). Z @ L and X @ L can round the same row differently (the BLAS blocks the two products differently),
    # so compare the raw points, not the transformed ones.
    same = (Z.detach()[:, None, :] == X[None, :, :]).all(-1, keepdim=True)
    r = safe_norm(torch.where(same, torch.zeros((), dtype=Zt.dtype), Zt[:, None, :] - Xt[None, :, :]))
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


def krr_ref(name, X, Y, M=None, reg=0.0, **kw):
    """alpha solving (K_M(X, X) + reg I) alpha = Y, by a dense float64 solve (no Cholesky, no blocks)."""
    K = kernel_ref(name, X, X, M, **kw)
    return torch.linalg.solve(K + reg * torch.eye(X.shape[0], dtype=K.dtype), Y.reshape(X.shape[0], -1))


def psd_power_ref(A, power):
    """A^power of a symmetric PSD matrix, eigenvalues clamped at 0."""
    evals, evecs = torch.linalg.eigh(0.5 * (A + A.T))
    return (evecs * evals.clamp_min(0) ** power) @ evecs.T


def rfm_ref(X, Y, iters, *, bandwidth=10.0, reg=0.0, power=1.0, centre=True, normalize="max"):
    """The RFM loop written out from its definition, in float64 (Laplace kernel, full M, AGOP at the training points):

        alpha_t = (K_{M_t} + reg I)^{-1} Y,  f_t = K_{M_t}(., X) alpha_t,
        M_{t+1} = AGOP(f_t)^power / max_jk |AGOP(f_t)^power|_jk      (normalize="max"; None: no normalisation)

    with the AGOP by autograd of :func:`kernel_ref` (the cusp at a training point gets gradient 0). Returns the lists
    [M_0 = I, ..., M_T] and [alpha_0, ..., alpha_T]."""
    X = X.to(torch.float64)
    Y = Y.to(torch.float64).reshape(X.shape[0], -1)
    M = torch.eye(X.shape[1], dtype=torch.float64)
    Ms, alphas = [M], []
    for t in range(iters + 1):
        alpha = krr_ref("laplace", X, Y, M, reg, bandwidth=bandwidth)
        alphas.append(alpha)
        if t == iters:
            break
        A = psd_power_ref(agop_ref(predictor_ref("laplace", X, alpha, M, bandwidth=bandwidth), X, centre=centre),
                          power)
        M = A / A.abs().max() if normalize == "max" else A
        Ms.append(M)
    return Ms, alphas
