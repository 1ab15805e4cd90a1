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
# This chapter reproduces, for $x + y \bmod 61$ (the paper's default task):
#
# 1. the transition over RFM iterations, with train and test accuracy, train and test loss, and two progress
#    measures, the *circulant deviation* of $M$ and its *AGOP alignment* with the final $M$;
# 2. $M$ before, during and after the transition, and its Fourier view: the discrete Fourier transform (DFT)
#    diagonalises the learned block;
# 3. the random-circulant control for all four operations ($+, -, \times, \div$), and what breaks it;
# 4. a one-hidden-layer network with quadratic activation trained with AdamW, whose neural feature matrix becomes
#    block-circulant once it generalises.
#
# The default *smoke* profile runs RFM for 20 iterations and a short network training on a 2-core CPU (a few
# minutes, most of it in the AGOP of the kernel machine). The *full* profile runs all four operations for
# $p \in \{61, 97\}$, three seeds, 50 iterations and the paper's network settings; it is meant for a GPU.

# %% tags=["remove-cell"]
# Colab set-up: install the package from the book's repository (the same URL as `repository.url` in _config.yml).
import sys
import subprocess

if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "agop-rfm @ git+https://github.com/rfm-book/rfm-book"], check=True)

# %% tags=["parameters"]
profile = "smoke"      # "smoke": p 61, addition, 20 RFM iterations (CPU, minutes); "full": the paper's grid (GPU)
seed = 0               # seed of the train/test split (and of the random circulant features, the network)
device = None          # None: CUDA when present, else CPU
output_dir = None      # set by scripts/rerun.py: figures and measured values are written there
p = None               # the modulus of the walk-through (a prime; None: the profile's value)
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
    smoke=dict(p=61, train_fraction=0.5, iters=20, bandwidth=2.5,
               sweep_ps=(61,), sweep_operations=("add",), sweep_seeds=(seed,),
               net_epochs=200, net_train_fraction=0.3, net_batch_size=32, net_lr=1e-3, net_weight_decay=1.0,
               net_width=256, net_operations=("add",)),
    full=dict(p=61, train_fraction=0.5, iters=50, bandwidth=2.5,
              sweep_ps=(61, 97), sweep_operations=mod.OPERATIONS, sweep_seeds=(seed, seed + 1, seed + 2),
              net_epochs=1000, net_train_fraction=0.3, net_batch_size=32, net_lr=1e-3, net_weight_decay=1.0,
              net_width=256, net_operations=mod.OPERATIONS),
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
# target is the one-hot code of the label in $\mathbb R^p$. Half of the $p^2 = 3721$ pairs are for training, the
# other half for testing: a model must infer the sums it has not seen. Nothing about the *order* of the digits is
# in the inputs; any permutation of the one-hot coordinates gives the same problem.

# %%
data = mod.modular_arithmetic(P.p, "add", P.train_fraction, generator=seed)
print(f"{len(data.X_train)} training and {len(data.X_test)} test pairs; inputs {tuple(data.X_train.shape[1:])}, "
      f"targets {tuple(data.Y_train.shape[1:])}")
for (x, y), z in zip(data.pairs_train[:3].tolist(), data.y_train[:3].tolist()):
    print(f"  {x} + {y} = {z} (mod {P.p})")

# %% [markdown]
# ## RFM on $x + y \bmod p$
#
# We use the package's estimator with the paper's settings: the Gaussian kernel
# $k_M(u, v) = \exp(-\|u - v\|_M^2 / (2L^2))$ with $L = 2.5$, ridge $0$ (exact interpolation, in float64), the AGOP
# computed at all training points with centred gradients, and the update $M \leftarrow \mathrm{AGOP}^{1/2}$ with no
# normalisation. The classifier regresses the one-hot targets by least squares and predicts the arg-max. The iteration
# starts from $M_0 = I$.
#
# After every solve, a callback (`rfm.data.modular.GrokkingProgress`) evaluates the current predictor on the
# held-out pairs and on the training inputs, and computes the progress measures of the $M$ that was used. The test
# set is never given to `fit`: it selects nothing, it is only recorded.

