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
# # Grokking modular arithmetic with RFM
#
# {cite:t}`mallinar2024emergence` show that *grokking*, the late and sudden jump of test accuracy on modular
# arithmetic, is neither specific to neural networks nor to gradient descent. A Recursive Feature Machine (RFM),
# a kernel machine that re-weights its inputs by the average gradient outer product (AGOP) of its own fit, goes from
# zero to perfect test accuracy over its iterations. The training loss is zero throughout (the kernel machine
# interpolates) and the test loss barely moves in the first iterations, so neither announces the jump. The features
# do: the feature matrix $M$ becomes *block-circulant*, step by step, well before the accuracy rises. Networks that
# solve the task learn block-circulant features as well, and *random* circulant features generalise with no learning
# at all. The claim comes from the second abstract of seed 001.
#
# This chapter reproduces, for $p = 61$ (the default modulus of the authors' code):
#
# 1. the transition over RFM iterations for $x + y$ and $x \div y$, with train and test accuracy, the test loss and
#    the test loss of the correct class, and two progress measures, the *circulant deviation* of $M$ and its *AGOP
#    alignment* with the final $M$;
# 2. $M$ before, during and after the transition, re-ordered for $\times$ and $\div$, and its Fourier view: the
#    discrete Fourier transform (DFT) diagonalises the learned block;
# 3. the random-circulant control for all four operations ($+, -, \times, \div$), and what breaks it;
# 4. a one-hidden-layer network with quadratic activation trained with AdamW, whose neural feature matrix (NFM)
#    becomes block-circulant once it generalises, and tracks its AGOP$^{1/2}$ better than a network with the same
#    spectrum in random directions.
#
# The default *smoke* profile runs RFM for 20 iterations on $+$, $\times$ and $\div$ and a short network training on
# a 2-core CPU (about two minutes). The *full* profile runs the authors' schedule (50 RFM iterations, 1000 network
# epochs) for all four operations and three seeds, a training-fraction sweep, and the network at width 1,024.

# %% tags=["remove-cell"]
# Colab set-up: install the package from the book's repository (the same URL as `repository.url` in _config.yml).
import sys
import subprocess

if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "agop-rfm @ git+https://github.com/rfm-book/rfm-book"], check=True)

# %% tags=["parameters"]
profile = "smoke"      # "smoke": p 61, 20 RFM iterations (CPU, minutes); "full": the authors' schedule, all operations
seed = 0               # seed of the train/test split (and of the random circulant features, the network)
device = None          # None: CUDA when present, else CPU
output_dir = None      # set by scripts/rerun.py: figures and measured values are written there
p = None               # the modulus (a prime; None: the profile's value)
train_fraction = None  # fraction of all pairs used for training RFM
iters = None           # RFM iterations (feature updates)
bandwidth = None       # Gaussian kernel bandwidth L
net_epochs = None      # network: epochs of AdamW
net_train_fraction = None
net_batch_size = None
net_lr = None
net_weight_decay = None
net_width = None

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import torch

import rfm
import rfm.book
from rfm import nets
from rfm.data import modular as mod

start, start_cpu = time.perf_counter(), time.process_time()
P = rfm.book.settings(
    profile,
    smoke=dict(p=61, train_fraction=0.5, iters=20, bandwidth=2.5, rfm_operations=("add", "mul", "div"),
               sweep_seeds=1, fractions=(),
               net_epochs=200, net_train_fraction=0.3, net_batch_size=32, net_lr=1e-3, net_weight_decay=1.0,
               net_width=256, net_operations=("add",), nfm_every=20),
    full=dict(p=61, train_fraction=0.5, iters=50, bandwidth=2.5, rfm_operations=mod.OPERATIONS,
              sweep_seeds=3, fractions=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7),
              net_epochs=1000, net_train_fraction=0.3, net_batch_size=32, net_lr=1e-3, net_weight_decay=1.0,
              net_width=1024, net_operations=mod.OPERATIONS, nfm_every=50),
    p=p, train_fraction=train_fraction, iters=iters, bandwidth=bandwidth, net_epochs=net_epochs,
    net_train_fraction=net_train_fraction, net_batch_size=net_batch_size, net_lr=net_lr,
    net_weight_decay=net_weight_decay, net_width=net_width)
dev = rfm.get_device(device)
print(f"profile={P.profile}, device={rfm.book.device_name(dev)}, p={P.p}, train_fraction={P.train_fraction}, "
      f"iters={P.iters}, L={P.bandwidth}")

# %% [markdown]
# ## The task
#
# Every pair $(x, y) \in \mathbb Z_p^2$ is an example, with label $x \circ y \bmod p$ ($y \neq 0$ for division). The
# input is the concatenation of the one-hot codes of the two digits, a vector of $\mathbb R^{2p}$ with two ones; the
# target is the one-hot code of the label in $\mathbb R^p$. Half of the pairs are for training, the other half for
# testing: a model must infer the results it has not seen. Nothing about the *order* of the digits is in the
# inputs; any permutation of the one-hot coordinates gives the same problem. The modulus $p = 61$ and the training
# fraction $1/2$ are the defaults of the authors' `train_kernel.py`.

# %%
data = mod.modular_arithmetic(P.p, "add", P.train_fraction, generator=seed)
print(f"{len(data.X_train)} training and {len(data.X_test)} test pairs; inputs {tuple(data.X_train.shape[1:])}, "
      f"targets {tuple(data.Y_train.shape[1:])}")
for (x, y), z in zip(data.pairs_train[:3].tolist(), data.y_train[:3].tolist()):
    print(f"  {x} + {y} = {z} (mod {P.p})")

# %% [markdown]
# ## RFM on $x + y \bmod p$
#
# We use the package's estimator with the settings of the authors' `train_kernel.py`: the Gaussian kernel
# $k_M(u, v) = \exp(-\|u - v\|_M^2 / (2L^2))$ with $L = 2.5$, ridge $0$ (exact interpolation, in float64), the AGOP
# computed at all training points with centred gradients, and the update $M \leftarrow \mathrm{AGOP}^{1/2}$ with no
# normalisation. The classifier regresses the one-hot targets by least squares and predicts the arg-max. The iteration
# starts from $M_0 = I$, so iteration 0 is a plain Gaussian kernel machine: the fixed-kernel control of every claim
# below.
#
# After every solve, a callback (`rfm.data.modular.GrokkingProgress`) evaluates the current predictor on the
# held-out pairs and on the training inputs, and computes the progress measures of the $M$ that was used. The test
# set is never given to `fit`: it selects nothing, it is only recorded. The same run is repeated for $\times$ and
# $\div$ (and, in the full profile, $-$ and two more seeds).

# %%
def fit_rfm(d, iters, M_init=None, callback=None):
    return rfm.RFMClassifier(kernel="gaussian", bandwidth=P.bandwidth, reg=0.0, agop_power=0.5, centre=True,
                             normalize=None, dtype="float64", iters=iters, max_agop_points=None, M_init=M_init,
                             device=dev, random_state=seed, callback=callback).fit(d.X_train, d.y_train)


def rfm_run(op, s, fraction=None):
    """RFM on x o y mod p with split seed s: the GrokkingProgress records and the time."""
    d = data if (op, s, fraction) == ("add", seed, None) else \
        mod.modular_arithmetic(P.p, op, fraction or P.train_fraction, generator=s)
    t0 = time.perf_counter()
    prog = mod.GrokkingProgress(d)
    model_ = fit_rfm(d, P.iters, callback=prog)
    return dict(progress=prog, seconds=time.perf_counter() - t0, model=model_)


