"""``atlas build-bank RESULTS -o DIR``: a bank folder from your own results
(:func:`atlascat.bankdir.build_bank`)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple

import typer

from ..bankdir.defaults import BUDGET
from ..irt.defaults import AUTO
from ._common import (bar_progress, console, escape, print_frame, progress_bar, quiet_option,
                      warn)


def build_bank_command(
    results: List[str] = typer.Argument(
        ..., metavar="RESULTS",
        help="A response matrix (models x items, any format RESPONSES takes, missing cells "
             "allowed), or lm-evaluation-harness sample logs: samples_<task>_*.jsonl[.gz] "
             "files or the run folders holding them (one folder per model; a model run more than"
             " once: each item from its latest run)."),
    output: Path = typer.Option(..., "--output", "-o", help="Bank folder to write."),
    scores: Optional[Path] = typer.Option(
        None, "--scores", help="CSV of model,score (0-1 or percent; with --score-range on "
        "that scale) when the benchmark's score is not each model's mean over the items. "
        "[default: the mean over all items of RESULTS]"),
    task: Optional[str] = typer.Option(None, "--task",
                                       help="Sample logs: the task to read (when the "
                                            "folders hold several), or a group (mmlu: the "
                                            "tasks its results_*.json list)."),
    metric: Optional[str] = typer.Option(None, "--metric",
                                         help="Sample logs: the per-sample metric that "
                                              "scores an item. [default: the task's first]"),
    filter_name: Optional[str] = typer.Option(None, "--filter",
                                              help="Sample logs: the harness filter to "
                                                   "keep when a task logs several."),
    common_items: bool = typer.Option(False, "--common-items",
                                      help="Sample logs: keep the items every model logged "
                                           "when models logged different ones (another "
                                           "--limit, a run cut short). [default: refuse]"),
    name: Optional[str] = typer.Option(None, "--name",
                                       help="Benchmark name. [default: the task, or the "
                                            "stem a matrix's item ids share (qmsum.0, "
                                            "qmsum.1: qmsum), else its file's name]"),
    model: str = typer.Option(AUTO, "--model",
                              help="IRT model: auto (chosen for the number of models), "
                                   "rasch, 1pl, 2pl, 3pl or 4pl (a judge's ratings as "
                                   "categories: atlas calibrate --model graded)."),
    budget: int = typer.Option(BUDGET, "--budget", min=5,
                               help="Test length the score link is fitted for."),
    chance: Optional[float] = typer.Option(None, "--chance",
                                           help="Score (0-1; with --score-range on "
                                                "that scale) of a model answering at "
                                                "random: the floor of a weaker model's "
                                                "interval; where the weakest source "
                                                "models score at chance, no target is "
                                                "taken for weaker. [default: from sample logs "
                                                "the mean of 1 / options (true / options "
                                                "for mc2), 0 for generation; from a "
                                                "matrix 0]"),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    score_range: Optional[Tuple[float, float]] = typer.Option(
        None, "--score-range", metavar="LO HI",
        help="The scores' scale when it is not 0-1 (BLEU: 0 100; a 1-10 judge rating: 1 10): "
             "mapped to 0-1 when read, every prediction mapped back. [default: 0-1; from "
             "sample logs the harness's known range of the metric]"),
    quiet: bool = quiet_option(),
):
    """Build a bank folder (bank, requests, score link, manifest) for --bank DIR.

    From 20 source models up. Each model's score is its mean over all items of RESULTS
    (or --scores); from sample logs every item keeps the exact requests it was asked and
    its scoring rule, so `atlas evaluate --bank DIR` asks a new model the same.
    """
    from ..bankdir import build_bank
    from ..validation import check_finite, check_output_dir

    check_output_dir(output, what="bank folder")  # before any work
    if chance is not None:
        check_finite(chance, "--chance")
    with progress_bar("building the bank", total=None) as advance:
        folder = build_bank(results if len(results) > 1 else results[0], output, scores=scores,
                            task=task, metric=metric, filter_name=filter_name, name=name,
                            model=model, seed=seed, chance=chance, budget=budget,
                            score_range=score_range, common_items=common_items,
                            progress=bar_progress(advance))
    _show_summary(folder.manifest, named=name is not None)
    files = ", ".join(sorted(p.name for p in Path(output).iterdir()))
    console.print(f"wrote {escape(str(output))}/ ({files})")


def register(app: typer.Typer) -> None:
    app.command("build-bank")(build_bank_command)


#: how a matrix's benchmark got its name, said beside it (--name and a task's need no words)
_NAMED_BY = {"item ids": " (its item ids' stem; --name gives the benchmark's)",
             "file": " (the file's name; --name gives the benchmark's)"}


def _show_summary(m: dict, named: bool = True) -> None:
    """The folder's summary table, then the build's warnings (stderr). A matrix's benchmark
    not ``named`` (--name) is named by its item ids' stem or its file's name: the row says
    which."""
    from ..bankdir.scaled import chance_words

    src = m["source"]
    by = src.get("named_by", "name" if named or src["kind"] != "matrix" else "file")
    rows = [("benchmark", m["benchmark"] + _NAMED_BY.get(by, "")),
            ("source", src["kind"] + (f" ({src['task']}{_group_note(src)}, metric "
                                      f"{src['metric']}{_filter_note(src)})"
                                      if src["kind"] == "sample_logs" else "")),
            *_metric_rows(src),
            ("models", m["n_models"]),
            *_rerun_rows(src.get("reruns")),
            ("items (results / bank)", f"{m['items']['n_results']} / {m['items']['n_bank']}"),
            ("IRT model", m["calibration"]["model"]),
            ("items measure one thing", _dimension_row(m.get("dimensionality"))),
            ("chance level", chance_words(m["settings"], src.get("scores"))),
            *_scale_rows(m["settings"]),
            *_predictor_rows(m.get("predictor"), m["settings"].get("score_range")),
            ("interval widened (cross-fit)", _cross_fit_row(m.get("cross_fit")))]
    if m.get("requests"):
        r = m["requests"]
        rows.append(("requests", f"{r['n_items']} items, rules {', '.join(r['rules'])}, "
                                 f"rule reproduces the logs: {r['rule_agreement_min']:.0%}"
                     if r["rule_agreement_min"] is not None else
                     f"{r['n_items']} items, rules {', '.join(r['rules'])}"))
    import pandas as pd

    print_frame(pd.DataFrame(rows, columns=["figure", "value"]), title="atlas build-bank")
    from ..bankdir.builder import build_warnings

    from ._common import dimension_advice

    data = (src.get("files") or [None])[0] if src["kind"] == "matrix" else None
    for line in build_warnings(m):   # a matrix's second trait: the commands that fit it
        warn(dimension_advice(line, data) if src["kind"] == "matrix" and
             src.get("scores") in (None, "binary") else line)


def _group_note(src: dict) -> str:
    """A group task's size, said beside its name ('mmlu: a group of 57 tasks')."""
    tasks = src.get("tasks") or []
    return f": a group of {len(tasks)} tasks" if len(tasks) > 1 else ""


