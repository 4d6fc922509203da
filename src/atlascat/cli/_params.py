"""Option values of the plain kinds converted without pydantic.

Typer converts every option value with a pydantic ``TypeAdapter`` built on first use; loading
pydantic and building the adapters costs about 0.1 s of every command's start. For the plain
kinds (``str``, ``int``, ``float``, ``bool``, ``Path``, ``list[str]``, with no bounds, parser or
path checks) and values of a plain form (an integer or decimal number written out, a readable or
missing path), :func:`plain_value` gives the value the adapter gives: the text itself,
``int(text)``, ``float(text)``, ``Path(text)``. Any other value (a malformed number, an
unreadable path, ...) goes to typer's own conversion, so its messages are unchanged.
:func:`use_plain_params` installs this in typer, whose own conversion is then built only for
a value that needs it.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

from .._table import is_decimal

__all__ = ["plain_value", "use_plain_params", "layer_as_expected", "NOT_PLAIN"]

NOT_PLAIN = object()  # plain_value's answer for a value typer must convert itself
_INT = re.compile(r"[+-]?\d+")
#: parameter settings under which a plain value converts as above (typer's defaults)
_DEFAULTS = {"parser": None, "min": None, "max": None, "clamp": False, "exists": False,
             "resolve_path": False, "allow_dash": False, "path_type": None, "readable": True,
             "writable": False, "file_okay": True, "dir_okay": True}


def plain_kind(annotation, info) -> bool:
    """Whether an option of this annotation and settings (typer's ParameterInfo) is plain."""
    if not (annotation in (str, int, float, bool, Path)
            or (get_origin(annotation) is list and get_args(annotation) == (str,))):
        return False
    return all(getattr(info, k, v) == v for k, v in _DEFAULTS.items())


def plain_value(annotation, value) -> Any:
    """The converted value of a plain kind (:func:`plain_kind`), or :data:`NOT_PLAIN`."""
    if annotation is str:
        return value if type(value) is str else NOT_PLAIN
    if annotation is bool:
        return value if type(value) is bool else NOT_PLAIN
    if annotation is int:
        if type(value) is int:
            return value
        return int(value) if type(value) is str and _INT.fullmatch(value) else NOT_PLAIN
    if annotation is float:
        if type(value) is float:
            return value
        return float(value) if type(value) is str and is_decimal(value) else NOT_PLAIN
    if annotation is Path:
        if type(value) is not str or not value:
            return NOT_PLAIN
        try:
            os.stat(value)
        except (OSError, ValueError):
            return Path(value)
        return Path(value) if os.access(value, os.R_OK) else NOT_PLAIN
    if isinstance(value, (list, tuple)) and all(type(v) is str for v in value):
        return list(value)
    return NOT_PLAIN


def layer_as_expected(runtime_param, parameter) -> bool:
    """Whether typer's conversion layer has the shape this module was written against: a
    dataclass ``RuntimeParam(parameter_info, annotation)`` with ``_coerce_value(value, param,
    ctx)``, and parameters with ``get_runtime_param`` and ``type_descriptor``. Any other shape
    (another typer release) keeps typer's own conversion throughout."""
    import dataclasses
    import inspect
    try:
        fields = tuple(f.name for f in dataclasses.fields(runtime_param))
        coerce = tuple(inspect.signature(runtime_param._coerce_value).parameters)
    except (TypeError, ValueError, AttributeError):
        return False
    return (fields == ("parameter_info", "annotation")
            and coerce == ("self", "value", "param", "ctx")
            and callable(getattr(parameter, "get_runtime_param", None))
            and "type_descriptor" in getattr(parameter, "__annotations__", {}))


def use_plain_params() -> None:
    """Let typer convert plain option values with :func:`plain_value` and build its pydantic
    conversion only for a value that needs it (typer builds it for every option, even one not
    given). Nothing happens on a typer without this layer; calling it again changes nothing."""
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
        from typer.core import _TyperParameter
    except ImportError:  # pragma: no cover - another typer: its own conversion throughout
        return
    if getattr(_TyperParameter, "_plain_values", False) or not layer_as_expected(
            RuntimeParam, _TyperParameter):
        return

    @dataclass(frozen=True)
    class _Deferred(RuntimeParam):
        """A plain value converted here; any other (None never comes here) by typer's own
        conversion, built on first need and kept."""

        def _coerce_value(self, value, param, ctx):
            if self.annotation is Path and value == "":   # Path("") would be the current folder
                try:  # typer >= 0.20 vendors click
                    from typer._click.exceptions import BadParameter
                except ImportError:  # pragma: no cover - older typer on real click
                    from click.exceptions import BadParameter
                raise BadParameter("an empty path; give a file or folder name", param=param)
            if plain_kind(self.annotation, self.parameter_info):
                out = plain_value(self.annotation, value)
                if out is not NOT_PLAIN:
                    return out
            param._runtime_param = build_runtime_param(param.type_descriptor)
            return param._runtime_param._coerce_value(value, param=param, ctx=ctx)

    def get_runtime_param(self):
        if self._runtime_param is None:
            desc = self.type_descriptor
            if desc.file_annotation is not None:
                self._runtime_param = build_runtime_param(desc)
            else:
                self._runtime_param = _Deferred(parameter_info=desc.parameter_info,
                                                annotation=desc.annotation)
        return self._runtime_param

    _TyperParameter.get_runtime_param = get_runtime_param
    _TyperParameter._plain_values = True