runs = {op: rfm_run(op, seed) for op in P.rfm_operations}
progress, model = runs["add"]["progress"], runs["add"]["model"]
R = progress.records
seconds_per_iteration = [h["time_s"] for h in model.history_]
print(f"RFM on x + y: {P.iters} iterations in {runs['add']['seconds']:.0f} s "
      f"({np.median(seconds_per_iteration):.1f} s per solve + AGOP, median; the callback's evaluations included)")
print("solvers used:", sorted({r["solver"] for r in R}))


def curves(prog):
    """The columns of a GrokkingProgress as arrays, with the whole-matrix and off-diagonal AGOP alignments."""
    c = {k: np.array(prog.column(k), dtype=float) for k in ("iteration", "train_acc", "test_acc", "test_mse",
                                                            "test_correct_mse", "train_mse_measured",
                                                            "circulant_deviation", "train_residual")}
    c["align"] = np.array(prog.alignment())                          # the paper's: cosine of the whole matrices
    c["align_block"] = np.array(prog.alignment(part="off_diagonal"))  # our addition: the coupling blocks only
    flat = c["iteration"][c["test_acc"] <= 0.05]
    c["last_flat"] = int(flat[-1]) if len(flat) else 0               # last iteration at <= 5% test accuracy
    above = c["iteration"][c["test_acc"] > 0.5]
    c["first_half"] = int(above[0]) if len(above) else None          # first iteration above 50%
    return c


C = {op: curves(r["progress"]) for op, r in runs.items()}
c = C["add"]
print(" it  train acc  test acc  test MSE  correct-class  circ. dev.  align.  align. (block)")
for i in range(len(R)):
    print(f"{i:3d}  {c['train_acc'][i]:9.3f}  {c['test_acc'][i]:8.3f}  {c['test_mse'][i]:8.5f}  "
          f"{c['test_correct_mse'][i]:13.4f}  {c['circulant_deviation'][i]:10.3f}  {c['align'][i]:6.3f}  "
          f"{c['align_block'][i]:14.3f}")

# %%
early = slice(0, 8)
last_flat, first_half = c["last_flat"], c["first_half"]
mse_change = float(np.abs(c["test_mse"][early] - c["test_mse"][0]).max() / c["test_mse"][0])
correct_change = float(np.abs(c["test_correct_mse"][early] - c["test_correct_mse"][0]).max()
                       / c["test_correct_mse"][0])
rfm.book.glue("rfm_last_flat", last_flat, "{:d}")
rfm.book.glue("rfm_first_half", first_half if first_half is not None else -1, "{:d}")
rfm.book.glue("rfm_final_acc", c["test_acc"][-1], "{:.3f}")
rfm.book.glue("rfm_acc_iter0", c["test_acc"][0], "{:.3f}")
rfm.book.glue("rfm_mse_change", 100 * mse_change, "{:.1f}")
rfm.book.glue("rfm_correct_change", 100 * correct_change, "{:.1f}")
rfm.book.glue("rfm_train_residual", c["train_residual"].max(), "{:.0e}")
rfm.book.glue("rfm_dev_first", c["circulant_deviation"][1], "{:.2f}")
rfm.book.glue("rfm_dev_last_flat", c["circulant_deviation"][last_flat], "{:.2f}")
rfm.book.glue("rfm_dev_final", c["circulant_deviation"][-1], "{:.3f}")
rfm.book.glue("rfm_align0", c["align"][0], "{:.2f}")
rfm.book.glue("rfm_align_last_flat", c["align"][last_flat], "{:.2f}")
rfm.book.glue("rfm_align_block_last_flat", c["align_block"][last_flat], "{:.2f}")
rfm.book.glue("rfm_iters", P.iters, "{:d}")
rfm.book.glue("rfm_seconds", runs["add"]["seconds"], "{:.0f}")

# %% [markdown]
# The training accuracy is 1 and the largest training error is {glue:text}`rfm_train_residual` (float64 round-off)
# at every iteration; the test accuracy is {glue:text}`rfm_acc_iter0` at iteration 0 (the fixed Gaussian kernel),
# stays at or below 5% up to iteration {glue:text}`rfm_last_flat`, passes 1/2 at iteration
# {glue:text}`rfm_first_half` and ends at {glue:text}`rfm_final_acc` after {glue:text}`rfm_iters` iterations.
#
# ## The transition is invisible in the losses and visible in the features
#
# Two progress measures follow $M$:
#
# * the **circulant deviation** of the block $B = M_{[:p,\,p:]}$ that couples the first digit with the second (the
#   diagonal blocks only weigh each digit by itself), re-indexed for the operation (below):
#   $D(B) = \|B - \mathrm{circ}(B)\|_F^2 / \|B\|_F^2$, where $\mathrm{circ}(B)$ averages $B$ along its wrapped
#   diagonals $i - j \equiv \text{const} \pmod p$. It is the fraction of the block's energy that is *not*
#   circulant: 0 for a circulant block, about $1 - 1/p$ for a random one. The other normalisation, the sum over
#   columns of the variance of the rolled rows (row $i$ of $B$ shifted by $-i$) divided by $\|B\|_F^2$, is exactly
#   $D/p$: a random block gives {glue:text}`random_block_dev` on our scale and {glue:text}`random_block_rolled` $=
#   (1 - 1/p)/p$ on that one (`circulant_deviation(B, scale="rolled_variance")`; the unit tests check the identity).
#   The curves below are on our scale; divide by $p$ to compare them with curves on the rolled-row scale.
# * the **AGOP alignment** $\langle M_t, M_T\rangle_F / (\|M_t\|_F \|M_T\|_F)$, the cosine between the *whole*
#   feature matrix at iteration $t$ and the final one, as the paper defines it. Because the diagonal of $M$ weighs
#   heavily, it starts well above 0 ({glue:text}`rfm_align0` at $M_0 = I$). As an addition of ours, not the paper's
#   measure, we also show the cosine of the off-diagonal blocks alone (dashed), which is undefined at $M_0 = I$
#   (zero block).
#
# The circulant deviation is undefined at iteration 0 too, whose block is zero. Besides the test MSE over all $p$
# outputs, we show the *correct-class* test loss, $(f_y(x) - 1)^2$ averaged over the test pairs (the
# `correct_logit_loss` of the authors' code, the third row of their Fig. 2A).

# %%
B_random = torch.randn(P.p, P.p, generator=rfm.make_generator(seed), dtype=torch.float64)
rfm.book.glue("random_block_dev", mod.circulant_deviation(B_random), "{:.3f}")
rfm.book.glue("random_block_rolled", mod.circulant_deviation(B_random, scale="rolled_variance"), "{:.5f}")


def plot_progress(cv, title, name):
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6), sharex=True)
    it_ = cv["iteration"]
    axes[0].plot(it_, cv["train_acc"], "o-", ms=3, label="train")
    axes[0].plot(it_, cv["test_acc"], "o-", ms=3, label="test")
    axes[0].set_ylabel("accuracy")
    axes[1].plot(it_, cv["test_mse"], "o-", ms=3, color="C1", label="test MSE (all outputs)")
    axes[1].plot(it_, cv["train_mse_measured"], "o-", ms=3, color="C0",
                 label=f"train MSE (at most {cv['train_mse_measured'].max():.0e})")
    axes[1].set_ylim(0, 1.1 * cv["test_mse"].max())
    axes[2].plot(it_, cv["test_correct_mse"], "o-", ms=3, color="C4", label="correct-class test loss")
    axes[2].set_ylim(0, 1.1 * cv["test_correct_mse"].max())
    axes[3].plot(it_, cv["circulant_deviation"], "o-", ms=3, color="C2", label="circulant deviation")
    axes[3].plot(it_, cv["align"], "o-", ms=3, color="C3", label="AGOP alignment (whole M)")
    axes[3].plot(it_, cv["align_block"], "--", color="C3", alpha=0.6, label="alignment, off-diagonal block")
    axes[3].set_ylim(-0.05, 1.05)
    for ax in axes:
        if cv["first_half"] is not None:
            ax.axvspan(cv["last_flat"] + 0.5, cv["first_half"] + 0.5, color="0.9")
        ax.set_xlabel("RFM iteration")
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    rfm.book.savefig(fig, name, output_dir=output_dir)
    plt.show()


