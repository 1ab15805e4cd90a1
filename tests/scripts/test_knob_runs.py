"""scripts/knob_runs.py: a run's knobs are parsed from KNOB=VALUE, and its entry keeps every check's value."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load():
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("knob_runs", ROOT / "scripts" / "knob_runs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_run_is_its_name_then_knob_equals_value():
    mod = _load()
    assert mod.parse_run(["d50", "d=50", "seed=11"]) == ("d50", {"d": "50", "seed": "11"})
    assert mod.parse_run(["base"]) == ("base", {})
    assert mod.parse_run(["n", "n_sizes=[250,500]"]) == ("n", {"n_sizes": "[250,500]"})
    with pytest.raises(SystemExit):
        mod.parse_run(["bad", "d50"])


def test_an_entry_keeps_the_changed_knobs_checks_and_measured_values():
    mod = _load()
    record = {"seed": 11, "date": "d", "commit": "c", "device": "cpu", "params": {"d": 50, "n": 2000},
              "checks": {"gain": {"value": 0.4, "passed": True}, "sym": {"value": 0.0, "passed": True}},
              "measured": {"gain": 0.4, "r2": 0.9, "curve": [1, 2]}}
    entry = mod.summary("d50", {"d": "50", "seed": "11", "other": "1e-3"}, record, 12.34)
    assert entry["changed"] == {"d": 50, "seed": 11, "other": 1e-3}   # the values used, not the strings given
    assert entry["checks"] == {"gain": 0.4, "sym": 0.0}
    assert entry["passed"] == {"gain": True, "sym": True}
    assert entry["measured"]["r2"] == 0.9 and entry["seconds"] == 12.3 and entry["seed"] == 11


def test_runs_made_elsewhere_are_read_from_their_records(tmp_path):
    import json

    mod = _load()
    recs = tmp_path / "records"
    recs.mkdir()
    record = {"seed": 11, "date": "d", "commit": "c", "device": "cpu", "params": {"d": 50}, "seconds": 7.0,
              "checks": {"gain": {"value": 0.4, "passed": True}}, "measured": {}}
    (recs / "seed11.json").write_text(json.dumps(record))
    out = tmp_path / "knobs.json"
    code = mod.main(["adaptive_sgd_quadratic", "--run", "seed11", "seed=11", "--run", "gone", "d=3",
                     "--from-records", str(recs), "--out", str(out)])
    assert code == 2  # the run without a record is reported
    runs = json.loads(out.read_text())["runs"]
    assert [r["name"] for r in runs] == ["seed11"]
    assert runs[0]["checks"] == {"gain": 0.4} and runs[0]["seconds"] == 7.0 and runs[0]["changed"] == {"seed": 11}
