"""Bad inputs to the metrics, PSD helpers, data constructions, alignment tools, SLO and figures.

Each case asserts the error type and the words of the message that name the problem, so that a new user learns
what is wrong and how to fix it, instead of getting a NaN, a silently wrong number or an error deep inside torch."""

import numpy as np
import pytest
import torch

import rfm
from rfm.data import datasets as ds
from rfm.data import images as it

NAN = float("nan")


# -- rfm.metrics ---------------------------------------------------------------------------------------------------

def test_mse_rejects_nan_prediction():
    with pytest.raises(ValueError, match="y_pred contains 1 NaN or infinite value.*diverged"):
        rfm.mse([1.0, 2.0], [1.0, NAN])


def test_mse_rejects_nan_target():
    with pytest.raises(ValueError, match="y contains 1 NaN or infinite"):
        rfm.mse(np.array([NAN, 2.0]), torch.tensor([1.0, 2.0]))


def test_mse_length_mismatch_is_named_not_a_reshape_error():
    with pytest.raises(ValueError, match=r"same shape.*\(3,\) and \(2,\).*y has 3 samples, y_pred 2"):
        rfm.mse([1.0, 2.0, 3.0], [1.0, 2.0])


def test_mse_rejects_transposed_prediction_of_the_same_size():
    with pytest.raises(ValueError, match=r"same shape.*\(2, 3\) and \(3, 2\)"):
        rfm.mse(torch.zeros(2, 3), torch.zeros(3, 2))


def test_mse_rejects_empty_arrays():
    with pytest.raises(ValueError, match="y is empty"):
        rfm.mse([], [])


def test_mse_rejects_strings():
    with pytest.raises(TypeError, match="y must be numeric.*strings"):
        rfm.mse(["a", "b"], [1.0, 2.0])


def test_r2_rejects_nan_and_length_mismatch():
    with pytest.raises(ValueError, match="y_pred contains .*NaN"):
        rfm.r2_score([1.0, 2.0, 3.0], [1.0, float("inf"), 3.0])
    with pytest.raises(ValueError, match="same shape"):
        rfm.r2_score([1.0, 2.0, 3.0], [1.0, 2.0])


def test_r2_needs_two_samples():
    with pytest.raises(ValueError, match="at least two samples"):
        rfm.r2_score([1.0], [1.0])


def test_accuracy_length_mismatch_is_not_broadcast():
    with pytest.raises(ValueError, match="same shape.*y has 3 samples, y_pred 1"):
        rfm.accuracy([1, 1, 1], [1])


def test_accuracy_of_class_scores_says_argmax():
    with pytest.raises(ValueError, match=r"argmax\(1\)"):
        rfm.accuracy([0, 1, 2], torch.randn(3, 3))


def test_accuracy_rejects_nan_labels():
    with pytest.raises(ValueError, match="y_pred contains 1 NaN"):
        rfm.accuracy([0.0, 1.0], [0.0, NAN])


def test_prediction_metrics_accept_n_and_n_by_1():
    assert rfm.mse(np.arange(3.0), torch.arange(3.0)[:, None]) == 0.0
    assert rfm.accuracy(np.array([1, 2]), torch.tensor([[1], [2]])) == 1.0


def test_matrix_correlation_rejects_nan():
    with pytest.raises(ValueError, match="A contains 1 NaN or infinite"):
        rfm.matrix_correlation(torch.tensor([[1.0, NAN], [0.0, 1.0]]), torch.eye(2))


def test_matrix_correlation_rejects_empty():
    with pytest.raises(ValueError, match="A is empty"):
        rfm.matrix_correlation(torch.zeros(0, 0), torch.zeros(0, 0))


def test_subspace_overlap_rejects_more_columns_than_rows():
    with pytest.raises(ValueError, match=r"V has 3 columns but only 2 rows.*V\.T"):
        rfm.subspace_overlap(torch.eye(2), torch.randn(2, 3))


