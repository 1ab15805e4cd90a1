"""Support for the book's chapters: profiles, the closing checks summary, measured values as JSON, figures.

A chapter's ``parameters`` cell holds every knob; knobs left at ``None`` take the profile's value::

    P = rfm.book.settings(profile, smoke=dict(n=2000, iters=5), full=dict(n=20000, iters=5), n=n, iters=iters)

and its *Checks* cell ends with::

    rfm.book.summary("kernels_and_agop", P, measured={"r2_rfm": r2}, output_dir=output_dir)

which prints one line of measured values and, when ``output_dir`` (or the environment variable
``RFM_BOOK_OUTPUT``) is set, writes them as JSON with the profile, parameters, device, date and commit.
Paper-scale values measured on a GPU are committed under ``results/<chapter>/full.json`` and read back with
:func:`load_results`, so a chapter can show them beside its smoke run.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
from pathlib import Path
from types import SimpleNamespace

import torch

PROFILES = ("smoke", "full")
ROOT = Path(__file__).resolve().parents[2]  # the repository root for an editable install or a clone (rfm/book/__init__.py)
RESULTS = ROOT / "results"


def _check_profile(profile):
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")


def _check_name(name: str, value) -> str:
    """A chapter or figure name: it becomes part of a file name."""
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f"{name} must be a non-empty string, got {value!r}")
    if "/" in value or "\\" in value or value in (".", ".."):
        raise ValueError(f"{name} becomes a file name and must not contain a path separator, got {value!r}")
    return value


def settings(profile: str, smoke: dict, full: dict, **overrides) -> SimpleNamespace:
    """The profile's settings, with every override that is not None applied (unknown names are an error)."""
    _check_profile(profile)
    for name, value in (("smoke", smoke), ("full", full)):
        if not isinstance(value, dict):
            raise TypeError(f"{name} must be a dict of the chapter's settings, e.g. dict(n=2000, iters=5), got "
                            f"{type(value).__name__}")
    base = dict(smoke if profile == "smoke" else full)
    unknown = sorted(set(overrides) - set(base))
    if unknown:
        raise ValueError(f"overrides {unknown} are not settings of this chapter; known: {sorted(base)}")
    base.update({k: v for k, v in overrides.items() if v is not None})
    return SimpleNamespace(profile=profile, **base)


def git_commit() -> str | None:
    """The short hash of the repository's current commit, or None outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             timeout=10)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def device_name(device=None) -> str:
    """A readable name of the device: the GPU model for CUDA, else the CPU with its number of cores."""
    try:
        dev = torch.device(device) if device is not None else torch.device("cpu")
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device={device!r} is not a device torch knows; use 'cpu', 'cuda' or None") from exc
    if dev.type == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(dev)
    return f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def _jsonable(v):
    if isinstance(v, torch.Tensor):
        return v.detach().cpu().tolist()
    if hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, (torch.device, torch.dtype, Path)):
        return str(v)
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def output_path(output_dir=None) -> Path | None:
    """The output folder (``output_dir``, else ``RFM_BOOK_OUTPUT``), created if needed; None when neither is set."""
    out = output_dir if output_dir is not None else os.environ.get("RFM_BOOK_OUTPUT")
    if not out:
        return None
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    return path


def summary(chapter: str, params, measured: dict, *, device=None, output_dir=None) -> dict:
    """Print the one-line summary of a chapter's measured values and write them as JSON when asked."""
    _check_name("chapter", chapter)
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
        "device": device_name(device),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "torch": torch.__version__,
        "params": _jsonable(params),
        "measured": _jsonable(measured),
    }
    shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in measured.items())
    print(f"[{chapter} | profile={record['profile']} | {record['device']}] {shown}")
    path = output_path(output_dir)
    if path is not None:
        with open(path / f"{chapter}_{record['profile']}.json", "w") as fh:
            json.dump(record, fh, indent=2)
    return record


def load_results(chapter: str, profile: str = "full") -> dict | None:
    """Committed measured values of a chapter (``results/<chapter>/<profile>.json``), or None when absent."""
    _check_name("chapter", chapter)
    _check_profile(profile)
    path = RESULTS / chapter / f"{profile}.json"
    if not path.exists():
        return None
    with open(path) as fh:
        return json.load(fh)


def savefig(fig, name: str, output_dir=None):
    """Save a figure as PNG into the output folder, when one is set (the book itself shows figures inline)."""
    if not hasattr(fig, "savefig"):
        raise TypeError(f"fig must be a matplotlib Figure (the plotting helpers return one), got {type(fig).__name__}")
    _check_name("name", name)
    path = output_path(output_dir)
    if path is not None:
        fig.savefig(path / f"{name}.png", dpi=120, bbox_inches="tight")
