"""A chapter's records: where the book keeps them, the JSON they are written as, and the committed runs.

A run's measured values are written by :func:`summary` (as ``<output_dir>/<chapter>_<profile>.json``, with the
profile, seed, parameters, device, date and commit). The committed runs are read back by :func:`load_results`
(``results/<chapter>/<profile>.json``) and :func:`load_calibration` (``results/calibration/<chapter>.json``), from
this checkout or, in an installed package (Colab), from the book's repository.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import torch

#: The profiles of every chapter, the book's settings and the paper's scale.
PROFILES = ("smoke", "full")
#: The repository's root, for an editable install or a clone (chapters find files from it).
#:
#: :meta hide-value:
ROOT = Path(__file__).resolve().parents[2]
#: The folder of the committed results, ``<chapter>/full.json`` and ``calibration/<chapter>.json``.
#:
#: :meta hide-value:
RESULTS = ROOT / "results"
#: Where an installed package reads the committed results from (keep in sync with ``_config.yml``).
REPOSITORY_RAW = "https://raw.githubusercontent.com/rfm-book/rfm-book/main"


def check_profile(profile: str) -> str:
    """Return ``profile`` if it is one of ``PROFILES``.

    Parameters
    ----------
    profile : str
        A chapter's profile name.

    Returns
    -------
    str
        ``profile`` unchanged.

    Raises
    ------
    ValueError
        If ``profile`` is not ``"smoke"`` or ``"full"``.
    """
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    return profile


def check_name(name: str, value) -> str:
    """Return ``value`` if it can be part of a file name (a chapter's slug, a figure's name).

    Parameters
    ----------
    name : str
        The argument's name, for the error message.
    value : str
        The name to check: a non-empty string without a path separator.

    Returns
    -------
    str
        ``value`` unchanged.

    Raises
    ------
    TypeError
        If ``value`` is not a non-empty string.
    ValueError
        If ``value`` contains a path separator or is ``"."`` or ``".."``.
    """
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f"{name} must be a non-empty string, got {value!r}")
    if "/" in value or "\\" in value or value in (".", ".."):
        raise ValueError(f"{name} becomes a file name and must not contain a path separator, got {value!r}")
    return value


def json_key(key) -> str:
    """A JSON object key for any hashable key: a string unchanged, anything else as its ``str``.

    ``0.1`` -> ``"0.1"``, ``(0.1, "sgd")`` -> ``"(0.1, 'sgd')"``: what a chapter's ``{str(k): v}`` wrote.

    Parameters
    ----------
    key : hashable
        A dictionary key.

    Returns
    -------
    str
        The key as JSON writes it.
    """
    return key if isinstance(key, str) else str(key)


def jsonable(value):
    """``value`` in types JSON writes: tensors and arrays as (nested) lists, any dict key as a string.

    Non-finite floats become None (JSON has no NaN or infinity); devices, dtypes and paths become strings. Two keys
    of one dict that read the same as strings (``1`` and ``"1"``) are an error rather than one silently lost.

    Parameters
    ----------
    value : object
        A number, string, tensor, array, or a dict, list or tuple of these.

    Returns
    -------
    object
        The same content built from ``dict``, ``list``, ``str``, ``int``, ``float``, ``bool`` and None.

    Raises
    ------
    ValueError
        If two keys of one dict map to the same string.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, torch.Tensor):
        return jsonable(value.detach().cpu().tolist())
    if hasattr(value, "tolist"):
        return jsonable(value.tolist())
    if isinstance(value, (torch.device, torch.dtype, Path)):
        return str(value)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = json_key(k)
            if key in out:
                raise ValueError(f"two keys are written as {key!r} in JSON; make them distinct")
            out[key] = jsonable(v)
        return out
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def git_commit() -> str | None:
    """The short hash of the repository's current commit.

    ``RFM_BOOK_COMMIT``, when set, is taken as it is: a tree copied without ``.git`` (the lent GPU machine) names the
    commit it was copied from.

    Returns
    -------
    str or None
        Twelve hex digits, or None outside a git checkout.
    """
    if os.environ.get("RFM_BOOK_COMMIT"):
        return os.environ["RFM_BOOK_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             timeout=10)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def device_name(device=None) -> str:
    """A readable name of a device: the GPU model for CUDA, else the CPU with its number of cores.

    Parameters
    ----------
    device : str, torch.device or None, default=None
        The device; None means the CPU.

    Returns
    -------
    str
        For example ``"NVIDIA H100 80GB HBM3"`` or ``"cpu (x86_64, 2 cores)"``.
    """
    try:
        dev = torch.device(device) if device is not None else torch.device("cpu")
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device={device!r} is not a device torch knows; use 'cpu', 'cuda' or None") from exc
    if dev.type == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(dev)
    return f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def cpu_build() -> dict:
    """What decides the last digits of a CPU run: the processor model, torch's vector instruction set and versions.

    Two runs of the same code can differ in round-off on two CPUs (torch and MKL pick their kernels by the
    instruction set), and a quantity decided by a near tie can then flip; records carry this so that such a
    difference can be told from a change of code.

    Returns
    -------
    dict
        ``cpu`` (the model name from ``/proc/cpuinfo`` where it exists, else ``platform.processor()``),
        ``capability`` (``torch.backends.cpu.get_cpu_capability()``, e.g. ``"AVX2"``), ``torch`` and ``numpy``
        (versions).
    """
    import numpy

    model = ""
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), "")
    except OSError:
        pass
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except AttributeError:  # older torch
        capability = "unknown"
    return dict(cpu=model or platform.processor() or platform.machine(), capability=capability,
                torch=torch.__version__, numpy=numpy.__version__)