def test_subspace_overlap_rejects_dependent_columns():
    with pytest.raises(ValueError, match="columns of V are linearly dependent"):
        rfm.subspace_overlap(torch.eye(3)[:, :2], torch.ones(3, 2))


def test_subspace_overlap_rejects_a_vector_with_reshape_hint():
    with pytest.raises(ValueError, match=r"U must be a 2-D matrix.*reshape\(-1, 1\)"):
        rfm.subspace_overlap(torch.ones(3), torch.eye(3)[:, :1])


def test_top_eigenspace_overlap_rejects_out_of_range_coordinate():
    with pytest.raises(ValueError, match="coordinate 5 is out of range for a 3 x 3 matrix"):
        rfm.top_eigenspace_overlap(torch.eye(3), [0, 5])


def test_top_eigenspace_overlap_rejects_repeated_coordinates_and_k_above_d():
    with pytest.raises(ValueError, match="coordinates must be distinct"):
        rfm.top_eigenspace_overlap(torch.eye(3), [1, 1])
    with pytest.raises(ValueError, match="k must be <= 3"):
        rfm.top_eigenspace_overlap(torch.eye(3), [0], k=4)


# -- rfm.utils -----------------------------------------------------------------------------------------------------

def test_top_eigenvectors_k_above_d():
    with pytest.raises(ValueError, match="k must be <= 3.*only 3 eigenvectors"):
        rfm.top_eigenvectors(torch.eye(3), 5)


def test_top_eigenvectors_non_square():
    with pytest.raises(ValueError, match=r"A must be a square matrix \(d, d\), got shape \(2, 3\)"):
        rfm.top_eigenvectors(torch.ones(2, 3), 1)


def test_top_eigenvectors_non_symmetric():
    with pytest.raises(ValueError, match=r"A must be symmetric.*\(A \+ A\.T\) / 2"):
        rfm.top_eigenvectors(torch.tensor([[1.0, 2.0], [0.0, 1.0]]), 1)


def test_psd_power_non_square():
    with pytest.raises(ValueError, match="A must be a square matrix"):
        rfm.psd_power(torch.ones(2, 3), 0.5)


def test_psd_power_non_symmetric():
    with pytest.raises(ValueError, match="A must be symmetric"):
        rfm.psd_power(np.array([[1.0, 1.0], [0.0, 1.0]]), 0.5)


def test_psd_power_nan():
    with pytest.raises(ValueError, match="A contains 1 NaN or infinite"):
        rfm.psd_power(torch.tensor([[1.0, NAN], [NAN, 1.0]]).triu(), 0.5)


def test_psd_power_3d_input():
    with pytest.raises(ValueError, match=r"symmetric matrix \(d, d\) or the diagonal"):
        rfm.psd_power(torch.ones(2, 2, 2), 0.5)


def test_psd_power_one_clamps_negative_eigenvalues():
    A = torch.diag(torch.tensor([2.0, -1.0], dtype=torch.float64))
    torch.testing.assert_close(rfm.psd_power(A, 1), torch.diag(torch.tensor([2.0, 0.0], dtype=torch.float64)))


def test_get_device_unknown_name():
    with pytest.raises(ValueError, match="device='gpu' is not a device torch knows.*'cuda'"):
        rfm.get_device("gpu")


def test_get_device_wrong_type():
    with pytest.raises(TypeError, match="device must be None, a string"):
        rfm.get_device(1.5)


# -- rfm.data ------------------------------------------------------------------------------------------------------

def test_product_target_needs_two_columns():
    with pytest.raises(ValueError, match=r"x1 \* x2 needs at least 2 coordinates.*use d >= 2"):
        ds.low_rank_polynomial(10, 1)


def test_product_target_rejects_a_vector():
    with pytest.raises(ValueError, match=r"X must be a 2-D array \(n_samples, d\)"):
        ds.product_target(torch.ones(5))


def test_chain_monomial_r_above_d():
    with pytest.raises(ValueError, match="r=5 needs at least 5 coordinates, but X has 3"):
        ds.chain_monomial(torch.ones(4, 3), r=5)


