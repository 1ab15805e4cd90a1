"""Build one chapter alone into a scratch folder, as `make book` builds it, and list its warnings.

    python scripts/preview_chapter.py <slug> [--out /tmp/preview-<slug>]

For writing a chapter while others share the checkout: the chapter is executed afresh (no shared execution cache
is read or written, _build/ is not touched) with the book's _config.yml and flags (-W -n --keep-going), as the
root of a one-page table of contents. Prints every warning about the chapter (links to other pages of the book
are expected to fail here and are listed apart) and the path of the HTML page.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("chapter")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    slug = Path(args.chapter).stem
    if not (ROOT / "notebooks" / f"{slug}.py").exists():
        ap.error(f"no chapter notebooks/{slug}.py")
    out = (args.out or Path(f"/tmp/preview-{slug}")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "force"
    config["bibtex_bibfiles"] = [str(ROOT / b) for b in config.get("bibtex_bibfiles", [])]
    local = config.get("sphinx", {}).get("local_extensions") or {}
    config["sphinx"]["local_extensions"] = {name: str(ROOT / path) for name, path in local.items()}
    (out / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    # the bibliography page comes along: without it every citation is reported as an unknown bibtex key
    (out / "_toc.yml").write_text(yaml.safe_dump({"format": "jb-book", "root": f"notebooks/{slug}",
                                                  "chapters": [{"file": "book/references"}]}))
    jb = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", "-W", "-n", "--keep-going",
           "--config", str(out / "_config.yml"), "--toc", str(out / "_toc.yml"), "--path-output", str(out),
           str(ROOT)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    log = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)
    problems = [line for line in log.splitlines()
                if ("WARNING" in line or "ERROR" in line) and "IPKernelApp" not in line]
    elsewhere = [p for p in problems if "unknown document" in p or "toctree" in p]
    own = [p for p in problems if p not in elsewhere]
    for p in elsewhere:
        print(f"(link to another page, expected in a one-page build) {p}")
    for p in own:
        print(p)
    page = out / "_build" / "html" / "notebooks" / f"{slug}.html"
    if not page.exists():
        page = out / "_build" / "html" / "index.html"
    print(f"preview: {len(own)} warning(s) of the chapter; page {page}")
    return 1 if own or not page.exists() else 0


if __name__ == "__main__":
    sys.exit(main())
