"""``atlas ranks``: how theta re-ranks models compared with raw accuracy (table + figures)."""
from __future__ import annotations

import json
from pathlib import Path

import typer

from ._common import (bank_option_help, console, err_console, json_safe, number, output_dir,
                      output_file, print_frame)


def ranks_command(
    data: str = typer.Argument(..., metavar="DATA",
                               help="Scores CSV from `atlas score` (columns subject_id, theta, "
                                    "mean_score or mean_rating[, se]) or, with --bank, a "
                                    "response matrix (file or bundled name)."),
    bank: str = typer.Option(None, "--bank", "-b",
                             help=bank_option_help("Only when DATA is a response matrix.")),
    method: str = typer.Option("eap", "--method", "-m",
                               help="Scoring method with --bank: eap, wle, map or ml."),
    plots: Path = typer.Option(None, "--plots", help="Write the PNG figures to this folder."),
    output: Path = typer.Option(None, "--output", "-o", help="Write the per-model table (CSV)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    shift: int = typer.Option(10, "--shift", help="Rank shift threshold."),
    normalize_ids: bool = typer.Option(False, "--normalize-ids", help="X514 -> 514 item ids."),
):
    """Rank analysis: how ranking by theta differs from ranking by accuracy.

    Spearman and Kendall between theta and accuracy, share of models moving more than
    --shift rank positions, equal-accuracy pairs whose thetas differ (significantly, given SEs).
    """
    import numpy as np
    import pandas as pd

    from ..errors import ConfigError
    from ..studies.ranks import plot_rank_analysis, rank_analysis

    output_file(output, inputs={"DATA": data, "--bank": bank})
    output_dir(plots, "--plots")
    df, name, scale = (*_read_scores(data), None) if bank is None else \
        _scores_from_answers(data, bank, method, normalize_ids=normalize_ids)
    for col in ("theta", "mean_score") + (("se",) if "se" in df.columns else ()):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    keep = np.isfinite(df["theta"]) & df["mean_score"].notna()
    left_out = int((~keep).sum())
    df = df[keep]
    if left_out:   # an ML +-inf (all right / all wrong) or a blank row: said, not hidden
        err_console.print(f"note: {left_out} of {len(keep)} models left out: no finite theta "
                          "(ML's all-right / all-wrong patterns; --method eap or wle scores "
                          "them) or no mean score", highlight=False)
    if len(df) < 3:
        raise ConfigError(f"rank analysis needs at least 3 models with a finite theta and a "
                          f"mean score; {data!r} has {len(df)}")
    se = df["se"].to_numpy() if "se" in df.columns else None
    rep = rank_analysis(df["theta"].to_numpy(), df["mean_score"].to_numpy(), se=se,
                        subject_ids=df["subject_id"].astype(str).to_numpy(),
                        shift_threshold=shift, score_name=name, scale=scale)
    summary = rep.summary() | {"n_left_out": left_out}
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        rep.table.to_csv(output, index=False, float_format="%.8g")
    if plots is not None:
        summary["plots"] = [str(p) for p in plot_rank_analysis(rep, plots)]
    if as_json:
        console.print_json(json.dumps(json_safe(summary)))
        return
    console.print(f"{summary['n_models']} models: Spearman {number(rep.spearman, '.4f')}, "
                  f"Kendall {number(rep.kendall, '.4f')}")
    console.print(f"{rep.n_shifted} models ({rep.share_shifted:.1%}) move more than {shift} "
                  f"rank positions (max {rep.max_shift:.0f})")
    sig = ("" if rep.n_tied_pairs_significant is None else
           f", {rep.n_tied_pairs_significant} significantly (|d theta| > 1.96 SE)")
    if scale is not None or name != "accuracy":   # the folder's words and its own scale
        console.print(f"observed score: the {name} over the bank's items each model answered"
                      + (f", on the metric's own scale ({scale[0]:g}-{scale[1]:g})"
                         if scale is not None else ""))
    console.print(f"{rep.n_tied_pairs} pairs share {'an' if name[0] in 'aeiou' else 'a'} "
                  f"{name}; {rep.n_tied_pairs_theta_differs} of them differ in theta{sig}")
    top = rep.table.reindex(rep.table["rank_shift"].abs().sort_values(ascending=False).index)
    print_frame(top.head(15), title="largest rank shifts")
    for p in summary.get("plots", []):
        console.print(f"wrote {p}")


def register(app: typer.Typer) -> None:
    app.command("ranks")(ranks_command)


def _read_scores(data: str):
    """A scores CSV of ``atlas score`` (subject_id, theta, mean_score[, se]; ``accuracy``, the
    column's earlier name, is read as ``mean_score``; an ordinal bank's ``mean_rating``) and
    what its observed score is called."""
    from ..errors import ConfigError
    from ..validation import read_frame

    df = read_frame(data, what="scores file", option="DATA", error=ConfigError)
    name = "accuracy"
    if "mean_score" not in df.columns and "accuracy" not in df.columns \
            and "mean_rating" in df.columns:   # atlas score on an ordinal bank
        df, name = df.rename(columns={"mean_rating": "mean_score"}), "mean rating"
    if "mean_score" not in df.columns:
        df = df.rename(columns={"accuracy": "mean_score"})
    missing = {"theta", "mean_score"} - set(df.columns)
    if missing:
        raise ConfigError(f"{data} lacks column(s) {sorted(missing)}; give a scores CSV "
                          "from `atlas score`, or a response matrix with --bank")
    if "subject_id" not in df.columns:
        df.insert(0, "subject_id", df.index.astype(str))
    return df, name


def _scores_from_answers(data: str, bank: str, method: str, *, normalize_ids: bool):
    """Each model's theta (``method``) and observed mean score on a response matrix and a bank,
    with what the bank's outputs call that score and its scale (``observed_means``)."""
    from ..catalogue import BankRef
    from ..irt.ability import estimate_ability
    from ..bankdir.predict import observed_means, read_answers
    from ._common import align_items, binary_bank_only, check_grouped_bank

    ref = BankRef.from_option(bank, normalize_ids=normalize_ids)
    bk = ref.load()
    binary_bank_only(bk, bank, "atlas ranks", "ranks models by theta against their accuracy",
                     "score them with atlas score RESPONSES --bank BANK -o scores.csv, then "
                     "atlas ranks scores.csv (theta against mean_rating)")
    if method.lower() in ("eap", "map"):   # a multiple-group fit's bank: one line
        check_grouped_bank(bk, None, hint="atlas score --groups GROUPS.csv --summary FIT.json "
                           "scores each subject under its group's prior")
    rm, bk = align_items(read_answers(data, ref, normalize_ids=normalize_ids), bk, "ignore")
    df = estimate_ability(rm, bk, method.lower())
    df["mean_score"], name, scale = observed_means(rm.aligned_values(bk.item_ids), ref)
    return df, name, scale