# %%
def fit_rfm(d, iters, M_init=None, callback=None):
    return rfm.RFMClassifier(kernel="gaussian", bandwidth=P.bandwidth, reg=0.0, agop_power=0.5, centre=True,
                             normalize=None, dtype="float64", iters=iters, max_agop_points=None, M_init=M_init,
                             device=dev, random_state=seed, callback=callback).fit(d.X_train, d.y_train)


t0 = time.perf_counter()
progress = mod.GrokkingProgress(data)
model = fit_rfm(data, P.iters, callback=progress)
rfm_seconds = time.perf_counter() - t0
R = progress.records
alignment = progress.alignment()
seconds_per_iteration = [h["time_s"] for h in model.history_]
print(f"RFM: {P.iters} iterations in {rfm_seconds:.0f} s "
      f"({np.median(seconds_per_iteration):.1f} s per solve + AGOP, median; the callback's evaluations included)")
print("solvers used:", sorted({r["solver"] for r in R}))
print(" it  train acc  test acc  train MSE   test MSE   circ. dev.  align.")
for r, a in zip(R, alignment):
    print(f"{r['iteration']:3d}  {r['train_acc']:9.3f}  {r['test_acc']:8.3f}  {r['train_mse_measured']:9.1e}"
          f"  {r['test_mse']:9.5f}  {r['circulant_deviation']:10.3f}  {a:6.3f}")

# %% [markdown]
# The training accuracy is 1 and the training error is at the level of float64 round-off at every iteration; the
# test accuracy is exactly 0 for the first ten or so iterations, then climbs to 1 within about ten more.
#
# ## The transition is invisible in the losses and visible in the features
#
# The two progress measures read the block $B = M_{[:p,\,p:]}$ that couples the first digit with the second (the
# diagonal blocks only weigh each digit by itself):
#
# * the **circulant deviation** $D(B) = \|B - \mathrm{circ}(B)\|_F^2 / \|B\|_F^2$, where $\mathrm{circ}(B)$ averages
#   $B$ along its wrapped diagonals $i - j \equiv \text{const} \pmod p$: the fraction of the block's energy that is
#   *not* circulant, 0 for a circulant block and about $1 - 1/p$ for a random one. (It is $p$ times the
#   "variance of the rolled rows" form of the measure; the paper's exact normalisation could not be checked
#   offline, so we use the one in $[0, 1]$.)
# * the **AGOP alignment** $\langle B_t, B_T\rangle_F / (\|B_t\|_F \|B_T\|_F)$, the cosine between the block at
#   iteration $t$ and the final one.
#
# Both are undefined at iteration 0, whose $M_0 = I$ has a zero block.

# %%
it = np.array([r["iteration"] for r in R])
test_acc = np.array(progress.column("test_acc"))
train_acc = np.array(progress.column("train_acc"))
test_mse = np.array(progress.column("test_mse"))
train_mse = np.array(progress.column("train_mse_measured"))
circ_dev = np.array(progress.column("circulant_deviation"))
align = np.array(alignment)
rising = it[test_acc > 0.05]
first_rise = int(rising[0]) if len(rising) else None                  # first iteration above 5% test accuracy
first_half = int(it[test_acc > 0.5][0]) if (test_acc > 0.5).any() else None

fig, axes = plt.subplots(1, 3, figsize=(14, 3.6), sharex=True)
axes[0].plot(it, train_acc, "o-", ms=3, label="train")
axes[0].plot(it, test_acc, "o-", ms=3, label="test")
axes[0].set_ylabel("accuracy")
axes[1].plot(it, test_mse, "o-", ms=3, color="C1", label="test MSE")
axes[1].plot(it, train_mse, "o-", ms=3, color="C0", label=f"train MSE (measured, at most {train_mse.max():.0e})")
axes[1].set_ylim(0, 1.1 * test_mse.max())
axes[1].set_ylabel("mean squared error")
axes[2].plot(it, circ_dev, "o-", ms=3, color="C2", label="circulant deviation")
axes[2].plot(it, align, "o-", ms=3, color="C3", label="alignment with final M")
axes[2].set_ylim(-0.05, 1.05)
for ax in axes:
    if first_rise is not None:
        ax.axvspan(first_rise - 0.5, it[-1] + 0.5 if first_half is None else first_half + 0.5, color="0.9")
    ax.set_xlabel("RFM iteration")
    ax.legend(fontsize=8)
