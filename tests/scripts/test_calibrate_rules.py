"""scripts/calibrate.py --rule and --update-from: a committed calibration changed without running, and only when
its recorded values allow it."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load():
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("calibrate", ROOT / "scripts" / "calibrate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _calib(tmp_path):
    calib = {"chapter": "x", "seeds": [0, 1], "settings": {"n": 1},
             "checks": {"gain": {"kind": "claim", "what": "", "at_least": 0.1, "at_most": None, "rule": ">= 0.1",
                                 "values": [0.5, 0.3], "passed": [True, True]},
                        "old": {"kind": "claim", "what": "", "at_least": 0.0, "at_most": None, "rule": ">= 0",
                                "values": [1.0, 2.0], "passed": [True, True]}}}
    path = tmp_path / "x.json"
    path.write_text(json.dumps(calib))
    return path


def test_a_moved_rule_judges_the_recorded_values_again(tmp_path):
    mod, path = _load(), _calib(tmp_path)
    assert mod.move_rules(path, [("gain", "at_least", "0.4")]) == 0
    entry = json.loads(path.read_text())["checks"]["gain"]
    assert entry["at_least"] == 0.4 and entry["passed"] == [True, False] and entry["rule"] == ">= 0.4"
    with pytest.raises(SystemExit):
        mod.move_rules(path, [("gain", "above", "1")])


def _record(tmp_path, value, checks=None):
    rec = {"seed": 0, "commit": "c", "date": "d", "params": {"n": 1, "m": 2, "seed": 0, "profile": "smoke"},
           "checks": checks or {"gain": {"kind": "sanity", "value": value, "at_least": 0.1, "at_most": None}}}
    path = tmp_path / "rec.json"
    path.write_text(json.dumps(rec))
    return path


def test_update_from_a_record_that_reproduces_seed_0(tmp_path):
    mod, path = _load(), _calib(tmp_path)
    assert mod.update_from(path, _record(tmp_path, 0.5)) == 0
    calib = json.loads(path.read_text())
    assert list(calib["checks"]) == ["gain"] and calib["checks"]["gain"]["kind"] == "sanity"
    assert calib["checks"]["gain"]["values"] == [0.5, 0.3]
    assert calib["settings"] == {"n": 1, "m": 2} and calib["updated_from"][0]["dropped"] == ["old"]


def test_update_from_refuses_other_values_or_new_checks(tmp_path):
    mod, path = _load(), _calib(tmp_path)
    with pytest.raises(SystemExit, match="other values"):
        mod.update_from(path, _record(tmp_path, 0.50001))
    new = {"fresh": {"kind": "claim", "value": 1.0, "at_least": 0.0, "at_most": None}}
    with pytest.raises(SystemExit, match="new checks"):
        mod.update_from(path, _record(tmp_path, 0.5, new))


def test_update_from_within_a_tolerance_notes_the_deviation(tmp_path):
    mod, path = _load(), _calib(tmp_path)
    assert mod.update_from(path, _record(tmp_path, 0.5 + 1e-12), tolerance=(1e-9, 0.0)) == 0
    note = json.loads(path.read_text())["updated_from"][0]
    assert 0 < note["largest_relative_deviation"] < 1e-9 and note["tolerance"] == [1e-9, 0.0]
