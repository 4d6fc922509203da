"""``atlas compare-models RUN_A RUN_B``: two finished live runs, the difference of their
predicted leaderboard scores with a 95% interval (:mod:`atlascat.evaluate.paired`)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ._common import err_console, print_frame


def register(app: typer.Typer) -> None:
    @app.command("compare-models")
    def compare_models(
        run_a: str = typer.Argument(..., help="Run id of the first model (see `atlas runs`)."),
        run_b: str = typer.Argument(..., help="Run id of the second model (the baseline)."),
        db: Optional[Path] = typer.Option(None, "--db",
                                          help="SQLite run store [default: runs.sqlite in "
                                               "$ATLAS_HOME, as `atlas evaluate` and `atlas "
                                               "runs`]."),
        rho: float = typer.Option(0.0, "--rho",
                                  help="Correlation of the two predictions' errors: 0 for "
                                       "unrelated models (measured: docs/leaderboard.md); "
                                       "larger for near-duplicates (checkpoints, merges)."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    ):
        """Per benchmark (and the average of a suite run): first minus second, 95% interval,
        and whether the interval tells the two apart.

        The interval combines the two predictions' intervals in quadrature, times the bank's
        pair scale (fitted so that 95% of the calibration models' pairs are covered; measured
        on held-out pairs by benchmarks/bench_paired.py).
        """
        from ..errors import ConfigError, LiveRunError
        from ..evaluate.paired import paired_difference
        from ..live.store import RunStore, default_store_path

        db = db if db is not None else default_store_path()
        if not db.exists():
            raise LiveRunError(f"run database {str(db)!r} does not exist (give --db)")
        if run_a == run_b:
            raise ConfigError("give two different runs (RUN_A RUN_B)")
        store = RunStore(db)
        runs = store.list_runs()
        preds = [run_predictions(store, r, runs) for r in (run_a, run_b)]
        common = [k for k in preds[0] if k in preds[1]]
        if not common:
            raise ConfigError(f"runs {run_a} ({', '.join(preds[0]) or 'no prediction'}) and "
                              f"{run_b} ({', '.join(preds[1]) or 'no prediction'}) share no "
                              "benchmark with a predicted leaderboard score")
        rows = []
        for bench in common:
            d = paired_difference(preds[0][bench], preds[1][bench], benchmark=bench, rho=rho)
            rows.append({"benchmark": bench, "first": 100 * preds[0][bench]["score"],
                         "second": 100 * preds[1][bench]["score"], "difference": 100 * d["diff"],
                         "lo": 100 * d["lo"], "hi": 100 * d["hi"],
                         "told_apart": "yes" if d["told_apart"] else "no"})
        if as_json:
            typer.echo(json.dumps({"first": run_a, "second": run_b, "rho": rho, "rows": rows}))
            return
        import pandas as pd

        df = pd.DataFrame(rows).round(2)
        print_frame(df, title=f"{run_a} minus {run_b} (leaderboard points, 95% interval)")
        err_console.print("told apart: the interval excludes 0. Unrelated models: --rho 0; "
                          "near-duplicates get narrower intervals with --rho (see "
                          "docs/leaderboard.md)", highlight=False)


def run_predictions(store, run_id: str, runs=None) -> dict:
    """{benchmark: prediction (score, lo, hi, ... 0-1)} of a finished run, as `atlas runs`
    computes it; a suite run gives each of its benchmarks and ``average``. ``runs``: the
    store's :meth:`~atlascat.live.store.RunStore.list_runs`, when already read."""
    from ..errors import ConfigError
    from .cmd_runs import _prediction

    runs = store.list_runs() if runs is None else runs
    match = runs[runs["run_id"] == run_id]
    if match.empty:
        raise ConfigError(f"no run {run_id!r} in the store; list them with `atlas runs`")
    run = match.iloc[0].to_dict()
    if run.get("state") != "done":
        raise ConfigError(f"run {run_id} is {run.get('state')}: finish it first "
                          f"(atlas evaluate --resume {run_id})")
    from ..live.suite_run import is_suite_run, suite_result

    if is_suite_run(run):
        res = suite_result(store, run_id)
        out = {b["name"]: b for b in res["benchmarks"] if b.get("score") is not None}
        if res.get("average") and res["average"].get("score") is not None:
            out["average"] = res["average"]
        return out
    ref = str(run.get("bank_ref") or "")
    pred = _prediction(store, run)
    if pred.get("score") is None:
        raise ConfigError(f"run {run_id} has no predicted leaderboard score (bank {ref!r}: "
                          "only the shipped banks carry a score link)")
    return {ref.split(":", 1)[1]: pred}
