"""Package names imported from their modules when first used (PEP 562 module ``__getattr__``),
so that importing a package for one light name does not import its heavy modules."""
from __future__ import annotations

import importlib

__all__ = ["lazy_names"]


def lazy_names(package: str, names: dict[str, str]):
    """``(__getattr__, __dir__)`` for ``package`` whose public ``names`` map to the submodule
    that defines each; a name is imported on first access and cached in the package."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name):
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
