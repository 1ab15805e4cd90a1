r"""Image constructions for the deep-learning phenomena of Radhakrishnan, Beaglehole, Pandit & Belkin (Science 2024).

The paper shows that RFM and fully connected networks share four behaviours; each needs images in which we know
*where* the signal is. The constructions below plant it, on flattened images (rows of an (n, C*H*W) tensor,
channel first, then row by row, as :mod:`rfm.data` returns them; ``shape`` is (H, W) or (C, H, W)):

* **grokking** -- :func:`square_task`: the label is carried only by a small square of amplitude ``a`` stamped on the
  images of class 1, with class imbalance in training (the paper: 500 STL-10 airplanes and 53 trucks with a 5 x 5
  patch);
* **lottery tickets** -- :func:`threshold_mask` turns a feature-matrix diagonal into a pixel mask,
  ``diag(M)_j > frac * max diag(M)``, and :func:`region_mass` measures how much of a diagonal lies on a region;
* **simplicity bias** -- :func:`two_half_task`: an *easy* and a *hard* half image of the same class side by side
  (the paper: an MNIST digit next to a CIFAR-10 image), with either half optionally replaced by another class's;
  :func:`rotate_images` makes a hard half from digits (a digit at a random angle is harder to read);
* **spurious features** -- :func:`add_marker`: a marker stamped on each image with a probability that depends on
  its class (correlated with the label in training, not at test).

Regions are given by :func:`region_mask` (a boolean mask over the pixels) and stamped by :func:`stamp`;
:func:`pixel_map` turns a per-pixel feature diagonal back into an image. Every random choice takes a ``generator``
(a seed or a ``torch.Generator``), so that each construction is reproducible. :func:`load_stl10` and
:func:`load_mnist_full` fetch the paper's STL-10 and the full MNIST through torchvision (online only).

Local signals for convolutional models (:mod:`rfm.models.conv`): :func:`bars_task` (horizontal against vertical bars on
noise), :func:`star_task` (the ConvRFM star on noise) and :func:`noisy_frame` (an image at a random place in a
larger noisy frame).

Corruptions that make a *target* task from a source distribution (transfer learning, :mod:`rfm.models.transfer`):
:func:`gaussian_noise`, :func:`impulse_noise`, :func:`shift_images`, :func:`adjust_contrast`, :func:`blur_images`
and :func:`rotate_images`, or any of them by name through :func:`corrupt`.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from .._checks import check_choice, check_number, resolve_dtype, to_tensor
from ..utils import make_generator
from . import datasets as data


class ImageTask(NamedTuple):
    """Images X (n, pixels), integer labels y (n,), and the boolean pixel mask of the planted region.

    Parameters
    ----------
    X : torch.Tensor, shape (n, p)
        Flattened images.
    y : torch.Tensor of int64, shape (n,)
        Labels.
    mask : torch.Tensor of bool, shape (p,) or (n, p)
        The planted region's pixels (per image for the tasks whose region moves).
    """
    X: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor


# ----------------------------------------------------------------------------------------------------------------
# Regions


def _check_shape(shape):
    """(H, W) or (C, H, W) -> (C, H, W); images are flattened channel first, then row by row (as rfm.data does)."""
    shape = tuple(shape)
    if len(shape) not in (2, 3):
        raise ValueError(f"shape must be (height, width) or (channels, height, width), got {shape!r}")
    for s in shape:
        check_number("shape entry", s, low=1, integer=True)
    shape = tuple(int(s) for s in shape)
    return shape if len(shape) == 3 else (1, *shape)


def _pair(name, value, what="(start, stop), e.g. (0, 5)") -> tuple[int, int]:
    """A pair of integers such as ``rows=(0, 5)``."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
        raise ValueError(f"{name} must be a pair of integers {what}, got {value!r}")
    for v in value:
        check_number(f"{name} entry", v, integer=True)
    return int(value[0]), int(value[1])


def _real(name, value):
    """A real number; a one-element tensor or array counts as one."""
    if isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim == 0:
        value = value.item()
    return check_number(name, value)


def _images(X, name="X") -> torch.Tensor:
    """A 2-D numeric tensor of flattened images (n, pixels), finite; its dtype and device kept."""
    X = to_tensor(X, name)
    if X.ndim != 2:
        hint = f" (a single image: {name}.reshape(1, -1))" if X.ndim == 1 else (
            f" (flatten the images: {name}.reshape(len({name}), -1))" if X.ndim > 2 else "")
        raise ValueError(f"{name} must be a 2-D tensor of flattened images (n, pixels), got shape "
                         f"{tuple(X.shape)}{hint}")
    if X.is_floating_point() and not bool(torch.isfinite(X).all()):
        raise ValueError(f"{name} contains {int((~torch.isfinite(X)).sum())} NaN or infinite pixel value(s)")
    return X


def _labels(y, name="y") -> torch.Tensor:
    """Integer class labels as a 1-D long tensor on the CPU; float labels must be whole numbers."""
    y = to_tensor(y, name).detach().cpu()
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"{name} must be a 1-D vector of class labels (n,), got shape {tuple(y.shape)}"
                         + (" (one-hot labels? pass y.argmax(1))" if y.ndim == 2 else ""))
    if y.is_floating_point():
        if not bool(torch.isfinite(y).all()):
            raise ValueError(f"{name} contains NaN or infinite labels")
        if not bool((y == y.round()).all()):
            raise ValueError(f"{name} must hold integer class labels, got non-integer values")
    return y.long()


def region_mask(shape, rows, cols) -> torch.Tensor:
    """Boolean mask over the pixels of an image of ``shape`` = (H, W) or (C, H, W): True on rows
    ``rows[0] <= r < rows[1]`` and columns ``cols[0] <= c < cols[1]`` (half-open, as Python slices), in every
    channel. Its length is C*H*W.

    Parameters
    ----------
    shape : tuple of int
        (H, W) or (C, H, W).
    rows : pair of int
        First and past-the-last row.
    cols : pair of int
        First and past-the-last column.

    Returns
    -------
    torch.Tensor of bool, shape (C H W,)

    Raises
    ------
    ValueError
        If the region is empty or leaves the image.
    """
    C, H, W = _check_shape(shape)
    (r0, r1), (c0, c1) = _pair("rows", rows), _pair("cols", cols)
    if not (0 <= r0 < r1 <= H and 0 <= c0 < c1 <= W):
        raise ValueError(f"region rows {tuple(rows)}, cols {tuple(cols)} must be non-empty and inside an image of "
                         f"shape {(H, W)}")
    m = torch.zeros(C, H, W, dtype=torch.bool)
    m[:, r0:r1, c0:c1] = True
    return m.reshape(-1)