# %% mystnb={"figure": {"caption": "RFM on x + y mod 61, by iteration (iteration 0 is the fixed Gaussian kernel). From the left: train and test accuracy; the train and test MSE; the correct-class test loss; the circulant deviation of the coupling block and the AGOP alignment with the final M (solid: whole matrices, the paper's measure; dashed: off-diagonal blocks only, our addition). Grey: from the last iteration at or below 5% test accuracy to the first above 50%.", "name": "fig-grokking-transition"}}
plot_progress(c, f"RFM on x + y mod {P.p}", "grokking_modular_arithmetic_transition")

# %% [markdown]
# {numref}`fig-grokking-transition`, left: the training accuracy is 1 from the first solve, the test accuracy stays
# at 0 and then jumps. Middle: the training error is zero to round-off; over iterations 0–7 the test MSE moves by
# at most {glue:text}`rfm_mse_change`% of its initial value and the correct-class loss by at most
# {glue:text}`rfm_correct_change`%, while $M$ is already changing; both start falling only a couple of iterations
# before the accuracy moves. Right: the circulant deviation falls at every iteration from the first update, from
# {glue:text}`rfm_dev_first` to {glue:text}`rfm_dev_last_flat` at iteration {glue:text}`rfm_last_flat`, the last at
# which the test accuracy is still at most 5%, and to {glue:text}`rfm_dev_final` at the end. The whole-matrix
# alignment climbs from {glue:text}`rfm_align0` to {glue:text}`rfm_align_last_flat` by then (the off-diagonal blocks
# alone: {glue:text}`rfm_align_block_last_flat`). The measures announce the transition; the losses do not.
#
# ### Division
#
# Division has the same shape ({numref}`fig-grokking-division`, the paper's Fig. 2B): the fixed kernel gets only the
# pairs with $x = 0$ right (answer 0, a test accuracy near $1/p$), and the accuracy stays there up to iteration
# {glue:text}`div_last_flat` while the circulant deviation (in the re-indexed order, below) falls from
# {glue:text}`div_dev_first` to {glue:text}`div_dev_last_flat`; then the accuracy rises, to
# {glue:text}`div_final_acc` at the end.

# %%
cd_ = C["div"]
rfm.book.glue("div_last_flat", cd_["last_flat"], "{:d}")
rfm.book.glue("div_dev_first", cd_["circulant_deviation"][1], "{:.2f}")
rfm.book.glue("div_dev_last_flat", cd_["circulant_deviation"][cd_["last_flat"]], "{:.2f}")
rfm.book.glue("div_final_acc", cd_["test_acc"][-1], "{:.3f}")

# %% mystnb={"figure": {"caption": "RFM on x / y mod 61: the same panels as for addition. The circulant deviation is that of the coupling block re-indexed by discrete logarithms (digit 0 dropped), in which the division block is circulant.", "name": "fig-grokking-division"}}
plot_progress(cd_, f"RFM on x / y mod {P.p}", "grokking_modular_arithmetic_division")

# %% [markdown]
# ## What $M$ looks like before, during and after
#
# Below, $M$ minus its diagonal (which dominates it) at the first update, at the first iteration where the test
# accuracy exceeds 1/2, and at the end ({numref}`fig-grokking-M`). The two off-diagonal blocks fill up with stripes
# parallel to the main diagonal: $B_{ij}$ depends on $i - j \bmod p$ only, i.e. $B$ is **circulant**. For addition
# that is the natural order. Why the *difference*? The kernel compares two pairs through $\|u - u'\|_M^2$, whose
# cross terms are $B_{x y'} + B_{x' y}$; two pairs with the same sum, $x + y = x' + y'$, have $x - y' = x' - y$, so
# a block that is a function of the difference gives them equal cross terms. For the other operations the block is
# circulant after re-indexing the digits (`rfm.data.modular.block_orders`): $y \to -y$ for $x - y$, the discrete
# logarithm $x = g^k$ for a primitive root $g$ (dropping the digit 0) for $x \times y$, both for $x \div y$.

# %%
def without_diagonal(M):
    M = torch.as_tensor(M).clone()
    M.fill_diagonal_(0)
    return M.numpy()


def show(ax, A, title):
    lim = np.abs(A).max()
    ax.imshow(A, cmap="RdBu_r", vmin=-lim, vmax=lim)
    ax.set_title(title, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])


middle = first_half if first_half is not None else len(R) // 2
shown = [1, middle, len(R) - 1]

# %% mystnb={"figure": {"caption": "RFM's M minus its diagonal on x + y mod 61, after the first update, at the first iteration above 50% test accuracy and at the end; rows and columns 0..p-1 are the first digit, p..2p-1 the second (black lines).", "name": "fig-grokking-M"}}
fig, axes = plt.subplots(1, 3, figsize=(14, 4.6))
for ax, t in zip(axes, shown):
    show(ax, without_diagonal(R[t]["M"]),
         f"iteration {t} (test acc {c['test_acc'][t]:.2f}, circ. dev. {c['circulant_deviation'][t]:.2f})")
    ax.axhline(P.p - 0.5, color="k", lw=0.5)
    ax.axvline(P.p - 0.5, color="k", lw=0.5)
fig.tight_layout()
rfm.book.savefig(fig, "grokking_modular_arithmetic_M", output_dir=output_dir)
plt.show()

# %% [markdown]
# After the first update the off-diagonal blocks are faint and noisy, with only a hint of diagonal stripes, and the
# diagonal blocks are uniform off their diagonal. At the transition the stripes are clear, and at the end the blocks
# are nearly exactly circulant. Every block of $M$ has zero row and column sums: the difference of two one-hot codes
# sums to zero over a digit's coordinates, so every gradient of the kernel predictor is orthogonal to the all-ones
# vector of each digit, and so is the AGOP. The diagonal blocks are close to a multiple of the *centred identity*
# $I - \tfrac1p \mathbf 1 \mathbf 1^\top$, the matrix the random construction below puts there:

# %%
centred_identity = torch.eye(P.p, dtype=torch.float64) - 1.0 / P.p


def distance_to_centred_identity(M):
    """Relative Frobenius distance of the first diagonal block from its best multiple of I - 11^T/p."""
    D = torch.as_tensor(M)[:P.p, :P.p]
    k = (D * centred_identity).sum() / centred_identity.square().sum()
    return float((D - k * centred_identity).norm() / D.norm())


for t in shown:
    print(f"iteration {t:2d}: diagonal block {distance_to_centred_identity(R[t]['M']):.4f} away from a multiple of "
          f"I - 11^T/p (relative Frobenius distance)")

# %% [markdown]
# ### Multiplication and division: circulant after re-ordering
#
# For $\times$ and $\div$ the learned block shows no stripes in the natural order of the digits; re-ordered by
# discrete logarithms (and, for division, with the second digit's logarithm negated), it is circulant
# ({numref}`fig-grokking-reordered`, the paper's Fig. 3B/C). The row and column of the digit 0, which has no
# logarithm, are dropped.

