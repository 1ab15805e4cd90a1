"""The many-core calibration driver (scripts/gpu/device_calibrate.py) and the commit override it relies on."""
import importlib.util
import json
from pathlib import Path

from rfm.book.records import git_commit

ROOT = Path(__file__).resolve().parents[2]


def _driver():
    spec = importlib.util.spec_from_file_location("device_calibrate", ROOT / "scripts" / "gpu" / "device_calibrate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_commit_override(monkeypatch):
    monkeypatch.setenv("RFM_BOOK_COMMIT", "abc123def456")
    assert git_commit() == "abc123def456"


def test_tasks_one_per_seed_and_run_longest_first():
    mod = _driver()
    spec = {"calibrate": {"adaptive_sgd_quadratic": {"seeds": 3, "params": {"d": 4}}},
            "runs": [{"chapter": "grokking_modular_arithmetic", "name": "seed11", "params": {"seed": 11}}]}
    tasks = mod.tasks_from(spec)
    assert [t["name"] for t in tasks if t["calibration"]] == ["seed0", "seed1", "seed2"]
    assert all(t["params"]["d"] == 4 for t in tasks if t["calibration"])
    assert [t["params"]["seed"] for t in tasks if t["calibration"]] == [0, 1, 2]
    expected = [t["expected"] for t in tasks]
    assert expected == sorted(expected, reverse=True)
    json.dumps(tasks)  # the tasks travel as JSON