def square_mask(shape=(28, 28), size: int = 3, position=(1, 1)) -> torch.Tensor:
    """The mask of a ``size`` x ``size`` square whose top-left pixel is at ``position`` = (row, column).

    Parameters
    ----------
    shape : tuple of int, default (28, 28)
        The image shape, (H, W) or (C, H, W).
    size : int, default 3
        The side.
    position : pair of int, default (1, 1)
        (row, column) of its top-left pixel.

    Returns
    -------
    torch.Tensor of bool, shape (C H W,)
    """
    check_number("size", size, low=1, integer=True)
    r, c = _pair("position", position, "(row, column), e.g. (1, 1)")
    return region_mask(shape, (r, r + size), (c, c + size))


def _check_mask(mask, d, name="mask"):
    mask = to_tensor(mask, name)
    if mask.dtype != torch.bool or mask.ndim != 1 or mask.numel() != d:
        hint = ""
        if mask.dtype != torch.bool and mask.ndim == 1 and mask.numel() == d:
            hint = f"; convert a 0/1 vector with {name}.bool()"
        elif mask.ndim > 1:
            hint = f"; flatten it with {name}.reshape(-1) (channel first, then row by row)"
        raise ValueError(f"{name} must be a boolean vector with one entry per pixel ({d}), got dtype {mask.dtype} "
                         f"and shape {tuple(mask.shape)}{hint} (region_mask and square_mask build such masks)")
    return mask


def _rows(rows, n, name="rows") -> torch.Tensor:
    """Row selection as indices: a boolean vector of length n or integer indices in [-n, n)."""
    sel = to_tensor(rows, name).detach().cpu().reshape(-1)
    if sel.dtype == torch.bool:
        if sel.numel() != n:
            raise ValueError(f"{name} is a boolean vector of length {sel.numel()}, but X has {n} rows")
        return torch.nonzero(sel)[:, 0]
    if sel.is_floating_point():
        raise TypeError(f"{name} must be a boolean vector or integer row indices, got dtype {sel.dtype}")
    if sel.numel() and (int(sel.max()) >= n or int(sel.min()) < -n):
        raise ValueError(f"{name} holds row indices up to {int(sel.max())} (down to {int(sel.min())}), but X has {n} "
                         f"rows")
    return sel.long()


def stamp(X, mask, value: float = 1.0, *, rows=None, mode: str = "add") -> torch.Tensor:
    """A copy of X with ``value`` added to (``mode="add"``) or written into (``mode="set"``) the masked pixels of the
    selected ``rows`` (a boolean vector or indices; None: every row).

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, p)
        Flattened images.
    mask : array-like of bool, shape (p,)
        The pixels.
    value : float, default 1.0
        The value.
    rows : array-like of bool or int, optional
        The images to stamp (None: all).
    mode : {"add", "set"}, default "add"
        Add or write.

    Returns
    -------
    torch.Tensor, shape (n, p)
        In X's dtype and device.
    """
    X = _images(X)
    mask = _check_mask(mask, X.shape[1]).to(X.device)
    value = _real("value", value)
    if mode not in ("add", "set"):
        raise ValueError(f"mode must be 'add' or 'set', got {mode!r}")
    out = X.clone()
    sel = torch.arange(X.shape[0]) if rows is None else _rows(rows, X.shape[0])
    sel = sel.to(X.device)
    block = out[sel][:, mask]
    block = block + value if mode == "add" else torch.full_like(block, value)
    sub = out[sel]
    sub[:, mask] = block
    out[sel] = sub
    return out


# ----------------------------------------------------------------------------------------------------------------
# Grokking: a class-indicating square with class imbalance


def square_task(images, counts=(500, 53), *, labels=None, classes=None, mask=None, amplitude: float = 0.3,
                mode: str = "add", noise: float = 0.0, generator=0) -> ImageTask:
    """Images whose label is carried by a square: ``counts[k]`` images of class k drawn without replacement, the
    ``mask`` pixels of the class-1 images raised by ``amplitude`` (``mode="add"``) or set to it (``mode="set"``,
    which also sets the class-0 squares to 0, as the paper does), then Gaussian pixel noise of standard deviation
    ``noise`` on every pixel. ``mask`` defaults to the 3 x 3 square at (1, 1) of a 28 x 28 image. Rows come in random
    order.

    Without ``labels`` both classes are drawn from the whole pool, so that they differ *only* by the square and a
    classifier that ignores it is at chance on a balanced test set. With ``labels`` and ``classes`` = (a, b), class 0
    is drawn from the rows labelled a and class 1 from those labelled b (the paper: 500 STL-10 airplanes and 53
    trucks, ``counts=(500, 53)``, with a 5 x 5 patch).

    Parameters
    ----------
    images : array-like or torch.Tensor, shape (N, p)
        The pool of flattened images.
    counts : pair of int, default (500, 53)
        Images of class 0 and class 1.
    labels : array-like of int, shape (N,), optional
        The pool's labels (with ``classes``).
    classes : pair of int, optional
        The pool labels of class 0 and class 1.
    mask : array-like of bool, shape (p,), optional
        The square's pixels.
    amplitude : float, default 0.3
        The square's value.
    mode : {"add", "set"}, default "add"
        Add or write.
    noise : float, default 0.0
        Pixel noise standard deviation.
    generator : int or torch.Generator, default 0
        Seeds the draws.

    Returns
    -------
    ImageTask
        With the square's mask.
    """
    X = _images(images, "images")
    if isinstance(counts, (str, bytes)) or not hasattr(counts, "__len__") or len(counts) != 2:
        raise ValueError(f"counts must give the sizes of the two classes, e.g. (500, 53), got {counts!r}")
    counts = [int(check_number("count", c, low=1, integer=True)) for c in counts]
    amplitude = _real("amplitude", amplitude)
    check_number("noise", noise, low=0)
    if mode not in ("add", "set"):
        raise ValueError(f"mode must be 'add' or 'set', got {mode!r}")
    mask = square_mask() if mask is None else mask
    mask = _check_mask(mask, X.shape[1])
    g = make_generator(generator)
    if labels is None:
        if sum(counts) > X.shape[0]:
            raise ValueError(f"counts {counts} need {sum(counts)} images, the pool has {X.shape[0]}")
        idx = torch.randperm(X.shape[0], generator=g)[:sum(counts)]
    else:
        labels = _labels(labels, "labels")
        if len(labels) != X.shape[0]:
            raise ValueError(f"labels has {len(labels)} entries but images has {X.shape[0]} rows: one label per image")
        if classes is None or len(classes) != 2:
            raise ValueError(f"with labels, classes must name the pool labels of class 0 and class 1, got {classes!r}")
        parts = []
        for c, k in zip(classes, counts):
            rows = torch.nonzero(labels == int(c))[:, 0]
            if len(rows) < k:
                raise ValueError(f"class {c} has {len(rows)} images in the pool, {k} were asked for")
            parts.append(rows[torch.randperm(len(rows), generator=g)[:k]])
        idx = torch.cat(parts)
    Xs = X[idx.to(X.device)].clone()
    y = torch.cat([torch.zeros(counts[0], dtype=torch.long), torch.ones(counts[1], dtype=torch.long)])
    if mode == "set":
        Xs = stamp(Xs, mask, 0.0, rows=~y.bool(), mode="set")
    Xs = stamp(Xs, mask, amplitude, rows=y.bool(), mode=mode)
    if noise:
        Xs = Xs + noise * torch.randn(Xs.shape, generator=g, dtype=Xs.dtype).to(Xs.device)
    order = torch.randperm(len(y), generator=g)
    return ImageTask(Xs[order.to(X.device)], y[order], mask)