def output_path(output_dir=None) -> Path | None:
    """The folder a run writes its figures and measured values to, created if needed.

    Parameters
    ----------
    output_dir : str, Path or None, default=None
        The folder; None takes the environment variable ``RFM_BOOK_OUTPUT``.

    Returns
    -------
    Path or None
        The folder, or None when neither is set (the book itself writes nothing).
    """
    out = output_dir if output_dir is not None else os.environ.get("RFM_BOOK_OUTPUT")
    if not out:
        return None
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    return path


def summary(chapter: str, params, measured: dict, *, device=None, output_dir=None, seed=None, checks=None) -> dict:
    """Print the one-line summary of a chapter's measured values and write them as JSON when asked.

    Parameters
    ----------
    chapter : str
        The chapter's slug.
    params : Settings or dict
        The chapter's settings (:func:`rfm.book.settings`).
    measured : dict
        The measured values; keys and values are made JSON-safe by :func:`rfm.book.records.jsonable`
        (non-finite numbers are written as ``null``).
    device : str, torch.device or None, default=None
        The device the chapter ran on.
    output_dir : str, Path or None, default=None
        Where to write ``<chapter>_<profile>.json`` (see :func:`output_path`); nothing is written without one.
    seed : int or None, default=None
        The chapter's seed (the calibration groups runs by it).
    checks : dict or None, default=None
        Each check's value, rule and pass/fail (written by :meth:`rfm.book.Checks.finish`).

    Returns
    -------
    dict
        The record as written: chapter, profile, seed, device, date, commit, torch, params, measured (and checks).
    """
    check_name("chapter", chapter)
    if not isinstance(measured, dict):
        raise TypeError(f"measured must be a dict of the chapter's measured values, e.g. {{'r2': 0.97}}, got "
                        f"{type(measured).__name__}")
    if not isinstance(params, (SimpleNamespace, dict)):
        raise TypeError(f"params must be the chapter's settings (rfm.book.settings(...)) or a dict, got "
                        f"{type(params).__name__}")
    params = vars(params) if isinstance(params, SimpleNamespace) else dict(params)
    record = {
        "chapter": chapter,
        "profile": params.get("profile"),
        "seed": seed,
        "device": device_name(device),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "torch": torch.__version__,
        "build": cpu_build(),  # the CPU's model and instruction set: they decide the last digits of a CPU run
        "params": jsonable(params),
        "measured": jsonable(measured),
    }
    if checks is not None:
        record["checks"] = jsonable(checks)
    shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in measured.items()
                      if isinstance(v, (int, float, str)))
    print(f"[{chapter} | profile={record['profile']} | {record['device']}] {shown}")
    path = output_path(output_dir)
    if path is not None:
        with open(path / f"{chapter}_{record['profile']}.json", "w") as fh:
            json.dump(record, fh, indent=2)
    return record


_DOWNLOADED: dict = {}


