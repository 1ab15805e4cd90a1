"""The package stands alone: a wheel and an sdist built from the sources install into a clean virtual environment
in which only the core dependencies exist, and `import rfm` and an estimator fit work there; with the `chapters`
extra, a chapter runs there, outside the checkout; every import of every chapter is declared; the licences travel
in the wheel.

The build is PEP 517 (``python -m build --no-isolation`` when the `build` package is installed, else setuptools'
build hooks called directly, which is what it runs). The clean environment is a new venv (no system site packages)
with the wheel installed ``--no-deps``; the core dependencies of pyproject.toml (torch, numpy, scikit-learn,
matplotlib, tqdm) and what they require, and nothing else, are linked in from this environment, so no download is
needed and none of the book or test tools (jupyter-book, papermill, mlxtend, pytest, ...) can be imported there.
Nothing is downloaded (``pip install --no-index``), so no CUDA wheel can be pulled: torch is this environment's
(the CPU build that scripts/install_torch.py installs on a machine without a GPU).
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def project() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def core_requirements() -> list[Requirement]:
    return [Requirement(r) for r in project()["dependencies"]]


def extra_requirements(extra: str) -> list[Requirement]:
    return [Requirement(r) for r in project()["optional-dependencies"][extra]]


def closure(requirements) -> dict[str, metadata.Distribution]:
    """The installed distributions that ``requirements`` need, transitively (markers evaluated, no extras)."""
    found: dict[str, metadata.Distribution] = {}
    todo = list(requirements)
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        if name in found:
            continue
        dist = metadata.distribution(req.name)
        found[name] = dist
        todo += [Requirement(r) for r in (dist.requires or [])]
    return found


def clean_venv(tmp_path: Path, requirements) -> Path:
    """A new venv (no pip, no system site packages) in which exactly ``requirements`` and what they need, taken from
    this environment, are installed (linked); returns its python."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    deps = tmp_path / "deps-site-packages"
    link_site_packages(closure(requirements), deps)
    site = subprocess.run([str(py), "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True,
                          text=True, check=True).stdout.strip()
    Path(site, "deps.pth").write_text(str(deps) + "\n")
    return py


def clean_env() -> dict:
    """This process's environment without what would let the clean venv see the checkout or this environment."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "RFM_BOOK_RESULTS")}


def link_site_packages(dists, target: Path) -> None:
    """Symlink every top-level file or folder of ``dists`` (their packages, .libs and .dist-info) into target."""
    target.mkdir(parents=True, exist_ok=True)
    for dist in dists.values():
        base = Path(dist.locate_file(""))
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            src, dst = base / top, target / top
            if src.exists() and not dst.exists() and top != "__pycache__":
                dst.symlink_to(src)


def build(src: Path, out: Path) -> tuple[Path, Path]:
    """sdist and wheel of ``src`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    if importlib.util.find_spec("build") is not None:
        cmds = [[sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(src)]]
    else:  # one process per hook, as a build frontend runs them
        cmds = [[sys.executable, "-c", f"import sys; from setuptools import build_meta as b; b.{hook}(sys.argv[1])",
                 str(out)] for hook in ("build_sdist", "build_wheel")]
    for cmd in cmds:
        proc = subprocess.run(cmd, cwd=src, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (sdist,), (wheel,) = list(out.glob("*.tar.gz")), list(out.glob("*.whl"))
    return sdist, wheel


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dist")
    src = tmp / "src"
    # a copy of the tracked sources the package is built from (the checkout stays clean: no build/ folder)
    files = subprocess.run(["git", "ls-files", "pyproject.toml", "README.md", "LICENSE*", "rfm"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        (src / f).write_bytes((ROOT / f).read_bytes())
    return build(src, tmp / "out")


def test_the_sdist_and_the_wheel_hold_the_whole_package(dist):
    sdist, wheel = dist
    sources = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "rfm").rglob("*.py")
                     if subprocess.run(["git", "ls-files", "--error-unmatch", str(p)], cwd=ROOT,
                                       capture_output=True).returncode == 0)
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    assert set(sources) <= in_wheel, set(sources) - in_wheel
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", *sources} <= names
    meta = zipfile.ZipFile(wheel).read(next(n for n in in_wheel if n.endswith("dist-info/METADATA"))).decode()
    assert "Name: agop-rfm" in meta and "Provides-Extra: book" in meta


def test_the_wheel_works_with_only_the_core_dependencies(dist, tmp_path):
    _, wheel = dist
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                           "--no-index", str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    core = tmp_path / "core-site-packages"
    link_site_packages(closure(core_requirements()), core)
    site = subprocess.run([str(py), "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True,
                          text=True, check=True).stdout.strip()
    Path(site, "core-deps.pth").write_text(str(core) + "\n")
    script = textwrap.dedent("""
        import importlib.util, sys
        import torch
        import rfm
        assert rfm.__file__.startswith(sys.prefix), rfm.__file__   # the installed wheel, not the checkout
        for tool in ("jupyter_book", "papermill", "jupytext", "mlxtend", "pytest", "nbmake", "myst_nb"):
            assert importlib.util.find_spec(tool) is None, tool
        g = torch.Generator().manual_seed(0)
        X = torch.randn(700, 8, generator=g)
        y = X[:, 0] * X[:, 1]
        model = rfm.RFMRegressor(iters=2, bandwidth=5.0, reg=1e-3).fit(X[:500], y[:500])
        r2 = float(model.score(X[500:], y[500:]))
        clf = rfm.RFMClassifier(iters=1).fit(X[:500].numpy(), (y[:500] > 0).numpy().astype(int))
        acc = float((clf.predict(X[500:].numpy()) == (y[500:] > 0).numpy()).mean())
        print(f"r2={r2:.3f} acc={acc:.3f}")
        assert r2 > 0.5 and acc > 0.6, (r2, acc)
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run([str(py), "-c", script], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "r2=" in proc.stdout


def test_the_wheel_carries_the_licences(dist):
    """The code's MIT licence and the text's CC BY 4.0 licence are in the wheel's metadata folder."""
    sdist, wheel = dist
    names = zipfile.ZipFile(wheel).namelist()
    licences = {Path(n).name for n in names if "/licenses/" in n and n.split("/")[0].endswith(".dist-info")}
    assert {"LICENSE", "LICENSE-TEXT.md"} <= licences, names
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("dist-info/METADATA"))).decode()
    assert "License-Expression: MIT" in meta and "License-File: LICENSE-TEXT.md" in meta
    with tarfile.open(sdist) as tar:
        assert {"LICENSE", "LICENSE-TEXT.md"} <= {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}


def chapter_imports(path: Path) -> set[str]:
    """The top-level modules a chapter imports (anywhere in its code)."""
    import ast

    import jupytext

    nb = jupytext.read(path)
    found = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


CHAPTERS = sorted(p for p in (ROOT / "notebooks").glob("*.py") if not p.name.startswith((".", "_")))


def test_every_import_of_every_chapter_is_declared_in_the_chapters_extra():
    """A chapter run outside the repository (Binder, a laptop) needs only `pip install agop-rfm[chapters]`."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import sync_chapters

    declared = set(closure(core_requirements() + extra_requirements("chapters")))
    providers = metadata.packages_distributions()
    missing = {}
    for chapter in CHAPTERS:
        for module in sorted(chapter_imports(chapter) - set(sys.stdlib_module_names) - {"rfm"}):
            dists = {re.sub(r"[-_.]+", "-", d).lower() for d in providers.get(module, [])}
            if not dists & declared:
                missing.setdefault(chapter.stem, []).append(f"{module} ({', '.join(sorted(dists)) or '?'})")
        # what a chapter reads through rfm (the MNIST digits, R's data sets) comes with the extras it needs
        for extra in sync_chapters.needed_extras(chapter.read_text()):
            for req in extra_requirements(extra):
                if re.sub(r"[-_.]+", "-", req.name).lower() not in declared:
                    missing.setdefault(chapter.stem, []).append(f"{req} (extra {extra})")
    assert not missing, f"imports not declared in the chapters extra of pyproject.toml: {missing}"


def test_the_book_extra_holds_the_chapters_extra():
    book = {r.name.lower() for r in extra_requirements("book")}
    assert {r.name.lower() for r in extra_requirements("chapters")} <= book


CHAPTER_WITH_PANDAS = "adaptive_sgd_quadratic"  # imports pandas and IPython; about 10 s in its smoke profile


def test_a_chapter_runs_outside_the_checkout_with_the_chapters_extra(dist, tmp_path):
    """`pip install "agop-rfm[chapters]"` into a clean environment, then a chapter that uses pandas runs as a script
    in a folder outside the checkout, offline: its Checks pass and its table says the committed calibration could
    not be downloaded (instead of claiming there is none)."""
    _, wheel = dist
    source = ROOT / "notebooks" / f"{CHAPTER_WITH_PANDAS}.py"
    assert "pandas" in chapter_imports(source)
    py = clean_venv(tmp_path, core_requirements() + extra_requirements("chapters"))
    # the resolver sees the extra's requirements satisfied by what is there; --no-index: nothing is downloaded
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-index",
                           f"{wheel}[chapters]"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Successfully installed agop-rfm-" in proc.stdout and "torch" not in proc.stdout.split("Successfully")[-1]
    work = tmp_path / "reader"
    work.mkdir()
    (work / source.name).write_bytes(source.read_bytes())
    env = dict(clean_env(), MPLBACKEND="Agg", OMP_NUM_THREADS="1",
               RFM_BOOK_RESULTS_URL="http://127.0.0.1:9/results")  # offline: nothing listens there
    probe = ("import sys, pandas, rfm; assert rfm.__file__.startswith(sys.prefix), rfm.__file__; "
             "import importlib.util as u; assert u.find_spec('jupyter_book') is None and u.find_spec('pytest') is None")
    proc = subprocess.run([str(py), "-c", probe], capture_output=True, text=True, timeout=300, cwd=work, env=env)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([str(py), source.name], capture_output=True, text=True, timeout=600, cwd=work, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"[{CHAPTER_WITH_PANDAS} | profile=smoke" in proc.stdout
    assert f"The calibration (`results/calibration/{CHAPTER_WITH_PANDAS}.json`) could not be downloaded from " \
           f"http://127.0.0.1:9/results/calibration/{CHAPTER_WITH_PANDAS}.json" in proc.stdout
