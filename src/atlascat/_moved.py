"""Old import paths of names that moved to another module: they keep working, with a
:class:`DeprecationWarning` that names the new place (``module.__getattr__``, PEP 562)."""
from __future__ import annotations

import importlib
import warnings
from typing import Callable, Mapping


def moved(old: str, new_homes: Mapping[str, str], namespace: dict | None = None
          ) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``old``: name -> the module it now lives in
    (``"module:new_name"`` where it was renamed too). With the old module's ``namespace``
    (its ``globals()``) the name is kept there after the first use: one warning per name."""

    def __getattr__(name: str):
        home = new_homes.get(name)
        if home is None:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        module, _, new = home.partition(":")
        new = new or name
        warnings.warn(f"{old}.{name} moved to {module}.{new}; import it from there "
                      f"(the old path will be removed in a future release)",
                      DeprecationWarning, stacklevel=2)
        value = getattr(importlib.import_module(module), new)
        if namespace is not None:
            namespace[name] = value
        return value

    return __getattr__


def names_of(module: str, extra: tuple[str, ...] = ()) -> dict[str, str]:
    """Every public name of ``module`` (its ``__all__``) plus ``extra`` -> ``module``."""
    mod = importlib.import_module(module)
    return {n: module for n in (*getattr(mod, "__all__", ()), *extra)}
