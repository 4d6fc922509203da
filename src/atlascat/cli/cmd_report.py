"""``atlas report RUN_DIR [RUN_DIR ...] -o report.html``: one self-contained HTML report."""
from __future__ import annotations

from pathlib import Path

import typer

from ._common import console, output_file


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report(
        runs: list[Path] = typer.Argument(..., exists=True, file_okay=False,
                                          help="Run directories written by `atlas benchmark`."),
        output: Path = typer.Option(None, "-o", "--output", show_default=False,
                                    help="HTML file to write [default: report.html in the first "
                                         "RUN_DIR]."),
        title: str = typer.Option("ATLAS benchmark report", "--title", help="Title of the page."),
    ):
        """Tables, identity plots, theta vs accuracy and rank shifts, test information functions,
        exposure histograms and example CAT trajectories, in one file with embedded images."""
        from ..studies.report import write_report

        out = output_file(output if output is not None else Path(runs[0]) / "report.html")
        path = write_report(runs, out, title=title)
        console.print(f"report written to [bold]{path}[/] ({path.stat().st_size / 1e6:.1f} MB)")
