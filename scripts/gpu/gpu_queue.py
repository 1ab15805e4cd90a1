"""The GPU queue for paper scale: run the next pending full profiles that do not fit the project's CPU, as many
as fit the time given, and pack their records (``results/<chapter>/full.json``'s content) into <out>/queue.json.

    python scripts/gpu/gpu_queue.py OUT --budget 300        # make gpu-queue

A chapter is pending while ``results/<chapter>/full.json`` is not in the tree: successive runs on a GPU, each
followed by committing what came back (``python scripts/gpu/gpu_queue.py --unpack results/gpu/<date>/queue.json``),
work down :data:`QUEUE`. Each chapter runs as ``scripts/full_run.py`` does (profile "full", device "cuda", checks
recorded, not raised) through papermill when papermill and jupytext are installed, else by executing the chapter's
jupytext source as a plain Python script with the parameters set after its parameters cell (the device image has
no Jupyter). A chapter that fails or outruns the time left is recorded with its status and the end of its output.

A committed full run that covers less than the chapter's full profile (:data:`PARTIAL`: tabular_benchmarks run on
this CPU on the smaller KEEL sets only, rfm_at_scale without EigenPro) keeps the chapter pending. A chapter may
have a step that runs before it (:data:`BEFORE`: ``scripts/tabular_full.py``, which writes one file per KEEL set
and keeps the files already there); the files that step wrote travel inside queue.json, and ``--unpack`` writes
them back.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The order of the queue: the chapters whose full profile does not fit the 2-core CPU, most wanted first.
QUEUE = ["neural_feature_ansatz", "deep_learning_phenomena", "in_context_scaling", "catapults_in_sgd", "fact_rfm",
         "one_feature_at_a_time", "parametrisation_and_tuning", "eigenpro_dynamics", "wide_deep_classification",
         "adaptive_sgd_quadratic", "tabular_benchmarks", "rfm_at_scale"]
#: Parameters beyond profile and device, per chapter (fact_rfm at the paper's modulus p = 61).
PARAMS = {"fact_rfm": {"p": 61}}
#: A committed full run that covers less than the full profile, per chapter: the chapter stays pending. The CPU run
#: of tabular_benchmarks took only the KEEL sets of up to max_rows rows; the profile's default takes all 43. The CPU
#: run of rfm_at_scale left EigenPro 2 and 3 out (``eigenpro=False``; older runs predate the knob); the profile runs
#: them.
PARTIAL = {"tabular_benchmarks": lambda full: full.get("params", {}).get("max_rows", 0) < 20000,
           "rfm_at_scale": lambda full: not full.get("params", {}).get("eigenpro", False)}
#: A step run before the chapter (from the repository root), and the folder of the files it writes, which travel back
#: inside queue.json (the device returns only a few files): tabular_benchmarks' per-set results.
BEFORE = {"tabular_benchmarks": (["scripts/tabular_full.py", "--jobs", str(max(1, (os.cpu_count() or 2) - 2)),
                                  "--device", "{device}"], "results/tabular_benchmarks/sets")}


def pending(root: Path = ROOT) -> list[str]:
    """The chapters of the queue without a complete results/<chapter>/full.json (none, or one that
    :data:`PARTIAL` calls partial), in queue order."""
    out = []
    for c in QUEUE:
        if not (root / "notebooks" / f"{c}.py").exists():
            continue
        path = root / "results" / c / "full.json"
        if not path.exists() or (c in PARTIAL and PARTIAL[c](json.loads(path.read_text()))):
            out.append(c)
    return out


def run_before(chapter: str, seconds: float, device: str = "cuda") -> dict:
    """Run the chapter's :data:`BEFORE` step (if any) within ``seconds``; its status, time, end of output, and the
    files of its folder as ``{relative path: text}``."""
    if chapter not in BEFORE:
        return {}
    cmd, folder = BEFORE[chapter]
    t0 = time.perf_counter()
    rec: dict = {"command": [c.format(device=device) for c in cmd]}
    try:
        proc = subprocess.run([sys.executable, *rec["command"]], cwd=ROOT, capture_output=True, text=True,
                              timeout=seconds, env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                                  [str(ROOT), os.environ.get("PYTHONPATH", "")])))
        rec["exit"], rec["tail"] = proc.returncode, (proc.stdout + proc.stderr)[-2000:]
    except subprocess.TimeoutExpired:
        rec["exit"] = "timeout"
    rec["seconds"] = round(time.perf_counter() - t0, 1)
    where = ROOT / folder
    rec["files"] = {str(f.relative_to(ROOT)): f.read_text() for f in sorted(where.glob("*.json"))} \
        if where.is_dir() else {}
    return rec


def script_source(src: Path, params: dict) -> str:
    """The chapter's jupytext source with ``params`` assigned right after its parameters cell."""
    lines = src.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("# %%") and "parameters" in ln)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("# %%")), len(lines))
    inject = [f"{k} = {v!r}" for k, v in params.items()]
    shim = ["import sys as _sys, types as _types",
            "try:",
            "    import IPython.display  # noqa: F401",
            "except ImportError:  # no Jupyter on the machine: display() prints",
            "    _ip, _ipd = _types.ModuleType('IPython'), _types.ModuleType('IPython.display')",
            "    _ipd.display = lambda *a, **k: print(*[getattr(x, 'to_string', lambda: x)() for x in a])",
            "    _ipd.Markdown = _ipd.HTML = lambda x: x",
            "    _ip.display, _ip.get_ipython, _ip.version_info = _ipd, lambda: None, (0, 0)",
            "    _sys.modules['IPython'], _sys.modules['IPython.display'] = _ip, _ipd",
            "from IPython.display import display  # noqa: E402"]
    return "\n".join(shim + lines[:end] + ["# injected by scripts/gpu/gpu_queue.py"] + inject + lines[end:]) + "\n"