def test_low_rank_polynomial_target_of_wrong_type():
    with pytest.raises(TypeError, match="target must be 'x1x2', 'chain' or a callable"):
        ds.low_rank_polynomial(10, 3, target=3)


def test_low_rank_polynomial_target_returning_wrong_shape():
    with pytest.raises(ValueError, match=r"one value per row of X.*\(10,\)"):
        ds.low_rank_polynomial(10, 3, target=lambda X: X)


def test_split_data_nan_labels_are_not_cast_to_integers():
    with pytest.raises(ValueError, match="y contains NaN or infinite labels"):
        ds.split_data(np.zeros((4, 2)), [0.0, 1.0, NAN, 1.0])


def test_split_data_fractional_labels():
    with pytest.raises(ValueError, match="y must hold integer class labels"):
        ds.split_data(np.zeros((4, 2)), [0.0, 0.5, 1.0, 1.0])


def test_split_data_one_hot_labels():
    with pytest.raises(ValueError, match=r"1-D vector of class labels.*argmax\(1\)"):
        ds.split_data(np.zeros((4, 2)), np.eye(4))


def test_split_data_nan_pixels():
    X = np.zeros((4, 2))
    X[0, 0] = NAN
    with pytest.raises(ValueError, match="X contains 1 NaN or infinite pixel"):
        ds.split_data(X, [0, 1, 0, 1])


def test_split_data_length_mismatch():
    with pytest.raises(ValueError, match="X has 4 rows but y has 3"):
        ds.split_data(np.zeros((4, 2)), [0, 1, 0])


def test_split_data_classes_as_a_string():
    with pytest.raises(TypeError, match="classes must be a list of integer labels"):
        ds.split_data(np.zeros((4, 2)), [0, 1, 0, 1], classes="01")


def test_split_data_too_few_images():
    with pytest.raises(ValueError, match="at least 2 images"):
        ds.split_data(np.zeros((1, 2)), [0])


def test_online_loader_checks_sizes_before_downloading():
    with pytest.raises(ValueError, match="n_train must be >= 1"):
        ds.load_svhn("/nonexistent", n_train=-5)


# -- rfm.data.images -----------------------------------------------------------------------------------------------

def test_region_mask_rows_not_a_pair():
    with pytest.raises(ValueError, match=r"rows must be a pair of integers \(start, stop\)"):
        it.region_mask((28, 28), (0, 1, 2), (0, 3))


def test_stamp_float_mask_says_bool():
    with pytest.raises(ValueError, match=r"boolean vector.*mask\.bool\(\)"):
        it.stamp(torch.zeros(2, 784), torch.ones(784))


def test_stamp_unflattened_images():
    with pytest.raises(ValueError, match=r"flattened images.*reshape\(len\(X\), -1\)"):
        it.stamp(torch.zeros(2, 28, 28), it.square_mask())


def test_stamp_rows_out_of_range():
    with pytest.raises(ValueError, match="row indices up to 10.*X has 2 rows"):
        it.stamp(torch.zeros(2, 784), it.square_mask(), rows=[0, 10])


def test_stamp_nan_value():
    with pytest.raises(ValueError, match="value must be finite"):
        it.stamp(torch.zeros(2, 784), it.square_mask(), NAN)


def test_square_task_labels_length_mismatch():
    with pytest.raises(ValueError, match="labels has 2 entries but images has 6 rows"):
        it.square_task(torch.rand(6, 784), (3, 2), labels=[0, 1], classes=(0, 1))


def test_threshold_mask_all_zero_diagonal():
    with pytest.raises(ValueError, match="positive largest entry"):
        it.threshold_mask(torch.zeros(5))


