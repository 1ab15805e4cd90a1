r"""ConvRFM and Deep ConvRFM: the RFM loop on image patches.

:class:`ConvRFM` (and :class:`ConvRFMClassifier`) is the convolutional Recursive Feature Machine of Beaglehole,
Radhakrishnan, Pandit & Belkin (code aradha/convrfm) with a kernel that averages a radial base kernel over *aligned*
patch pairs, with the patches u_p (:mod:`rfm.core.patches`) transformed by M^{1/2}:

    K_M(x, z) = (1/P) sum_p k(M^{1/2} u_p(x), M^{1/2} u_p(z)),

run through the one RFM loop (:mod:`rfm.models.loop`): a kernel ridge solve, then M <- normalize(patch-AGOP of the
predictor ^ agop_power), the closed form of the patch-AGOP (1/n) sum_x sum_c sum_p grad_{u_p} f_c grad_{u_p} f_c^T.
The authors' kernel is the convolutional NTK of neural-tangents (JAX); this module replaces it by a Laplace (or
Gaussian) patch kernel. :class:`DeepConvRFM` stacks ConvRFMs, with frozen convolutions drawn from each learned M
(:func:`rfm.nets.conv.conv_from_feature_matrix`) between them.

All three are scikit-learn estimators. Images are (n, C, H, W) arrays or tensors, (n, H, W) single-channel images,
or flattened rows (n, C*H*W) with their ``shape`` given; 2-D rows without ``shape`` are read as single-channel
1 x d signals. Arrays in give arrays out; tensors in give tensors out, on their device.

The network side of the convolutional Neural Feature Ansatz (:func:`patch_agop`, :func:`cnfa_table`,
:class:`ConvNet`, ...) lives in :mod:`rfm.nets.conv` and the patch map in :mod:`rfm.core.patches`; both are
re-exported here for the readers of earlier releases.
"""
from __future__ import annotations

import numbers
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .._checks import DegenerateAGOPError, check_choice, check_number, resolve_dtype
from ..core.agop import AGOPAccumulator, sample_points
from ..core.blocks import resolve_mem_bytes
from ..core.feature_matrix import NORMALIZATIONS, FeatureMatrix, feature_matrix_from_agop
from ..core.kernels import Kernel, get_kernel
from ..core.patches import PADDING_MODES, as_images, as_pair, image_shape, padding_amounts, patches, unfold
from ..core.solvers import solve_krr
from ..metrics import r2_score
from ..nets.classifier import decode_label_codes, label_codes
from ..nets.conv import (
    ConvNet,
    cnfa_table,
    conv_from_feature_matrix,
    conv_layers,
    conv_patches,
    filter_nfm,
    patch_agop,
    patch_gradients,
)
from ..utils import get_device, to_numpy
from .estimators import class_indices, class_labels, regression_targets, torch_generator
from .loop import rfm_loop

__all__ = ["ConvRFM", "ConvRFMClassifier", "DeepConvRFM", "PatchStep",
           # re-exported from rfm.core.patches and rfm.nets.conv
           "ConvNet", "PADDING_MODES", "as_images", "cnfa_table", "conv_from_feature_matrix", "conv_layers",
           "conv_patches", "filter_nfm", "patch_agop", "patch_gradients", "patches"]


def _deprecated(model, old, new, value, stacklevel=4):
    """The value of a renamed parameter: the deprecated one when it is given (with a warning), else the new one."""
    old_value = getattr(model, old)
    if isinstance(old_value, str) and old_value == "deprecated":
        return value
    warnings.warn(f"{type(model).__name__}: the parameter {old} was renamed {new} (one name per hyper-parameter "
                  f"across the package's estimators); {old} will be removed in the next release", DeprecationWarning,
                  stacklevel=stacklevel)
    return old_value


