"""rfm.theory.matrix_inversion: Newton-Schulz, SGD with an adaptive (self-preconditioned) step, the convergence
order."""
import numpy as np
import pytest
import torch

from rfm.theory import matrix_inversion as MI


def _problem(d=12, kappa=10.0, seed=0):
    return MI.spd_matrix(d, kappa, seed=seed)


def test_newton_schulz_squares_the_residual_exactly():
    A = _problem()
    X0 = MI.start_near_inverse(A, 0.7, seed=1)
    eye = torch.eye(len(A), dtype=A.dtype)
    R0 = eye - A @ X0
    run = MI.newton_schulz(A, X0, 1)
    R1 = eye - A @ run.X
    assert torch.allclose(R1, R0 @ R0, atol=1e-12)
    assert run.errors.shape == (2,) and run.errors.dtype == torch.float64
    assert run.errors[1] == pytest.approx(float(torch.linalg.matrix_norm(R0 @ R0)), rel=1e-10)


def test_newton_schulz_basin_is_the_spectral_radius():
    A = _problem()
    inside = MI.newton_schulz(A, MI.start_near_inverse(A, 0.9, seed=2), 30)
    outside = MI.newton_schulz(A, MI.start_near_inverse(A, 1.1, seed=2), 30)
    assert inside.errors[-1] < 1e-10 and not inside.diverged
    assert outside.diverged


@pytest.mark.parametrize("p", [1.0, 1.5, 2.0, 3.0])
def test_convergence_order_recovers_p(p):
    e = [0.5]
    while e[-1] > 1e-14:
        e.append(0.8 * e[-1] ** p if p > 1 else 0.6 * e[-1])
    e += [1e-300, 1e-300]  # a plateau below the floor is ignored
    fit = MI.convergence_order(e, floor=1e-15)
    assert fit.order == pytest.approx(p, abs=1e-9)
    if p > 1:
        assert fit.log_constant == pytest.approx(np.log(0.8), abs=1e-8)


def test_convergence_order_window_and_errors():
    e = torch.tensor([10.0, 5.0, 0.5, 0.25, 0.0625, 0.00390625])  # quadratic below 1, linear above
    assert MI.convergence_order(e, ceiling=0.5).order == pytest.approx(2.0)
    assert MI.convergence_order(e, ceiling=0.5).pairs == 3
    with pytest.raises(ValueError, match="pair"):
        MI.convergence_order(e, ceiling=0.1, min_pairs=3)
    with pytest.raises(ValueError, match="1-D"):
        MI.convergence_order(np.ones((2, 2)))
    with pytest.raises(ValueError, match="undefined"):
        MI.convergence_order([1e-3, 1e-3, 1e-3])


def test_adaptive_sgd_with_full_batch_is_newton_schulz():
    A = _problem()
    X0 = MI.start_near_inverse(A, 0.5, seed=3)
    ns = MI.newton_schulz(A, X0, 3)
    for directions in ("coordinates", "orthogonal"):
        sgd = MI.sgd_inverse(A, X0, 3, batch_size=len(A), directions=directions, seed=0)
        assert torch.allclose(sgd.X, ns.X, atol=1e-12)
        assert torch.allclose(sgd.errors, ns.errors, rtol=1e-8, atol=1e-15)


@pytest.mark.parametrize("directions", ["coordinates", "orthogonal"])
@pytest.mark.parametrize("batch_size", [1, 3])
def test_adaptive_sgd_epoch_bound_and_order(directions, batch_size):
    """Proved in the module docstring: e_{epoch+1} <= e_epoch^2 once e_0 < 1; the fitted order is about 2."""
    A = _problem(d=12, kappa=30.0)
    X0 = MI.start_near_inverse(A, 0.9 / np.sqrt(12), seed=4)  # Frobenius error 0.9
    run = MI.sgd_inverse(A, X0, 8, batch_size=batch_size, directions=directions, seed=5)
    e = run.errors.numpy()
    assert e[0] == pytest.approx(0.9)
    assert np.all(e[1:] <= e[:-1] ** 2 * (1 + 1e-9) + 1e-13)
    assert e[-1] < 1e-12
    assert MI.convergence_order(e, floor=1e-11).order > 1.8


