"""Bad inputs to rfm.nets (MLP, train, nfm, layer_agop, nfa_table) and rfm.data.modular: each fails early with an
error that names the argument and the problem. One test per case."""
import numpy as np
import pytest
import torch

from rfm import nets
from rfm.data import modular as mod
from rfm.nets import callbacks


def _xy(n=5, d=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g)
    return X, X[:, 0].clone()


def _train(model, X, y, **kw):
    kw.setdefault("epochs", 1)
    kw.setdefault("threads", 1)
    return nets.train(model, X, y, **kw)


# -- MLP ---------------------------------------------------------------------------------------------------------

def test_mlp_widths_given_as_an_int():
    with pytest.raises(TypeError, match=r"widths must be a list or tuple .* write \[8\]"):
        nets.MLP(4, 8, 1)


def test_mlp_widths_not_a_sequence():
    with pytest.raises(TypeError, match="widths must be a list or tuple of ints"):
        nets.MLP(4, "8", 1)


def test_mlp_width_zero():
    with pytest.raises(ValueError, match=r"widths\[1\] must be >= 1"):
        nets.MLP(4, [8, 0], 1)


def test_mlp_width_not_an_integer():
    with pytest.raises(TypeError, match=r"widths\[0\] must be a positive integer"):
        nets.MLP(4, [8.0], 1)


def test_mlp_d_in_zero():
    with pytest.raises(ValueError, match="d_in must be >= 1"):
        nets.MLP(0, [8], 1)


def test_mlp_init_scale_wrong_length():
    with pytest.raises(ValueError, match=r"init_scale must be one number or one per layer \(2"):
        nets.MLP(4, [8], 1, init_scale=[0.1, 1.0, 1.0])


def test_mlp_init_scale_negative():
    with pytest.raises(ValueError, match=r"init_scale\[0\] must be >= 0"):
        nets.MLP(4, [8], 1, init_scale=[-0.1, 1.0])


def test_mlp_init_scale_not_a_number():
    with pytest.raises(TypeError, match="init_scale must be a number or a list"):
        nets.MLP(4, [8], 1, init_scale="small")


def test_mlp_bias_not_a_bool():
    with pytest.raises(TypeError, match="bias must be True or False"):
        nets.MLP(4, [8], 1, bias="yes")


def test_mlp_activation_not_a_string():
    with pytest.raises(TypeError, match="activation must be a string"):
        nets.MLP(4, [8], 1, activation=torch.relu)


def test_mlp_unknown_activation():
    with pytest.raises(ValueError, match="activation must be one of"):
        nets.MLP(4, [8], 1, activation="swish")


def test_mlp_unknown_init():
    with pytest.raises(ValueError, match="init must be one of"):
        nets.MLP(4, [8], 1, init="xavier")


def test_mlp_unsupported_dtype():
    with pytest.raises(ValueError, match="dtype must be"):
        nets.MLP(4, [8], 1, dtype="float16")


def test_mlp_generator_not_a_seed():
    with pytest.raises(TypeError, match="generator must be an integer seed or a torch.Generator"):
        nets.MLP(4, [8], 1, generator=1.5)


def test_mlp_negative_seed():
    with pytest.raises(ValueError, match="generator .* must be >= 0"):
        nets.MLP(4, [8], 1, generator=-1)


# -- train: the data -------------------------------------------------------------------------------------------------

def test_train_nan_in_X():
    X, y = _xy()
    X[2, 1] = float("nan")
    with pytest.raises(ValueError, match="X contains 1 NaN"):
        _train(nets.MLP(3, [4], 1), X, y)


def test_train_inf_in_y():
    X, y = _xy()
    y[0] = float("inf")
    with pytest.raises(ValueError, match="y contains NaN or infinite"):
        _train(nets.MLP(3, [4], 1), X, y)


def test_train_y_length_mismatch():
    X, y = _xy()
    with pytest.raises(ValueError, match="y has 4 rows but X has 5"):
        _train(nets.MLP(3, [4], 1), X, y[:4])


def test_train_X_one_dimensional():
    _, y = _xy()
    with pytest.raises(ValueError, match=r"X must be a 2-D array.*reshape"):
        _train(nets.MLP(1, [4], 1), y, y)


