"""The headless rerun command works from a chapter's jupytext source, with parameter overrides."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "tiny_chapter.py"


@pytest.fixture(scope="module")
def rerun(tmp_path_factory):
    out = tmp_path_factory.mktemp("rerun") / "tiny_chapter-custom"
    cmd = [sys.executable, str(ROOT / "scripts" / "rerun.py"), str(FIXTURE),
           "-p", "n", "120", "-p", "seed", "3", "-p", "iters", "1", "--out", str(out)]
    # MPLBACKEND=Agg, as headless servers often set it: the figures must still reach the executed notebook
    env = dict(os.environ, MPLBACKEND="Agg")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)
    assert proc.returncode == 0, f"rerun failed:\n{proc.stdout}\n{proc.stderr}"
    return out, proc


def test_rerun_writes_the_executed_notebook_with_the_parameters(rerun):
    out, _ = rerun
    nb = nbformat.read(out / "tiny_chapter.ipynb", as_version=4)
    assert nb.metadata.papermill.parameters == {"n": 120, "seed": 3, "iters": 1, "output_dir": str(out)}
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and "n = 120" in injected[0].source
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []


def test_rerun_writes_the_measured_values_with_the_overrides(rerun):
    out, _ = rerun
    record = json.loads((out / "tiny_chapter_smoke.json").read_text())
    assert record["chapter"] == "tiny_chapter"
    assert record["profile"] == "smoke"
    assert record["params"]["n"] == 120 and record["params"]["iters"] == 1
    assert record["seed"] == 3
    assert set(record["measured"]) == {"r2", "mass_x1x2", "mass_gain", "r2_finite"}
    assert record["checks"]["mass_gain"]["kind"] == "claim" and record["checks"]["r2_finite"]["kind"] == "sanity"
    assert record["checks"]["mass_gain"]["passed"] is True


def test_rerun_writes_the_figures(rerun):
    out, _ = rerun
    import matplotlib.image as mpimg

    saved = out / "tiny_chapter_agop_diagonal.png"
    extracted = sorted((out / "figures").glob("cell*.png"))
    assert saved.exists() and len(extracted) == 1
    for png in [saved, *extracted]:
        img = mpimg.imread(png)
        assert img.shape[0] > 100 and img.shape[1] > 100 and img.std() > 0.01


def test_rerun_rejects_a_parameter_the_chapter_does_not_have(tmp_path):
    cmd = [sys.executable, str(ROOT / "scripts" / "rerun.py"), str(FIXTURE), "-p", "width", "3",
           "--out", str(tmp_path / "x")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode != 0
    assert "'width'" in proc.stderr and "profile" in proc.stderr
