"""Every chapter states its Checks through rfm.book.Checks and has a committed ten-seed calibration that its rules
pass at every seed; committed full-profile runs carry what a reader needs to trust them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rfm.book.checks import Check

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted(p for p in (ROOT / "notebooks").glob("*.py") if not p.name.startswith((".", "_")))
#: Chapters with no claim: nothing in them tests their paper (whose text could not be read), and they say so first.
NO_CLAIM = {"adaptive_sgd_quadratic": "Nothing in this chapter tests the paper."}


@pytest.mark.parametrize("py", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_states_its_checks_through_rfm_book_checks(py):
    src = py.read_text()
    assert f'rfm.book.Checks("{py.stem}"' in src, f"{py.name}: the Checks must go through rfm.book.Checks"
    assert "checks.finish()" in src and "checks.report()" in src
    if py.stem in NO_CLAIM:  # only sanity checks of the chapter's own construction, declared at the top
        assert "checks.claim(" not in src and NO_CLAIM[py.stem] in src[:3000]
    else:
        assert "checks.claim(" in src, f"{py.name}: no claim against a control"


@pytest.mark.parametrize("py", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_has_a_ten_seed_calibration_that_its_rules_pass(py):
    path = ROOT / "results" / "calibration" / f"{py.stem}.json"
    assert path.exists(), f"no calibration: run `make calibrate CHAPTER={py.stem}`"
    calib = json.loads(path.read_text())
    assert calib["chapter"] == py.stem and calib["profile"] == "smoke"
    assert calib["seeds"] == list(range(10)), f"calibrated seeds {calib['seeds']}, not 0-9"
    assert py.stem in NO_CLAIM or any(c["kind"] == "claim" for c in calib["checks"].values())
    for name, c in calib["checks"].items():
        rule = Check(name, c["kind"], None, c["at_least"], c["at_most"])
        assert len(c["values"]) == 10, f"{name}: {len(c['values'])} values"
        failing = [s for s, v in zip(calib["seeds"], c["values"]) if not rule.passes(v)]
        assert not failing, f"{py.stem}: {name} {rule.rule} fails at calibrated seeds {failing}"


@pytest.mark.parametrize("path", sorted((ROOT / "results").glob("*/full.json")), ids=lambda p: p.parent.name)
def test_committed_full_runs_say_where_and_when_they_ran(path):
    record = json.loads(path.read_text())
    assert record["profile"] == "full" and record["chapter"] == path.parent.name
    for key in ("device", "date", "commit", "params", "checks", "seconds"):
        assert record.get(key) not in (None, ""), f"{path}: no {key}"
    for name, c in record["checks"].items():
        rule = Check(name, c["kind"], c["value"], c["at_least"], c["at_most"])
        assert rule.passes() == c["passed"], f"{path}: {name}'s pass/fail disagrees with its rule"