# %% mystnb={"figure": {"caption": "The final coupling block B of RFM's M for x * y (top) and x / y (bottom) mod 61: left, in the natural order of the digits; right, re-ordered by discrete logarithms (rfm.data.modular.reindex_block), where it is circulant.", "name": "fig-grokking-reordered"}}
reorder_ops = [op for op in ("mul", "div") if op in runs]
fig, axes = plt.subplots(len(reorder_ops), 2, figsize=(9, 4.4 * len(reorder_ops)), squeeze=False)
for row, op in zip(axes, reorder_ops):
    B_op = mod.off_diagonal_block(runs[op]["progress"].records[-1]["M"])
    show(row[0], B_op.numpy(), f"x {mod.SYMBOLS[op]} y: B in the natural order "
         f"(circ. dev. {mod.circulant_deviation(B_op):.2f})")
    show(row[1], mod.reindex_block(B_op, op).numpy(), f"x {mod.SYMBOLS[op]} y: B re-ordered "
         f"(circ. dev. {mod.block_circulant_deviation(runs[op]['progress'].records[-1]['M'], op):.3f})")
fig.tight_layout()
rfm.book.savefig(fig, "grokking_modular_arithmetic_reordered", output_dir=output_dir)
plt.show()

# %% [markdown]
# ## The Fourier view
#
# Every circulant matrix $C_{ij} = c_{(i - j) \bmod p}$ is diagonalised by the unitary DFT
# $F_{jk} = e^{-2\pi i jk/p}/\sqrt p$: $F C F^{H} = \operatorname{diag}(\hat c)$ with $\hat c$ the DFT of its first
# column (`rfm.data.modular.fourier_diagonalize`; the unit tests check this on known circulants, and that the
# energy off the diagonal of $F B F^H$ is exactly the circulant deviation of $B$). So the learned block acts on a
# digit's one-hot code by multiplying each of its Fourier coefficients by one number $\hat c_k$: the features are
# Fourier features of the digits, the ingredient of the *Fourier multiplication algorithm* that
# {cite:t}`mallinar2024emergence` argue the kernel implements, and that was found earlier in networks.

# %%
B_final = mod.off_diagonal_block(R[-1]["M"])
FBF = mod.fourier_diagonalize(B_final)
spectrum = torch.diagonal(FBF).abs().numpy()
off_fourier = float((FBF.abs().square().sum() - torch.diagonal(FBF).abs().square().sum()) / B_final.square().sum())
top = np.argsort(spectrum)[::-1][:6]
print(f"energy of F B F^H off its diagonal: {off_fourier:.4f} (circulant deviation of B: "
      f"{c['circulant_deviation'][-1]:.4f})")
print("largest |c_k| at frequencies k =", top.tolist(), "(k and p - k always come together: B is real)")

# %% mystnb={"figure": {"caption": "The coupling block of x + y in the Fourier basis. Left and middle: |F B F^H| after the first update and at the end (diagonal: B is circulant). Right: the spectrum |c_k| of the circulant part of B, normalised, at three iterations.", "name": "fig-grokking-fourier"}}
B_first = mod.off_diagonal_block(R[1]["M"])
fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
axes[0].imshow(mod.fourier_diagonalize(B_first).abs().numpy(), cmap="magma")
axes[0].set_title("|F B F^H| after the first update", fontsize=9)
axes[1].imshow(FBF.abs().numpy(), cmap="magma")
axes[1].set_title(f"|F B F^H| at iteration {len(R) - 1}: diagonal", fontsize=9)
for t, style in ((1, ":"), (middle, "--"), (len(R) - 1, "-")):
    s_ = mod.circulant_spectrum(mod.off_diagonal_block(R[t]["M"])).abs().numpy()
    axes[2].plot(np.arange(P.p), s_ / s_.max(), style, marker="o", ms=2, label=f"iteration {t}")
axes[2].set_xlabel("frequency k")
axes[2].set_ylabel("|c_k| / max")
axes[2].set_title("spectrum of the circulant part of B", fontsize=9)
axes[2].legend(fontsize=8)
fig.tight_layout()
rfm.book.savefig(fig, "grokking_modular_arithmetic_fourier", output_dir=output_dir)
plt.show()

# %% [markdown]
# {numref}`fig-grokking-fourier`, left and middle: in the Fourier basis the final block is diagonal (its
# off-diagonal energy is its circulant deviation, by construction), while after the first update the energy is
# spread. Right: the eigenvalues $|\hat c_k|$ of the circulant part, normalised; $\hat c_0 = 0$ because the block
# has zero row sums, and the spectrum is symmetric, $|\hat c_k| = |\hat c_{p-k}|$, since $B$ is real. The learned
# block does not single out a few frequencies: its weight spreads over all non-zero frequencies. A kernel machine
# does not need sparsity in frequency: any block that is circulant in the right order, with non-zero $\hat c_k$,
# makes the kernel compare pairs through their sums, which is what the next experiment tests.
#
# ## Random circulant features need no learning
#
# If the block-circulant structure is what matters, an $M$ with a *random* circulant block should generalise without
# a single RFM iteration. The construction of the authors' `train_random_circulant_kernel.py`
# (`rfm.data.modular.random_circulant_features`) is
#
# $$M = \Big(\begin{bmatrix} I - \tfrac1p \mathbf 1\mathbf 1^\top & C \\ C^\top & I - \tfrac1p \mathbf 1 \mathbf 1^\top
# \end{bmatrix}\Big)^{1/2},$$
#
# with $C$ circulant (in the order of the operation) built from $c \sim U[0, 1]^p$ minus its mean. The matrix inside
# is indefinite (its eigenvalues are $1 \pm |\hat c_k|$); the code takes the real part of SciPy's principal square
# root, which for a symmetric matrix is the square root of its positive part. We solve once with this $M$, with
# $M = I$, and with a random circulant block in the *wrong* order (the re-indexing of the dual operation, e.g. a
# function of $x + y$ instead of $x - y$ for addition): the two controls.

# %%
ablation = {}
for op in mod.OPERATIONS:
    d_op = data if op == "add" else mod.modular_arithmetic(P.p, op, P.train_fraction, generator=seed)
    wrong = mod.random_circulant_block(P.p, mod.dual_operation(op), generator=seed)
    Pc = torch.eye(P.p, dtype=torch.float64) - 1.0 / P.p
    M_wrong = rfm.psd_power(torch.cat([torch.cat([Pc, wrong], 1), torch.cat([wrong.T, Pc], 1)]), 0.5)
    row = {}
    for name, M0 in (("identity", None), ("random circulant", mod.random_circulant_features(P.p, op, generator=seed)),
                     ("wrong order", M_wrong)):
        row[name] = fit_rfm(d_op, 0, M_init=M0).score(d_op.X_test, d_op.y_test.numpy())
    ablation[op] = row
print(f"test accuracy with no RFM iteration (p = {P.p}, train fraction {P.train_fraction}):")
print(f"{'operation':>10} {'M = I':>8} {'random circulant':>17} {'wrong order':>12}")
for op, row in ablation.items():
    print(f"{'x ' + mod.SYMBOLS[op] + ' y':>10} {row['identity']:8.3f} {row['random circulant']:17.3f} "
          f"{row['wrong order']:12.3f}")
rfm.book.glue("circ_min", min(r["random circulant"] for r in ablation.values()), "{:.3f}")
rfm.book.glue("wrong_max", max(r["wrong order"] for r in ablation.values()), "{:.3f}")

# %% [markdown]
# With $M = I$ the kernel machine knows nothing about the digits' arithmetic and gets every unseen pair wrong (for
# $\times$ and $\div$ it gets the pairs with a zero digit right, whose answer is always 0: a test accuracy of about
# $2/p$ and $1/p$). A random block that is circulant in the operation's order gives a test accuracy of at least
# {glue:text}`circ_min` at once, for all four operations, while the same random block in the wrong order gets at
# most {glue:text}`wrong_max`, as useless as the identity. The re-indexing is the essential detail. (In our runs the
# centred diagonal blocks and the square root matter much less: replacing them by $I$, or dropping the square root,
# still generalises for $+$ and $-$; we do not assert on this.)

