"""``atlas compare-models RUN_A RUN_B``: two finished live runs, the difference of their
predicted scores with a 95% interval (:mod:`atlascat.studies.paired`)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ._common import err_console, print_frame


def compare_models_command(
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
                                   "unrelated models (measured: benchmarks/results/paired.md); "
                                   "larger for near-duplicates (checkpoints, merges)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
):
    """Per benchmark (and the average of a suite run): first minus second, 95% interval,
    and whether the interval tells the two apart.

    The interval combines the two predictions' intervals in quadrature, times a shipped
    bank's pair scale (fitted so that 95% of the calibration models' pairs are covered;
    measured on held-out pairs by benchmarks/bench_paired.py; 1 for a bank of your own).
    """
    from ..errors import ConfigError

    resolve = _resolver(db)
    first, second = resolve(run_a), resolve(run_b)
    if first[2] == second[2]:
        raise ConfigError("give two different runs (RUN_A RUN_B)")
    rows = _rows(first, second, rho)
    mixed = _mixed_protocols(first, second)
    if mixed:
        err_console.print(f"warning: {mixed}", markup=False, highlight=False)
    if as_json:
        typer.echo(json.dumps({"first": first[2], "second": second[2], "rho": rho,
                               "rows": rows}))
        return
    import pandas as pd

    df = pd.DataFrame(rows)
    names = [f"{_model_of(runs, r)} (run {r})" for (_, runs, r) in (first, second)]
    from ..live.report import LEADERBOARD

    # a shipped bank's leaderboard; the user's own bank (a folder, a file, ratings): its scale
    units = {r["unit"] for r in rows}
    unit = ("leaderboard points" if all(r["population"] == LEADERBOARD for r in rows)
            else units.pop() if len(units) == 1 else "points")
    print_frame(df.drop(columns=["population", "unit"]), title=f"first: {names[0]}; second: {names[1]}; "
                f"first minus second ({unit}, 95% interval)", float_format="{:.1f}")
    err_console.print("told apart: the interval excludes 0. Unrelated models: --rho 0; "
                      "near-duplicates get narrower intervals with --rho (see "
                      "benchmarks/results/paired.md)", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("compare-models")(compare_models_command)


def _resolver(db):
    """``resolve(run)``: (store, its runs, run id) of a run id or of a run folder; a run id is
    looked up in --db, else in the first of the stores `atlas runs` lists (the default one and
    every one a run wrote elsewhere) that holds it."""
    from ..errors import LiveRunError
    from ..live.service import run_folder
    from ..live.store import RunStore, find_run_store

    stores: dict[Path, tuple] = {}

    def store_of(run_id: str) -> Path:
        if db is not None:
            if not db.exists():
                raise LiveRunError(f"run database {str(db)!r} does not exist (give --db, "
                                   "or the run's folder instead of its id)")
            return db
        return find_run_store(run_id)

    def resolve(run: str) -> tuple:
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

    return resolve


def _rows(first, second, rho: float) -> list[dict]:
    """Per benchmark both runs predict: first, second, their difference and its 95% interval
    (points: of percent, or of the metric's own scale for a bank folder built with
    --score-range), and whether it tells the two apart."""
    from ..errors import ConfigError
    from ..live.report import LEADERBOARD
    from ..live.service import run_predictions
    from ..studies.paired import paired_difference

    run_a, run_b = first[2], second[2]
    preds = [run_predictions(store, r, runs) for store, runs, r in (first, second)]
    common = [k for k in preds[0] if k in preds[1]]
    if not common:
        raise ConfigError(f"runs {run_a} ({', '.join(preds[0]) or 'no prediction'}) and "
                          f"{run_b} ({', '.join(preds[1]) or 'no prediction'}) share no "
                          "benchmark with a predicted score")
    refs = [_bank_ref(runs, r) for _, runs, r in (first, second)]
    rows = []
    for bench in common:
        _same_score(bench, [p[bench] for p in preds], refs, (run_a, run_b))
        # the pair scale was fitted on the leaderboard's links: a bank of one's own gets none
        shipped = preds[0][bench].get("population", LEADERBOARD) == LEADERBOARD
        d = paired_difference(preds[0][bench], preds[1][bench],
                              benchmark=bench if shipped else None, rho=rho)
        k = 1.0 if preds[0][bench].get("scale") else 100.0   # a metric's own scale, or 0-1
        rows.append({"benchmark": bench, "first": k * preds[0][bench]["score"],
                     "second": k * preds[1][bench]["score"], "difference": k * d["diff"],
                     "lo": k * d["lo"], "hi": k * d["hi"],
                     "told_apart": "yes" if d["told_apart"] else "no",
                     # a bank folder's score is its own benchmark's, not a leaderboard's
                     "population": preds[0][bench].get("population", LEADERBOARD),
                     "unit": _unit(preds[0][bench])})
    return rows


def _mixed_protocols(first, second) -> str | None:
    """A line when one run was asked by chat or text prompts (APPROXIMATE) and the other by
    the bank's own requests: their difference then mixes two ways of asking."""
    protos = []
    for _, runs, run_id in (first, second):
        row = runs[runs["run_id"] == run_id]
        protos.append(str(row["protocol"].iloc[0]) if len(row) and "protocol" in row else "")
    if (protos[0] == "approximate") == (protos[1] == "approximate"):
        return None
    k = 0 if protos[0] == "approximate" else 1
    ids = (first[2], second[2])
    return (f"run {ids[k]} was asked by chat or text prompts (APPROXIMATE), run {ids[1 - k]} "
            f"was not (protocol {protos[1 - k]}): the difference mixes two ways of asking")


def _bank_ref(runs, run_id: str) -> str:
    row = runs[runs["run_id"] == run_id]
    return str(row["bank_ref"].iloc[0]) if len(row) and "bank_ref" in row else ""


def _same_score(bench: str, preds, refs, ids) -> None:
    """Two predictions of one name are one score only when both are the leaderboard's, or
    both come from the same bank (a bank folder's score is its own source models' mean over
    its items, not the leaderboard's of the same name)."""
    from ..errors import ConfigError
    from ..live.report import LEADERBOARD

    pops = [p.get("population", LEADERBOARD) for p in preds]
    if pops[0] == pops[1] == LEADERBOARD or (pops[0] == pops[1] and refs[0] == refs[1]):
        return

    def what(pop, ref):
        return ("the leaderboard's published score" if pop == LEADERBOARD else
                f"the score of bank {ref}" + (", among its source models" if pop else ""))

    raise ConfigError(f"runs {ids[0]} and {ids[1]} both predict {bench!r}, but not one score "
                      f"(the first: {what(pops[0], refs[0])}; the second: "
                      f"{what(pops[1], refs[1])}); compare two runs on the same bank")


def _unit(pred: dict) -> str:
    """What a difference of two predictions is in: points of a mean rating on the rating
    scale (or of percent of each item's scale), else points."""
    if not pred.get("ratings"):
        return "points"
    scale = pred.get("scale")
    return (f"mean rating points, rating scale {scale[0]:g}-{scale[1]:g}" if scale else
            "mean rating, points of percent of each item's scale")


def _model_of(runs, run_id: str) -> str:
    """The model a run measured, from its store's run list (the run id where it has none)."""
    row = runs[runs["run_id"] == run_id]
    model = row["model"].iloc[0] if len(row) and "model" in row else None
    return str(model) if model else run_id
