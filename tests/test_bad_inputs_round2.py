"""Bad input, round two (issue 41): the cases that were silent, or failed with a message naming an internal
parameter or the wrong culprit, now fail with an error (or a warning) that names the argument and the fix."""
import warnings

import numpy as np
import pytest
import torch

import rfm
from rfm.core.cg import KernelOperator, pcg
from rfm.core.kernels import get_kernel
from rfm.nets import MLP
from rfm.nets import alignment as al
from rfm.selection import tuning as T
from rfm.theory.infinite_depth import deep_dual_kernel

X = np.random.default_rng(0).normal(size=(40, 4))
y = X[:, 0] * X[:, 1]
KERNEL = get_kernel("laplace", bandwidth=10.0)


def regressor(**params):
    return rfm.RFMRegressor(**{"iters": 0, **params})


# -- silent results ------------------------------------------------------------------------------------------------

def test_kernel_operator_refuses_non_finite_points():
    Xt = torch.tensor(X)
    Xt[3, 1] = float("nan")
    with pytest.raises(ValueError, match=r"Xt contains 1 NaN or infinite"):
        KernelOperator(KERNEL, Xt)


def test_eigenpro3_warns_that_it_ignores_a_set_reg():
    with pytest.warns(UserWarning, match=r"solver='eigenpro3' ignores reg \(got reg=100.0\)"):
        regressor(solver="eigenpro3", reg=100.0).fit(X, y)


@pytest.mark.parametrize("reg", [1e-3, 0.0])
def test_eigenpro3_with_the_default_or_no_reg_is_quiet(reg):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        regressor(solver="eigenpro3", reg=reg).fit(X, y)


@pytest.mark.parametrize("t", [[1.5], [-1.01], [float("nan")]])
def test_deep_dual_kernel_refuses_values_that_are_not_cosines(t):
    with pytest.raises(ValueError, match=r"t must be cosines in \[-1, 1\]"):
        deep_dual_kernel(torch.tensor(t), "relu", 3)


def test_deep_dual_kernel_keeps_cosines_rounded_just_past_one():
    t = torch.tensor([1.0 + 1e-7, -1.0 - 1e-7, 0.3], dtype=torch.float64)
    out = deep_dual_kernel(t, "relu", 3).value
    assert bool(torch.isfinite(out).all()) and float(out[0]) == pytest.approx(1.0)


@pytest.mark.parametrize("method", ["random", "carbs"])
@pytest.mark.parametrize("bad", [(float("nan"), 1.0), (1.0, float("inf"))])
def test_search_refuses_a_non_finite_objective(method, bad):
    params = [T.Param("x", 0.1, 10.0, log=True)]
    with pytest.raises(ValueError, match=r"non-finite"):
        T.run_search(lambda s: bad, params, 3, method=method)


def test_a_saturated_kernel_is_warned_about():
    with pytest.warns(RuntimeWarning, match=r"kernel matrix is numerically constant"):
        regressor().fit(X * 1e-30, y)


def test_an_ordinary_fit_does_not_warn_of_saturation():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        regressor(iters=2).fit(X, y)
        regressor(iters=1, solver="cg").fit(X, y)


def test_agop_warns_when_f_uses_batch_statistics():
    with pytest.warns(UserWarning, match=r"does not act row by row"):
        rfm.agop(lambda Z: (Z - Z.mean(0)).square().sum(1), torch.tensor(X), batch_size=8)


def test_agop_warns_about_batchnorm_in_training_mode():
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 1)).double()
    with pytest.warns(UserWarning, match=r"batch-statistics layers in training mode"):
        rfm.agop(net, torch.tensor(X), batch_size=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        rfm.agop(net.eval(), torch.tensor(X), batch_size=8)


def test_agop_of_a_row_wise_function_is_quiet_and_does_not_move_the_rng():
    def f(Z):  # row-wise, but draws random numbers: the check must not shift the caller's stream
        return Z[:, 0] * Z[:, 1] + 0.0 * torch.rand(Z.shape[0], dtype=Z.dtype)

    torch.manual_seed(0)
    torch.rand(40, dtype=torch.float64)          # what the AGOP pass itself draws (one batch of 40 rows)
    expected = torch.rand(3)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        rfm.agop(f, torch.tensor(X))
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("strings", [X.astype(str), X.astype(str).astype(object)])
def test_number_strings_are_refused_not_parsed(strings):
    with pytest.raises(TypeError, match=r"X must be numeric, got strings .*np.asarray\(X, dtype=float\)"):
        regressor().fit(strings, y)


# -- unclear messages ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("solver,n", [("eigenpro2", 1), ("eigenpro2", 2), ("eigenpro3", 1)])
def test_eigenpro_with_too_few_samples_says_how_many_are_needed(solver, n):
    with pytest.raises(ValueError, match=r"EigenPro needs at least 5 points .* got \d+ \(n = \d+ samples\)"):
        regressor(solver=solver).fit(X[:n], y[:n])


def test_agop_of_a_non_callable_names_f():
    with pytest.raises(TypeError, match=r"f must be callable .* got int 3"):
        rfm.agop(3, torch.tensor(X))


def test_agop_names_a_dtype_mismatch_between_x_and_the_network():
    with pytest.raises(TypeError, match=r"X has dtype torch.float64 but f's parameters are torch.float32"):
        rfm.agop(torch.nn.Linear(4, 1), torch.tensor(X))


def test_kernel_matrix_accepts_numpy_arrays():
    K = rfm.kernel_matrix(KERNEL, X)
    torch.testing.assert_close(K, rfm.kernel_matrix(KERNEL, torch.tensor(X)))
    with pytest.raises(ValueError, match=r"Z has 3 features but X has 4"):
        rfm.kernel_matrix(KERNEL, X, X[:, :3])


def test_ptk_blames_the_network_weights_not_x():
    net = MLP(4, [7, 5], 1, dtype="float64", generator=1)
    with torch.no_grad():
        net.layers[0].weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"parameters \['layers.0.weight'\] contain NaN .* X is not the problem"):
        al.ptk(net, torch.tensor(X), 1)


def test_a_pandas_column_of_strings_is_named():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"a": X[:, 0], "colour": ["red", "blue"] * 20})
    with pytest.raises(TypeError, match=r"column\(s\) \['colour'\] hold strings \(e.g. 'red'\)"):
        regressor().fit(df, y)


@pytest.mark.parametrize("labels,match", [
    (np.array(["a", None] * 20, dtype=object), r"y contains 20 missing label\(s\) \(None\)"),
    (np.array(["a", 1] * 20, dtype=object), r"y mixes string labels with 20 non-string"),
])
def test_labels_with_none_or_mixed_types_say_so(labels, match):
    with pytest.raises(ValueError, match=match):
        rfm.RFMClassifier(iters=0).fit(X, labels)


def test_pcg_names_both_devices():
    op = KernelOperator(KERNEL, torch.tensor(X))
    with pytest.raises(ValueError, match=r"Y is on device meta but the operator's points are on cpu"):
        pcg(op, torch.ones(40, 1, device="meta"), 1e-3)


def test_complex_x_is_one_line():
    with pytest.raises(ValueError) as info:
        regressor().fit(X.astype(np.complex128), y)
    assert str(info.value) == ("Complex data not supported: X has dtype complex128; pass real values (e.g. X.real, or "
                               "its absolute value)")
