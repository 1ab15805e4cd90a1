"""rfm.book.Checks: rules, kinds, the calibration it is held to, record mode, and the calibration script."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import rfm.book
from rfm.book.checks import Check, Checks, calibration_from_records

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "tiny_chapter.py"


P = SimpleNamespace(profile="smoke", n=100, d=5)


def test_rules_pass_and_fail_at_their_bounds():
    assert Check("a", "claim", 0.5, at_least=0.5).passes()
    assert not Check("a", "claim", 0.49, at_least=0.5).passes()
    assert Check("a", "claim", 2, at_most=2).passes() and not Check("a", "claim", 2.1, at_most=2).passes()
    assert Check("a", "claim", 1.0, at_least=0, at_most=1).rule == "in [0, 1]"
    assert Check("a", "sanity", True).passes() and not Check("a", "sanity", False).passes()
    assert not Check("a", "claim", math.nan, at_least=0).passes()
    assert Check("a", "claim", 0.7, at_least=0.5).room(0.7) == pytest.approx(0.2)
    assert Check("a", "claim", 0.7, at_least=0.5, at_most=0.75).room(0.7) == pytest.approx(0.05)


def test_a_failed_claim_is_raised_by_finish_with_its_name_and_rule(results):
    checks = Checks("demo", P)
    assert checks.claim("gain", 0.1, at_least=0.2, what="RFM minus Laplace") is False
    checks.sanity("identity", 1e-9, at_most=1e-6)
    with pytest.raises(AssertionError, match=r"claim gain = 0.1, needs >= 0.2 \(RFM minus Laplace\)"):
        checks.finish()


def test_record_mode_writes_the_failed_check_and_does_not_raise(results, tmp_path, monkeypatch):
    monkeypatch.setenv("RFM_BOOK_CHECKS", "record")
    out = tmp_path / "out"
    checks = Checks("demo", P, seed=7, output_dir=out)
    checks.claim("gain", 0.1, at_least=0.2)
    checks.record(curve=[1.0, float("nan")])
    record = checks.finish()
    assert record["checks"]["gain"]["passed"] is False
    written = json.loads((out / "demo_smoke.json").read_text())
    assert written["seed"] == 7 and written["measured"]["curve"] == [1.0, None]  # NaN is written as null


def test_bad_statements_are_rejected_with_the_name():
    checks = Checks("demo", P)
    with pytest.raises(ValueError, match="at_least= and/or at_most="):
        checks.claim("gain", 0.3)
    with pytest.raises(TypeError, match="'gain'.*number or a bool"):
        checks.claim("gain", "high", at_least=0)
    with pytest.raises(ValueError, match="identifier"):
        checks.claim("test R2", 0.3, at_least=0)
    checks.claim("gain", 0.3, at_least=0)
    with pytest.raises(ValueError, match="stated twice"):
        checks.sanity("gain", 0.3, at_least=0)
    with pytest.raises(ValueError, match="above at_most"):
        checks.claim("band", 0.3, at_least=1, at_most=0)
    with pytest.raises(ValueError, match="no checks"):
        Checks("empty", P).finish()
    with pytest.raises(ValueError, match="path separator"):
        Checks("a/b", P)


def test_a_zero_dimensional_tensor_is_a_number():
    import torch

    checks = Checks("demo", P)
    assert checks.claim("gain", torch.tensor(0.5), at_least=0.2)
    assert isinstance(checks.checks["gain"].value, float)


def _records(values, settings=None, rule=None):
    rule = rule or dict(at_least=0.2, at_most=None)
    return [dict(chapter="demo", profile="smoke", seed=s, device="cpu", params=dict(profile="smoke", n=100, d=5,
                 **(settings or {})), measured=dict(gain=v, r2=0.9),
                 checks=dict(gain=dict(kind="claim", value=v, what="w", **rule))) for s, v in enumerate(values)]


def test_calibration_from_records_summarises_each_check_over_seeds():
    calib = calibration_from_records(_records([0.5, 0.3, 0.4]), seconds={0: 3.0})
    gain = calib["checks"]["gain"]
    assert calib["seeds"] == [0, 1, 2] and calib["settings"] == {"n": 100, "d": 5}
    assert (gain["min"], gain["median"], gain["max"]) == (0.3, 0.4, 0.5)
    assert gain["passed"] == [True, True, True] and calib["measured"]["r2"] == [0.9, 0.9, 0.9]
    with pytest.raises(ValueError, match="other settings"):
        calibration_from_records(_records([0.5])[:1] + _records([0.5, 0.4], settings=dict(extra=1))[1:])


def test_at_the_calibrated_settings_a_threshold_must_hold_at_every_seed(results):
    calib = calibration_from_records(_records([0.5, 0.25, 0.4]))
    (results / "calibration").mkdir()
    (results / "calibration" / "demo.json").write_text(json.dumps(calib))
    checks = Checks("demo", P)
    checks.claim("gain", 0.6, at_least=0.3)  # passes in this run, but seed 1 measured 0.25
    assert checks.at_calibrated_settings()
    with pytest.raises(AssertionError, match=r"fails at calibrated seed\(s\) \[1\]"):
        checks.finish()
    checks = Checks("demo", P)
    checks.claim("gain", 0.6, at_least=0.2)
    checks.claim("other", 1.0, at_least=0.5)  # stated in the chapter but never calibrated
    with pytest.raises(AssertionError, match="other is not in results/calibration/demo.json"):
        checks.finish()


def test_other_settings_are_only_compared_not_held_to_the_calibration(results):
    (results / "calibration").mkdir()
    (results / "calibration" / "demo.json").write_text(json.dumps(calibration_from_records(_records([0.25]))))
    checks = Checks("demo", SimpleNamespace(profile="smoke", n=400, d=5))
    checks.claim("gain", 0.6, at_least=0.3)
    assert not checks.at_calibrated_settings()
    checks.finish()  # the reader's own n: no calibration to be stale against


def test_the_table_shows_seeds_and_the_full_profile_run(results, capsys):
    (results / "calibration").mkdir()
    (results / "calibration" / "demo.json").write_text(json.dumps(calibration_from_records(_records([0.5, 0.3]))))
    (results / "demo").mkdir()
    full = dict(device="NVIDIA H100", date="2026-11-23T00:00:00", commit="abc", seconds=600,
                checks=dict(gain=dict(kind="claim", value=0.1, rule=">= 0.2", passed=False, what="")))
    (results / "demo" / "full.json").write_text(json.dumps(full))
    checks = Checks("demo", P)
    checks.claim("gain", 0.45, at_least=0.2)
    rows = checks.report()
    assert rows[0]["seeds_min"] == 0.3 and rows[0]["worst_room"] == pytest.approx(0.1)
    assert rows[0]["seeds_passing"] == "2/2" and rows[0]["full"] == 0.1 and rows[0]["full_passes"] is False
    shown = capsys.readouterr().out
    assert "NVIDIA H100" in shown and "seeds 0–1" in shown and "**NO**" in shown


def test_without_committed_files_the_table_says_so(results, capsys):
    checks = Checks("demo", P)
    checks.claim("gain", 0.45, at_least=0.2)
    checks.report()
    shown = capsys.readouterr().out
    assert "No calibration is committed" in shown and "No full-profile run is committed" in shown


def test_installed_package_downloads_committed_results(monkeypatch, tmp_path):
    """Without a checkout (a pip install on Colab), results come from the book's repository URL."""
    from rfm.book import records as book

    site = tmp_path / "site"
    (site / "results" / "demo").mkdir(parents=True)
    (site / "results" / "demo" / "full.json").write_text(json.dumps({"device": "gpu"}))
    monkeypatch.setattr(book, "ROOT", tmp_path / "lib")
    monkeypatch.setattr(book, "RESULTS", tmp_path / "lib" / "results")
    monkeypatch.setenv("RFM_BOOK_RESULTS_URL", (site / "results").as_uri())
    monkeypatch.delenv("RFM_BOOK_RESULTS", raising=False)
    book._DOWNLOADED.clear()
    assert book.load_results("demo") == {"device": "gpu"}
    assert book.load_results("absent") is None
    book._DOWNLOADED.clear()


