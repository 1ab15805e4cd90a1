"""The convolutional_nfa chapter's CIFAR-10 section (for readers online) runs end to end: on a stand-in for
torchvision, installed on disk for the chapter's kernel, that serves random 32 x 32 x 3 images."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FAKE_DATASETS = textwrap.dedent('''
    import numpy as np

    class CIFAR10:
        """torchvision.datasets.CIFAR10's format: .data (N, 32, 32, 3) uint8 and .targets, a list of labels."""

        def __init__(self, root, train=True, download=False, transform=None):
            n = 60 if train else 30
            rng = np.random.default_rng(0 if train else 1)
            self.data = rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
            self.targets = [int(i % 10) for i in range(n)]
''')


@pytest.mark.slow  # reruns the chapter (minutes on 2 cores): not in `make unit`
def test_the_cifar_section_runs_on_a_stand_in_for_torchvision(tmp_path):
    fake = tmp_path / "site" / "torchvision"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("from . import datasets\n")
    (fake / "datasets.py").write_text(FAKE_DATASETS)
    out = tmp_path / "out"
    cmd = [sys.executable, str(ROOT / "scripts" / "rerun.py"), str(ROOT / "notebooks" / "convolutional_nfa.py"),
           "-p", "cifar_root", str(tmp_path / "data"), "-p", "n_cifar", "40", "-p", "n_bars", "100",
           "-p", "epochs", "2", "-p", "n_star", "10", "--out", str(out)]
    env = dict(os.environ, MPLBACKEND="Agg", RFM_BOOK_CHECKS="record", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)
    assert proc.returncode == 0, f"rerun failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    record = json.loads((out / "convolutional_nfa_smoke.json").read_text())
    rows = record["measured"]["cifar_cnfa"]
    assert [r["layer"] for r in rows] == [1, 2, 3, 4]
    for r in rows:
        for key in ("init", "trained", "spectrum-matched"):
            assert math.isfinite(r[key]) and -1.0 <= r[key] <= 1.0
