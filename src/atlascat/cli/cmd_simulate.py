"""``atlas simulate``: run the adaptive test for many examinees at once and write the results."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import typer

from ..cat.config import Estimation, Selection, Stopping
from ..suite.config import SuiteConfig
from ._common import (bank_option_help, check_seed, console, err_console, escape, json_safe,
                      load_responses, number, mean_and_width, min_items_note, one_bank, output_dir,
                      predicted_summary, print_frame, progress_bar, quiet_option,
                      tested_under_one_prior, unique_filenames, warn)
from ._options import BOUND_MARGIN_HELP, cli_names, predictor_only

_THETA_ID_COLUMNS = ("subject_id", "Model_Name", "model", "subject", "model_name")
_THETA_COLUMNS = ("theta", "Theta_WLE", "Theta", "theta_wle", "F1")


THETA_LIMIT = 10.0  # ability estimates live in [-10, 10] (the WLE/ML search bounds)


def read_thetas(path: Path, option: str = "--thetas"):
    """(subject_ids, thetas) from a CSV with subject_id/theta or the paper's Model_Name/Theta_WLE.

    Every theta must be a finite number in [-10, 10] (the range ability estimates can take)."""
    import numpy as np

    from ..errors import ResponseDataError

    plain = plain_thetas(path)
    ids, values = frame_thetas(path, option) if plain is None else plain
    bad = np.flatnonzero(~(np.abs(values) <= THETA_LIMIT))
    if bad.size:
        r = int(bad[0])
        raise ResponseDataError(
            f"theta {values[r]:g} in row {r + 2} of {str(path)!r} is outside [-{THETA_LIMIT:g}, "
            f"{THETA_LIMIT:g}] ({bad.size} such row(s)); thetas are on the bank's logit scale")
    seen = set()
    for sid in ids:
        if sid in seen:
            raise ResponseDataError(f"subject id {sid!r} appears twice in {str(path)!r}; each "
                                    "subject once")
        seen.add(sid)
    return ids, values


#: id cells pandas reads as missing (its default NA words) or as booleans
_NOT_VERBATIM = {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
                 "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return text.strip().lower() in ("true", "false")
    return True


def plain_thetas(path: Path):
    """(ids, thetas) of a plain CSV (:func:`atlascat._table.read_plain_csv`) read without
    pandas, where that gives what :func:`frame_thetas` gives: every theta a plain decimal
    number, the ids text that pandas keeps verbatim (no missing-value word, not all numbers).
    None otherwise."""
    import numpy as np

    from .._table import decimals, read_plain_csv

    got = read_plain_csv(path)
    if got is None:
        return None
    header, rows = got
    id_col = next((c for c in _THETA_ID_COLUMNS if c in header), None)
    th_col = next((c for c in _THETA_COLUMNS if c in header), None)
    if th_col is None:
        return None
    at = header.index(th_col)
    numbers = decimals([r[at] for r in rows])
    if numbers is None:
        return None
    if id_col is None:
        return [str(i) for i in range(len(rows))], np.array(numbers)
    at = header.index(id_col)
    ids = [r[at] for r in rows]
    if any(i in _NOT_VERBATIM for i in ids) or all(_is_number(i) for i in ids):
        return None
    return ids, np.array(numbers)


def frame_thetas(path: Path, option: str):
    """(ids, thetas) of any theta file pandas reads, with one-line errors."""
    import pandas as pd

    from ..errors import ResponseDataError
    from ..validation import read_frame

    # min_columns: a lone column whose header holds ';' is named as another delimiter
    df = read_frame(path, what="theta file", option=option, min_columns=2)
    id_col = next((c for c in _THETA_ID_COLUMNS if c in df.columns), None)
    th_col = next((c for c in _THETA_COLUMNS if c in df.columns), None)
    if th_col is None:
        raise ResponseDataError(
            f"{option} {str(path)!r} has no theta column; expected one of {list(_THETA_COLUMNS)} "
            f"(columns: {[str(c) for c in df.columns[:10]]})"
        )
    if len(df) == 0:
        raise ResponseDataError(f"{option} {str(path)!r} has a header but no rows")
    thetas = pd.to_numeric(df[th_col], errors="coerce")
    if thetas.isna().any():
        row = int(thetas.isna().to_numpy().nonzero()[0][0])
        raise ResponseDataError(f"theta in row {row + 2} of {str(path)!r} is missing or not a "
                                f"number ({df[th_col].iloc[row]!r})")
    ids = df[id_col].astype(str).tolist() if id_col else [str(i) for i in range(len(df))]
    return ids, thetas.to_numpy(float)


#: help texts of the options (the command's signature stays readable)
HELP = {
    "responses": "Response matrix to replay (real answers; file or bundled name). Without it, "
                 "answers are drawn from the bank's model at --thetas. With --suite: one "
                 "BENCH=MATRIX pair per member (bundled names allowed; BENCH alone = its "
                 "bundled matrix).",
    "suite": "Replay a suite (bundled name such as openllm-v1, or a suite JSON file) as one "
             "adaptive test aimed at its average; writes suite_scores.csv.",
    "scores": "--suite: published scores (a model column, one column per member) to report "
              "the predicted average's error against.",
    "target_se": "--suite: stop once the average's SE (points, 0-100) is at or below this. "
                 "[default: none: the --max-items budget]",
    "thetas": "CSV of true thetas (subject_id,theta or Model_Name,Theta_WLE): answers drawn "
              "from the bank's model. With RESPONSES: reference thetas for the error columns.",
    "se_stop": f"Stop once SE <= this value. [default: {Stopping.se_stop:g}]",
    "min_items": f"Never stop before this many items. [default: {Stopping.min_items}, or the "
                 "bundled bank's own minimum: arc, truthfulqa, winogrande 45, gsm8k 55; at most "
                 f"--max-items; --suite: {SuiteConfig.min_items}]",
    "max_items": f"Stop after this many items. [default: {Stopping.max_items}; --suite: "
                 f"{SuiteConfig.max_items} in all; a bank folder's predictor: the budget it was "
                 "built for]",
    "design": "A bank folder with RESPONSES: auto = its benchmark predictor (right for "
              "models unlike the source models) when it has one, else the adaptive test; "
              "adaptive = the adaptive test scored by its score link; predictor = the "
              "predictor or an error.",
    "randomesque": f"Pick among the k best items. [default: {Selection.randomesque}; --suite: "
                   f"{SuiteConfig.randomesque}]",
    "r_max": "Exposure control (item eligibility): no item goes to more than this share of "
             "the examinees, e.g. 0.2. [default: none]",
    "batch_size": "Items per adaptive round, chosen jointly (1: classic CAT). [default: 1; "
                  f"--suite: {SuiteConfig.batch_size}, mixing benchmarks]",
    "bound_stop": "Banks with a score link: stop once the examinee is surely at the floor "
                  "(chance) or the top of the link's curve.",
    "bound_margin": BOUND_MARGIN_HELP,
    "cost_column": "The bank's column of item costs (tokens, seconds, ...).",
    "cost_per_item": "One cost for every item.",
    "value_per_se": "Stop once V x the next item's expected SE drop < its cost.",
    "budget": "Most cost spent on one examinee.",
}


@dataclass
class _Options:
    """The command's options, as typed (None: not given)."""

    responses: Optional[List[str]]
    bank: Optional[List[str]]
    suite: Optional[str]
    design: str
    scores: Optional[Path]
    target_se: Optional[float]
    thetas: Optional[Path]
    output: Optional[Path]
    se_stop: Optional[float]
    min_items: Optional[int]
    max_items: Optional[int]
    fixed_length: Optional[int]
    randomesque: Optional[int]
    r_max: Optional[float]
    selection: str
    se_method: str
    estimator: str
    reference: bool
    theta0: float
    seed: int
    batch_size: Optional[int]
    selected: bool
    selected_folder: bool
    bound_stop: bool
    bound_margin: float | None
    cost_column: Optional[str]
    cost_per_item: Optional[float]
    value_per_se: Optional[float]
    budget: Optional[float]
    quiet: bool