def test_offline_the_table_says_the_committed_files_could_not_be_downloaded(monkeypatch, tmp_path, capsys):
    """An installed package without network: the Checks table says where it tried, not "No calibration is
    committed" (which is what it said, although the calibration is committed)."""
    from rfm.book import records as book

    monkeypatch.setattr(book, "ROOT", tmp_path / "lib")
    monkeypatch.setattr(book, "RESULTS", tmp_path / "lib" / "results")
    monkeypatch.setenv("RFM_BOOK_RESULTS_URL", "http://127.0.0.1:9/results")  # nothing listens: refused at once
    monkeypatch.delenv("RFM_BOOK_RESULTS", raising=False)
    monkeypatch.delenv("RFM_BOOK_CHECKS", raising=False)
    book._DOWNLOADED.clear()
    book._FAILED.clear()
    try:
        checks = Checks("demo", P)
        checks.claim("gain", 0.45, at_least=0.2)
        checks.report()
        shown = capsys.readouterr().out
        assert "No calibration is committed" not in shown and "No full-profile run is committed" not in shown
        assert ("The calibration (`results/calibration/demo.json`) could not be downloaded from "
                "http://127.0.0.1:9/results/calibration/demo.json (") in shown
        assert "could not be downloaded from http://127.0.0.1:9/results/demo/full.json" in shown
        assert "RFM_BOOK_RESULTS" in shown
        from rfm.book import text
        glued = {}
        monkeypatch.setattr(text, "glue", lambda name, value, fmt=None: glued.__setitem__(name, value))
        assert text.glue_full_run("demo") is None
        assert glued["full_where"] == text.NO_FULL_RUN_DOWNLOAD
    finally:
        book._DOWNLOADED.clear()
        book._FAILED.clear()


