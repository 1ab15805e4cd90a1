"""Rerun one chapter headless, with other parameters, straight from its jupytext source.

    python scripts/rerun.py notebooks/<slug>.py -p profile full -p device cuda -p seed 3 --out out/<slug>-full

Writes into the output folder:

* ``<slug>.ipynb``: the executed notebook (papermill records the parameters in its metadata and adds an
  ``injected-parameters`` cell after the ``parameters`` cell);
* ``<name>.png``: the figures the chapter saves with ``rfm.book.savefig``, and every image output of the notebook as
  ``figures/cell<NN>_<k>.png``;
* ``<slug>_<profile>.json``: the measured values written by ``rfm.book.summary`` (profile, parameters, device, date,
  commit and the numbers).

The output folder is passed to the chapter as the environment variable ``RFM_BOOK_OUTPUT`` and, when the chapter's
parameters cell defines one, as the ``output_dir`` parameter. The kernel is ``python3`` and the working directory is
the chapter's folder, as in the book build. ``-p NAME VALUE`` values are read like papermill's: ``None``, ``True``,
``False``, integers and floats are converted, anything else is a string (quote it to keep ``"3"`` a string).
"""
from __future__ import annotations

import argparse
import ast
import base64
import os
import sys
import time
from pathlib import Path


def parse_value(text: str):
    """papermill's conversion of a -p value: None/True/False, int, float, else the string itself."""
    if text in ("None", "none", "null"):
        return None
    if text in ("True", "true"):
        return True
    if text in ("False", "false"):
        return False
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def parameters_cell(nb):
    cells = [c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    if len(cells) != 1:
        raise SystemExit(f"rerun: the chapter must have exactly one cell tagged 'parameters', found {len(cells)}")
    return cells[0]


def parameter_names(source: str) -> list[str]:
    names = []
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets:
            if isinstance(t, ast.Name):
                names.append(t.id)
    return names


def save_figures(nb, folder: Path) -> list[Path]:
    saved = []
    for i, cell in enumerate(nb.cells):
        k = 0
        for out in cell.get("outputs", []):
            data = out.get("data", {}) if out.get("output_type") in ("display_data", "execute_result") else {}
            if "image/png" in data:
                folder.mkdir(parents=True, exist_ok=True)
                path = folder / f"cell{i:02d}_{k}.png"
                path.write_bytes(base64.b64decode(data["image/png"]))
                saved.append(path)
                k += 1
    return saved


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Rerun a chapter headless with parameters (see the module docstring).")
    ap.add_argument("chapter", type=Path, help="the chapter's source, notebooks/<slug>.py (or an .ipynb)")
    ap.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="set a parameter of the chapter's parameters cell (repeatable)")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: out/<slug>-<profile>)")
    ap.add_argument("--timeout", type=int, default=None, help="seconds per cell (default: no limit)")
    ap.add_argument("--kernel", default="python3", help="Jupyter kernel name (default: python3)")
    ap.add_argument("--log-output", action="store_true", help="stream the notebook's output to this terminal")
    args = ap.parse_args(argv)

    import jupytext
    import papermill as pm

    src = args.chapter.resolve()
    if not src.exists():
        ap.error(f"no such chapter: {args.chapter}")
    slug = src.stem
    nb = jupytext.read(src)
    known = parameter_names(parameters_cell(nb).source)
    params = {name: parse_value(value) for name, value in args.parameter}
    unknown = sorted(set(params) - set(known))
    if unknown:
        ap.error(f"{unknown} not in the parameters cell of {args.chapter}; its parameters are {known}")
    out = (args.out or Path("out") / f"{slug}-{params.get('profile', 'default')}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    if "output_dir" in known and "output_dir" not in params:
        params["output_dir"] = str(out)
    os.environ["RFM_BOOK_OUTPUT"] = str(out)  # the kernel inherits it: rfm.book writes JSON and figures there

    executed_path = out / f"{slug}.ipynb"
    print(f"rerun: {args.chapter} with {params} -> {out}", flush=True)
    t0 = time.perf_counter()
    try:
        executed = pm.execute_notebook(nb, str(executed_path), parameters=params, kernel_name=args.kernel,
                                       cwd=str(src.parent), execution_timeout=args.timeout,
                                       log_output=args.log_output, progress_bar=False)
    except pm.PapermillExecutionError as exc:
        print(f"rerun: FAILED in cell {exc.cell_index} after {time.perf_counter() - t0:.1f} s "
              f"(the partly executed notebook is {executed_path})\n{exc}", file=sys.stderr)
        return 1
    figures = save_figures(executed, out / "figures")
    written = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    print(f"rerun: done in {time.perf_counter() - t0:.1f} s; {len(figures)} figure output(s); wrote "
          + ", ".join(map(str, written)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
