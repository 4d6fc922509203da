"""``atlas compare RUN_DIR [RUN_DIR ...]``: the paper's comparison tables across benchmark runs."""
from __future__ import annotations

from pathlib import Path

import typer

from ._common import console, output_dir


def register(app: typer.Typer) -> None:
    @app.command("compare")
    def compare(
        runs: list[Path] = typer.Argument(..., exists=True, file_okay=False,
                                          help="Run directories written by `atlas benchmark`."),
        output: Path = typer.Option(None, "-o", "--output",
                                    help="Write the combined tables (CSV + Markdown) to this folder."),
    ):
        """Print (as Markdown) and optionally write Tables 2, 3 and 6 for one or more runs."""
        from ..studies.protocol import BenchmarkRun
        from ..studies.tables import (TABLES, comparison, format_table, make_table,
                                       table_title, to_markdown, wide_ability_table,
                                       table_notes, write_tables, WIDE_TITLE)
        from ._common import print_text

        out = output_dir(output)
        if out and len(runs) > 1 and any(Path(r).resolve() == Path(out).resolve() for r in runs):
            from ..errors import ConfigError

            raise ConfigError(f"-o/--output {str(out)!r} is one of the runs compared: the "
                              "combined tables would replace that run's own; give another "
                              "folder")
        loaded = [BenchmarkRun.read(r) for r in runs]
        summary, words = comparison(loaded)   # words: continuous scores, "mean score"
        if len(loaded) > 1:
            print_text(to_markdown(wide_ability_table(summary),
                                   title=WIDE_TITLE))
        for name in TABLES:
            table = make_table(summary, name)
            if len(loaded) == 1:
                table = table.drop(columns="benchmark")
            print_text(to_markdown(format_table(table, words), title=table_title(name, words)))
        if table_notes(summary, words):
            print_text(table_notes(summary, words))
        if out:
            paths = write_tables(summary if len(loaded) > 1 else summary.drop(columns="benchmark"),
                                 out, continuous=words)
            console.print(f"tables written to [bold]{paths['markdown'].parent}[/]")
