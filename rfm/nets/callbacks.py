"""Training callbacks: progress recorders called after each step of a fit, ``callback(model, record)``.

* :class:`NetworkProgress` -- for :func:`rfm.nets.train` of a network on modular arithmetic: accuracies, losses,
  the neural feature matrix and the AGOP at the records;
* :class:`GrokkingProgress` -- for :class:`rfm.RFMClassifier` (or :class:`rfm.RFMRegressor`) on modular
  arithmetic: the test measures and the circulant deviation of every M.

Both keep their records in ``records`` (a list of dicts) and read one column with ``column(key)``. The measures are
those of :mod:`rfm.data.modular`; the network of the grokking paper is :func:`rfm.nets.mlp.quadratic_net`.
"""
from __future__ import annotations

import time

import torch

from .._checks import check_number
from ..data.modular import (ModularData, agop_alignment, block_circulant_deviation, correct_class_mse,
                            off_diagonal_block)
from .mlp import MLP, layer_agop, nfm

__all__ = ["GrokkingProgress", "NetworkProgress"]


def _check_data(data) -> ModularData:
    if not isinstance(data, ModularData):
        raise TypeError(f"data must be a ModularData (from rfm.data.modular.modular_arithmetic(p, operation)), got "
                        f"{type(data).__name__}")
    return data


class NetworkProgress:
    """A ``callback(model, record)`` for :func:`rfm.nets.train` of a network on ``data``: at every record it
    stores {"epoch", "train_acc", "train_mse", "test_acc", "test_mse", "test_correct_mse", "time_s"} of the whole
    training and test sets (MSE as torch's mean over all entries, accuracy of the argmax, :func:`correct_class_mse`),
    and every ``nfm_every`` epochs the neural feature matrix W1^T W1 (``"nfm"``, float64 on the CPU) and, with
    ``agop=True``, the network's AGOP with respect to its input at the training inputs (``"agop"``,
    :func:`rfm.nets.layer_agop`, uncentred). ``time_s`` is the wall time since the previous record
    (0 for the first). With ``stop_at_test_acc`` it returns True, which stops training, after the first record
    whose test accuracy reaches it (that record always gets its NFM). The test set is only measured, never
    trained on."""

    def __init__(self, data: ModularData, *, nfm_every: int = 1, stop_at_test_acc: float | None = None,
                 agop: bool = False):
        self.data = _check_data(data)
        if not isinstance(agop, bool):
            raise TypeError(f"agop must be True or False, got {agop!r}")
        self.agop = agop
        self.nfm_every = int(check_number("nfm_every", nfm_every, low=1, integer=True))
        if stop_at_test_acc is not None:
            check_number("stop_at_test_acc", stop_at_test_acc, low=0, high=1)
        self.stop_at_test_acc = stop_at_test_acc
        self.records = []
        self._tensors = None
        self._last = None

    def _on(self, param):
        if self._tensors is None or self._tensors[0].device != param.device or self._tensors[0].dtype != param.dtype:
            d = self.data
            self._tensors = tuple(t.to(param.device, param.dtype) for t in (d.X_train, d.Y_train, d.X_test,
                                                                             d.Y_test))
        return self._tensors

    @staticmethod
    def _eval(model, X, Y):
        out = model(X)
        if out.ndim != 2 or out.shape != Y.shape:
            raise ValueError(f"the model returns outputs of shape {tuple(out.shape)} for {tuple(X.shape)} inputs, "
                             f"but the targets have shape {tuple(Y.shape)}; build it with quadratic_net(data.p)")
        return (float((out.argmax(1) == Y.argmax(1)).double().mean()), float((out - Y).square().mean()),
                correct_class_mse(out, Y))

    def __call__(self, model, record) -> bool:
        p = self.data.p
        if isinstance(model, MLP) and (model.layers[0].in_features, model.layers[-1].out_features) != (2 * p, p):
            raise ValueError(f"the network maps R^{model.layers[0].in_features} -> R^{model.layers[-1].out_features}"
                             f", but the data with p = {p} needs R^{2 * p} -> R^{p}; build it with "
                             "quadratic_net(data.p)")
        if not isinstance(record, dict) or "epoch" not in record:
            raise TypeError("NetworkProgress is called by rfm.nets.train as callback(model, record), with a record "
                            "dict holding 'epoch'")
        now = time.perf_counter()
        seconds = 0.0 if self._last is None else now - self._last
        Xtr, Ytr, Xte, Yte = self._on(next(model.parameters()))
        with torch.no_grad():
            tr_acc, tr_mse, _ = self._eval(model, Xtr, Ytr)
            te_acc, te_mse, te_correct = self._eval(model, Xte, Yte)
        epoch = int(record["epoch"])
        rec = {"epoch": epoch, "train_acc": tr_acc, "train_mse": tr_mse, "test_acc": te_acc, "test_mse": te_mse,
               "test_correct_mse": te_correct, "time_s": seconds}
        stop = self.stop_at_test_acc is not None and te_acc >= self.stop_at_test_acc
        if epoch % self.nfm_every == 0 or stop:
            rec["nfm"] = nfm(model, 0).cpu()
            if self.agop:
                rec["agop"] = layer_agop(model, Xtr, 0).cpu()
        self.records.append(rec)
        self._last = time.perf_counter()
        return stop

    def column(self, key):
        return [r[key] for r in self.records]


