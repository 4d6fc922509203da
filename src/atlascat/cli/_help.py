"""How ``atlas COMMAND --help`` reads: typer's rich help, with four corrections.

typer (>= 0.20) formats help with rich and, left alone:

- reads every help text as rich markup, so a bracketed note is taken for a style tag and
  dropped: "Run name [default: the file stem]." printed as "Run name ."; help texts are
  printed literally here (:func:`rich.markup.escape` before typer's markup pass);
- writes a repeatable option's type as ``<list[str]>``; here ``<str>`` (each use takes one
  value; the help says it can be repeated), and a variadic argument's as ``<str>...``;
- writes a required argument as ``{RESPONSES}`` in the usage line; here ``RESPONSES``, as click
  and the docs write it (an optional one stays ``[RESPONSES]``);
- prints a type column for flags (``--json <bool>``); here flags have none.

Each correction wraps one typer method and falls back to typer's own output when the method
is missing (another typer version).
"""
from __future__ import annotations

import re

from rich.markup import escape

__all__ = ["fix_help_format"]

_LIST = re.compile(r"^<list\[(.+)\]>$")


def _wrap(cls, name: str, make) -> None:
    original = getattr(cls, name, None)
    if original is None or getattr(original, "_atlas", False):
        return
    fixed = make(original)
    fixed._atlas = True
    setattr(cls, name, fixed)


def _type_column(original):
    def display_type_rich(self, ctx):
        if getattr(self, "is_flag", False) or getattr(self, "is_bool_flag", False):
            return None
        shown = original(self, ctx)
        m = _LIST.match(shown) if isinstance(shown, str) else None
        if m is None:
            return shown
        return f"<{m.group(1)}>" + ("..." if getattr(self, "param_type_name", "") == "argument"
                                    else "")
    return display_type_rich


def _usage_name(original):
    def _usage_display_name(self):
        name = original(self)
        return re.sub(r"^\{(.*)\}", r"\1", name)
    return _usage_display_name


def fix_help_format() -> None:
    """Apply the corrections (idempotent)."""
    try:
        from typer import rich_utils
        from typer.core import TyperArgument, TyperOption
    except ImportError:  # pragma: no cover - a typer without rich help
        return
    _wrap(TyperOption, "display_type_rich", _type_column)
    _wrap(TyperArgument, "display_type_rich", _type_column)
    _wrap(TyperArgument, "_usage_display_name", _usage_name)
    original = getattr(rich_utils, "_make_rich_text", None)
    if original is not None and not getattr(original, "_atlas", False):
        def _make_rich_text(*, text, style="", markup_mode):
            if markup_mode == "rich":
                text = escape(text)
            return original(text=text, style=style, markup_mode=markup_mode)

        _make_rich_text._atlas = True
        rich_utils._make_rich_text = _make_rich_text