# ----------------------------------------------------------------------------------------------------------------
# Lottery tickets: masks from a feature-matrix diagonal, and the mass of a diagonal on a region


def threshold_mask(diag, frac: float = 0.05) -> torch.Tensor:
    """Pixels whose feature weight is above ``frac`` of the largest: ``diag_j > frac * max_j diag_j`` (the paper
    thresholds the max-normalised diagonal of M at 0.05). Accepts a vector or a square matrix (its diagonal).

    Parameters
    ----------
    diag : array-like or torch.Tensor, shape (p,) or (p, p)
        A per-pixel feature diagonal, or a square matrix (its diagonal is used).
    frac : float, default 0.05
        The threshold, in [0, 1).

    Returns
    -------
    torch.Tensor of bool, shape (p,)

    Raises
    ------
    ValueError
        If the largest entry is not positive.
    """
    check_number("frac", frac, low=0, high=1, high_inclusive=False)
    d = _as_diagonal(diag)
    if not float(d.max()) > 0:
        raise ValueError(f"threshold_mask needs a diagonal with a positive largest entry, got max {float(d.max()):.3g} "
                         "(an all-zero feature matrix selects no pixel)")
    return d > frac * d.max()


def top_k_mask(diag, k: int) -> torch.Tensor:
    """The ``k`` pixels of largest feature weight (ties broken by position).

    Parameters
    ----------
    diag : array-like or torch.Tensor, shape (p,) or (p, p)
        A per-pixel feature diagonal, or a square matrix (its diagonal is used).
    k : int
        1 <= k <= p.

    Returns
    -------
    torch.Tensor of bool, shape (p,)
    """
    d = _as_diagonal(diag)
    check_number("k", k, low=1, high=d.numel(), integer=True)
    mask = torch.zeros(d.numel(), dtype=torch.bool)
    mask[torch.topk(d, k).indices] = True
    return mask


def _as_diagonal(diag) -> torch.Tensor:
    d = to_tensor(diag, "diag").detach().to(torch.float64).cpu()
    if d.ndim == 2 and d.shape[0] == d.shape[1]:
        d = d.diagonal()
    if d.ndim != 1:
        raise ValueError(f"expected a diagonal (vector) or a square matrix, got shape {tuple(d.shape)}")
    if d.numel() == 0:
        raise ValueError("the diagonal is empty; pass one feature weight per pixel")
    if not bool(torch.isfinite(d).all()):
        raise ValueError("the diagonal contains NaN or infinite values")
    return d


def region_mass(diag, mask) -> float:
    """The share of a non-negative feature diagonal that lies on a region: sum_{j in mask} diag_j / sum_j diag_j.

    A diagonal spread evenly over the pixels puts ``mask.mean()`` of its mass on any region; 1 means all of it.

    Parameters
    ----------
    diag : array-like or torch.Tensor, shape (p,) or (p, p)
        A per-pixel feature diagonal, or a square matrix (its diagonal is used).
    mask : array-like of bool, shape (p,)
        The region.

    Returns
    -------
    float
        In [0, 1].

    Raises
    ------
    ValueError
        If the diagonal has a negative entry or sums to 0.
    """
    d = _as_diagonal(diag)
    mask = _check_mask(mask, d.numel())
    if bool((d < 0).any()):
        raise ValueError("region_mass needs a non-negative diagonal (a PSD matrix has one)")
    total = d.sum()
    if not float(total) > 0:
        raise ValueError("region_mass of a zero diagonal is undefined")
    return float(d[mask].sum() / total)


# ----------------------------------------------------------------------------------------------------------------
# Simplicity bias: two halves that both determine the label


