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

and it refuses an option of one value given twice (``--subject A --subject B``: click keeps the
last one silently) in one line, exit 2; a repeatable option (``--llm``) or a counted one may
be given as often as it is meant to.
"""
from __future__ import annotations

import re

from typer.core import TyperCommand

__all__ = ["AtlasCommand", "use_atlas_help", "given_once"]

_LIST = re.compile(r"<list\[(.+?)\]>")
_REQUIRED = re.compile(r"^\{(.*)\}")


class AtlasCommand(TyperCommand):
    """A typer command whose help words list types and required arguments as above, and
    whose options of one value are given at most once."""

    def make_parser(self, ctx):
        parser = super().make_parser(ctx)
        parse = parser.parse_args

        def parse_once(args):
            opts, rest, order = parse(args=args)
            if not ctx.resilient_parsing:   # shell completion parses partial lines
                given_once(ctx, order)
            return opts, rest, order

        parser.parse_args = parse_once
        return parser

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


def given_once(ctx, order) -> None:
    """Refuse (click's usage error: one line, exit 2) an option that takes one value or is a
    flag and appears more than once in ``order`` (the parameters in the order the command
    line gave them, one entry per use)."""
    try:  # typer >= 0.20 vendors click
        from typer._click.exceptions import UsageError
    except ImportError:  # pragma: no cover - older typer on real click
        from click.exceptions import UsageError

    seen: dict = {}
    for param in order:
        if getattr(param, "param_type_name", None) != "option" or param.multiple \
                or getattr(param, "count", False):
            continue
        seen[param] = seen.get(param, 0) + 1
        if seen[param] == 2:
            name = "/".join(sorted(param.opts, key=len, reverse=True))
            raise UsageError(f"{name} was given more than once; give it once (only the last "
                             "would be used)", ctx)


def use_atlas_help(app) -> None:
    """Make every command of ``app`` and of its sub-apps an :class:`AtlasCommand` (before the
    click commands are built)."""
    for info in app.registered_commands:
        if info.cls in (None, TyperCommand):
            info.cls = AtlasCommand
    for group in app.registered_groups:
        use_atlas_help(group.typer_instance)
