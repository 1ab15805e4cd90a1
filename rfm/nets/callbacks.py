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

import numpy as np
import torch

from .._checks import check_number
from ..data.modular import (
    ModularData,
    agop_alignment,
    block_circulant_deviation,
    correct_class_mse,
    dual_operation,
    off_diagonal_block,
)
from ..metrics import matrix_correlation
from ..utils import psd_power
from .baselines import matched_network
from .curves import first_reaching
from .mlp import MLP, layer_agop, nfm

__all__ = ["GrokkingProgress", "NetworkProgress", "grokking_curves", "grokking_network_summary", "grokking_summary",
           "nfa_correlations"]


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
    trained on.

    Parameters
    ----------
    data : ModularData
        The task the network is trained on.
    nfm_every : int, default 1
        Epochs between NFM records (>= 1).
    stop_at_test_acc : float, optional
        Stop once the test accuracy reaches it.
    agop : bool, default False
        Also record the input AGOP.

    Raises
    ------
    TypeError
        If ``agop`` is not a bool.
    """

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
        """One recorded quantity over the records.

        Parameters
        ----------
        key : str
            A key of the records.

        Returns
        -------
        list
            One value per record (KeyError if a record lacks the key).
        """
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

    :meth:`alignment` then gives the AGOP alignment of every M with a reference (default: the last one).

    Parameters
    ----------
    data : ModularData
        The task the estimator is fitted on (:func:`rfm.data.modular.modular_arithmetic`).
    """

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
        """One recorded quantity over the solves.

        Parameters
        ----------
        key : str
            A key of the records.

        Returns
        -------
        list
            One value per record.

        Raises
        ------
        KeyError
            If the records have no such key.
        """
        if self.records and key not in self.records[0]:
            raise KeyError(f"no column {key!r}; the records have {sorted(self.records[0])}")
        return [r[key] for r in self.records]

    def alignment(self, reference=None, *, part: str = "whole"):
        """:func:`agop_alignment` of each recorded M with ``reference`` (default: the last M); with
        ``part="off_diagonal"`` NaN for M_0 = I, whose off-diagonal block is zero.

        Parameters
        ----------
        reference : array-like, shape (2p, 2p), optional
            The reference M (default: the last one).
        part : {"whole", "off_diagonal"}, default "whole"
            As in :func:`agop_alignment`.

        Returns
        -------
        list of float
            One per record.
        """
        ref = self.records[-1]["M"] if reference is None else torch.as_tensor(reference)
        out = []
        for r in self.records:
            if part == "off_diagonal" and float(off_diagonal_block(r["M"]).abs().max()) == 0:
                out.append(float("nan"))
            else:
                out.append(agop_alignment(r["M"], ref, part=part))
        return out


def grokking_curves(progress: GrokkingProgress, *, flat: float = 0.05, half: float = 0.5) -> dict:
    """The columns of a :class:`GrokkingProgress` as arrays, with the AGOP alignments and the transition's bounds.

    Parameters
    ----------
    progress : GrokkingProgress
        The records of one RFM fit.
    flat : float, default=0.05
        ``last_flat`` is the last iteration with test accuracy at most ``flat`` (0 when there is none).
    half : float, default=0.5
        ``first_half`` is the first iteration with test accuracy above ``half`` (None when there is none).

    Returns
    -------
    dict
        ``iteration``, ``train_acc``, ``test_acc``, ``test_mse``, ``test_correct_mse``, ``train_mse_measured``,
        ``circulant_deviation``, ``train_residual`` (arrays of floats, one entry per solve); ``align`` (the cosine of
        the whole M with the last, the paper's measure) and ``align_block`` (of the off-diagonal blocks only, NaN at
        M_0 = I); ``last_flat`` and ``first_half``.
    """
    c = {k: np.array(progress.column(k), dtype=float) for k in (
        "iteration", "train_acc", "test_acc", "test_mse", "test_correct_mse", "train_mse_measured",
        "circulant_deviation", "train_residual")}
    c["align"] = np.array(progress.alignment())
    c["align_block"] = np.array(progress.alignment(part="off_diagonal"))
    below = c["iteration"][c["test_acc"] <= flat]
    c["last_flat"] = int(below[-1]) if len(below) else 0
    above = c["iteration"][c["test_acc"] > half]
    c["first_half"] = int(above[0]) if len(above) else None
    return c


