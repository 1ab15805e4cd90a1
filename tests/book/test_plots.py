"""The shared figure helpers draw labelled figures from tensors or arrays, headless (Agg), on tiny inputs."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from rfm.book import plots


@pytest.fixture(autouse=True)
def _close_after_each(close_figures):
    yield


def labelled(ax):
    return bool(ax.get_xlabel()) and bool(ax.get_ylabel())


def image_axes(fig):
    return [ax for ax in fig.axes if ax.images]


def test_matrix_images_shares_one_colour_scale_by_default():
    mats = [torch.eye(4), 2 * torch.eye(4), -torch.eye(4)]
    fig = plots.matrix_images(mats, ["a", "b", "c"])
    assert isinstance(fig, Figure)
    axes = image_axes(fig)
    assert len(axes) == 3
    assert {ax.images[0].get_clim() for ax in axes} == {(-2.0, 2.0)}   # diverging scale centred at 0
    assert labelled(axes[0]) and all(ax.get_xlabel() for ax in axes)
    assert [ax.get_title() for ax in axes] == ["a", "b", "c"]


def test_matrix_images_without_shared_scale_gives_each_panel_its_own():
    fig = plots.matrix_images([np.eye(3), 5 * np.eye(3)], shared_scale=False)
    clims = [ax.images[0].get_clim() for ax in image_axes(fig)]
    assert clims == [(0.0, 1.0), (0.0, 5.0)]
    assert labelled(image_axes(fig)[0])


def test_matrix_images_block_shows_the_top_left_corner_with_one_based_ticks():
    A = torch.arange(36.0).reshape(6, 6)
    fig = plots.matrix_images(A, block=3)
    ax = image_axes(fig)[0]
    assert ax.images[0].get_array().shape == (3, 3)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3"]


def test_matrix_images_log_scale_floors_small_and_zero_entries():
    A = torch.diag(torch.tensor([1.0, 1e-2, 0.0]))
    fig = plots.matrix_images(A, log=True, log_floor=1e-3)
    ax = image_axes(fig)[0]
    norm = ax.images[0].norm
    assert (norm.vmin, norm.vmax) == pytest.approx((1e-3, 1.0))
    assert float(np.min(ax.images[0].get_array())) == pytest.approx(1e-3)
    assert labelled(ax)


def test_matrix_images_rejects_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        plots.matrix_images([torch.ones(3)])
    with pytest.raises(ValueError, match="titles"):
        plots.matrix_images([torch.eye(2)], ["a", "b"])


def test_matrix_pair_draws_two_labelled_panels():
    fig = plots.matrix_pair(torch.eye(3), torch.ones(3, 3), titles=("M", "AGOP"))
    axes = image_axes(fig)
    assert [ax.get_title() for ax in axes] == ["M", "AGOP"]
    assert labelled(axes[0]) and axes[1].get_xlabel()


def test_spectrum_of_one_matrix_is_normalised_bars_largest_first():
    fig = plots.spectrum(torch.diag(torch.tensor([1.0, 4.0, 2.0])), k=3, log=False)
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx([1.0, 0.5, 0.25])
    assert labelled(ax)


def test_spectrum_accepts_eigenvalues_several_series_and_colours():
    fig = plots.spectrum([np.array([3.0, 1.0]), torch.eye(2)], ["a", "b"], kind="line", normalize=None)
    ax = fig.axes[0]
    assert len(ax.lines) == 2 and labelled(ax)
    fig = plots.spectrum(torch.eye(3), k=3, color_by=[1.0, 0.5, 0.0], color_label="mass")
    assert labelled(fig.axes[0]) and fig.axes[1].get_ylabel() == "mass"   # the colour bar


def test_spectrum_draws_into_a_given_axis():
    fig, (a, b) = plt.subplots(1, 2)
    assert plots.spectrum(torch.eye(2), ax=b) is fig
    assert labelled(b) and not labelled(a)


def test_spectrum_rejects_bad_input():
    with pytest.raises(ValueError, match="square"):
        plots.spectrum(torch.ones(2, 3))
    with pytest.raises(ValueError, match="single spectrum"):
        plots.spectrum([torch.eye(2), torch.eye(2)], color_by=[0, 1])
    with pytest.raises(ValueError, match="normalize"):
        plots.spectrum(torch.eye(2), normalize="trace")


def test_curves_draws_series_and_reference_lines():
    fig = plots.curves(range(3), {"R2": [0.1, 0.5, 0.9]}, ylabel="test R2", hlines={"plain": 0.1})
    ax = fig.axes[0]
    assert len(ax.lines) == 2
    assert ax.get_xlabel() == "iteration" and ax.get_ylabel() == "test R2"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["R2", "plain"]


def test_curves_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="shape"):
        plots.curves([0, 1], {"a": [1.0, 2.0, 3.0]}, ylabel="y")


def test_matrix_images_wraps_into_rows_of_ncols_panels():
    fig = plots.matrix_images([torch.eye(2)] * 5, ncols=3)
    shown = image_axes(fig)
    assert len(shown) == 5
    assert sum(not ax.get_visible() for ax in fig.axes) == 1   # the sixth cell of the 2 x 3 grid is empty
    assert [bool(ax.get_ylabel()) for ax in shown] == [True, False, False, True, False]