fig.suptitle(f"RFM on x + y mod {P.p}: the features change long before the accuracy "
             "(grey: from 5% to 50% test accuracy)")
fig.tight_layout()
rfm.book.savefig(fig, "grokking_modular_arithmetic_transition", output_dir=output_dir)
plt.show()

# %% [markdown]
# Left: the training accuracy is 1 from the first solve, the test accuracy stays at 0 and then jumps. Middle: the
# training error is zero to round-off, and the test error stays flat over the first iterations while $M$ is already
# changing; it starts falling only a couple of iterations before the accuracy moves, and slowly. Right: the circulant deviation falls
# steadily from the first update, and most of its fall happens while the test accuracy is still exactly 0; the
# alignment with the final $M$ rises in the same way. The measures announce the transition; the losses do not.
#
# ## What $M$ looks like before, during and after
#
# Below, $M$ minus its diagonal (which dominates it) at the first update, at the first iteration where the test
# accuracy exceeds 1/2, and at the end. The two off-diagonal blocks fill up with stripes parallel to the main
# diagonal: $B_{ij}$ depends on $i - j \bmod p$ only, i.e. $B$ is **circulant**. For addition that is the natural
# order. Why the *difference*? The kernel compares two pairs through
# $\|u - u'\|_M^2$, whose cross terms are $B_{x y'} + B_{x' y}$; two pairs with the same sum, $x + y = x' + y'$, have
# $x - y' = x' - y$, so a block that is a function of the difference gives them equal cross terms. For the other
# operations the block is circulant after re-indexing the digits (`rfm.data.modular.block_orders`): $y \to -y$
# for $x - y$, the discrete logarithm $x = g^k$ for a primitive root $g$ (dropping the digit 0) for $x \times y$,
# both for $x \div y$.

# %%
def without_diagonal(M):
    M = torch.as_tensor(M).clone()
    M.fill_diagonal_(0)
    return M.numpy()


middle = first_half if first_half is not None else len(R) // 2
shown = [1, middle, len(R) - 1]
fig, axes = plt.subplots(1, 3, figsize=(14, 4.6))
for ax, t in zip(axes, shown):
    Mt = without_diagonal(R[t]["M"])
    lim = np.abs(Mt).max()
    ax.imshow(Mt, cmap="RdBu_r", vmin=-lim, vmax=lim)
    ax.axhline(P.p - 0.5, color="k", lw=0.5)
    ax.axvline(P.p - 0.5, color="k", lw=0.5)
    ax.set_title(f"M at iteration {t} (test acc {test_acc[t]:.2f}, circ. dev. {circ_dev[t]:.2f})", fontsize=9)
    ax.set_xticks([0, P.p, 2 * P.p - 1])
    ax.set_yticks([0, P.p, 2 * P.p - 1])
fig.suptitle("M minus its diagonal: rows/columns 0..p-1 are the first digit, p..2p-1 the second")
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
    c = (D * centred_identity).sum() / centred_identity.square().sum()
    return float((D - c * centred_identity).norm() / D.norm())


for t in shown:
    print(f"iteration {t:2d}: diagonal block {distance_to_centred_identity(R[t]['M']):.4f} away from a multiple of "
          f"I - 11^T/p (relative Frobenius distance)")
#
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
print(f"energy of F B F^H off its diagonal: {off_fourier:.4f} (circulant deviation of B: {circ_dev[-1]:.4f})")
print("largest |c_k| at frequencies k =", top.tolist(), "(k and p - k always come together: B is real)")