# %% [markdown]
# ## A neural network learns block-circulant features too
#
# The network of the authors' `train_net.py` has one hidden layer with quadratic activation and no biases,
# $f(u) = W_2 (W_1 u)^{2}$, trained on the MSE with AdamW (learning rate $10^{-3}$, betas $(0.9, 0.98)$, weight
# decay 1, batch 32, 1000 epochs, 30% of the pairs); the code's default width is 256. The smoke profile trains width
# 256 for 200 of the 1000 epochs, enough to generalise and to clean up the features; the full profile trains width
# 1,024 (the width we were told the paper's appendix uses; we could not read the appendix offline) for all 1000
# epochs, for each operation. Its *neural feature matrix* $W_1^\top W_1$ plays the role of $M$.
#
# In the package the network is an `rfm.nets.MLP` (`mod.quadratic_net`), trained by the package's one training
# loop `rfm.nets.train` with a `torch.optim.AdamW`; `mod.NetworkProgress` records the accuracies, the losses, the
# NFM and the network's AGOP (with respect to its input, at the training pairs) along the way.
#
# One difference is worth knowing. The network combines the digits *inside* one input: with $W_1 u = a_x + b_y$,
# the square contains the product $a_x \odot b_y$, and the Fourier multiplication algorithm needs products such as
# $\cos(\omega x)\cos(\omega y)$ that produce $\cos(\omega(x + y))$. So its block $B_{xy} = \langle a_x, b_y\rangle$
# ends up a function of $x + y$ itself (a Hankel matrix), not of $x - y$ as for the kernel: it is circulant after the
# re-indexing of the *dual* operation ($y \to -y$ for addition). We measure it that way.

# %%
def off_diagonal_entries(A):
    A = torch.as_tensor(A)
    return A[~torch.eye(A.shape[0], dtype=torch.bool)]


def nfa_pair(nfm_, agop_):
    """corr(NFM, AGOP^{1/2}): Pearson over all entries (the NFA's measure) and over the off-diagonal entries."""
    G = rfm.psd_power(agop_, 0.5)
    return (rfm.matrix_correlation(nfm_, G, "pearson"),
            rfm.matrix_correlation(off_diagonal_entries(nfm_), off_diagonal_entries(G), "pearson"))


net_runs = {}
for op in P.net_operations:
    d_net = mod.modular_arithmetic(P.p, op, P.net_train_fraction, generator=seed)
    t0 = time.perf_counter()
    g = rfm.make_generator(seed)  # one stream: the initial weights, then the mini-batch order
    # f(u) = W2 (W1 u)^2, no biases, U[-1/sqrt(fan_in), 1/sqrt(fan_in)]: MLP(2p, [width], p, "quadratic", "uniform")
    net = mod.quadratic_net(P.p, P.net_width, generator=g, device=dev)
    progress_net = mod.NetworkProgress(d_net, nfm_every=P.nfm_every, agop=True)
    opt = torch.optim.AdamW(net.parameters(), lr=P.net_lr, betas=(0.9, 0.98), weight_decay=P.net_weight_decay)
    # the matrices are tiny: on a busy 2-core CPU one thread was several times faster than two
    nets.train(net, d_net.X_train, d_net.Y_train, loss="mse", optimizer=opt, epochs=P.net_epochs,
               batch_size=P.net_batch_size, generator=g, record_initial=True, callback=progress_net,
               threads=1 if dev.type == "cpu" else None)
    hist = progress_net.records
    snaps = [h for h in hist if "nfm" in h]
    ep = np.array([h["epoch"] for h in hist])
    test_acc_n = np.array([h["test_acc"] for h in hist])
    X_net = d_net.X_train.to(dev, next(net.parameters()).dtype)
    # the controls: the same trained network with W1 replaced by its singular values in Haar-random directions
    matched = []
    for k in range(5):
        m_net = nets.matched_network(net, 0, generator=seed * 100 + k)
        matched.append(nfa_pair(nets.nfm(m_net, 0), nets.layer_agop(m_net, X_net, 0)))
    nfa = [nfa_pair(h["nfm"], h["agop"]) for h in snaps]
    net_runs[op] = dict(
        hist=hist, snaps=snaps, ep=ep, test_acc=test_acc_n, seconds=time.perf_counter() - t0,
        nfm_ep=np.array([h["epoch"] for h in snaps]),
        nfm_dev=np.array([mod.block_circulant_deviation(h["nfm"], mod.dual_operation(op)) for h in snaps]),
        nfm_dev_kernel_order=np.array([mod.block_circulant_deviation(h["nfm"], op) for h in snaps]),
        agop_align=np.array([mod.agop_alignment(h["agop"], snaps[-1]["agop"]) for h in snaps]),
        nfa=np.array([a for a, _ in nfa]), nfa_off=np.array([b for _, b in nfa]),
        matched=np.array([a for a, _ in matched]), matched_off=np.array([b for _, b in matched]),
        fit_epoch=mod.first_reaching(ep, [h["train_acc"] for h in hist], 1.0),
        start_epoch=mod.first_reaching(ep, test_acc_n, 0.05),
        gen_epoch=mod.first_reaching(ep, test_acc_n, 0.99))
    r_ = net_runs[op]
    print(f"x {mod.SYMBOLS[op]} y: {P.net_epochs} epochs in {r_['seconds']:.0f} s; train acc 1 at epoch "
          f"{r_['fit_epoch']}, test acc >= 0.99 at epoch {r_['gen_epoch']}; final test acc {hist[-1]['test_acc']:.3f}; "
          f"corr(NFM, AGOP^1/2) {r_['nfa'][0]:.3f} -> {r_['nfa'][-1]:.3f} (spectrum-matched: "
          f"{r_['matched'].max():.3f} at most); off-diagonal entries {r_['nfa_off'][0]:.3f} -> {r_['nfa_off'][-1]:.3f} "
          f"(matched: {r_['matched_off'].max():.3f} at most)")

# %%
N = net_runs["add"]
hist, ep = N["hist"], N["ep"]
generalised = N["gen_epoch"]
test_mse_n = np.array([h["test_mse"] for h in hist])
test_correct_n = np.array([h["test_correct_mse"] for h in hist])
correct_moves = mod.first_reaching(ep, test_correct_n / test_correct_n[0], 0.95, below=True)
mse_peak = int(ep[np.argmax(test_mse_n)])
for name, v in (("net_fit_epoch", N["fit_epoch"]), ("net_start_epoch", N["start_epoch"]),
                ("net_gen_epoch", generalised), ("net_correct_moves", correct_moves), ("net_mse_peak", mse_peak)):
    rfm.book.glue(name, -1 if v is None else int(v), "{:d}")
rfm.book.glue("net_nfa_init", N["nfa"][0], "{:.3f}")
rfm.book.glue("net_nfa_final", N["nfa"][-1], "{:.3f}")
rfm.book.glue("net_nfa_matched", N["matched"].max(), "{:.3f}")
rfm.book.glue("net_nfa_off_init", N["nfa_off"][0], "{:.2f}")
rfm.book.glue("net_nfa_off_final", N["nfa_off"][-1], "{:.2f}")
rfm.book.glue("net_nfa_off_matched", N["matched_off"].max(), "{:.2f}")
rfm.book.glue("net_dev_init", N["nfm_dev"][0], "{:.2f}")
rfm.book.glue("net_dev_final", N["nfm_dev"][-1], "{:.2f}")
rfm.book.glue("net_width", P.net_width, "{:d}")
rfm.book.glue("net_epochs", P.net_epochs, "{:d}")