def test_train_X_of_strings():
    with pytest.raises(TypeError, match="X must be numeric"):
        _train(nets.MLP(1, [4], 1), np.array([["a"], ["b"]]), [0.0, 1.0])


def test_train_X_sparse():
    X, y = _xy()
    with pytest.raises(TypeError, match="sparse"):
        _train(nets.MLP(3, [4], 1), X.to_sparse(), y)


def test_train_X_with_the_wrong_number_of_features():
    X, y = _xy(d=4)
    with pytest.raises(ValueError, match="X has 4 features .* input dimension d_in is 3"):
        _train(nets.MLP(3, [4], 1), X, y)


def test_train_outputs_do_not_match_the_targets():
    X, _ = _xy()
    Y = torch.zeros(5, 3)
    with pytest.raises(ValueError, match=r"returns 1 output\(s\) per sample but y has 3 column\(s\).*d_out=3"):
        _train(nets.MLP(3, [4], 1), X, Y)


def test_train_ce_with_float_labels():
    X, y = _xy()
    with pytest.raises(ValueError, match="integer class labels"):
        _train(nets.MLP(3, [4], 2), X, y, loss="ce")


def test_train_ce_with_negative_labels():
    X, _ = _xy()
    with pytest.raises(ValueError, match="class labels >= 0"):
        _train(nets.MLP(3, [4], 2), X, torch.tensor([0, 1, -1, 0, 1]), loss="ce")


def test_train_ce_label_beyond_the_outputs():
    X, _ = _xy()
    with pytest.raises(ValueError, match=r"class label 5 but the model returns only 2 output\(s\).*d_out=6"):
        _train(nets.MLP(3, [4], 2), X, torch.tensor([0, 1, 5, 0, 1]), loss="ce")


def test_train_validation_data_half_given():
    X, y = _xy()
    with pytest.raises(ValueError, match="X_val and y_val must be given together, got only X_val"):
        _train(nets.MLP(3, [4], 1), X, y, X_val=X)


def test_train_validation_features_mismatch():
    X, y = _xy()
    with pytest.raises(ValueError, match="X_val has 2 features but X has 3"):
        _train(nets.MLP(3, [4], 1), X, y, X_val=X[:, :2], y_val=y)


def test_train_validation_nan():
    X, y = _xy()
    y_val = y.clone()
    y_val[1] = float("nan")
    with pytest.raises(ValueError, match="y_val contains NaN"):
        _train(nets.MLP(3, [4], 1), X, y, X_val=X, y_val=y_val)


# -- train: the settings -------------------------------------------------------------------------------------------

def test_train_model_not_a_module():
    X, y = _xy()
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        _train(lambda x: x, X, y)


def test_train_model_without_parameters():
    X, y = _xy()
    with pytest.raises(ValueError, match="no trainable parameters"):
        _train(torch.nn.Identity(), X, y)


def test_train_optimizer_class_instead_of_instance():
    X, y = _xy()
    with pytest.raises(TypeError, match="optimizer must be 'sgd', 'adam' or a torch.optim.Optimizer instance"):
        _train(nets.MLP(3, [4], 1), X, y, optimizer=torch.optim.AdamW)


def test_train_optimizer_on_another_model():
    X, y = _xy()
    other = nets.MLP(3, [4], 1)
    with pytest.raises(ValueError, match="optimizer was built on other parameters"):
        _train(nets.MLP(3, [4], 1), X, y, optimizer=torch.optim.SGD(other.parameters(), lr=0.1))


def test_train_negative_learning_rate():
    X, y = _xy()
    with pytest.raises(ValueError, match="lr must be > 0"):
        _train(nets.MLP(3, [4], 1), X, y, lr=-0.1)


def test_train_epochs_not_an_integer():
    X, y = _xy()
    with pytest.raises(TypeError, match="epochs must be an integer"):
        _train(nets.MLP(3, [4], 1), X, y, epochs=2.5)


def test_train_batch_size_zero():
    X, y = _xy()
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        _train(nets.MLP(3, [4], 1), X, y, batch_size=0)


def test_train_callback_not_callable():
    X, y = _xy()
    with pytest.raises(TypeError, match="callback must be a function"):
        _train(nets.MLP(3, [4], 1), X, y, callback="stop")


