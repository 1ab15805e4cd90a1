"""rfm.book.calibration_values: one measured value's per-seed values in a chapter's committed calibration."""
import json

import rfm.book
from rfm.book import records


def test_the_committed_values_in_seed_order_with_missing_seeds_left_out(monkeypatch):
    monkeypatch.setattr(records, "load_calibration", lambda chapter: {"measured": {"gain": [0.5, None, 0.25]}})
    assert rfm.book.calibration_values("some_chapter", "gain") == [0.5, 0.25]
    assert rfm.book.calibration_values("some_chapter", "not_recorded") == []


def test_no_calibration_gives_no_values(monkeypatch):
    monkeypatch.setattr(records, "load_calibration", lambda chapter: None)
    assert rfm.book.calibration_values("some_chapter", "gain") == []


def test_a_committed_calibration_is_read_as_it_is():
    path = records.RESULTS / "calibration" / "deep_learning_phenomena.json"
    committed = json.loads(path.read_text())["measured"]["grok_faintest_found"]
    assert rfm.book.calibration_values("deep_learning_phenomena", "grok_faintest_found") == committed


def test_cpu_build_names_the_processor_and_versions():
    import numpy
    import torch

    from rfm.book import cpu_build

    build = cpu_build()
    assert set(build) == {"cpu", "capability", "torch", "numpy"}
    assert build["cpu"] and isinstance(build["cpu"], str)
    assert build["torch"] == torch.__version__ and build["numpy"] == numpy.__version__
    assert build["capability"] == torch.backends.cpu.get_cpu_capability()
