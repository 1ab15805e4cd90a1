"""What a maintained project carries: licences, citation, changelog, release tags, issue and pull-request templates,
and the kernel configuration that keeps the build log to what concerns the reader."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def pyproject() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_code_is_mit_and_the_text_cc_by_and_both_travel_in_the_package():
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    text = (ROOT / "LICENSE-TEXT.md").read_text()
    assert "Creative Commons Attribution 4.0 International Public License" in text
    assert "Section 8 -- Interpretation." in text  # the whole legal code, not a summary
    project = pyproject()["project"]
    assert project["license"] == "MIT" and set(project["license-files"]) == {"LICENSE", "LICENSE-TEXT.md"}


def test_the_citation_file_names_this_version():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["title"] and cff["authors"]
    assert str(cff["version"]) == pyproject()["project"]["version"]
    assert cff["license"] == "MIT" and cff["repository-code"] == yaml.safe_load(
        (ROOT / "_config.yml").read_text())["repository"]["url"]


def test_the_changelog_has_the_next_release_and_this_version():
    log = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in log
    unreleased = log.split("## [Unreleased]", 1)[1].split("\n## [", 1)[0]
    assert "### Changed" in unreleased and "### Added" in unreleased
    version = pyproject()["project"]["version"]
    assert re.search(rf"^## \[{re.escape(version)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", log, re.M), version
    assert f"[{version}]: https://github.com/rfm-book/rfm-book/releases/tag/v{version}" in log


def test_a_release_tag_names_the_version_of_its_commit():
    """Tags are `vX.Y.Z`, and at a tagged commit pyproject.toml has that version (RFM_REF can pin the tag)."""
    tags = subprocess.run(["git", "tag", "--points-at", "HEAD", "--list", "v*"], cwd=ROOT, capture_output=True,
                          text=True).stdout.split()
    version = pyproject()["project"]["version"]
    for tag in tags:
        assert re.fullmatch(r"v\d+\.\d+\.\d+", tag) and tag == f"v{version}", (tag, version)


def test_issue_and_pull_request_templates():
    templates = sorted((ROOT / ".github" / "ISSUE_TEMPLATE").glob("*.md"))
    assert len(templates) >= 2
    for path in templates:
        front = yaml.safe_load(path.read_text().split("---")[1])
        assert front["name"] and front["about"], path
    assert "CHANGELOG.md" in (ROOT / ".github" / "PULL_REQUEST_TEMPLATE.md").read_text()


def test_kernels_do_not_log_the_tcp_encryption_notice(tmp_path):
    """The config that `make setup` puts into the venv filters ipykernel's notice, and only it."""
    import logging

    namespace: dict = {}
    exec((ROOT / "scripts" / "ipython_kernel_config.py").read_text(), namespace)
    logger = logging.getLogger("IPKernelApp")
    notice = logger.makeRecord("IPKernelApp", logging.WARNING, __file__, 1,
                               "Kernel is running over TCP without encryption. All communication ...", (), None)
    other = logger.makeRecord("IPKernelApp", logging.WARNING, __file__, 1, "something else", (), None)
    assert not logger.filter(notice) and logger.filter(other)
    make = (ROOT / "Makefile").read_text()
    assert "$(VENV)/etc/ipython/ipython_kernel_config.py: scripts/ipython_kernel_config.py" in make
    assert re.search(r"^setup: .*\$\(VENV\)/etc/ipython/ipython_kernel_config.py", make, re.M)
    assert 'PYTHONWARNINGS="ignore:Editable installation"' in make  # setuptools' notice in make setup's log
