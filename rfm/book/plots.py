r"""Figures the chapters share: feature matrices as images, spectra, and per-iteration curves.

Every helper takes matrices as torch tensors or NumPy arrays, returns the :class:`matplotlib.figure.Figure` it drew
on (so a chapter can pass it to :func:`rfm.book.savefig`), and labels its axes. Helpers that draw a single panel
accept ``ax=`` to draw into an existing figure.

* :func:`matrix_images` -- a row of matrices as images, on one shared colour scale by default (M over iterations);
* :func:`matrix_pair`   -- two matrices side by side, each on its own scale (a feature matrix next to an AGOP);
* :func:`spectrum`      -- the top eigenvalues of one or several symmetric matrices (bars, or lines for many);
* :func:`curves`        -- metrics against the iteration (or any x), with horizontal reference lines;
* :func:`pixel_weights` -- a per-pixel weight (diag(M), a network's NFM diagonal) as an image.
* :func:`signed_image`  -- one matrix on a scale symmetric about 0 (minus its diagonal, split into blocks);
* :func:`grokking_progress` -- the panels of one RFM run on modular arithmetic, by iteration.

Coordinates are numbered from 1 on the axes, as in the papers (x_1, x_2, ...), although the arrays are 0-based.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import LogNorm, Normalize
from matplotlib.ticker import MaxNLocator

from .._checks import check_number
from ..data.images import pixel_map
from ..utils import to_numpy


def _as_array(A, name: str, *, allow_nan: bool = False) -> np.ndarray:
    """A non-empty numeric array as float (NaN/inf refused unless ``allow_nan``: a curve may have gaps)."""
    arr = np.asarray(to_numpy(A))
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype} (strings, or ragged lists?)")
    arr = arr.astype(float)
    if arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape}); there is nothing to draw")
    if not allow_nan and not np.isfinite(arr).all():
        raise ValueError(f"{name} contains {int((~np.isfinite(arr)).sum())} NaN or infinite value(s), which cannot be "
                         "placed on a colour scale or axis; it was probably computed from diverged values")
    return arr


def _as_matrix(A, name: str) -> np.ndarray:
    M = _as_array(A, name)
    if M.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got shape {M.shape}")
    return M


def _nice_step(k: int, max_ticks: int = 5) -> int:
    """The smallest step among 1, 2, 5, 10, 20, 25, 50, ... that puts at most ``max_ticks`` ticks on 1..k."""
    for magnitude in (1, 10, 100, 1000, 10_000, 100_000):
        for base in (1, 2, 2.5, 5):
            step = int(base * magnitude)
            if step >= 1 and k // step <= max_ticks:
                return step
    return k


def _coordinate_ticks(ax, k_rows: int, k_cols: int):
    """Ticks at 1-based coordinates: every one for small blocks, 1 and round numbers otherwise."""
    for axis, k, which in ((ax.xaxis, k_cols, "x"), (ax.yaxis, k_rows, "y")):
        if k <= 12:
            locs = list(range(1, k + 1))
            if k > 8:
                ax.tick_params(axis=which, labelsize=7)
        else:
            step = _nice_step(k)
            locs = [1] + [t for t in range(step, k + 1, step) if t > 1]
        axis.set_ticks([t - 1 for t in locs])
        axis.set_ticklabels([str(t) for t in locs])


def matrix_images(mats, titles=None, *, block: int | None = None, shared_scale: bool = True, symmetric=None,
                  log: bool = False, log_floor: float = 1e-4, cmap: str | None = None, suptitle: str | None = None,
                  colorbar_label: str | None = None, xlabel: str = "coordinate j", ylabel: str = "coordinate i",
                  panel_size: float = 2.4, ncols: int | None = None):
    """Show matrices as images, in one row or in rows of ``ncols`` panels.

    Parameters
    ----------
    mats : matrix or list of matrices
        Tensors or arrays of shape (rows, cols), finite.
    titles : str or list of str, optional
        A title per panel.
    block : int or None, default=None
        Show the top-left ``block`` x ``block`` block of each matrix (the relevant coordinates of a low-rank target
        come first).
    shared_scale : bool, default=True
        One colour scale and one colour bar for all panels, so that a sequence (M over RFM iterations) can be
        compared by eye; False gives each panel its own.
    symmetric : bool or None, default=None
        A diverging map centred at 0; None: whether any shown entry is negative.
    log : bool, default=False
        Show ``|entries|`` on a log scale from ``log_floor`` times the largest up to the largest (smaller entries,
        zeros included, at the floor): the way to see the small tail of a feature matrix next to its few large
        entries.
    log_floor : float, default=1e-4
        The bottom of the log scale, relative to the largest entry, in (0, 1).
    cmap : str or None, default=None
        The colour map; None: ``"RdBu_r"`` when symmetric, else ``"viridis"``.
    suptitle : str or None, default=None
        The figure's title.
    colorbar_label : str or None, default=None
        The colour bar's label; None: ``"entry"`` (or ``"|entry| (log scale)"``).
    xlabel, ylabel : str, default="coordinate j", "coordinate i"
        The axes' labels.
    panel_size : float, default=2.4
        The width of a panel in inches.
    ncols : int or None, default=None
        Panels per row; None: all in one row. A book page is about 8 inches wide: for more than three or four
        panels, pass ``ncols``.

    Returns
    -------
    matplotlib.figure.Figure
        The figure.
    """
    if hasattr(mats, "shape"):
        mats = [mats]
    mats = [_as_matrix(A, f"mats[{i}]") for i, A in enumerate(mats)]
    if not mats:
        raise ValueError("mats must hold at least one matrix")
    if block is not None:
        check_number("block", block, low=1, integer=True)
        mats = [A[:block, :block] for A in mats]
    check_number("panel_size", panel_size, low=0, low_inclusive=False)
    titles = [None] * len(mats) if titles is None else [titles] if isinstance(titles, str) else list(titles)
    if len(titles) != len(mats):
        raise ValueError(f"got {len(titles)} titles for {len(mats)} matrices")
    if log:
        check_number("log_floor", log_floor, low=0, low_inclusive=False, high=1, high_inclusive=False)
        mats = [np.abs(A) for A in mats]
        symmetric = False
    elif symmetric is None:
        symmetric = any(float(A.min()) < 0 for A in mats)
    cmap = cmap or ("RdBu_r" if symmetric else "viridis")
    if colorbar_label is None:
        colorbar_label = "|entry| (log scale)" if log else "entry"

    def norm_for(As):
        hi = max(float(A.max()) for A in As)
        if log:
            hi = hi if hi > 0 else 1.0
            return LogNorm(vmin=hi * log_floor, vmax=hi, clip=True)
        lo = min(float(A.min()) for A in As)
        if symmetric:
            m = max(abs(lo), abs(hi)) or 1.0
            return Normalize(vmin=-m, vmax=m)
        return Normalize(vmin=lo, vmax=hi if hi > lo else lo + 1.0)

    n = len(mats)
    ncols = n if ncols is None else min(n, check_number("ncols", ncols, low=1, integer=True))
    nrows = -(-n // ncols)
    width = panel_size * ncols + (1.0 if shared_scale else 0.9 * ncols)
    fig, grid = plt.subplots(nrows, ncols, figsize=(width, (panel_size + 0.6) * nrows), squeeze=False,
                             constrained_layout=True)
    for ax in grid.flat[n:]:
        ax.set_visible(False)
    axes = list(grid.flat[:n])
    shared = norm_for(mats) if shared_scale else None
    image = None
    for i, (ax, A, title) in enumerate(zip(axes, mats, titles)):
        norm = shared if shared_scale else norm_for([A])
        shown = np.maximum(A, norm.vmin) if log else A
        image = ax.imshow(shown, cmap=cmap, norm=norm, interpolation="nearest")
        _coordinate_ticks(ax, *A.shape)
        ax.set_xlabel(xlabel)
        if i % ncols == 0:
            ax.set_ylabel(ylabel)
        if title:
            ax.set_title(title, fontsize=10)
        if not shared_scale:
            fig.colorbar(image, ax=ax, shrink=0.8, label=colorbar_label if i == n - 1 else None)
    if shared_scale:
        fig.colorbar(image, ax=list(grid.flat), shrink=0.8 if nrows == 1 else 0.6, label=colorbar_label)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


def matrix_pair(A, B, titles=("A", "B"), *, shared_scale: bool = False, **kwargs):
    """Two matrices side by side (e.g. a neural feature matrix and an AGOP), each on its own colour scale by default,
    since such pairs are compared up to scale (by a correlation).

    Parameters
    ----------
    A, B : matrix
        Tensors or arrays of shape (rows, cols).
    titles : tuple of str, default=("A", "B")
        The panels' titles.
    shared_scale : bool, default=False
        One colour scale for both.
    **kwargs
        Further arguments of :func:`matrix_images`.

    Returns
    -------
    matplotlib.figure.Figure
        The figure.
    """
    return matrix_images([A, B], titles, shared_scale=shared_scale, **kwargs)


def _eigenvalues(A, name: str = "matrices") -> np.ndarray:
    arr = _as_array(A, name)
    if arr.ndim == 1:
        return np.sort(arr)[::-1]
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(f"expected a square matrix or a vector of eigenvalues, got shape {arr.shape}")
    scale, asym = np.abs(arr).max(), np.abs(arr - arr.T).max()
    if asym > 1e-4 * scale:
        raise ValueError(f"{name} must be symmetric (its eigenvalues are drawn), but max|A - A^T| = {asym:.3g} is more "
                         f"than 1e-4 of max|A| = {scale:.3g}; pass (A + A.T) / 2 if the asymmetry is round-off")
    return np.linalg.eigvalsh(0.5 * (arr + arr.T))[::-1]


def spectrum(matrices, labels=None, *, k: int = 20, normalize: str | None = "max", log: bool = True,
             kind: str | None = None, color_by=None, color_label: str = "", title: str | None = None,
             ylabel: str | None = None, ax=None):
    """The top-``k`` eigenvalues (largest first) of one or several symmetric matrices.

    Parameters
    ----------
    matrices : matrix, vector, or list of these
        Symmetric matrices, or vectors of eigenvalues.
    labels : str or list of str, optional
        A legend label per spectrum.
    k : int, default=20
        How many eigenvalues to draw.
    normalize : {"max", None}, default="max"
        ``"max"`` divides each spectrum by its largest eigenvalue (an RFM feature matrix is only defined up to
        scale); None draws the raw values.
    log : bool, default=True
        A log y axis (eigenvalues <= 0 are then not drawn).
    kind : {"bar", "line"} or None, default=None
        None: bars for one or two spectra, lines for more.
    color_by : array-like of shape (k,), optional
        For a single spectrum, values in [0, 1] that colour the bars (e.g. how much of each eigenvector lies on the
        relevant coordinates), with a colour bar.
    color_label : str, default=""
        The colour bar's label.
    title, ylabel : str or None, default=None
        The axes' title and y label.
    ax : matplotlib.axes.Axes or None, default=None
        Draw into this axes; None makes a new figure.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on.
    """
    if normalize not in (None, "max"):
        raise ValueError(f"normalize must be None or 'max', got {normalize!r}")
    check_number("k", k, low=1, integer=True)
    single = not isinstance(matrices, (list, tuple))
    series = [matrices] if single else list(matrices)
    if not series:
        raise ValueError("matrices must hold at least one matrix")
    if labels is None:
        labels = [None] * len(series)
    labels = [labels] if isinstance(labels, str) else list(labels)
    if len(labels) != len(series):
        raise ValueError(f"got {len(labels)} labels for {len(series)} spectra")
    kind = kind or ("bar" if len(series) <= 2 else "line")
    if kind not in ("bar", "line"):
        raise ValueError(f"kind must be 'bar' or 'line', got {kind!r}")
    if color_by is not None and len(series) != 1:
        raise ValueError("color_by colours the bars of a single spectrum; got several spectra")

    if ax is None:
        fig, ax = plt.subplots(figsize=(6.0, 3.2), constrained_layout=True)
    else:
        fig = ax.figure
    width = 0.8 / len(series)
    cmap = plt.get_cmap("viridis")
    for s, (A, label) in enumerate(zip(series, labels)):
        ev = _eigenvalues(A, "matrices" if single else f"matrices[{s}]")[:k]
        if normalize == "max":
            top = ev[0] if ev.size and ev[0] > 0 else 1.0
            ev = ev / top
        idx = np.arange(1, ev.size + 1)
        shown = ev > 0 if log else np.ones_like(ev, dtype=bool)
        if kind == "bar":
            offset = (s - (len(series) - 1) / 2) * width
            color = None
            if color_by is not None:
                c = np.asarray(to_numpy(color_by), dtype=float)[:k]
                if c.shape != ev.shape:
                    raise ValueError(f"color_by must have one value per shown eigenvalue ({ev.size}), got {c.shape}")
                color = cmap(np.clip(c, 0, 1))[shown]
            ax.bar(idx[shown] + offset, ev[shown], width=width, label=label, color=color)
        else:
            ax.plot(idx[shown], ev[shown], marker="o", ms=3, label=label, color=cmap(s / max(1, len(series) - 1)))
    if color_by is not None:
        sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0, 1))
        fig.colorbar(sm, ax=ax, label=color_label)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("eigenvalue index (largest first)")
    ax.set_ylabel(ylabel or ("eigenvalue / largest" if normalize == "max" else "eigenvalue"))
    step = _nice_step(k) if k > 12 else 1
    ax.set_xticks([1] + [t for t in range(step, k + 1, step) if t > 1])
    ax.set_xlim(0.3, k + 0.7)
    if title:
        ax.set_title(title, fontsize=10)
    if any(label is not None for label in labels):
        ax.legend(fontsize=8)
    return fig


def curves(x, ys: dict, *, xlabel: str = "iteration", ylabel: str, hlines: dict | None = None,
           title: str | None = None, ylim=None, ax=None):
    """Lines with markers for each ``label -> values`` of ``ys`` against ``x``, and dashed horizontal reference lines.

    Parameters
    ----------
    x : array-like of shape (n,)
        The x values (the iterations).
    ys : dict of str to array-like of shape (n,)
        Each curve by its label (NaN leaves a gap).
    xlabel : str, default="iteration"
        The x axis's label.
    ylabel : str
        The y axis's label.
    hlines : dict of str to float, optional
        Reference lines by label (e.g. the plain kernel's score).
    title : str or None, default=None
        The axes' title.
    ylim : tuple of float, optional
        The y limits.
    ax : matplotlib.axes.Axes or None, default=None
        Draw into this axes; None makes a new figure.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on.
    """
    if not isinstance(ys, dict):
        raise TypeError(f"ys must be a dict mapping each label to its values, e.g. {{'train': losses}}, got "
                        f"{type(ys).__name__}")
    if not ys:
        raise ValueError("ys must map at least one label to values")
    x = _as_array(x, "x")
    if x.ndim != 1:
        raise ValueError(f"x must be a 1-D sequence, got shape {x.shape}")
    for label, value in (hlines or {}).items():
        if hasattr(value, "ndim") and value.ndim == 0:
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not np.isfinite(value):
            raise ValueError(f"hlines[{label!r}] must be a finite number, got {value!r}")
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.5, 3.2), constrained_layout=True)
    else:
        fig = ax.figure
    for label, values in ys.items():
        v = _as_array(values, f"ys[{label!r}]", allow_nan=True)
        if v.shape != x.shape:
            raise ValueError(f"ys[{label!r}] has shape {v.shape}, x has {x.shape}")
        ax.plot(x, v, marker="o", label=label)
    styles = ["--", ":", "-."]
    for i, (label, value) in enumerate((hlines or {}).items()):
        ax.axhline(float(value), color="0.4", ls=styles[i % len(styles)], lw=1.2, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if np.allclose(x, np.round(x)):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if ylim is not None:
        ax.set_ylim(*ylim)
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def pixel_weights(ax, weights, shape=(28, 28), title: str = "", *, cmap: str = "viridis"):
    """A per-pixel weight (diag(M), the diagonal of a network's W^T W, or an image) drawn as an image on ``ax``.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The axes to draw into.
    weights : array-like of shape (d,) or (d, d)
        One weight per pixel, or a square matrix whose diagonal is used (see :func:`rfm.data.images.pixel_map`).
    shape : tuple of int, default=(28, 28)
        The image's (H, W) or (C, H, W); channels are summed.
    title : str, default=""
        The panel's title.
    cmap : str, default="viridis"
        The colour map.

    Returns
    -------
    matplotlib.image.AxesImage
        The image drawn (for a colour bar).
    """
    im = ax.imshow(pixel_map(weights, shape).numpy(), cmap=cmap, interpolation="nearest")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("pixel column", fontsize=8)
    ax.set_ylabel("pixel row", fontsize=8)
    ax.tick_params(labelsize=7)
    return im


def signed_image(ax, A, title: str | None = None, *, zero_diagonal: bool = False, split: int | None = None):
    """A matrix as an image on a red-blue scale symmetric about 0, without ticks.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    A : array-like of shape (n, m)
        The matrix.
    title : str or None, default=None
        The axes' title.
    zero_diagonal : bool, default=False
        Show A minus its diagonal (a diagonal that dominates would hide the rest).
    split : int or None, default=None
        Draw black lines between rows and between columns ``split - 1`` and ``split`` (two digits' blocks).

    Returns
    -------
    matplotlib.image.AxesImage
    """
    A = np.array(to_numpy(A), dtype=float)
    if zero_diagonal:
        np.fill_diagonal(A, 0.0)
    lim = np.abs(A).max()
    image = ax.imshow(A, cmap="RdBu_r", vmin=-lim, vmax=lim)
    if title:
        ax.set_title(title, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    if split is not None:
        ax.axhline(split - 0.5, color="k", lw=0.5)
        ax.axvline(split - 0.5, color="k", lw=0.5)
    return image


def grokking_progress(curves: dict, title: str):
    """Four panels of one RFM run on modular arithmetic, by iteration: accuracies, MSEs, the correct-class test loss,
    and the circulant deviation with the AGOP alignments; the transition (last flat to first above one half) shaded.

    Parameters
    ----------
    curves : dict
        The output of :func:`rfm.nets.callbacks.grokking_curves`.
    title : str
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    cv = curves
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6), sharex=True)
    it = cv["iteration"]
    axes[0].plot(it, cv["train_acc"], "o-", ms=3, label="train")
    axes[0].plot(it, cv["test_acc"], "o-", ms=3, label="test")
    axes[0].set_ylabel("accuracy")
    axes[1].plot(it, cv["test_mse"], "o-", ms=3, color="C1", label="test MSE (all outputs)")
    axes[1].plot(it, cv["train_mse_measured"], "o-", ms=3, color="C0",
                 label=f"train MSE (at most {cv['train_mse_measured'].max():.0e})")
    axes[1].set_ylim(0, 1.1 * cv["test_mse"].max())
    axes[2].plot(it, cv["test_correct_mse"], "o-", ms=3, color="C4", label="correct-class test loss")
    axes[2].set_ylim(0, 1.1 * cv["test_correct_mse"].max())
    axes[3].plot(it, cv["circulant_deviation"], "o-", ms=3, color="C2", label="circulant deviation")
    axes[3].plot(it, cv["align"], "o-", ms=3, color="C3", label="AGOP alignment (whole M)")
    axes[3].plot(it, cv["align_block"], "--", color="C3", alpha=0.6, label="alignment, off-diagonal block")
    axes[3].set_ylim(-0.05, 1.05)
    for ax in axes:
        if cv["first_half"] is not None:
            ax.axvspan(cv["last_flat"] + 0.5, cv["first_half"] + 0.5, color="0.9")
        ax.set_xlabel("RFM iteration")
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
