"""The package's and the chapters' shape in numbers (the before/after table of a refactor).

    python scripts/code_stats.py [--json]

Package: lines of rfm/, top-level modules, imports deferred into functions (``import`` inside a ``def``), imports of a
private name (``_x``) from another module. Chapters (notebooks/*.py): lines, code lines, functions and classes
defined, the longest code cell, and the *plumbing share*: the lines inside the chapter's own ``def``/``class``
bodies as a share of all its lines (code a chapter computes that is not its story: it belongs in the package).
Import cycles are listed by ../shared/tools/import_graph.py where that tool is at hand.
"""
from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

ROOT = Path(sys.argv[sys.argv.index('--root') + 1]) if '--root' in sys.argv else Path(__file__).resolve().parent.parent


def package_stats(pkg: Path = ROOT / "rfm") -> dict:
    """Lines, top-level modules, deferred and private imports of the package in ``pkg``."""
    lines = deferred = private = 0
    for path in sorted(pkg.rglob("*.py")):
        src = path.read_text()
        lines += len(src.splitlines())
        tree = ast.parse(src)
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                deferred += sum(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(fn))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("rfm")):
                private += sum(a.name.startswith("_") and not a.name.startswith("__") for a in node.names)
    top = sorted(p.name for p in pkg.glob("*.py"))
    return {"lines": lines, "top_level_modules": len(top), "modules": top, "deferred_imports": deferred,
            "private_imports": private}


def chapter_stats(path: Path) -> dict:
    """Lines, code lines, definitions, longest code cell and plumbing share of one chapter source."""
    src = path.read_text()
    lines = src.splitlines()
    cells, cur, kind = [], [], None
    for line in lines:
        if line.startswith("# %%"):
            if kind == "code":
                cells.append(cur)
            cur, kind = [], ("markdown" if "[markdown]" in line else "code")
        elif kind == "code":
            cur.append(line)
    if kind == "code":
        cells.append(cur)
    code = [[ln for ln in c if ln.strip()] for c in cells]
    tree = ast.parse(src)
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    plumbing = sum(n.end_lineno - n.lineno + 1 for n in defs)
    return {"lines": len(lines), "code_lines": sum(map(len, code)), "definitions": len(defs),
            "longest_cell": max(map(len, code), default=0),
            "code_share": round(sum(map(len, code)) / max(len(lines), 1), 3),
            "plumbing_share": round(plumbing / max(len(lines), 1), 3)}


def main() -> None:
    out = {"package": package_stats(),
           "chapters": {p.stem: chapter_stats(p) for p in sorted((ROOT / "notebooks").glob("*.py"))}}
    ch = out["chapters"].values()
    total = sum(c["lines"] for c in ch)
    out["chapters_total"] = {"lines": total, "definitions": sum(c["definitions"] for c in ch),
                             "plumbing_share": round(sum(c["plumbing_share"] * c["lines"] for c in ch) / total, 3),
                             "code_share": round(sum(c["code_lines"] for c in ch) / total, 3),
                             "longest_cell": max(c["longest_cell"] for c in ch)}
    if "--json" in sys.argv:
        print(json.dumps(out, indent=1))
        return
    p = out["package"]
    print(f"package: {p['lines']} lines, {p['top_level_modules']} top-level modules, "
          f"{p['deferred_imports']} deferred imports, {p['private_imports']} private-name imports")
    print(f"{'chapter':40s} {'lines':>6s} {'code':>6s} {'defs':>5s} {'longest cell':>13s} {'plumbing':>9s}")
    rows = [*out["chapters"].items(), ("all chapters", out["chapters_total"])]
    for name, c in rows:
        print(f"{name:40s} {c['lines']:6d} {c['code_share']:6.0%} {c['definitions']:5d} {c['longest_cell']:13d} "
              f"{c['plumbing_share']:9.1%}")


if __name__ == "__main__":
    main()
