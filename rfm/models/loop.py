r"""The Recursive Feature Machine loop, once, for every RFM model in the package.

Radhakrishnan, Beaglehole, Pandit & Belkin (Science 2024), for t = 0, 1, ..., iters:

1. solve   f_t = the predictor fitted with the feature matrix M_t          (kernel ridge, min-norm, ...)
2. record  its metrics; keep the best iterate (by a validation score, or the last)
3. AGOP    A_t = AGOP(f_t) (or the FACT, or a linear predictor's w w^T)     (skipped after the last solve)
4. update  M_{t+1} = normalize(A_t^power)

What varies between the models is a *step* object with five methods, the loop's only interface:

* ``solve(M, t) -> (model, record, scratch)`` -- fit f_t for M_t; ``record`` is a dict with ``"iteration": t``;
  ``scratch`` is anything the AGOP may reuse (a kernel matrix), dropped after step 3;
* ``score(record)`` -- the selection score of an iterate (larger is better), or None to keep the last;
* ``stop(model, history, best_iter) -> bool`` -- True ends the loop after this iterate (a callback, early stopping);
* ``agop(model, M, scratch)`` -- the matrix A_t that the update maps to M_{t+1};
* ``update(A, M, t) -> (M_next, stop)`` -- M_{t+1}, and True when the loop cannot go on (a degenerate AGOP).

The steps in the package: the kernel machines of :mod:`rfm.models.estimators` (any kernel, solver and feature
update), ConvRFM's aligned-patch kernel (:mod:`rfm.models.conv`, the patch feature map), lin-RFM
(:mod:`rfm.models.linear`: the minimum-norm linear solve, sparse and completion) and the one-solve transfer
estimators (:mod:`rfm.models.transfer`, ``iters=0``: a feature map or target shift from a source model).
"""
from __future__ import annotations

import time
from typing import Any, NamedTuple

from tqdm import tqdm

__all__ = ["LoopResult", "rfm_loop"]


class LoopResult(NamedTuple):
    """What :func:`rfm_loop` returns.

    Parameters
    ----------
    model : object
        The kept iterate: the best by the step's score, else the last.
    best_iter : int
        Its iteration.
    history : list of dict
        One record per solve, each with ``"iteration"`` and ``"time_s"`` (seconds of its solve and update).
    M : object
        The last feature matrix (M_{t+1} after the last update, or the M of the last solve).
    """
    model: Any
    best_iter: int
    history: list
    M: Any


def rfm_loop(step, M, iters: int, *, verbose: bool = False, desc: str = "RFM") -> LoopResult:
    """Run the RFM loop: ``iters`` feature updates, ``iters + 1`` solves.

    Parameters
    ----------
    step : object
        The model's solve, score, stop, AGOP and update (see the module).
    M : object
        M_0, in whatever form the step takes (a :class:`rfm.FeatureMatrix`, a diagonal, a metric).
    iters : int
        Number of feature updates (>= 0); 0 is a single solve with M_0.
    verbose : bool, default False
        Show a progress bar.
    desc : str, default "RFM"
        The progress bar's label.

    Returns
    -------
    LoopResult
        The kept iterate, its iteration, the history and the last M.
    """
    history, best, model = [], None, None                 # best: (score, iteration, model)
    bar = tqdm(total=iters + 1, desc=desc, disable=not verbose, leave=False)
    for t in range(iters + 1):
        t0 = time.perf_counter()
        model, record, scratch = step.solve(M, t)                           # 1. solve with M_t
        score = step.score(record)                                          # 2. record, keep the best iterate
        if score is not None and (best is None or score > best[0]):
            best = (score, t, model)
        stop = step.stop(model, history + [record], t if best is None else best[1])
        if t < iters and not stop:
            A = step.agop(model, M, scratch)                                # 3. AGOP (or FACT) of f_t
            M, stop = step.update(A, M, t)                                  # 4. M_{t+1} = normalize(A^power)
        del scratch                                                         # free it before the next solve
        record["time_s"] = time.perf_counter() - t0
        history.append(record)
        bar.update(1)
        if stop:
            break
    bar.close()
    if best is None:
        return LoopResult(model, history[-1]["iteration"], history, M)
    return LoopResult(best[2], best[1], history, M)
