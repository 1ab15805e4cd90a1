"""The memory policy: how many rows of an (m x n) kernel block are computed at once.

Every n x n-sized computation in the package (kernel matrices, predictions, gradients, the AGOP) walks over the
rows of its evaluation points in blocks sized by one working-memory budget, so that memory stays bounded whatever
n is. The budget is ``mem_bytes`` where a function takes it, else :func:`default_mem_bytes`.
"""
from __future__ import annotations

import torch

from .._checks import check_number


def iter_blocks(m: int, rows: int):
    """Slices ``[0, rows), [rows, 2 rows), ...`` covering ``range(m)``.

    Parameters
    ----------
    m : int
        The number of rows to cover.
    rows : int
        Rows per block (>= 1).

    Yields
    ------
    slice
        Consecutive slices; the last one may be shorter.
    """
    for start in range(0, m, rows):
        yield slice(start, min(start + rows, m))


def block_rows(n_cols: int, per_row_cols: int, itemsize: int, mem_bytes: int) -> int:
    """Rows per block so that about ``per_row_cols`` numbers per row fit in ``mem_bytes`` (at least one row).

    Parameters
    ----------
    n_cols : int
        The number of columns of the block (not used by the formula; kept for the callers' signature).
    per_row_cols : int
        Numbers held per row of the block.
    itemsize : int
        Bytes per number.
    mem_bytes : int
        The memory budget.

    Returns
    -------
    int
        ``max(1, mem_bytes // (itemsize * per_row_cols))``.
    """
    return max(1, int(mem_bytes // max(1, itemsize * per_row_cols)))


def default_mem_bytes(device: torch.device) -> int:
    """Working-memory budget for one block: 1 GiB on a CPU, a quarter of the free memory on a GPU.

    Parameters
    ----------
    device : torch.device or str
        The device.

    Returns
    -------
    int
        Bytes.
    """
    if torch.device(device).type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free // 4)
    return 2**30


def resolve_mem_bytes(mem_bytes, device) -> int:
    """``mem_bytes`` checked (> 0), or the default budget of ``device`` when it is None.

    Parameters
    ----------
    mem_bytes : int or None
        A budget in bytes, or None.
    device : torch.device or str
        The device whose default budget (:func:`default_mem_bytes`) is used for None.

    Returns
    -------
    int
        Bytes.

    Raises
    ------
    TypeError, ValueError
        If ``mem_bytes`` is not a positive number.
    """
    if mem_bytes is None:
        return default_mem_bytes(device)
    return int(check_number("mem_bytes", mem_bytes, low=1))
