"""``atlas compare-models RUN_A RUN_B``: two finished live runs, the difference of their
predicted scores with a 95% interval (:func:`atlascat.live.compare.compare_runs`)."""
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
                                   "larger for near-duplicates (checkpoints, merges) on a "
                                   "shipped bank; 0 on a bank folder (its predictor's errors "
                                   "are its own random draws)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
):
    """Per benchmark (and the average of a suite run): first minus second, 95% interval,
    and whether the interval tells the two apart.

    The interval combines the two predictions' intervals, each side from the sides that
    bound it (the first's lower with the second's upper, in quadrature), times a shipped
    bank's pair scale for two single-bank runs (fitted so that 95% of the calibration models'
    pairs are covered; measured on held-out pairs by benchmarks/bench_paired.py), the
    average's for a suite run's average; 1 for a suite run's benchmarks and a bank of your
    own.
    """
    from ..errors import ConfigError
    from ..live.compare import compare_runs

    if not -1.0 <= rho <= 1.0:                    # the option's own range (NaN too)
        raise ConfigError(f"--rho must lie in [-1, 1], got {rho:g}")
    out = compare_runs(run_a, run_b, db=db, rho=rho)
    if out["warning"]:
        err_console.print(f"warning: {out['warning']}", markup=False, highlight=False)
    if as_json:
        typer.echo(json.dumps(out))
        return
    import pandas as pd

    from ..scorelink.prediction import score_text

    def text(r, k):   # each row to its scale's digits; a run's score with its interval
        if k in ("first", "second"):
            return (f"{text(r, k + '_score')} ({text(r, k + '_lo')}-"
                    f"{text(r, k + '_hi')})")
        return score_text(r[k.removesuffix("_score")], digits=r["digits"])

    cols = ["benchmark", "first", "second", "difference", "lo", "hi", "told_apart"]
    df = pd.DataFrame([{k: r[k] if k in ("benchmark", "told_apart") else text(r, k)
                        for k in cols} for r in out["rows"]])
    names = [f"{m} (run {r})" for m, r in zip(out["models"], (out["first"], out["second"]))]
    print_frame(df, title=f"first: {names[0]}; second: {names[1]}; {out['score']}, "
                f"{out['sign']} ({out['unit']}, 95% interval)", float_format="{:.1f}")
    err_console.print("told apart: the interval excludes 0. Unrelated models: --rho 0; "
                      "near-duplicates on a shipped bank get narrower intervals with --rho, "
                      "not on a bank folder (see benchmarks/results/paired.md)", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("compare-models")(compare_models_command)
