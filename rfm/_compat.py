"""Old import paths, kept for one release with a DeprecationWarning (CHANGELOG.md lists them).

Version 0.2 moved the chapter-named top-level modules into folders named for their concept. ``import rfm.conv``,
``from rfm.conv import ConvNet`` and ``rfm.conv`` still work: each resolves to the new module and warns once.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: old module name -> new module name
MOVED_MODULES = {
    "rfm.estimators": "rfm.models.estimators",
    "rfm.conv": "rfm.models.conv",
    "rfm.linear": "rfm.models.linear",
    "rfm.transfer": "rfm.models.transfer",
    "rfm.icl": "rfm.nets.icl",
    "rfm.eigenframework": "rfm.theory.eigenframework",
    "rfm.infinite_depth": "rfm.theory.infinite_depth",
    "rfm.matrix_inversion": "rfm.theory.matrix_inversion",
    "rfm.tabular": "rfm.selection.protocol",
    "rfm.tuning": "rfm.selection.tuning",
}


def moved_module(old: str):
    """The module that a pre-0.2 import path now is, after a DeprecationWarning.

    Parameters
    ----------
    old : str
        A key of ``MOVED_MODULES``, e.g. ``"rfm.conv"``.

    Returns
    -------
    module
        The imported new module.
    """
    new = MOVED_MODULES[old]
    warnings.warn(f"{old} moved to {new} in rfm 0.2 (CHANGELOG.md); the old path will be removed in 0.3",
                  DeprecationWarning, stacklevel=3)
    return importlib.import_module(new)


class _AliasLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return moved_module(spec.name)

    def exec_module(self, module):  # the new module is already executed
        pass


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED_MODULES:
            return importlib.util.spec_from_loader(fullname, _AliasLoader())
        return None


def install_moved_module_aliases() -> None:
    """Let ``import rfm.<old name>`` resolve to the moved module (idempotent)."""
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())


def renamed_keyword(owner: str, old: str, new: str, old_value, new_value, *, stacklevel: int = 3):
    """The value of a renamed keyword argument: the old one when it was given (with a DeprecationWarning), else the
    new one.

    Parameters
    ----------
    owner : str
        The function or method that takes the keyword, for the message, e.g. ``"rfm.agop"``.
    old, new : str
        The deprecated name and the name that replaced it.
    old_value : object
        The value passed under the old name; None means it was not given.
    new_value : object
        The value of the new keyword.
    stacklevel : int, default 3
        Passed to :func:`warnings.warn`; 3 points at the caller of ``owner``.

    Returns
    -------
    object
        ``new_value`` when ``old_value`` is None, else ``old_value``.

    Warns
    -----
    DeprecationWarning
        When ``old_value`` is given.
    """
    if old_value is None:
        return new_value
    warnings.warn(f"{owner}({old}=...) was renamed {owner}({new}=...) (identifiers are spelled the American way); "
                  f"{old} will be removed in rfm 0.3", DeprecationWarning, stacklevel=stacklevel)
    return old_value
