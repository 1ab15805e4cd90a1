"""The RFM estimators: learning low-rank features, the loop's conventions, types in and out, scikit-learn use."""
import numpy as np
import pytest
import torch
from _reference import agop_ref, predictor_ref
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import rfm


@pytest.fixture(scope="module")
def product_task():
    X, y = rfm.data.low_rank_polynomial(2000, 100, generator=0, dtype="float32")
    X_test, y_test = rfm.data.low_rank_polynomial(2000, 100, generator=1, dtype="float32")
    return X, y, X_test, y_test


def _small(n=120, d=6, seed=0):
    X, y = rfm.data.low_rank_polynomial(n, d, generator=seed)
    return X.numpy(), y.numpy()


def test_rfm_learns_x1_x2_where_the_laplace_kernel_fails(product_task):
    X, y, X_test, y_test = product_task
    laplace = rfm.RFMRegressor(bandwidth=10.0, reg=1e-3, iters=0).fit(X, y)
    assert laplace.score(X_test, y_test) <= 0.3
    model = rfm.RFMRegressor(bandwidth=10.0, reg=1e-3, iters=5).fit(X, y)
    assert model.score(X_test, y_test) >= 0.85
    assert rfm.top_eigenspace_overlap(model.M_, [0, 1]) >= 0.9
    assert len(model.history_) == 6 and model.best_iter_ == 5


def test_history_records_each_solve_and_the_metric_used():
    X, y = _small()
    model = rfm.RFMRegressor(iters=3, dtype="float64").fit(X[:80], y[:80], X[80:], y[80:])
    assert [r["iteration"] for r in model.history_] == [0, 1, 2, 3]
    for record in model.history_:
        assert {"train_mse", "train_r2", "val_mse", "val_r2", "M", "time_s", "solver"} <= set(record)
        assert record["M"].shape == (6, 6)
    torch.testing.assert_close(model.history_[0]["M"], torch.eye(6, dtype=torch.float64))
    best = min(range(4), key=lambda t: model.history_[t]["val_mse"])
    assert model.best_iter_ == best
    torch.testing.assert_close(model.M_, model.history_[best]["M"])


def test_agop_power_centring_and_normalisation_are_honoured():
    X, y = _small()
    base = rfm.RFMRegressor(iters=0, dtype="float64").fit(X, y)
    for power, centre, normalize in [(0.5, False, "max"), (1.0, True, None), (0.5, True, "trace")]:
        model = rfm.RFMRegressor(iters=1, agop_power=power, center=centre, normalize=normalize,
                                 dtype="float64").fit(X, y)
        expected = rfm.feature_update(base.agop(center=centre), power, normalize)
        torch.testing.assert_close(model.history_[1]["M"], expected, rtol=1e-8, atol=1e-10)


def test_closed_form_agop_of_the_model_matches_autograd_through_predict():
    X, y = _small()
    model = rfm.RFMRegressor(iters=2, dtype="float64").fit(X, y)
    Xt = torch.as_tensor(X)
    # predict's backward is the closed form itself: compare both with the independent reference (tests/_reference.py)
    ref = agop_ref(predictor_ref("laplace", Xt, model.alpha_.reshape(len(Xt), -1), model.M_, bandwidth=10.0), Xt)
    torch.testing.assert_close(model.agop(Xt), ref, rtol=1e-9, atol=1e-11)
    torch.testing.assert_close(rfm.agop(model.predict, Xt), ref, rtol=1e-9, atol=1e-11)


def test_predict_returns_the_type_it_was_given_and_is_differentiable():
    X, y = _small()
    model = rfm.RFMRegressor(iters=1, dtype="float64").fit(X, y)
    out = model.predict(X[:5])
    assert isinstance(out, np.ndarray) and out.shape == (5,)
    Xt = torch.as_tensor(X[:5]).requires_grad_(True)
    out_t = model.predict(Xt)
    assert isinstance(out_t, torch.Tensor) and out_t.requires_grad
    (grad,) = torch.autograd.grad(out_t.sum(), Xt)
    torch.testing.assert_close(grad, torch.as_tensor(model.gradients(X[:5]))[:, 0, :])


def test_diag_and_low_rank_feature_matrices():
    X, y = _small(n=300, d=8)
    diag = rfm.RFMRegressor(iters=2, diag=True, dtype="float64").fit(X, y)
    assert diag.M_.shape == (8,) and diag.feature_matrix_.kind == "diag"
    assert int(diag.M_.argmax()) in (0, 1)
    low = rfm.RFMRegressor(iters=2, rank=2, dtype="float64").fit(X, y)
    assert low.feature_matrix_.kind == "factor" and torch.linalg.matrix_rank(low.M_) == 2
    assert float(low.M_.abs().max()) == pytest.approx(1.0)
    assert rfm.top_eigenspace_overlap(low.M_, [0, 1]) > 0.9