class GrokkingProgress:
    """A ``callback(model, record)`` for :class:`rfm.RFMClassifier` (or :class:`rfm.RFMRegressor` on one-hot
    targets) fitted on ``data``: after each solve it records, next to the estimator's own record,

    * ``test_acc``, ``test_mse``, ``test_correct_mse`` -- accuracy, MSE and :func:`correct_class_mse` of the current
      predictor on the held-out pairs (recorded only: the test set is never passed to ``fit``, so it selects
      nothing);
    * ``train_mse_measured``, ``train_residual`` -- mean squared and largest error of the predictor evaluated
      on the training inputs (the estimator's ``train_mse`` is derived from the solve, ``Y - reg * alpha``);
    * ``circulant_deviation`` -- :func:`block_circulant_deviation` of the M used in this solve;
    * ``M`` -- that M.

    :meth:`alignment` then gives the AGOP alignment of every M with a reference (default: the last one)."""

    def __init__(self, data: ModularData):
        self.data = _check_data(data)
        self.records = []

    def _outputs(self, model, X):
        f = model.decision_function if hasattr(model, "decision_function") else model.predict
        return torch.as_tensor(f(X)).detach().cpu().to(torch.float64).reshape(len(X), -1)

    def __call__(self, model, record):
        d = self.data
        test = self._outputs(model, d.X_test)
        train = self._outputs(model, d.X_train)
        if test.shape[1] != d.p:
            raise ValueError(f"the model predicts {test.shape[1]} outputs, not p = {d.p} (a class missing from "
                             "the training set?)")
        self.records.append({
            "iteration": record["iteration"], "solver": record.get("solver"),
            "train_acc": float((train.argmax(1) == d.y_train).double().mean()),
            "train_mse_measured": float((train - d.Y_train).square().mean()),
            "train_residual": float((train - d.Y_train).abs().max()),
            "test_acc": float((test.argmax(1) == d.y_test).double().mean()),
            "test_mse": float((test - d.Y_test).square().mean()),
            "test_correct_mse": correct_class_mse(test, d.Y_test),
            "circulant_deviation": block_circulant_deviation(record["M"], d.operation),
            "M": record["M"].detach().cpu().to(torch.float64),
        })
        return False

    def column(self, key):
        if self.records and key not in self.records[0]:
            raise KeyError(f"no column {key!r}; the records have {sorted(self.records[0])}")
        return [r[key] for r in self.records]

    def alignment(self, reference=None, *, part: str = "whole"):
        """:func:`agop_alignment` of each recorded M with ``reference`` (default: the last M); with
        ``part="off_diagonal"`` NaN for M_0 = I, whose off-diagonal block is zero."""
        ref = self.records[-1]["M"] if reference is None else torch.as_tensor(reference)
        out = []
        for r in self.records:
            if part == "off_diagonal" and float(off_diagonal_block(r["M"]).abs().max()) == 0:
                out.append(float("nan"))
            else:
                out.append(agop_alignment(r["M"], ref, part=part))
        return out
