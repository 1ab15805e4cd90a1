"""Every chapter is a pair notebooks/<slug>.py + notebooks/<slug>.ipynb, in sync, following the template.

The .py (jupytext py:percent) is the source of truth; the .ipynb twin without outputs is what Colab opens. To fix a
pair that is out of sync: `.venv/bin/jupytext --sync notebooks/<slug>.py` (and `nbstripout --keep-id` for outputs).
"""
from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
CHAPTERS = sorted(p for p in NOTEBOOKS.glob("*.py") if not p.name.startswith((".", "_")))
IDS = [p.stem for p in CHAPTERS]
REQUIRED_KNOBS = {"profile", "seed", "device", "output_dir"}
FIX = "run `.venv/bin/jupytext --sync notebooks/{name}` and commit the .ipynb"

pytestmark = pytest.mark.skipif(not CHAPTERS, reason="no chapters in notebooks/ yet")


def toc_files() -> set[str]:
    found: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                found.add(str(node["file"]).removesuffix(".py").removesuffix(".ipynb"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(yaml.safe_load((ROOT / "_toc.yml").read_text()))
    return found


def parameters_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]


def assigned_names(source: str) -> set[str]:
    names = set()
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def markdown_headings(text: str) -> list[str]:
    """ATX headings of a markdown cell, ignoring fenced code blocks (where '# ...' is a comment)."""
    headings, fence = [], None
    for line in text.splitlines():
        stripped = line.lstrip()
        marker = re.match(r"^(`{3,}|~{3,}|:{3,})", stripped)
        if marker:
            if fence is None:
                fence = marker.group(1)[0]
            elif stripped[0] == fence:
                fence = None
            continue
        if fence is None and re.match(r"^#{1,6}\s", line):
            headings.append(line)
    return headings


def comparable(nb):
    """What must agree between the two files: cell types, sources, metadata, and the kernelspec."""
    return ({k: nb.metadata.get(k) for k in ("kernelspec",)},
            [(c.cell_type, c.source, dict(c.metadata)) for c in nb.cells])


@pytest.mark.parametrize("py", CHAPTERS, ids=IDS)
def test_chapter_has_an_ipynb_twin(py):
    assert py.with_suffix(".ipynb").exists(), f"{py.name} has no .ipynb twin: {FIX.format(name=py.name)}"


@pytest.mark.parametrize("py", CHAPTERS, ids=IDS)
def test_ipynb_twin_is_in_sync_with_the_source(py, tmp_path):
    ipynb = py.with_suffix(".ipynb")
    if not ipynb.exists():
        pytest.skip("no twin (reported by test_chapter_has_an_ipynb_twin)")
    shutil.copy(py, tmp_path / py.name)
    shutil.copy(ipynb, tmp_path / ipynb.name)
    # --update keeps the committed cell ids and outputs and rewrites sources and metadata from the .py
    proc = subprocess.run([sys.executable, "-m", "jupytext", "--to", "ipynb", "--update", "--quiet", py.name],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    regenerated = nbformat.read(tmp_path / ipynb.name, as_version=4)
    committed = nbformat.read(ipynb, as_version=4)
    assert comparable(regenerated) == comparable(committed), f"{ipynb.name} is out of sync: {FIX.format(name=py.name)}"


@pytest.mark.parametrize("py", CHAPTERS, ids=IDS)
def test_ipynb_twin_has_no_outputs(py):
    ipynb = py.with_suffix(".ipynb")
    if not ipynb.exists():
        pytest.skip("no twin")
    nb = nbformat.read(ipynb, as_version=4)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, (f"{ipynb.name} has outputs in cells {dirty}: "
                       f"run `.venv/bin/nbstripout --keep-id notebooks/{ipynb.name}`")


@pytest.mark.parametrize("py", CHAPTERS, ids=IDS)
def test_chapter_has_one_parameters_cell_with_the_standard_knobs(py):
    sources = [("source", jupytext.read(py))]
    if py.with_suffix(".ipynb").exists():
        sources.append(("twin", nbformat.read(py.with_suffix(".ipynb"), as_version=4)))
    for what, nb in sources:
        cells = parameters_cells(nb)
        assert len(cells) == 1, f"{py.name} ({what}): {len(cells)} cells tagged 'parameters', expected exactly one"
        missing = REQUIRED_KNOBS - assigned_names(cells[0].source)
        assert not missing, f"{py.name} ({what}): the parameters cell does not set {sorted(missing)}"


@pytest.mark.parametrize("py", CHAPTERS, ids=IDS)
def test_parameters_cell_comments_contain_no_equals_sign(py):
    """papermill reads the parameters cell line by line and cannot parse `x = 1  # a = b` (its rerun warnings and
    `papermill --help-notebook` then miss the parameter)."""
    cell = parameters_cells(jupytext.read(py))
    if len(cell) != 1:
        pytest.skip("reported by test_chapter_has_one_parameters_cell_with_the_standard_knobs")
    bad = [line for line in cell[0].source.splitlines() if "#" in line and "=" in line.split("#", 1)[1]]
    assert not bad, f"{py.name}: reword these parameter comments without '=':\n" + "\n".join(bad)


@pytest.mark.parametrize("py", CHAPTERS, ids=IDS)
def test_chapter_has_a_kernelspec_and_a_checks_section(py):
    nb = jupytext.read(py)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", \
        f"{py.name}: the jupytext header needs kernelspec name python3 (launch buttons and execution use it)"
    headings = [h for c in nb.cells if c.cell_type == "markdown" for h in markdown_headings(c.source)]
    assert any(re.match(r"^#{2,6}\s+Checks\b", h) for h in headings), f"{py.name}: no '## Checks' section"
    assert sum(1 for h in headings if re.match(r"^#\s", h)) == 1, f"{py.name}: needs exactly one '# Title' heading"
    numbered = [h for h in headings if re.match(r"^#{2,6}\s+\d+(\.\d+)*\.?\s", h)]
    assert not numbered, f"{py.name}: the book numbers sections itself; drop the number of {numbered}"


@pytest.mark.parametrize("py", CHAPTERS, ids=IDS)
def test_chapter_is_listed_in_the_toc(py):
    assert f"notebooks/{py.stem}" in toc_files(), f"add `- file: notebooks/{py.stem}` to a part of _toc.yml"


def test_every_toc_file_exists():
    missing = []
    for entry in sorted(toc_files()):
        if not any((ROOT / f"{entry}{ext}").exists() for ext in (".md", ".py", ".ipynb")):
            missing.append(entry)
    assert not missing, f"_toc.yml lists files that do not exist: {missing}"