def test_a_file_absent_from_the_repository_is_not_committed_not_a_failed_download(monkeypatch, tmp_path):
    from rfm.book import records as book

    (tmp_path / "site" / "results").mkdir(parents=True)
    monkeypatch.setattr(book, "ROOT", tmp_path / "lib")
    monkeypatch.setattr(book, "RESULTS", tmp_path / "lib" / "results")
    monkeypatch.setenv("RFM_BOOK_RESULTS_URL", (tmp_path / "site" / "results").as_uri())
    monkeypatch.delenv("RFM_BOOK_RESULTS", raising=False)
    book._DOWNLOADED.clear()
    book._FAILED.clear()
    try:
        assert book.load_calibration("demo") is None and book.download_failure("calibration/demo.json") is None
        assert book.missing_committed("calibration/demo.json", "calibration") == \
            "No calibration is committed (`results/calibration/demo.json`)."
    finally:
        book._DOWNLOADED.clear()


def test_glue_formats_and_returns_the_value():
    assert rfm.book.glue("demo_value", 0.123456, "{:.3f}") == "0.123"


def test_glue_full_run_glues_the_committed_run_or_says_there_is_none(results, monkeypatch):
    glued = {}
    monkeypatch.setattr(rfm.book.text, "glue", lambda name, value, fmt=None: glued.__setitem__(name, value))
    assert rfm.book.glue_full_run("demo", {"full_gain": lambda f: f"{f['measured']['gain']:.2f}"}) is None
    assert glued == dict.fromkeys(["full_where", "full_failed", "full_gain"], rfm.book.NO_FULL_RUN)
    (results / "demo").mkdir()
    full = dict(device="NVIDIA H100", date="2026-11-23T00:00:00", commit="abc", seconds=600, measured={"gain": 0.5},
                checks=dict(gain=dict(kind="claim", value=0.1, rule=">= 0.2", passed=False, what=""),
                            ok=dict(kind="claim", value=1.0, rule=">= 0.5", passed=True, what="")))
    (results / "demo" / "full.json").write_text(json.dumps(full))
    assert rfm.book.glue_full_run("demo", {"full_gain": lambda f: f"{f['measured']['gain']:.2f}"}) == full
    assert glued == {"full_where": "NVIDIA H100, 2026-11-23, commit abc, 10 min",
                     "full_failed": "gain = 0.1 (rule >= 0.2)", "full_gain": "0.50"}


