"""Shared CLI helpers: consoles, progress bars, table printing."""
from __future__ import annotations

from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

console = Console()
err_console = Console(stderr=True)


@contextmanager
def progress_bar(description: str, total: int | None):
    """A rich progress bar on stderr; yields ``advance(n=1)``."""
    with Progress(TextColumn("[bold blue]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console, transient=False) as progress:
        task = progress.add_task(description, total=total)

        def advance(n: int = 1, total: int | None = None):
            if total is not None:
                progress.update(task, total=total)
            progress.advance(task, n)

        yield advance


def print_frame(df, title: str | None = None, float_format: str = "{:.4g}", max_rows: int = 50):
    """Print a DataFrame as a rich table."""
    table = Table(title=title, show_lines=False)
    for col in df.columns:
        table.add_column(str(col))
    for _, row in df.head(max_rows).iterrows():
        table.add_row(*[float_format.format(v) if isinstance(v, float) else str(v) for v in row])
    console.print(table)
    if len(df) > max_rows:
        console.print(f"... {len(df) - max_rows} more rows")
