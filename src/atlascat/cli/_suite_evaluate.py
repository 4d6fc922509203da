"""``atlas evaluate --suite``'s display: every benchmark of a suite asked in ONE live run.

The run itself is :class:`atlascat.live.service.LiveRun`'s, as every run's. The table printed
(each benchmark's predicted score, 95% interval and items asked, then the average with its
interval and percentile) is :func:`atlascat.live.suite_run.suite_table_rows` of
:func:`~atlascat.live.suite_run.suite_result`, the numbers the page, ``results.json`` and
``atlas runs`` show.
"""
from __future__ import annotations

from ._common import console, print_frame, warn

__all__ = ["floor_note", "print_suite"]


def floor_note(suite, config) -> str | None:
    """A one-line note when ``config.target_se`` cannot stop the test: it is at or below the
    average's SE floor (the score links' residual, which no item removes)."""
    from ..suite import SuiteSession

    if config.target_se is None:
        return None
    floor = float(SuiteSession(suite, config).floor_se()[0])
    if config.target_se > floor:
        return None
    return (f"note: --target-se {config.target_se:g} is at or below the average's SE floor "
            f"({floor:.2f} points: the score links' residual, which no item removes); the test "
            f"runs to --max-items ({config.max_items})")


def print_suite(row: dict) -> None:
    """A finished (or stopped) suite run: its table, then the average, protocol and page."""
    import pandas as pd

    from ..live.report import describe_prediction

    if row["table"]:
        print_frame(pd.DataFrame(row["table"]),
                    title=f"{row['model']} on {row['suite']}: predicted leaderboard scores (%)",
                    result=True)
    lines = [f"run {row['run_id']}: {row['n_items']} items"
             + (f", stop: {row['stop_reason']}" if row.get("stop_reason") else "")
             + f", status {row['status']}"]
    if row.get("average"):
        lines.append(f"  average: {describe_prediction(row['average'])}")
    lines.append(f"  protocol: {row['protocol_label']}")
    from ..live.refusals import refused_line

    refused = refused_line(row.get("n_refused"), row.get("refused"))
    if refused:
        lines.append(f"  {refused}")
    lines.append(f"  report: {row['report']}")
    console.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)
    for b in row.get("benchmarks") or []:  # warnings on stderr, as every other
        if b.get("warning"):
            warn(f"{b['name']}: {b['warning']}")