def test_same_seed_same_model_other_seed_other_agop_sample():
    X, y = _small(n=200)
    fit = lambda seed: rfm.RFMRegressor(iters=2, max_agop_points=50, random_state=seed, dtype="float64").fit(X, y)
    torch.testing.assert_close(fit(3).M_, fit(3).M_, rtol=0, atol=0)
    assert not torch.allclose(fit(3).M_, fit(4).M_)


def test_callback_sees_a_usable_model_and_can_stop():
    X, y = _small()
    seen = []

    def callback(model, record):
        seen.append((record["iteration"], float(np.mean((model.predict(X) - y) ** 2))))
        return record["iteration"] == 1

    model = rfm.RFMRegressor(iters=5, callback=callback, dtype="float64").fit(X, y)
    assert [t for t, _ in seen] == [0, 1] and len(model.history_) == 2
    assert seen[1][1] == pytest.approx(model.history_[1]["train_mse"], rel=1e-6)


def test_classifier_on_digits_with_labels_probabilities_and_best_iteration():
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    names = np.array(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])[y]
    clf = rfm.RFMClassifier(bandwidth=10.0, iters=1).fit(X[:600], names[:600], X[600:900], names[600:900])
    assert list(clf.classes_) == sorted(set(names))
    assert clf.score(X[900:1200], names[900:1200]) > 0.9
    proba = clf.predict_proba(X[900:910])
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-6)
    assert (clf.classes_[proba.argmax(1)] == clf.predict(X[900:910])).all()
    binary = rfm.RFMClassifier(bandwidth=10.0, iters=1).fit(X[:400], y[:400] % 2)
    assert binary.decision_function(X[:3]).shape == (3,) and binary.predict_proba(X[:3]).shape == (3, 2)
    assert binary.score(X[400:800], y[400:800] % 2) > 0.85


def test_scikit_learn_clone_pipeline_and_grid_search():
    X, y = _small(n=150)
    model = rfm.RFMRegressor(iters=1, reg=1e-2, dtype="float64")
    assert clone(model).get_params() == model.get_params()
    assert model.set_params(reg=0.1).reg == 0.1
    pipe = make_pipeline(StandardScaler(), rfm.RFMRegressor(iters=1, dtype="float64")).fit(X, y)
    assert pipe.score(X, y) > 0.5
    search = GridSearchCV(rfm.RFMRegressor(iters=1, dtype="float64"), {"bandwidth": [1.0, 10.0]}, cv=2).fit(X, y)
    assert search.best_params_["bandwidth"] in (1.0, 10.0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fit_matches_cpu_fit():
    X, y = _small(n=200)
    cpu = rfm.RFMRegressor(iters=2, dtype="float64", device="cpu").fit(X, y)
    gpu = rfm.RFMRegressor(iters=2, dtype="float64", device="cuda").fit(X, y)
    torch.testing.assert_close(gpu.M_, cpu.M_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(gpu.predict(X), cpu.predict(X), rtol=1e-6, atol=1e-8)


def test_diag_rfm_records_the_initial_identity_as_a_vector():
    # with diag=True, M_ and the records are the diagonal: iteration 0's identity too, never a dense (d, d) matrix
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 7)), rng.integers(0, 2, 40)
    for iters in (0, 1):
        clf = rfm.RFMClassifier(iters=iters, bandwidth=5.0, diag=True).fit(X, y)
        assert clf.M_.shape == (7,)
        assert clf.history_[0]["M"].shape == (7,)
        torch.testing.assert_close(clf.history_[0]["M"], torch.ones(7, dtype=torch.float64))
    assert rfm.RFMClassifier(iters=0, bandwidth=5.0).fit(X, y).M_.shape == (7, 7)


def test_centre_is_a_deprecated_alias_of_center():
    X = np.random.default_rng(0).standard_normal((40, 3))
    y = X[:, 0] * X[:, 1]
    new = rfm.RFMRegressor(iters=1, center=True, dtype="float64").fit(X, y)
    with pytest.warns(DeprecationWarning, match="renamed center"):
        old = rfm.RFMRegressor(iters=1, centre=True, dtype="float64").fit(X, y)
    assert torch.equal(old.M_, new.M_)
    with pytest.warns(DeprecationWarning, match="renamed agop"):
        torch.testing.assert_close(new.agop(centre=False), new.agop(center=False), rtol=0, atol=0)