# %% mystnb={"figure": {"caption": "The quadratic network on x + y mod 61, by epoch. Left: train and test accuracy. Middle: test MSE (all outputs) and correct-class test loss, relative to epoch 0. Right: the progress measures of the network (the circulant deviation of its NFM's coupling block in the x + y order, dotted in the kernel's x - y order; the AGOP alignment, whole matrices, with the final AGOP) and the correlation of the NFM with AGOP^1/2 (Pearson, all entries and off-diagonal entries; the horizontal ticks at the right: the same for five networks with the trained W1's singular values in random directions). The grey line marks the first epoch at 99% test accuracy.", "name": "fig-grokking-network"}}
fig, axes = plt.subplots(1, 3, figsize=(16, 3.8))
axes[0].plot(ep, [h["train_acc"] for h in hist], label="train accuracy")
axes[0].plot(ep, N["test_acc"], label="test accuracy")
axes[1].plot(ep, test_mse_n / test_mse_n[0], label="test MSE / epoch 0")
axes[1].plot(ep, test_correct_n / test_correct_n[0], label="correct-class test loss / epoch 0")
axes[2].plot(N["nfm_ep"], N["nfm_dev"], "o-", ms=2, color="C2", label="circ. dev. of the NFM block (x + y order)")
axes[2].plot(N["nfm_ep"], N["nfm_dev_kernel_order"], ":", color="C2", label="same, kernel's (x - y) order")
axes[2].plot(N["nfm_ep"], N["agop_align"], "o-", ms=2, color="C3", label="AGOP alignment with the final AGOP")
axes[2].plot(N["nfm_ep"], N["nfa"], "o-", ms=2, color="C0", label="corr(NFM, AGOP^1/2), all entries")
axes[2].plot(N["nfm_ep"], N["nfa_off"], "s-", ms=2, color="C9", label="corr(NFM, AGOP^1/2), off-diagonal")
x_end = N["nfm_ep"][-1] * 1.03
axes[2].plot([x_end] * len(N["matched"]), N["matched"], "_", ms=12, color="C0")
axes[2].plot([x_end] * len(N["matched_off"]), N["matched_off"], "_", ms=12, color="C9")
axes[2].set_ylim(-0.05, 1.05)
for ax in axes:
    ax.set_xlabel("epoch")
    ax.legend(fontsize=7)
    if generalised is not None:
        ax.axvline(generalised, color="0.6", lw=0.8)
fig.tight_layout()
rfm.book.savefig(fig, "grokking_modular_arithmetic_network", output_dir=output_dir)
plt.show()

# %% [markdown]
# In {numref}`fig-grokking-network` the network fits the training pairs at epoch {glue:text}`net_fit_epoch`; its
# test accuracy passes 5% only at epoch {glue:text}`net_start_epoch` and 99% at epoch {glue:text}`net_gen_epoch`:
# the network groks. The circulant deviation of its feature block in the $x + y$ order falls from
# {glue:text}`net_dev_init` to {glue:text}`net_dev_final` through the transition and keeps falling after it, as
# weight decay removes what is not needed; in the kernel's $x - y$ order the same block never becomes circulant.
# The alignment of the network's AGOP with its final AGOP rises in step.
#
# **Where we disagree with the paper.** The abstract says of RFM that the test loss "remains constant in initial
# iterations", and the paper (its Section 4, as we were told; we could not read it offline) says the same of the
# network. Here the network's correct-class test loss has fallen by 5% at epoch {glue:text}`net_correct_moves`,
# before the accuracy moves (epoch {glue:text}`net_start_epoch`), while its MSE over all outputs first *rises*, to a
# peak at epoch {glue:text}`net_mse_peak`, and falls only later. For the network, then, one of the losses does move
# before the accuracy; for RFM neither does within the first iterations ({numref}`fig-grokking-transition`).
#
# **The NFM and the AGOP.** The Pearson correlation of the NFM with AGOP$^{1/2}$ over all entries goes from
# {glue:text}`net_nfa_init` at initialisation to {glue:text}`net_nfa_final`; a network with the trained $W_1$'s
# singular values in random directions (`rfm.nets.matched_network`, five draws) reaches
# {glue:text}`net_nfa_matched` at most. For one hidden layer the AGOP is $W_1^\top K W_1$ for a $K$ built from the
# network, so any $W_1$ with a spread spectrum gives a high correlation: most of it is algebra, and the part
# that training adds is small. The off-diagonal entries, which carry the circulant block, separate the two more
# clearly: {glue:text}`net_nfa_off_final` for the trained network against {glue:text}`net_nfa_off_matched` at most
# for the matched ones. The untrained network is no control here: its own NFM and AGOP$^{1/2}$ already correlate at
# {glue:text}`net_nfa_init` (all entries) and {glue:text}`net_nfa_off_init` (off-diagonal entries), by the same
# algebra, and training does not raise the off-diagonal value.

