"""Fit time and test error of ``rfm.RFMRegressor`` against xRFM's leaf RFM (xrfm 0.4.5), same data, same run.

Task: x ~ N(0, I_d), y = x1 * x2 (``rfm.data.low_rank_polynomial``), with held-out validation and test sets.
Both models: l2 Laplace kernel exp(-|x - z|_M / L), L = 10, ridge 1e-3, 5 feature updates (6 solves), full M,
float32, M = AGOP / max entry (AGOP power 1, no centring), AGOP at all training points (n <= 20,000), and the
iterate with the lowest validation MSE kept (xRFM: ``return_best_params=True``, ``early_stop_rfm=False``; ours:
``X_val, y_val``). xRFM is run with its default solver (``solver="solve"``, an LU solve) and, for a like-for-like
solve, with ``solver="cholesky"`` (ours always tries Cholesky first).

Every timed fit runs in a fresh subprocess (its peak resident memory, ``ru_maxrss``, or on CUDA the allocator's
peak, is its own): a warm-up fit on a 500-point slice, then one timed fit of the full problem, then the test MSE and
R^2. The models are interleaved, ``--repeats`` rounds of (rfm, xrfm, xrfm-chol) in rotating order, so that a change
in machine load hits all of them alike; the best and the median wall time are reported, and the process CPU time.
``--profile`` adds a per-phase breakdown of one more fit (in the last round) of each model (kernel build, solve,
AGOP, M update, validation prediction), by wrapping the functions each model calls.

    python benchmarks/bench_xrfm.py                 # the full table: n = 2000, 4000, 8000; d = 100
    python benchmarks/bench_xrfm.py --quick         # a smoke run on tiny sizes (written to *.tmp files)
    python benchmarks/bench_xrfm.py --profile       # also the phase breakdown
    python benchmarks/bench_xrfm.py --device cuda   # GPU: n = 8k, 32k, 1e5, 3e5, 1e6, ours against xRFM leaf and tree

A model that fails (an exception, a crash, or its ``--worker-timeout``) is a row of the table with its status and
error, and the run goes on: at n = 32,000 in float32 on a GPU xRFM's leaf solve fails ("not positive-definite",
"singular"; ../shared/measurements/h200-2026-11-27), and that is a result.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

MODELS = {
    "rfm": "rfm (solver=auto)",
    "rfm-chol": "rfm (cholesky)",
    "rfm-cg": "rfm (cg)",
    "rfm-cg-fused": "rfm (cg, fused on the fly)",
    "rfm-ep3": "rfm (eigenpro3)",
    "xrfm": "xrfm leaf (solve)",
    "xrfm-chol": "xrfm leaf (cholesky)",
    "xrfm-tree": "xrfm tree (xRFM)",
}
EXACT = ("rfm-chol", "xrfm", "xrfm-chol")  # factor an n x n matrix: skipped above --exact-max
DEFAULT_MODELS = ["rfm", "rfm-chol", "rfm-cg", "xrfm", "xrfm-chol"]
CUDA_MODELS = ["rfm", "rfm-chol", "rfm-ep3", "xrfm", "xrfm-chol", "xrfm-tree"]
CUDA_SIZES = [8000, 32000, 100_000, 300_000, 1_000_000]
PHASES = ("kernel build", "solve", "AGOP", "M update", "val predict", "row ids", "other")


# ---------------------------------------------------------------------------------------------------------------
# One (model, n) measurement, in a worker process


def make_data(n, n_val, n_test, d, seed, device):
    import torch

    from rfm.data import low_rank_polynomial

    X, y = low_rank_polynomial(n + n_val + n_test, d, "x1x2", generator=seed, dtype="float64")
    X, y = X.to(device=device, dtype=torch.float32), y.to(device=device, dtype=torch.float32)
    cut = (slice(0, n), slice(n, n + n_val), slice(n + n_val, None))
    return [(X[s], y[s]) for s in cut]


def make_fit(model, cfg, device):
    """A function fit(X, y, X_val, y_val) -> fitted estimator, for one model with the shared settings."""
    if model.startswith("rfm"):
        from rfm import RFMRegressor

        if model == "rfm-cg-fused":
            from rfm.core.cg import CGSolver
            solver = CGSolver(store=False, fused=True)
        elif model == "rfm-ep3":
            from rfm.core.eigenpro import EigenPro3Solver
            solver = EigenPro3Solver(epochs=cfg.get("ep3_epochs", 3))
        else:
            solver = {"rfm": "auto", "rfm-chol": "cholesky", "rfm-cg": "cg"}[model]

        def fit(X, y, Xv, yv):
            return RFMRegressor(kernel="laplace", bandwidth=cfg["bandwidth"], exponent=1.0, reg=cfg["reg"],
                                iters=cfg["iters"], agop_power=1.0, normalize="max", center=False, diag=False,
                                max_agop_points=cfg["agop_points"], solver=solver, device=device, dtype="float32",
                                random_state=0).fit(X, y, Xv, yv)
        return fit

    if model == "xrfm-tree":
        from xrfm import xRFM

        def fit(X, y, Xv, yv):
            params = {"model": {"kernel": "laplace", "bandwidth": cfg["bandwidth"], "exponent": 1.0, "diag": False,
                                "bandwidth_mode": "constant"},
                      "fit": {"reg": cfg["reg"], "iters": cfg["iters"], "return_best_params": True,
                              "early_stop_rfm": False, "total_points_to_sample": cfg["agop_points"]}}
            m = xRFM(rfm_params=params, max_leaf_size=cfg["leaf_size"], device=device, tuning_metric="mse",
                     verbose=False, random_state=0)
            return m.fit(X, y[:, None], Xv, yv[:, None])
        return fit

    from xrfm.rfm_src.recursive_feature_machine import RFM

    solver = "cholesky" if model == "xrfm-chol" else "solve"

    def fit(X, y, Xv, yv):
        m = RFM(kernel="laplace", iters=cfg["iters"], bandwidth=cfg["bandwidth"], exponent=1.0, device=device,
                diag=False, verbose=False, tuning_metric="mse", solver=solver)
        # reg must be passed to fit (0.4.5 never sets self.reg in __init__); early stopping off, so that the
        # iterate is chosen by validation MSE over all iterations, as ours does.
        m.fit((X, y[:, None]), (Xv, yv[:, None]), reg=cfg["reg"], iters=cfg["iters"],
              total_points_to_sample=cfg["agop_points"], return_best_params=True, early_stop_rfm=False,
              verbose=False)
        return m
    return fit


def predict(model, est, X):
    import torch
    out = torch.as_tensor(est.predict(X))
    return out if model.startswith("rfm") else out.reshape(-1)


def best_iter(model, est, iters):
    if model.startswith("rfm"):
        return est.best_iter_
    if model == "xrfm-tree":
        return "-"
    # xrfm 0.4.5 sets best_iter = None when the final solve is the best one (it passes iters=None there)
    return iters if est.best_iter is None else est.best_iter


def sync(device):
    import torch
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def peak_rss_mb():
    # Linux reports ru_maxrss in KiB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class PhaseTimer:
    """Exclusive wall time per phase, by wrapping functions; calls nested in an ``absorb`` phase count there."""

    def __init__(self, device):
        self.device, self.times, self.stack, self.patched = device, defaultdict(float), [], []

    def wrap(self, owner, attr, phase, absorb=False):
        fn = getattr(owner, attr)
        timer = self

        def wrapped(*args, **kwargs):
            if timer.stack and timer.stack[-1][2]:
                return fn(*args, **kwargs)
            sync(timer.device)
            frame = [phase, time.perf_counter(), absorb, 0.0]
            timer.stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                sync(timer.device)
                timer.stack.pop()
                dt = time.perf_counter() - frame[1]
                timer.times[phase] += dt - frame[3]
                if timer.stack:
                    timer.stack[-1][3] += dt

        self.patched.append((owner, attr, fn))
        setattr(owner, attr, wrapped)

    def restore(self):
        for owner, attr, fn in reversed(self.patched):
            setattr(owner, attr, fn)


def instrument(model, timer):
    if model.startswith("rfm"):
        import rfm.core.cg
        import rfm.core.coincident
        import rfm.core.feature_matrix
        import rfm.core.machine
        import rfm.core.solvers
        import rfm.models.estimators
        timer.wrap(rfm.core.solvers, "kernel_matrix", "kernel build")
        timer.wrap(rfm.core.solvers, "solve_krr", "solve")
        timer.wrap(rfm.core.cg.CGSolver, "solve", "solve")
        timer.wrap(rfm.core.machine, "transformed_agop", "AGOP")
        timer.wrap(rfm.models.estimators, "feature_matrix_from_agop", "M update")  # one eigh gives M and its factor
        timer.wrap(rfm.core.machine.KernelMachine, "predict", "val predict", absorb=True)
        timer.wrap(rfm.core.coincident, "row_ids", "row ids")
    else:
        from xrfm.rfm_src import recursive_feature_machine as xr
        timer.wrap(xr.RFM, "score", "val predict", absorb=True)
        timer.wrap(xr.RFM, "kernel", "kernel build")
        timer.wrap(xr.RFM, "fit_predictor_lstsq", "solve")
        timer.wrap(xr.RFM, "update_M", "AGOP")
        timer.wrap(xr, "matrix_power", "M update")


def worker(args):
    import torch

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
    cfg = {"bandwidth": args.bandwidth, "reg": args.reg, "iters": args.iters, "agop_points": args.agop_points,
           "leaf_size": args.leaf_size}
    (X, y), (Xv, yv), (Xt, yt) = make_data(args.n, args.n_val, args.n_test, args.d, args.seed, device)
    fit = make_fit(args.model, cfg, device)

    # warm-up: the same code path on a small slice (threads, allocator, first-call costs)
    nw = min(args.n, 500) if not args.no_warmup else 0
    if nw:
        fit(X[:nw], y[:nw], Xv, yv)
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base_mem = torch.cuda.memory_allocated()
    rss0 = peak_rss_mb()

    sync(device)
    t0, c0 = time.perf_counter(), cpu_s()
    est = fit(X, y, Xv, yv)
    sync(device)
    wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    if device.type == "cuda":
        peak, kind = (torch.cuda.max_memory_allocated() - base_mem) / 2**20, "CUDA allocator peak above the data"
    else:
        peak, kind = peak_rss_mb() - rss0, "max RSS rise over data + warm-up"

    pred = torch.as_tensor(predict(args.model, est, Xt)).to(yt)
    mse = float((pred - yt).square().mean())
    r2 = 1.0 - mse / float((yt - yt.mean()).square().mean())
    out = {"model": args.model, "n": args.n, "status": "ok", "time_s": wall, "cpu_s": cpu, "test_mse": mse,
           "test_r2": r2, "best_iter": best_iter(args.model, est, args.iters), "peak_mem_mb": peak,
           "peak_mem_kind": kind}
    if args.model.startswith("rfm"):
        out["solvers"] = [r["solver"] for r in est.history_]
        out["cg_iters"] = [r.get("cg_iters") for r in est.history_]
        out["auto"] = [r.get("auto") for r in est.history_]
        out["K_fused"] = [r.get("K_fused") for r in est.history_]

    if args.profile:
        timer = PhaseTimer(device)
        instrument(args.model, timer)
        sync(device)
        t0 = time.perf_counter()
        fit(X, y, Xv, yv)
        sync(device)
        total = time.perf_counter() - t0
        timer.restore()
        phases = dict(timer.times)
        phases["other"] = total - sum(phases.values())
        out["profile"] = {"total_s": total, "phases_s": phases}
    print("RESULT " + json.dumps(out), flush=True)


# ---------------------------------------------------------------------------------------------------------------
# The driver


def run_worker(args, model, n, profile):
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", model, "--n", str(n)]
    for key in ("d", "n_val", "n_test", "threads", "device", "seed", "bandwidth", "reg", "iters", "agop_points",
                "leaf_size"):
        cmd += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
    if profile:
        cmd.append("--profile")
    if args.no_warmup:
        cmd.append("--no-warmup")
    if args.tf32:
        cmd.append("--tf32")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=args.worker_timeout)
    except subprocess.TimeoutExpired:
        return failed_row(model, n, "timeout", f"no result within {args.worker_timeout:g} s")
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return failed_row(model, n, "failed", error_line(proc.stderr) or f"exit code {proc.returncode}")


def error_line(stderr: str) -> str:
    """The exception's last line from a worker's stderr (``RuntimeError: ...``), shortened for a table cell."""
    import re
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^[\w.]*(Error|Exception|Interrupt|Warning)\b:?", ln):
            return ln[:300]
    return lines[-1][:300] if lines else ""


def failed_row(model, n, status, error):
    """A table row for a model that gave no result: its status ("failed" or "timeout") and error."""
    return {"model": model, "n": n, "status": status, "error": error}


def machine_info(device):
    import torch
    try:
        import xrfm
    except ImportError:  # the rfm rows still run; the xRFM rows fail with the ImportError
        xrfm = None
    info = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "host": platform.node(), "platform": platform.platform(), "python": platform.python_version(),
            "torch": torch.__version__, "xrfm": getattr(xrfm, "__version__", "0.4.5") if xrfm else "not installed",
            "cpu": _cpu_name(), "cpu_count": os.cpu_count(), "device": str(device),
            "load_avg_at_start": os.getloadavg()}
    if str(device).startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
    if os.environ.get("RFM_COMMIT"):  # a copy of the tree without its .git (the GPU scripts pass it)
        info["commit"], info["rfm_dirty"] = os.environ["RFM_COMMIT"], False
        return info
    try:
        info["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                        cwd=ROOT, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "rfm"], capture_output=True, text=True,
                               cwd=ROOT).stdout.strip()
        info["rfm_dirty"] = bool(dirty)
    except (OSError, subprocess.CalledProcessError):
        info["commit"] = "unknown"
    return info


def _cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def table(results, models, sizes):
    by = {(r["model"], r["n"]): r for r in results}
    head = ["n", "model", "solves (CG iterations)", "fit s: best (median)", "cpu s", "test MSE", "test R^2",
            "best iter", "peak MB", "fit s / rfm (auto)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in sizes:
        ours = by[("rfm", n)].get("best_s") if ("rfm", n) in by else None
        for m in models:
            if (m, n) not in by:
                continue
            r = by[(m, n)]
            if r.get("status", "ok") != "ok":
                err = str(r.get("error", "")).replace("|", "/")
                lines.append("| " + " | ".join([str(n), MODELS[m], f"**{r['status']}**: {err[:160]}"] + [""] * 7)
                             + " |")
                continue
            ratio = "" if m == "rfm" or not ours else f"{r['best_s'] / ours:.2f}x"
            lines.append("| " + " | ".join([
                str(n), MODELS[m], _solves(r), f"{r['best_s']:.2f} ({r['median_s']:.2f})", f"{r['best_cpu_s']:.1f}",
                f"{r['test_mse']:.4f}", f"{r['test_r2']:.3f}", str(r["best_iter"]), f"{r['peak_mem_mb']:.0f}",
                ratio]) + " |")
    return "\n".join(lines)


def _solves(r):
    if "solvers" not in r:
        return "-"
    kinds = sorted(set(r["solvers"]))
    its = [i for i in r.get("cg_iters", []) if i is not None]
    return "/".join(kinds) + (f" ({min(its)}-{max(its)})" if its else "")


def plot(results, models, path, title):
    """Log-log plot of the best fit time against n, one line per model."""
    import matplotlib
    import matplotlib.ticker
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for m in models:
        pts = sorted((r["n"], r["best_s"]) for r in results if r["model"] == m and r.get("status", "ok") == "ok")
        if pts:
            ax.plot(*zip(*pts), marker="o", label=MODELS[m])
    ax.set(xscale="log", yscale="log", xlabel="training points n", ylabel="fit time (s)", title=title)
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120, format="png")
    plt.close(fig)


def profile_table(results, models, sizes):
    by = {(r["model"], r["n"]): r for r in results}
    head = ["model", "n", "total s"] + list(PHASES)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in sizes:
        for m in models:
            if (m, n) not in by or "profile" not in by[(m, n)]:
                continue
            p = by[(m, n)]["profile"]
            cells = [f"{p['phases_s'].get(ph, 0.0):.2f}" if ph in p["phases_s"] else "-" for ph in PHASES]
            lines.append("| " + " | ".join([MODELS[m], str(n), f"{p['total_s']:.2f}"] + cells) + " |")
    return "\n".join(lines)


def render(info, settings, results):
    """The markdown report of one run; from a saved JSON ``d``:
    ``render(d["machine"], d["settings"], d["results"])``."""
    models, sizes = settings["models"], settings["sizes"]
    md = [f"Measured {info['date']} on {info.get('gpu', info['cpu'])} ({info['cpu_count']} CPU cores, "
          f"{settings['threads']} torch threads), torch {info['torch']}, xrfm {info['xrfm']}, commit {info['commit']}"
          f"{' (rfm/ modified)' if info.get('rfm_dirty') else ''}. Load average at start/end: "
          f"{info['load_avg_at_start'][0]:.1f} / "
          + (f"{info['load_avg_at_end'][0]:.1f}." if "load_avg_at_end" in info else "- (a partial run)."),
          "",
          f"d = {settings['d']}, y = x1*x2, {settings['n_val']} validation and {settings['n_test']} test points; "
          f"Laplace L = {settings['bandwidth']:g}, reg = {settings['reg']:g}, {settings['iters']} iterations. "
          f"fit s = wall-clock fit time, best of {settings['repeats']} interleaved runs (median in brackets); cpu s = "
          "process CPU time of the fastest run; peak MB = " + next((r["peak_mem_kind"] for r in results
                                                                   if "peak_mem_kind" in r), "-") + ".",
          "",
          table(results, models, sizes)]
    if any("profile" in r for r in results):
        md += ["", "Phase breakdown of one fit (wall seconds, exclusive):", "", profile_table(results, models, sizes)]
    return "\n".join(md) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=None,
                   help=f"training set sizes n (default 2000 4000 8000; with --device cuda {CUDA_SIZES})")
    p.add_argument("--d", type=int, default=100)
    p.add_argument("--n-val", type=int, default=1000, help="validation points (both models get the same)")
    p.add_argument("--n-test", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=3, help="timed fits per (model, n); best and median reported")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads in every worker")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--models", nargs="+", default=None, choices=list(MODELS),
                   help=f"default {DEFAULT_MODELS}; with --device cuda {CUDA_MODELS}")
    p.add_argument("--exact-max", type=int, default=None,
                   help=f"largest n for the exact solves {EXACT} (they factor an n x n matrix: O(n^3)); default "
                        "16,000 on a CPU, 40,000 on a GPU")
    p.add_argument("--tree-max", type=int, default=1_000_000, help="largest n for xRFM's tree")
    p.add_argument("--worker-timeout", type=float, default=None, help="seconds per fit; past it the row is 'timeout'")
    p.add_argument("--tf32", action="store_true", help="torch.backends.cuda.matmul.allow_tf32 = True in the workers")
    p.add_argument("--leaf-size", type=int, default=60_000, help="xRFM tree: max_leaf_size")
    p.add_argument("--no-warmup", action="store_true", help="skip the warm-up fit (large n)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bandwidth", type=float, default=10.0)
    p.add_argument("--reg", type=float, default=1e-3)
    p.add_argument("--iters", type=int, default=5, help="feature updates (both: iters + 1 solves)")
    p.add_argument("--agop-points", type=int, default=20_000)
    p.add_argument("--profile", action="store_true", help="also time the phases of one fit per (model, n)")
    p.add_argument("--quick", action="store_true", help="smoke run: n in {300, 600}, 2 repeats, small val/test")
    p.add_argument("--out", default=None, help="output stem (default benchmarks/results/<device>[_quick])")
    p.add_argument("--worker", choices=list(MODELS), dest="model", help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.device is None:
        import torch
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    cuda = str(args.device).startswith("cuda")
    if args.sizes is None:
        args.sizes = CUDA_SIZES if cuda else [2000, 4000, 8000]
    if args.models is None:
        args.models = CUDA_MODELS if cuda else DEFAULT_MODELS
    if args.exact_max is None:
        args.exact_max = 40_000 if cuda else 16_000
    if args.model is not None:
        return worker(args)
    if args.quick:
        args.sizes, args.repeats, args.n_val, args.n_test = [300, 600], 2, 200, 500

    info = machine_info(args.device)
    settings = {k: getattr(args, k) for k in ("sizes", "d", "n_val", "n_test", "repeats", "threads", "seed",
                                              "bandwidth", "reg", "iters", "agop_points", "models", "exact_max",
                                              "leaf_size", "tree_max", "tf32")}
    print(f"# {info['date']}  {info['cpu']} ({info['cpu_count']} cpus), device {args.device}, torch {info['torch']}"
          f", commit {info['commit']}, load {info['load_avg_at_start']}", flush=True)
    results = []
    for n in args.sizes:
        runs = defaultdict(list)
        models = [m for m in args.models if (m not in EXACT or n <= args.exact_max)
                  and (m != "xrfm-tree" or n <= args.tree_max)]
        for rnd in range(args.repeats):
            k = rnd % len(models)
            for m in models[k:] + models[:k]:
                r = run_worker(args, m, n, profile=args.profile and rnd == args.repeats - 1)
                runs[m].append(r)
                if r["status"] != "ok":
                    print(f"  n={n:6d} round {rnd}  {MODELS[m]:22s} {r['status'].upper()}: {r['error']}", flush=True)
                    continue
                print(f"  n={n:6d} round {rnd}  {MODELS[m]:22s} {r['time_s']:7.2f}s (cpu {r['cpu_s']:6.1f}s)  "
                      f"test MSE {r['test_mse']:.4f}  R^2 {r['test_r2']:.3f}  best iter {r['best_iter']}  "
                      f"peak {r['peak_mem_mb']:.0f} MB", flush=True)
        for m in models:
            rs = [r for r in runs[m] if r["status"] == "ok"]
            if not rs:  # every round failed: one row with the last status and error
                results.append(dict(runs[m][-1], failures=len(runs[m])))
                continue
            times = [r["time_s"] for r in rs]
            agg = {key: rs[-1][key] for key in ("model", "n", "status", "test_mse", "test_r2", "best_iter",
                                                  "peak_mem_kind", "solvers", "cg_iters", "auto", "K_fused")
                   if key in rs[-1]}
            if len(rs) < len(runs[m]):
                agg["failures"] = len(runs[m]) - len(rs)
                agg["error"] = next(r["error"] for r in runs[m] if r["status"] != "ok")
            agg.update(times_s=times, cpu_s=[r["cpu_s"] for r in rs], best_s=min(times),
                       median_s=statistics.median(times), best_cpu_s=min(r["cpu_s"] for r in rs),
                       peak_mem_mb=max(r["peak_mem_mb"] for r in rs),
                       test_mse_spread=max(r["test_mse"] for r in rs) - min(r["test_mse"] for r in rs))
            if args.profile and "profile" in rs[-1]:
                agg["profile"] = rs[-1]["profile"]
            results.append(agg)
        if args.out:  # the sizes done so far, in case a later size outruns the caller's time cap
            Path(f"{args.out}.json").parent.mkdir(parents=True, exist_ok=True)
            Path(f"{args.out}.json").write_text(json.dumps({"machine": dict(info, partial=True), "settings": settings,
                                                             "results": results}, indent=1) + "\n")
    info["load_avg_at_end"] = os.getloadavg()

    text = render(info, settings, results)
    print()
    print(text)

    dev = "cuda" if str(args.device).startswith("cuda") else "cpu"
    stem = Path(args.out) if args.out else HERE / "results" / (dev + ("_quick" if args.quick else ""))
    suffix = ".tmp" if args.quick and not args.out else ""
    stem.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{stem}.md{suffix}").write_text(text)
    Path(f"{stem}.json{suffix}").write_text(json.dumps({"machine": info, "settings": settings,
                                                         "results": results}, indent=1) + "\n")
    plot(results, args.models, f"{stem}.png" if not suffix else f"{stem}.png.tmp",
         f"{info.get('gpu', info['cpu'])[:40]}, d = {args.d}")
    print(f"wrote {stem}.md{suffix}, {stem}.json{suffix} and the plot")
    if not args.quick and args.out is None:
        update_readme(dev, text)


def update_readme(dev, text):
    """Replace the table between the README's ``<!-- bench:<dev> -->`` markers, so that it shows the latest run."""
    readme = HERE / "README.md"
    start, end = f"<!-- bench:{dev}:start -->", f"<!-- bench:{dev}:end -->"
    body = readme.read_text() if readme.exists() else ""
    if start in body and end in body:
        head, rest = body.split(start, 1)
        readme.write_text(head + start + "\n" + text + end + rest.split(end, 1)[1])
        print(f"updated the {dev} table in {readme}")


if __name__ == "__main__":
    main()
