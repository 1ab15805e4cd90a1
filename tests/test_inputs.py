"""Bad input fails early with an error that names the problem."""
import numpy as np
import pytest
import torch

import rfm

X = np.random.default_rng(0).normal(size=(30, 4))
y = X[:, 0] * X[:, 1]


def fit(**params):
    return rfm.RFMRegressor(**{"iters": 1, **params})


@pytest.mark.parametrize("bad,match", [
    (X[:, 0], r"Expected 2D array, got 1D array instead"),
    (X[None], r"Found array with dim 3"),
    (np.zeros((0, 4)), "0 sample"),
])
def test_wrong_shapes_are_named(bad, match):
    with pytest.raises(ValueError, match=match):
        fit().fit(bad, y)


def test_nan_and_inf_in_inputs_and_targets():
    Xn = X.copy()
    Xn[3, 2] = np.nan
    with pytest.raises(ValueError, match="X contains 1 NaN or infinite"):
        fit().fit(Xn, y)
    yi = y.copy()
    yi[0] = np.inf
    with pytest.raises(ValueError, match="y contains NaN or infinite"):
        fit().fit(X, yi)
    model = fit().fit(X, y)
    with pytest.raises(ValueError, match="X contains 1 NaN"):
        model.predict(Xn)


def test_mismatched_lengths():
    with pytest.raises(ValueError, match="y has 29 rows but X has 30"):
        fit().fit(X, y[:-1])
    with pytest.raises(ValueError, match="X_val and y_val must be given together"):
        fit().fit(X, y, X_val=X)
    with pytest.raises(ValueError, match="y_val has 10 rows but X has 30"):
        fit().fit(X, y, X, y[:10])


def test_wrong_number_of_features_at_predict_and_unfitted_model():
    with pytest.raises(RuntimeError, match="not fitted yet"):
        fit().predict(X)
    with pytest.raises(ValueError, match="X has 3 features, but the model was fitted with 4"):
        fit().fit(X, y).predict(X[:, :3])
    with pytest.raises(ValueError, match="X_val has 3 features"):
        fit().fit(X, y, X[:, :3], y)


def test_unknown_kernel_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown kernel 'laplacian'; known kernels: \['gaussian', 'laplace'"):
        fit(kernel="laplacian").fit(X, y)
    with pytest.raises(ValueError, match="exponent applies to the laplace kernel only"):
        fit(kernel="gaussian", exponent=2.0).fit(X, y)


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
])
def test_bad_parameters_are_named(params, match):
    with pytest.raises((ValueError, TypeError), match=match):
        fit(**params).fit(X, y)


@pytest.mark.parametrize("labels", [np.array(["a", "b"] * 15), np.arange(30) % 3, np.arange(30) % 2 == 0])
def test_classification_labels_given_to_the_regressor(labels):
    with pytest.raises(ValueError, match="looks like class labels; use RFMClassifier"):
        fit().fit(X, labels)


def test_classifier_label_problems():
    with pytest.raises(ValueError, match="a single class"):
        rfm.RFMClassifier(iters=0).fit(X, np.zeros(30))
    with pytest.raises(ValueError, match="y must be a 1-D array of class labels"):
        rfm.RFMClassifier(iters=0).fit(X, np.zeros((30, 2)))
    with pytest.raises(ValueError, match=r"y_val contains labels not seen in y: \[7\]"):
        rfm.RFMClassifier(iters=0).fit(X, np.arange(30) % 2, X[:5], np.array([0, 1, 7, 0, 1]))


def test_feature_matrix_and_kernel_problems():
    with pytest.raises(ValueError, match="must be square"):
        rfm.FeatureMatrix.full(torch.ones(3, 4))
    with pytest.raises(ValueError, match="must be symmetric"):
        rfm.FeatureMatrix.full(torch.tensor([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="non-negative entries"):
        rfm.FeatureMatrix.diag(torch.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="M acts on 3 features but X has 4"):
        fit(M_init=np.eye(3)).fit(X, y)
    with pytest.raises(ValueError, match="does not take these parameters"):
        rfm.get_kernel("gaussian", exponent=2)
    with pytest.raises(ValueError, match=r"degree must be >= 1"):
        rfm.PolynomialKernel(degree=0)


def test_agop_of_a_function_that_returns_no_tensor():
    with pytest.raises(TypeError, match="f must return a torch.Tensor"):
        rfm.agop(lambda Z: Z.detach().numpy(), torch.zeros(3, 2))


def test_cuda_request_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(ValueError, match="CUDA is not available"):
        fit(device="cuda").fit(X, y)
