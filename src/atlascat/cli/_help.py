"""How ``atlas COMMAND --help`` reads: click's plain help layout (the app sets typer's
``rich_markup_mode=None``), so that at 80 columns an option's help gets a 46-character column
and a docstring's paragraphs are wrapped as paragraphs; help texts are printed literally (no
markup pass: "[default: the file stem]" stays).

Every command is an :class:`AtlasCommand` (typer's ``cls`` hook, set by :func:`use_atlas_help`),
which words two things its own way:

- a repeatable option's or variadic argument's type reads ``<str>`` (each use takes one value;
  the help says it can be repeated), not ``<list[str]>``;
- an argument reads in capitals in the usage line, a required one ``RESPONSES`` as the docs
  write it, not ``{RESPONSES}`` (an optional one stays ``[RESPONSES]``).
"""
from __future__ import annotations

import re

from typer.core import TyperCommand

__all__ = ["AtlasCommand", "use_atlas_help"]

_LIST = re.compile(r"<list\[(.+?)\]>")
_REQUIRED = re.compile(r"^\{(.*)\}")


class AtlasCommand(TyperCommand):
    """A typer command whose help words list types and required arguments as above."""

    def collect_usage_pieces(self, ctx) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            for piece in param.get_usage_pieces(ctx):
                if param.param_type_name == "argument":
                    piece = _REQUIRED.sub(r"\1", piece).upper()
                pieces.append(piece)
        return pieces

    def format_options(self, ctx, formatter) -> None:
        sections: dict[str, list] = {"Arguments": [], "Options": []}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None and param.param_type_name in ("argument", "option"):
                name, text = record
                if param.param_type_name == "argument":  # capitals, as in the usage line
                    head, _, rest = name.partition(" ")
                    name = f"{head.upper()} {rest}".strip()
                sections["Arguments" if param.param_type_name == "argument" else "Options"] \
                    .append((_LIST.sub(r"<\1>", name), text))
        for title, rows in sections.items():
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def use_atlas_help(app) -> None:
    """Make every command of ``app`` and of its sub-apps an :class:`AtlasCommand` (before the
    click commands are built)."""
    for info in app.registered_commands:
        if info.cls in (None, TyperCommand):
            info.cls = AtlasCommand
    for group in app.registered_groups:
        use_atlas_help(group.typer_instance)
