"""Fixtures shared by the unit tests (the repository's conftest.py holds the chapter-execution cache).

The tests are in folders that mirror ``rfm/`` (core, models, nets, data, theory, selection, book), plus
``chapters/`` (notebook pairs, reruns, chapter paths) and ``package/`` (installation, wheel, pins). This folder is on
``sys.path`` while they run, so ``_reference`` (the RFM loop written out from its definition) imports from any of them.
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest


@pytest.fixture
def close_figures():
    """Close every matplotlib figure a test opened."""
    yield
    plt.close("all")
