"""The headless rerun command works from a chapter's jupytext source, with parameter overrides."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
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


def _rerun_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("rerun_script", ROOT / "scripts" / "rerun.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("text, value", [
    ("None", None), ("null", None), ("True", True), ("false", False), ("3", 3), ("-2", -2), ("0.5", 0.5),
    ("1e-3", 1e-3), ("cuda", "cuda"), ('"3"', "3"), ("'smoke'", "smoke"), ("[128, 128]", [128, 128]),
    ("[0.01, 0.1]", [0.01, 0.1]), ("{binary: 0.1, 10-class: 0.5}", {"binary": 0.1, "10-class": 0.5}),
    ("[add, sub]", ["add", "sub"]), ("2026-01-01", "2026-01-01"), ("a: b: c", "a: b: c")])
def test_parameter_values_are_read_as_yaml(text, value):
    assert _rerun_module().parse_value(text) == value


def test_yaml_parameters_must_be_a_mapping():
    rerun = _rerun_module()
    assert rerun.parse_yaml_parameters("{seed: 3, n_sizes: [250, 500]}", "-y") == {"seed": 3, "n_sizes": [250, 500]}
    with pytest.raises(SystemExit):
        rerun.parse_yaml_parameters("[1, 2]", "-y")


def test_lists_and_mappings_reach_the_notebook_as_python_literals():
    from papermill.translators import PythonTranslator

    code = PythonTranslator.codify({"n_sizes": [250, 500], "lr": {"binary": 0.1}})
    namespace = {}
    exec(code, namespace)
    assert namespace["n_sizes"] == [250, 500] and namespace["lr"] == {"binary": 0.1}


def test_rerun_without_out_writes_everything_to_out_slug_profile(tmp_path):
    """The default route: no --out, values from -y and -f; the notebook, figures and JSON land in out/<slug>-smoke."""
    params = tmp_path / "params.yml"
    params.write_text("n: 120\niters: 1\n")
    cmd = [sys.executable, str(ROOT / "scripts" / "rerun.py"), str(FIXTURE), "-f", str(params), "-y", "{seed: 2}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    out = tmp_path / "out" / "tiny_chapter-smoke"
    nb = nbformat.read(out / "tiny_chapter.ipynb", as_version=4)
    assert {k: nb.metadata.papermill.parameters[k] for k in ("n", "iters", "seed")} == {"n": 120, "iters": 1, "seed": 2}
    assert json.loads((out / "tiny_chapter_smoke.json").read_text())["seed"] == 2
    assert (out / "tiny_chapter_agop_diagonal.png").exists() and list((out / "figures").glob("cell*.png"))


def test_papermill_help_notebook_shows_the_parameter_types(tmp_path):
    """Parameters carry (string) annotations that `papermill --help-notebook` reads."""
    import jupytext

    ipynb = tmp_path / "tiny_chapter.ipynb"
    jupytext.write(jupytext.read(FIXTURE), ipynb)
    papermill = Path(sys.executable).parent / "papermill"
    proc = subprocess.run([str(papermill), "--help-notebook", str(ipynb)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "n: Optional[int] (default None)" in proc.stdout and "profile: str (default \"smoke\")" in proc.stdout
    assert "Unknown type" not in proc.stdout


def test_rerun_rejects_a_value_of_the_wrong_type_before_running(tmp_path):
    """`-p seed abc` used to start the kernel and fail in a later cell with a TypeError; now nothing runs."""
    out = tmp_path / "x"
    cmd = [sys.executable, str(ROOT / "scripts" / "rerun.py"), str(FIXTURE), "-p", "seed", "abc", "-p", "n", "1.5",
           "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "seed = 'abc' (str) does not fit its declared type 'int'" in proc.stderr
    assert "n = 1.5 (float) does not fit its declared type 'Optional[int]'" in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("value, annotation, fits", [
    (3, "int", True), ("abc", "int", False), (True, "int", False), (3.0, "int", False), (3, "float", True),
    (0.5, "Optional[float]", True), (None, "Optional[float]", True), (None, "int", False), ("x", "str", True),
    ([250, 500], "Optional[list[int]]", True), ([250, "a"], "Optional[list[int]]", False),
    ([0.1, 1], "Optional[list[float]]", True), ({"a": 1}, "Optional[list]", False), (["add"], "Optional[list]", True),
    (True, "Optional[bool]", True), (1, "Optional[bool]", False), ({"binary": 0.1}, "dict[str, float]", True),
    (3, "Union[int, str]", True), ("a", "int | str", True), (2.5, "int | str", False),
    ("cuda", "Literal['cpu', 'cuda']", True), ("tpu", "Literal['cpu', 'cuda']", False), (3, "SomeClass", None)])
def test_values_are_checked_against_the_declared_type(value, annotation, fits):
    assert _rerun_module().matches(value, annotation) is fits


def test_declared_types_come_from_annotations_else_from_the_default():
    types = _rerun_module().declared_types('profile: "str" = "smoke"\nn: "Optional[int]" = None\nlr = 0.1\n'
                                           'x = None\nk: int = 3\n')
    assert types == {"profile": "str", "n": "Optional[int]", "lr": "float", "k": "int"}


@pytest.mark.parametrize("chapter", sorted((ROOT / "notebooks").glob("*.py")), ids=lambda p: p.stem)
def test_every_chapters_declared_types_are_understood_and_fit_its_defaults(chapter):
    """The check covers every type a chapter declares: each default fits its own declared type."""
    import ast

    import jupytext

    rerun = _rerun_module()
    source = rerun.parameters_cell(jupytext.read(chapter)).source
    types = rerun.declared_types(source)
    defaults = {n.target.id: ast.literal_eval(n.value) for n in ast.parse(source).body
                if isinstance(n, ast.AnnAssign) and n.value is not None}
    assert set(types) >= {"profile", "seed", "device"}
    for name, default in defaults.items():
        assert rerun.matches(default, types[name]) is True, (name, default, types[name])