# %%
snap = {h["epoch"]: h["nfm"] for h in N["snaps"]}
at_generalisation = min(snap, key=lambda e: abs(e - generalised)) if generalised is not None else \
    int(N["nfm_ep"][len(N["nfm_ep"]) // 2])

# %% mystnb={"figure": {"caption": "The network's NFM W1^T W1 minus its diagonal on x + y mod 61, at initialisation, at the snapshot nearest the first epoch at 99% test accuracy, and at the end (circulant deviation of the coupling block in the x + y order in the titles).", "name": "fig-grokking-nfm"}}
fig, axes = plt.subplots(1, 3, figsize=(14, 4.6))
for ax, e in zip(axes, (0, at_generalisation, int(N["nfm_ep"][-1]))):
    show(ax, without_diagonal(snap[e]),
         f"NFM at epoch {e} (circ. dev. {mod.block_circulant_deviation(snap[e], mod.dual_operation('add')):.2f})")
    ax.axhline(P.p - 0.5, color="k", lw=0.5)
    ax.axvline(P.p - 0.5, color="k", lw=0.5)
fig.tight_layout()
rfm.book.savefig(fig, "grokking_modular_arithmetic_nfm", output_dir=output_dir)
plt.show()

# %% [markdown]
# At initialisation the NFM is noise ({numref}`fig-grokking-nfm`). When the network generalises, stripes appear; at
# the end the off-diagonal blocks are anti-diagonal stripes (constant along $x + y = $ const), and the diagonal
# blocks carry a weaker lattice of both orders. Both models solve the task with block-circulant features; they
# differ in which of the two circulant orders appears in the block that couples the digits, for the reason given
# above.

# %% [markdown]
# ## All four operations, several seeds, and the training fraction
#
# The full profile repeats the RFM run for $+, -, \times, \div$ and three seeds with the authors' 50 iterations, and
# records when the test accuracy passes 1/2 and where it ends; it also trains the network on every operation, and
# sweeps the training fraction for RFM (the paper's Fig. 4 varies it; we run the fractions 0.1 to 0.7 with one seed).
# The smoke profile lists only its three runs ({numref}`fig-grokking-sweep`); the training-fraction sweep and the
# network on the other operations are drawn in the full profile only (its figures are committed in
# `results/grokking_modular_arithmetic/full_figures/`).

# %%
def summarise(cv):
    dev_ = cv["circulant_deviation"][1:]
    return dict(first_half=cv["first_half"], final_acc=float(cv["test_acc"][-1]), acc0=float(cv["test_acc"][0]),
                max_early_acc=float(cv["test_acc"][early].max()), final_dev=float(dev_[-1]), dev1=float(dev_[0]),
                dev_increases=int((np.diff(dev_) >= 0).sum()), align_increases=int((np.diff(cv["align"]) <= 0).sum()),
                acc=cv["test_acc"], dev=cv["circulant_deviation"])


sweep = {(op, seed): summarise(C[op]) for op in P.rfm_operations}
for op in P.rfm_operations:
    for s in range(seed, seed + P.sweep_seeds):
        if (op, s) not in sweep:
            sweep[(op, s)] = summarise(curves(rfm_run(op, s)["progress"]))
print(f"{'op':>6} {'seed':>5} {'acc > 1/2 at':>13} {'final test acc':>15} {'circ. dev. it 1 -> end':>24} "
      f"{'increases':>10}")
for (op, s), r in sweep.items():
    print(f"{'x' + mod.SYMBOLS[op] + 'y':>6} {s:5d} {str(r['first_half']):>13} {r['final_acc']:15.3f} "
          f"{r['dev1']:11.3f} -> {r['final_dev']:.3f} {r['dev_increases']:10d}")

fraction_sweep = {}
for op in (P.rfm_operations if P.fractions else ()):
    for f_ in P.fractions:
        if f_ == P.train_fraction:
            fraction_sweep[(op, f_)] = sweep[(op, seed)]
        else:
            fraction_sweep[(op, f_)] = summarise(curves(rfm_run(op, seed, fraction=f_)["progress"]))
if fraction_sweep:
    print("final test accuracy by training fraction:")
    for op in P.rfm_operations:
        print(f"  x {mod.SYMBOLS[op]} y: " + ", ".join(f"{f_}: {fraction_sweep[(op, f_)]['final_acc']:.3f}"
                                                      for f_ in P.fractions))

# %% mystnb={"figure": {"caption": "RFM's test accuracy (top) and circulant deviation of the re-indexed coupling block (bottom) by iteration, for every operation and seed of this run (one colour per operation).", "name": "fig-grokking-sweep"}}
if len(sweep) > 1:
    fig, axes = plt.subplots(2, 1, figsize=(9, 6.4), sharex=True)
    for (op, s), r in sweep.items():
        kw = dict(color=f"C{mod.OPERATIONS.index(op)}", alpha=0.7,
                  label=f"x {mod.SYMBOLS[op]} y" if s == seed else None)
        axes[0].plot(r["acc"], **kw)
        axes[1].plot(r["dev"], **kw)
    axes[0].set_ylabel("test accuracy")
    axes[1].set_ylabel("circulant deviation")
    axes[1].set_xlabel("RFM iteration")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    rfm.book.savefig(fig, "grokking_modular_arithmetic_sweep", output_dir=output_dir)
    plt.show()

# %% mystnb={"figure": {"caption": "RFM after the full schedule, by training fraction (one seed): final test accuracy (left) and the first iteration above 50% test accuracy (right; missing where it never gets there). Drawn in the full profile only.", "name": "fig-grokking-fraction"}}
if fraction_sweep:
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.6))
    for op in P.rfm_operations:
        kw = dict(marker="o", color=f"C{mod.OPERATIONS.index(op)}", label=f"x {mod.SYMBOLS[op]} y")
        axes[0].plot(P.fractions, [fraction_sweep[(op, f_)]["final_acc"] for f_ in P.fractions], **kw)
        axes[1].plot(P.fractions, [np.nan if fraction_sweep[(op, f_)]["first_half"] is None else
                                   fraction_sweep[(op, f_)]["first_half"] for f_ in P.fractions], **kw)
    axes[0].set_ylabel("final test accuracy")
    axes[1].set_ylabel("first iteration above 50%")
    for ax in axes:
        ax.set_xlabel("training fraction")
        ax.legend(fontsize=8)
    fig.tight_layout()
    rfm.book.savefig(fig, "grokking_modular_arithmetic_fraction", output_dir=output_dir)
    plt.show()

# %% mystnb={"figure": {"caption": "The network on every operation of this run: test accuracy (solid) and the circulant deviation of the NFM's coupling block in the order of the dual operation (dashed), by epoch.", "name": "fig-grokking-network-ops"}}
if len(net_runs) > 1:
    fig, ax = plt.subplots(figsize=(9, 3.6))
    for op, r_ in net_runs.items():
        col = f"C{mod.OPERATIONS.index(op)}"
        ax.plot(r_["ep"], r_["test_acc"], color=col, label=f"x {mod.SYMBOLS[op]} y: test accuracy")
        ax.plot(r_["nfm_ep"], r_["nfm_dev"], "--", color=col, label="circ. dev. of the NFM block")
    ax.set_xlabel("epoch")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    rfm.book.savefig(fig, "grokking_modular_arithmetic_network_ops", output_dir=output_dir)
    plt.show()

# %% [markdown]
# ## Checks
#
# Each claim is measured against a control from the same run: iteration 0 of RFM (the fixed Gaussian kernel,
# $M = I$) or its first update, the identity and wrong-order features for the random-circulant experiment, the
# network at initialisation, and networks with the trained first layer's spectrum in random directions. Over the
# RFM runs of this profile (three operations in the smoke profile; four operations and three seeds in the full
# one), the test accuracy must stay within 2 points of the fixed kernel's for iterations 0–7 and end at least 0.9
# above it,
# and the circulant deviation must fall at *every* iteration. Thresholds sit beyond the worst of seeds 0–9 of the
# calibration; the table's column "worst seed's room" is each margin. The margins are wide (at least 0.04 in
# accuracy, a factor 2 or more for the ratios) except where the rule is the claim's own boundary: no iteration may
# fail to lower the circulant deviation (room 0 by design), and the network's NFM–AGOP$^{1/2}$ correlation must
# beat the best of five spectrum-matched networks (threshold 0; the worst seed beats them by less than 0.01 over all
# entries and by about 0.02 over the off-diagonal entries, so these two rules are the tightest of the chapter). Train accuracy 1 (true by interpolation: ridge 0 solves the training equations), the training
# residual and "the DFT's off-diagonal energy equals the circulant deviation" (an identity, unit-tested) are sanity
# checks: they reproduce nothing.
#
# The checks need enough iterations and epochs for the parameters you choose. In single runs at seed 0 with
# other knobs (not part of the calibration), a training fraction of 0.4 leaves the 20 smoke iterations in the middle
# of the transition (final test accuracy about one half: the final-accuracy claim fails, every other check holds),
# and $p = 53$ leaves the network, at 200 epochs and 30% of the pairs, generalised only near the end (99% test
# accuracy at epoch 176) with its features not yet cleaned up: the NFM's circulant-deviation claim and both
# NFM–AGOP$^{1/2}$ claims fail. The trained network beats the spectrum-matched control only once weight decay has
# cleaned up its features, not at the moment it generalises. Seeds 11 and 23 passed every check.

# %%
all_runs = list(sweep.values())
net_ops = list(net_runs.values())
checks = rfm.book.Checks("grokking_modular_arithmetic", P, seed=seed, device=dev, output_dir=output_dir)
checks.sanity("rfm_train_acc_min", float(min(cv["train_acc"].min() for cv in C.values())), at_least=1.0,
              what="RFM's training accuracy at every iteration (ridge 0 interpolates: true by construction)")
checks.sanity("rfm_train_residual_max", float(max(cv["train_residual"].max() for cv in C.values())), at_most=1e-6,
              what="largest training error of RFM over all iterations (exact interpolation, float64)")
checks.sanity("dft_offdiag_minus_deviation", abs(off_fourier - c["circulant_deviation"][-1]), at_most=1e-8,
              what="the DFT's off-diagonal energy of B equals its circulant deviation (an identity)")
checks.claim("rfm_acc_gain_over_fixed_kernel", min(r["final_acc"] - r["acc0"] for r in all_runs), at_least=0.9,
             what="final test accuracy minus iteration 0's (the fixed Gaussian kernel), worst RFM run")