class _ImageInput:
    """Validation of image inputs, shared by ConvRFM and DeepConvRFM (scikit-learn's rules for arrays)."""

    def _check_images(self, X, *, reset: bool, name: str = "X", dtype=torch.float32, device=None):
        """X as (n, C, H, W) images (dtype, device), and the numpy dtype of outputs for array input (else None)."""
        np_dtype = None
        if not isinstance(X, torch.Tensor):
            if name == "X" and not (isinstance(X, np.ndarray) and X.ndim > 2):  # rows: scikit-learn's checks
                X = validate_data(self, X, reset=reset, dtype=[np.float64, np.float32], ensure_min_samples=1)
            else:
                X = check_array(X, dtype=[np.float64, np.float32], allow_nd=True, input_name=name)
            np_dtype = X.dtype
        if device is None:
            device = X.device if isinstance(X, torch.Tensor) else None
        if X.ndim == 2 and self.shape is None:
            X = X.reshape(X.shape[0], 1, 1, X.shape[1])  # rows without a shape: 1 x d signals
        d = int(np.prod(X.shape[1:]))
        if reset:
            self.n_features_in_ = d
        elif d != self.n_features_in_:
            raise ValueError(f"{name} has {d} features, but {type(self).__name__} is expecting {self.n_features_in_} "
                             "features as input.")
        h = as_images(X, self.shape, name=name, dtype=dtype, device=device)
        if not reset and tuple(h.shape[1:]) != self.image_shape_:
            raise ValueError(f"{name} has images of shape {tuple(h.shape[1:])} but the model was fitted on "
                             f"{self.image_shape_}")
        if reset:
            self.image_shape_ = tuple(h.shape[1:])
        return h, np_dtype

    @staticmethod
    def _output(out: torch.Tensor, X, np_dtype):
        return out if isinstance(X, torch.Tensor) else out.detach().cpu().numpy().astype(np_dtype, copy=False)


# ----------------------------------------------------------------------------------------------------------------
# ConvRFM


class PatchStep:
    """The RFM loop's step (:mod:`rfm.models.loop`) for ConvRFM: kernel ridge regression with the aligned-patch
    kernel K_M, the closed-form patch-AGOP at (a seeded subset of) the training images, M = normalize(A^power).

    Parameters
    ----------
    model : ConvRFM
        The fitted-to-be model (its kernel, blocks and parameters).
    U, Y : torch.Tensor
        Training patches (n, P, D) and targets (n, c).
    val : (Uv, Yv) or None
        Validation patches and targets (the targets as the model's validation metrics take them).
    power : float
        The AGOP power.
    generator : torch.Generator
        For the AGOP subset.

    Attributes
    ----------
    Ms, agops : list of torch.Tensor
        The M of every solve and the patch-AGOP of every update (float64, CPU).
    """

    def __init__(self, model, U, Y, val, power, generator):
        self.model, self.U, self.Y, self.val, self.power, self.generator = model, U, Y, val, power, generator
        self.Ms, self.agops = [], []

    def solve(self, fm, t):
        """Solve (K_M(X, X) + reg I) alpha = Y; the model is (M, alpha), the scratch the transformed patches.

        Parameters
        ----------
        fm : FeatureMatrix
            M_t, acting on patches.
        t : int
            The iteration.

        Returns
        -------
        model : tuple (FeatureMatrix, torch.Tensor)
            (M_t, alpha (n, c)).
        record : dict
            ``"iteration"``, ``"solve"``, the training MSE after an exact solve, and the validation metrics.
        Ut : torch.Tensor, shape (n, P, r)
            The transformed training patches.
        """
        m = self.model
        Ut = m._transform(self.U, fm)
        K = m.kernel_matrix(Ut, Ut)
        alpha, method = solve_krr(K, self.Y, m.reg, overwrite=True, check_symmetric=False)
        del K
        self.Ms.append(fm.dense(device="cpu"))
        rec = {"iteration": t, "solve": method}
        if method != "lstsq":  # an exact solve: f(X) = Y - reg alpha
            rec["train_mse"] = float((m.reg * alpha).square().sum(1).mean())
        if self.val is not None:
            Uv, Yv = self.val
            rec.update(m._val_metrics(m.kernel_matrix(m._transform(Uv, fm), Ut) @ alpha, Yv))
        return (fm, alpha), rec, Ut

    def score(self, record):
        """None: ConvRFM keeps the last iterate.

        Parameters
        ----------
        record : dict
            An iterate's record (unused).
        """
        return None

    def stop(self, model, history, best_iter):
        """False: ConvRFM runs all its iterations.

        Parameters
        ----------
        model, history, best_iter
            As in the loop's interface (unused).

        Returns
        -------
        bool
            False.
        """
        return False

    def agop(self, model, fm, Ut):
        """The patch-AGOP of f_t at a seeded subset of ``max_agop_points`` training images, in patch coordinates.

        Parameters
        ----------
        model : tuple (FeatureMatrix, torch.Tensor)
            (M_t, alpha).
        fm : FeatureMatrix
            M_t.
        Ut : torch.Tensor, shape (n, P, r)
            The transformed training patches.

        Returns
        -------
        torch.Tensor, shape (D, D)
            The patch AGOP (D the patch dimension), also appended to ``agops`` on the CPU.
        """
        n = self.U.shape[0]
        idx = sample_points(n, self.model.max_agop_points, self.generator)
        rows = torch.arange(n, device=self.U.device) if idx is None else idx.to(self.U.device)
        A = fm.pullback_agop(self.model._patch_agop(Ut[rows], Ut, model[1], self_index=rows))
        self.agops.append(A.detach().cpu())
        return A

    def update(self, A, fm, t):
        """M = normalize(A^power); a degenerate A (a constant predictor) keeps M and stops the loop.

        Parameters
        ----------
        A : torch.Tensor, shape (D, D)
            The patch AGOP.
        fm : FeatureMatrix
            M_t.
        t : int
            The iteration.

        Returns
        -------
        fm_next : FeatureMatrix
            M_{t+1} (M_t for a degenerate A, with a RuntimeWarning).
        stop : bool
            True when A was degenerate.
        """
        try:
            return feature_matrix_from_agop(A, power=self.power, normalize=self.model.normalize), False
        except DegenerateAGOPError as exc:
            warnings.warn(f"{type(self.model).__name__}: {exc}. M is kept as it was and the loop stops after "
                          f"iteration {t}.", RuntimeWarning, stacklevel=4)
            return fm, True