B_first = mod.off_diagonal_block(R[1]["M"])
fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
axes[0].imshow(mod.fourier_diagonalize(B_first).abs().numpy(), cmap="magma")
axes[0].set_title("|F B F^H| after the first update", fontsize=9)
axes[1].imshow(FBF.abs().numpy(), cmap="magma")
axes[1].set_title(f"|F B F^H| at iteration {len(R) - 1}: diagonal", fontsize=9)
for t, style in ((1, ":"), (middle, "--"), (len(R) - 1, "-")):
    s = mod.circulant_spectrum(mod.off_diagonal_block(R[t]["M"])).abs().numpy()
    axes[2].plot(np.arange(P.p), s / s.max(), style, marker="o", ms=2, label=f"iteration {t}")
axes[2].set_xlabel("frequency k")
axes[2].set_ylabel("|c_k| / max")
axes[2].set_title("spectrum of the circulant part of B", fontsize=9)
axes[2].legend(fontsize=8)
fig.tight_layout()
rfm.book.savefig(fig, "grokking_modular_arithmetic_fourier", output_dir=output_dir)
plt.show()

# %% [markdown]
# Left and middle: in the Fourier basis the final block is diagonal (the off-diagonal energy printed above is its
# circulant deviation), while after the first update the energy is spread. Right: the eigenvalues $|\hat c_k|$ of the
# circulant part, normalised; $\hat c_0 = 0$ because the block has zero row sums, and the spectrum is symmetric,
# $|\hat c_k| = |\hat c_{p-k}|$, since $B$ is real. The learned block does not single out a few frequencies: its
# weight spreads over all non-zero frequencies, with a profile that the printed top frequencies summarise. A kernel
# machine does not need sparsity in frequency: any block that is circulant in the right order, with non-zero
# $\hat c_k$, makes the kernel compare pairs through their sums, which is what the next experiment tests.
#
# ## Random circulant features need no learning
#
# If the block-circulant structure is what matters, an $M$ with a *random* circulant block should generalise without
# a single RFM iteration. The paper's construction (`train_random_circulant_kernel.py`,
# `rfm.data.modular.random_circulant_features`) is
#
# $$M = \Big(\begin{bmatrix} I - \tfrac1p \mathbf 1\mathbf 1^\top & C \\ C^\top & I - \tfrac1p \mathbf 1 \mathbf 1^\top
# \end{bmatrix}\Big)^{1/2},$$
#
# with $C$ circulant (in the order of the operation) built from $c \sim U[0, 1]^p$ minus its mean. The matrix inside
# is indefinite (its eigenvalues are $1 \pm |\hat c_k|$); the code takes the real part of SciPy's principal square
# root, which for a symmetric matrix is the square root of its positive part. We solve once with this $M$, with
# $M = I$, and with a random circulant block in the *wrong* order (the re-indexing of the dual operation, e.g. a
# function of $x + y$ instead of $x - y$ for addition).

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

