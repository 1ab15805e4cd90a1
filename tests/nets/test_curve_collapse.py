"""rfm.nets.curves.half_time and rescaled_gap: loss curves compared after rescaling time."""
import numpy as np
import pytest

from rfm.nets.curves import half_time, rescaled_gap


def test_half_time_by_hand():
    assert half_time([4.0, 3.0, 2.0, 1.0]) == 2
    assert half_time([1.0, 0.9, 0.8]) == 3          # never halves: the length


def test_curves_of_one_shape_collapse_and_others_do_not():
    grid = np.linspace(0, 3, 61)
    t = np.arange(400)
    fast, slow = np.exp(-t / 10.0), np.exp(-t / 40.0)      # one shape at two speeds: time / half-time aligns them
    assert rescaled_gap(fast, slow, grid) < 0.02
    # a curve with a plateau before the drop has another shape
    plateau = np.where(t < 100, 1.0, np.exp(-(t - 100) / 10.0))
    assert rescaled_gap(fast, plateau, grid) > 0.3


def test_a_constant_offset_in_log10_is_the_gap():
    grid = np.linspace(0, 1, 11)
    c = np.exp(-np.arange(50) / 5.0)
    # multiplying by 10 keeps the half-time and moves log10 by 1 everywhere
    assert rescaled_gap(c, 10 * c, grid) == pytest.approx(1.0)
