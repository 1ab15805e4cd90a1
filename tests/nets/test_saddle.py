"""Normalised ascent on a sphere (rfm.nets.saddle.SphereAscent), on known answers."""
import math

import torch

from rfm.nets.saddle import SphereAscent
from rfm.nets.training import fit


def test_sphere_ascent_finds_the_maximiser_of_a_linear_objective_on_the_sphere():
    # max <a, w> over ||w|| = 1 is a / ||a||; the angle to it shrinks by about 1 / (1 + lr) a step; ||w|| stays 1
    a = torch.tensor([3.0, 4.0], dtype=torch.float64)
    w = torch.tensor([1.0, 0.0], dtype=torch.float64, requires_grad=True)
    norms = []
    fit(SphereAscent([w], lr=0.5), lambda t: a @ w, 100, callback=lambda t, v: norms.append(float(w.detach().norm())),
        diverged=None)
    torch.testing.assert_close(w.detach(), a / 5, rtol=0, atol=1e-12)
    assert all(math.isclose(n, 1.0, abs_tol=1e-15) for n in norms)


def test_one_sphere_ascent_step_by_hand():
    w = torch.tensor([0.6, 0.8], dtype=torch.float64, requires_grad=True)
    opt = SphereAscent([w], lr=0.1)
    (w[0] * 2.0).backward()                         # gradient (2, 0), normalised (1, 0)
    opt.step()
    expected = torch.tensor([0.7, 0.8], dtype=torch.float64)
    torch.testing.assert_close(w.detach(), expected / expected.norm(), rtol=0, atol=1e-15)