# %% [markdown]
# With $M = I$ the kernel machine knows nothing about the digits' arithmetic and gets every unseen pair wrong (for
# $\times$ and $\div$ it gets the pairs with a zero digit right, whose answer is always 0: a test accuracy of about
# $2/p$ and $1/p$). A random block that is circulant in the operation's order gives (almost) perfect test accuracy
# at once, for all four operations, while the same random block in the wrong order is as useless as the identity.
# The re-indexing is the essential detail. (In our runs the centred diagonal blocks and the square root matter much
# less: replacing them by $I$, or dropping the square root, still generalises for $+$ and $-$; we do not assert on
# this.)
#
# ## A neural network learns block-circulant features too
#
# The paper's network (`train_net.py`) has one hidden layer of width 256 with quadratic activation and no biases,
# $f(u) = W_2 (W_1 u)^{2}$, trained on the MSE with AdamW (learning rate $10^{-3}$, betas $(0.9, 0.98)$, weight decay
# 1, batch 32, 1000 epochs, 30% of the pairs). Its *neural feature matrix* $W_1^\top W_1$ plays the role of $M$.
# The smoke profile uses these settings for 200 of the 1000 epochs, enough to generalise and to clean up the
# features; the full profile runs all 1000, for each operation.
#
# In the package the network is an `rfm.nets.MLP` (`mod.quadratic_net`), trained by the package's one training
# loop `rfm.nets.train` with a `torch.optim.AdamW`; `mod.NetworkProgress` records the accuracies, the MSEs and the
# NFM along the way.
#
# One difference is worth knowing. The network combines the digits *inside* one input: with $W_1 u = a_x + b_y$,
# the square contains the product $a_x \odot b_y$, and the Fourier multiplication algorithm needs products such as
# $\cos(\omega x)\cos(\omega y)$ that produce $\cos(\omega(x + y))$. So its block $B_{xy} = \langle a_x, b_y\rangle$
# ends up a function of $x + y$ itself (a Hankel matrix), not of $x - y$ as for the kernel: it is circulant after the
# re-indexing of the *dual* operation ($y \to -y$ for addition). We measure it that way.

