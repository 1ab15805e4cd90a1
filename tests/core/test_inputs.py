"""Bad input to the core and the estimators fails early with an error that names the problem; degenerate but
valid input fits, with a warning that says why M was kept."""

import numpy as np
import pytest
import torch
from sklearn.exceptions import NotFittedError

import rfm

X = np.random.default_rng(0).normal(size=(30, 4))
y = X[:, 0] * X[:, 1]


def fit(**params):
    return rfm.RFMRegressor(**{"iters": 1, **params})


# -- shapes, lengths, values ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad,match", [
    (X[:, 0], r"Expected 2D array, got 1D array instead"),
    (X[None], r"Found array with dim 3"),
    (np.zeros((0, 4)), "0 sample"),
    (np.zeros((30, 0)), "0 feature"),
])
def test_wrong_shapes_are_named(bad, match):
    with pytest.raises(ValueError, match=match):
        fit().fit(bad, y[: len(bad)] if len(bad) else y[:0])


def test_nan_in_X_is_named_for_arrays_and_tensors():
    Xn = X.copy()
    Xn[3, 2] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        fit().fit(Xn, y)
    with pytest.raises(ValueError, match="X contains 1 NaN or infinite"):
        fit().fit(torch.from_numpy(Xn), torch.from_numpy(y))


def test_inf_in_y_is_named():
    yi = y.copy()
    yi[0] = np.inf
    with pytest.raises(ValueError, match="Input y contains infinity"):
        fit().fit(X, yi)
    with pytest.raises(ValueError, match="y contains NaN or infinite"):
        fit().fit(torch.from_numpy(X), torch.from_numpy(yi))


def test_nan_at_predict_is_named():
    Xn = X.copy()
    Xn[3, 2] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        fit().fit(X, y).predict(Xn)


def test_float32_overflow_names_the_range():
    big = torch.from_numpy(X * 1e300)
    with pytest.raises(ValueError, match="after conversion to torch.float32: its values exceed that type's range"):
        fit().fit(big, torch.from_numpy(y))


def test_squared_norm_overflow_is_caught_with_its_cause():
    with pytest.raises(FloatingPointError, match="squared norms of the .* features overflow torch.float32.*scale the"):
        fit().fit(X * 1e19, y)


def test_mismatched_lengths():
    with pytest.raises(ValueError, match="y has 29 rows but X has 30"):
        fit().fit(X, y[:-1])
    with pytest.raises(ValueError, match="y_val has 10 rows but X_val has 30"):
        fit().fit(X, y, X, y[:10])


def test_validation_data_must_come_in_pairs():
    with pytest.raises(ValueError, match="X_val and y_val must be given together"):
        fit().fit(X, y, X_val=X)


def test_y_none_is_named():
    with pytest.raises(ValueError, match="RFMRegressor requires y to be passed, but the target y is None"):
        fit().fit(X, None)


def test_sparse_input_is_named():
    sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(TypeError, match="dense data is required"):
        fit().fit(sparse.csr_matrix(X), y)
    with pytest.raises(TypeError, match="sparse tensor .* dense data is required"):
        rfm.KernelMachine("laplace", torch.from_numpy(X).to_sparse(), torch.ones(30))


def test_strings_and_complex_are_named():
    with pytest.raises(TypeError, match="centers must be numeric, got an array of strings"):
        rfm.KernelMachine("laplace", np.array([["a", "b"]]), np.ones(1))
    with pytest.raises(TypeError, match="must be real-valued"):
        rfm.KernelMachine("laplace", X.astype(complex), np.ones(30))


# -- fitted state ----------------------------------------------------------------------------------------------------

def test_unfitted_model_raises_not_fitted_error():
    for method in ("predict", "agop", "gradients"):
        with pytest.raises(NotFittedError, match="not fitted yet"):
            getattr(fit(), method)(X)


