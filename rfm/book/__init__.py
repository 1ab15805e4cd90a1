"""Support for the book's chapters: profiles, the closing checks summary, measured values as JSON, figures.

A chapter's ``parameters`` cell holds every knob; knobs left at ``None`` take the profile's value::

    P = rfm.book.settings(profile, smoke=dict(n=2000, iters=5), full=dict(n=20000, iters=5), n=n, iters=iters)

numbers in the prose are glued from the run (:mod:`rfm.book.text`: :func:`glue`, :func:`glue_many`, and the
committed runs through :func:`glue_full_run` and :func:`glue_calibration`), and its *Checks* section states every
checked value with its rule and kind through :class:`Checks` (:mod:`rfm.book.checks`: claims against a control
from the same run; labelled sanity checks), shows them beside the committed ten-seed calibration
(``results/calibration/<chapter>.json``) and the committed paper-scale run (``results/<chapter>/full.json``), then
ends with :meth:`Checks.finish`, which prints one line of measured values and, when ``output_dir`` (or the
environment variable ``RFM_BOOK_OUTPUT``) is set, writes them as JSON with the profile, seed, parameters, device,
date and commit (:func:`summary`). Committed results are read with :func:`load_results` and
:func:`load_calibration` (:mod:`rfm.book.records`), from the checkout or, in an installed package, from the book's
repository. Figures the chapters share are in :mod:`rfm.book.plots`.
"""
from __future__ import annotations

import os
import sys
from types import SimpleNamespace

from .checks import Check, Checks, calibration_facts, record_only
from .records import (
    PROFILES,
    REPOSITORY_RAW,
    RESULTS,
    ROOT,
    calibration_values,
    check_name,
    check_profile,
    cpu_build,
    device_name,
    download_failure,
    git_commit,
    load_calibration,
    load_results,
    missing_committed,
    output_path,
    read_committed,
    summary,
)
from .text import NO_FULL_RUN, NOT_CALIBRATED, glue, glue_calibration, glue_full_run, glue_largest_run, glue_many, span


class Settings(SimpleNamespace):
    """A chapter's settings (a namespace); :attr:`Settings.defaults` keeps the profile's values before any override.

    Parameters
    ----------
    **values
        The settings by name (made by :func:`settings`, which also stores the defaults).
    """

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
    """The profile's settings, with every override that is not None applied (unknown names are an error).

    Parameters
    ----------
    profile : {"smoke", "full"}
        Which profile's values to start from.
    smoke, full : dict
        Each profile's settings, by name.
    **overrides
        The reader's values from the ``parameters`` cell; None keeps the profile's value.

    Returns
    -------
    Settings
        The settings, with :attr:`Settings.defaults` and :attr:`Settings.overridden`.
    """
    check_profile(profile)
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
    """Save a figure as PNG into the output folder, when one is set (the book itself shows figures inline).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    name : str
        The file's name without ``.png``.
    output_dir : str, Path or None, default=None
        The folder (see :func:`output_path`); None with ``RFM_BOOK_OUTPUT`` unset saves nothing.
    """
    if not hasattr(fig, "savefig"):
        raise TypeError(f"fig must be a matplotlib Figure (the plotting helpers return one), got {type(fig).__name__}")
    check_name("name", name)
    path = output_path(output_dir)
    if path is not None:
        fig.savefig(path / f"{name}.png", dpi=120, bbox_inches="tight")


__all__ = ["NOT_CALIBRATED", "NO_FULL_RUN", "PROFILES", "REPOSITORY_RAW", "RESULTS", "ROOT", "Check", "Checks",
           "Settings", "calibration_facts", "calibration_values", "cpu_build", "device_name", "download_failure",
           "git_commit", "glue", "glue_calibration", "glue_full_run", "glue_largest_run",
           "glue_many", "load_calibration", "load_results", "read_committed",
           "missing_committed", "output_path", "record_only", "savefig", "settings", "span", "summary"]
