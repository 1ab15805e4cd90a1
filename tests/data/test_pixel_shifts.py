"""rfm.data.images.random_pixel_shifts: training images rolled by at most one pixel."""
import pytest
import torch

from rfm.data.images import random_pixel_shifts


def test_every_image_is_a_drawn_image_rolled_by_at_most_one_pixel():
    X = torch.arange(5 * 16, dtype=torch.float64).reshape(5, 16)
    Z = random_pixel_shifts(X, 12, generator=torch.Generator().manual_seed(0))
    assert Z.shape == (12, 16)
    shifted = {tuple(torch.roll(x.reshape(4, 4), (a, b), (0, 1)).reshape(-1).tolist())
               for x in X for a in (-1, 0, 1) for b in (-1, 0, 1)}
    assert all(tuple(z.tolist()) in shifted for z in Z)


def test_the_draws_are_the_images_first_then_the_shifts():
    X = torch.randn(7, 9, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    g = torch.Generator().manual_seed(3)
    rows = torch.randint(0, 7, (4,), generator=g)
    shifts = torch.randint(-1, 2, (4, 2), generator=g)
    want = torch.stack([torch.roll(X[r].reshape(3, 3), (int(a), int(b)), (0, 1)).reshape(9)
                        for r, (a, b) in zip(rows, shifts)])
    assert torch.equal(random_pixel_shifts(X, 4, generator=torch.Generator().manual_seed(3)), want)


def test_non_square_images_are_refused():
    with pytest.raises(ValueError, match="square"):
        random_pixel_shifts(torch.zeros(2, 5), 3, generator=torch.Generator())
