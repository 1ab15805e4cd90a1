"""scripts/gpu/gpu_queue.py: which chapters are pending, the chapter source run as a plain script with the
parameters injected, and unpacking a queue.json into results/; scripts/gpu/run_all.py's summary table."""
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "gpu" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_pending_follows_the_queue_and_skips_committed_full_runs(tmp_path):
    q = _load("gpu_queue")
    (tmp_path / "notebooks").mkdir()
    for c in q.QUEUE[:3]:
        (tmp_path / "notebooks" / f"{c}.py").write_text("x = 1\n")
    (tmp_path / "results" / q.QUEUE[0]).mkdir(parents=True)
    (tmp_path / "results" / q.QUEUE[0] / "full.json").write_text("{}")
    assert q.pending(tmp_path) == q.QUEUE[1:3]


def test_script_source_sets_the_parameters_after_the_parameters_cell(tmp_path):
    q = _load("gpu_queue")
    src = tmp_path / "ch.py"
    src.write_text('# %%\nimport os\n\n# %% tags=["parameters"]\nprofile = "smoke"\ndevice = None\n\n'
                   '# %%\nresult = (profile, device, p)\n')
    code = q.script_source(src, {"profile": "full", "device": "cuda", "p": 61})
    ns = {}
    exec(compile(code, "ch", "exec"), ns)
    assert ns["result"] == ("full", "cuda", 61) and callable(ns["display"])


def test_unpack_writes_the_successful_records(tmp_path, monkeypatch):
    q = _load("gpu_queue")
    monkeypatch.setattr(q, "ROOT", tmp_path)
    data = {"runs": [{"chapter": "a", "status": "ok", "full": {"profile": "full", "seconds": 3.0}},
                     {"chapter": "b", "status": "timeout", "tail": "..."}]}
    (tmp_path / "queue.json").write_text(json.dumps(data))
    q.unpack(tmp_path / "queue.json")
    assert json.loads((tmp_path / "results" / "a" / "full.json").read_text())["seconds"] == 3.0
    assert not (tmp_path / "results" / "b").exists()


def test_run_all_summary_reads_what_came_back():
    r = _load("run_all")
    text = r.summary(ROOT / "results" / "gpu" / "2026-11-27-h200")
    assert "ep3_1000000_5 | ok" in text and "K·v n=1000000" not in text  # kv1m.json is not one of run_all's files
    assert "failed: torch._C._LinAlgError" in text


def test_a_partial_full_run_stays_pending_and_its_step_files_unpack(tmp_path, monkeypatch):
    q = _load("gpu_queue")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "tabular_benchmarks.py").write_text("x = 1\n")
    full = tmp_path / "results" / "tabular_benchmarks" / "full.json"
    full.parent.mkdir(parents=True)
    full.write_text(json.dumps({"params": {"max_rows": 2310}}))  # the CPU run: only the smaller sets
    assert q.pending(tmp_path) == ["tabular_benchmarks"]
    full.write_text(json.dumps({"params": {"max_rows": 20000}}))  # every set: done
    assert q.pending(tmp_path) == []
    monkeypatch.setattr(q, "ROOT", tmp_path)
    step = {"exit": 0, "files": {"results/tabular_benchmarks/sets/iris.json": '{"set": "iris"}'}}
    data = {"runs": [{"chapter": "tabular_benchmarks", "status": "timeout", "tail": "...", "before": step}]}
    (tmp_path / "queue.json").write_text(json.dumps(data))
    q.unpack(tmp_path / "queue.json")  # the step's files are kept although the chapter ran out of time
    assert json.loads((tmp_path / "results" / "tabular_benchmarks" / "sets" / "iris.json").read_text())["set"] == "iris"
    bad = {"runs": [{"chapter": "x", "status": "failed", "before": {"files": {"../outside.json": "{}"}}}]}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="outside the repository"):
        q.unpack(tmp_path / "bad.json")


def test_rfm_at_scale_without_eigenpro_stays_pending(tmp_path):
    q = _load("gpu_queue")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "rfm_at_scale.py").write_text("x = 1\n")
    full = tmp_path / "results" / "rfm_at_scale" / "full.json"
    full.parent.mkdir(parents=True)
    full.write_text(json.dumps({"params": {"n": 20000, "eigenpro": False}}))  # the CPU run: EigenPro left out
    assert q.pending(tmp_path) == ["rfm_at_scale"]
    full.write_text(json.dumps({"params": {"n": 20000, "eigenpro": True}}))
    assert q.pending(tmp_path) == []


def test_run_before_runs_the_step_and_packs_its_files(tmp_path, monkeypatch):
    q = _load("gpu_queue")
    monkeypatch.setattr(q, "ROOT", tmp_path)
    code = "import pathlib, sys; p = pathlib.Path('out'); p.mkdir(); (p / 'a.json').write_text(sys.argv[1])"
    monkeypatch.setattr(q, "BEFORE", {"x": (["-c", code, "{device}"], "out")})
    rec = q.run_before("x", 60, device="cuda")
    assert rec["exit"] == 0 and rec["files"] == {"out/a.json": "cuda"}  # the device is filled in
    assert q.run_before("not-listed", 60) == {}