def run_chapter(chapter: str, seconds: float, workdir: Path, profile: str = "full", device: str = "cuda",
                plain: bool = False) -> dict:
    src = ROOT / "notebooks" / f"{chapter}.py"
    out = workdir / f"{chapter}-{profile}"
    out.mkdir(parents=True, exist_ok=True)
    params = {"profile": profile, "device": device, "output_dir": str(out),
              **(PARAMS.get(chapter, {}) if profile == "full" else {})}
    env = dict(os.environ, RFM_BOOK_CHECKS="record", RFM_BOOK_OUTPUT=str(out), MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    try:
        if plain:
            raise ImportError
        import jupytext  # noqa: F401
        import papermill  # noqa: F401
        cmd = [sys.executable, str(ROOT / "scripts" / "rerun.py"), str(src), "--out", str(out)]
        for k, v in params.items():
            if k != "output_dir":
                cmd += ["-p", k, json.dumps(v) if not isinstance(v, str) else v]
        how = "papermill (scripts/rerun.py)"
    except ImportError:
        script = out / f"{chapter}_script.py"
        script.write_text(script_source(src, params))
        cmd = [sys.executable, str(script)]
        how = "plain script (jupytext source, parameters injected)"
    t0 = time.perf_counter()
    rec = {"chapter": chapter, "how": how, "params": params}
    try:
        proc = subprocess.run(cmd, cwd=src.parent, env=env, capture_output=True, text=True, timeout=seconds)
        rec["exit"] = proc.returncode
        tail = (proc.stdout + proc.stderr)[-3000:]
    except subprocess.TimeoutExpired as e:
        rec["exit"] = "timeout"
        tail = ((e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""))[-3000:]
    rec["seconds"] = round(time.perf_counter() - t0, 1)
    found = out / f"{chapter}_{profile}.json"
    if rec["exit"] == 0 and found.exists():
        full = json.loads(found.read_text())
        full["seconds"] = rec["seconds"]
        full["how"] = how
        rec["status"], rec["full"] = "ok", full
    else:
        rec["status"], rec["tail"] = ("timeout" if rec["exit"] == "timeout" else "failed"), tail
    return rec


def unpack(path: Path) -> None:
    """Write each successful record of a queue.json as results/<chapter>/full.json (to commit), and the files its
    step before the chapter wrote (whatever the chapter's status: a resumable step keeps what finished)."""
    data = json.loads(Path(path).read_text())
    for rec in data.get("runs", []):
        for rel, text in rec.get("before", {}).get("files", {}).items():
            dest = (ROOT / rel).resolve()
            if ROOT.resolve() not in dest.parents:
                raise ValueError(f"{path}: a file outside the repository: {rel}")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text)
        if rec.get("status") == "ok":
            dest = ROOT / "results" / rec["chapter"] / "full.json"
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(json.dumps(rec["full"], indent=1) + "\n")
            print("wrote", dest)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", default=str(ROOT / "out" / "gpu-queue"))
    ap.add_argument("--budget", type=float, default=480.0, help="seconds for the whole queue")
    ap.add_argument("--min-seconds", type=float, default=60.0, help="do not start a chapter with less time left")
    ap.add_argument("--only", nargs="+", help="these chapters instead of the pending ones")
    ap.add_argument("--unpack", type=Path, help="write the records of a queue.json into results/ and stop")
    ap.add_argument("--list", action="store_true", help="print the pending chapters and stop")
    ap.add_argument("--profile", default="full", help="the chapters' profile (smoke: a CPU test of the queue)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--plain", action="store_true", help="run as plain scripts even where papermill is installed")
    args = ap.parse_args(argv)
    if args.unpack:
        unpack(args.unpack)
        return 0
    todo = args.only or pending()
    if args.list:
        print("\n".join(todo))
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    runs = []
    path = out / "queue.json"
    for chapter in todo:
        left = args.budget - (time.perf_counter() - t0)
        if left < args.min_seconds:
            break
        print(f"queue: {chapter} ({left:.0f} s left)", flush=True)
        before = run_before(chapter, left, args.device) if args.profile == "full" else {}
        left = args.budget - (time.perf_counter() - t0)
        if before and before.get("exit") != 0:
            rec = {"chapter": chapter, "status": "failed" if before.get("exit") != "timeout" else "timeout",
                   "tail": before.get("tail", ""), "seconds": before["seconds"]}
        else:
            rec = run_chapter(chapter, left, Path(os.environ.get("TMPDIR", "/tmp")) / "gpu-queue-work",
                              args.profile, args.device, args.plain)
        if before:
            rec["before"] = before
        runs.append(rec)
        print(f"queue: {chapter} {rec['status']} in {rec['seconds']} s", flush=True)
        path.write_text(json.dumps({"pending_before": todo, "runs": runs}, indent=1) + "\n")
    path.write_text(json.dumps({"pending_before": todo, "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
