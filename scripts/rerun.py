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

**Checked before anything runs.** A name that is not in the chapter's parameters cell is an error, and so is a value
whose type does not match the type declared there (``seed: "int" = 0`` rejects ``-p seed abc``;
``n: "Optional[int]" = None`` takes ``-p n 500`` or ``-p n None``; a ``float`` takes an integer; ``list[int]`` checks
the items). A parameter without a declared type is checked against its default's type when that is not None.
Plain papermill (``papermill in.ipynb out.ipynb -p seed abc``) only warns about unknown names and checks no types:
this script is the checked route.
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


def declared_types(source: str) -> dict[str, str]:
    """Each parameter's declared type, as written in the parameters cell (``n: "Optional[int]" = None`` gives
    ``"Optional[int]"``); without an annotation, the type of a literal default that is not None."""
    types = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            ann = node.annotation
            types[node.target.id] = ann.value if isinstance(ann, ast.Constant) and isinstance(ann.value, str) \
                else ast.unparse(ann)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                default = ast.literal_eval(node.value)
            except ValueError:
                continue
            if default is not None and type(default) in (bool, int, float, str, list, dict):
                types[node.targets[0].id] = type(default).__name__
    return types


def _split_args(text: str) -> list[str]:
    """The comma-separated arguments of a subscript, respecting nested brackets: "int, list[str]"."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        cur += ch
    return out + [cur.strip()] if cur.strip() else out


SIMPLE_TYPES = {"int": int, "float": (int, float), "bool": bool, "str": str, "list": list, "List": list,
                "dict": dict, "Dict": dict, "tuple": (list, tuple), "Tuple": (list, tuple)}


def matches(value, annotation: str) -> bool | None:
    """Whether ``value`` fits the type ``annotation`` (a string: "int", "Optional[list[int]]", "Union[int, str]");
    None when the annotation is not one this function understands (the value is then not checked)."""
    ann = annotation.strip().replace("typing.", "")
    if ann in ("Any", "object", ""):
        return True
    if ann in ("None", "NoneType"):
        return value is None
    if "|" in ann and "[" not in ann:
        return _any([matches(value, part) for part in ann.split("|")])
    if "[" in ann and ann.endswith("]"):
        head, inner = ann[:ann.index("[")].strip(), ann[ann.index("[") + 1:-1]
        args = _split_args(inner)
        if head == "Optional":
            return True if value is None else matches(value, inner)
        if head == "Union":
            return _any([matches(value, a) for a in args])
        if head in ("list", "List", "Sequence"):
            if not isinstance(value, (list, tuple)):
                return False
            return _all([matches(v, args[0]) for v in value]) if args else True
        if head in ("dict", "Dict", "Mapping"):
            if not isinstance(value, dict):
                return False
            return _all([matches(k, args[0]) for k in value] + [matches(v, args[1]) for v in value.values()]) \
                if len(args) == 2 else True
        if head in ("tuple", "Tuple"):
            return isinstance(value, (list, tuple))
        if head == "Literal":
            try:
                return value in [ast.literal_eval(a) for a in args]
            except ValueError:
                return None
        return None
    want = SIMPLE_TYPES.get(ann)
    if want is None:
        return None
    if isinstance(value, bool) and ann != "bool":
        return False  # True is an int to Python, not to a chapter's "n"
    return isinstance(value, want)


def _any(results):
    return True if any(r is True for r in results) else (None if None in results else False)


def _all(results):
    return False if any(r is False for r in results) else (None if None in results else True)


def type_errors(params: dict, types: dict[str, str]) -> list[str]:
    """One message per parameter whose value does not fit its declared type."""
    errors = []
    for name, value in params.items():
        ann = types.get(name)
        if ann is not None and matches(value, ann) is False:
            errors.append(f"{name} = {value!r} ({type(value).__name__}) does not fit its declared type {ann!r}")
    return errors


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
    wrong = type_errors(params, declared_types(parameters_cell(nb).source))
    if wrong:
        ap.error("; ".join(wrong) + f" (in the parameters cell of {args.chapter}; values are read as YAML: "
                 "-p n 500 is an int, -p lr 0.1 a float, -p sizes \"[250, 500]\" a list, -p device None is None)")
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
