"""The ``atlas`` command line: thin wrappers over library calls.

Every command lives in its own module ``atlascat/cli/cmd_<name>.py`` exposing
``register(app: typer.Typer) -> None``; modules are discovered here, so adding a command never
touches this file. Command modules import heavy library code inside the command function, so
``atlas --help`` stays fast. The modules are imported when the app's commands are first asked
for: all of them (``atlas --help``, ``app.registered_commands``), or, while :func:`main` runs
``atlas NAME ...``, the one module of NAME.
"""
from __future__ import annotations

from .._startup import INTERRUPTED, catch_interrupts, interrupted, quiet_start

quiet_start()   # a Ctrl-C while atlas starts: one line, exit status 130 (atlascat/_startup.py)

import importlib
import pkgutil
import re
import sys
from pathlib import Path

import typer

from .._version import __version__
from ..errors import AtlasError
from ._common import console, err_console
from ._help import use_atlas_help

_ALL = "*"


class _Atlas(typer.Typer):
    """The atlas app, whose command modules are imported and registered when its commands
    are first asked for: all of them, or only ``only`` (a command :func:`main` runs)."""

    only: str | None = None

    def __init__(self, **kwargs):
        self._loaded: set[str] = set()   # registered modules (_ALL: every one, in order)
        self._loading = False
        super().__init__(**kwargs)

    @property
    def registered_commands(self):
        self._register()
        return self._commands

    @registered_commands.setter
    def registered_commands(self, value):
        self._commands = value

    @property
    def registered_groups(self):
        self._register()
        return self._groups

    @registered_groups.setter
    def registered_groups(self, value):
        self._groups = value

    def _register(self) -> None:
        if self._loading or _ALL in self._loaded or (self.only and self.only in self._loaded):
            return
        self._loading = True
        try:
            if self.only:
                modules, self._loaded = [self.only], self._loaded | {self.only}
            else:  # all of them, in the order of their names
                self._commands.clear()
                self._groups.clear()
                modules, self._loaded = _command_modules(), {_ALL}
            for name in modules:
                importlib.import_module(f"{__name__}.{name}").register(self)
            use_atlas_help(self)
        finally:
            self._loading = False


def _command_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("cmd_"))


def _command_module(args) -> str | None:
    """The module of the command ``atlas ARGS`` runs (None: not a command's plain name)."""
    name = str(args[0]) if args else ""
    module = f"cmd_{name.replace('-', '_')}"
    if re.fullmatch(r"[a-z]+(-[a-z]+)*", name) and (Path(__file__).parent
                                                   / f"{module}.py").is_file():
        return module
    return None


app = _Atlas(
    name="atlas",
    help="ATLAS: Adaptive Testing for LLM Ability Scoring (IRT calibration, scoring, adaptive tests).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: readable at 80 columns (cli/_help.py)
)


def _version(value: bool):
    if value:
        console.print(f"atlas {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Show the version and exit.")):
    """ATLAS command line."""
    from ._common import reset_quiet

    reset_quiet()  # every command starts loud; its own -q/--quiet turns quiet on


def main(argv=None) -> int:
    """Entry point. Library errors (AtlasError) become a one-line message and exit code 2;
    usage errors are reported by typer/click with exit code 2 as usual. Input that ends early
    (a truncated .gz read by a library that raises EOFError, which click would turn into a bare
    'Aborted.') is reported as an error with exit code 2 too. A Ctrl-C that no command's own
    handler takes (while atlas starts, before ``atlas evaluate`` creates its runs) is one line,
    ``interrupted``, and exit code 130 (atlascat/_startup.py)."""
    from ._params import use_plain_params

    use_plain_params()  # plain option values converted without pydantic (cli/_params.py)
    app.only = _command_module(sys.argv[1:] if argv is None else list(argv))
    try:
        return _main(argv)
    except KeyboardInterrupt:   # before a command's own handler, or one it lets through
        err_console.print(INTERRUPTED, markup=False, highlight=False)
        return 130


def _main(argv) -> int:
    """:func:`main`'s command run, its errors as one line each."""
    import errno

    try:  # typer >= 0.20 vendors click
        from typer._click.exceptions import ClickException
    except ImportError:  # pragma: no cover - older typer on real click
        from click.exceptions import ClickException

    from .._blas import small_products
    from ._common import one_line_warnings, print_error

    catch_interrupts()
    try:
        # one BLAS thread for small products (atlascat._blas); warnings as one line each
        with small_products(), one_line_warnings():
            rv = app(args=argv, standalone_mode=False)
    except AtlasError as exc:
        print_error(exc)
        return 2
    except typer.Abort as exc:
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, EOFError):
            print_error("an input file ended unexpectedly (a truncated or damaged .gz file?); "
                        "re-download or re-compress it")
            return 2
        if isinstance(cause, KeyboardInterrupt):
            err_console.print(INTERRUPTED, markup=False, highlight=False)
            return 130
        err_console.print("Aborted.")
        return 1
    except ClickException as exc:  # usage errors: exit code 2
        hint = _llm_hint(exc, sys.argv[1:] if argv is None else list(argv))
        if hint:
            print_error(hint)
            return 2
        if type(exc).__name__ == "NoArgsIsHelpError":    # `atlas` alone: its help, as is
            err_console.print(exc.format_message(), markup=False, highlight=False)
            return exc.exit_code
        if not err_console.is_terminal and exc.format_message().strip():
            # piped: one plain line, like every other error (no-args help is printed as is)
            ctx = getattr(exc, "ctx", None)
            where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            print_error(f"{exc.format_message()}{where}")
            return exc.exit_code
        try:
            from typer import rich_utils

            rich_utils.rich_format_error(exc)
        except Exception:  # noqa: BLE001 - fall back to click's plain message
            exc.show()
        return exc.exit_code
    except (UnicodeDecodeError, EOFError) as exc:  # a reader we did not wrap: still one line
        print_error(f"cannot read an input file: {exc}; give UTF-8 text (CSV) or Parquet")
        return 2
    except OSError as exc:
        if exc.errno == errno.EPIPE:  # output piped into a closed reader (head): not an error
            return 1
        where = f" {exc.filename!r}" if getattr(exc, "filename", None) else ""
        print_error(f"cannot access{where}: {exc.strerror or exc}; check the path and permissions")
        return 2
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        app.only = None
    if rv == 130 and interrupted():   # typer's silent exit status for a KeyboardInterrupt
        err_console.print(INTERRUPTED, markup=False, highlight=False)
    return rv if isinstance(rv, int) else 0


def _llm_hint(exc, argv: list) -> str | None:
    """``atlas evaluate --model X``: ``--model`` names the IRT model in ATLAS (calibrate,
    benchmark, build-bank) and the LLM is ``--llm``; say so in one line."""
    ctx = getattr(exc, "ctx", None)
    if getattr(exc, "option_name", None) != "--model" or ctx is None or not any(
            getattr(p, "name", None) == "llm" for p in ctx.command.params):
        return None
    value = next((a.split("=", 1)[1] for a in argv if a.startswith("--model=")), None)
    if value is None and "--model" in argv and argv.index("--model") + 1 < len(argv):
        value = argv[argv.index("--model") + 1]
    from ..irt.calibrate import MODELS

    command = f"atlas {ctx.info_name}"
    if value is None or value.lower() in MODELS + ("auto", "bic"):
        return (f"{command} has no --model: the IRT model is the bank's (--model "
                "belongs to atlas calibrate and build-bank); the LLM is --llm")
    return f"{command} has no --model (that is the IRT model); did you mean --llm {value}?"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