@pytest.mark.slow  # runs the fixture chapter through papermill: not in `make unit`
def test_calibrate_script_runs_each_seed_and_writes_the_table(tmp_path):
    out = tmp_path / "calib.json"
    cmd = [sys.executable, str(ROOT / "scripts" / "calibrate.py"), str(FIXTURE), "--seeds", "2", "--jobs", "2",
           "-p", "n", "150", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calib = json.loads(out.read_text())
    assert calib["seeds"] == [0, 1] and calib["settings"]["n"] == 150
    assert set(calib["checks"]) == {"mass_gain", "r2_finite"}
    assert len(calib["checks"]["mass_gain"]["values"]) == 2 and "mass_gain" in proc.stdout


@pytest.mark.slow  # runs the fixture chapter through papermill: not in `make unit`
def test_full_run_script_commits_the_record_and_figures(tmp_path):
    # the executed notebook goes under tmp_path too: the test leaves nothing in the checkout (no out/tiny_chapter-full)
    cmd = [sys.executable, str(ROOT / "scripts" / "full_run.py"), str(FIXTURE), "-p", "n", "400",
           "--results", str(tmp_path / "results"), "--out", str(tmp_path / "out")]
    existed = (ROOT / "out" / "tiny_chapter-full").exists()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "out" / "tiny_chapter.ipynb").exists()
    assert existed or not (ROOT / "out" / "tiny_chapter-full").exists()
    tmp_path = tmp_path / "results"
    record = json.loads((tmp_path / "tiny_chapter" / "full.json").read_text())
    assert record["profile"] == "full" and record["params"]["n"] == 400 and record["seconds"] > 0
    assert set(record["checks"]) == {"mass_gain", "r2_finite"}
    assert (tmp_path / "tiny_chapter" / "full_figures" / "tiny_chapter_agop_diagonal.png").exists()


def test_a_calibration_made_at_other_settings_than_the_defaults_is_stale(results):
    (results / "calibration").mkdir()
    (results / "calibration" / "demo.json").write_text(json.dumps(calibration_from_records(_records([0.5]))))
    P_now = rfm.book.settings("smoke", smoke=dict(n=200, d=5), full=dict(n=1000, d=5))  # the chapter's n changed
    checks = Checks("demo", P_now)
    checks.claim("gain", 0.6, at_least=0.2)
    with pytest.raises(AssertionError, match="other settings than this profile's defaults"):
        checks.finish()
    P_reader = rfm.book.settings("smoke", smoke=dict(n=200, d=5), full=dict(n=1000, d=5), n=400)
    assert P_reader.overridden == ["n"] and P_reader.defaults["n"] == 200 and "_defaults" not in vars(P_reader)
    checks = Checks("demo", P_reader)
    checks.claim("gain", 0.6, at_least=0.2)
    checks.finish()  # a reader's own settings are compared with the calibration, not held to it


def test_glue_largest_run_judges_the_full_run_with_this_runs_rules(results):
    from rfm.book import glue_largest_run

    checks = Checks("demo", P)
    checks.claim("gain", 0.5, at_least=0.1)  # this run's rule (moved since the full run, which used 0.3)
    checks.claim("other", 0.5, at_least=0.1)
    checks.sanity("identity", 1e-9, at_most=1e-6)
    full = {"device": "cpu", "commit": "abc", "checks": {
        "gain": {"kind": "claim", "value": 0.2, "rule": ">= 0.3", "passed": False},
        "other": {"kind": "claim", "value": 0.05, "rule": ">= 0.1", "passed": False},
        "old": {"kind": "claim", "value": 1.0, "rule": ">= 2", "passed": False},  # not checked in this run
        "identity": {"kind": "sanity", "value": 1.0, "rule": "<= 1e-06", "passed": False}}}
    out = glue_largest_run(full, checks, label="the full profile (GD)")
    assert out["passed"] == ["gain"]  # 0.2 passes this run's rule 0.1
    assert out["failed"] == {"other": (0.05, ">= 0.1"), "old": (1.0, ">= 2")}  # sanity checks do not count
    assert out["scale"] == "the full profile (GD), cpu, commit abc"
    mine = glue_largest_run(None, checks)  # no full run: this run is the largest
    assert mine["passed"] == ["gain", "other"] and mine["failed"] == {} and "no full run" in mine["scale"]
