"""Support for the book's chapters: profiles, the closing checks summary, measured values as JSON, figures.

A chapter's ``parameters`` cell holds every knob; knobs left at ``None`` take the profile's value::

    P = rfm.book.settings(profile, smoke=dict(n=2000, iters=5), full=dict(n=20000, iters=5), n=n, iters=iters)

numbers in the prose are glued from the run (:func:`glue`), and its *Checks* section states every checked value
with its rule and kind through :class:`Checks` (claims against a control from the same run; labelled sanity
checks), shows them beside the committed ten-seed calibration (``results/calibration/<chapter>.json``) and the
committed paper-scale run (``results/<chapter>/full.json``), then ends with :meth:`Checks.finish`, which prints one
line of measured values and, when ``output_dir`` (or the environment variable ``RFM_BOOK_OUTPUT``) is set, writes
them as JSON with the profile, seed, parameters, device, date and commit (:func:`summary`). Committed results are
read with :func:`load_results` and :func:`load_calibration`, from the checkout or, in an installed package, from
the book's repository.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import sys
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


class Settings(SimpleNamespace):
    """A chapter's settings (a namespace); :attr:`defaults` keeps the profile's values before any override."""

    __slots__ = ("_defaults",)

    def __reduce__(self):  # copies and pickles keep the defaults
        return _rebuild_settings, (dict(vars(self)), dict(getattr(self, "_defaults", {})))

    @property
    def defaults(self) -> dict:
        """The profile's settings as the chapter defines them, before the reader's overrides."""
        return dict(getattr(self, "_defaults", {}))

    @property
    def overridden(self) -> list[str]:
        """The names whose value differs from the profile's default."""
        return sorted(k for k, v in self.defaults.items() if getattr(self, k, None) != v)


def _rebuild_settings(values, defaults):
    out = Settings(**values)
    out._defaults = defaults
    return out


def settings(profile: str, smoke: dict, full: dict, **overrides) -> Settings:
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
    out = Settings(profile=profile, **base)
    out._defaults = dict(profile=profile, **base)
    for k, v in overrides.items():
        if v is not None:
            setattr(out, k, v)
    return out


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
    if isinstance(v, float) and not math.isfinite(v):
        return None  # JSON has no NaN or infinity
    if isinstance(v, torch.Tensor):
        return _jsonable(v.detach().cpu().tolist())
    if hasattr(v, "tolist"):
        return _jsonable(v.tolist())
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


def summary(chapter: str, params, measured: dict, *, device=None, output_dir=None, seed=None, checks=None) -> dict:
    """Print the one-line summary of a chapter's measured values and write them as JSON when asked.

    ``checks`` (written by :meth:`Checks.finish`) holds each check's value, rule and pass/fail; ``seed`` is the
    chapter's seed (the calibration groups runs by it). Non-finite numbers are written as ``null``.
    """
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
        "seed": seed,
        "device": device_name(device),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "torch": torch.__version__,
        "params": _jsonable(params),
        "measured": _jsonable(measured),
    }
    if checks is not None:
        record["checks"] = _jsonable(checks)
    shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in measured.items()
                      if isinstance(v, (int, float, str)))
    print(f"[{chapter} | profile={record['profile']} | {record['device']}] {shown}")
    path = output_path(output_dir)
    if path is not None:
        with open(path / f"{chapter}_{record['profile']}.json", "w") as fh:
            json.dump(record, fh, indent=2)
    return record


def _results_url() -> str:
    """Where the committed results are published: the repository of ``_config.yml``, raw files on its branch."""
    return os.environ.get("RFM_BOOK_RESULTS_URL", f"{REPOSITORY_RAW}/results")


REPOSITORY_RAW = "https://raw.githubusercontent.com/rfm-book/rfm-book/main"  # keep in sync with _config.yml


def _read_committed(relative: str) -> dict | None:
    """A committed JSON file under ``results/``: from ``RFM_BOOK_RESULTS`` (a folder), else this checkout's
    ``results/``, else (an installed package, e.g. on Colab) downloaded from the book's repository; None if absent."""
    folders = [Path(os.environ["RFM_BOOK_RESULTS"])] if os.environ.get("RFM_BOOK_RESULTS") else []
    folders.append(RESULTS)
    for folder in folders:
        path = folder / relative
        if path.exists():
            with open(path) as fh:
                return json.load(fh)
    if (ROOT / ".git").exists() or (ROOT / "pyproject.toml").exists():
        return None  # a clone: what is not in its results/ is not committed
    key = ("url", relative)
    if key not in _DOWNLOADED:
        import urllib.error
        import urllib.request

        url = f"{_results_url()}/{relative}"
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                _DOWNLOADED[key] = json.loads(resp.read().decode())
        except urllib.error.HTTPError as exc:  # the server answered: 404 means the file is not committed
            _DOWNLOADED[key] = None
            if exc.code != 404:
                _FAILED[relative] = (url, f"HTTP {exc.code} {exc.reason}")
        except urllib.error.URLError as exc:
            _DOWNLOADED[key] = None
            if not isinstance(exc.reason, FileNotFoundError):  # a file:// URL of an absent file: not committed
                _FAILED[relative] = (url, str(exc.reason))
        except (OSError, ValueError) as exc:
            _DOWNLOADED[key] = None
            _FAILED[relative] = (url, f"{type(exc).__name__}: {exc}")
    return _DOWNLOADED[key]


