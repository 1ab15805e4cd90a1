"""The closed-form convolutional NTK (rfm.core.cntk) against the empirical NTK of wide convolutional networks
(torch.func, float64), symmetry and positive semi-definiteness, and two special cases that are known kernels of the
package: 1 x 1 images (the fully connected ReLU NTK) and one convolution with the flatten read-out (the fully
connected NTK averaged over aligned patch pairs)."""
import math

import pytest
import torch

from rfm import NTKKernel
from rfm.core.cntk import cntk_ridge, conv_ntk
from rfm.core.patches import patches

# ------------------------------------------------------------------ the network whose infinite-width NTK it is


def cnn_network(C, width, depth, q, padding, readout, w_std, seed):
    """Parameters (N(0, 1)) and f(params, x) of the bias-free ReLU CNN of rfm.core.cntk (NTK parametrisation)."""
    g = torch.Generator().manual_seed(seed)
    params = {"W0": torch.randn(width, C, q, q, generator=g, dtype=torch.float64)}
    for h in range(1, depth):
        params[f"W{h}"] = torch.randn(width, width, q, q, generator=g, dtype=torch.float64)

    def features(p, x):
        a, fan = x, C
        for h in range(depth):
            a = torch.nn.functional.conv2d(a, p[f"W{h}"], padding=padding) * (w_std / math.sqrt(fan * q * q))
            a = math.sqrt(2.0) * torch.relu(a)
            fan = width
        return a                                                  # (n, width, H_L, W_L)

    def f(p, x):
        a = features(p, x)
        if readout == "gap":
            return a.mean((-2, -1)) @ p["v"] / math.sqrt(width)
        return a.flatten(1) @ p["v"] / math.sqrt(a[0].numel())

    return params, features, f


def empirical_cntk(X, width, depth, q, padding, readout, w_std, seed):
    params, features, f = cnn_network(X.shape[1], width, depth, q, padding, readout, w_std, seed)
    out = features(params, X[:1])
    n_v = out.shape[1] if readout == "gap" else out[0].numel()
    params["v"] = torch.randn(n_v, generator=torch.Generator().manual_seed(10_000 + seed), dtype=torch.float64)
    J = torch.func.jacrev(f)(params, X)                          # {name: (n, *shape)}
    return sum(j.reshape(X.shape[0], -1) @ j.reshape(X.shape[0], -1).T for j in J.values())


