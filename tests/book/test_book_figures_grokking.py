"""rfm.book.plots.signed_image and grokking_progress, and rfm.book.text.span."""
import numpy as np
import pytest

from rfm.book.plots import grokking_progress, signed_image
from rfm.book.text import span


def test_span_reads_one_value_or_a_range():
    assert span([0.912, 0.988]) == "0.91 to 0.99"
    assert span([0.991, 0.994]) == "0.99"
    assert span([3, 7, 5], "{}") == "3 to 7"


@pytest.mark.usefixtures("close_figures")
def test_signed_image_zeroes_the_diagonal_and_scales_symmetrically():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    A = np.array([[9.0, -2.0], [1.0, 9.0]])
    image = signed_image(ax, A, "A", zero_diagonal=True, split=1)
    assert np.array_equal(image.get_array(), [[0.0, -2.0], [1.0, 0.0]])
    assert image.get_clim() == (-2.0, 2.0)
    assert A[0, 0] == 9.0  # the input is left as it is
    assert len(ax.lines) == 2 and ax.get_title() == "A"


@pytest.mark.usefixtures("close_figures")
def test_grokking_progress_draws_four_panels_and_shades_the_transition():
    n = 5
    cv = dict(iteration=np.arange(n), train_acc=np.ones(n), test_acc=np.array([0, 0, 0.3, 0.8, 1.0]),
              test_mse=np.linspace(1, 0.2, n), train_mse_measured=np.zeros(n), test_correct_mse=np.linspace(1, 0, n),
              circulant_deviation=np.array([np.nan, 0.9, 0.5, 0.2, 0.1]), align=np.linspace(0.5, 1, n),
              align_block=np.array([np.nan, 0.2, 0.5, 0.8, 1.0]), last_flat=1, first_half=3)
    fig = grokking_progress(cv, "title")
    assert len(fig.axes) == 4
    assert all(len(ax.patches) == 1 for ax in fig.axes)  # the shaded transition
