"""The lint set-up: one ruff version for `make lint` and pre-commit, run by CI before the tests."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_make_lint_and_pre_commit_pin_the_same_ruff():
    pinned = re.search(r"^ruff==(\S+)$", (ROOT / "requirements" / "lint.txt").read_text(), re.M).group(1)
    hook = re.search(r"astral-sh/ruff-pre-commit\n\s+rev: v(\S+)", (ROOT / ".pre-commit-config.yaml").read_text())
    assert hook.group(1) == pinned


def test_ci_lints_before_it_tests():
    steps = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("step ")]
    names = [line.split('"')[1] for line in steps]
    assert names.index("make lint") < names.index("make test")


def test_ruff_checks_the_rules_the_contributing_guide_names_at_120_characters():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    ruff = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]
    assert ruff["line-length"] == 120 and ruff["target-version"] == "py310"
    assert {"E", "F", "W", "I", "B", "UP", "NPY"} <= set(ruff["lint"]["select"])