def test_train_metric_without_validation_data():
    X, y = _xy()
    with pytest.raises(ValueError, match="metric is evaluated on the validation data: pass X_val and y_val"):
        _train(nets.MLP(3, [4], 1), X, y, metric=lambda out, t: 0.0)


def test_train_record_initial_not_a_bool():
    X, y = _xy()
    with pytest.raises(TypeError, match="record_initial must be True or False"):
        _train(nets.MLP(3, [4], 1), X, y, record_initial="yes")


def test_train_loss_that_diverges_names_the_epoch_and_the_learning_rate():
    X, y = _xy(n=32)
    with pytest.raises(FloatingPointError, match=r"became (nan|inf) at epoch \d+ .*lr=1e\+06 is too large"):
        _train(nets.MLP(3, [16], 1, generator=0), X, 10 * y, optimizer="sgd", lr=1e6, epochs=50)


def test_train_initial_loss_that_overflows():
    X, y = _xy()
    with pytest.raises(FloatingPointError, match="at initialisation .* scale the inputs"):
        _train(nets.MLP(3, [4], 1, activation="quadratic", init_scale=1e15), X, y, record_initial=True)


# -- neural feature matrices, per-layer AGOPs, the NFA table ---------------------------------------------------

def test_nfm_of_a_plain_torch_module():
    with pytest.raises(TypeError, match=r"model must be an rfm.nets.MLP"):
        nets.nfm(torch.nn.Linear(3, 2))


def test_nfm_layer_out_of_range():
    with pytest.raises(ValueError, match="layer must be <= 1"):
        nets.nfm(nets.MLP(3, [4], 1), 2)


def test_layer_agop_with_the_wrong_number_of_features():
    with pytest.raises(ValueError, match="X has 5 features .* d_in is 3"):
        nets.layer_agop(nets.MLP(3, [4], 1), torch.randn(6, 5))


def test_layer_agop_unknown_normalisation():
    with pytest.raises(ValueError, match="normalize must be one of"):
        nets.layer_agop(nets.MLP(3, [4], 1), torch.randn(6, 3), normalize="l2")


def test_nfa_table_unknown_kind():
    with pytest.raises(ValueError, match="kinds must be one of"):
        nets.nfa_table(nets.MLP(3, [4], 1), torch.randn(6, 3), kinds=("spearman",))


def test_nfa_table_kinds_as_a_single_string():
    with pytest.raises(TypeError, match=r"kinds must be a list or tuple of strings, e.g. \('cosine',\)"):
        nets.nfa_table(nets.MLP(3, [4], 1), torch.randn(6, 3), kinds="cosine")


def test_nfa_table_empty_powers():
    with pytest.raises(ValueError, match="powers is empty"):
        nets.nfa_table(nets.MLP(3, [4], 1), torch.randn(6, 3), powers=())


def test_format_nfa_table_of_other_records():
    with pytest.raises(ValueError, match=r"rows\[0\] is not a record of nfa_table"):
        nets.format_nfa_table([{"layer": 0}])


# -- modular arithmetic ----------------------------------------------------------------------------------------------

def test_modular_p_not_an_integer():
    with pytest.raises(TypeError, match="p must be an integer"):
        mod.modular_arithmetic(7.0)


def test_modular_p_not_prime():
    with pytest.raises(ValueError, match="p must be a prime .* e.g. 61"):
        mod.modular_arithmetic(12)


def test_modular_operation_not_a_string():
    with pytest.raises(TypeError, match="operation must be a string"):
        mod.modular_arithmetic(7, 1)


def test_modular_seed_not_an_integer():
    with pytest.raises(TypeError, match="generator must be an integer seed"):
        mod.modular_arithmetic(7, generator="0")


def test_modular_labels_digit_out_of_range():
    with pytest.raises(ValueError, match=r"y must hold digits in \[0, 7\) .* reduce them mod p"):
        mod.modular_labels(torch.tensor([1, 2]), torch.tensor([3, 9]), 7)


def test_modular_labels_non_integer_digits():
    with pytest.raises(ValueError, match="x must hold integers"):
        mod.modular_labels(torch.tensor([1.5]), torch.tensor([2]), 7)


def test_modular_labels_shape_mismatch():
    with pytest.raises(ValueError, match="x and y must have the same shape"):
        mod.modular_labels(torch.tensor([1, 2]), torch.tensor([3]), 7)