def test_fixed_step_sgd_is_linear_and_one_epoch_is_one_gradient_step():
    A = _problem(d=12, kappa=30.0)
    X0 = MI.start_near_inverse(A, 0.5, seed=6)
    eta = MI.richardson_step(A)
    run = MI.sgd_inverse(A, X0, 1, batch_size=4, step=eta, seed=7)
    eye = torch.eye(12, dtype=A.dtype)
    assert torch.allclose(eye - A @ run.X, (eye - eta * A) @ (eye - A @ X0), atol=1e-12)
    long = MI.sgd_inverse(A, X0, 60, batch_size=4, step=eta, seed=7)
    assert MI.convergence_order(long.errors).order == pytest.approx(1.0, abs=0.1)
    frozen = MI.sgd_inverse(A, X0, 30, batch_size=4, step="frozen", seed=7)
    assert MI.convergence_order(frozen.errors).order < 1.3
    assert frozen.errors[-1] < frozen.errors[0]


def test_sgd_seeds_replace_sampling_and_divergence():
    A = _problem()
    X0 = MI.start_near_inverse(A, 0.6, seed=8)
    a = MI.sgd_inverse(A, X0, 4, batch_size=2, sampling="replace", seed=9)
    b = MI.sgd_inverse(A, X0, 4, batch_size=2, sampling="replace", seed=9)
    c = MI.sgd_inverse(A, X0, 4, batch_size=2, sampling="replace", seed=10)
    assert torch.equal(a.X, b.X) and not torch.equal(a.X, c.X)
    far = MI.sgd_inverse(A, MI.start_near_inverse(A, 1.5, seed=8), 40, batch_size=2, seed=0)
    assert far.diverged and len(far.errors) < 41
    early = MI.sgd_inverse(A, X0, 50, batch_size=2, seed=0, tol=1e-6)
    assert early.errors[-1] <= 1e-6 and len(early.errors) < 51


def test_torch_in_torch_out_and_dtype():
    A = _problem().float()
    X0 = 0.1 * torch.eye(12)
    run = MI.sgd_inverse(A, X0, 2, batch_size=4)
    assert isinstance(run.X, torch.Tensor) and run.X.dtype == torch.float32
    npA = MI.spd_matrix(5, 3.0).numpy()
    run = MI.newton_schulz(npA, 0.2 * np.eye(5), 2)
    assert isinstance(run.X, torch.Tensor) and run.X.dtype == torch.float64
    assert MI.residual_norm(npA, np.linalg.inv(npA)) < 1e-12


def test_bad_input_errors_name_the_argument():
    A = _problem()
    X0 = torch.eye(12, dtype=A.dtype)
    with pytest.raises(ValueError, match="X0 must have A's shape"):
        MI.sgd_inverse(A, torch.eye(5), 1)
    with pytest.raises(ValueError, match="A must be a square"):
        MI.newton_schulz(torch.ones(3, 4), torch.eye(3), 1)
    with pytest.raises(ValueError, match="batch_size must divide"):
        MI.sgd_inverse(A, X0, 1, batch_size=5)
    with pytest.raises(ValueError, match="step must be one of"):
        MI.sgd_inverse(A, X0, 1, step="newton")
    with pytest.raises(ValueError, match="step must be >"):
        MI.sgd_inverse(A, X0, 1, step=-0.1)
    with pytest.raises(ValueError, match="directions"):
        MI.sgd_inverse(A, X0, 1, directions="gaussian")
    with pytest.raises(ValueError, match="positive definite"):
        MI.richardson_step(-A)
    with pytest.raises(ValueError, match="kappa"):
        MI.spd_matrix(4, 0.5)


def test_spd_matrix_condition_number():
    A = MI.spd_matrix(20, 100.0, seed=3)
    ev = torch.linalg.eigvalsh(A)
    assert torch.allclose(A, A.T)
    assert float(ev[0]) == pytest.approx(1.0) and float(ev[-1]) == pytest.approx(100.0)
    assert torch.equal(A, MI.spd_matrix(20, 100.0, seed=3))


def test_convergence_order_is_the_scaling_law_fit_of_consecutive_errors():
    from rfm.models.transfer import fit_scaling_law
    e = np.array([0.5, 0.3, 0.12, 0.03, 2e-3, 1e-5, 1e-9])
    fit = MI.convergence_order(e, floor=1e-10)
    assert fit.order == fit_scaling_law(e[:-1], e[1:]).slope
    assert fit.pairs == 6