def concat_halves(left, right, shape=(28, 28)) -> torch.Tensor:
    """Images of shape (C, H, 2W): ``left`` and ``right`` (flattened images of ``shape`` (H, W) or (C, H, W)) side
    by side, flattened again (n, 2 C H W).

    Parameters
    ----------
    left, right : array-like or torch.Tensor, shape (n, C H W)
        The halves.
    shape : tuple of int, default (28, 28)
        The image shape, (H, W) or (C, H, W).

    Returns
    -------
    torch.Tensor, shape (n, 2 C H W)
        In left's dtype.
    """
    C, H, W = _check_shape(shape)
    left, right = to_tensor(left, "left"), to_tensor(right, "right")
    if left.shape != right.shape or left.ndim != 2 or left.shape[1] != C * H * W:
        raise ValueError(f"left and right must both have shape (n, {C * H * W}), got {tuple(left.shape)} and "
                         f"{tuple(right.shape)}")
    n = left.shape[0]
    both = torch.cat([left.reshape(n, C, H, W), right.reshape(n, C, H, W).to(left.dtype)], 3)
    return both.reshape(n, 2 * C * H * W)


def half_mask(shape=(28, 28), side: str = "left") -> torch.Tensor:
    """The pixels of the left or right half of a two-half image built by :func:`concat_halves` from halves of
    ``shape``.

    Parameters
    ----------
    shape : tuple of int, default (28, 28)
        The image shape, (H, W) or (C, H, W).
    side : {"left", "right"}, default "left"
        The half.

    Returns
    -------
    torch.Tensor of bool, shape (2 C H W,)
    """
    C, H, W = _check_shape(shape)
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    return region_mask((C, H, 2 * W), (0, H), (0, W) if side == "left" else (W, 2 * W))


def pick_by_label(y_wanted, y_pool, *, other_class: bool = False, generator=0) -> torch.Tensor:
    """For each wanted label, the index of a random pool row with that label (``other_class=True``: with a
    different label, chosen uniformly among the pool rows of every other class). Rows may repeat.

    Parameters
    ----------
    y_wanted : array-like of int, shape (m,)
        The labels wanted.
    y_pool : array-like of int, shape (N,)
        The pool's labels.
    other_class : bool, default False
        Pick rows of another class instead.
    generator : int or torch.Generator, default 0
        Seeds the draws.

    Returns
    -------
    torch.Tensor of int64, shape (m,)
        Row indices into the pool.

    Raises
    ------
    ValueError
        If the pool has no row to pick for a label.
    """
    y_wanted = _labels(y_wanted, "y_wanted")
    y_pool = _labels(y_pool, "y_pool")
    g = make_generator(generator)
    out = torch.empty(len(y_wanted), dtype=torch.long)
    for c in torch.unique(y_wanted).tolist():
        where = torch.nonzero(y_wanted == c)[:, 0]
        pool = torch.nonzero((y_pool != c) if other_class else (y_pool == c))[:, 0]
        if len(pool) == 0:
            raise ValueError(f"the pool has no row {'outside' if other_class else 'of'} class {c}")
        out[where] = pool[torch.randint(len(pool), (len(where),), generator=g)]
    return out


def two_half_task(easy, easy_y, hard, hard_y, *, replace: str | None = None, shape=(28, 28),
                  generator=0) -> ImageTask:
    """Two-half images: each ``easy`` image (label ``easy_y``, the label of the result) on the left, a random
    ``hard`` image of the same class on the right. ``replace="easy"`` (or ``"hard"``) swaps that half for an image
    of another class, drawn from the same pool, keeping the label: a model that reads the swapped half then errs.
    The mask is the easy (left) half.

    Parameters
    ----------
    easy : array-like or torch.Tensor, shape (n, p)
        Left-half images.
    easy_y : array-like of int, shape (n,)
        Their labels.
    hard : array-like or torch.Tensor, shape (N, p)
        The pool of right-half images.
    hard_y : array-like of int, shape (N,)
        Its labels.
    replace : {None, "easy", "hard"}, default None
        The half to swap for another class.
    shape : tuple of int, default (28, 28)
        The image shape, (H, W) or (C, H, W).
    generator : int or torch.Generator, default 0
        Seeds the draws.

    Returns
    -------
    ImageTask
    """
    if replace not in (None, "easy", "hard"):
        raise ValueError(f"replace must be None, 'easy' or 'hard', got {replace!r}")
    easy, hard = _images(easy, "easy"), _images(hard, "hard")
    y = _labels(easy_y, "easy_y")
    if easy.shape[0] != len(y):
        raise ValueError(f"easy has {easy.shape[0]} rows but easy_y has {len(y)}")
    if hard.shape[0] != len(_labels(hard_y, "hard_y")):
        raise ValueError(f"hard has {hard.shape[0]} rows but hard_y has {len(_labels(hard_y, 'hard_y'))}")
    g = make_generator(generator)
    right = hard[pick_by_label(y, hard_y, other_class=replace == "hard", generator=g).to(hard.device)]
    left = easy if replace != "easy" else easy[pick_by_label(y, y, other_class=True, generator=g).to(easy.device)]
    return ImageTask(concat_halves(left, right, shape), y, half_mask(shape, "left"))


# ----------------------------------------------------------------------------------------------------------------
# Spurious features: a marker correlated with the label


def add_marker(X, y, mask, rates, *, value: float = 1.0, mode: str = "set", generator=0):
    """Stamp ``value`` on the ``mask`` pixels of each image of class c with probability ``rates[c]``.

    ``rates = (0.05, 0.95)`` marks 95 % of class 1 and 5 % of class 0 (a spurious correlation); ``(1, 0)`` marks
    every class-0 image and no class-1 image (the correlation reversed).

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, p)
        Flattened images.
    y : array-like of int, shape (n,)
        Labels (>= 0).
    mask : array-like of bool, shape (p,)
        The marker's pixels.
    rates : array-like of float
        One probability in [0, 1] per class.
    value : float, default 1.0
        The marker's value.
    mode : {"add", "set"}, default "set"
        As in :func:`stamp`.
    generator : int or torch.Generator, default 0
        Seeds the draws.

    Returns
    -------
    X_marked : torch.Tensor, shape (n, p)
    marked : torch.Tensor of bool, shape (n,)
        The rows stamped.
    """
    X = _images(X)
    y = _labels(y)
    rates = to_tensor(rates, "rates").to(torch.float64)
    if len(y) != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {len(y)}")
    if len(y) and int(y.min()) < 0:
        raise ValueError(f"labels must be >= 0 (they index rates), got {int(y.min())}")
    if rates.ndim != 1 or not bool(torch.isfinite(rates).all()) or bool(((rates < 0) | (rates > 1)).any()):
        raise ValueError(f"rates must be one probability in [0, 1] per class, got {rates.tolist()}")
    if len(y) and int(y.max()) >= len(rates):
        raise ValueError(f"labels go up to {int(y.max())} but rates has {len(rates)} entries")
    g = make_generator(generator)
    marked = torch.rand(len(y), generator=g, dtype=torch.float64) < rates[y]
    return stamp(X, mask, value, rows=marked, mode=mode), marked


