"""The kernel-machine core: everything an RFM iteration computes.

* :mod:`~rfm.core.feature_matrix` -- the feature matrix M and the one map from an AGOP to the next M
* :mod:`~rfm.core.kernels`        -- Laplace, Gaussian and polynomial kernels on transformed points; the kernel matrix
* :mod:`~rfm.core.ntk`            -- the closed-form NTK of a deep fully connected ReLU network (a fixed baseline
  kernel)
* :mod:`~rfm.core.cntk`           -- the closed-form NTK of a convolutional ReLU network (CNTK; a fixed baseline kernel)
* :mod:`~rfm.core.machine`        -- :class:`~rfm.core.machine.KernelMachine`: predictions, input gradients and the
  closed-form AGOP
* :mod:`~rfm.core.fact`           -- the kernel FACT (Features at Convergence Theorem) and the FACT-RFM updates
* :mod:`~rfm.core.agop`           -- the AGOP of any torch function (autograd), its accumulator
* :mod:`~rfm.core.solvers`        -- kernel ridge regression: the solve as a strategy (``solver="auto"``, ...)
* :mod:`~rfm.core.cg`             -- preconditioned conjugate gradients (RPCholesky preconditioner), ``solver="auto"``
* :mod:`~rfm.core.eigenpro`       -- EigenPro 2 and 3 (Nystrom-preconditioned SGD),
  ``solver="eigenpro2"``/``"eigenpro3"``
* :mod:`~rfm.core.coincident`     -- which evaluation points are centres (exact row comparison)
* :mod:`~rfm.core.patches`        -- the patch feature map: images as the q x q patches a convolution multiplies
* :mod:`~rfm.core.blocks`         -- the memory policy: rows per block of kernel values

The estimators (:mod:`rfm.models`) run the one RFM loop (:mod:`rfm.models.loop`) over these pieces.
"""
