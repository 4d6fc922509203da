"""The ``atlas`` command line: thin wrappers over library calls.

Every command lives in its own module ``atlascat/cli/cmd_<name>.py`` exposing
``register(app: typer.Typer) -> None``; modules are discovered here, so adding a command never
touches this file. Command modules import heavy library code inside the command function, so
``atlas --help`` stays fast.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys

import typer
from rich.markup import escape

from .._version import __version__
from ..errors import AtlasError
from ._common import console, err_console

app = typer.Typer(
    name="atlas",
    help="ATLAS: Adaptive Testing for LLM Ability Scoring (IRT calibration, scoring, adaptive tests).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool):
    if value:
        console.print(f"atlas {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Show the version and exit.")):
    """ATLAS command line."""


def _register_commands() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("cmd_"):
            importlib.import_module(f"{__name__}.{info.name}").register(app)


_register_commands()


def main(argv=None) -> int:
    """Entry point. Library errors (AtlasError) become a one-line message and exit code 2;
    usage errors are reported by typer/click with exit code 2 as usual."""
    try:
        app(args=argv)  # standalone mode: exits through SystemExit
    except AtlasError as exc:
        # the message is plain text: no markup ([live] stays), no emoji (:abc:), no wrapping
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", emoji=False,
                          highlight=False, soft_wrap=True)
        return 2
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
