"""The API reference (book/api/): one page per room of the package, every module on its room's page, the whole
public API listed, and it builds with warnings as errors.

The rooms are the folders of ``rfm/`` (``rfm.core`` on book/api/core.md, ``rfm.models`` on models.md, ...) and the
top-level modules ``rfm.metrics`` and ``rfm.utils`` on metrics.md; private modules (``rfm._checks``) are not
pages' business. A new module fails :func:`test_every_module_is_on_its_rooms_page` until its section is added.

The build test builds only the API pages (a temporary table of contents with book/api/index as root, execution
off) with the book's own _config.yml and the flags of `make book` (``-W -n --keep-going``), into a temporary
folder: a few minutes, no chapter is executed and _build/ is not touched.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml

import rfm

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "book" / "api"
TOP_LEVEL_PAGE = "metrics"  # rfm.metrics and rfm.utils: what every room shares


def modules(private: bool = False) -> list[str]:
    """Every public (or also private) module and subpackage of rfm, from its files (the old import paths are
    aliases, not modules)."""
    names = [info.name for info in pkgutil.walk_packages(rfm.__path__, "rfm.")]
    return sorted(n for n in names if private or not any(part.startswith("_") for part in n.split(".")))


def packages() -> list[str]:
    return ["rfm"] + [info.name for info in pkgutil.iter_modules(rfm.__path__, "rfm.") if info.ispkg]


def room_page(module: str) -> str:
    """The API page that documents ``module``: its folder's, or metrics.md for a top-level module."""
    room = ".".join(module.split(".")[:2])
    return room.split(".")[1] if room in packages() else TOP_LEVEL_PAGE


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


def automodules(source: str) -> set[str]:
    return set(re.findall(r"^\.\. automodule:: ([\w.]+)\s*$", source, re.M))


def test_api_pages_are_in_the_toc():
    names = {p.stem for p in api_pages()}
    rooms = {room_page(m) for m in modules()}
    assert {"index"} | rooms <= names, f"API pages missing from _toc.yml: {sorted({'index'} | rooms - names)}"
    assert all(p.exists() for p in api_pages())


def test_every_module_is_on_its_rooms_page():
    """A module of rfm/<room>/ is documented on book/api/<room>.md; rfm.metrics and rfm.utils on metrics.md."""
    missing = []
    for module in modules():
        page = API / f"{room_page(module)}.md"
        if not page.exists() or module not in automodules(page.read_text()):
            missing.append(f"{module}: add to book/api/{page.name}\n\n## `{module}`\n\n```{{eval-rst}}\n"
                           f".. automodule:: {module}\n   :members:\n```\n")
    assert not missing, "modules missing from the API pages:\n" + "\n".join(missing)


def test_the_pages_document_only_modules_of_the_package():
    assert sorted(automodules(api_source()) - set(modules(private=True)) - {"rfm"}) == []


@pytest.mark.parametrize("package", packages())
def test_every_public_name_is_listed(package):
    """Each name of a package's __all__ (modules aside) is in an autosummary table of the API pages."""
    mod = importlib.import_module(package)
    if not hasattr(mod, "__all__"):
        pytest.skip(f"{package} has no __all__")
    source = api_source()
    listed = set(re.findall(r"^ {3}~?(?:[\w.]+\.)?(\w+)\s*$", source, re.M))
    missing = [n for n in mod.__all__ if not inspect.ismodule(getattr(mod, n)) and n not in listed]
    assert not missing, f"{package}.__all__ names missing from the autosummary tables of book/api/: {missing}"
    submodules = [n for n in mod.__all__ if inspect.ismodule(getattr(mod, n))]
    for name in submodules:
        assert f"{package}.{name}" in source, f"{package}.{name} is not mentioned on the API pages"


@pytest.mark.parametrize("module", modules())
def test_public_functions_and_classes_have_docstrings(module):
    """autodoc skips an object without a docstring: it would be missing from the API reference."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
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
