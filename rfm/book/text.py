"""Numbers in a chapter's text, glued from the run: myst-nb's ``{glue:text}`name``` reads what these functions glue.

* :func:`glue` -- one value, formatted;
* :func:`glue_many` -- several values at once, from a mapping or by name;
* :func:`glue_full_run` -- the committed paper-scale run (where it ran, the checks that failed there, its values);
* :func:`glue_calibration` -- each check's rule, worst seed, margin and range over the committed calibration, so a
  Checks section says ``{glue:text}`cal_r2_gain_worst``` instead of typing the worst seed's value.

Without myst-nb (Colab, plain Python) nothing is glued and each function only returns what it would glue.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

from .checks import calibration_facts
from .records import check_name, download_failure, json_key, load_calibration, load_results

#: What :func:`glue_full_run` glues under every name when no full-profile run is committed.
NO_FULL_RUN = "(no committed full run)"
NO_FULL_RUN_DOWNLOAD = "(the committed full run could not be downloaded: offline?)"
#: What :func:`glue_calibration` glues for a check without a committed calibration.
NOT_CALIBRATED = "(not calibrated)"


def glue(name: str, value, fmt: str | None = None):
    """Glue a value into the text (myst-nb's ``{glue:text}`name```) and return it as shown.

    Parameters
    ----------
    name : str
        The name the text refers to.
    value : object
        The value (a number, a string, ...).
    fmt : str or None, default=None
        A format applied first (``"{:.3f}"``, ``"{:,}"``); None glues the value as it is.

    Returns
    -------
    object
        The value as glued: ``fmt.format(value)``, or ``value`` without a format.
    """
    shown = fmt.format(value) if fmt is not None else value
    try:
        from myst_nb import glue as _glue
    except ImportError:  # an optional dependency: the book's, not the package's
        return shown
    _glue(name, shown, display=False)
    return shown


def glue_many(values: Mapping | None = None, /, fmt: str | None = None, *, prefix: str = "", **named) -> dict:
    """Glue several values at once, each under ``prefix + str(key)``, with one format for the numbers.

    ``rfm.book.glue_many(gd1, prefix="gd1_", fmt="{:.3f}")`` glues ``gd1_<key>`` for each key of ``gd1``;
    ``rfm.book.glue_many(n_mid=500, d=100)`` glues two names. Strings are glued as they are, whatever ``fmt``.

    Parameters
    ----------
    values : mapping, optional
        Values by key; a key that is not a string is named by its ``str`` (``0.1`` -> ``"0.1"``).
    fmt : str or None, default=None
        The format of every value that is not a string (see :func:`glue`).
    prefix : str, default=""
        Put before every name.
    **named
        More values by name.

    Returns
    -------
    dict of str to object
        Each glued name and its value as shown.
    """
    items = {prefix + json_key(k): v for k, v in {**dict(values or {}), **named}.items()}
    return {name: glue(name, v, None if isinstance(v, str) else fmt) for name, v in items.items()}


def glue_full_run(chapter: str, values: Mapping[str, Callable[[dict], str]] | None = None, *,
                  measured: Mapping[str, str] | None = None, fmt: str = "{:.3f}") -> dict | None:
    """Glue a chapter's committed full-profile run (``results/<chapter>/full.json``) for its text, and return it.

    Always glues ``full_where`` (device, date, commit, wall time) and ``full_failed`` (the checks that failed
    there, with value and rule, or "none"). Without a committed run every name is glued as "(no committed full
    run)".

    Parameters
    ----------
    chapter : str
        The chapter's slug.
    values : mapping of str to callable, optional
        ``name -> function(record) -> text`` for what the text says about the run.
    measured : mapping of str to str, optional
        ``name -> key``: glue the run's measured value ``record["measured"][key]``, formatted by ``fmt``.
    fmt : str, default="{:.3f}"
        The format of the ``measured`` values.

    Returns
    -------
    dict or None
        The committed record, or None when there is none.
    """
    full = load_results(chapter, "full")
    names = ["full_where", "full_failed", *(values or {}), *(measured or {})]
    if not full:
        shown = NO_FULL_RUN_DOWNLOAD if download_failure(f"{chapter}/full.json") else NO_FULL_RUN
        for name in names:
            glue(name, shown)
        return None
    minutes = f", {full['seconds'] / 60:.0f} min" if full.get("seconds") is not None else ""
    glue("full_where", f"{full.get('device', '?')}, {str(full.get('date', '?'))[:10]}, commit "
                       f"{full.get('commit', '?')}{minutes}")
    failed = [f"{k} = {_number(c.get('value'))} (rule {c['rule']})" for k, c in full.get("checks", {}).items()
              if not c.get("passed", False)]
    glue("full_failed", ", ".join(failed) or "none")
    for name, value in (values or {}).items():
        glue(name, value(full))
    for name, key in (measured or {}).items():
        glue(name, full["measured"][key], fmt)
    return full


def glue_largest_run(full: dict | None, checks, *, label: str = "the full profile") -> dict:
    """Glue what passed and what failed at the largest scale that ran, for a chapter's "What we reproduced".

    The largest run is the committed full profile when there is one, else this run. Only claims count (sanity
    checks and records do not); a claim that this run also checks is judged with this run's rule (a calibration
    may have moved it since the full run), any other with the verdict stored in the record.

    Glues ``largest_scale`` (which run, with device and commit), ``largest_passed`` (the passing claims, or
    "none") and ``largest_failed`` (each failing claim with its value, rule and what it measures, or "none").

    Parameters
    ----------
    full : dict or None
        The committed full-profile record (:func:`glue_full_run`'s or :func:`load_results`'s return value).
    checks : Checks
        This run's checks.
    label : str, default="the full profile"
        How the text names the full profile's run (e.g. with its optimiser).

    Returns
    -------
    dict
        ``scale`` (str), ``passed`` (list of names) and ``failed`` (dict of name to (value, rule)).
    """
    if full:
        claims = {n: c for n, c in full.get("checks", {}).items() if c.get("kind") == "claim"}
        scale = f"{label}, {full.get('device', '?')}, commit {full.get('commit', '?')}"
    else:
        claims = {n: c.as_dict() for n, c in checks.checks.items() if c.kind == "claim"}
        scale = "this run; no full run is committed"
    passed, failed, what = [], {}, {}
    for name, c in claims.items():
        mine = checks.checks.get(name)
        ok = mine.passes(c.get("value")) if mine is not None else bool(c.get("passed"))
        if ok:
            passed.append(name)
        else:
            failed[name] = (c.get("value"), mine.rule if mine is not None else c.get("rule"))
            what[name] = c.get("what") or (mine.what if mine is not None else "")
    glue("largest_scale", scale)
    glue("largest_passed", ", ".join(f"`{n}`" for n in passed) or "none")
    glue("largest_failed", "; ".join(f"`{n}` = {_number(v, '{:.3g}')} (rule {r}{': ' + what[n] if what[n] else ''})"
                                     for n, (v, r) in failed.items()) or "none")
    return dict(scale=scale, passed=passed, failed=failed)


def _number(value, fmt: str = "{:.4g}") -> str:
    """A number for the text; a missing value (NaN in the run) reads "n/a"."""
    return "n/a" if value is None else fmt.format(value)


def glue_calibration(chapter: str, checks=None, *, prefix: str = "cal_", fmt: str = "{:.4g}") -> dict:
    """Glue what the committed calibration says about each check, for the Checks section's text.

    For a check ``name`` (:func:`rfm.book.checks.calibration_facts`), glues ``<prefix><name>_<fact>`` for each
    fact: ``rule`` (``">= 0.75"``), ``worst_seed``, ``worst`` (that seed's value), ``margin`` (its room to the rule),
    ``min``, ``median``, ``max`` (over the seeds) and ``passing`` (``"10/10"``), and ``<prefix><name>`` as one
    phrase, ``"rule >= 0.75; worst seed 2: 0.8115, margin 0.06154"``. The text then says
    ``{glue:text}`cal_r2_gain_worst``` where it used to type the worst seed's value.

    Parameters
    ----------
    chapter : str
        The chapter's slug (``results/calibration/<chapter>.json``).
    checks : iterable of str or None, default=None
        The checks to glue; None glues every calibrated check. A listed check that is not calibrated (or a chapter
        without a calibration) glues "(not calibrated)" under each name, so the text still builds.
    prefix : str, default="cal_"
        Put before every name.
    fmt : str, default="{:.4g}"
        The format of the numbers (values, margins, min, median, max).

    Returns
    -------
    dict of str to str
        Each glued name and its text.

    Raises
    ------
    ValueError
        If two checks give one glue name (a check ``gain_min`` beside a check ``gain``).
    """
    check_name("chapter", chapter)
    calib = load_calibration(chapter)
    facts = calibration_facts(calib) if calib else {}
    names = list(facts) if checks is None else [checks] if isinstance(checks, str) else list(checks)
    glued = {}
    for name in names:
        f = facts.get(name)
        if f is None:
            texts = dict.fromkeys(["", *_FACTS], NOT_CALIBRATED)
        else:
            texts = {key: _number(f[key], fmt) for key in ("margin", "min", "median", "max")}
            texts.update(rule=f["rule"], worst_seed=str(f["worst_seed"]), worst=_shown(f["worst"], fmt),
                         passing=f["passing"])
            margin = f", margin {texts['margin']}" if f["margin"] is not None else ""
            texts[""] = f"rule {f['rule']}; worst seed {f['worst_seed']}: {texts['worst']}{margin}"
        for fact, text in texts.items():
            key = f"{prefix}{name}_{fact}" if fact else f"{prefix}{name}"
            if key in glued:  # a check named like another's fact ("gain_min" beside "gain")
                raise ValueError(f"the glue name {key!r} of check {name!r} is taken by another check's; pass that "
                                 f"check alone with another prefix")
            glued[key] = glue(key, text)
    return glued


_FACTS = ("rule", "worst_seed", "worst", "margin", "min", "median", "max", "passing")


def _shown(value, fmt: str) -> str:
    """A calibrated value for the text: a bool as "True"/"False", a missing one as "n/a", a number by ``fmt``."""
    return str(value) if isinstance(value, bool) else _number(value, fmt)


def span(values, fmt: str = "{:.2f}") -> str:
    """The range of some values as text: ``"0.91 to 0.99"``, or one value when both ends read the same.

    Parameters
    ----------
    values : iterable of numbers
        The values (runs, seeds, operations, ...).
    fmt : str, default="{:.2f}"
        The format of each end.

    Returns
    -------
    str
    """
    values = list(values)
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo} to {hi}"