def simulate_command(
    responses: Optional[List[str]] = typer.Argument(None, metavar="RESPONSES",
                                                    help=HELP["responses"]),
    bank: Optional[List[str]] = typer.Option(None, "--bank", "-b", help=bank_option_help()),
    suite: Optional[str] = typer.Option(None, "--suite", help=HELP["suite"]),
    design: str = typer.Option("auto", "--design", help=HELP["design"]),
    scores: Optional[Path] = typer.Option(None, "--scores", help=HELP["scores"]),
    target_se: Optional[float] = typer.Option(None, "--target-se", help=HELP["target_se"]),
    thetas: Optional[Path] = typer.Option(None, "--thetas", "-t", help=HELP["thetas"]),
    output: Optional[Path] = typer.Option(None, "--output", "-o",
                                          help="Run directory to write (created if missing)."),
    se_stop: Optional[float] = typer.Option(None, "--se-stop", help=HELP["se_stop"]),
    min_items: Optional[int] = typer.Option(None, "--min-items", help=HELP["min_items"]),
    max_items: Optional[int] = typer.Option(None, "--max-items", help=HELP["max_items"]),
    fixed_length: Optional[int] = typer.Option(None, "--fixed-length",
                                               help="Fixed-length test of N items (no SE stop)."),
    randomesque: Optional[int] = typer.Option(None, "--randomesque", help=HELP["randomesque"]),
    r_max: Optional[float] = typer.Option(None, "--r-max", help=HELP["r_max"]),
    selection: str = typer.Option(Selection.criterion, "--selection",
                                  help="mfi, mfi-cost (per unit cost), kl, astrat, random."),
    se_method: str = typer.Option(Estimation.se_method, "--se-method",
                                  help="Stopping SE: information (catR) or posterior (SD)."),
    estimator: str = typer.Option(Estimation.method, "--estimator",
                                  help="Theta: eap, map, ml or wle."),
    reference: bool = typer.Option(False, "--reference",
                                   help="catR's grid: 33 trapezoid nodes on [-4, 4]."),
    theta0: float = typer.Option(Selection.theta0, "--theta0", help="Starting theta."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", min=1, help=HELP["batch_size"]),
    selected: bool = typer.Option(True, "--selected/--no-selected",
                                  help="Write selected_items.csv: one row per item asked "
                                       "(its score, theta and se after it)."),
    selected_folder: bool = typer.Option(False, "--selected-folder",
                                         help="Also write selected_items/<subject>.csv, one "
                                              "file per examinee (catR's layout)."),
    bound_stop: bool = typer.Option(True, "--bound-stop/--no-bound-stop",
                                    help=HELP["bound_stop"]),
    bound_margin: Optional[float] = typer.Option(None, "--bound-margin",
                                                   help=HELP["bound_margin"]),
    cost_column: Optional[str] = typer.Option(None, "--cost-column", help=HELP["cost_column"]),
    cost_per_item: Optional[float] = typer.Option(None, "--cost-per-item",
                                                  help=HELP["cost_per_item"]),
    value_per_se: Optional[float] = typer.Option(None, "--value-per-se",
                                                 help=HELP["value_per_se"]),
    budget: Optional[float] = typer.Option(None, "--budget", help=HELP["budget"]),
    quiet: bool = quiet_option(),
) -> None:
    """Simulate adaptive tests (replayed or model-drawn answers); write scores and diagnostics."""
    run_simulate(_Options(**locals()))


def run_simulate(o: _Options) -> None:
    """Check the options against each other, then replay a suite or one bank."""
    from ..errors import ConfigError

    check_seed(o.seed)
    if o.output is None:
        raise ConfigError("give the run directory with -o/--output (nothing is written to the "
                          "current directory unless you name it)")
    if o.suite is not None:
        if o.bank:
            raise ConfigError("--suite runs the suite's own banks; drop --bank")
        if o.r_max is not None:
            raise ConfigError("--r-max is a single bank's exposure control; drop it for --suite")
        if o.thetas is not None:
            raise ConfigError("--thetas: --suite replays recorded answers (BENCH=MATRIX); a "
                              "simulated model takes the suite live: atlas evaluate --suite "
                              f"{o.suite} --subject simulate:THETA")
        if o.estimator != Estimation.method:
            raise ConfigError("--estimator is a single bank's; the suite's test estimates by "
                              f"{Estimation.method}")
        from ._options import OPTION_NAMES, cost_fields

        given = ", ".join(OPTION_NAMES[k] for k in cost_fields(o))
        if given:
            raise ConfigError(f"{given}: a single bank's cost-aware stop; drop it for --suite")
        return simulate_suite_command(o.suite, list(o.responses or []), _out(o),
                                      target_se=o.target_se, max_items=o.max_items,
                                      min_items=o.min_items, batch_size=o.batch_size,
                                      randomesque=o.randomesque, seed=o.seed, scores=o.scores)
    if o.scores is not None:
        raise ConfigError("--scores goes with --suite (a single bank's published scores are "
                          "its score link's)")
    if o.target_se is not None:
        raise ConfigError("--target-se is the average's stop of --suite; a single bank stops "
                          "on --se-stop")
    if o.responses and len(o.responses) > 1:
        raise ConfigError(f"give one RESPONSES matrix (got {len(o.responses)}); to replay "
                          "several benchmarks as one test use --suite openllm-v1 BENCH=MATRIX ...")
    if not o.responses and o.thetas is None:
        raise ConfigError("give RESPONSES (a matrix to replay) or --thetas (answers drawn from "
                          "the model)")
    return _simulate_bank(o, one_bank(o.bank), _out(o))


#: what a simulate run writes in its folder (person_scores.csv, suite_scores.csv: an earlier
#: run's, rewritten)
_WRITES = ("person_scores.csv", "selected_items.csv", "item_exposure.csv", "item_positions.csv",
           "summary.json", "suite_scores.csv", "selected_items")


def _out(o: _Options):
    """-o, checked before any work: never a folder whose own files the run would replace."""
    return output_dir(o.output, writes=_WRITES, marker=("person_scores.csv", "suite_scores.csv"))


def _config(o: _Options):
    """The CAT's settings from the options (a bank with a score link adds its floor / top
    stops in the library: :func:`atlascat.bankdir.adaptive.adaptive_config`)."""
    from ..validation import check_finite
    from ._options import cat_config, cost_fields

    check_finite(o.theta0, "--theta0")
    return cat_config(se_stop=o.se_stop, min_items=o.min_items, max_items=o.max_items,
                      fixed_length=o.fixed_length, reference=o.reference,
                      selection=o.selection, se_method=o.se_method, theta0=o.theta0,
                      estimator=o.estimator,
                      **({} if o.randomesque is None else {"randomesque": o.randomesque}),
                      **({} if o.r_max is None else {"exposure": "eligibility",
                                                     "r_max": o.r_max}),
                      **cost_fields(o))


def _simulate_bank(o: _Options, bank: str, out: Path) -> None:
    """One bank's adaptive test on every examinee, then the predicted scores and the files."""
    from ..catalogue import BankRef

    from ..irt.polybank import is_poly_bank_file

    if is_poly_bank_file(bank):   # graded / gpcm items (cat/ordinal.py)
        from ._simulate_ordinal import simulate_ordinal_cmd

        _use_predictor(o, None)   # --design predictor needs a bank folder: refused here
        return simulate_ordinal_cmd(o, bank, out, _config(o), read_thetas)
    ref = BankRef.from_option(bank)
    folder = ref.folder()  # atlas build-bank's folder, or None
    if _use_predictor(o, folder):
        return _replay_predictor(o, bank, folder, out)
    # the score link of the benchmark the bank measures (a bundled bank's, a bank folder's, a
    # bank file's whose benchmark column names a bundled one), as atlas evaluate's
    link = ref.score_link()
    config = _config(o)
    kwargs = {}
    if o.responses:
        rm = _responses(o, folder)
        kwargs["responses"] = rm
        n_total = rm.n_subjects
        if o.thetas is not None:
            import pandas as pd

            ids, values = read_thetas(o.thetas)
            ref_thetas = pd.Series(values, index=ids)
            ref_thetas = ref_thetas[~ref_thetas.index.duplicated()]
            kwargs["theta_ref"] = ref_thetas.reindex(rm.subject_ids.astype(str)).to_numpy(float)
    else:
        ids, values = read_thetas(o.thetas)
        kwargs.update(thetas=values, subject_ids=ids)
        n_total = len(ids)
    tested_under_one_prior(ref.load(), config)   # a multiple-group fit's bank: one line
    with progress_bar("simulating", n_total) as advance:
        state = {"done": 0}

        def progress(done, total):
            advance(done - state["done"])
            state["done"] = done

        result = cli_names(lambda: _run(o, ref, link, config, progress, kwargs))
    # columns, or a frame with the predicted scores (0-1, or the folder's metric scale) beside
    persons = result.person_columns if link is None else result.persons
    words = None
    if link is not None:   # what the predicted score is of: the folder's benchmark, or the
        from ..bankdir.adaptive import prediction_words  # leaderboard's (a shipped link)

        words = prediction_words(ref)
    _write_bank_outputs(o, bank, out, result, persons, ref.load(), folder=folder, words=words,
                        bank_minimum=link is not None and o.bound_stop
                        and o.fixed_length is None)


def _run(o: _Options, ref, link, config, progress, kwargs):
    """The library's adaptive test (:func:`atlascat.bankdir.simulate_adaptive`: a score link's
    stops and predicted scores, each recorded model's own random choices, as a live run's);
    answers drawn on a bank file without a link: the plain one, as simulate_adaptive runs it
    (no bank folder or score link code loaded)."""
    batch = o.batch_size or 1
    if link is None and o.bound_margin is not None:   # as simulate_adaptive refuses it
        from ..bankdir.adaptive import adaptive_config

        adaptive_config(ref, bound_margin=o.bound_margin)
    if link is None and "responses" not in kwargs:
        from ..cat.answers import simulated_models
        from ..cat.simulate import simulate_cat

        rng, seeds = simulated_models(o.seed, kwargs["subject_ids"])   # as simulate:THETA live
        return simulate_cat(ref.load(), config, rng=rng, answer_seeds=seeds,
                            progress=progress, batch_size=batch, **kwargs)
    from ..bankdir.adaptive import simulate_adaptive

    return simulate_adaptive(ref, config=config, min_items=o.min_items, seed=o.seed,
                             bound_stop=o.bound_stop and o.fixed_length is None,
                             bound_margin=o.bound_margin, batch_size=batch,
                             progress=progress, **kwargs)


def _responses(o: _Options, folder):
    """RESPONSES, read on the folder's metric scale when it has one (``--score-range``)."""
    if folder is None:          # a bank file: no bank-folder code imported
        return load_responses(o.responses[0], normalize_ids=True, on_empty="keep")
    from ..bankdir.predict import in_sample_warning, read_targets, source_models_among

    rm = read_targets(folder, o.responses[0])
    among = source_models_among(folder, rm.subject_ids)
    if among:
        warn(in_sample_warning(among, rm.n_subjects))
    return rm


def _use_predictor(o: _Options, folder) -> bool:
    """--design: a bank folder's predictor replayed on RESPONSES, or the adaptive test."""
    from ..errors import ConfigError

    if o.design != "auto":  # the default is valid: no import of the live layer to check it
        from ..live.service import check_design

        check_design(o.design)
    has = False
    if folder is not None and o.design != "adaptive":   # a folder that lost its predictor: one line
        from ..bankdir.predict import load_predictor

        has = load_predictor(folder) is not None
    if o.design == "predictor" and not (has and o.responses):
        raise ConfigError("--design predictor needs a bank folder with a predictor "
                          "(atlas build-bank, more items than its budget) and RESPONSES")
    return o.design != "adaptive" and has and bool(o.responses)


def _replay_predictor(o: _Options, bank: str, folder, out: Path) -> None:
    """A bank folder's benchmark predictor on recorded answers: each target asked at most
    --max-items items (default the folder's budget) of the design; person_scores.csv and
    summary.json."""
    import pandas as pd

    from ..bankdir import replay_predictor
    from ..bankdir.builder import BUDGET
    from ..errors import ConfigError

    if o.thetas is not None:
        raise ConfigError("--thetas is the adaptive test's; this bank folder's predictor asks "
                          "--max-items items of its own design (or --design adaptive)")
    predictor_only(o, (("--selection", o.selection != Selection.criterion),
                       ("--randomesque", o.randomesque is not None),
                       ("--estimator", o.estimator != Estimation.method),
                       ("--se-method", o.se_method != Estimation.se_method),
                       ("--theta0", o.theta0 != Selection.theta0), ("--reference", o.reference),
                       ("--no-bound-stop", not o.bound_stop),
                       ("--bound-margin", o.bound_margin is not None),
                       ("--selected-folder", o.selected_folder)))
    if (o.batch_size or 1) > 1:
        raise ConfigError("--batch-size: atlas simulate replays this bank folder's predictor one "
                          "item at a time (as a live run with --batch-size 1); drop it, or "
                          "--design adaptive for rounds of items")
    budget = int(o.max_items if o.max_items is not None else
                 folder.manifest.get("settings", {}).get("budget", BUDGET))
    rm = _responses(o, folder)
    with progress_bar("predicting", 1) as advance:
        persons, selected = replay_predictor(folder, rm, budget=budget, seed=o.seed,
                                             selected=True)
        advance(1)
    out.mkdir(parents=True, exist_ok=True)
    persons.to_csv(out / "person_scores.csv", index=False)
    if o.selected:      # what each model was asked: what a live run of it with --seed asks
        selected.to_csv(out / "selected_items.csv", index=False)
    from ..bankdir.adaptive import prediction_words

    figures, predicted_row = predicted_summary(prediction_words(folder), persons)
    summary = {"design": "benchmark predictor", **figures, "budget": budget,
               "n_examinees": int(len(persons)), "items_mean": float(persons["n_items"].mean()),
               "outside_source": int((persons["method"] == "design").sum()),
               "inputs": {"bank": str(bank), "responses": o.responses[0], "seed": o.seed}}
    (out / "summary.json").write_text(json.dumps(json_safe(summary), indent=2, allow_nan=False))
    rows = [("examinees", summary["n_examinees"]),
            ("items mean (at most)", f"{summary['items_mean']:.1f} ({budget})"),
            predicted_row,
            ("unlike the source models", f"{summary['outside_source']} (design-based estimate)")]
    print_frame(pd.DataFrame(rows, columns=["figure", "value"]),
                title="atlas simulate (bank folder's predictor)")
    console.print(f"wrote {escape(str(out))}/ (person_scores.csv, "
                  f"{'selected_items.csv, ' if o.selected else ''}summary.json)")


def _write_bank_outputs(o: _Options, bank: str, out: Path, result, persons, item_bank, *,
                        folder=None, words=None, bank_minimum: bool = True) -> None:
    """person_scores.csv, selected_items/, item_exposure.csv, item_positions.csv,
    summary.json, and the summary table. ``persons``: columns, or a frame. ``folder``: a bank
    folder (its answers written on its metric's scale). ``words``: what the predicted score is
    of (:func:`~atlascat.bankdir.adaptive.prediction_words`: a folder's benchmark, or the
    leaderboard's), whose mean over models the summary carries."""
    from .._table import write_csv

    out.mkdir(parents=True, exist_ok=True)
    if isinstance(persons, dict):
        write_csv(out / "person_scores.csv", persons)
    else:
        persons.to_csv(out / "person_scores.csv", index=False)
    asked = result.administered_columns
    if folder is not None:      # each answer as recorded: on a --score-range folder's scale
        from ..bankdir.predict import to_metric_scale

        asked = to_metric_scale(asked, folder, ["score"])
    if o.selected:  # one long file: one open instead of one per examinee
        write_csv(out / "selected_items.csv", asked)
    if o.selected_folder:
        sel_dir = out / "selected_items"
        sel_dir.mkdir(exist_ok=True)
        stems = unique_filenames(persons["subject_id"])
        import pandas as pd

        administered = pd.DataFrame(asked)
        groups = dict(tuple(administered.groupby("subject_id", sort=False)))
        empty = administered.iloc[:0]
        for sid, stem in zip(persons["subject_id"], stems):
            frame = groups.get(sid, empty).drop(columns="subject_id")
            frame.to_csv(sel_dir / f"{stem}.csv", index=False)
    exposure = result.item_exposure_columns()
    exposure["a"], exposure["b"] = item_bank.a, item_bank.b
    write_csv(out / "item_exposure.csv", exposure)
    write_csv(out / "item_positions.csv", result.item_positions_columns())
    summary = result.summary()
    summary["inputs"] = {"bank": str(bank),
                         "responses": o.responses[0] if o.responses else None,
                         "thetas": None if o.thetas is None else str(o.thetas), "seed": o.seed}
    predicted_row = None
    if words is not None and "score" in persons:  # as the predictor's, a live run's
        figures, predicted_row = predicted_summary(words, persons)
        summary.update(figures)
    (out / "summary.json").write_text(json.dumps(json_safe(summary), indent=2, allow_nan=False))
    rows = [("examinees", summary["n_examinees"]),
            ("items mean (sd)", f"{summary['items_mean']:.2f} ({summary['items_sd']:.2f})"),
            ("SE mean", f"{summary['se_mean']:.4f}")]
    if "mae" in summary:
        rows.append(("MAE vs reference", f"{summary['mae']:.4f}"))
    if "cost_mean" in summary:
        rows.append(("cost mean (max)", f"{summary['cost_mean']:.4g} ({summary['cost_max']:.4g})"))
    rows += [("max exposure", f"{summary['exposure']['max']:.3f}"),
             ("overlap (formula / pairwise)",
              f"{number(summary['overlap']['formula'], '.4f')} / "
              f"{number(summary['overlap']['pairwise'], '.4f')}"),
             ("skipped (no answer)", summary["n_skipped"]),
             ("time per examinee", f"{summary['time_per_examinee_seconds'] * 1000:.2f} ms")]
    if predicted_row is not None:
        rows.append(predicted_row)
    if "score_warning" in persons:
        warned = int((persons["score_warning"].fillna("") != "").sum())
        rows.append(("prediction warnings", f"{warned} of {len(persons)} (see "
                                             "person_scores.csv score_warning)"))
    print_frame({"figure": [r[0] for r in rows], "value": [r[1] for r in rows]},
                title="atlas simulate")
    held = min_items_note(persons["n_items"], persons["stop_reason"],
                          result.config.stopping.min_items, o.min_items is not None,
                          bank_own=bank_minimum)
    if held:
        console.print(held, markup=False, highlight=False)
    console.print(f"wrote {escape(str(out))}/ (person_scores.csv, "
                  f"{'selected_items.csv, ' if o.selected else ''}"
                  f"{'selected_items/, ' if o.selected_folder else ''}item_exposure.csv, "
                  "item_positions.csv, summary.json)")


def simulate_suite_command(suite_arg, pairs, out, *, target_se, max_items, min_items,
                           batch_size, randomesque, seed, scores=None) -> None:
    """``atlas simulate --suite``: replay recorded answers through the suite test."""
    import pandas as pd

    from ..suite import (load_suite, member_matrices, published_averages, replay_summary,
                         simulate_suite)
    from ..validation import read_frame
    from ._options import suite_config
    from ._suite_evaluate import floor_note

    from ..catalogue import BankRef

    suite = load_suite(BankRef.from_option(suite_arg, option="--suite", kinds=("suite",)))
    specs = member_matrices(pairs, suite.names)
    matrices = {n: load_responses(spec, normalize_ids=True, on_empty="keep",
                                  option=f"{n}=MATRIX") for n, spec in specs.items()}
    published = None
    if scores is not None:
        published = published_averages(
            read_frame(scores, what="published scores", option="--scores"), suite)
    cfg = suite_config(target_se=target_se, min_items=min_items, max_items=max_items,
                       batch_size=batch_size, randomesque=randomesque, seed=seed)
    note = floor_note(suite, cfg)
    if note:
        err_console.print(note, highlight=False)
    with progress_bar("asking, then predicting", cfg.max_items + 1) as advance:
        done = [0]

        def step(phase, k, total):  # one bar: items asked, then blocks of predictions
            at = k if phase == "asking" else cfg.max_items + k
            if phase == "predicting" and k == 1:
                advance(0, total=cfg.max_items + total)
            advance(max(0, at - done[0]))
            done[0] = max(done[0], at)

        result = simulate_suite(suite, matrices, cfg, on_progress=step)
    from ..live.suite_session import percentile_columns

    ref = BankRef.from_option(suite_arg, option="--suite", kinds=("suite",)).name
    table = result.scores.assign(**percentile_columns(ref, suite, result.scores))
    out.mkdir(parents=True, exist_ok=True)
    cols = ["subject_id", "n_items", "stop_reason", "average", "average_lo", "average_hi",
            "average_percentile"]
    for n in suite.names:
        cols += [n, f"{n}_lo", f"{n}_hi", f"{n}_items", f"{n}_percentile"]
    if published is not None:
        table = table.assign(published_average=published.reindex(
            table["subject_id"].astype(str)).to_numpy())
        cols.append("published_average")
    table[cols].to_csv(out / "suite_scores.csv", index=False)
    facts = replay_summary(result, published)
    summary = {"suite": suite.name, "members": suite.names, "weights": suite.weights.tolist(),
               "inputs": specs, "config": cfg.to_dict(), **facts}
    (out / "summary.json").write_text(json.dumps(json_safe(summary), indent=2, allow_nan=False))
    rows = [("examinees", facts["n_subjects"]),
            ("with answers on all members", facts["n_all_members"]),
            ("no item to ask (no_items)", facts["n_no_items"]),
            ("items mean", f"{facts['items_mean']:.1f}"),
            ("predicted average, mean over models",
             mean_and_width(100 * table["average"].mean(), facts["width_mean_points"]))]
    for key, label in (("error", "published"), ("error_all_members", "published, all members")):
        if key in facts:
            e = facts[key]
            rows.append((f"MAE vs {label} average (n={e['n']})",
                         f"{e['mae_points']:.2f} points, 95% coverage {100 * e['coverage_95']:.0f}%"))
    rows += [(f"{n} items mean", f"{table[f'{n}_items'].mean():.1f}") for n in suite.names]
    if facts["n_all_members"] < facts["n_subjects"]:
        err_console.print(f"note: {facts['n_subjects'] - facts['n_all_members']} of "
                          f"{facts['n_subjects']} examinees lack answers on some member; they are "
                          "predicted from the members they have, with wider intervals",
                          highlight=False)
    print_frame(pd.DataFrame(rows, columns=["figure", "value"]),
                title=f"atlas simulate --suite {suite.name}")
    console.print(f"wrote {escape(str(out))}/ (suite_scores.csv, summary.json)")
    return None


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_command)