def read_committed(relative: str) -> dict | None:
    """A committed JSON file under ``results/``.

    Read from ``RFM_BOOK_RESULTS`` (a folder) when set, else from this checkout's ``results/``, else (an installed
    package, e.g. on Colab) downloaded once from the book's repository (``RFM_BOOK_RESULTS_URL`` overrides where).

    Parameters
    ----------
    relative : str
        The file's path under ``results/``, e.g. ``"calibration/kernels_and_agop.json"``.

    Returns
    -------
    dict or None
        The file's content, or None when it is not committed.
    """
    folders = [Path(os.environ["RFM_BOOK_RESULTS"])] if os.environ.get("RFM_BOOK_RESULTS") else []
    folders.append(RESULTS)
    for folder in folders:
        path = folder / relative
        if path.exists():
            with open(path) as fh:
                return json.load(fh)
    if (ROOT / ".git").exists() or (ROOT / "pyproject.toml").exists():
        return None  # a clone: what is not in its results/ is not committed
    url = f"{os.environ.get('RFM_BOOK_RESULTS_URL', f'{REPOSITORY_RAW}/results')}/{relative}"
    if url not in _DOWNLOADED:
        _DOWNLOADED[url] = None
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                _DOWNLOADED[url] = json.loads(resp.read().decode())
        except urllib.error.HTTPError as exc:  # the server answered: 404 means the file is not committed
            if exc.code != 404:
                _FAILED[relative] = (url, f"HTTP {exc.code} {exc.reason}")
        except urllib.error.URLError as exc:
            if not isinstance(exc.reason, FileNotFoundError):  # a file:// URL of an absent file: not committed
                _FAILED[relative] = (url, str(exc.reason))
        except (OSError, ValueError) as exc:
            _FAILED[relative] = (url, f"{type(exc).__name__}: {exc}")
    return _DOWNLOADED[url]


_FAILED: dict = {}  # relative path under results/ -> (url, reason) of a download that got no answer


def download_failure(relative: str) -> tuple[str, str] | None:
    """Why a committed file could not be downloaded, when it could not.

    Parameters
    ----------
    relative : str
        The file's path under ``results/``.

    Returns
    -------
    tuple of (str, str) or None
        (url, reason) when the file was looked for in the book's repository (an installed package without a
        checkout) and the download failed (offline, a proxy, a timeout); else None.
    """
    return _FAILED.get(relative)


def missing_committed(relative: str, what: str) -> str:
    """The sentence a chapter shows for a committed file it does not have: not committed, or not downloadable.

    Parameters
    ----------
    relative : str
        The file's path under ``results/``.
    what : str
        What the file is, for the sentence ("calibration", "full-profile run").

    Returns
    -------
    str
        The sentence.
    """
    failed = download_failure(relative)
    if failed is None:
        return f"No {what} is committed (`results/{relative}`)."
    url, reason = failed
    return (f"The {what} (`results/{relative}`) could not be downloaded from {url} ({reason}), so it is not shown "
            f"here; with a network connection it is downloaded, or set RFM_BOOK_RESULTS to the results/ folder of "
            f"a clone of the book's repository.")


def load_results(chapter: str, profile: str = "full") -> dict | None:
    """Committed measured values of a chapter (``results/<chapter>/<profile>.json``).

    Parameters
    ----------
    chapter : str
        The chapter's slug.
    profile : {"full", "smoke"}, default="full"
        Which committed run.

    Returns
    -------
    dict or None
        The run's record (as :func:`summary` wrote it), or None when none is committed.
    """
    check_name("chapter", chapter)
    check_profile(profile)
    return read_committed(f"{chapter}/{profile}.json")


def load_calibration(chapter: str) -> dict | None:
    """The committed ten-seed calibration of a chapter's Checks (``results/calibration/<chapter>.json``).

    Parameters
    ----------
    chapter : str
        The chapter's slug.

    Returns
    -------
    dict or None
        The calibration (as :func:`rfm.book.checks.calibration_from_records` made it), or None when absent.
    """
    check_name("chapter", chapter)
    return read_committed(f"calibration/{chapter}.json")


def calibration_values(chapter: str, key: str) -> list:
    """The per-seed values of one measured value in a chapter's committed calibration, missing seeds left out.

    Parameters
    ----------
    chapter : str
        The chapter's slug.
    key : str
        The measured value's name (a key of ``checks.record``).

    Returns
    -------
    list
        One value per calibrated seed that recorded it, in seed order; empty without a calibration or the key.
    """
    calib = load_calibration(chapter) or {}
    return [v for v in calib.get("measured", {}).get(key, []) if v is not None]
