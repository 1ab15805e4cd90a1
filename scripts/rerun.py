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
the chapter's folder, as in the book build. ``-p NAME VALUE`` values are read as YAML, like papermill's ``-y``:
``None``/``null``, ``True``/``true``, ``False``/``false``, integers and floats (``1e-3`` included), lists
(``[128, 128]``), mappings (``{binary: 0.1}``), anything else is a string (quote it to keep ``"3"`` a string).
``-y YAML`` gives several at once (``-y "{seed: 3, n_sizes: [250, 500]}"``), ``-f FILE`` reads them from a YAML file.

Without ``--out`` the output goes to ``out/<slug>-<profile>``: the executed notebook, the figures and the JSON are
always written.
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
    """A -p value: Python's and YAML's spellings of None/True/False, int, float (1e-3 too), YAML lists and mappings,
    a quoted string without its quotes, else the string itself."""
    import yaml

    if text in ("None", "none", "null", "~"):
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
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(value, (list, dict, str)):
        return value
    return text  # dates, and whatever else YAML reads that a chapter would not expect: the string


def parse_yaml_parameters(text: str, where: str) -> dict:
    import yaml

    value = yaml.safe_load(text) if text.strip() else {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise SystemExit(f"rerun: {where} must be a YAML mapping of parameter names to values, got {value!r}")
    return value


def parameters_cell(nb):
    cells = [c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    if len(cells) != 1:
        raise SystemExit(f"rerun: the chapter must have exactly one cell tagged 'parameters', found {len(cells)}")
    return cells[0]


def parameter_names(source: str) -> list[str]:
    names = []
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets:
            if isinstance(t, ast.Name):
                names.append(t.id)
    return names


def default_profile(source: str) -> str:
    """The default value of ``profile`` in the parameters cell ("default" when there is none)."""
    for node in ast.parse(source).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "profile" and getattr(node, "value", None) is not None:
            try:
                return str(ast.literal_eval(node.value))
            except ValueError:
                break
    return "default"


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
                    help="set a parameter of the chapter's parameters cell; VALUE is read as YAML (repeatable)")
    ap.add_argument("-y", "--yaml", action="append", default=[], metavar="YAML",
                    help='parameters as a YAML mapping, e.g. "{seed: 3, n_sizes: [250, 500]}" (repeatable)')
    ap.add_argument("-f", "--parameters-file", type=Path, action="append", default=[], metavar="FILE",
                    help="parameters from a YAML file (repeatable)")
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
    params = {}
    for path in args.parameters_file:
        params.update(parse_yaml_parameters(path.read_text(), str(path)))
    for text in args.yaml:
        params.update(parse_yaml_parameters(text, "-y"))
    params.update({name: parse_value(value) for name, value in args.parameter})
    unknown = sorted(set(params) - set(known))
    if unknown:
        ap.error(f"{unknown} not in the parameters cell of {args.chapter}; its parameters are {known}")
    out = (args.out or Path("out") / f"{slug}-{params.get('profile', default_profile(parameters_cell(nb).source))}"
           ).resolve()
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
