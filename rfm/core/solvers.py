r"""The solver strategy the RFM loop calls: a name or an object with ``solve(kernel, Xt, Y, reg, *, pairs,
mem_bytes)``.

The predictor is f(z) = sum_i alpha_i k_M(z, x_i). A *solver* (:func:`get_solver`) is what an estimator calls once per
RFM iteration: it receives the kernel and the transformed training points and returns a :class:`SolveResult`, so
that a solver that never forms K (an iterative one) slots in beside the direct ones. The solvers themselves live in
:mod:`rfm.core.direct` (Cholesky, LU, least squares), :mod:`rfm.core.cg` (preconditioned conjugate gradients),
:mod:`rfm.core.eigenpro` (EigenPro 2 and 3) and :mod:`rfm.core.auto` (the choice by size and memory); this module
names them. :func:`solve_krr`, :class:`DirectSolver` and :class:`SolveResult` are re-exported from
:mod:`rfm.core.direct`.
"""
from __future__ import annotations

from .auto import AutoSolver
from .cg import CGSolver
from .direct import DIRECT_METHODS, DirectSolver, SolveResult, solve_krr
from .eigenpro import EigenPro2Solver, EigenPro3Solver

__all__ = ["DIRECT_METHODS", "SOLVERS", "DirectSolver", "SolveResult", "get_solver", "solve_krr"]

#: The solvers by name; each entry makes a fresh solver with its defaults.
SOLVERS = {
    "auto": AutoSolver,
    "cholesky": lambda: DirectSolver("cholesky"),
    "lu": lambda: DirectSolver("lu"),
    "lstsq": lambda: DirectSolver("lstsq"),
    "cg": CGSolver,
    "eigenpro2": EigenPro2Solver,
    "eigenpro3": EigenPro3Solver,
}


def get_solver(solver="auto"):
    """A solver from its name or an object with a ``solve(kernel, Xt, Y, reg, *, pairs, mem_bytes)`` method.

    ``"auto"`` (:class:`rfm.core.auto.AutoSolver`) is the exact Cholesky solve for small problems and
    preconditioned conjugate gradients above a crossover size; ``"cholesky"``, ``"lu"`` and ``"lstsq"`` are exact
    solves starting from that method; ``"cg"`` is :class:`rfm.core.cg.CGSolver` with its defaults (pass a
    ``CGSolver(tol=..., rank=...)`` object for other settings); ``"eigenpro2"`` and ``"eigenpro3"`` are
    :class:`rfm.core.eigenpro.EigenPro2Solver` and :class:`rfm.core.eigenpro.EigenPro3Solver` with their defaults.

    Parameters
    ----------
    solver : str or object, default "auto"
        A name of ``SOLVERS``, or a solver object.

    Returns
    -------
    object
        A new solver for a name, else ``solver`` itself.

    Raises
    ------
    ValueError
        If the name is unknown.
    TypeError
        If an object has no ``solve`` method.
    """
    if isinstance(solver, str):
        if solver not in SOLVERS:
            raise ValueError(f"unknown solver {solver!r}; known solvers: {sorted(SOLVERS)}, or an object with a "
                             "solve(kernel, Xt, Y, reg, *, pairs, mem_bytes) method")
        return SOLVERS[solver]()
    if not callable(getattr(solver, "solve", None)):
        raise TypeError(f"solver must be a name ({sorted(SOLVERS)}) or an object with a solve(...) method, "
                        f"got {solver!r}")
    return solver