def _images(n=3, C=2, H=5, W=5, seed=0):
    return torch.randn(n, C, H, W, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _rel(K, ref):
    return float((K - ref).norm() / ref.norm())


# ------------------------------------------------------------------ (a) the empirical NTK of wide networks

@pytest.mark.parametrize("padding,readout", [("valid", "flatten"), ("same", "gap")])
def test_closed_form_is_the_infinite_width_limit_of_the_empirical_ntk(padding, readout):
    """One convolution: the empirical NTK is exactly a mean of m independent channel terms, so its error falls as
    1/sqrt(m): 64x the width should cut it about 8x. We ask for half of that fall (4x), averaged over three
    initialisations so that one lucky draw cannot pass, and a relative error below 4 % at width 4096 (measured:
    about 1 %)."""
    X = _images(3, 2, 5, 5, seed=1)
    w = 1.3
    K = conv_ntk(X, q=3, depth=1, padding=padding, readout=readout, w_std=w)
    errs = [sum(_rel(empirical_cntk(X, m, 1, 3, padding, readout, w, seed=s), K) for s in range(3)) / 3
            for m in (64, 4096)]
    assert errs[1] < errs[0] / 4, errs
    assert errs[1] < 0.04, errs


@pytest.mark.parametrize("depth,q,padding,readout", [(1, 3, "valid", "flatten"), (2, 3, "valid", "flatten"),
                                                     (2, 2, "same", "gap"), (3, 2, "same", "flatten")])
@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")  # torch's note on q = 2
def test_closed_form_is_the_mean_of_the_empirical_ntk(depth, q, padding, readout):
    """Deeper networks: the empirical NTK of R = 30 independent networks of width 256, averaged, against the closed
    form, entry by entry, in units of the Monte-Carlo standard error of the mean (the sample sd of the 30 draws /
    sqrt(30)). Under the closed form each z-score is about Student-t with 29 degrees of freedom: |z| > 4.5 has a
    probability near 1e-4 per entry (6 distinct entries), and finite-width bias is O(1/m), below the standard error
    here (seeded draws: the test is deterministic). The test has power: the same draws reject a kernel 10 % off."""
    X = _images(3, 2, 5, 5, seed=1)
    w, R = 1.3, 30
    K = conv_ntk(X, q=q, depth=depth, padding=padding, readout=readout, w_std=w)
    E = torch.stack([empirical_cntk(X, 256, depth, q, padding, readout, w, seed=s) for s in range(R)])
    se = E.std(0) / math.sqrt(R)
    iu = torch.triu_indices(3, 3)
    z = ((E.mean(0) - K) / se)[iu[0], iu[1]]
    assert float(z.abs().max()) < 4.5, z
    z_off = ((E.mean(0) - 1.10 * K) / se)[iu[0], iu[1]]
    assert float(z_off.abs().max()) > 4.5, z_off


# ------------------------------------------------------------------ (b) symmetry and positive semi-definiteness

@pytest.mark.parametrize("depth,padding,readout", [(1, "valid", "flatten"), (3, "same", "flatten"),
                                                   (2, "same", "gap")])
def test_symmetric_and_psd(depth, padding, readout):
    X = _images(8, 2, 6, 6, seed=2)
    K = conv_ntk(X, q=3, depth=depth, padding=padding, readout=readout)
    torch.testing.assert_close(K, K.T, rtol=1e-12, atol=0)
    ev = torch.linalg.eigvalsh(K)
    assert float(ev.min()) > -1e-10 * float(ev.max()), ev
    # the cross-kernel is the block of the joint kernel; blocks of rows give the same values
    K_xz = conv_ntk(X[:3], X[3:], q=3, depth=depth, padding=padding, readout=readout, max_bytes=1)
    torch.testing.assert_close(K_xz, K[:3, 3:], rtol=1e-12, atol=1e-14)


def test_positively_homogeneous_of_degree_two():
    """No biases: Theta(a x, b z) = a b Theta(x, z) for a, b > 0 (every layer is positively homogeneous)."""
    X = _images(4, 1, 6, 6, seed=3)
    K = conv_ntk(X, X, q=3, depth=2, padding="same")
    torch.testing.assert_close(conv_ntk(2.0 * X, 0.5 * X, q=3, depth=2, padding="same"), K, rtol=1e-12, atol=0)


# ------------------------------------------------------------------ (c) the known kernels it reduces to

@pytest.mark.parametrize("depth", [1, 2, 4])
@pytest.mark.parametrize("readout", ["flatten", "gap"])
def test_one_by_one_images_give_the_fully_connected_ntk(depth, readout):
    """A 1 x 1 image with d channels and 1 x 1 filters is a fully connected network on R^d: the CNTK is
    NTKKernel(depth, bandwidth=sqrt(d)) (w_std = q = 1: first layer W x / sqrt(d))."""
    X = torch.randn(6, 5, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    K = conv_ntk(X, shape=(5, 1, 1), q=1, depth=depth, readout=readout)
    torch.testing.assert_close(K, NTKKernel(depth=depth, bandwidth=math.sqrt(5))(X), rtol=1e-12, atol=1e-14)


def test_one_convolution_is_the_patch_averaged_fully_connected_ntk():
    """depth 1, flatten: (1/P) sum_p Theta_FC(u_p(x), u_p(z)), bandwidth sqrt(C q^2) / w (the aligned-patch
    kernel of ConvRFM with the NTK as base kernel)."""
    X, Z = _images(4, 3, 9, 9, seed=5), _images(3, 3, 9, 9, seed=6)
    K = conv_ntk(X, Z, q=5, w_std=2.0)
    Ux, Uz = patches(X, 5), patches(Z, 5)                         # (n, P, 75)
    fc = NTKKernel(depth=1, bandwidth=math.sqrt(75) / 2.0)
    ref = torch.stack([fc(Ux[:, p], Uz[:, p]) for p in range(Ux.shape[1])]).mean(0)
    torch.testing.assert_close(K, ref, rtol=1e-12, atol=1e-14)


def test_ridge_predictions_interpolate_and_bad_inputs():
    X = _images(6, 1, 5, 5, seed=7)
    K = conv_ntk(X, q=3)
    Y = torch.arange(6, dtype=torch.float64)
    torch.testing.assert_close(cntk_ridge(K, Y, K, reg=1e-12), Y, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError):
        conv_ntk(X, q=3, readout="max")
    with pytest.raises(ValueError):
        conv_ntk(X, _images(2, 2, 5, 5), q=3)
    with pytest.raises(ValueError):
        conv_ntk(X, q=3, depth=0)