def grokking_summary(curves: dict, *, early: int = 8) -> dict:
    """What the checks read of one RFM run's :func:`grokking_curves`.

    Parameters
    ----------
    curves : dict
        The output of :func:`grokking_curves`.
    early : int, default=8
        ``max_early_acc`` is the largest test accuracy over iterations ``0 .. early - 1``.

    Returns
    -------
    dict
        ``first_half``, ``final_acc``, ``acc0`` (iteration 0's test accuracy), ``max_early_acc``, ``dev1`` and
        ``final_dev`` (the circulant deviation after the first update and at the end), ``dev_increases`` (updates
        after the first at which it did not fall), ``align_increases`` (iterations at which the whole-matrix
        alignment did not rise), and the curves ``acc`` and ``dev``.
    """
    dev = curves["circulant_deviation"][1:]
    return dict(first_half=curves["first_half"], final_acc=float(curves["test_acc"][-1]),
                acc0=float(curves["test_acc"][0]), max_early_acc=float(curves["test_acc"][slice(0, early)].max()),
                final_dev=float(dev[-1]), dev1=float(dev[0]), dev_increases=int((np.diff(dev) >= 0).sum()),
                align_increases=int((np.diff(curves["align"]) <= 0).sum()), acc=curves["test_acc"],
                dev=curves["circulant_deviation"])


def nfa_correlations(nfm_matrix, agop_matrix) -> tuple[float, float]:
    """corr(NFM, AGOP^{1/2}): Pearson over all entries (the NFA's measure) and over the off-diagonal entries only.

    Parameters
    ----------
    nfm_matrix : array-like of shape (d, d)
        A neural feature matrix W^T W.
    agop_matrix : array-like of shape (d, d)
        The network's AGOP at the same layer (its PSD square root is compared).

    Returns
    -------
    all_entries, off_diagonal : float
        The two Pearson correlations.
    """
    G = psd_power(agop_matrix, 0.5)
    A = torch.as_tensor(nfm_matrix)
    off = ~torch.eye(A.shape[0], dtype=torch.bool)
    return matrix_correlation(A, G, "pearson"), matrix_correlation(A[off], G[off], "pearson")


def grokking_network_summary(model: MLP, progress: NetworkProgress, X_train, *, matched_seeds=range(5)) -> dict:
    """The measures of a network trained on modular arithmetic with a :class:`NetworkProgress` (``agop=True``).

    Parameters
    ----------
    model : MLP
        The trained network (its first layer is measured).
    progress : NetworkProgress
        Its records, with ``nfm`` and ``agop`` snapshots.
    X_train : torch.Tensor
        The training inputs (the AGOP of the spectrum-matched controls is taken there).
    matched_seeds : iterable of int, default=range(5)
        One :func:`rfm.nets.matched_network` control per seed: the trained W1's singular values in Haar-random
        directions.

    Returns
    -------
    dict
        ``hist`` (the records), ``snaps`` (those with an NFM), ``ep``, ``test_acc``, ``nfm_ep``; per snapshot
        ``nfm_dev`` (circulant deviation of the NFM block in the dual operation's order), ``nfm_dev_kernel_order``
        (in the operation's own order), ``agop_align`` (with the last AGOP), ``nfa`` and ``nfa_off``
        (:func:`nfa_correlations`); ``matched`` and ``matched_off`` (the same for the controls); ``fit_epoch``,
        ``start_epoch`` and ``gen_epoch`` (first epochs at train accuracy 1, test accuracy 0.05 and 0.99).
    """
    op = progress.data.operation
    hist = progress.records
    snaps = [h for h in hist if "nfm" in h]
    ep = np.array([h["epoch"] for h in hist])
    test_acc = np.array([h["test_acc"] for h in hist])
    X = X_train.to(next(model.parameters()).device, next(model.parameters()).dtype)
    matched = []
    for s in matched_seeds:
        m_net = matched_network(model, 0, generator=s)
        matched.append(nfa_correlations(nfm(m_net, 0), layer_agop(m_net, X, 0)))
    nfa = [nfa_correlations(h["nfm"], h["agop"]) for h in snaps]
    return dict(
        hist=hist, snaps=snaps, ep=ep, test_acc=test_acc, nfm_ep=np.array([h["epoch"] for h in snaps]),
        nfm_dev=np.array([block_circulant_deviation(h["nfm"], dual_operation(op)) for h in snaps]),
        nfm_dev_kernel_order=np.array([block_circulant_deviation(h["nfm"], op) for h in snaps]),
        agop_align=np.array([agop_alignment(h["agop"], snaps[-1]["agop"]) for h in snaps]),
        nfa=np.array([a for a, _ in nfa]), nfa_off=np.array([b for _, b in nfa]),
        matched=np.array([a for a, _ in matched]), matched_off=np.array([b for _, b in matched]),
        fit_epoch=first_reaching(ep, [h["train_acc"] for h in hist], 1.0),
        start_epoch=first_reaching(ep, test_acc, 0.05), gen_epoch=first_reaching(ep, test_acc, 0.99))
