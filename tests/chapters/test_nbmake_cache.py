"""nbmake through the book's execution cache (conftest.py, scripts/_bookcache.py): one executor, one record.

The chapters themselves are tested by the nbmake items of notebooks/*.ipynb (``make test``); here, the plumbing that
lets nbmake check the book's executions instead of running every chapter a second time, on small notebooks."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import _bookcache as bc  # noqa: E402


def plugin():
    """The root conftest.py as a module of its own (pytest has loaded it already; this copy has fresh state)."""
    spec = importlib.util.spec_from_file_location("rfm_nbmake_plugin", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def summary_line(chapter: str) -> str:
    return f"[{chapter} | profile=smoke | cpu (x86_64, 2 cores)] checks=3, failed=0\n"


def chapter_nb(stdout: str) -> nbformat.NotebookNode:
    nb = new_notebook(cells=[new_markdown_cell("# t"), new_code_cell("print(1)")])
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text=stdout)]
    return nb


def test_twin_maps_py_and_ipynb_both_ways():
    assert bc.twin(Path("notebooks/a.py")) == Path("notebooks/a.ipynb")
    assert bc.twin(Path("notebooks/a.ipynb")) == Path("notebooks/a.py")


def test_outputs_are_laid_onto_the_source_as_the_book_reads_it():
    source = new_notebook(cells=[new_markdown_cell("# t"), new_code_cell("x = 1"), new_code_cell("print(x)")])
    source.cells[1].metadata["tags"] = ["parameters"]
    executed = new_notebook(cells=[new_markdown_cell("# t"), new_code_cell("x = 1\n"), new_code_cell("print(x)")])
    executed.cells[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    executed.cells[2].execution_count = 2
    executed.cells[2].metadata["execution"] = {"shell.execute_reply": "t"}
    merged = bc._outputs_onto(source, executed, "t")
    assert merged.cells[2].outputs[0]["text"] == "1\n" and merged.cells[2].execution_count == 2
    # the source's cell metadata is kept (jupyter-cache hashes it), nbclient's timings are not copied
    assert merged.cells[1].metadata == {"tags": ["parameters"]} and "execution" not in merged.cells[2].metadata


def test_a_twin_out_of_sync_is_an_error_naming_the_fix():
    source = new_notebook(cells=[new_code_cell("x = 1")])
    executed = new_notebook(cells=[new_code_cell("x = 2")])
    with pytest.raises(ValueError, match="make sync"):
        bc._outputs_onto(source, executed, "t")
    with pytest.raises(ValueError, match="make sync"):
        bc._outputs_onto(source, new_notebook(cells=[]), "t")


@pytest.fixture
def cached_run(monkeypatch):
    """The plugin's NotebookRun, with the cache lookup and the executor replaced by stand-ins."""
    module = plugin()
    calls = {"executed": 0}

    def no_execution(*args, **kwargs):
        calls["executed"] += 1
        raise AssertionError("a cached chapter must not be executed again")

    monkeypatch.setattr(bc, "execute_into_cache", no_execution)
    return module, module._cached_run_class(), calls


def chapter_path() -> Path:
    return bc.chapters()[0].with_suffix(".ipynb")


@pytest.mark.skipif(not bc.chapters(), reason="no chapters yet")
def test_a_cached_chapter_with_its_checks_summary_passes_without_executing(cached_run, monkeypatch):
    module, run_class, calls = cached_run
    slug = chapter_path().stem
    nb = chapter_nb(summary_line(slug))
    nb.metadata["_cache_record"] = {"pk": 1, "execution_seconds": 12.0}
    monkeypatch.setattr(bc, "cached_notebook", lambda path: nb)
    result = run_class(chapter_path(), 900).execute()
    assert result.error is None and result.nb is nb and calls["executed"] == 0


@pytest.mark.skipif(not bc.chapters(), reason="no chapters yet")
@pytest.mark.parametrize("stdout, expected", [
    ("no summary here\n", "no Checks summary line"),
    (summary_line("another_chapter"), "expected"),
    ("Traceback (most recent call last):\n  boom\n", "no Checks summary line"),
])
def test_a_cached_chapter_without_a_valid_summary_fails(cached_run, monkeypatch, stdout, expected):
    module, run_class, calls = cached_run
    nb = chapter_nb(stdout)
    nb.metadata["_cache_record"] = {"pk": 1, "execution_seconds": 1.0}
    monkeypatch.setattr(bc, "cached_notebook", lambda path: nb)
    result = run_class(chapter_path(), 900).execute()
    assert result.error is not None and expected in result.error.trace


@pytest.mark.skipif(not bc.chapters(), reason="no chapters yet")
def test_a_chapter_that_failed_in_the_shared_execution_fails_without_a_second_run(cached_run, monkeypatch):
    module, run_class, calls = cached_run
    source = bc.twin(chapter_path()).resolve()
    module._state["failures"][source] = "ZeroDivisionError: division by zero\ncell 3"
    monkeypatch.setattr(bc, "cached_notebook", lambda path: pytest.fail("the failure is reported first"))
    result = run_class(chapter_path(), 900).execute()
    assert "ZeroDivisionError" in result.error.summary and calls["executed"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("code, ok", [("print(6 * 7)", True), ("1 / 0", False)])
def test_a_notebook_outside_the_chapters_is_plain_nbmake(tmp_path, code, ok):
    path = tmp_path / "other.ipynb"
    nb = new_notebook(cells=[new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    result = plugin()._cached_run_class()(path, 60).execute()
    assert (result.error is None) == ok
    if ok:
        assert result.nb.cells[0].outputs[0]["text"] == "42\n"
    else:
        assert "ZeroDivisionError" in result.error.trace


def test_nbmake_collects_every_chapter_twin_in_make_test():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "notebooks" in options["testpaths"] and "--nbmake" in options["addopts"]
    assert "--nbmake-timeout=900" in options["addopts"] and bc.TIMEOUT == 900
