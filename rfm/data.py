"""Synthetic tasks. Offline loaders for real data sets are added by the chapters that use them."""
from __future__ import annotations

import torch

from ._checks import check_number, resolve_dtype
from .utils import make_generator


def product_target(X: torch.Tensor) -> torch.Tensor:
    """y = x1 * x2: its EGOP is E[(x2 e1 + x1 e2)(x2 e1 + x1 e2)^T] = diag(1, 1, 0, ...) for x ~ N(0, I)."""
    return X[:, 0] * X[:, 1]


def chain_monomial(X: torch.Tensor, r: int = 3) -> torch.Tensor:
    """y = sum_{k<r} x_k x_{(k+1) mod r}: a low-rank polynomial depending on the first r coordinates."""
    check_number("r", r, low=2, high=X.shape[1], integer=True)
    idx = torch.arange(r, device=X.device)
    return (X[:, idx] * X[:, (idx + 1) % r]).sum(1)


TARGETS = {"x1x2": product_target, "chain": chain_monomial}


def low_rank_polynomial(n: int, d: int, target="x1x2", *, noise: float = 0.0, generator=0, dtype="float64",
                        **target_kwargs):
    """Inputs x ~ N(0, I_d) and targets y = f*(x) + noise * N(0, 1), for a target depending on few coordinates.

    ``target`` is "x1x2", "chain" (with ``r``) or any callable on an (n, d) tensor. Returns ``(X, y)`` on the CPU."""
    check_number("n", n, low=1, integer=True)
    check_number("d", d, low=1, integer=True)
    check_number("noise", noise, low=0)
    if isinstance(target, str):
        if target not in TARGETS:
            raise ValueError(f"unknown target {target!r}; known targets: {sorted(TARGETS)} (or pass a callable)")
        target = TARGETS[target]
    g = make_generator(generator)
    dtype = resolve_dtype(dtype)
    X = torch.randn(n, d, generator=g, dtype=dtype)
    y = target(X, **target_kwargs)
    if noise:
        y = y + noise * torch.randn(n, generator=g, dtype=dtype)
    return X, y
