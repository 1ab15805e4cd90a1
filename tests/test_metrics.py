"""Matrix correlations, subspace overlaps, PSD powers and prediction metrics on known answers."""
import numpy as np
import pytest
import torch

import rfm


def test_pearson_ignores_a_constant_shift_and_cosine_does_not():
    A = torch.tensor([[2.0, 1.0], [1.0, 3.0]])
    assert rfm.matrix_correlation(A, A + 5.0) == pytest.approx(1.0)
    assert rfm.matrix_correlation(A, A + 5.0, kind="cosine") < 0.99
    assert rfm.matrix_correlation(A, 3 * A, kind="cosine") == pytest.approx(1.0)
    assert rfm.matrix_correlation(A, -A) == pytest.approx(-1.0)


def test_correlation_matches_numpy_corrcoef():
    g = np.random.default_rng(0)
    A, B = g.normal(size=(5, 5)), g.normal(size=(5, 5))
    assert rfm.matrix_correlation(A, B) == pytest.approx(np.corrcoef(A.ravel(), B.ravel())[0, 1])


def test_correlation_errors_are_named():
    with pytest.raises(ValueError, match="same shape"):
        rfm.matrix_correlation(torch.ones(2, 2), torch.ones(3, 3))
    with pytest.raises(ValueError, match="constant"):
        rfm.matrix_correlation(torch.ones(2, 2), torch.eye(2))
    with pytest.raises(ValueError, match="kind must be one of"):
        rfm.matrix_correlation(torch.eye(2), torch.eye(2), kind="spearman")


def test_subspace_overlap_known_values():
    E = torch.eye(4)
    assert rfm.subspace_overlap(E[:, :2], E[:, :2]) == pytest.approx(1.0)
    assert rfm.subspace_overlap(E[:, :2], E[:, 2:]) == pytest.approx(0.0)
    v = (E[:, 0] + E[:, 2])[:, None]  # half in span(e1, e2)
    assert rfm.subspace_overlap(E[:, :2], v) == pytest.approx(0.5)
    M = torch.diag(torch.tensor([0.1, 5.0, 4.0, 0.2]))
    assert rfm.top_eigenspace_overlap(M, [1, 2]) == pytest.approx(1.0)
    assert rfm.top_eigenspace_overlap(M, [0, 1]) == pytest.approx(0.5)


def test_psd_power_square_root_and_clamping():
    g = torch.Generator().manual_seed(0)
    F = torch.randn(5, 3, generator=g, dtype=torch.float64)
    A = F @ F.T  # rank 3: two zero eigenvalues that round to tiny negatives
    R = rfm.psd_power(A, 0.5)
    torch.testing.assert_close(R @ R, A, rtol=1e-8, atol=1e-10)
    assert torch.isfinite(R).all()
    torch.testing.assert_close(rfm.psd_power(torch.tensor([4.0, -1e-9]), 0.5), torch.tensor([2.0, 0.0]))


def test_prediction_metrics():
    y = torch.tensor([1.0, 2.0, 3.0])
    assert rfm.r2_score(y, y) == 1.0
    assert rfm.r2_score(y, torch.full((3,), 2.0)) == pytest.approx(0.0)
    assert rfm.mse(y, y + 1) == pytest.approx(1.0)
    assert rfm.accuracy(torch.tensor([1, 2, 3]), torch.tensor([1, 0, 3])) == pytest.approx(2 / 3)