# %%
net_runs = {}
for op in P.net_operations:
    d_net = mod.modular_arithmetic(P.p, op, P.net_train_fraction, generator=seed)
    t0 = time.perf_counter()
    g = rfm.make_generator(seed)  # one stream: the initial weights, then the mini-batch order
    # f(u) = W2 (W1 u)^2, no biases, U[-1/sqrt(fan_in), 1/sqrt(fan_in)]: MLP(2p, [width], p, "quadratic", "uniform")
    net = mod.quadratic_net(P.p, P.net_width, generator=g, device=dev)
    progress_net = mod.NetworkProgress(d_net, nfm_every=max(1, P.net_epochs // 100))
    opt = torch.optim.AdamW(net.parameters(), lr=P.net_lr, betas=(0.9, 0.98), weight_decay=P.net_weight_decay)
    # the matrices are tiny: on a busy 2-core CPU one thread was several times faster than two
    nets.train(net, d_net.X_train, d_net.Y_train, loss="mse", optimizer=opt, epochs=P.net_epochs,
               batch_size=P.net_batch_size, generator=g, record_initial=True, callback=progress_net,
               threads=1 if dev.type == "cpu" else None)
    hist = progress_net.records
    net_runs[op] = dict(hist=hist, seconds=time.perf_counter() - t0)
    print(f"x {mod.SYMBOLS[op]} y: {P.net_epochs} epochs in {net_runs[op]['seconds']:.0f} s, final train acc "
          f"{hist[-1]['train_acc']:.3f}, test acc {hist[-1]['test_acc']:.3f}")

hist = net_runs["add"]["hist"]
ep = np.array([h["epoch"] for h in hist])
nfm_ep = np.array([h["epoch"] for h in hist if "nfm" in h])
nfm_dev = np.array([mod.block_circulant_deviation(h["nfm"], mod.dual_operation("add")) for h in hist if "nfm" in h])
nfm_dev_kernel_order = np.array([mod.block_circulant_deviation(h["nfm"], "add") for h in hist if "nfm" in h])
net_test_acc = np.array([h["test_acc"] for h in hist])
generalised = int(ep[net_test_acc >= 0.99][0]) if (net_test_acc >= 0.99).any() else None

fig, axes = plt.subplots(1, 2, figsize=(12, 3.6))
axes[0].plot(ep, [h["train_acc"] for h in hist], label="train accuracy")
axes[0].plot(ep, net_test_acc, label="test accuracy")
axes[0].plot(nfm_ep, nfm_dev, "o-", ms=2, label="circ. dev. of the NFM block (x + y order)")
axes[0].plot(nfm_ep, nfm_dev_kernel_order, ":", label="same, kernel's (x - y) order")
axes[0].set_xlabel("epoch")
axes[0].legend(fontsize=8)
axes[0].set_title("quadratic network on x + y", fontsize=9)
axes[1].semilogy(ep, [h["train_mse"] for h in hist], label="train MSE")
axes[1].semilogy(ep, [h["test_mse"] for h in hist], label="test MSE")
axes[1].set_xlabel("epoch")
axes[1].legend(fontsize=8)
for ax in axes:
    if generalised is not None:
        ax.axvline(generalised, color="0.6", lw=0.8)
fig.tight_layout()
rfm.book.savefig(fig, "grokking_modular_arithmetic_network", output_dir=output_dir)
plt.show()

# %% [markdown]
# The network fits the training pairs within about ten epochs; the test accuracy stays near 0 for tens of epochs
# more and then rises to 1 (the grey line marks the first epoch at 99%): the network groks. Unlike RFM's, its test
# loss does move before the accuracy, slowly. The circulant deviation of its feature block in the $x + y$ order falls through
# the transition and keeps falling after it, as weight decay removes what is not needed; in the kernel's $x - y$ order
# the same block, after a dip, looks less and less circulant. The images show the NFM at initialisation, when the network first
# generalises, and at the end.

# %%
snap = {h["epoch"]: h["nfm"] for h in hist if "nfm" in h}
at_generalisation = min(snap, key=lambda e: abs(e - generalised)) if generalised is not None else nfm_ep[len(nfm_ep) // 2]
fig, axes = plt.subplots(1, 3, figsize=(14, 4.6))
for ax, e in zip(axes, (0, at_generalisation, int(nfm_ep[-1]))):
    N = without_diagonal(snap[e])
    lim = np.abs(N).max()
    ax.imshow(N, cmap="RdBu_r", vmin=-lim, vmax=lim)
    ax.axhline(P.p - 0.5, color="k", lw=0.5)
    ax.axvline(P.p - 0.5, color="k", lw=0.5)
    d_e = mod.block_circulant_deviation(snap[e], mod.dual_operation("add"))
    ax.set_title(f"NFM W1^T W1 at epoch {e} (circ. dev. {d_e:.2f})", fontsize=9)
fig.tight_layout()
rfm.book.savefig(fig, "grokking_modular_arithmetic_nfm", output_dir=output_dir)
plt.show()

# %% [markdown]
# At initialisation the NFM is noise. When the network generalises, stripes appear; at the end the off-diagonal
# blocks are anti-diagonal stripes (constant along $x + y = $ const), and the diagonal blocks carry a weaker lattice
# of both orders.
# Both models solve the task with block-circulant features; they differ in which of the two circulant orders appears
# in the block that couples the digits, for the reason given above.
#
# ## All four operations
#
# The full profile repeats the RFM run for $+, -, \times, \div$, for $p = 61$ and $97$ and three seeds, and records
# when the test accuracy passes 1/2 and where it ends. The smoke profile only lists the walk-through run.

# %%
def summarise(prog):
    acc = np.array(prog.column("test_acc"))
    dev_ = np.array(prog.column("circulant_deviation"))
    return dict(first_half=int(np.argmax(acc > 0.5)) if (acc > 0.5).any() else None,
                final_acc=float(acc[-1]), max_early_acc=float(acc[:6].max()),
                final_dev=float(dev_[-1]), dev1=float(dev_[1]), acc=acc)


sweep = {(P.p, "add", seed): summarise(progress)}
for p_ in P.sweep_ps:
    for op in P.sweep_operations:
        for s in P.sweep_seeds:
            if (p_, op, s) in sweep:
                continue
            d_s = mod.modular_arithmetic(p_, op, P.train_fraction, generator=s)
            prog = mod.GrokkingProgress(d_s)
            fit_rfm(d_s, P.iters, callback=prog)
            sweep[(p_, op, s)] = summarise(prog)
print(f"{'p':>4} {'op':>6} {'seed':>5} {'acc > 1/2 at':>13} {'final test acc':>15} {'circ. dev. it 1 -> end':>24}")
for (p_, op, s), r in sorted(sweep.items()):
    print(f"{p_:4d} {'x' + mod.SYMBOLS[op] + 'y':>6} {s:5d} {str(r['first_half']):>13} {r['final_acc']:15.3f} "
          f"{r['dev1']:11.3f} -> {r['final_dev']:.3f}")
if len(sweep) > 1:
    fig, axes = plt.subplots(1, len(P.sweep_ps), figsize=(6 * len(P.sweep_ps), 3.5), squeeze=False)
    for ax, p_ in zip(axes[0], P.sweep_ps):
        for (pp, op, s), r in sorted(sweep.items()):
            if pp == p_:
                ax.plot(r["acc"], color=f"C{mod.OPERATIONS.index(op)}", alpha=0.7,
                        label=f"x{mod.SYMBOLS[op]}y" if s == P.sweep_seeds[0] else None)
        ax.set_title(f"p = {p_}")
        ax.set_xlabel("RFM iteration")
        ax.set_ylabel("test accuracy")
        ax.legend(fontsize=8)
    fig.tight_layout()
    rfm.book.savefig(fig, "grokking_modular_arithmetic_sweep", output_dir=output_dir)
    plt.show()

# %% [markdown]
# ## Checks
#
# Margins were calibrated on the smoke profile (p = 61, x + y, seed 0, 2-core CPU): test accuracy 0 for iterations
# 0 to 9, above 0.99 from iteration 19; test MSE within 1% of its initial value up to iteration 7; circulant
# deviation 0.77 after the first update, 0.09 at the last iteration with test accuracy below 5%, 0.02 at the end.
# Network (x + y, the paper's settings): test accuracy 0.997 at epoch 100, NFM circulant deviation 0.98 at
# initialisation and 0.10 at epoch 200.

# %%
early = slice(0, 8)
assert all(r["train_acc"] == 1.0 for r in R), "RFM must interpolate: train accuracy 1 at every iteration"
assert max(progress.column("train_residual")) < 1e-6, "ridge 0 should fit the one-hot targets to round-off"
assert test_acc[early].max() <= 0.05, f"test accuracy over iterations 0-7 is {test_acc[early].max():.3f} > 0.05"
assert test_acc[-1] >= 0.99, f"final test accuracy {test_acc[-1]:.3f} < 0.99"
mse_change = float(np.abs(test_mse[early] - test_mse[0]).max() / test_mse[0])
assert mse_change < 0.05, f"test MSE moved by {mse_change:.1%} over iterations 0-7 (the loss should be flat)"
assert np.all(np.diff(circ_dev[1:]) < 0), "circulant deviation should decrease at every iteration"
last_flat = int(it[test_acc <= 0.05][-1])
assert circ_dev[last_flat] <= 0.25 * circ_dev[1], (
    f"circulant deviation {circ_dev[last_flat]:.3f} at iteration {last_flat} (the last with test acc <= 0.05) "
    f"should be below a quarter of its value after the first update ({circ_dev[1]:.3f})")
assert align[last_flat] >= 0.5 and np.all(np.diff(align[1:]) > 0), "alignment should rise before the accuracy"
assert abs(off_fourier - circ_dev[-1]) < 1e-8, "the DFT's off-diagonal energy must equal the circulant deviation"
for op, row in ablation.items():
    assert row["random circulant"] >= 0.95, f"random circulant M on x{mod.SYMBOLS[op]}y: {row['random circulant']}"
    assert row["identity"] <= 0.05 and row["wrong order"] <= 0.05, f"identity / wrong order on {op}: {row}"
for s in sweep.values():
    assert s["max_early_acc"] <= 0.05 and s["final_acc"] >= 0.99 and s["final_dev"] < 0.25 * s["dev1"], s
for op, run in net_runs.items():
    h = run["hist"]
    assert h[-1]["train_acc"] == 1.0 and h[-1]["test_acc"] >= 0.99, f"network on {op}: {h[-1]}"
    devs = [mod.block_circulant_deviation(x["nfm"], mod.dual_operation(op)) for x in h if "nfm" in x]
    assert devs[-1] <= 0.25 * devs[0], f"network NFM on {op}: circulant deviation {devs[0]:.3f} -> {devs[-1]:.3f}"

chapter_seconds, chapter_cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
rfm.book.summary("grokking_modular_arithmetic", P, measured={
    "test_acc_first_iterations_max": float(test_acc[early].max()), "test_acc_final": float(test_acc[-1]),
    "first_iteration_test_acc_above_half": first_half, "train_residual_max": max(progress.column("train_residual")),
    "test_mse_change_first_iterations": mse_change, "circulant_deviation_first_update": float(circ_dev[1]),
    "circulant_deviation_last_flat": float(circ_dev[last_flat]), "circulant_deviation_final": float(circ_dev[-1]),
    "alignment_last_flat": float(align[last_flat]),
    "random_circulant_test_acc": {op: row["random circulant"] for op, row in ablation.items()},
    "identity_test_acc": {op: row["identity"] for op, row in ablation.items()},
    "network_test_acc_final": float(hist[-1]["test_acc"]), "network_first_epoch_test_acc_099": generalised,
    "network_nfm_circulant_deviation_init": float(nfm_dev[0]), "network_nfm_circulant_deviation_final": float(nfm_dev[-1]),
    "rfm_seconds": rfm_seconds, "rfm_seconds_per_iteration_median": float(np.median(seconds_per_iteration)),
    "network_seconds": net_runs["add"]["seconds"], "chapter_seconds": chapter_seconds,
    "chapter_cpu_seconds": chapter_cpu_seconds,
}, device=dev, output_dir=output_dir);

# %% [markdown]
# ## What we reproduced
#
# *Reproduced (smoke profile, $p = 61$, $x + y$).* RFM with the paper's Gaussian kernel, ridge 0 and
# $M = \mathrm{AGOP}^{1/2}$ groks modular addition: train accuracy 1 and zero training error at every iteration, test
# accuracy 0 for the first ten iterations and 1 a dozen iterations later, a test loss that stays flat at first. The
# circulant deviation and the AGOP alignment change smoothly from the first update and are most of the way to their
# final values before the test accuracy moves. The learned block is circulant and diagonalised by the DFT. Random
# circulant features generalise on all four operations with no iteration, provided the block follows the
# operation's re-indexing. A quadratic network trained with AdamW and weight decay groks (training accuracy 1 after
# about ten epochs, test accuracy 0.99 only after about a hundred) and its NFM becomes block-circulant.
#
# *Different from the paper, and why.* The smoke profile stops RFM at 20 iterations instead of 50 (the AGOP of a
# 1860-point, 61-output kernel machine takes seconds per iteration on a CPU) and trains the network for 200 of the
# paper's 1000 epochs. On the 2-core CPU where this text was written, shared with other jobs (load average 7 to 10),
# the smoke run took 3.5 to 8 minutes of wall time but only 90 to 100 s of CPU time; the 20 RFM iterations took 160
# to 385 s of it (8 to 18 s each, median), the network about 30 s. The summary line above prints the times of the
# run you are reading. The circulant deviation is normalised to $[0, 1]$ (our choice, stated above). The network's coupling
# block is circulant in the $x + y$ order, the kernel's in the $x - y$ order; we read the paper's "block-circulant"
# as circulant up to this re-indexing.
#
# *Not verified here.* RFM iterations on the other operations, $p = 97$, several seeds, and the paper's full network
# schedule are in the full profile, which needs a GPU and was not run for this text. (A separate CPU run of RFM on
# $x \times y \bmod 61$ behaved like addition: test accuracy $2/p$ until iteration 9, above 0.99 from iteration 18,
# and a circulant deviation in discrete-log order falling from 0.78 to 0.014 while it stayed near 0.99 in the dual
# order.) The exact iteration counts of the paper's figures, the paper's normalisation of the progress measures, and
# its other kernels (Laplace, quadratic, NTK) and the AGOP-regularised network were not checked.
