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
        run_a: str = typer.Argument(..., help="The first model's run: a run id (see `atlas "
                                              "runs`) or the folder `atlas evaluate -o` wrote."),
        run_b: str = typer.Argument(..., help="The second model's run (the baseline): a run "
                                              "id or a run folder."),
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

        stores: dict[Path, tuple] = {}

        def resolve(run: str) -> tuple:
            """(store, its runs, run id) of a run id or of a run folder."""
            folder = Path(run)
            if folder.is_dir():
                path, run_id = run_folder(folder, db)
            else:
                path, run_id = (db if db is not None else default_store_path()), run
                if not path.exists():
                    raise LiveRunError(f"run database {str(path)!r} does not exist (give --db, "
                                       "or the run's folder instead of its id)")
            path = path.resolve()
            if path not in stores:
                store = RunStore(path)
                stores[path] = (store, store.list_runs())
            return (*stores[path], run_id)

        first, second = resolve(run_a), resolve(run_b)
        if first[2] == second[2]:
            raise ConfigError("give two different runs (RUN_A RUN_B)")
        run_a, run_b = first[2], second[2]
        preds = [run_predictions(store, r, runs) for store, runs, r in (first, second)]
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


def run_folder(folder: Path, db: Path | None = None) -> tuple[Path, str]:
    """(run store, run id) of the folder ``atlas evaluate -o FOLDER`` wrote: its
    ``results.json`` names the run; its ``runs.sqlite`` holds it, or ``db`` does (a run made
    with ``--db``)."""
    from ..errors import ConfigError

    results, store = folder / "results.json", folder / "runs.sqlite"
    if not results.exists():
        raise ConfigError(f"{str(folder)!r} holds no results.json: give a finished run's folder "
                          "(atlas evaluate -o FOLDER) or its run id")
    try:
        rows = json.loads(results.read_text())
        run_id = str((rows[0] if isinstance(rows, list) else rows)["run_id"])
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ConfigError(f"{str(results)!r} is not an atlas evaluate results file ({exc})") \
            from None
    if not store.exists():
        if db is None or not Path(db).exists():
            raise ConfigError(f"run {run_id} of {str(folder)!r} is stored elsewhere (its folder "
                              "has no runs.sqlite): give the run store with --db")
        store = Path(db)
    return store, run_id


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