def test_add_marker_nan_rates_and_negative_labels():
    X, mask = torch.zeros(4, 784), it.square_mask()
    with pytest.raises(ValueError, match=r"one probability in \[0, 1\]"):
        it.add_marker(X, [0, 1, 0, 1], mask, (NAN, 0.9))
    with pytest.raises(ValueError, match="labels must be >= 0"):
        it.add_marker(X, [0, 1, 0, -1], mask, (0.1, 0.9))


def test_rotate_images_wrong_number_of_angles():
    with pytest.raises(ValueError, match=r"one angle for all images or one per row of X \(3\), got 2"):
        it.rotate_images(torch.zeros(3, 784), [10.0, 20.0])


# -- rfm.nets.alignment and rfm.nets.optim -------------------------------------------------------------------------

from rfm import nets  # noqa: E402
from rfm.nets import alignment as al  # noqa: E402
from rfm.nets import optim  # noqa: E402


@pytest.fixture
def net():
    return nets.MLP(5, [8], 1)


def test_ptk_features_wrong_number_of_columns(net):
    with pytest.raises(ValueError, match="X has 4 features .* input dimension d_in is 5"):
        al.ptk(net, torch.randn(10, 4), 0)


def test_ptk_names_Z(net):
    with pytest.raises(ValueError, match="Z has 6 features"):
        al.ptk(net, torch.randn(10, 5), 0, Z=torch.randn(3, 6))


def test_feature_correlations_needs_an_mlp():
    with pytest.raises(TypeError, match=r"model must be an rfm.nets.MLP.*got str"):
        al.feature_correlations("net", torch.randn(10, 5))


def test_feature_correlations_layer_out_of_range(net):
    with pytest.raises(ValueError, match="layer must be <= 1, got 5"):
        al.feature_correlations(net, torch.randn(10, 5), layers=[5])


def test_nfc_K_of_the_wrong_size(net):
    with pytest.raises(ValueError, match="K is 3 x 3 but W has 8 rows"):
        al.nfc(net.weight(0), torch.eye(3))


def test_nfc_W0_of_the_wrong_shape(net):
    with pytest.raises(ValueError, match=r"W0 has shape \(3, 5\) but W has \(8, 5\)"):
        al.nfc(net.weight(0), torch.eye(8), torch.zeros(3, 5))


def test_cu_ratio_of_zero_weights_is_undefined():
    with pytest.raises(ValueError, match="C/UC ratio is undefined"):
        al.cu_ratio(torch.zeros(8, 5), torch.ones(8, 5), torch.eye(8))


def test_weight_velocity_residual_length(net):
    with pytest.raises(ValueError, match=r"residual must have shape \(n,\) or \(n, c\) with n = 10"):
        al.weight_velocity(net, torch.randn(10, 5), torch.ones(7))


def test_weight_velocity_nan_residual(net):
    with pytest.raises(ValueError, match="residual contains NaN"):
        al.weight_velocity(net, torch.randn(10, 5), torch.full((10,), NAN))


def test_spectrum_matched_non_symmetric():
    with pytest.raises(ValueError, match="K must be symmetric"):
        al.spectrum_matched(torch.tensor([[1.0, 2.0], [0.0, 1.0]]))


def test_spectral_moments_non_square():
    with pytest.raises(ValueError, match="R must be a square matrix"):
        al.spectral_moments(torch.ones(2, 3))


def test_free_prediction_needs_four_moments():
    with pytest.raises(ValueError, match="moments must be the four normalised traces"):
        al.free_second_derivative_correlation(torch.eye(2), torch.eye(2), [1.0, 2.0])


def test_data_matrices_two_column_labels():
    with pytest.raises(ValueError, match=r"y must be a vector of labels \(n,\)"):
        al.data_matrices(torch.randn(10, 5), torch.ones(10, 2))


def test_tracker_series_unknown_key():
    with pytest.raises(ValueError, match="key must be one of"):
        al.CorrelationTracker(torch.randn(4, 5)).series("cnfc")


def test_layer_groups_speed_as_a_number(net):
    with pytest.raises(TypeError, match="speeds must be a list with one speed per layer"):
        optim.layer_groups(net, 0.5)


