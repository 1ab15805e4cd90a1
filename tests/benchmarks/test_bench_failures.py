"""benchmarks/bench_xrfm.py: a model that fails is a row of the table (status and error), and the run goes on."""
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_xrfm", ROOT / "benchmarks" / "bench_xrfm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_failing_worker_is_a_row_not_the_end_of_the_run():
    b = _bench()
    args = b.main.__globals__["argparse"].Namespace(
        d=3, n_val=5, n_test=5, threads=1, device="cpu", seed=0, bandwidth=1.0, reg=1e-3, iters=0, agop_points=10,
        leaf_size=10, no_warmup=True, tf32=False, worker_timeout=120)
    row = b.run_worker(args, "rfm", -5, profile=False)  # a worker that raises (n < 0)
    assert row["status"] == "failed" and row["model"] == "rfm" and row["error"]


def test_the_table_json_and_plot_keep_failed_rows(tmp_path, monkeypatch):
    b = _bench()
    ok = {"model": "rfm", "status": "ok", "time_s": 0.5, "cpu_s": 0.5, "test_mse": 0.1, "test_r2": 0.9,
          "best_iter": 1, "peak_mem_mb": 1.0, "peak_mem_kind": "max RSS", "solvers": ["cg"], "cg_iters": [4]}

    def fake(args, model, n, profile):
        if model == "xrfm-chol":
            return b.failed_row(model, n, "failed", "torch._C._LinAlgError: linalg.cholesky: not positive-definite")
        return dict(ok, model=model, n=n)

    monkeypatch.setattr(b, "run_worker", fake)
    b.main(["--sizes", "100", "200", "--models", "rfm", "xrfm-chol", "--repeats", "2", "--device", "cpu",
            "--out", str(tmp_path / "run")])
    data = json.loads((tmp_path / "run.json").read_text())
    rows = {(r["model"], r["n"]): r for r in data["results"]}
    assert rows[("xrfm-chol", 200)]["status"] == "failed" and rows[("xrfm-chol", 200)]["failures"] == 2
    assert rows[("rfm", 200)]["status"] == "ok" and rows[("rfm", 200)]["best_s"] == 0.5
    md = (tmp_path / "run.md").read_text()
    assert "**failed**: torch._C._LinAlgError" in md and (tmp_path / "run.png").exists()
