"""Image constructions of the deep-learning-phenomena chapter, on small images with known answers."""
import sys

import pytest
import torch

from rfm.data import images as it


def _pool(n=40, d=784, seed=0):
    """Random images whose last pixel holds the row's id, so that a drawn row can be traced back to the pool."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=torch.float64)
    X[:, -1] = torch.arange(n, dtype=torch.float64)
    return X


# -- regions ------------------------------------------------------------------------------------------------------


def test_region_mask_marks_the_slice_in_every_channel():
    m = it.region_mask((2, 4, 5), (1, 3), (2, 5)).reshape(2, 4, 5)
    expected = torch.zeros(4, 5, dtype=torch.bool)
    expected[1:3, 2:5] = True
    assert torch.equal(m[0], expected) and torch.equal(m[1], expected)
    assert it.region_mask((4, 5), (0, 4), (0, 5)).all()


def test_square_mask_has_size_squared_pixels_at_its_position():
    m = it.square_mask((28, 28), 3, (1, 2)).reshape(28, 28)
    assert int(m.sum()) == 9 and bool(m[1:4, 2:5].all())


def test_regions_outside_the_image_are_rejected():
    with pytest.raises(ValueError, match="inside an image"):
        it.region_mask((28, 28), (26, 29), (0, 3))
    with pytest.raises(ValueError, match="shape must be"):
        it.region_mask((28,), (0, 1), (0, 1))


def test_stamp_changes_only_the_selected_rows_and_pixels_and_copies():
    X = torch.zeros(4, 6)
    mask = torch.tensor([True, False, True, False, False, False])
    out = it.stamp(X, mask, 0.5, rows=torch.tensor([False, True, True, False]))
    assert torch.equal(out[[0, 3]], X[[0, 3]])
    assert torch.equal(out[1], torch.tensor([0.5, 0, 0.5, 0, 0, 0]))
    assert float(X.abs().sum()) == 0.0  # the input is not modified
    set_twice = it.stamp(it.stamp(X + 1, mask, 0.25, mode="set"), mask, 0.25, mode="set")
    assert torch.equal(set_twice[:, mask], torch.full((4, 2), 0.25))
    with pytest.raises(ValueError, match="boolean vector"):
        it.stamp(X, torch.ones(5, dtype=torch.bool), 1.0)


# -- grokking: the square task ------------------------------------------------------------------------------------


def test_square_task_classes_differ_only_by_the_square():
    pool = _pool()
    mask = it.square_mask((28, 28), 3, (1, 1))
    task = it.square_task(pool, (12, 5), mask=mask, amplitude=0.3, generator=3)
    assert task.X.shape == (17, 784) and torch.bincount(task.y).tolist() == [12, 5]
    ids = task.X[:, -1].long()
    assert len(set(ids.tolist())) == 17  # drawn without replacement
    diff = task.X - pool[ids]
    torch.testing.assert_close(diff[task.y == 0], torch.zeros(12, 784, dtype=torch.float64))
    torch.testing.assert_close(diff[task.y == 1][:, mask], torch.full((5, 9), 0.3, dtype=torch.float64))
    assert float(diff[:, ~mask].abs().max()) == 0.0
    assert torch.equal(task.mask, mask)


def test_square_task_is_seeded():
    pool = _pool()
    a, b = it.square_task(pool, (10, 4), generator=1), it.square_task(pool, (10, 4), generator=1)
    c = it.square_task(pool, (10, 4), generator=2)
    assert torch.equal(a.X, b.X) and torch.equal(a.y, b.y) and not torch.equal(a.X, c.X)


def test_square_task_set_mode_writes_the_paper_patch_and_blanks_class_zero():
    pool = _pool(d=3 * 8 * 8)
    mask = it.square_mask((3, 8, 8), 2, (0, 3))
    task = it.square_task(pool, (6, 3), mask=mask, amplitude=1.0, mode="set")
    assert bool((task.X[task.y == 1][:, mask] == 1.0).all()) and bool((task.X[task.y == 0][:, mask] == 0.0).all())


def test_square_task_draws_each_class_from_its_labelled_pool():
    pool = _pool(n=30)
    labels = torch.arange(30) % 3  # pool labels 0, 1, 2
    task = it.square_task(pool, (5, 4), labels=labels, classes=(2, 0), amplitude=0.0)
    ids = task.X[:, -1].long()
    assert bool((labels[ids[task.y == 0]] == 2).all()) and bool((labels[ids[task.y == 1]] == 0).all())
    with pytest.raises(ValueError, match="has 10 images"):
        it.square_task(pool, (11, 1), labels=labels, classes=(2, 0))


def test_square_task_noise_has_the_requested_spread():
    task = it.square_task(torch.zeros(4000, 784), (2000, 2000), amplitude=0.0, noise=0.5)
    assert abs(float(task.X.std()) - 0.5) < 0.005


# -- lottery tickets: masks and masses ------------------------------------------------------------------------------


def test_threshold_mask_keeps_entries_above_the_fraction_of_the_largest():
    d = torch.tensor([1.0, 0.04, 0.06, 0.5, 0.0])
    assert it.threshold_mask(d, 0.05).tolist() == [True, False, True, True, False]
    assert torch.equal(it.threshold_mask(torch.diag(d), 0.05), it.threshold_mask(d, 0.05))  # a matrix: its diagonal


def test_top_k_mask_keeps_the_k_largest():
    assert it.top_k_mask(torch.tensor([0.1, 3.0, 2.0, 0.5]), 2).tolist() == [False, True, True, False]


def test_region_mass_is_the_pixel_share_for_a_flat_diagonal_and_one_for_a_concentrated_one():
    mask = it.square_mask((28, 28), 3, (1, 1))
    assert it.region_mass(torch.ones(784), mask) == pytest.approx(9 / 784)
    assert it.region_mass(mask.double(), mask) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="non-negative"):
        it.region_mass(-torch.ones(784), mask)
    with pytest.raises(ValueError, match="zero diagonal"):
        it.region_mass(torch.zeros(784), mask)


# -- simplicity bias: two halves ----------------------------------------------------------------------------------


def test_concat_halves_puts_left_and_right_side_by_side_in_every_channel():
    left = torch.zeros(2, 2 * 3 * 4)
    right = torch.ones(2, 2 * 3 * 4)
    both = it.concat_halves(left, right, (2, 3, 4)).reshape(2, 2, 3, 8)
    assert float(both[..., :4].abs().sum()) == 0.0 and bool((both[..., 4:] == 1).all())
    flat = it.concat_halves(left, right, (2, 3, 4))
    assert it.region_mass(1 - flat[0], it.half_mask((2, 3, 4), "left")) == pytest.approx(1.0)


def test_pick_by_label_finds_the_same_or_another_class():
    pool_y = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2])
    want = torch.tensor([2, 0, 1, 1, 0])
    same = it.pick_by_label(want, pool_y, generator=0)
    other = it.pick_by_label(want, pool_y, other_class=True, generator=0)
    assert torch.equal(pool_y[same], want) and bool((pool_y[other] != want).all())


def test_two_half_task_keeps_the_label_and_replaces_the_requested_half():
    # an easy image of class c is the constant c, a hard one the constant 10 + c: the halves can be read back
    y = torch.arange(20) % 4
    easy = y[:, None].double().expand(20, 16).clone()
    hard = (10 + y[:, None]).double().expand(20, 16).clone()
    for replace in (None, "easy", "hard"):
        task = it.two_half_task(easy, y, hard, y, replace=replace, shape=(4, 4), generator=1)
        left, right = task.X[:, task.mask][:, 0], task.X[:, ~task.mask][:, 0]
        assert torch.equal(task.y, y)
        assert bool((left == y).all()) == (replace != "easy")
        assert bool((left != y).all()) == (replace == "easy")
        assert bool((right == 10 + y).all()) == (replace != "hard")
        assert bool((right != 10 + y).all()) == (replace == "hard")


def test_rotating_by_a_quarter_turn_moves_the_top_to_the_left():
    img = torch.zeros(1, 5, 5)
    img[0, 0, 2] = 1.0  # top middle
    out = it.rotate_images(img.reshape(1, 25), 90.0, (5, 5)).reshape(5, 5)
    expected = torch.zeros(5, 5)
    expected[2, 0] = 1.0  # counter-clockwise: left middle
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=0)
    X = torch.rand(3, 2 * 6 * 6, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(it.rotate_images(X, torch.zeros(3), (2, 6, 6)), X, atol=1e-6, rtol=0)
    torch.testing.assert_close(it.rotate_images(it.rotate_images(X, 180.0, (2, 6, 6)), 180.0, (2, 6, 6)), X,
                               atol=1e-5, rtol=0)


# -- spurious features: the marker ----------------------------------------------------------------------------------


def test_add_marker_marks_each_class_at_its_rate():
    y = torch.arange(4000) % 2
    X = torch.zeros(4000, 16)
    mask = it.square_mask((4, 4), 2, (0, 0))
    _, marked = it.add_marker(X, y, mask, (0.0, 1.0))
    assert torch.equal(marked, y.bool())
    Xm, marked = it.add_marker(X, y, mask, (0.05, 0.95), value=0.5, generator=2)
    assert abs(float(marked[y == 1].double().mean()) - 0.95) < 0.02
    assert abs(float(marked[y == 0].double().mean()) - 0.05) < 0.02
    assert bool((Xm[marked][:, mask] == 0.5).all()) and float(Xm[~marked].abs().sum()) == 0.0
    with pytest.raises(ValueError, match="one probability"):
        it.add_marker(X, y, mask, (0.5, 1.5))


def test_pixel_map_sums_the_channels_into_an_image():
    d = torch.arange(2 * 3 * 4, dtype=torch.float64)
    img = it.pixel_map(d, (2, 3, 4))
    torch.testing.assert_close(img, d.reshape(2, 3, 4).sum(0))
    with pytest.raises(ValueError, match="has 24 entries"):
        it.pixel_map(d, (28, 28))


# -- the paper's data sets, through torchvision -------------------------------------------------------------------


def test_paper_loaders_say_how_to_get_torchvision(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchvision", None)
    monkeypatch.setitem(sys.modules, "torchvision.datasets", None)
    with pytest.raises(ImportError, match="pip install torchvision"):
        it.load_stl10("/nonexistent")
    with pytest.raises(ImportError, match="pip install torchvision"):
        it.load_mnist_full("/nonexistent")


def test_stl10_loader_selects_airplanes_and_trucks(fake_torchvision, tmp_path):
    s = it.load_stl10(tmp_path, classes=(0, 9))
    assert s.X_train.shape == (4, 3 * 96 * 96) and s.X_test.shape == (2, 3 * 96 * 96)
    assert sorted(s.y_train.tolist()) == [0, 0, 1, 1]
    assert 0.0 <= float(s.X_train.min()) and float(s.X_train.max()) <= 1.0


def test_full_mnist_loader_resizes_and_repeats_channels(fake_torchvision, tmp_path):
    s = it.load_mnist_full(tmp_path, size=32, channels=3)
    assert s.X_train.shape == (12, 3 * 32 * 32) and s.X_test.shape == (6, 3 * 32 * 32)
    img = s.X_train[0].reshape(3, 32, 32)
    assert torch.equal(img[0], img[2])
    plain = it.load_mnist_full(tmp_path)
    first = fake_torchvision.datasets.MNIST(tmp_path, train=False).data[0]
    torch.testing.assert_close(plain.X_test[0], first.reshape(-1).float() / 255)