def test_wrong_number_of_features_at_predict():
    with pytest.raises(ValueError, match="X has 3 features, but RFMRegressor is expecting 4 features"):
        fit().fit(X, y).predict(X[:, :3])
    with pytest.raises(ValueError, match="X has 3 features, but RFMRegressor is expecting 4 features"):
        fit().fit(X, y).predict(torch.from_numpy(X[:, :3]))
    with pytest.raises(ValueError, match="X_val has 3 features"):
        fit().fit(X, y, X[:, :3], y)


def test_a_fit_that_fails_half_way_leaves_the_previous_fit_intact():
    model = fit(iters=3).fit(X, y)
    before = (model.alpha_.clone(), model.M_.clone(), model.best_iter_, len(model.history_))

    def boom(m, record):
        if record["iteration"] == 2:
            raise KeyboardInterrupt("stop")
    model.set_params(callback=boom)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X * 2, y)
    torch.testing.assert_close(model.alpha_, before[0])
    torch.testing.assert_close(model.M_, before[1])
    assert (model.best_iter_, len(model.history_)) == before[2:]


def test_callbacks_see_the_current_iterate():
    seen = []
    fit(iters=2, callback=lambda m, r: seen.append((r["iteration"], m.predict(X[:2]).shape, len(m.history_)))
        ).fit(X, y)
    assert seen == [(0, (2,), 1), (1, (2,), 2), (2, (2,), 3)]


# -- parameters ------------------------------------------------------------------------------------------------------