class ConvRFM(_ImageInput, RegressorMixin, BaseEstimator):
    """The convolutional RFM with an aligned-patch kernel K_M(x, z) = (1/P) sum_p k(M^{1/2} u_p(x), M^{1/2} u_p(z)).

    For t = 0..iters (:func:`rfm.models.loop.rfm_loop`): solve (K_{M_t}(X, X) + reg I) alpha = Y; record;
    M_{t+1} = normalize(A_t^agop_power), A_t the patch-AGOP of f_t(z) = K_{M_t}(z, X) alpha at (a seeded subset of
    ``max_agop_points`` of) the training images (sum over patches and outputs, mean over images; closed form).
    M_0 = I. ``iters=0`` is the fixed convolutional kernel, the control.

    Parameters
    ----------
    shape : tuple of int, optional
        Needed for flattened images; read from (n, C, H, W) input otherwise (2-D rows without it: 1 x d signals).
    q : int or (qh, qw), default 3
        Patch size.
    stride : int or pair, default 1
    padding : int, pair, "valid" or "same", default "same"
    padding_mode : {"zeros", "circular", "reflect", "replicate"}, default "zeros"
    kernel : "laplace", "gaussian" or a radial :class:`rfm.Kernel`, default "laplace"
    bandwidth : float, default 10.0
        Of a kernel given by name.
    reg : float, default 1e-3
        Ridge (>= 0).
    iters : int, default 1
        Number of updates of M.
    agop_power : float, default 1.0
        M = A^agop_power; the patches are transformed by M^{1/2}.
    normalize : {None, "max", "trace", "fro"}, default "trace"
        "trace" makes the patch metric A / tr A, which is the authors' M = sqrtm(A) / its Frobenius norm.
    max_agop_points : int or None, default None
        AGOP images (a seeded random subset of the training images; None: all).
    dtype : {"float32", "float64"}, default "float32"
    device : None or a device, default None
        None: that of a tensor X (the CPU for arrays).
    mem_gb : float or None, default None
        Working memory per kernel block (default 1 GiB on CPU, a quarter of the free GPU memory).
    random_state : int, numpy RandomState, torch.Generator or None, default 0
        Seed for the AGOP subset.
    power, generator : deprecated
        Former names of ``agop_power`` and ``random_state`` (used when given, with a DeprecationWarning).

    Attributes
    ----------
    M_ : rfm.FeatureMatrix
        The patch metric of the last solve.
    alpha_ : torch.Tensor
        Its coefficients (n, c).
    kernel_ : rfm.Kernel
    history_ : list of dict
        One record per solve: iteration, solve method, train MSE, validation MSE (and accuracy for the classifier)
        with validation data, time.
    agops_ : list of torch.Tensor
        The patch-AGOPs (float64, CPU).
    Ms_ : list of torch.Tensor
        The M used at each solve (float64, CPU).
    X_patches_ : torch.Tensor
        The transformed training patches (the predictor's centres).
    image_shape_ : tuple of int
    n_features_in_ : int
        C H W.
    """

    def __init__(self, shape=None, *, q=3, stride=1, padding="same", padding_mode="zeros", kernel="laplace",
                 bandwidth=10.0, reg=1e-3, iters=1, agop_power=1.0, normalize="trace", max_agop_points=None,
                 dtype="float32", device=None, mem_gb=None, random_state=0, power="deprecated",
                 generator="deprecated"):
        self.shape = shape
        self.q = q
        self.stride = stride
        self.padding = padding
        self.padding_mode = padding_mode
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.reg = reg
        self.iters = iters
        self.agop_power = agop_power
        self.normalize = normalize
        self.max_agop_points = max_agop_points
        self.dtype = dtype
        self.device = device
        self.mem_gb = mem_gb
        self.random_state = random_state
        self.power = power
        self.generator = generator

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.non_deterministic = self.random_state is None
        return tags

    # -- parameters ------------------------------------------------------------------------------------------------
    def _kernel(self) -> Kernel:
        kernel = get_kernel(self.kernel, bandwidth=self.bandwidth) if isinstance(self.kernel, str) \
            else get_kernel(self.kernel)
        if not isinstance(kernel, Kernel) or not kernel.radial or kernel.uses_norms:
            raise ValueError(f"ConvRFM needs a radial kernel (laplace, gaussian), got {kernel!r}")
        return kernel

    def _check_params(self):
        """Validate the parameters; the kernel, the AGOP power and the random state to use."""
        kernel = self._kernel()
        check_number("reg", self.reg, low=0)
        check_number("iters", self.iters, low=0, integer=True)
        power = _deprecated(self, "power", "agop_power", self.agop_power)
        check_number("agop_power", power, low=0, low_inclusive=False)
        check_choice("normalize", self.normalize, NORMALIZATIONS)
        if self.max_agop_points is not None:
            check_number("max_agop_points", self.max_agop_points, low=1, integer=True)
        if self.mem_gb is not None:
            check_number("mem_gb", self.mem_gb, low=0, low_inclusive=False)
        qq, st = as_pair("q", self.q, 1), as_pair("stride", self.stride, 1)
        padding_amounts(self.padding, qq, (1, 1), st)
        check_choice("padding_mode", self.padding_mode, PADDING_MODES)
        if self.shape is not None:
            image_shape(self.shape)
        return kernel, float(power), _deprecated(self, "generator", "random_state", self.random_state)

    # -- patches and kernels ---------------------------------------------------------------------------------------
    def _device(self):
        """The device of the computation: ``device``, or None for that of the input."""
        return get_device(self.device) if self.device is not None else None

    def patches(self, X) -> torch.Tensor:
        """The patches (n, P, C q^2) of images X, with this model's settings.

        Parameters
        ----------
        X : array-like or torch.Tensor
            Images (see the class); after ``fit``, of the fitted shape.

        Returns
        -------
        torch.Tensor
            (n, P, C q^2), in the model's dtype, on its device (or X's).
        """
        if hasattr(self, "image_shape_"):
            h = self._check_images(X, reset=False, dtype=resolve_dtype(self.dtype), device=self._device())[0]
        else:
            if self.shape is None and getattr(X, "ndim", None) == 2:
                X = X.reshape(X.shape[0], 1, 1, X.shape[1])  # rows without a shape: 1 x d signals, as in fit
            h = as_images(X, self.shape, dtype=resolve_dtype(self.dtype), device=self._device())
        return self._unfold(h)

    def _unfold(self, h):
        qq, st = as_pair("q", self.q, 1), as_pair("stride", self.stride, 1)
        return unfold(h, qq, st, padding_amounts(self.padding, qq, (1, 1), st), (1, 1), self.padding_mode)[0]

    def _transform(self, U, fm):
        n, P, D = U.shape
        return fm.transform(U.reshape(n * P, D)).reshape(n, P, -1)

    def _mem(self, device):
        return resolve_mem_bytes(None if self.mem_gb is None else int(self.mem_gb * 2**30), device)

    def _blocks(self, n, m, P, itemsize, device, factor=3, extra=0):
        """Rows of the evaluation points and positions per block, so that positions x m x (factor rows + extra)
        numbers fit in the memory budget (rows first, within half of it)."""
        mem = self._mem(device)
        rows = max(1, min(n, mem // max(1, 2 * factor * itemsize * m)))
        pos = max(1, min(P, mem // max(1, itemsize * m * (factor * rows + extra))))
        return rows, pos

    @staticmethod
    def _sq_dists(A, B):
        """Squared distances (p, a, b) between A (p, a, r) and B (p, b, r), clamped at 0."""
        D2 = torch.baddbmm((A * A).sum(2)[:, :, None] + (B * B).sum(2)[:, None, :], A, B.transpose(1, 2),
                           alpha=-2.0)
        return D2.clamp_min_(0)

    def kernel_matrix(self, Uz: torch.Tensor, Ux: torch.Tensor) -> torch.Tensor:
        """K (m, n) between transformed patch sets Uz (m, P, r) and Ux (n, P, r): the mean over positions p of
        k(uz_p, ux_p).

        Parameters
        ----------
        Uz : torch.Tensor, shape (m, P, r)
            Transformed patches of m images.
        Ux : torch.Tensor, shape (n, P, r)
            Transformed patches of n images, at the same P positions.

        Returns
        -------
        torch.Tensor, shape (m, n)
            In Uz's dtype and device.

        Raises
        ------
        ValueError
            If the patch sets do not align (P or r differ).
        """
        m, P, _ = Uz.shape
        n = Ux.shape[0]
        if Ux.shape[1] != P or Ux.shape[2] != Uz.shape[2]:
            raise ValueError(f"patch sets of shapes {tuple(Uz.shape)} and {tuple(Ux.shape)} do not align")
        kernel = self._kernel()
        K = torch.zeros(m, n, dtype=Uz.dtype, device=Uz.device)
        rows, pos = self._blocks(m, n, P, Uz.element_size(), Uz.device)
        Xt = Ux.transpose(0, 1)  # (P, n, r)
        for r0 in range(0, m, rows):
            Zt = Uz[r0:r0 + rows].transpose(0, 1)
            for p0 in range(0, P, pos):
                B = self._sq_dists(Zt[p0:p0 + pos], Xt[p0:p0 + pos])
                K[r0:r0 + rows] += kernel.values_(B).sum(0)
        return K.div_(P)

    def _patch_agop(self, Uz, Ux, alpha, self_index=None):
        """The closed-form patch-AGOP (in transformed coordinates) of f(z) = K(z, X) alpha at the transformed
        patches Uz (s, P, r); ``self_index[j]`` is the training row that image j is (its aligned pairs get weight
        0, the coincident-point convention of rfm.core.kernels), or -1."""
        s, P, r = Uz.shape
        n, c = alpha.shape
        kernel = self._kernel()
        acc = AGOPAccumulator(P * c, r, device=Uz.device)
        Xt = Ux.transpose(0, 1)  # (P, n, r)
        rows, pos = self._blocks(s, n, P, Uz.element_size(), Uz.device, factor=4 + c, extra=c * r)
        for r0 in range(0, s, rows):
            Z = Uz[r0:r0 + rows]
            b = Z.shape[0]
            G = torch.empty(b, P, c, r, dtype=Uz.dtype, device=Uz.device)
            Zt = Z.transpose(0, 1)  # (P, b, r)
            for p0 in range(0, P, pos):
                sl = slice(p0, p0 + pos)
                Wt = kernel.weights_(self._sq_dists(Zt[sl], Xt[sl]))  # (p, b, n): k'(r)/r
                if self_index is not None:
                    idx = self_index[r0:r0 + rows]
                    own = idx >= 0
                    Wt[:, torch.nonzero(own)[:, 0], idx[own]] = 0.0
                wa = Wt @ alpha  # (p, b, c)
                aX = (alpha[None, :, :, None] * Xt[sl][:, :, None, :]).reshape(-1, n, c * r)  # (p, n, c r)
                g = wa[..., None] * Zt[sl][:, :, None, :] - torch.bmm(Wt, aX).reshape(-1, b, c, r)
                G[:, sl] = g.transpose(0, 1) / P
            acc.add(G.reshape(b, P * c, r))
        return acc.result()

    # -- the RFM loop ----------------------------------------------------------------------------------------------
    def _targets(self, y, n, device):
        return regression_targets(y, n, dtype=resolve_dtype(self.dtype), device=device)

    def _val_targets(self, y, m, device):
        return regression_targets(y, m, name="y_val", dtype=resolve_dtype(self.dtype), device=device)

    def fit(self, X, y, X_val=None, y_val=None):
        """Run the RFM loop (:func:`rfm.models.loop.rfm_loop`) on the patches of images X.

        Parameters
        ----------
        X : array-like or torch.Tensor
            Training images (see the class).
        y : array-like or torch.Tensor, shape (n,) or (n, c)
            Targets (class labels for the classifier).
        X_val, y_val : optional
            Validation data: every solve records the validation MSE (and accuracy for a classifier).

        Returns
        -------
        self
        """
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None.")
        kernel, power, random_state = self._check_params()
        for key in ("M_", "alpha_", "image_shape_", "classes_"):
            self.__dict__.pop(key, None)
        dtype = resolve_dtype(self.dtype)
        h, _ = self._check_images(X, reset=True, dtype=dtype, device=self._device())
        self._one_d = (y.ndim if isinstance(y, torch.Tensor) else np.asarray(y).ndim) == 1
        U = self._unfold(h)
        Y = self._targets(y, U.shape[0], U.device)
        val = None
        if (X_val is None) != (y_val is None):
            raise ValueError("X_val and y_val must be given together")
        if X_val is not None:
            Uv = self._unfold(self._check_images(X_val, reset=False, name="X_val", dtype=dtype, device=U.device)[0])
            val = (Uv, self._val_targets(y_val, Uv.shape[0], U.device))
        self.kernel_ = kernel
        step = PatchStep(self, U, Y, val, power, torch_generator(random_state))
        res = rfm_loop(step, FeatureMatrix.identity(U.shape[2]), int(self.iters))
        (self.M_, self.alpha_), self.history_ = res.model, res.history
        self.Ms_, self.agops_ = step.Ms, step.agops
        self.X_patches_ = self._transform(U, self.M_)
        return self

    def _val_metrics(self, out, Yv):
        return {"val_mse": float((out - Yv).square().sum(1).mean())}

    def _raw(self, X):
        """The raw outputs f(z) = K_M(z, X) alpha (m, c) at images X, and the numpy dtype for array input."""
        check_is_fitted(self, "alpha_")
        h, np_dtype = self._check_images(X, reset=False, dtype=self.alpha_.dtype, device=self.alpha_.device)
        Uz = self._transform(self._unfold(h), self.M_)
        return self.kernel_matrix(Uz, self.X_patches_) @ self.alpha_, np_dtype

    def predict(self, X):
        """f(z) = K_M(z, X) alpha at images X.

        Parameters
        ----------
        X : array-like or torch.Tensor
            Images of the fitted shape.

        Returns
        -------
        torch.Tensor or numpy.ndarray
            (m,) for 1-D training targets, else (m, c); a tensor for tensor input, else an array.
        """
        out, np_dtype = self._raw(X)
        return self._output(out[:, 0] if self._one_d else out, X, np_dtype)

    def score(self, X, y, sample_weight=None):
        """R^2 of the predictions (averaged uniformly over outputs).

        Parameters
        ----------
        X : array-like or torch.Tensor
            Images.
        y : array-like or torch.Tensor
            Their targets.
        sample_weight : None
            Not supported.

        Returns
        -------
        float
        """
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported")
        pred = to_numpy(self.predict(X)).astype(np.float64)
        return r2_score(to_numpy(y).astype(np.float64), pred)

    def patch_agop(self, X) -> torch.Tensor:
        """The patch-AGOP of the fitted predictor at images X (closed form; images are treated as new points, not
        as training rows).

        Parameters
        ----------
        X : array-like or torch.Tensor
            Images of the fitted shape.

        Returns
        -------
        torch.Tensor
            float64 (C q^2, C q^2).
        """
        check_is_fitted(self, "alpha_")
        h = self._check_images(X, reset=False, dtype=self.alpha_.dtype, device=self.alpha_.device)[0]
        Uz = self._transform(self._unfold(h), self.M_)
        A = self._patch_agop(Uz, self.X_patches_, self.alpha_)
        return self.M_.pullback_agop(A)


class ConvRFMClassifier(ClassifierMixin, ConvRFM):
    """:class:`ConvRFM` on class labels (any sortable kind): least-squares codes
    (:func:`rfm.nets.classifier.label_codes` of the index in ``classes_``: one 0/1 column for two classes, one-hot
    for more); :meth:`predict` returns labels and :meth:`score` the accuracy; with validation data every solve also
    records ``val_accuracy``.

    Parameters
    ----------
    shape, q, stride, padding, padding_mode, kernel, bandwidth, reg, iters, agop_power, normalize, max_agop_points
        As in :class:`ConvRFM` (the same names, defaults and meanings).
    dtype, device, mem_gb, random_state, power, generator
        As in :class:`ConvRFM` (``power`` and ``generator`` are the deprecated names).

    Attributes
    ----------
    classes_ : numpy.ndarray
        The sorted class labels.
    M_, alpha_, kernel_, history_, agops_, Ms_, X_patches_, image_shape_, n_features_in_ : as :class:`ConvRFM`
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = False
        return tags

    def _targets(self, y, n, device):
        self.classes_, labels = class_labels(y, n)
        codes = torch.as_tensor(class_indices(labels, n, self.classes_))
        return label_codes(codes, len(self.classes_), dtype=resolve_dtype(self.dtype)).to(device)

    def _val_targets(self, y, m, device):
        return torch.as_tensor(class_indices(y, m, self.classes_, name="y_val")).to(device)

    def _val_metrics(self, out, yv):
        codes = label_codes(yv.cpu(), len(self.classes_), dtype=out.dtype).to(out.device)
        return {"val_mse": float((out - codes).square().sum(1).mean()),
                "val_accuracy": float((decode_label_codes(out) == yv).double().mean())}

    def decision_function(self, X):
        """The raw outputs minus 1/2 for two classes (positive: ``classes_[1]``), the raw outputs for more.

        Parameters
        ----------
        X : array-like or torch.Tensor
            Images of the fitted shape.

        Returns
        -------
        torch.Tensor or numpy.ndarray
            (m,) for two classes, (m, c) for more.
        """
        out, np_dtype = self._raw(X)
        return self._output(out[:, 0] - 0.5 if out.shape[1] == 1 else out, X, np_dtype)

    def predict(self, X):
        """Class labels (m,): a tensor on X's device for tensor input with numeric labels, else an array.

        Parameters
        ----------
        X : array-like or torch.Tensor
            Images of the fitted shape.

        Returns
        -------
        torch.Tensor or numpy.ndarray
        """
        out, _ = self._raw(X)
        labels = self.classes_[decode_label_codes(out.detach()).cpu().numpy()]
        if isinstance(X, torch.Tensor) and labels.dtype.kind in "iufb":
            return torch.as_tensor(labels, device=X.device)
        return labels

    def score(self, X, y, sample_weight=None):
        """Accuracy on images X with labels y.

        Parameters
        ----------
        X : array-like or torch.Tensor
            Images.
        y : array-like or torch.Tensor
            Their labels.
        sample_weight : None
            Not supported.

        Returns
        -------
        float
        """
        return _image_accuracy(self, X, y, sample_weight)


# ----------------------------------------------------------------------------------------------------------------
# Deep ConvRFM: random filters drawn from the learned M, then ConvRFM on the new features


class DeepConvRFM(_ImageInput, ClassifierMixin, BaseEstimator):
    """Deep ConvRFM (classification): ``depth`` stages; stage l fits a :class:`ConvRFMClassifier` on the current
    features, and (but for the last) draws a frozen conv layer of ``width`` filters from its final M
    (:func:`rfm.nets.conv.conv_from_feature_matrix`) whose outputs (after ``activation``, None or "relu") are the
    next features.

    The authors' ``deep_conv_rfm/main.py`` keeps, at each depth, the M of the iteration with the best *test*
    accuracy; here the last iteration's M is used, so no test data enter the fit.

    Parameters
    ----------
    shape : tuple of int, optional
        As :class:`ConvRFM`.
    depth : int, default 2
        Number of stages.
    width : int, default 64
        Filters of each drawn conv layer.
    activation : None or "relu", default None
        After each drawn layer.
    q, stride, padding, padding_mode, kernel, bandwidth, reg, iters, agop_power, normalize, max_agop_points, dtype,
    device, mem_gb
        Of every stage's :class:`ConvRFMClassifier` (deep stages need an int ``q`` and stride 1).
    random_state : int, numpy RandomState, torch.Generator or None, default 0
        Seeds each stage and its drawn filters.
    power, generator : deprecated
        Former names of ``agop_power`` and ``random_state``.

    Attributes
    ----------
    models_ : list of ConvRFMClassifier
        The fitted stages.
    layers_ : list of torch.nn.Conv2d
        The conv layers between them.
    history_ : list of list of dict
        Per stage, its history.
    classes_ : numpy.ndarray
    image_shape_ : tuple of int
    n_features_in_ : int
    """

    _STAGE_PARAMS = ("q", "stride", "padding", "padding_mode", "kernel", "bandwidth", "reg", "iters", "agop_power",
                     "normalize", "max_agop_points", "dtype", "device", "mem_gb")

    def __init__(self, shape=None, *, depth=2, width=64, activation=None, q=3, stride=1, padding="same",
                 padding_mode="zeros", kernel="laplace", bandwidth=10.0, reg=1e-3, iters=1, agop_power=1.0,
                 normalize="trace", max_agop_points=None, dtype="float32", device=None, mem_gb=None, random_state=0,
                 power="deprecated", generator="deprecated"):
        self.shape = shape
        self.depth = depth
        self.width = width
        self.activation = activation
        self.q = q
        self.stride = stride
        self.padding = padding
        self.padding_mode = padding_mode
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.reg = reg
        self.iters = iters
        self.agop_power = agop_power
        self.normalize = normalize
        self.max_agop_points = max_agop_points
        self.dtype = dtype
        self.device = device
        self.mem_gb = mem_gb
        self.random_state = random_state
        self.power = power
        self.generator = generator

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags

    def _featurize(self, conv, H):
        with torch.no_grad():
            H = conv.to(H.device)(H)
            return torch.relu(H) if self.activation == "relu" else H

    def fit(self, X, y, X_val=None, y_val=None):
        """Fit the stages on images X and labels y.

        Parameters
        ----------
        X : array-like or torch.Tensor
            Training images (see :class:`ConvRFM`).
        y : array-like or torch.Tensor
            Class labels.
        X_val, y_val : optional
            Validation data: each stage records validation accuracy.

        Returns
        -------
        self
        """
        check_number("depth", self.depth, low=1, integer=True)
        check_number("width", self.width, low=1, integer=True)
        if self.activation is not None:
            check_choice("activation", self.activation, ("relu",))
        params = {k: getattr(self, k) for k in self._STAGE_PARAMS}
        params["agop_power"] = _deprecated(self, "power", "agop_power", self.agop_power, stacklevel=3)
        random_state = _deprecated(self, "generator", "random_state", self.random_state, stacklevel=3)
        ConvRFMClassifier(self.shape, **params)._check_params()
        if self.depth > 1 and (not isinstance(self.q, numbers.Integral) or self.stride not in (1, (1, 1))):
            raise ValueError("Deep ConvRFM needs square patches (an int q) and stride 1")
        if y is None:
            raise ValueError("DeepConvRFM requires y to be passed, but the target y is None.")
        dtype = resolve_dtype(self.dtype)
        device = get_device(self.device) if self.device is not None else None
        H, _ = self._check_images(X, reset=True, dtype=dtype, device=device)
        self.classes_ = class_labels(y, H.shape[0])[0]
        Hv = None if X_val is None else self._check_images(X_val, reset=False, name="X_val", dtype=dtype,
                                                           device=H.device)[0]
        g = torch_generator(random_state)
        self.models_, self.layers_, self.history_ = [], [], []
        for stage in range(self.depth):
            seed = int(torch.randint(0, 2**31 - 1, (1,), generator=g))
            model = ConvRFMClassifier(random_state=seed, **params).fit(H, y, Hv, y_val)
            self.models_.append(model)
            self.history_.append(model.history_)
            if stage == self.depth - 1:
                break
            conv = conv_from_feature_matrix(model.M_, H.shape[1], self.width, self.q, padding=self.padding,
                                            generator=seed + 1, dtype=dtype)
            self.layers_.append(conv)
            H = self._featurize(conv, H)
            Hv = None if Hv is None else self._featurize(conv, Hv)
        return self

    def _features(self, X):
        check_is_fitted(self, "models_")
        device = self.models_[0].alpha_.device
        H, np_dtype = self._check_images(X, reset=False, dtype=resolve_dtype(self.dtype), device=device)
        for conv in self.layers_:
            H = self._featurize(conv, H)
        return H, np_dtype

    def decision_function(self, X):
        """The last stage's raw outputs on the features of images X.

        Parameters
        ----------
        X : array-like or torch.Tensor
            Images of the fitted shape.

        Returns
        -------
        torch.Tensor or numpy.ndarray
            (m,) for two classes, (m, c) for more.
        """
        H, np_dtype = self._features(X)
        return self._output(self.models_[-1].decision_function(H), X, np_dtype)

    def predict(self, X):
        """Class labels (m,): a tensor for tensor input with numeric labels, else an array.

        Parameters
        ----------
        X : array-like or torch.Tensor
            Images of the fitted shape.

        Returns
        -------
        torch.Tensor or numpy.ndarray
        """
        H, _ = self._features(X)
        labels = to_numpy(self.models_[-1].predict(H))
        if isinstance(X, torch.Tensor) and labels.dtype.kind in "iufb":
            return torch.as_tensor(labels, device=X.device)
        return labels

    def score(self, X, y, sample_weight=None):
        """Accuracy on images X with labels y.

        Parameters
        ----------
        X : array-like or torch.Tensor
            Images.
        y : array-like or torch.Tensor
            Their labels.
        sample_weight : None
            Not supported.

        Returns
        -------
        float
        """
        return _image_accuracy(self, X, y, sample_weight)


def _image_accuracy(model, X, y, sample_weight=None) -> float:
    """The share of images of ``X`` that ``model`` labels as ``y`` (the classifiers' ``score``)."""
    if sample_weight is not None:
        raise ValueError("sample_weight is not supported")
    pred, truth = to_numpy(model.predict(X)), to_numpy(y)
    if pred.shape[0] != truth.shape[0]:
        raise ValueError(f"y has {truth.shape[0]} labels but X has {pred.shape[0]} images")
    return float(np.mean(pred == truth))
