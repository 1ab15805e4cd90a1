"""rfm.book.text and the records' keys: several values glued at once, the calibration's facts glued for the text,
the committed full run glued in one call, and measured values recorded under any hashable key."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import rfm.book
from rfm.book import text
from rfm.book.checks import Checks, calibration_facts
from rfm.book.records import jsonable


@pytest.fixture
def glued(monkeypatch):
    """What the chapter would glue (name -> value as shown), instead of myst-nb."""
    out = {}

    def glue(name, value, fmt=None):
        out[name] = fmt.format(value) if fmt is not None else value
        return out[name]

    monkeypatch.setattr(text, "glue", glue)
    return out


def calibration(checks, seeds=(0, 1, 2)):
    return dict(chapter="demo", profile="smoke", seeds=list(seeds), checks=checks)


GAIN = dict(kind="claim", at_least=0.5, at_most=None, rule=">= 0.5", values=[0.9, 0.62, 0.8])
ERR = dict(kind="sanity", at_least=None, at_most=1e-3, rule="<= 0.001", values=[1e-6, 4e-4, None])
FLAG = dict(kind="sanity", at_least=None, at_most=None, rule="is True", values=[True, False, True])


def test_glue_many_glues_each_value_under_its_prefixed_name_with_one_format(glued):
    shown = rfm.book.glue_many({0.1: 0.51234, "sgd": 2.0}, fmt="{:.2f}", prefix="rate_", n=5, label="spikes")
    assert shown == {"rate_0.1": "0.51", "rate_sgd": "2.00", "rate_n": "5.00", "rate_label": "spikes"}
    assert glued == shown


def test_glue_many_without_a_format_glues_the_values_unchanged(glued):
    assert rfm.book.glue_many(a=1, b="x") == {"a": 1, "b": "x"}


def test_calibration_facts_name_the_seed_closest_to_the_rule_and_its_margin():
    facts = calibration_facts(calibration({"gain": GAIN}))["gain"]
    assert facts["worst_seed"] == 1 and facts["worst"] == 0.62
    assert facts["margin"] == pytest.approx(0.12)
    assert (facts["min"], facts["median"], facts["max"]) == (0.62, 0.8, 0.9)
    assert facts["rule"] == ">= 0.5" and facts["passing"] == "3/3"


def test_a_missing_value_is_the_worst_seed_and_has_no_margin():
    facts = calibration_facts(calibration({"err": ERR}))["err"]
    assert facts["worst_seed"] == 2 and facts["worst"] is None and facts["margin"] is None
    assert facts["passing"] == "2/3" and facts["max"] == 4e-4


def test_a_bool_rule_names_the_first_failing_seed():
    facts = calibration_facts(calibration({"flag": FLAG}))["flag"]
    assert facts["worst_seed"] == 1 and facts["worst"] is False and facts["margin"] is None
    assert facts["min"] is None and facts["passing"] == "2/3"


def test_glue_calibration_glues_rule_worst_seed_and_margin_for_the_text(results, glued):
    (results / "calibration").mkdir()
    (results / "calibration" / "demo.json").write_text(json.dumps(calibration({"gain": GAIN, "flag": FLAG})))
    shown = rfm.book.glue_calibration("demo")
    assert shown["cal_gain_worst"] == "0.62" and shown["cal_gain_worst_seed"] == "1"
    assert shown["cal_gain_margin"] == "0.12" and shown["cal_gain_rule"] == ">= 0.5"
    assert (shown["cal_gain_min"], shown["cal_gain_median"], shown["cal_gain_max"]) == ("0.62", "0.8", "0.9")
    assert shown["cal_gain"] == "rule >= 0.5; worst seed 1: 0.62, margin 0.12"
    assert shown["cal_flag"] == "rule is True; worst seed 1: False" and shown["cal_flag_margin"] == "n/a"
    assert glued == shown


def test_glue_calibration_of_a_check_without_calibration_still_glues_every_name(results, glued):
    shown = rfm.book.glue_calibration("demo", ["gain"], prefix="c_")
    assert set(shown) == {"c_gain", *(f"c_gain_{f}" for f in text._FACTS)}
    assert set(shown.values()) == {rfm.book.NOT_CALIBRATED}


def test_a_check_named_like_another_checks_fact_is_an_error_not_an_overwritten_number(results, glued):
    (results / "calibration").mkdir()
    (results / "calibration" / "demo.json").write_text(json.dumps(calibration({"gain": GAIN, "gain_min": GAIN})))
    with pytest.raises(ValueError, match="'cal_gain_min'"):
        rfm.book.glue_calibration("demo")
    assert rfm.book.glue_calibration("demo", ["gain_min"])["cal_gain_min"].startswith("rule >= 0.5")


def test_glue_full_run_glues_measured_values_by_key(results, glued):
    (results / "demo").mkdir()
    full = dict(device="gpu", date="2026-11-23T00:00:00", commit="abc", seconds=120,
                measured={"r2_largest": 0.98765}, checks={"gain": dict(value=None, rule=">= 1", passed=False)})
    (results / "demo" / "full.json").write_text(json.dumps(full))
    assert rfm.book.glue_full_run("demo", measured={"full_r2": "r2_largest"}) == full
    assert glued == {"full_where": "gpu, 2026-11-23, commit abc, 2 min", "full_failed": "gain = n/a (rule >= 1)",
                     "full_r2": "0.988"}


def test_glue_full_run_without_a_run_glues_the_measured_names_too(results, glued):
    assert rfm.book.glue_full_run("demo", measured={"full_r2": "r2_largest"}) is None
    assert glued == dict.fromkeys(["full_where", "full_failed", "full_r2"], rfm.book.NO_FULL_RUN)


def test_record_takes_any_hashable_key_and_writes_it_as_its_str(tmp_path, monkeypatch):
    monkeypatch.delenv("RFM_BOOK_CHECKS", raising=False)
    checks = Checks("demo", SimpleNamespace(profile="smoke"), seed=0, output_dir=tmp_path)
    checks.claim("gain", 1.0, at_least=0.5)
    checks.record({0.1: 1.5, ("sgd", 64): 2.0}, rate={0.01: 0.3, np.int64(3): torch.tensor(0.5)})
    checks.finish()
    written = json.loads((tmp_path / "demo_smoke.json").read_text())["measured"]
    assert written == {"gain": 1.0, "0.1": 1.5, "('sgd', 64)": 2.0, "rate": {"0.01": 0.3, "3": 0.5}}


def test_record_writes_what_a_chapters_str_conversion_wrote():
    rate = {0.1: 0.5, 2: [1.0, float("nan")]}
    assert jsonable(rate) == jsonable({str(k): v for k, v in rate.items()}) == {"0.1": 0.5, "2": [1.0, None]}


def test_two_keys_written_alike_are_an_error_not_a_lost_value():
    with pytest.raises(ValueError, match="'1'"):
        jsonable({1: 0.5, "1": 0.6})
    checks = Checks("demo", SimpleNamespace(profile="smoke"))
    with pytest.raises(ValueError, match="same once written"):
        checks.record({1: 0.5}, **{"1": 0.6})
    checks.record(a=1)
    with pytest.raises(ValueError, match="already"):
        checks.record(a=2)