def _filter_note(src: dict) -> str:
    """The harness filter read (GSM8K's strict-match), beside the metric."""
    return f", filter {src['filter']}" if src.get("filter") else ""


def _metric_rows(src: dict) -> list[tuple[str, str]]:
    """How the metric was chosen when --metric was not given and the logs hold several."""
    logged = src.get("metrics_logged") or []
    if len(logged) < 2:
        return []
    return [("metric", f"{src['metric']}: the first the logs list of {', '.join(logged)} "
                       "(--metric chooses another)")]


def _rerun_rows(reruns: dict | None) -> list[tuple[str, str]]:
    """Models logged in several runs, and the rule that read them (one row)."""
    if not reruns:
        return []
    n = sum(r["superseded"] for r in reruns.values())
    return [("re-runs", f"{len(reruns)} model(s) run more than once: each item from the "
                        f"latest run (timestamp); {n} earlier sample(s) superseded")]


def _cross_fit_row(cf: dict | None) -> str:
    """The link's cross-fitted widening, and a shorter test's on top of it (its length
    factor: :func:`atlascat.bankdir.builder.cross_fit_factor`)."""
    if not cf:
        return "no"
    text = f"x{cf['factor']:.2f}"
    lf = cf.get("length_factor")
    if lf:
        shorter = ", ".join(f"x{f:.2f} at {c:g}" for c, f in zip(lf["counts"], lf["factors"])
                            if f > 1.0)
        text += f"; shorter tests {shorter} items" if shorter else ""
    return text


def _scale_rows(settings: dict) -> list[tuple[str, str]]:
    """The scores' scale, when not 0-1: read on it, modelled on 0-1, predicted on it."""
    rng = settings.get("score_range")
    if not rng:
        return []
    return [("score scale", f"{rng[0]:g}-{rng[1]:g} (mapped to 0-1 to model it; predictions "
                            "on this scale)")]




def _dimension_row(d) -> str:
    """Horn's parallel analysis in a few words (:mod:`atlascat.irt.dimensionality`)."""
    if not d or d["first_eigenvalue"] != d["first_eigenvalue"]:
        return "not checked (too few models or items)"
    verdict = "yes" if d["one_trait"] else "NO"
    if d.get("second_dimension"):
        return (f"NO: two factors, second eigenvalue {d['second_eigenvalue']:.1f} beside the "
                f"first's {d['first_eigenvalue']:.1f} (parallel analysis)")
    return (f"{verdict}: first eigenvalue {d['first_eigenvalue']:.1f}, random answers' "
            f"{d['parallel_threshold']:.1f} (parallel analysis)")


def _predictor_rows(p, score_range=None) -> list[tuple[str, str]]:
    """What the folder's benchmark predictor draws from and how it predicts: one short row
    each (the items, the model part, the design estimate's weight, the score map)."""
    if p is None:
        return [("benchmark predictor", "none (no more items than the budget: score every item)")]
    from ..predict.predictor import RIDGE_FIT_MIN_MODELS, STACK_MIN_MODELS

    w = p.get("design_weight")
    model = "IRT alone"
    if p.get("ridge"):
        model = ("IRT + ridge, weights fitted" if p.get("ridge_weights_fitted", True) else
                 f"IRT + ridge, their mean (below {RIDGE_FIT_MIN_MODELS} source models; "
                 f"fitted weights from {RIDGE_FIT_MIN_MODELS})")
    rows = [("benchmark predictor", f"{p['budget']} of {p['n_items']} items"),
            ("predictor's model", model),
            ("predictor's design weight", f"{w:.2f} (the random-item estimate's share)"
             if w is not None else f"precision weights (below {STACK_MIN_MODELS} source models; "
                                   f"a fitted weight from {STACK_MIN_MODELS})")]
    sm = p.get("score_map")
    if sm:       # --scores not the item mean: the design estimate is mapped to the score
        from ..bankdir.scaled import score_map_on_scale

        sm = score_map_on_scale(sm, score_range)   # a --score-range folder: on its scale
        points = sm["resid_sd"] if score_range else 100.0 * sm["resid_sd"]
        rows.append(("predictor's score map",
                     f"score = {sm['intercept']:.3f} + {sm['slope']:.3f} x item mean "
                     f"(+- {points:.2f} points)"))
    return rows
