"""rfm.selection.tuning.pareto_slope and hypervolume_curve on searches whose answer is known."""
import numpy as np
import pytest

from rfm.selection import tuning as T


def _result(N, D, values):
    N, D = np.asarray(N, float), np.asarray(D, float)
    return {"costs": 6.0 * N * D, "values": np.asarray(values, float),
            "points": [{"N": n, "D": d} for n, d in zip(N, D)]}


def test_pareto_slope_recovers_a_planted_law():
    # every point is on the Pareto front (cost up, loss down) and N = C^0.5 exactly
    C = np.logspace(10, 20, 6)
    N = C ** 0.5
    r = _result(N, C / (6 * N), -np.arange(6.0))
    assert T.pareto_slope(r, "N") == pytest.approx(0.5)


def test_pareto_slope_of_a_single_point_front_is_nan():
    r = _result([1e6, 1e7], [1e6, 1e7], [1.0, 2.0])        # the cheaper point is also better: a front of one
    assert np.isnan(T.pareto_slope(r))


def test_hypervolume_curve_is_the_hypervolume_of_each_prefix():
    r = _result([1e6, 1e7, 1e8], [1e6, 1e6, 1e6], [3.0, 2.0, 1.0])
    ref = (20.0, 4.0)
    lc = np.log10(r["costs"])
    want = [T.hypervolume(lc[:m], r["values"][:m], ref) for m in (1, 2, 3)]
    np.testing.assert_array_equal(T.hypervolume_curve(r, ref), want)
    assert np.all(np.diff(want) >= 0)
