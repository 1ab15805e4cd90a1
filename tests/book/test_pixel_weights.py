"""rfm.book.plots.pixel_weights: a per-pixel weight drawn as an image with labelled axes."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import torch

from rfm.book.plots import pixel_weights


def test_the_image_is_the_weights_in_row_major_order_with_labelled_axes():
    fig, ax = plt.subplots()
    im = pixel_weights(ax, torch.arange(6.0), (2, 3), "diag(M)", cmap="magma")
    np.testing.assert_array_equal(im.get_array(), [[0, 1, 2], [3, 4, 5]])
    assert ax.get_title() == "diag(M)"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("pixel column", "pixel row")
    assert im.get_cmap().name == "magma"


def test_channels_are_summed_and_a_matrix_gives_its_diagonal():
    fig, (a, b) = plt.subplots(1, 2)
    im = pixel_weights(a, torch.ones(2 * 2 * 2), (2, 2, 2))
    np.testing.assert_array_equal(im.get_array(), np.full((2, 2), 2.0))
    im = pixel_weights(b, torch.diag(torch.tensor([1.0, 2.0, 3.0, 4.0])), (2, 2))
    np.testing.assert_array_equal(im.get_array(), [[1, 2], [3, 4]])
