"""Estimators' settings as scikit-learn reads and writes them: the repr with only the settings
that differ from the defaults, ``get_params`` and ``set_params``."""
from __future__ import annotations

import inspect

__all__ = ["changed_settings", "get_settings", "set_settings"]


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


def get_settings(obj) -> dict:
    """``obj``'s ``__init__`` settings as a dict (scikit-learn's ``get_params``: what
    ``type(obj)(**get_settings(obj))`` rebuilds)."""
    return {name: getattr(obj, name) for name in inspect.signature(type(obj).__init__)
            .parameters if name != "self"}


def set_settings(obj, params: dict):
    """Set ``params`` (names of ``__init__`` settings) on ``obj`` and return it (scikit-learn's
    ``set_params``); an unknown name is a ConfigError listing the settings."""
    valid = get_settings(obj)
    unknown = sorted(set(params) - set(valid))
    if unknown:
        from .errors import ConfigError

        raise ConfigError(f"{type(obj).__name__} has no setting {', '.join(map(repr, unknown))}; "
                          f"the settings are {', '.join(valid)}")
    for name, value in params.items():
        setattr(obj, name, value)
    return obj