def test_unknown_kernel_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown kernel 'laplacian'; known kernels: \['gaussian', 'laplace'"):
        fit(kernel="laplacian").fit(X, y)


def test_exponent_with_a_kernel_that_has_none():
    with pytest.raises(ValueError, match="exponent applies to the laplace kernel only"):
        fit(kernel="gaussian", exponent=2.0).fit(X, y)


def test_kernel_instance_and_bandwidth_are_not_both_taken():
    with pytest.raises(ValueError, match="carries its own parameters; leave bandwidth and exponent as None"):
        fit(kernel=rfm.LaplaceKernel(5.0), bandwidth=3.0).fit(X, y)


def test_bandwidth_grid_search_changes_the_kernel():
    a = fit(kernel="laplace", bandwidth=1.0).fit(X, y)
    b = fit(kernel="laplace", bandwidth=30.0).fit(X, y)
    assert a.kernel_.bandwidth == 1.0 and b.kernel_.bandwidth == 30.0
    assert not np.allclose(a.predict(X[:5]), b.predict(X[:5]))


@pytest.mark.parametrize("params,match", [
    (dict(bandwidth=-1.0), r"bandwidth must be > 0, got -1.0"),
    (dict(bandwidth=0), r"bandwidth must be > 0, got 0"),
    (dict(reg=-1e-3), r"reg must be >= 0, got -0.001"),
    (dict(exponent=3.0), r"exponent must be <= 2"),
    (dict(iters=-1), r"iters must be >= 0"),
    (dict(iters=2.5), r"iters must be an integer"),
    (dict(agop_power=0), r"agop_power must be > 0"),
    (dict(normalize="l2"), r"normalize must be one of"),
    (dict(dtype="float16"), r"dtype must be 'float32' or 'float64'"),
    (dict(diag=True, rank=2), r"diag=True and rank are exclusive"),
    (dict(rank=9), r"rank must be <= 4"),
    (dict(max_agop_points=0), r"max_agop_points must be >= 1"),
    (dict(callback="print"), r"callback must be callable"),
    (dict(solver="conjugate"), r"unknown solver 'conjugate'; known solvers"),
    (dict(solver=3), r"solver must be a name"),
    (dict(random_state=-1), r"random_state must be >= 0"),
    (dict(random_state="seed"), r"random_state must be None, an int"),
    (dict(mem_gb=0), r"mem_gb must be > 0"),
    (dict(kernel=3), r"kernel must be a name"),
])
def test_bad_parameters_are_named(params, match):
    with pytest.raises((ValueError, TypeError), match=match):
        fit(**params).fit(X, y)


def test_random_state_none_and_numpy_states_are_accepted():
    fit(random_state=None, max_agop_points=10).fit(X, y)
    a = fit(random_state=np.random.RandomState(3), max_agop_points=10).fit(X, y)
    b = fit(random_state=np.random.RandomState(3), max_agop_points=10).fit(X, y)
    torch.testing.assert_close(a.M_, b.M_)


# -- targets ---------------------------------------------------------------------------------------------------------

def test_integer_and_boolean_regression_targets_are_numbers():
    for target in (np.arange(30) % 3, np.arange(30) % 2 == 0):
        model = fit().fit(X, target)
        assert model.predict(X).dtype == np.float64


def test_string_targets_given_to_the_regressor():
    with pytest.raises(ValueError, match="looks like class labels: use RFMClassifier"):
        fit().fit(X, np.array(["a", "b"] * 15))


def test_continuous_targets_given_to_the_classifier():
    with pytest.raises(ValueError, match="Unknown label type: .*continuous"):
        rfm.RFMClassifier(iters=0).fit(X, y)


def test_a_single_class():
    with pytest.raises(ValueError, match="y has 1 class"):
        rfm.RFMClassifier(iters=0).fit(X, np.zeros(30, dtype=int))


def test_two_dimensional_labels():
    with pytest.raises(ValueError, match="y must be a 1-D array of class labels"):
        rfm.RFMClassifier(iters=0).fit(X, np.zeros((30, 2), dtype=int))


def test_validation_labels_not_seen_in_training():
    with pytest.raises(ValueError, match=r"y_val contains labels not seen in y: \[7\]"):
        rfm.RFMClassifier(iters=0).fit(X, np.arange(30) % 2, X[:5], np.array([0, 1, 7, 0, 1]))


# -- degenerate but valid input fits, keeping M, with a warning ----------------------------------------------------

@pytest.mark.parametrize("case", ["one sample", "identical rows", "zero target", "far apart"])
def test_degenerate_input_fits_and_keeps_M_with_a_warning(case):
    Xd, yd = {"one sample": (X[:1], y[:1]),
              "identical rows": (np.repeat(X[:1], 10, 0), np.full(10, 2.0)),
              "zero target": (X, np.zeros(30)),
              "far apart": (X * 1e4, y)}[case]
    with pytest.warns(RuntimeWarning, match="the AGOP is zero.*M is kept as it was"):
        model = fit(iters=3).fit(Xd, yd)
    torch.testing.assert_close(model.M_, torch.eye(4, dtype=torch.float64))
    assert np.all(np.isfinite(model.predict(Xd)))


# -- outputs ---------------------------------------------------------------------------------------------------------

def test_output_dtypes_follow_the_input():
    model = fit().fit(X, y)
    assert model.predict(X).dtype == np.float64
    assert model.predict(X.astype(np.float32)).dtype == np.float32
    assert model.predict(X.tolist()).dtype == np.float64
    out = model.predict(torch.from_numpy(X))
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64


def test_binary_decision_function_agrees_with_predict_and_threshold_tools():
    from sklearn.model_selection import FixedThresholdClassifier
    labels = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)
    clf = rfm.RFMClassifier(iters=1).fit(X, labels)
    dec = clf.decision_function(X)
    np.testing.assert_array_equal(clf.classes_[(dec > 0).astype(int)], clf.predict(X))
    tuned = FixedThresholdClassifier(rfm.RFMClassifier(iters=1), threshold=0.0,
                                     response_method="decision_function").fit(X, labels)
    assert tuned.score(X, labels) == clf.score(X, labels)


# -- core functions --------------------------------------------------------------------------------------------------

