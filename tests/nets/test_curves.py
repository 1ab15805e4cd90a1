"""Measures of training curves (rfm.nets.curves), on known answers."""
import warnings

import numpy as np
import pytest

from rfm.nets import curves


def test_first_reaching():
    assert curves.first_reaching([0, 5, 10, 15], [0.0, 0.2, 0.99, 1.0], 0.99) == 10
    assert curves.first_reaching([0, 5, 10], [3.0, 2.0, 1.0], 2.0, below=True) == 5
    assert curves.first_reaching([0, 1], [0.1, 0.2], 0.5) is None
    assert curves.first_reaching([0, 1], [0.1, 0.2], 0.5, default=2) == 2
    with pytest.raises(ValueError):
        curves.first_reaching([0, 1], [0.1], 0.5)


def test_half_time_of_an_exponential_decay_is_log_2_over_the_rate():
    # c_t = exp(-r t): the first t with c_t <= c_0 / 2 is ceil(log 2 / r)
    r = 0.01
    c = np.exp(-r * np.arange(500))
    assert curves.first_reaching(range(len(c)), c, 0.5 * c[0], below=True) == int(np.ceil(np.log(2) / r))


def test_mode_onsets_are_first_reaching_per_column():
    assert curves.mode_onsets(range(4), [[0, 0], [1, 0], [2, 3], [2, 4]], fraction=0.5) == [1, 2]
    assert curves.mode_onsets(range(3), [[1.0], [0.6], [0.2]], [1.0], below=True) == [2]
    # a logistic mode x(t) = 1 / (1 + 99 exp(-t)) reaches 1/2 at t = log 99
    t = np.arange(0, 20, 0.01)
    x = 1 / (1 + 99 * np.exp(-t))
    assert curves.mode_onsets(t, x, [1.0])[0] == pytest.approx(np.log(99), abs=0.01)


def test_plateau_fraction():
    loss = np.concatenate([np.full(30, 3.0), np.full(30, 2.0), np.full(40, 1.0)])
    assert curves.plateau_fraction(loss) == 0.30
    assert curves.plateau_fraction([1.0, 0.99, 0.97, 0.5, 0.1], tol=0.05) == pytest.approx(0.6)
    assert curves.plateau_fraction([1.0, 0.99, 0.97, 0.5, 0.1]) == pytest.approx(0.4)   # tol 0.01: 0.97 < 0.99
    assert curves.plateau_fraction([1.0, 1.0]) == 1.0
    with pytest.raises(ValueError, match="NaN"):
        curves.plateau_fraction([1.0, np.nan])


def test_the_parametrisation_plateau_fraction_is_the_one_with_tol_0_05():
    from rfm.nets import parametrisation as P
    c = [1.0, 0.99, 0.97, 0.5, 0.1]
    with pytest.warns(DeprecationWarning, match="curves.plateau_fraction"):
        assert P.plateau_fraction(c) == curves.plateau_fraction(c, tol=0.05)


def test_stepwise_names_are_the_curves_functions():
    from rfm.nets import stepwise as sw
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("mode_onsets", "plateau_fraction", "plateau_levels", "loss_drops", "count_drops"):
            assert getattr(sw, name) is getattr(curves, name)


def test_drops_and_levels():
    loss = np.concatenate([np.full(30, 3.0), np.full(30, 2.0), np.full(30, 1.0), np.linspace(1.0, 0.9, 10)])
    drops = curves.loss_drops(loss, rel_drop=0.1, window=0.01)
    assert len(drops) == 2 and all(abs(d["size"] - 1) < 1e-12 for d in drops)
    assert curves.plateau_levels(loss, [0, 1, 2, 3]) == [1, 2, 3]
    assert curves.count_drops(np.linspace(3, 0, 100), rel_drop=0.04, window=0.05) == 1


def test_count_spikes_counts_excursions_above_twice_the_running_minimum():
    from rfm.nets import dynamics
    assert dynamics.count_spikes is curves.count_spikes
    assert curves.count_spikes([4.0, 2.0, 1.0, 5.0, 0.9, 0.5, 3.0, 0.4]) == 2
    assert curves.count_spikes([3.0, 2.0, 1.0]) == 0
    assert curves.count_spikes([1.0, 0.5, float("inf")]) == 1        # divergence is one spike


def test_spike_intervals_are_the_spikes_that_count_spikes_counts():
    losses = [4.0, 2.0, 1.0, 5.0, 0.9, 0.5, 3.0, 2.5, 0.4]
    assert curves.spike_intervals(losses) == [(2, 4), (5, 8)]
    assert len(curves.spike_intervals(losses)) == curves.count_spikes(losses)
    assert curves.spike_intervals([1.0, 0.5, 2.0, float("nan")]) == [(1, 3)]
    assert curves.count_spikes([1.0, 0.5, 2.0, float("nan")]) == 1
    assert curves.spike_intervals([3.0, 2.0, 1.0]) == []