def rotate_images(X, angles, shape=(28, 28)) -> torch.Tensor:
    """Each image of X (flattened images of ``shape``) rotated about its centre by ``angles`` (degrees,
    counter-clockwise; one per row, or one for all), with bilinear interpolation and zeros outside the image.

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, p)
        Flattened images.
    angles : float or array-like, shape (n,)
        Degrees.
    shape : tuple of int, default (28, 28)
        The image shape, (H, W) or (C, H, W).

    Returns
    -------
    torch.Tensor, shape (n, p)
        In X's floating dtype (float32 for integer X) and device.
    """
    C, H, W = _check_shape(shape)
    X = _images(X)
    if X.shape[1] != C * H * W:
        raise ValueError(f"X must have shape (n, {C * H * W}) for images of shape {shape}, got {tuple(X.shape)}")
    n = X.shape[0]
    a = to_tensor(angles, "angles").to(dtype=torch.float64, device=X.device).reshape(-1)
    if a.numel() not in (1, n):
        raise ValueError(f"angles must be one angle for all images or one per row of X ({n}), got {a.numel()}")
    if not bool(torch.isfinite(a).all()):
        raise ValueError("angles contains NaN or infinite values")
    a = a.expand(n) * (torch.pi / 180)
    cos, sin = torch.cos(a), torch.sin(a)
    # affine_grid maps each output position (x right, y down, in [-1, 1]) to the input position it samples; for a
    # counter-clockwise turn on screen (y pointing down) the output at angle phi samples the input at phi - a
    zero = torch.zeros_like(a)
    theta = torch.stack([torch.stack([cos, -sin, zero], 1), torch.stack([sin, cos, zero], 1)], 1)
    theta = theta.to(X.dtype if X.is_floating_point() else torch.float32)
    img = X.reshape(n, C, H, W).to(theta.dtype)
    grid = torch.nn.functional.affine_grid(theta, (n, C, H, W), align_corners=False)
    out = torch.nn.functional.grid_sample(img, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    return out.reshape(n, C * H * W).to(X.dtype if X.is_floating_point() else out.dtype)


# ----------------------------------------------------------------------------------------------------------------
# Corruptions: target tasks for transfer learning (CIFAR-10-C-like shifts of an image distribution)


def _float_images(X, shape, name="X"):
    C, H, W = _check_shape(shape)
    X = _images(X, name)
    if X.shape[1] != C * H * W:
        raise ValueError(f"{name} must have shape (n, {C * H * W}) for images of shape {tuple(shape)}, got "
                         f"{tuple(X.shape)}")
    return X if X.is_floating_point() else X.to(torch.float32), (C, H, W)


def gaussian_noise(X, std: float, *, generator=0) -> torch.Tensor:
    """X plus independent N(0, std^2) noise on every pixel (drawn on the CPU from ``generator``).

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, p)
        Flattened images.
    std : float
        The standard deviation (>= 0).
    generator : int or torch.Generator, default 0
        Seeds the draws.

    Returns
    -------
    torch.Tensor, shape (n, p)
        In X's floating dtype (float32 for integer X) and device.
    """
    X = _images(X)
    X = X if X.is_floating_point() else X.to(torch.float32)
    check_number("std", _real("std", std), low=0)
    noise = torch.randn(X.shape, generator=make_generator(generator), dtype=torch.float64)
    return X + (float(std) * noise).to(dtype=X.dtype, device=X.device)


def impulse_noise(X, frac: float, *, low: float = 0.0, high: float = 1.0, generator=0) -> torch.Tensor:
    """Salt-and-pepper noise: each pixel independently, with probability ``frac``, set to ``low`` or ``high``
    (each with probability 1/2).

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, p)
        Flattened images.
    frac : float
        The probability, in [0, 1].
    low, high : float, default 0.0, 1.0
        The two values.
    generator : int or torch.Generator, default 0
        Seeds the draws.

    Returns
    -------
    torch.Tensor, shape (n, p)
        In X's floating dtype (float32 for integer X) and device.
    """
    X = _images(X)
    X = X if X.is_floating_point() else X.to(torch.float32)
    check_number("frac", _real("frac", frac), low=0, high=1)
    g = make_generator(generator)
    hit = torch.rand(X.shape, generator=g, dtype=torch.float64) < float(frac)
    salt = torch.rand(X.shape, generator=g, dtype=torch.float64) < 0.5
    value = torch.where(salt, float(high), float(low)).to(dtype=X.dtype)
    return torch.where(hit.to(X.device), value.to(X.device), X)


def shift_images(X, shift, shape=(28, 28)) -> torch.Tensor:
    """Each image translated by ``shift = (rows, cols)`` whole pixels (down and right when positive), zeros
    filling the pixels that enter the frame.

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, p)
        Flattened images.
    shift : pair of int
        (rows, cols).
    shape : tuple of int, default (28, 28)
        The image shape, (H, W) or (C, H, W).

    Returns
    -------
    torch.Tensor, shape (n, p)
        In X's floating dtype (float32 for integer X) and device.
    """
    dy, dx = _pair("shift", shift, "(rows, cols), e.g. (1, 1)")
    X, (C, H, W) = _float_images(X, shape)
    img = X.reshape(-1, C, H, W)
    out = torch.zeros_like(img)
    ys, yd = (slice(0, H - dy), slice(dy, H)) if dy >= 0 else (slice(-dy, H), slice(0, H + dy))
    xs, xd = (slice(0, W - dx), slice(dx, W)) if dx >= 0 else (slice(-dx, W), slice(0, W + dx))
    if abs(dy) < H and abs(dx) < W:
        out[:, :, yd, xd] = img[:, :, ys, xs]
    return out.reshape(X.shape)


def adjust_contrast(X, factor: float, offset: float = 0.0) -> torch.Tensor:
    """factor * X + offset (a contrast reduction for 0 < factor < 1, lifted by ``offset``).

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, p)
        Flattened images.
    factor : float
        The factor.
    offset : float, default 0.0
        The offset.

    Returns
    -------
    torch.Tensor, shape (n, p)
        In X's floating dtype (float32 for integer X) and device.
    """
    X = _images(X)
    X = X if X.is_floating_point() else X.to(torch.float32)
    check_number("factor", _real("factor", factor))
    check_number("offset", _real("offset", offset))
    return X * float(factor) + float(offset)


def blur_images(X, sigma: float, shape=(28, 28)) -> torch.Tensor:
    """Each image convolved (per channel) with a Gaussian of standard deviation ``sigma`` pixels, truncated at
    3 sigma and normalised to sum 1; zero padding outside the image. ``sigma = 0`` returns X unchanged.

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, p)
        Flattened images.
    sigma : float
        Pixels (>= 0).
    shape : tuple of int, default (28, 28)
        The image shape, (H, W) or (C, H, W).

    Returns
    -------
    torch.Tensor, shape (n, p)
        In X's floating dtype (float32 for integer X) and device.
    """
    X, (C, H, W) = _float_images(X, shape)
    sigma = float(check_number("sigma", _real("sigma", sigma), low=0))
    if sigma == 0:
        return X.clone()
    r = max(1, int(np.ceil(3 * sigma)))
    t = torch.arange(-r, r + 1, dtype=torch.float64)
    w = torch.exp(-t ** 2 / (2 * sigma ** 2))
    w = (w / w.sum()).to(dtype=X.dtype, device=X.device)
    img = X.reshape(X.shape[0] * C, 1, H, W)
    img = torch.nn.functional.conv2d(img, w.reshape(1, 1, 1, -1), padding=(0, r))
    img = torch.nn.functional.conv2d(img, w.reshape(1, 1, -1, 1), padding=(r, 0))
    return img.reshape(X.shape)


CORRUPTIONS = ("noise", "impulse", "shift", "contrast", "blur", "rotation")


def corrupt(X, kind: str, severity: float, *, shape=(28, 28), generator=0) -> torch.Tensor:
    """One corruption of the images X, by name, with one severity parameter:

    ==========  =====================================================================
    kind        severity
    ==========  =====================================================================
    noise       standard deviation of :func:`gaussian_noise`
    impulse     fraction of pixels set to 0 or 1 (:func:`impulse_noise`)
    shift       pixels moved to the right (:func:`shift_images`, an integer)
    contrast    factor f of :func:`adjust_contrast`, towards grey: f x + (1 - f) / 2
    blur        sigma of :func:`blur_images`
    rotation    angle in degrees (:func:`rotate_images`)
    ==========  =====================================================================

    Random corruptions (noise, impulse) draw from ``generator``; the same seed gives the same images, and every
    corruption keeps X's shape.

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, p)
        Flattened images.
    kind : {"noise", "impulse", "shift", "contrast", "blur", "rotation"}
        The corruption.
    severity : float
        Its parameter (see the table).
    shape : tuple of int, default (28, 28)
        The image shape, (H, W) or (C, H, W).
    generator : int or torch.Generator, default 0
        Seeds the draws.

    Returns
    -------
    torch.Tensor, shape (n, p)
        In X's floating dtype (float32 for integer X) and device.
    """
    check_choice("kind", kind, CORRUPTIONS)
    if kind == "noise":
        return gaussian_noise(X, severity, generator=generator)
    if kind == "impulse":
        return impulse_noise(X, severity, generator=generator)
    if kind == "shift":
        s = check_number("severity", _real("severity", severity), integer=True)
        return shift_images(X, (0, int(s)), shape)
    if kind == "contrast":
        f = float(_real("severity", severity))
        return adjust_contrast(X, f, (1 - f) / 2)
    if kind == "blur":
        return blur_images(X, severity, shape)
    return rotate_images(X, severity, shape)


# ----------------------------------------------------------------------------------------------------------------
# Showing a feature diagonal as an image


def pixel_map(diag, shape=(28, 28)) -> torch.Tensor:
    """A per-pixel feature diagonal (or a square matrix's diagonal) as an (H, W) image, summed over channels for a
    (C, H, W) shape: what the paper's figures show for diag(M) and for the diagonal of a network's W^T W.

    Parameters
    ----------
    diag : array-like or torch.Tensor, shape (p,) or (p, p)
        A per-pixel feature diagonal, or a square matrix (its diagonal is used).
    shape : tuple of int, default (28, 28)
        The image shape, (H, W) or (C, H, W).

    Returns
    -------
    torch.Tensor, shape (H, W)

    Raises
    ------
    ValueError
        If the diagonal does not have C H W entries.
    """
    C, H, W = _check_shape(shape)
    d = _as_diagonal(diag)
    if d.numel() != C * H * W:
        raise ValueError(f"the diagonal has {d.numel()} entries, an image of shape {shape} has {C * H * W}")
    return d.reshape(C, H, W).sum(0)


# ----------------------------------------------------------------------------------------------------------------
# The paper's data sets, online through torchvision (the book's smoke runs use MNIST substitutes instead)


def load_stl10(root, *, classes=None, download=True, dtype="float32"):
    """STL-10 (3 x 96 x 96, labels 0-9: 0 airplane, ..., 9 truck) from torchvision's labelled train and test
    splits, pixels in [0, 1], flattened channel first; ``classes`` selects and relabels as :func:`rfm.data.split_data`
    does. The grokking experiment of the paper uses airplanes and trucks. Needs torchvision and a download.

    Parameters
    ----------
    root : str or path
        Where torchvision keeps STL-10.
    classes : sequence of int, optional
        A sub-task.
    download : bool, default True
        Let torchvision download the data when missing.
    dtype : str or torch.dtype, default "float32"
        The dtype of X.

    Returns
    -------
    rfm.data.datasets.Split
        X (n, 27648) in [0, 1], y int64 labels; the train split then the test split.
    """
    tvd = data.torchvision_datasets()
    parts = []
    for split in ("train", "test"):
        ds = tvd.STL10(root=str(root), split=split, download=download)
        X, y = data.select_classes(np.asarray(ds.data), np.asarray(ds.labels).astype(np.int64), classes)
        parts += [data.to_features(X, 255.0, True, False, dtype), torch.as_tensor(y)]
    return data.Split(*parts)


def load_mnist_full(root, *, size: int = 28, channels: int = 1, download=True, dtype="float32"):
    """The full MNIST (60,000 + 10,000 digits) from torchvision, pixels in [0, 1], resized to ``size`` x ``size``
    (bilinear) and repeated over ``channels``: ``size=32, channels=3`` gives the MNIST half of the paper's
    CIFAR-10 + MNIST images. Needs torchvision and a download.

    Parameters
    ----------
    root : str or path
        Where torchvision keeps MNIST.
    size : int, default 28
        Side of the images.
    channels : int, default 1
        Channels (the digit repeated).
    download : bool, default True
        Let torchvision download the data when missing.
    dtype : str or torch.dtype, default "float32"
        The dtype of X.

    Returns
    -------
    rfm.data.datasets.Split
        X (n, channels size^2), y int64 labels; 60,000 training and 10,000 test digits.
    """
    check_number("size", size, low=1, integer=True)
    check_number("channels", channels, low=1, integer=True)
    tvd = data.torchvision_datasets()
    parts = []
    for train in (True, False):
        ds = tvd.MNIST(root=str(root), train=train, download=download)
        X = torch.as_tensor(np.asarray(ds.data), dtype=torch.float32)[:, None] / 255.0
        if size != X.shape[-1]:
            X = torch.nn.functional.interpolate(X, size=(size, size), mode="bilinear", align_corners=False)
        X = X.expand(-1, channels, -1, -1).reshape(len(X), -1).to(resolve_dtype(dtype))
        parts += [X, torch.as_tensor(np.asarray(ds.targets)).long()]
    return data.Split(*parts)


# ----------------------------------------------------------------------------------------------------------------
# Local signals for convolutional models: bars, the star, a digit in a noisy frame


def _placed(n, size, template, sigma, amplitude, channels, signal_channels, rows, cols, g, dtype, mode,
            present=None):
    """Noise N(0, sigma^2) images (n, C, size, size) with ``template`` (a boolean (h, w) array) of height
    ``amplitude`` added (or set, ``mode``) at top-left corners drawn uniformly from ``rows`` x ``cols`` (inclusive
    ranges) in the first ``signal_channels`` channels of the images where ``present``; and the boolean masks of
    the planted pixels."""
    check_choice("mode", mode, ("add", "set"))
    X = torch.randn(n, channels, size, size, generator=g, dtype=torch.float64) * sigma
    mask = torch.zeros(n, channels, size, size, dtype=torch.bool)
    r = torch.randint(rows[0], rows[1] + 1, (n,), generator=g)
    c = torch.randint(cols[0], cols[1] + 1, (n,), generator=g)
    h, w = template.shape
    for i in range(n):
        if present is None or bool(present[i]):
            mask[i, :signal_channels, r[i]:r[i] + h, c[i]:c[i] + w] = template
    if mode == "set":
        X[mask] = float(amplitude)
    else:
        X = X + amplitude * mask
    return X.reshape(n, -1).to(resolve_dtype(dtype)), mask.reshape(n, -1)


def _balanced_labels(n, g):
    y = torch.zeros(n, dtype=torch.long)
    y[n // 2:] = 1
    return y[torch.randperm(n, generator=g)]


def bars_task(n: int, *, size: int = 16, bar=(3, 7), sigma: float = 0.5, amplitude: float = 1.0,
              mode: str = "add", generator=0, dtype="float32") -> ImageTask:
    """Oriented bars on noise: class 0 carries a ``bar[0]`` x ``bar[1]`` bar (3 x 7: horizontal), class 1 the
    transposed one (7 x 3: vertical), of height ``amplitude`` at a uniformly random position inside a ``size`` x
    ``size`` image of N(0, sigma^2) noise (``mode="set"`` replaces the noise on the bar instead); half the
    images of each class (in a seeded random order).

    A task for the convolutional NFA: an edge/bar detector is the feature to learn.

    Parameters
    ----------
    n : int
        Images (>= 2).
    size : int, default 16
        Side of the images.
    bar : pair of int, default (3, 7)
        (height, width) of class 0's bar.
    sigma : float, default 0.5
        Noise standard deviation.
    amplitude : float, default 1.0
        The bar's height.
    mode : {"add", "set"}, default "add"
        Add the bar to the noise or write it.
    generator : int or torch.Generator, default 0
        Seeds the draws.
    dtype : str or torch.dtype, default "float32"
        The dtype of X.

    Returns
    -------
    ImageTask
        Flattened images (n, size^2), labels, and the per-image masks (n, size^2) of the bar pixels.
    """
    check_number("n", n, low=2, integer=True)
    check_number("size", size, low=1, integer=True)
    bh, bw = _pair("bar", bar, "(height, width), e.g. (3, 7)")
    if min(bh, bw) < 1 or max(bh, bw) > size:
        raise ValueError(f"bar {bar!r} must have sides between 1 and size={size}")
    _real("sigma", sigma)
    check_number("sigma", sigma, low=0)
    _real("amplitude", amplitude)
    g = make_generator(generator)
    y = _balanced_labels(n, g)
    X = torch.empty(n, size * size, dtype=resolve_dtype(dtype))
    mask = torch.empty(n, size * size, dtype=torch.bool)
    for label, (h, w) in ((0, (bh, bw)), (1, (bw, bh))):
        rows = torch.nonzero(y == label)[:, 0]
        Xc, mc = _placed(len(rows), size, torch.ones(h, w, dtype=torch.bool), sigma, amplitude, 1, 1,
                         (0, size - h), (0, size - w), g, dtype, mode)
        X[rows], mask[rows] = Xc, mc
    return ImageTask(X, y, mask)


#: The star of the ConvRFM star task (read in aradha/agop_feature_learning, kernel_machine_agop/conv_rfm/
#: crfm_src/star_dataset.py, ``draw_star``): a 7 x 7 template whose top-left sits at (3 + q, 7 + r).
STAR = torch.tensor([[0, 0, 0, 1, 0, 0, 0],
                     [0, 0, 1, 1, 1, 0, 0],
                     [1, 1, 1, 1, 1, 1, 1],
                     [0, 1, 1, 1, 1, 1, 0],
                     [0, 0, 1, 1, 1, 0, 0],
                     [0, 1, 1, 1, 1, 1, 0],
                     [0, 1, 1, 0, 1, 1, 0]], dtype=torch.bool)


def star_task(n: int, *, size: int = 32, sigma: float = 0.3, amplitude: float = 1.0, channels: int = 3,
              star_channels: int = 2, mode: str = "set", generator=0, dtype="float32") -> ImageTask:
    """The ConvRFM star task: N(0, sigma^2) noise images (channels x size x size); class 1 has the :data:`STAR`
    added (``amplitude``) in the first ``star_channels`` channels at offsets q, r uniform in 0..size-15, its
    top-left corner at (3 + q, 7 + r); class 0 is noise only. Half the images of each class, in a seeded random
    order.

    The defaults are those of the authors' ``star_dataset`` (32 x 32 x 3, noise std 0.3, the star pixels *set*
    to 1 in two channels; ``mode="add"`` adds it to the noise instead).

    Parameters
    ----------
    n : int
        Images (>= 2).
    size : int, default 32
        Side of the images (>= 15).
    sigma : float, default 0.3
        Noise standard deviation.
    amplitude : float, default 1.0
        The star's value.
    channels : int, default 3
        Channels.
    star_channels : int, default 2
        Channels that carry the star.
    mode : {"add", "set"}, default "set"
        Add the star to the noise or write it.
    generator : int or torch.Generator, default 0
        Seeds the draws.
    dtype : str or torch.dtype, default "float32"
        The dtype of X.

    Returns
    -------
    ImageTask
        Flattened images (n, channels size^2), labels, and the per-image star masks.
    """
    check_number("n", n, low=2, integer=True)
    check_number("size", size, low=15, integer=True)
    check_number("channels", channels, low=1, integer=True)
    check_number("star_channels", star_channels, low=1, high=channels, integer=True)
    _real("sigma", sigma)
    check_number("sigma", sigma, low=0)
    _real("amplitude", amplitude)
    g = make_generator(generator)
    y = _balanced_labels(n, g)
    X, mask = _placed(n, size, STAR, sigma, amplitude, channels, star_channels, (3, size - 12), (7, size - 8), g,
                      dtype, mode, present=y == 1)
    return ImageTask(X, y, mask)


def noisy_frame(X, y, *, shape=(28, 28), frame=(42, 42), std: float = 1.0, generator=0) -> ImageTask:
    """Each image of X (flattened, of ``shape``) placed at a uniformly random position in a larger ``frame`` of
    N(0, std^2) noise (the top-left corner in 0..frame-shape-1 along each axis, as the authors' noisy-MNIST
    generator ``gen_toy_data.py`` draws it): a local signal at an unknown position.

    Parameters
    ----------
    X : array-like or torch.Tensor, shape (n, p)
        Flattened images.
    y : array-like of int, shape (n,)
        Labels.
    shape : tuple of int, default (28, 28)
        The image shape, (H, W) or (C, H, W).
    frame : pair of int, default (42, 42)
        (height, width) of the frame, larger than the images.
    std : float, default 1.0
        Noise standard deviation.
    generator : int or torch.Generator, default 0
        Seeds the draws.

    Returns
    -------
    ImageTask
        The framed images (n, C frame_h frame_w), the labels y, and the per-image masks of the image pixels.
    """
    C, H, W = _check_shape(shape)
    X = _images(X)
    y = _labels(y)
    if X.shape[1] != C * H * W:
        raise ValueError(f"X must have shape (n, {C * H * W}) for images of shape {shape}, got {tuple(X.shape)}")
    if len(y) != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {len(y)}")
    FH, FW = _pair("frame", frame, "(height, width), e.g. (42, 42)")
    if FH <= H or FW <= W:
        raise ValueError(f"frame {frame!r} must be larger than the images {(H, W)} along both axes")
    _real("std", std)
    check_number("std", std, low=0)
    g = make_generator(generator)
    n = X.shape[0]
    out = torch.randn(n, C, FH, FW, generator=g, dtype=torch.float64) * std
    mask = torch.zeros(n, C, FH, FW, dtype=torch.bool)
    r = torch.randint(0, FH - H, (n,), generator=g)
    c = torch.randint(0, FW - W, (n,), generator=g)
    imgs = X.detach().cpu().to(torch.float64).reshape(n, C, H, W)
    for i in range(n):
        out[i, :, r[i]:r[i] + H, c[i]:c[i] + W] = imgs[i]
        mask[i, :, r[i]:r[i] + H, c[i]:c[i] + W] = True
    dtype = X.dtype if X.is_floating_point() else torch.float32
    return ImageTask(out.reshape(n, -1).to(dtype=dtype, device=X.device), y, mask.reshape(n, -1))


def random_pixel_shifts(X, p: int, *, generator) -> torch.Tensor:
    """p images drawn with replacement from square images X, each rolled (cyclically) by -1, 0 or 1 pixel along
    each axis: more "training-like" points than there are images (EigenPro 3's centres beyond n).

    Parameters
    ----------
    X : torch.Tensor of shape (n, side * side)
        Flattened square single-channel images.
    p : int
        Number of images to make.
    generator : torch.Generator
        Draws the images (first) and the shifts, on the CPU.

    Returns
    -------
    torch.Tensor of shape (p, side * side)
        The shifted images, on X's device.
    """
    n, d = X.shape
    side = int(round(d ** 0.5))
    if side * side != d:
        raise ValueError(f"X must hold flattened square images, got dimension {d}")
    base = X[torch.randint(0, n, (p,), generator=generator).to(X.device)].reshape(p, side, side)
    shifts = torch.randint(-1, 2, (p, 2), generator=generator)
    Z = torch.stack([torch.roll(img, (int(a), int(b)), (0, 1)) for img, (a, b) in zip(base, shifts)])
    return Z.reshape(p, d)
