"""The link check of the built site (scripts/check_links.py, `make linkcheck`): internal links and anchors must
resolve; external links are only listed, so an offline CI cannot fail on them."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_links.py"


def site(tmp_path: Path, chapter_links: str) -> Path:
    html = tmp_path / "html"
    (html / "notebooks").mkdir(parents=True)
    (html / "_static").mkdir()
    (html / "_static" / "style.css").write_text("")
    (html / "_static" / "template.html").write_text('<a href="{{ pathto(\'x\') }}">theme template</a>')
    (html / "index.html").write_text('<link rel="stylesheet" href="_static/style.css"><h1 id="top">Book</h1>'
                                     '<a href="notebooks/ch.html#checks">Checks</a> <a href="#top">top</a> '
                                     '<a href="https://example.invalid/paper">paper</a> '
                                     '<a href="mailto:a@b.c">mail</a>')
    (html / "notebooks" / "ch.html").write_text(f'<section id="checks"><a name="old"></a>{chapter_links}</section>')
    return html


def run(html: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--html", str(html), *extra], capture_output=True, text=True,
                          timeout=120)


def test_a_site_whose_links_resolve_passes(tmp_path):
    proc = run(site(tmp_path, '<a href="../index.html#top">home</a> <a href="#old">old</a> '
                              '<img src="../_static/style.css">'))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 page(s), 0 broken internal link(s); 2 external link(s) not fetched" in proc.stdout


def test_a_missing_page_and_a_missing_anchor_fail(tmp_path):
    proc = run(site(tmp_path, '<a href="../missing.html">gone</a> <a href="../index.html#nowhere">anchor</a>'))
    assert proc.returncode == 1
    assert "notebooks/ch.html: ../missing.html ->" in proc.stderr and "does not exist" in proc.stderr
    assert "no anchor #nowhere in index.html" in proc.stderr


def test_external_links_that_do_not_answer_are_warnings_only(tmp_path):
    proc = run(site(tmp_path, ""), "--external", "--timeout", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "warning: https://example.invalid/paper" in proc.stderr
    assert "1 did not answer (warnings only)" in proc.stdout  # mailto: is not fetched


def test_the_ci_checks_the_links_of_the_built_site():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make linkcheck" in ci and "make pdf" in ci
    assert ci.index("make book") < ci.index("make linkcheck") and ci.index("make book") < ci.index("make pdf")
    make = (ROOT / "Makefile").read_text()
    assert "\nlinkcheck: setup\n" in make and "scripts/check_links.py" in make
