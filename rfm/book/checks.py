"""A chapter's Checks: claims against controls, sanity checks, their ten-seed calibration and the paper-scale run.

A chapter states each checked value once, with its rule, and says what kind of check it is::

    checks = rfm.book.Checks("kernels_and_agop", P, seed=seed, device=dev, output_dir=output_dir)
    checks.claim("r2_gain_over_laplace", r2_rfm - r2_laplace, at_least=0.2,
                 what="RFM's test R^2 minus the fixed Laplace kernel's (the control), same data")
    checks.sanity("agop_closed_form_vs_autograd", rel_err, at_most=1e-4,
                  what="closed-form AGOP of a kernel machine equals the float64 autograd AGOP")
    checks.record(r2_rfm=r2_rfm, r2_laplace=r2_laplace)   # measured values that are not checked
    checks.report()   # the table: rule, this run, seeds 0-9 of the calibration, the committed full-profile run
    checks.finish()   # writes the measured values as JSON; raises AssertionError listing every failed check

*Claims* are the reproduction: a value that compares the paper's claim with a control measured in the same run
(an untrained network, random features, iteration 0, shuffled labels, a fixed kernel) that the claim says must
lose. *Sanity checks* are facts that hold by algebra or by construction; they are shown apart and do not count as
reproducing anything.

Calibration (``scripts/calibrate.py``, ``make calibrate CHAPTER=<slug>``) executes the chapter for seeds 0-9 with
the environment variable ``RFM_BOOK_CHECKS=record`` (checks are recorded, never raised) and writes
``results/calibration/<slug>.json``. When a chapter runs at the calibrated settings, :meth:`Checks.finish` also
fails if a check is missing from the calibration or if its rule fails at one of the calibrated seeds: thresholds
must sit beyond the worst seed. The paper-scale run (``scripts/full_run.py``) writes ``results/<slug>/full.json``;
:meth:`Checks.report` shows its values beside this run's, with their pass/fail.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .records import (
    check_name,
    cpu_build,
    device_name,
    git_commit,
    json_key,
    jsonable,
    load_calibration,
    load_results,
    missing_committed,
    summary,
)

KINDS = ("claim", "sanity")
# settings that do not change what a chapter measures: excluded when a run is compared with the calibration
IGNORED_SETTINGS = ("profile", "device", "output_dir", "seed")
MODE_ENV = "RFM_BOOK_CHECKS"


def record_only() -> bool:
    """Whether checks are recorded but never raised (``RFM_BOOK_CHECKS=record``: calibration, full runs).

    Returns
    -------
    bool
        True when the environment variable ``RFM_BOOK_CHECKS`` is ``record``; False when it is unset or ``raise``.
    """
    mode = os.environ.get(MODE_ENV, "").strip().lower()
    if mode not in ("", "raise", "record"):
        raise ValueError(f"{MODE_ENV} must be 'record' or 'raise' (or unset), got {mode!r}")
    return mode == "record"


def _number(name, value):
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, bool):
        return value
    if not isinstance(value, (int, float)):
        raise TypeError(f"check {name!r}: the value must be a number or a bool (a 0-d tensor or array is fine), got "
                        f"{type(value).__name__}")
    return float(value) if isinstance(value, float) else value


@dataclass
class Check:
    """One checked value and its rule (``at_least`` and/or ``at_most``; a bool must be True).

    Parameters
    ----------
    name : str
        The check's name (an identifier).
    kind : {"claim", "sanity"}
        A reproduction against a control, or a fact that holds by construction.
    value : float, int or bool
        The value measured in this run.
    at_least, at_most : float or None, default=None
        The rule's bounds (inclusive).
    what : str, default=""
        What the value is, and what it is compared with.
    """

    name: str
    kind: str
    value: float | int | bool
    at_least: float | None = None
    at_most: float | None = None
    what: str = ""

    def passes(self, value=None) -> bool:
        """Whether a value meets the rule (NaN and None never do).

        Parameters
        ----------
        value : float, int, bool or None, default=None
            The value to test; None tests this run's ``value``.

        Returns
        -------
        bool
            True when the value is inside the bounds (or, for a rule without bounds, is True).
        """
        v = self.value if value is None else value
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return False
        if isinstance(v, bool) and self.at_least is None and self.at_most is None:
            return v
        return (self.at_least is None or v >= self.at_least) and (self.at_most is None or v <= self.at_most)

    @property
    def rule(self) -> str:
        """The rule as text, for example ``">= 0.3"``, ``"<= 1e-06"``, ``"in [0, 1]"`` or ``"is True"``."""
        if self.at_least is not None and self.at_most is not None:
            return f"in [{self.at_least:.4g}, {self.at_most:.4g}]"
        if self.at_least is not None:
            return f">= {self.at_least:.4g}"
        if self.at_most is not None:
            return f"<= {self.at_most:.4g}"
        return "is True"

    def room(self, value) -> float | None:
        """How far a value is inside the rule, in the value's units (negative: outside).

        Parameters
        ----------
        value : float, int, bool or None
            A value of this check (this run's, or a calibrated seed's).

        Returns
        -------
        float or None
            The distance to the nearer bound; None for a bool or a missing value.
        """
        if isinstance(value, bool) or value is None:
            return None
        gaps = []
        if self.at_least is not None:
            gaps.append(value - self.at_least)
        if self.at_most is not None:
            gaps.append(self.at_most - value)
        return min(gaps) if gaps else None

    def as_dict(self) -> dict:
        """The check as written into a run's JSON record.

        Returns
        -------
        dict
            kind, value, at_least, at_most, rule, passed and what.
        """
        return dict(kind=self.kind, value=self.value, at_least=self.at_least, at_most=self.at_most,
                    rule=self.rule, passed=self.passes(), what=self.what)


@dataclass
class Checks:
    """Collects a chapter's checks; see the module docstring for the workflow.

    Parameters
    ----------
    chapter : str
        The chapter's slug (it names ``results/calibration/<chapter>.json``).
    params : Settings or dict
        The chapter's settings (:func:`rfm.book.settings`); compared with the calibration's.
    seed : int or None, default=None
        The chapter's seed.
    device : str, torch.device or None, default=None
        The device the chapter runs on (written into the record).
    output_dir : str, Path or None, default=None
        Where :meth:`finish` writes the record (see :func:`rfm.book.output_path`).
    checks : dict, optional
        The stated checks, by name (filled by :meth:`claim` and :meth:`sanity`).
    measured : dict, optional
        The recorded values, by name (filled by :meth:`record`).
    """

    chapter: str
    params: object
    seed: int | None = None
    device: object = None
    output_dir: object = None
    checks: dict = field(default_factory=dict)
    measured: dict = field(default_factory=dict)

    def __post_init__(self):
        check_name("chapter", self.chapter)
        self._finished = False

    # ------------------------------------------------------------------ stating checks
    def _add(self, kind, name, value, at_least, at_most, what):
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"a check's name must be an identifier such as 'r2_gain', got {name!r}")
        if name in self.checks or name in self.measured:
            raise ValueError(f"check {name!r} is stated twice in chapter {self.chapter!r}")
        value = _number(name, value)
        for label, bound in (("at_least", at_least), ("at_most", at_most)):
            if bound is not None and not isinstance(bound, (int, float)):
                raise TypeError(f"check {name!r}: {label} must be a number, got {type(bound).__name__}")
        if at_least is None and at_most is None and not isinstance(value, bool):
            raise ValueError(f"check {name!r}: give at_least= and/or at_most= (only a bool value may have no bound)")
        if at_least is not None and at_most is not None and at_least > at_most:
            raise ValueError(f"check {name!r}: at_least={at_least} is above at_most={at_most}")
        self.checks[name] = Check(name, kind, value, at_least, at_most, what)
        return self.checks[name].passes()

    def claim(self, name, value, *, at_least=None, at_most=None, what=""):
        """A reproduction check: ``value`` compares the paper's claim with a control from the same run.

        Parameters
        ----------
        name : str
            The check's name (an identifier, unique in the chapter).
        value : float, int, bool, or a 0-d tensor or array
            The measured value.
        at_least, at_most : float or None, default=None
            The rule's bounds (at least one, unless ``value`` is a bool that must be True).
        what : str, default=""
            What the value is and what control it beats.

        Returns
        -------
        bool
            Whether it passes (a failure is raised by :meth:`finish`, after every check has been shown).
        """
        return self._add("claim", name, value, at_least, at_most, what)

    def sanity(self, name, value, *, at_least=None, at_most=None, what=""):
        """A labelled sanity check: a fact that holds by algebra or by construction (it reproduces nothing).

        Parameters
        ----------
        name : str
            The check's name (an identifier, unique in the chapter).
        value : float, int, bool, or a 0-d tensor or array
            The measured value.
        at_least, at_most : float or None, default=None
            The rule's bounds (at least one, unless ``value`` is a bool that must be True).
        what : str, default=""
            What the value is and why it holds.

        Returns
        -------
        bool
            Whether it passes.
        """
        return self._add("sanity", name, value, at_least, at_most, what)

    def record(self, values: Mapping | None = None, /, **named):
        """Measured values written with the checks: numbers, strings, lists, tensors, arrays and dicts.

        Keys may be any hashable (a learning rate, a width, a tuple): :func:`rfm.book.records.jsonable` writes them
        as their ``str`` when the record is written, at any depth, so ``checks.record(rate=rate)`` with
        ``rate = {0.1: 0.5}`` needs no ``{str(k): v}`` first.

        Parameters
        ----------
        values : mapping, optional
            Values by name; a name that is not a string is written as its ``str``.
        **named
            More values by name.
        """
        new = {json_key(k): v for k, v in {**dict(values or {}), **named}.items()}
        if values is not None and len(new) != len(values) + len(named):
            raise ValueError("two recorded names are the same once written as strings; make them distinct")
        clash = sorted((set(new) & set(self.checks)) | (set(new) & set(self.measured)))
        if clash:
            raise ValueError(f"{clash} are already checks or recorded values of this chapter; record other names")
        self.measured.update(new)

    # ------------------------------------------------------------------ reading the committed runs
    def settings(self) -> dict:
        """The settings that define what the chapter measures (its parameters without profile, device, seed, output).

        Returns
        -------
        dict
            Setting name -> value.
        """
        params = vars(self.params) if hasattr(self.params, "__dict__") else dict(self.params)
        return {k: v for k, v in params.items() if k not in IGNORED_SETTINGS}

    def calibration(self) -> dict | None:
        """The chapter's committed calibration (:func:`rfm.book.load_calibration`).

        Returns
        -------
        dict or None
            The calibration, or None when none is committed.
        """
        return load_calibration(self.chapter)

    def at_calibrated_settings(self, calib=None) -> bool:
        """Whether this run has the profile and settings of the committed calibration (any seed, any device).

        Parameters
        ----------
        calib : dict or None, default=None
            The calibration; None reads the committed one.

        Returns
        -------
        bool
            True when a calibration exists and was made at this run's profile and settings.
        """
        calib = self.calibration() if calib is None else calib
        params = vars(self.params) if hasattr(self.params, "__dict__") else dict(self.params)
        return bool(calib) and calib.get("profile") == params.get("profile") and \
            calib.get("settings") == jsonable(self.settings())

    def problems(self) -> list[str]:
        """Every reason the checks fail: a failed rule, or (at the calibrated settings) a stale calibration.

        Returns
        -------
        list of str
            One sentence per problem; empty when everything holds.
        """
        out = [f"{c.kind} {c.name} = {c.value!r}, needs {c.rule}" + (f" ({c.what})" if c.what else "")
               for c in self.checks.values() if not c.passes()]
        calib = self.calibration()
        defaults = getattr(self.params, "defaults", None)
        if calib and defaults is not None and not self.params.overridden and \
                calib.get("profile") == defaults.get("profile") and not self.at_calibrated_settings(calib):
            out.append(f"results/calibration/{self.chapter}.json was made at other settings than this profile's "
                       f"defaults ({calib.get('settings')}): run `make calibrate CHAPTER={self.chapter}`")
        if calib and self.at_calibrated_settings(calib):
            for c in self.checks.values():
                entry = calib["checks"].get(c.name)
                if entry is None:
                    out.append(f"{c.name} is not in results/calibration/{self.chapter}.json: run "
                               f"`make calibrate CHAPTER={self.chapter}`")
                    continue
                bad = [s for s, v in zip(calib["seeds"], entry["values"]) if not c.passes(v)]
                if bad:
                    out.append(f"the rule {c.name} {c.rule} fails at calibrated seed(s) {bad}: a threshold must sit "
                               f"beyond the worst of the calibration's seeds")
        return out

    # ------------------------------------------------------------------ showing and finishing
    def table(self) -> list[dict]:
        """One row per check: kind, rule, this run, calibration min/median/max and worst room, full-profile run.

        Returns
        -------
        list of dict
            The rows, claims first.
        """
        calib = self.calibration() or {}
        full = load_results(self.chapter, "full") or {}
        full_checks = full.get("checks", {})
        rows = []
        for c in sorted(self.checks.values(), key=lambda c: KINDS.index(c.kind)):
            row = dict(check=c.name, kind=c.kind, rule=c.rule, this_run=c.value, passes=c.passes())
            entry = calib.get("checks", {}).get(c.name)
            if entry:
                vals = [v for v in entry["values"] if v is not None]
                nums = [float(v) for v in vals if not isinstance(v, bool)]
                if nums:
                    row.update(seeds_min=min(nums), seeds_median=statistics.median(nums), seeds_max=max(nums))
                    rooms = [c.room(v) for v in nums]
                    row["worst_room"] = min(rooms) if rooms and rooms[0] is not None else None
                row["seeds_passing"] = f"{sum(c.passes(v) for v in entry['values'])}/{len(entry['values'])}"
            if c.name in full_checks:
                f = full_checks[c.name]
                row.update(full=f["value"], full_passes=c.passes(f["value"]))
            rows.append(row)
        return rows

    def report(self):
        """Show the checks table (as a Markdown table in a notebook, as text elsewhere) and the runs it reads.

        Returns
        -------
        list of dict
            The table's rows (:meth:`table`).
        """
        calib = self.calibration()
        full = load_results(self.chapter, "full")
        lines = []
        if calib:
            where = "this run's settings" if self.at_calibrated_settings(calib) else \
                "the calibrated settings, which differ from this run's"
            lines.append(f"Calibration: seeds {_seeds(calib['seeds'])}, profile {calib['profile']}, at {where}; "
                         f"{calib['machine']}, {calib['date'][:10]}, commit {calib['commit']} "
                         f"(`results/calibration/{self.chapter}.json`).")
        else:
            lines.append(missing_committed(f"calibration/{self.chapter}.json", "calibration"))
        if full:
            lines.append(f"Full profile: {full['device']}, {full['date'][:10]}, commit {full['commit']}"
                         + (f", {full['seconds'] / 60:.0f} min" if full.get("seconds") else "")
                         + f" (`results/{self.chapter}/full.json`).")
        else:
            lines.append(missing_committed(f"{self.chapter}/full.json", "full-profile run"))
        rows = self.table()
        cols = ["check", "kind", "rule", "this_run", "passes", "seeds_min", "seeds_median", "seeds_max",
                "worst_room", "seeds_passing", "full", "full_passes"]
        head = ["check", "kind", "rule", "this run", "passes", "seeds: min", "median", "max", "worst seed's room",
                "seeds passing", "full profile", "full passes"]
        body = [[_fmt(r.get(k)) for k in cols] for r in rows]
        md = "\n".join(lines) + "\n\n| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n" + \
            "\n".join("| " + " | ".join(b) + " |" for b in body)
        if _in_notebook():
            from IPython.display import Markdown, display

            display(Markdown(md))
        else:
            print(md)
        return rows

    def finish(self) -> dict:
        """Write the measured values and checks as JSON (:func:`rfm.book.summary`); raise if any check fails.

        With ``RFM_BOOK_CHECKS=record`` nothing is raised: calibration and paper-scale runs record every value.

        Returns
        -------
        dict
            The record as written (:func:`rfm.book.summary`).

        Raises
        ------
        AssertionError
            Listing every failed check (:meth:`problems`), unless checks are only recorded.
        """
        if not self.checks:
            raise ValueError(f"chapter {self.chapter!r} states no checks before finish()")
        measured = {**{name: c.value for name, c in self.checks.items()}, **self.measured}
        record = summary(self.chapter, self.params, measured=measured, device=self.device, seed=self.seed,
                         output_dir=self.output_dir, checks={n: c.as_dict() for n, c in self.checks.items()})
        self._finished = True
        problems = self.problems()
        if problems and not record_only():
            raise AssertionError(f"{len(problems)} check(s) of {self.chapter} failed:\n  " + "\n  ".join(problems))
        return record


def _seeds(seeds) -> str:
    seeds = list(seeds)
    if seeds and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(map(str, seeds))


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "**NO**"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and shell.__class__.__name__ == "ZMQInteractiveShell"


def calibration_from_records(records: list[dict], seconds: dict | None = None) -> dict:
    """Merge the JSON records of one chapter run per seed into the calibration file's content.

    Parameters
    ----------
    records : list of dict
        One record per seed (as :func:`rfm.book.summary` wrote them), all of one chapter, profile and settings.
    seconds : dict or None, default=None
        Each seed's wall time.

    Returns
    -------
    dict
        chapter, profile, settings, seeds, date, commit, machine, device, seconds, each check's values over the
        seeds with its rule, and the recorded scalars over the seeds.
    """
    if not records:
        raise ValueError("no records to calibrate from")
    records = sorted(records, key=lambda r: r["seed"])
    first = records[0]
    chapter, profile = first["chapter"], first["profile"]
    settings = {k: v for k, v in first["params"].items() if k not in IGNORED_SETTINGS}
    for r in records[1:]:
        other = {k: v for k, v in r["params"].items() if k not in IGNORED_SETTINGS}
        if r["chapter"] != chapter or r["profile"] != profile or other != settings:
            raise ValueError(f"seed {r['seed']} ran other settings than seed {first['seed']}")
    names = list(first.get("checks", {}))
    checks = {}
    for name in names:
        spec = first["checks"][name]
        values = [r.get("checks", {}).get(name, {}).get("value") for r in records]
        nums = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        rule = Check(name, spec["kind"], spec["value"], spec["at_least"], spec["at_most"], spec.get("what", ""))
        checks[name] = dict(kind=spec["kind"], what=spec.get("what", ""), at_least=spec["at_least"],
                            at_most=spec["at_most"], rule=rule.rule, values=values,
                            passed=[rule.passes(v) for v in values],
                            **(dict(min=min(nums), median=statistics.median(nums), max=max(nums)) if nums else {}))
    scalars = sorted({k for r in records for k, v in r.get("measured", {}).items()
                      if k not in checks and isinstance(v, (int, float))})
    return dict(
        chapter=chapter, profile=profile, settings=jsonable(settings), seeds=[r["seed"] for r in records],
        date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), commit=git_commit(),
        machine=f"{device_name('cpu')}, {platform.platform()}", build=cpu_build(), device=first.get("device"),
        seconds=jsonable(seconds or {}), checks=checks,
        measured={k: [r.get("measured", {}).get(k) for r in records] for k in scalars},
    )


def write_json(path: Path, content: dict):
    """Write a calibration (or any record) as indented JSON, creating the folder.

    Parameters
    ----------
    path : Path
        The file to write.
    content : dict
        The content.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content, indent=1) + "\n")