def test_seeding_and_devices():
    g1, g2 = rfm.make_generator(5), rfm.make_generator(5)
    assert torch.equal(torch.rand(3, generator=g1), torch.rand(3, generator=g2))
    assert rfm.get_device("cpu").type == "cpu"
    assert rfm.get_device(None).type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_fit_scaling_law_recovers_an_exact_power_law_and_its_r2():
    from rfm.metrics import fit_scaling_law

    n = np.array([10.0, 30.0, 100.0, 300.0, 1000.0])
    law = fit_scaling_law(n, 3.0 * n ** -0.7)
    assert law.slope == pytest.approx(-0.7, rel=1e-12) and law.coef == pytest.approx(3.0, rel=1e-12)
    assert law.r2 == pytest.approx(1.0) and law(1e4) == pytest.approx(3.0 * 1e4 ** -0.7, rel=1e-12)
    noisy = fit_scaling_law(n, 3.0 * n ** -0.7 * np.array([1.1, 0.9, 1.05, 0.95, 1.0]))
    slope, intercept = np.polyfit(np.log(n), np.log(3.0 * n ** -0.7 * np.array([1.1, 0.9, 1.05, 0.95, 1.0])), 1)
    assert noisy.slope == pytest.approx(slope, rel=1e-12) and noisy.coef == pytest.approx(np.exp(intercept), rel=1e-12)
    assert 0 < noisy.r2 < 1
    with pytest.raises(ValueError, match="positive"):
        fit_scaling_law(n, np.zeros(5))
    with pytest.raises(ValueError, match="two"):
        fit_scaling_law([1.0], [1.0])


def test_the_transfer_module_re_exports_the_one_log_log_fit():
    from rfm.metrics import ScalingLaw, fit_scaling_law
    from rfm.models import transfer

    assert transfer.fit_scaling_law is fit_scaling_law and transfer.ScalingLaw is ScalingLaw


def test_fit_scaling_law_in_base_10_reads_the_intercept_in_decades():
    from rfm.metrics import fit_scaling_law

    n = np.array([10.0, 30.0, 100.0, 300.0, 1000.0])
    law = fit_scaling_law(n, 3.0 * n ** -0.7, base=10)  # log10 err = log10 3 - 0.7 log10 n exactly
    assert law.slope == pytest.approx(-0.7, rel=1e-12) and law.intercept == pytest.approx(np.log10(3.0), rel=1e-12)
    assert law.coef == pytest.approx(3.0, rel=1e-12) and law.r2 == pytest.approx(1.0) and law.base == 10.0
    two = fit_scaling_law(n, 3.0 * n ** -0.7, base=2)
    assert two.intercept == pytest.approx(np.log2(3.0), rel=1e-12) and two.slope == pytest.approx(-0.7, rel=1e-12)
    # a noisy law: the slope and R^2 do not depend on the base, the intercept is the base-10 polyfit's
    err = 3.0 * n ** -0.7 * np.array([1.1, 0.9, 1.05, 0.95, 1.0])
    slope10, intercept10 = np.polyfit(np.log10(n), np.log10(err), 1)
    noisy, natural = fit_scaling_law(n, err, base=10), fit_scaling_law(n, err)
    assert noisy.slope == pytest.approx(slope10, rel=1e-12) and noisy.intercept == pytest.approx(intercept10, rel=1e-12)
    assert noisy.slope == pytest.approx(natural.slope, rel=1e-12) and noisy.r2 == pytest.approx(natural.r2, rel=1e-12)
    assert noisy.coef == pytest.approx(natural.coef, rel=1e-12)
    with pytest.raises(ValueError, match="other than 1"):
        fit_scaling_law(n, err, base=1)
    with pytest.raises(ValueError):
        fit_scaling_law(n, err, base=-10)


def test_fit_scaling_law_default_is_the_natural_log_fit_bit_for_bit():
    from rfm.metrics import fit_scaling_law

    n = np.array([10.0, 30.0, 100.0, 300.0, 1000.0])
    err = 3.0 * n ** -0.7 * np.array([1.1, 0.9, 1.05, 0.95, 1.0])
    x, y = np.log(n), np.log(err)
    slope, intercept = np.polyfit(x, y, 1)
    r2 = 1.0 - ((y - (intercept + slope * x)) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    law = fit_scaling_law(n, err)
    assert (law.coef, law.slope, law.r2) == (float(np.exp(intercept)), float(slope), float(r2))
    assert law.intercept == float(intercept) and law.base == np.e
