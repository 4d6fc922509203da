"""Reprs of estimators as scikit-learn writes them: only the settings that differ from the
defaults."""
from __future__ import annotations

import inspect

__all__ = ["changed_settings"]


def changed_settings(obj) -> str:
    """``name=value`` for each ``__init__`` keyword of ``obj`` whose value is not its default."""
    out = []
    for name, p in inspect.signature(type(obj).__init__).parameters.items():
        if name == "self" or p.default is inspect.Parameter.empty:
            continue
        value = obj.__dict__.get(name, p.default)
        try:
            same = value is p.default or bool(value == p.default)
        except (TypeError, ValueError):
            same = False
        if not same:
            out.append(f"{name}={value!r}")
    return ", ".join(out)
