"""Every GPU measurement of the Scale chapter in one command (``make gpu-bench``), each step a capped subprocess
writing its own file, so that one failure or time-out loses nothing else. Sized for one H100/H200 call of at most
9 minutes from the numbers of ../shared/measurements/h200-2026-11-27.

    python scripts/gpu/run_all.py --out OUT [--total 520] [--steps check kv big bench cg300k alternatives queue]

Steps (cap in seconds, in this order):

* ``check`` (90): the fused kernel against float64 torch on fresh random inputs, poisoned outputs, coincident
  pairs, the fused operator against the stored K, PCG on both (check_fused.py -> check.json);
* ``kv`` (130): one K·v at n = 1e5, 3e5, 1e6, fused (tile sweep; tf32x3, tf32+fp32, tf32, and ieee at 1e5) and
  blocked (time_kv.py -> kv.json);
* ``big`` (230): n = 1e6, d = 100, five feature updates with EigenPro 3 (20,000 centres), timed per solve with the
  test MSE of each iterate (big_fit.py -> big.json);
* ``bench`` (150): benchmarks/bench_xrfm.py --device cuda at n = 8k, 32k, 1e5: ours (auto, cholesky, eigenpro3)
  against xRFM leaf (solve, cholesky) and tree, failures as rows (-> bench.json, bench.md, bench.png);
* ``bench-large`` (150): the same at n = 1e5 and 3e5 (ours: auto and eigenpro3; xRFM leaf and tree), each model
  capped at 40 s (-> bench-large.json);
* ``cg300k`` (120): n = 3e5, five updates, fused CG and EigenPro 3 (the auto solver's choice past memory; big.json);
* ``alternatives`` (45): kermac and KeOps K·v at n = 1e5 when their wheels travel (alternatives.py -> kv.json);
* ``queue`` (the rest): the paper-scale queue (gpu_queue.py -> queue.json).

Everything printed goes to OUT/log.txt too; a short table of the results is printed last. The steps together take
more than one call: the first GPU session (results/gpu/2026-11-27-h200) ran check, kv, big and bench. What it left
for the next one, in one call of about 9 minutes:

    python scripts/gpu/run_all.py --out $OUT --total 520 --steps check kv cg300k bench alternatives
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PY = sys.executable
STEPS = {
    "check": (90, lambda o: [PY, HERE / "check_fused.py", o]),
    "kv": (130, lambda o: [PY, HERE / "time_kv.py", o, "--budget", "110"]),
    "big": (230, lambda o: [PY, HERE / "big_fit.py", o, "1000000", "ep3", "--iters", "5"]),
    "bench": (150, lambda o: [PY, ROOT / "benchmarks" / "bench_xrfm.py", "--device", "cuda", "--sizes", "8000", "32000",
                              "100000", "--models", "rfm", "rfm-chol", "rfm-ep3", "xrfm", "xrfm-chol", "xrfm-tree",
                              "--repeats", "1", "--worker-timeout", "60", "--exact-max", "40000", "--out",
                              f"{o}/bench"]),
    "bench-large": (150, lambda o: [PY, ROOT / "benchmarks" / "bench_xrfm.py", "--device", "cuda", "--sizes",
                                    "100000", "300000", "--models", "rfm", "rfm-ep3", "xrfm", "xrfm-tree",
                                    "--repeats", "1", "--worker-timeout", "40", "--exact-max", "40000", "--out",
                                    f"{o}/bench-large"]),
    "cg300k": (120, None),
    "alternatives": (45, lambda o: [PY, HERE / "alternatives.py", o]),
    "queue": (10_000, None),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", str(ROOT / "out" / "gpu")))
    ap.add_argument("--total", type=float, default=520.0, help="seconds for all steps together")
    ap.add_argument("--steps", nargs="+", default=list(STEPS), choices=list(STEPS))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    commit = ROOT / "COMMIT"  # a copy of the tree without .git carries its commit in this file
    if commit.exists() and not os.environ.get("RFM_COMMIT"):
        os.environ["RFM_COMMIT"] = commit.read_text().strip()
    log = open(out / "log.txt", "a")
    t0 = time.perf_counter()

    def say(msg):
        print(msg, flush=True)
        log.write(msg + "\n")
        log.flush()

    def left():
        return args.total - (time.perf_counter() - t0)

    def run(name, cmd, cap):
        secs = min(cap, left())
        if secs < 10:
            say(f"== {name}: skipped ({left():.0f} s left)")
            return
        say(f"== {name} (cap {secs:.0f} s, {time.perf_counter() - t0:.0f} s in)")
        s = time.perf_counter()
        env = dict(os.environ, PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        try:
            p = subprocess.run([str(c) for c in cmd], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=secs)
            text, status = p.stdout, f"exit {p.returncode}"
        except subprocess.TimeoutExpired as e:
            text = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            status = "TIMEOUT"
        for line in text.splitlines()[-60:]:
            say("   " + line)
        say(f"== {name}: {status} after {time.perf_counter() - s:.0f} s")

    try:
        env_text = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv"],
                                  capture_output=True, text=True).stdout
    except OSError:
        env_text = "nvidia-smi not found"
    say(env_text.strip())
    for name in args.steps:
        cap, make = STEPS[name]
        if name == "cg300k":
            run("cg300k fused CG", [PY, HERE / "big_fit.py", out, "300000", "cg-fused", "--iters", "5"],
                cap * 0.6)
            run("cg300k eigenpro3", [PY, HERE / "big_fit.py", out, "300000", "ep3", "--iters", "5"], cap * 0.4)
        elif name == "queue":
            run("queue", [PY, HERE / "gpu_queue.py", out, "--budget", str(max(0, left() - 15))], cap)
        else:
            run(name, make(out), cap)
    say(f"== all steps done in {time.perf_counter() - t0:.0f} s")
    say(summary(out))


def summary(out: Path) -> str:
    """A short table of what came back."""
    lines = ["", "| what | result |", "|---|---|"]

    def load(name):
        p = out / name
        return json.loads(p.read_text()) if p.exists() else None

    c = load("check.json")
    if c:
        lines.append(f"| fused vs float64 (worst rel. error) | {json.dumps(c.get('worst_relerr'))}; all written "
                     f"{c.get('all_written')}; coincident exact {c.get('coincident_value_is_1')}/"
                     f"{c.get('coincident_weight_is_0')} |")
        if "pcg_fused" in c:
            lines.append(f"| PCG n=20k stored / fused | {c['pcg_stored']} / {c['pcg_fused']}; alpha rel. diff "
                         f"{c.get('pcg_alpha_fused_vs_stored')} |")
    kv = load("kv.json")
    if kv:
        lines.append(f"| tile config | {kv.get('config')} |")
        for r in kv.get("rows", []):
            lines.append(f"| K·v n={r['n']} {r['path']} {r['precision']} | {r['s']:.3f} s, rel. err "
                         f"{r['relerr_1000_rows']:.1e} |")
        if "alternatives" in kv:
            lines.append(f"| alternatives | {json.dumps(kv['alternatives'])[:300]} |")
    big = load("big.json")
    for key, r in (big or {}).items():
        prog = r.get("progress", [])
        last = {k: prog[-1].get(k) for k in ("fit_s_so_far", "test_mse", "cg_iters")} if prog else None
        lines.append(f"| {key} | {r.get('status')} fit {r.get('fit_s', float('nan')):.1f} s, test MSE "
                     f"{r.get('test_mse')}, peak {r.get('peak_gb', 0):.1f} GB; solves done {len(prog)}"
                     f"{'; last ' + json.dumps(last) if prog else ''}"
                     f"{'; ' + r['error'] if 'error' in r else ''} |")
    b = load("bench.json")
    if b:
        for r in b["results"]:
            if r.get("status", "ok") == "ok":
                lines.append(f"| bench n={r['n']} {r['model']} | {r['best_s']:.2f} s, test MSE {r['test_mse']:.2e} |")
            else:
                lines.append(f"| bench n={r['n']} {r['model']} | {r['status']}: {r.get('error', '')[:120]} |")
    q = load("queue.json")
    if q:
        for r in q.get("runs", []):
            lines.append(f"| queue {r['chapter']} | {r['status']} in {r['seconds']} s |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
