"""The API reference (book/api/): it lists the whole public API, and it builds with warnings as errors.

The build test builds only the API pages (a temporary table of contents with book/api/index as root, execution
off) with the book's own _config.yml and the flags of `make book` (``-W -n --keep-going``), into a temporary
folder: about 15 s, no chapter is executed and _build/ is not touched.
"""
from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "book" / "api"
PACKAGES = ["rfm", "rfm.nets", "rfm.data"]  # the packages with an __all__
# Every module the API pages document with `automodule`.
MODULES = ["rfm.core", "rfm.core.feature_matrix", "rfm.core.kernels", "rfm.core.machine", "rfm.core.agop", "rfm.core.fact",
           "rfm.core.solvers", "rfm.core.eigenpro", "rfm.core.coincident", "rfm.core.blocks", "rfm.models.estimators", "rfm.models.linear",
           "rfm.metrics", "rfm.utils", "rfm.nets", "rfm.nets.mlp", "rfm.nets.alignment", "rfm.nets.optim",
           "rfm.nets.baselines", "rfm.nets.classifier", "rfm.nets.dynamics", "rfm.nets.catapults", "rfm.nets.stepwise",
           "rfm.nets.parametrisation", "rfm.nets.fact", "rfm.selection.tuning",
           "rfm.data", "rfm.data.datasets",
           "rfm.data.modular", "rfm.data.images", "rfm.data.parity", "rfm.data.tabular", "rfm.selection.protocol", "rfm.book",
           "rfm.book.plots", "rfm.models.conv", "rfm.nets.icl", "rfm.models.transfer", "rfm.theory.matrix_inversion", "rfm.theory.infinite_depth",
           "rfm.data.dirichlet", "rfm.theory.eigenframework"]


def api_pages() -> list[Path]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                files.append(str(node["file"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(toc)
    return [ROOT / f"{f}.md" for f in files if f.startswith("book/api/")]


def api_source() -> str:
    return "\n".join(p.read_text() for p in api_pages())


def test_api_pages_are_in_the_toc():
    names = {p.stem for p in api_pages()}
    assert {"index", "core", "estimators", "nets", "data", "book"} <= names, names
    assert all(p.exists() for p in api_pages())


def test_every_module_is_documented():
    source = api_source()
    for module in MODULES:
        assert re.search(rf"\.\. automodule:: {re.escape(module)}\s*$", source, re.M), \
            f"{module} has no `.. automodule:: {module}` on the API pages (book/api/)"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_is_listed(package):
    """Each name of a package's __all__ (modules aside) is in an autosummary table of the API pages."""
    mod = importlib.import_module(package)
    source = api_source()
    listed = set(re.findall(r"^ {3}~?(?:[\w.]+\.)?(\w+)\s*$", source, re.M))
    missing = [n for n in mod.__all__ if not inspect.ismodule(getattr(mod, n)) and n not in listed]
    assert not missing, f"{package}.__all__ names missing from the autosummary tables of book/api/: {missing}"
    submodules = [n for n in mod.__all__ if inspect.ismodule(getattr(mod, n))]
    for name in submodules:
        assert f"{package}.{name}" in source, f"{package}.{name} is not mentioned on the API pages"


@pytest.mark.parametrize("module", MODULES)
def test_public_functions_and_classes_have_docstrings(module):
    """autodoc skips an object without a docstring: it would be missing from the API reference."""
    mod = importlib.import_module(module)
    assert mod.__doc__, f"{module} has no module docstring"
    undocumented = [name for name, obj in vars(mod).items()
                    if not name.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
                    and obj.__module__ == module and not inspect.getdoc(obj)]
    assert not undocumented, f"{module}: public objects without a docstring: {undocumented}"


@pytest.mark.slow
def test_api_pages_build_with_warnings_as_errors(tmp_path):
    """The API pages alone, built as `make book` builds the book (-W -n --keep-going), with execution off."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "off"
    config["only_build_toc_files"] = True
    local = config.get("sphinx", {}).get("local_extensions") or {}
    config["sphinx"]["local_extensions"] = {name: str(ROOT / path) for name, path in local.items()}
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    pages = [p.relative_to(ROOT).with_suffix("").as_posix() for p in api_pages()]
    toc = {"format": "jb-book", "root": pages[0],
           "chapters": [{"file": page} for page in pages[1:]]}
    (tmp_path / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    jb = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", "-W", "-n", "--keep-going",
           "--config", str(tmp_path / "_config.yml"), "--toc", str(tmp_path / "_toc.yml"),
           "--path-output", str(tmp_path / "out"), str(ROOT)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    log = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)
    problems = [line for line in log.splitlines() if "WARNING" in line or "ERROR" in line]
    assert proc.returncode == 0 and not problems, "API pages do not build cleanly:\n" + "\n".join(problems or
                                                                                                   [log[-4000:]])
    html = tmp_path / "out" / "_build" / "html" / "book" / "api"
    assert (html / "core.html").exists()
    core = (html / "core.html").read_text()
    assert 'id="rfm.core.machine.KernelMachine"' in core
