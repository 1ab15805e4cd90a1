"""Every public function, class and method of the rfm package has numpydoc sections: ``Parameters`` where it takes
parameters, ``Returns`` (or ``Yields``) where it returns something.

Public means: the names of a module's ``__all__`` (or, without one, its names that do not start with ``_``) that the
module defines itself, and the methods those classes define (not inherited, not properties, no ``_`` prefix). A
class documents its constructor's parameters in the class docstring. "Returns something" reads the code: a
``return`` with a value other than None (or a return annotation other than None); a generator needs ``Yields``.

Modules written before this rule are listed in ``TO_DOCUMENT`` with the count of callables still lacking sections;
their test is an expected failure that turns into an error once the module is complete, so the list only shrinks.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import textwrap
import warnings

import pytest

import rfm

docscrape = pytest.importorskip("numpydoc.docscrape", reason="numpydoc is in the test extra")

# module -> public callables lacking a section when it was listed (remove a module once it passes)
TO_DOCUMENT: dict[str, int] = {}  # empty since every module has its sections (keep it so: add none)


def modules() -> list[str]:
    """Every module of the package, by its file (the old import paths of rfm._compat are aliases, not modules)."""
    names = ["rfm"]
    for info in pkgutil.walk_packages(rfm.__path__, "rfm."):
        names.append(info.name)
    return sorted(names)


def public_objects(module):
    """(qualified name, object) for each public function and class the module defines, and their methods."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    for name in names:
        obj = getattr(module, name, None)
        if not (inspect.isfunction(obj) or inspect.isclass(obj)) or obj.__module__ != module.__name__:
            continue
        yield name, obj
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_"):
                    continue
                func = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
                if inspect.isfunction(func):
                    yield f"{name}.{attr}", func


def takes_parameters(obj) -> bool:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return False
    params = list(sig.parameters)
    if not inspect.isclass(obj) and params and params[0] in ("self", "cls"):
        params = params[1:]
    return bool(params)


def _own_returns(tree) -> list:
    """The return and yield nodes of a function, not of the functions and classes nested in it."""
    found, stack = [], list(ast.iter_child_nodes(tree))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def what_it_gives(func) -> str | None:
    """"Yields" for a generator, "Returns" when the function returns a value, else None."""
    if inspect.isgeneratorfunction(func):
        return "Yields"
    annotation = inspect.signature(func).return_annotation
    if annotation in (None, "None"):
        return None
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func))).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return None
    for node in _own_returns(tree):
        if isinstance(node, ast.Return) and node.value is not None and \
                not (isinstance(node.value, ast.Constant) and node.value.value is None):
            return "Returns"
    if annotation is not inspect.Signature.empty:
        return "Returns"
    return None


def missing_sections(obj) -> list[str]:
    """The numpydoc sections ``obj``'s docstring lacks."""
    doc = inspect.getdoc(obj) or ""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an unknown section name is a missing section here
        parsed = docscrape.NumpyDocString(doc)
    missing = []
    if not doc:
        return ["docstring"]
    if takes_parameters(obj) and not (parsed["Parameters"] or parsed["Other Parameters"]):
        missing.append("Parameters")
    if not inspect.isclass(obj):
        gives = what_it_gives(obj)
        if gives == "Yields" and not parsed["Yields"]:
            missing.append("Yields")
        if gives == "Returns" and not parsed["Returns"]:
            missing.append("Returns")
    return missing


def undocumented(module_name: str) -> dict[str, list[str]]:
    """Public callable -> the sections it lacks, for one module."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = importlib.import_module(module_name)
    out = {}
    for name, obj in public_objects(module):
        missing = missing_sections(obj)
        if missing:
            out[name] = missing
    return out


@pytest.mark.parametrize("module_name", [
    pytest.param(m, marks=pytest.mark.xfail(strict=True, reason=f"{TO_DOCUMENT[m]} public callable(s) still lack "
                                                                 f"numpydoc sections (TO_DOCUMENT)"))
    if m in TO_DOCUMENT else m for m in modules()])
def test_public_callables_have_parameters_and_returns_sections(module_name):
    missing = undocumented(module_name)
    assert not missing, "\n".join(f"{module_name}.{name}: no {', '.join(s)}" for name, s in missing.items())


def test_the_to_document_list_names_modules_of_the_package():
    assert sorted(set(TO_DOCUMENT) - set(modules())) == []


def test_a_function_without_sections_is_found():
    def f(x):
        """Twice x."""
        return 2 * x

    def g(x):
        """Twice x.

        Parameters
        ----------
        x : float
            A number.

        Returns
        -------
        float
            ``2 * x``.
        """
        return 2 * x

    def h():
        """Nothing to give."""
        if True:
            return

    assert missing_sections(f) == ["Parameters", "Returns"]
    assert missing_sections(g) == [] and missing_sections(h) == []
