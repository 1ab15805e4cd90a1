"""Sphinx extension for the API reference: resolve a cross-reference the way Python resolves the name.

The docstrings name objects as a reader imports them (``rfm.agop``, ``rfm.nets.MLP``, or ``KernelMachine`` in a
module that imports it), while the API pages document every object once, under the module that defines it
(``rfm.core.agop.agop``). When the Python domain finds no target, this handler imports the name (absolute, or
relative to the module and class of the docstring), takes the object's defining ``__module__.__qualname__`` and
resolves the reference to that documented object. A name that does not import stays unresolved, so a wrong
reference still fails the nitpicky (``-n -W``) build.
"""
from __future__ import annotations

import importlib


def _lookup(dotted: str):
    """The object named by an absolute dotted path, or None."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except Exception:  # noqa: BLE001 - any import failure means "not this split"
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _documented_name(obj, documented: dict) -> str | None:
    """The name under which ``obj`` is documented on the API pages."""
    if isinstance(obj, property):
        obj = obj.fget
    if getattr(obj, "__name__", None) in documented and type(obj).__name__ == "module":
        return obj.__name__
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and f"{module}.{qualname}" in documented:
        return f"{module}.{qualname}"
    # data (constants): documented under any name whose object is this very object
    if isinstance(obj, (dict, list, tuple, set, frozenset)):
        for name in documented:
            if name.startswith("rfm.") and _lookup(name) is obj:
                return name
    return None


def resolve(app, env, node, contnode):
    if node.get("refdomain") != "py" or not node.get("reftarget", "").strip("~."):
        return None
    target = node["reftarget"].lstrip("~.")
    modname, clsname = node.get("py:module"), node.get("py:class")
    candidates = [target]
    if modname:
        if clsname:
            candidates.insert(0, f"{modname}.{clsname}.{target}")
        candidates.append(f"{modname}.{target}")
    domain = env.get_domain("py")
    documented = domain.objects
    for candidate in candidates:
        if not candidate.startswith("rfm"):
            continue
        obj = _lookup(candidate)
        if obj is None:
            continue
        name = _documented_name(obj, documented)
        if name is None:
            continue
        node["reftarget"] = name
        node["refspecific"] = False
        return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], name, node, contnode)
    return None


def setup(app):
    app.connect("missing-reference", resolve)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