def test_layer_groups_speed_as_a_string(net):
    with pytest.raises(TypeError, match="speed must be a real number, got 'a'"):
        optim.layer_groups(net, ["a", 1.0])


def test_slo_single_tensor_params():
    with pytest.raises(TypeError, match=r"got a single tensor; pass \[tensor\]"):
        optim.SLO(torch.nn.Parameter(torch.ones(3)), lr=0.1)


def test_slo_step_with_nan_gradient_is_caught():
    p = torch.nn.Parameter(torch.ones(3))
    opt = optim.SLO([p], lr=0.1)
    p.grad = torch.tensor([1.0, NAN, 0.0])
    with pytest.raises(FloatingPointError, match="gradient of parameter group 0 is NaN or infinite.*lower lr"):
        opt.step()
    assert torch.equal(p.detach(), torch.ones(3))  # the weights were not touched


def test_train_full_batch_record_every_zero(net):
    with pytest.raises(ValueError, match="record_every must be >= 1"):
        optim.train_full_batch(net, torch.randn(4, 5), torch.randn(4), torch.optim.SGD(net.parameters(), lr=0.1),
                               steps=2, record_every=0)


# -- rfm.book ------------------------------------------------------------------------------------------------------

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import rfm.book  # noqa: E402
from rfm.book import plots  # noqa: E402


def test_matrix_images_nan_entries(close_figures):
    with pytest.raises(ValueError, match=r"mats\[0\] contains 1 NaN or infinite"):
        plots.matrix_images([torch.tensor([[1.0, NAN], [0.0, 1.0]])])


def test_matrix_images_strings(close_figures):
    with pytest.raises(TypeError, match=r"mats\[0\] must be numeric"):
        plots.matrix_images([np.array([["a", "b"], ["c", "d"]])])


def test_matrix_images_single_title_string_is_one_title(close_figures):
    fig = plots.matrix_images([np.eye(2)], "M")
    assert fig.axes[0].get_title() == "M"
    with pytest.raises(ValueError, match="got 1 titles for 2 matrices"):
        plots.matrix_images([np.eye(2), np.eye(2)], "AB")


def test_spectrum_non_symmetric(close_figures):
    with pytest.raises(ValueError, match=r"matrices must be symmetric.*\(A \+ A\.T\) / 2"):
        plots.spectrum(np.array([[1.0, 3.0], [0.0, 1.0]]))


def test_spectrum_empty(close_figures):
    with pytest.raises(ValueError, match=r"matrices\[1\] is empty"):
        plots.spectrum([np.eye(2), np.zeros((0, 0))])


def test_curves_ys_not_a_dict(close_figures):
    with pytest.raises(TypeError, match="ys must be a dict mapping each label"):
        plots.curves([1, 2], [0.1, 0.2], ylabel="loss")


def test_curves_hline_not_a_number(close_figures):
    with pytest.raises(ValueError, match=r"hlines\['kernel'\] must be a finite number"):
        plots.curves([1, 2], {"rfm": [0.1, 0.2]}, ylabel="loss", hlines={"kernel": "0.5"})


def test_settings_profile_and_dict():
    with pytest.raises(ValueError, match="profile must be one of"):
        rfm.book.settings("fast", smoke={}, full={})
    with pytest.raises(TypeError, match="smoke must be a dict"):
        rfm.book.settings("smoke", smoke=[1], full={})


def test_summary_measured_not_a_dict():
    with pytest.raises(TypeError, match="measured must be a dict"):
        rfm.book.summary("chapter", {"profile": "smoke"}, [0.9])


def test_savefig_name_with_path_separator(close_figures):
    fig = plt.figure()
    with pytest.raises(ValueError, match="must not contain a path separator"):
        rfm.book.savefig(fig, "../escape", output_dir="/tmp")


def test_load_results_unknown_profile():
    with pytest.raises(ValueError, match="profile must be one of"):
        rfm.book.load_results("kernels_and_agop", "fast")