def test_feature_matrix_problems():
    with pytest.raises(ValueError, match="must be square"):
        rfm.FeatureMatrix.full(torch.ones(3, 4))
    with pytest.raises(ValueError, match="must be symmetric"):
        rfm.FeatureMatrix.full(torch.tensor([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="non-negative entries"):
        rfm.FeatureMatrix.diag(torch.tensor([1.0, -1.0]))


def test_indefinite_M_init_is_refused_not_silently_clamped():
    with pytest.raises(ValueError, match="must be positive semidefinite, but its smallest eigenvalue is -1"):
        fit(M_init=np.diag([1.0, 1.0, 1.0, -1.0]) @ np.eye(4)).fit(X, y)


def test_M_init_of_the_wrong_size():
    with pytest.raises(ValueError, match="M acts on 3 features but X has 4"):
        fit(M_init=np.eye(3)).fit(X, y)


def test_kernel_parameter_problems():
    with pytest.raises(ValueError, match="does not take these parameters"):
        rfm.get_kernel("gaussian", exponent=2)
    with pytest.raises(ValueError, match=r"degree must be >= 1"):
        rfm.PolynomialKernel(degree=0)
    with pytest.raises(ValueError, match="X has 4 features but Z has 3"):
        rfm.LaplaceKernel()(X, X[:, :3])


def test_solve_krr_refuses_a_non_symmetric_matrix():
    K = torch.eye(3, dtype=torch.float64)
    K[0, 1] = 0.5
    with pytest.raises(ValueError, match="K must be symmetric"):
        rfm.solve_krr(K, torch.ones(3, dtype=torch.float64), 1e-3)


def test_solve_krr_shape_and_type_problems():
    K = torch.eye(3, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"K must be square \(n, n\)"):
        rfm.solve_krr(K[:2], torch.ones(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="Y must have shape .* n = 3 rows"):
        rfm.solve_krr(K, torch.ones(2, dtype=torch.float64))
    with pytest.raises(TypeError, match="K and Y must be torch tensors"):
        rfm.solve_krr(K.numpy(), np.ones(3))
    with pytest.raises(TypeError, match="one dtype on one device"):
        rfm.solve_krr(K, torch.ones(3, dtype=torch.float32))
    with pytest.raises(ValueError, match="Y contains NaN"):
        rfm.solve_krr(K, torch.tensor([1.0, float("nan"), 0.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="K contains NaN or infinite values"):
        rfm.solve_krr(torch.full((3, 3), float("nan"), dtype=torch.float64), torch.ones(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="K contains NaN or infinite values"):
        rfm.solve_krr(torch.full((3, 3), float("nan"), dtype=torch.float64), torch.ones(3, dtype=torch.float64),
                      check_symmetric=False)


def test_kernel_machine_problems():
    with pytest.raises(ValueError, match=r"alpha must have one row per centre \(30\)"):
        rfm.KernelMachine("laplace", X, np.ones(29))
    f = rfm.KernelMachine("laplace", X, np.ones(30))
    with pytest.raises(ValueError, match="Z has 3 features, but the model is expecting 4"):
        f.predict(X[:, :3])
    with pytest.raises(ValueError, match="algorithm must be one of"):
        f.agop(algorithm="fast")


def test_zero_and_non_finite_agop_are_named():
    with pytest.raises(rfm.DegenerateAGOPError, match="the AGOP is zero"):
        rfm.feature_matrix_from_agop(torch.zeros(3, 3))
    with pytest.raises(FloatingPointError, match="NaN or infinite entries.*features far larger than the bandwidth"):
        rfm.feature_matrix_from_agop(torch.full((3, 3), float("nan")))
    with pytest.raises(ValueError, match=r"rank must be <= 3"):
        rfm.feature_matrix_from_agop(torch.eye(3), rank=4)


def test_agop_of_a_function_that_returns_no_tensor():
    with pytest.raises(TypeError, match="f must return a torch.Tensor"):
        rfm.agop(lambda Z: Z.detach().numpy(), torch.zeros(3, 2))


def test_agop_of_a_function_that_mixes_rows():
    with pytest.raises(ValueError, match="must act row by row"):
        rfm.agop(lambda Z: Z.sum(), torch.zeros(3, 2))


def test_agop_of_a_function_with_nan_gradients():
    with pytest.raises(FloatingPointError, match="gradients of f are NaN or infinite at 1 of the points"):
        rfm.agop(lambda Z: Z[:, 0].sqrt(), torch.tensor([[0.0, 1.0], [1.0, 1.0]]))


def test_cuda_request_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(ValueError, match="CUDA is not available"):
        fit(device="cuda").fit(X, y)