checks.claim("rfm_early_acc_gain", max(r["max_early_acc"] - r["acc0"] for r in all_runs), at_most=0.02,
             what="largest test accuracy over iterations 0-7 minus iteration 0's (train accuracy is 1 throughout), "
                  "worst RFM run")
checks.claim("rfm_test_mse_change_early", mse_change, at_most=0.05,
             what="x + y: largest relative change of the test MSE over iterations 0-7, against iteration 0")
checks.claim("rfm_dev_last_flat_over_first", c["circulant_deviation"][last_flat] / c["circulant_deviation"][1],
             at_most=0.3, what="x + y: circulant deviation at the last iteration with test accuracy <= 5%, "
                               "relative to the first update's")
checks.claim("rfm_dev_increases", sum(r["dev_increases"] for r in all_runs), at_most=0,
             what="iterations at which the circulant deviation did not fall, summed over the RFM runs")
checks.claim("rfm_dev_final_over_first", max(r["final_dev"] / r["dev1"] for r in all_runs), at_most=0.1,
             what="final circulant deviation relative to the first update's, worst RFM run")
checks.claim("rfm_align_progress_last_flat",
             (c["align"][last_flat] - c["align"][0]) / (1 - c["align"][0]), at_least=0.5,
             what="x + y: share of the way from M_0 = I (iteration 0) to the final M covered by the whole-matrix "
                  "AGOP alignment at the last iteration with test accuracy <= 5%")
checks.claim("circulant_gain_over_identity",
             min(r["random circulant"] - r["identity"] for r in ablation.values()), at_least=0.9,
             what="test accuracy of random circulant features minus M = I's, worst operation")
checks.claim("circulant_gain_over_wrong_order",
             min(r["random circulant"] - r["wrong order"] for r in ablation.values()), at_least=0.9,
             what="test accuracy of random circulant features minus the same block in the wrong order's")
checks.claim("net_acc_gain_over_init", min(r["test_acc"][-1] - r["test_acc"][0] for r in net_ops), at_least=0.9,
             what="network: final test accuracy minus its initialisation's, worst operation")
checks.claim("net_grokking_delay", min(float("nan") if r["gen_epoch"] is None or r["fit_epoch"] is None else
                                      r["gen_epoch"] / max(r["fit_epoch"], 1) for r in net_ops),
             at_least=3, what="network: first epoch at 99% test accuracy over the first epoch at 100% train "
                              "accuracy, worst operation")
checks.claim("net_nfm_dev_final_over_init", max(r["nfm_dev"][-1] / r["nfm_dev"][0] for r in net_ops), at_most=0.25,
             what="network: circulant deviation of the NFM block (dual order) at the end over initialisation's")
checks.claim("net_nfa_gain_over_matched", min(r["nfa"][-1] - r["matched"].max() for r in net_ops), at_least=0.0,
             what="network: corr(NFM, AGOP^1/2), all entries, minus the best of five spectrum-matched networks")
checks.claim("net_nfa_off_gain_over_matched", min(r["nfa_off"][-1] - r["matched_off"].max() for r in net_ops),
             at_least=0.0, what="network: the same over the off-diagonal entries")
if fraction_sweep:
    checks.record(fraction_final_acc={f"{op} {f_}": r["final_acc"] for (op, f_), r in fraction_sweep.items()},
                  fraction_first_half={f"{op} {f_}": r["first_half"] for (op, f_), r in fraction_sweep.items()})
chapter_seconds, chapter_cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
checks.record(
    test_acc_final=float(c["test_acc"][-1]), first_iteration_test_acc_above_half=first_half,
    correct_class_loss_change_first_iterations=correct_change, circulant_deviation_first_update=float(c["circulant_deviation"][1]),
    circulant_deviation_final=float(c["circulant_deviation"][-1]), alignment_whole_iter0=float(c["align"][0]),
    alignment_whole_last_flat=float(c["align"][last_flat]), alignment_block_last_flat=float(c["align_block"][last_flat]),
    sweep={f"{op} seed {s}": dict(first_half=r["first_half"], final_acc=r["final_acc"], max_early_acc=r["max_early_acc"],
                                  dev_increases=r["dev_increases"]) for (op, s), r in sweep.items()},
    random_circulant_test_acc={op: row["random circulant"] for op, row in ablation.items()},
    identity_test_acc={op: row["identity"] for op, row in ablation.items()},
    wrong_order_test_acc={op: row["wrong order"] for op, row in ablation.items()},
    network={op: dict(fit_epoch=r["fit_epoch"], start_epoch=r["start_epoch"], gen_epoch=r["gen_epoch"],
                      final_test_acc=r["test_acc"][-1], nfa_init=r["nfa"][0], nfa_final=r["nfa"][-1],
                      nfa_matched=r["matched"].tolist(), nfa_off_init=r["nfa_off"][0], nfa_off_final=r["nfa_off"][-1],
                      nfa_off_matched=r["matched_off"].tolist(), nfm_dev_init=r["nfm_dev"][0],
                      nfm_dev_final=r["nfm_dev"][-1], seconds=r["seconds"]) for op, r in net_runs.items()},
    network_correct_loss_moves_epoch=correct_moves, network_test_mse_peak_epoch=mse_peak,
    rfm_seconds={op: r["seconds"] for op, r in runs.items()},
    rfm_seconds_per_iteration_median=float(np.median(seconds_per_iteration)),
    chapter_seconds=chapter_seconds, chapter_cpu_seconds=chapter_cpu_seconds)
checks.report()
checks.finish();

# %% [markdown]
# ## What we reproduced
#
# *Reproduced (smoke profile, $p = 61$).* RFM with the Gaussian kernel, ridge 0 and $M = \mathrm{AGOP}^{1/2}$ (the
# settings of the authors' code) groks modular addition, multiplication and division: train accuracy 1 and zero
# training error at every iteration, test accuracy at most 5% for the first iterations and near 1 at the end, a
# test loss that stays flat at first. The circulant deviation falls at every iteration and the whole-matrix AGOP
# alignment rises, most of the way before the test accuracy moves. The learned block is circulant (after the
# operation's re-indexing) and diagonalised by the DFT. Random circulant features generalise on all four operations
# with no iteration, provided the block follows the operation's re-indexing. A quadratic network trained with AdamW
# and weight decay groks, and its NFM becomes block-circulant.
#
# *Different from the paper, and why.* The smoke profile stops RFM at 20 iterations instead of the code's 50 and
# trains the network at the code's default width 256 for 200 of the 1000 epochs; the full profile runs the 50
# iterations, the 1000 epochs and width 1,024. An earlier version of this chapter also ran $p = 97$ in the full
# profile; we dropped it, since $p = 97$ is not a setting we could find in the authors' code (whose default is 61)
# and its kernel solves cost about ten times more. The circulant deviation is reported as an energy fraction in
# $[0, 1]$, which is $p$ times the rolled-row form. The network's coupling block is circulant in the $x + y$ order,
# the kernel's in the $x - y$ order; we read the paper's "block-circulant" as circulant up to this re-indexing. The
# network's correct-class test loss moves before its accuracy, which the paper says it does not (above). The
# correlation of the network's NFM with its AGOP$^{1/2}$ is high, but a network with the same first-layer spectrum in
# random directions is nearly as high over all entries; the learned part shows in the off-diagonal entries.
#
# *Not verified here.* The exact iteration and epoch counts of the paper's figures, the paper's own text for the
# network's width and the behaviour of its test loss (read for us by the book's review; the paper's body could not be
# opened offline), its other kernels (Laplace, quadratic, NTK) and its AGOP-regularised network. The full-profile
# results, when committed, are in the last columns of the Checks table.