def calibration_facts(calibration: dict) -> dict[str, dict]:
    """What a chapter's text says about each calibrated check: its rule, its worst seed and the margin there.

    The worst seed is the one closest to the rule (or furthest beyond it): the smallest :meth:`Check.room`; a seed
    whose value is missing (NaN) counts as the worst. For a rule without bounds (a bool that must be True) the worst
    seed is the first that fails, else the first seed, and the margin is None.

    Parameters
    ----------
    calibration : dict
        A committed calibration (:func:`rfm.book.load_calibration`, made by
        :func:`rfm.book.checks.calibration_from_records`).

    Returns
    -------
    dict of str to dict
        For each check: ``rule`` (text), ``at_least``, ``at_most``, ``worst_seed``, ``worst`` (its value),
        ``margin`` (its room to the rule; negative if it fails), ``min``, ``median``, ``max`` (over the seeds'
        numeric values; None for a bool) and ``passing`` (``"10/10"``).
    """
    seeds = list(calibration["seeds"])
    out = {}
    for name, entry in calibration["checks"].items():
        rule = Check(name, entry["kind"], None, entry.get("at_least"), entry.get("at_most"), entry.get("what", ""))
        values = entry["values"]
        nums = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if rule.at_least is None and rule.at_most is None:
            failing = [i for i, v in enumerate(values) if not rule.passes(v)]
            worst, margin = (failing[0] if failing else 0), None
        else:
            rooms = [-math.inf if v is None else rule.room(v) for v in values]
            worst = min(range(len(values)), key=rooms.__getitem__)
            margin = None if math.isinf(rooms[worst]) else rooms[worst]
        out[name] = dict(rule=rule.rule, at_least=rule.at_least, at_most=rule.at_most, worst_seed=seeds[worst],
                         worst=values[worst], margin=margin,
                         min=min(nums) if nums else None, median=statistics.median(nums) if nums else None,
                         max=max(nums) if nums else None,
                         passing=f"{sum(rule.passes(v) for v in values)}/{len(values)}")
    return out
