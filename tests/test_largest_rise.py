"""rfm.metrics.largest_rise: the steepest step up of a curve, in combined standard errors."""
import math

import pytest

from rfm.metrics import largest_rise


def test_largest_rise_by_hand():
    # steps: -1 / sqrt(0.09 + 0.16) = -2, +0.5 / 0.4 = 1.25
    assert largest_rise([3.0, 2.0, 2.5], [0.3, 0.4, 0.0]) == 1.25


def test_a_falling_curve_has_a_negative_rise():
    assert largest_rise([4.0, 3.0, 1.0], [1.0, 1.0, 1.0]) == pytest.approx(-1 / math.sqrt(2))


def test_mismatched_or_short_curves_are_refused():
    with pytest.raises(ValueError):
        largest_rise([1.0], [0.1])
    with pytest.raises(ValueError):
        largest_rise([1.0, 2.0], [0.1])