_DOWNLOADED: dict = {}
_FAILED: dict = {}  # relative path under results/ -> (url, reason) of a download that did not get an answer


def download_failure(relative: str) -> tuple[str, str] | None:
    """(url, reason) when the committed file ``results/<relative>`` was looked for in the book's repository (an
    installed package without a checkout) and the download failed (offline, a proxy, a timeout); else None."""
    return _FAILED.get(relative)


def missing_committed(relative: str, what: str) -> str:
    """The sentence a chapter shows for a committed file it does not have: not committed, or not downloadable."""
    failed = download_failure(relative)
    if failed is None:
        return f"No {what} is committed (`results/{relative}`)."
    url, reason = failed
    return (f"The {what} (`results/{relative}`) could not be downloaded from {url} ({reason}), so it is not shown "
            f"here; with a network connection it is downloaded, or set RFM_BOOK_RESULTS to the results/ folder of "
            f"a clone of the book's repository.")


def load_results(chapter: str, profile: str = "full") -> dict | None:
    """Committed measured values of a chapter (``results/<chapter>/<profile>.json``), or None when absent.

    Read from this checkout, or from the book's repository when the package was installed without one (Colab)."""
    _check_name("chapter", chapter)
    _check_profile(profile)
    return _read_committed(f"{chapter}/{profile}.json")


def load_calibration(chapter: str) -> dict | None:
    """The committed ten-seed calibration of a chapter's Checks (``results/calibration/<chapter>.json``) or None."""
    _check_name("chapter", chapter)
    return _read_committed(f"calibration/{chapter}.json")


def glue(name: str, value, fmt: str | None = None):
    """Glue a number into the text (myst-nb's ``{glue:text}`name```) and return it as shown.

    ``fmt`` formats the value first (``"{:.3f}"``, ``"{:,}"``). Without myst-nb (Colab, plain Python) nothing is
    glued and the formatted value is only returned."""
    shown = fmt.format(value) if fmt is not None else value
    try:
        from myst_nb import glue as _glue
    except ImportError:
        return shown
    _glue(name, shown, display=False)
    return shown


NO_FULL_RUN = "(no committed full run)"
NO_FULL_RUN_DOWNLOAD = "(the committed full run could not be downloaded: offline?)"


def glue_full_run(chapter: str, values: dict | None = None) -> dict | None:
    """Glue a chapter's committed full-profile run (``results/<chapter>/full.json``) for its text, and return it.

    Always glues ``full_where`` (device, date, commit, wall time) and ``full_failed`` (the checks that failed there,
    with value and rule, or "none"), and ``name`` for each ``name: function(record) -> text`` of ``values``. Without
    a committed run every name is glued as "(no committed full run)" (or, when it could not be downloaded, says so)
    and None is returned."""
    full = load_results(chapter, "full")
    names = ["full_where", "full_failed", *(values or {})]
    if not full:
        shown = NO_FULL_RUN_DOWNLOAD if download_failure(f"{chapter}/full.json") else NO_FULL_RUN
        for name in names:
            glue(name, shown)
        return None
    minutes = f", {full['seconds'] / 60:.0f} min" if full.get("seconds") is not None else ""
    glue("full_where", f"{full.get('device', '?')}, {str(full.get('date', '?'))[:10]}, commit "
                       f"{full.get('commit', '?')}{minutes}")
    failed = [f"{k} = {c['value']:.4g} (rule {c['rule']})" for k, c in full.get("checks", {}).items()
              if not c.get("passed", False)]
    glue("full_failed", ", ".join(failed) or "none")
    for name, value in (values or {}).items():
        glue(name, value(full))
    return full


def _figures_inline():
    """In a notebook kernel, a non-interactive MPLBACKEND (Agg, as headless servers set it) would silently drop
    every figure from the executed notebook: switch to the inline backend there."""
    if "matplotlib" not in sys.modules and "MPLBACKEND" not in os.environ:
        return
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or shell.__class__.__name__ != "ZMQInteractiveShell":
        return
    import matplotlib

    if matplotlib.get_backend().lower() in ("agg", "pdf", "svg", "ps", "cairo", "template"):
        shell.run_line_magic("matplotlib", "inline")  # also registers the PNG formatter for figures


_figures_inline()


def savefig(fig, name: str, output_dir=None):
    """Save a figure as PNG into the output folder, when one is set (the book itself shows figures inline)."""
    if not hasattr(fig, "savefig"):
        raise TypeError(f"fig must be a matplotlib Figure (the plotting helpers return one), got {type(fig).__name__}")
    _check_name("name", name)
    path = output_path(output_dir)
    if path is not None:
        fig.savefig(path / f"{name}.png", dpi=120, bbox_inches="tight")


from .checks import Check, Checks, record_only  # noqa: E402  (checks reads the helpers above)

__all__ = ["Check", "Checks", "ROOT", "RESULTS", "Settings", "device_name", "download_failure", "git_commit", "glue",
           "load_calibration", "load_results", "missing_committed", "output_path", "record_only", "savefig", "settings", "summary"]