def test_one_hot_pairs_wrong_shape():
    with pytest.raises(ValueError, match=r"pairs must have shape \(n, 2\)"):
        mod.one_hot_pairs(torch.tensor([1, 2, 3]), 5)


def test_one_hot_pairs_digit_out_of_range():
    with pytest.raises(ValueError, match=r"pairs must hold digits in \[0, 5\)"):
        mod.one_hot_pairs(torch.tensor([[1, 5]]), 5)


def test_off_diagonal_block_of_an_odd_matrix():
    with pytest.raises(ValueError, match="even size 2p"):
        mod.off_diagonal_block(torch.eye(5))


def test_off_diagonal_block_with_the_wrong_p():
    with pytest.raises(ValueError, match=r"M has size 10, not 2p = 12"):
        mod.off_diagonal_block(torch.eye(10), p=6)


def test_reindex_block_of_a_non_prime_size():
    with pytest.raises(ValueError, match=r"the size of B \(p\) must be a prime"):
        mod.reindex_block(torch.eye(6))


def test_circulant_of_a_matrix():
    with pytest.raises(ValueError, match="c must be a non-empty 1-D vector"):
        mod.circulant(torch.eye(3))


def test_circulant_deviation_of_a_non_square_matrix():
    with pytest.raises(ValueError, match=r"A must be a square matrix .* got shape \(3, 4\)"):
        mod.circulant_deviation(torch.ones(3, 4))


def test_circulant_deviation_with_nan():
    A = torch.eye(3)
    A[0, 1] = float("nan")
    with pytest.raises(ValueError, match="A contains NaN"):
        mod.circulant_deviation(A)


def test_fourier_diagonalize_of_complex_input():
    with pytest.raises(TypeError, match="A must be real-valued"):
        mod.fourier_diagonalize(torch.eye(3, dtype=torch.complex128))


def test_dft_matrix_real_dtype():
    with pytest.raises(ValueError, match="dtype must be torch.complex64 or torch.complex128"):
        mod.dft_matrix(4, dtype=torch.float64)


def test_agop_alignment_of_different_sizes():
    with pytest.raises(ValueError, match="same size 2p, got 10 and 14"):
        mod.agop_alignment(torch.rand(10, 10), torch.rand(14, 14))


def test_is_prime_of_a_float():
    with pytest.raises(TypeError, match="n must be an integer"):
        mod.is_prime(7.5)


def test_grokking_progress_without_modular_data():
    with pytest.raises(TypeError, match="data must be a ModularData.*modular_arithmetic"):
        callbacks.GrokkingProgress((torch.zeros(3, 4), torch.zeros(3)))


def test_modular_data_with_inconsistent_shapes():
    d = mod.modular_arithmetic(5, generator=0)
    with pytest.raises(ValueError, match=r"X_train must be \(n, 10\)"):
        mod.ModularData(5, "add", d.X_train[:, :9], d.Y_train, d.X_test, d.Y_test, d.pairs_train, d.pairs_test)


def test_quadratic_net_given_the_data_set():
    d = mod.modular_arithmetic(5, generator=0)
    with pytest.raises(TypeError, match="pass data.p"):
        nets.quadratic_net(d)


def test_quadratic_net_width_zero():
    with pytest.raises(ValueError, match="width must be >= 1"):
        nets.quadratic_net(5, 0)


def test_network_progress_threshold_above_one():
    d = mod.modular_arithmetic(5, generator=0)
    with pytest.raises(ValueError, match="stop_at_test_acc must be <= 1"):
        callbacks.NetworkProgress(d, stop_at_test_acc=99)


def test_network_progress_nfm_every_zero():
    d = mod.modular_arithmetic(5, generator=0)
    with pytest.raises(ValueError, match="nfm_every must be >= 1"):
        callbacks.NetworkProgress(d, nfm_every=0)


def test_network_progress_with_a_network_for_another_p():
    d = mod.modular_arithmetic(5, generator=0)
    net = nets.quadratic_net(7, 8)
    with pytest.raises(ValueError, match=r"needs R\^10 -> R\^5.*build it with quadratic_net"):
        callbacks.NetworkProgress(d)(net, {"epoch": 0})
