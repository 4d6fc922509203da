"""``atlas compare-models RUN_A RUN_B``: two finished live runs, the difference of their
predicted leaderboard scores with a 95% interval (:mod:`atlascat.studies.paired`)."""
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
        from ..studies.paired import paired_difference
        from ..live.evaluation import run_folder, run_predictions
        from ..live.store import RunStore, default_store_path, known_stores

        stores: dict[Path, tuple] = {}

        def store_of(run_id: str) -> Path:
            """The store holding run ``run_id``: --db, else the first of the stores `atlas runs`
            lists (the default one and every one a run wrote elsewhere) that holds it."""
            if db is not None:
                if not db.exists():
                    raise LiveRunError(f"run database {str(db)!r} does not exist (give --db, "
                                       "or the run's folder instead of its id)")
                return db
            paths = known_stores()
            if not paths:
                raise LiveRunError(f"run database {str(default_store_path())!r} does not exist "
                                   "and no run was written elsewhere (give --db, or the run's "
                                   "folder instead of its id)")
            return next((p for p in paths if RunStore(p).has_run(run_id)), paths[0])

        def resolve(run: str) -> tuple:
            """(store, its runs, run id) of a run id or of a run folder."""
            folder = Path(run)
            if folder.is_dir():
                path, run_id = run_folder(folder, db)
            else:
                path, run_id = store_of(run), run
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
                              "benchmark with a predicted score")
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

        df = pd.DataFrame(rows)
        names = [f"{_model_of(runs, r)} (run {r})" for (_, runs, r) in (first, second)]
        # a bank folder's scores are its benchmark's, not a leaderboard's
        from ..live.report import SOURCE

        unit = ("points" if any(p.get("population") == SOURCE for p in preds[0].values())
                else "leaderboard points")
        print_frame(df, title=f"first: {names[0]}; second: {names[1]}; first minus second "
                              f"({unit}, 95% interval)", float_format="{:.1f}")
        err_console.print("told apart: the interval excludes 0. Unrelated models: --rho 0; "
                          "near-duplicates get narrower intervals with --rho (see "
                          "docs/leaderboard.md)", highlight=False)


def _model_of(runs, run_id: str) -> str:
    """The model a run measured, from its store's run list (the run id where it has none)."""
    row = runs[runs["run_id"] == run_id]
    model = row["model"].iloc[0] if len(row) and "model" in row else None
    return str(model) if model else run_id
