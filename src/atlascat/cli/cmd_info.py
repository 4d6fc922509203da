"""``atlas info PATH``: describe a response matrix or an item bank."""
from __future__ import annotations

import json
from pathlib import Path

import typer

from ._common import console, escape, json_safe


def describe(path: Path) -> dict:
    """Summary of a response matrix or a bank file (detected from its columns)."""
    import numpy as np
    import pandas as pd

    from ..catalogue import KINDS, BankRef
    from ..responses import ResponseMatrix
    from ..validation import check_input_file

    p = Path(path)
    if p.is_file():
        p = check_input_file(p, what="file", option="PATH")
    if not p.is_file() or _looks_like_bank(p):
        ref = BankRef.from_option(path, option="PATH", normalize_ids=False, kinds=KINDS)
        return {"kind": "bank", "path": str(path), **ref.load().summary()}
    rm = ResponseMatrix.read(p, on_empty="keep")
    if not rm.observed.any():
        from ..errors import ResponseDataError

        raise ResponseDataError(f"{str(path)!r} holds no response at all (every cell is blank)")
    acc = rm.accuracy
    acc = acc[~np.isnan(acc)]
    q = [0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0]
    observed = rm.observed
    return {
        "kind": "responses",
        "path": str(p),
        "subjects": rm.n_subjects,
        "items": rm.n_items,
        "missing_fraction": round(rm.missing_fraction, 6),
        "binary": rm.is_binary,
        "accuracy_quantiles": dict(zip(["min", "q05", "q25", "median", "q75", "q95", "max"],
                                       np.quantile(acc, q).round(4).tolist())),
        "items_per_subject": {"min": int(observed.sum(1).min()), "median": float(np.median(observed.sum(1))),
                              "max": int(observed.sum(1).max())},
        "subjects_without_response": int((~observed.any(1)).sum()),
        "items_without_response": int((~observed.any(0)).sum()),
        "item_mean_quantiles": dict(zip(["min", "median", "max"],
                                        pd.Series(rm.item_means).quantile([0, .5, 1]).round(4).tolist())),
    }


def _looks_like_bank(path: Path) -> bool:
    from ..validation import read_frame

    cols = set(read_frame(path, what="file", option="PATH", nrows=0).columns.astype(str))
    return {"a1", "d"} <= cols or {"a", "b"} <= cols


def register(app: typer.Typer) -> None:
    @app.command("info")
    def info(path: str = typer.Argument(..., metavar="PATH",
                                        help="Response matrix (CSV/CSV.GZ/Parquet), item bank file, "
                                             "or a bundled bank name (arc, paper-arc, ...)."),
             as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")):
        """Describe a response matrix or an item bank.

        For a matrix: subjects, items, missing fraction, accuracy quantiles. For a bank: item
        count, parameter quantiles, items with a <= 0 or c > 0.5.
        """
        summary = describe(path)
        if as_json:
            console.print_json(json.dumps(json_safe(summary)))
            return
        if summary["kind"] == "responses":
            console.print(f"[bold]{escape(path)}[/]: response matrix")
            console.print(f"  subjects: {summary['subjects']}   items: {summary['items']}   "
                          f"missing: {summary['missing_fraction']:.1%}   binary: {summary['binary']}")
            console.print(f"  accuracy quantiles: {summary['accuracy_quantiles']}")
            console.print(f"  items per subject: {summary['items_per_subject']}")
            if summary["subjects_without_response"] or summary["items_without_response"]:
                console.print(f"  [yellow]all-missing: {summary['subjects_without_response']} subjects, "
                              f"{summary['items_without_response']} items[/]")
        else:
            console.print(f"[bold]{escape(path)}[/]: item bank, {summary['n_items']} items, "
                          f"model {summary['model']}")
            for name, qs in summary["quantiles"].items():
                console.print(f"  {name}: {qs}")
            na, nc = summary["nonpositive_a"], summary["c_above_0.5"]
            console.print(f"  items with a <= 0: {len(na)} {na[:10]}")
            console.print(f"  items with c > 0.5: {len(nc)} {nc[:10]}")
