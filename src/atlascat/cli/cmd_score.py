"""``atlas score RESPONSES --bank BANK``: theta and SE for every subject (EAP, WLE, MAP, ML),
the mean score, and optionally p-IRT / gp-IRT reconstructed mean scores."""
from __future__ import annotations

from pathlib import Path

import typer

from ..irt.defaults import SCORE_QUADPTS, SCORE_QUADRATURE, THETA_RANGE
from ._common import (GROUPS_HELP, RESPONSES_HELP, SUMMARY_HELP, align_items,
                      bank_option_help, check_grouped_bank, console, err_console,
                      load_responses, output_file, print_frame, quiet_option, se_line, warn,
                      write_scores_csv)

METHODS = ("eap", "wle", "map", "ml")

_QUADPTS = typer.Option(SCORE_QUADPTS, "--quadpts",
    help=f"EAP quadrature nodes on [{THETA_RANGE[0]:g}, {THETA_RANGE[1]:g}] (a "
         "multidimensional bank: per dimension, unless set mirt's fscores' 61 for 2, 31 for 3).")
_QUADRATURE = typer.Option(None, "--quadrature", metavar="adaptive|fixed",
    help="EAP integration: adaptive (the --quadpts grid where it resolves the posterior; an "
         "8 times finer one where not: short answer sets of steep items) or fixed (the grid "
         "alone, mirt's fscores). A multidimensional bank's EAP keeps its own grid (--quadpts). "
         f"[default: {SCORE_QUADRATURE}]")
_CALIBRATION = typer.Option(None, "--calibration",
    help="Full responses of calibration models (file or bundled name): estimate the gp-IRT "
         "lambda from them (instead of --lambda).")
_DEVICE = typer.Option("cpu", "--device",
    help="Where the scores are computed (every method): cpu (NumPy) | cuda (GPU through "
         "PyTorch or CuPy, the package's 'gpu' extra).")
_GROUPS = typer.Option(None, "--groups", metavar="FILE", help=GROUPS_HELP + " EAP/MAP score "
                       "each subject under its group's prior (mirt's fscores on multipleGroup).")
_SUMMARY = typer.Option(None, "--summary", metavar="JSON", help=SUMMARY_HELP)
_ROTATE = typer.Option("none", "--rotate", metavar="none|oblimin|geomin|varimax",
    help="A multidimensional bank: the axes of theta_1..theta_K: none (the bank's a1..aK, "
         "prior N(0, I)) or mirt's summary rotation (oblimin: mirt's fscores default).")


def _form_prior(method: str, prior_sd: float):
    """The prior SD of ``method``'s estimate (None: ML / WLE, no prior)."""
    return prior_sd if method.lower() in ("eap", "map") else None


def _form_se(df, bk, factors, method: str, prior_sd: float):
    """The SE a form's factors widen ``df``'s to (the one printed, which the prediction's
    warning reads), or None without factors."""
    if factors is None:
        return None
    from ..bankdir.formfactor import widened_se

    return widened_se(bk, df["theta"], df["se"], factors,
                      prior_sd=_form_prior(method, prior_sd))


def _with_prediction(df, ref, rm, bk, answers, warn_se=None):
    """``df`` with the predicted score columns of the bank's score link (``score``, ``_lo``,
    ``_hi``, ``percentile``, ...; :data:`atlascat.scorelink.frames.COLUMNS`, as ``atlas
    simulate`` writes them) from each subject's theta, SE and answers: a shipped bank's
    (:func:`atlascat.scorelink.predict_frame`, the published score) or a bank folder's
    (:func:`atlascat.bankdir.predict.predict_matrix_scores` on ``answers``, every item
    answered, those the bank dropped too; on a --score-range folder the ``mean_score``
    columns are on the metric's scale); ``warn_se``: the SE its warning reads (a form's
    widened SE, :func:`_form_se`)."""
    import pandas as pd

    persons = df[["subject_id", "theta", "se"]]
    if ref.kind == "dir":
        from ..bankdir.predict import in_sample_line, predict_matrix_scores, to_metric_scale

        folder = ref.folder()
        if (line := in_sample_line(folder, rm.subject_ids)):
            warn(line)
        pred = predict_matrix_scores(folder, persons, answers, warn_se=warn_se)
        # the observed means too on the metric's own scale (a folder built with --score-range)
        df = to_metric_scale(df, folder, [c for c in df.columns if c.startswith("mean_score")])
    else:
        from ..scorelink import predict_frame

        pred = predict_frame(ref.link, persons, rm.to_long(), warn_se=warn_se)
    return pd.concat([df.reset_index(drop=True), pred], axis=1)


def score_command(
    responses: str = typer.Argument(..., metavar="RESPONSES", help=RESPONSES_HELP),
    bank: str = typer.Option(..., "--bank", "-b", help=bank_option_help()),
    method: str = typer.Option("eap", "--method", "-m", help="Scoring method: eap, wle, map or ml."),
    output: Path = typer.Option(None, "--output", "-o",
                                help="Write the scores to this CSV (printed when absent)."),
    freq_column: str = typer.Option(None, "--freq-column",
                                    help="Column with pattern frequencies (e.g. freq)."),
    normalize_ids: bool = typer.Option(False, "--normalize-ids",
                                       help="Strip R's 'X' prefix from item ids (X514 -> 514)."),
    prior_mean: float = typer.Option(0.0, "--prior-mean", help="EAP/MAP normal prior mean."),
    prior_sd: float = typer.Option(1.0, "--prior-sd", help="EAP/MAP normal prior SD (> 0)."),
    quadpts: int = _QUADPTS,
    quadrature: str = _QUADRATURE,
    reconstruct: str = typer.Option("none", "--reconstruct",
                                    help="none, pirt or gpirt: add the reconstructed mean score."),
    lam: float = typer.Option(None, "--lambda", help="gp-IRT weight in [0, 1]."),
    calibration: str = _CALIBRATION,
    extra_items: str = typer.Option("ignore", "--extra-items",
                                    help="ignore (with a note) or error: response items "
                                         "missing from the bank."),
    seed: int = typer.Option(0, "--seed", help="Seed for the gp-IRT lambda estimate."),
    form: Path = typer.Option(None, "--form", help="The form the answers are to (atlas design "
                              "-o on the folder --bank): its factors widen the SE and interval."),
    device: str = _DEVICE,
    rotate: str = _ROTATE,
    groups: Path = _GROUPS,
    summary: Path = _SUMMARY,
    quiet: bool = quiet_option(),
):
    """Score every subject: theta, SE, items answered, observed and reconstructed mean score.

    Columns: subject_id, theta, se, n_items, mean_score (the mean item score over the answered
    items: the accuracy for 0/1 items), flag [, freq] [, mean_score_pirt] [,
    mean_score_gpirt]; with a bank that has a score link (a bundled bank such as arc: the
    published leaderboard score; a bank folder, --bank DIR: on its metric's scale) also its
    predicted score: score, score_lo, score_hi (95% interval), percentile, score_flag,
    score_warning. ML gives +-inf, SE inf, where no finite maximum exists (flag perfect/zero;
    diverged: a 3PL/4PL likelihood still rising at theta +-10); mirt's ML reports such a
    pattern at its max_theta bound or as +-Inf. An ordinal bank (graded / gpcm): RESPONSES
    are ratings on the items' own scales, mean_rating stands where mean_score does, and
    score, score_lo, score_hi are the predicted mean rating over the whole bank (95%
    interval; a share of each item's scale when the items' scales differ). With --groups
    (a bank from calibrate --groups) a group column too.
    """
    from ..catalogue import BankRef

    _check_options(method, reconstruct, extra_items, prior_mean, prior_sd, lam, calibration, seed)
    quadrature = _check_quadrature(quadrature, method)
    output = output_file(output, inputs={"RESPONSES": responses, "--bank": bank,
                                         "--calibration": calibration, "--form": form,
                                         "--groups": groups, "--summary": summary})
    if _other_bank(locals()):   # ordinal or multidimensional: scored there
        return
    grouping = _grouping(groups, summary, method.lower(), prior_mean, prior_sd, form)
    ref = BankRef.from_option(bank, normalize_ids=normalize_ids)
    bk = ref.load()
    if method.lower() in ("eap", "map"):   # ML and WLE take no prior
        check_grouped_bank(bk, grouping, prior=(prior_mean, prior_sd))
    rm = _read_responses(responses, ref, freq_column, normalize_ids)
    rm, factors, n_form = _form_factors(form, ref, rm)
    answers, (rm, bk) = rm, align_items(rm, bk, extra_items, known=_dropped(ref))
    df = _scores(rm, bk, method.lower(), grouping, prior_mean=prior_mean, prior_sd=prior_sd,
                 quadpts=quadpts, device=device, quadrature=quadrature or SCORE_QUADRATURE)
    if reconstruct != "none":
        lam = lam if lam is not None or reconstruct == "pirt" else _estimated_lambda(
            calibration, rm, bk, normalize_ids=normalize_ids, seed=seed)
        df = _with_reconstruction(df, rm, bk, reconstruct, lam)
    if ref.link is not None:  # a shipped bank or a folder: its predicted score, 95% interval
        df = _with_prediction(df, ref, rm, bk, answers, _form_se(df, bk, factors, method, prior_sd))
    df = _widened(df, ref, bk, factors, method.lower(), prior_sd)
    _show(df, output, method.lower(), len(bk), rm, n_form)


def register(app: typer.Typer) -> None:
    app.command("score")(score_command)


def _other_bank(o: dict) -> bool:
    """Score on an ordinal bank (graded / gpcm: ratings on the items' own scales) or a
    multidimensional 2PL bank (a1, a2, ..., d columns) and say True; False for any other bank
    (``o``: score_command's options). The options they have no use for are refused."""
    from ..errors import ConfigError
    from ..irt.polybank import is_poly_bank_file

    binary_only = {"--reconstruct": o["reconstruct"] != "none", "--device": o["device"] != "cpu",
                   "--form": bool(o["form"]), "--calibration": o["calibration"] is not None,
                   "--lambda": o["lam"] is not None}
    grouped = {"--groups": o["groups"] is not None, "--summary": o["summary"] is not None}
    if is_poly_bank_file(o["bank"]):
        from ._calibrate_ordinal import score_ordinal_cmd

        if o["rotate"] != "none":
            raise ConfigError("--rotate: multidimensional banks (a1, a2, ..., d) only")
        score_ordinal_cmd(o["responses"], o["bank"], o["method"].lower(), o["output"],
                          freq_column=o["freq_column"], prior_mean=o["prior_mean"],
                          prior_sd=o["prior_sd"], quadpts=o["quadpts"],
                          quadrature=o["quadrature"] or SCORE_QUADRATURE,
                          extra_items=o["extra_items"], normalize_ids=o["normalize_ids"],
                          binary_only=binary_only, grouping=_grouping(
                              o["groups"], o["summary"], o["method"].lower(), o["prior_mean"],
                              o["prior_sd"], None))
        return True
    binary_only.update(grouped)
    from ._score_dims import is_multidim_bank, score_dims_cmd

    if not is_multidim_bank(o["bank"]):
        if o["rotate"] != "none":
            raise ConfigError("--rotate: multidimensional banks (a1, a2, ..., d) only")
        return False
    score_dims_cmd(o["responses"], o["bank"], o["method"].lower(), o["output"],
                   freq_column=o["freq_column"], normalize_ids=o["normalize_ids"],
                   quadpts=None if o["quadpts"] == SCORE_QUADPTS else o["quadpts"],
                   rotate=o["rotate"], extra_items=o["extra_items"], unsupported={
                       **binary_only, "--prior-mean": o["prior_mean"] != 0.0,
                       "--quadrature": o["quadrature"] is not None,
                       "--prior-sd": o["prior_sd"] != 1.0, "--seed": o["seed"] != 0})
    return True


def _dropped(ref) -> set:
    """A bank folder's results items its build dropped: answers to them count for a known
    mean score (``answers``), not for theta, and are not items foreign to the bank."""
    if ref.kind != "dir":
        return set()
    from ..bankdir.predict import results_items

    return (results_items(ref.folder()) or set()) - {str(i) for i in ref.load().item_ids}


def _read_responses(responses, ref, freq_column, normalize_ids):
    """RESPONSES as the bank reads them (:func:`atlascat.bankdir.predict.read_answers`: a
    folder's sample logs or --score-range scale)."""
    from ..bankdir.predict import read_answers

    return read_answers(responses, ref, freq_column=freq_column, normalize_ids=normalize_ids)


def _form_factors(form, ref, rm):
    """(the responses to the form's items, the (se, interval) factors ``--form`` carries or
    None: no --form, or a form designed without them, then a warning; the form's number of
    items, None without --form); the form must be of
    the bank folder. Answers to items off the form are left out, said in a note: the factors
    hold for the form's items."""
    if form is None:
        return rm, None, None
    from ..bankdir.formfactor import read_form
    from ..errors import ConfigError

    if ref.kind != "dir":
        raise ConfigError("--form widens the scores of a form designed on a bank folder; give "
                          "that folder as --bank")
    got = read_form(form, ref.load())
    on, off = got.split_answers(rm.item_ids, rm.values)
    if off:
        err_console.print(f"note: RESPONSES answer {len(off)} item(s) not on the form (e.g. "
                          f"{off[0]!r}): left out, the form's factors hold for its "
                          f"{len(got.item_ids)} items", markup=False)
        rm = rm.subset(items=on)
    if got.factors is None:
        warn(f"--form {form} carries no cross-fitted factors (designed with --no-cross-fit, or "
             "on a folder that keeps no source answers): the SE and interval are the model's")
    return rm, got.factors, len(got.item_ids)


def _widened(df, ref, bk, factors, method: str, prior_sd: float):
    """``df`` with the form's factors applied (:func:`atlascat.bankdir.formfactor.
    widen_form_scores`), said in one line; as it is without them (``factors`` None)."""
    if factors is None:
        return df
    from ..bankdir.formfactor import widen_form_scores
    from ..bankdir.predict import metric_scale

    df = widen_form_scores(df, bk, factors, prior_sd=_form_prior(method, prior_sd),
                           scale=metric_scale(ref.folder()))
    err_console.print(f"SE widened by the form's cross-fitted factor {factors[0]:.2f} beyond "
                      f"the whole bank's (column se; the model's: se_model), each side of the "
                      f"score interval times {factors[1]:.2f}")
    return df


def _check_options(method, reconstruct, extra_items, prior_mean, prior_sd, lam, calibration,
                   seed) -> None:
    from ..errors import ConfigError
    from ..validation import check_finite, check_positive
    from ._common import check_seed

    if method.lower() not in METHODS:
        raise ConfigError(f"--method must be one of {', '.join(METHODS)}, got {method.lower()!r}")
    if reconstruct not in ("none", "pirt", "gpirt"):
        raise ConfigError(f"--reconstruct must be none, pirt or gpirt, got {reconstruct!r}")
    if extra_items not in ("ignore", "error"):
        raise ConfigError(f"--extra-items must be ignore or error, got {extra_items!r}")
    check_finite(prior_mean, "--prior-mean")
    check_positive(prior_sd, "--prior-sd")
    if lam is not None and not 0.0 <= check_finite(lam, "--lambda") <= 1.0:
        raise ConfigError(f"--lambda must be in [0, 1], got {lam}")
    unused = [o for o, v in (("--lambda", lam), ("--calibration", calibration)) if v is not None]
    if unused and reconstruct != "gpirt":
        raise ConfigError(f"{' and '.join(unused)} set(s) the gp-IRT reconstruction, which "
                          f"--reconstruct {reconstruct} does not use: add --reconstruct gpirt, "
                          f"or drop {' and '.join(unused)}")
    check_seed(seed)


def _check_quadrature(quadrature, method: str):
    """--quadrature checked: its name, None when not given (the default, SCORE_QUADRATURE); a
    one-line error for another name, or for one given with a method other than EAP, which
    integrates nothing."""
    from ..errors import ConfigError
    from ..irt.adaptquad import check_quadrature

    if quadrature is None:
        return None
    quadrature = check_quadrature(quadrature)
    if method.lower() != "eap":
        raise ConfigError(f"--quadrature {quadrature} sets how the EAP integrates; --method "
                          f"{method.lower()} integrates nothing: drop --quadrature")
    return quadrature


def _grouping(groups, summary, method: str, prior_mean: float, prior_sd: float, form):
    """--groups and --summary read (:func:`._common.group_priors_option`) and said in one
    line, or None without them; a one-line error with ML / WLE (no prior), --prior-mean /
    --prior-sd (the groups' priors stand for them) or --form."""
    from ..errors import ConfigError
    from ._common import group_priors_option

    grouping = group_priors_option(groups, summary)
    if grouping is None:
        return None
    clash = [o for o, on in (("--method " + method, method not in ("eap", "map")),
                             ("--prior-mean", prior_mean != 0.0), ("--prior-sd", prior_sd != 1.0),
                             ("--form", form is not None)) if on]
    if clash:
        raise ConfigError(f"--groups scores EAP/MAP under each group's prior from --summary; "
                          f"drop {clash[0]}")
    console.print("each subject under its group's prior: " + ", ".join(
        f"{g} N({m:.3f}, {s:.3f}^2)" for g, (m, s) in grouping["priors"].items()), markup=False)
    return grouping


def _scores(rm, bk, method: str, grouping=None, **settings):
    """theta, SE, items answered and the mean item score per subject (and the pattern
    frequency); ``grouping`` (:func:`_grouping`): each under its group's prior, a group column."""
    from ..irt.ability import estimate_ability
    from ._score_table import with_mean_score

    if grouping is not None:
        from ..irt.groupscore import score_groups

        for key in ("prior_mean", "prior_sd"):
            settings.pop(key)
        df = score_groups(rm, bk, grouping["groups"], grouping["priors"], method, **settings)
    else:
        df = estimate_ability(rm, bk, method, **settings)
    return with_mean_score(df, rm.aligned_values(bk.item_ids), rm.weights)


def _estimated_lambda(calibration, rm, bk, *, normalize_ids: bool, seed: int) -> float:
    """gp-IRT's lambda estimated on the full responses of --calibration for the median number
    of items a subject answered."""
    import numpy as np

    from ..errors import ConfigError
    from ..studies.reconstruction import estimate_gpirt_lambda

    if calibration is None:
        raise ConfigError("--reconstruct gpirt needs --lambda or --calibration "
                          "(full responses to estimate lambda from)")
    cal_rm = load_responses(calibration, normalize_ids=normalize_ids, option="--calibration")
    cal, _ = align_items(cal_rm, bk, "ignore")
    n_adm = max(1, int(np.median((~np.isnan(rm.aligned_values(bk.item_ids))).sum(1))))
    lam = estimate_gpirt_lambda(cal, bk, n_adm, rng=np.random.default_rng(seed)).lam
    err_console.print(f"gp-IRT lambda for {n_adm} items, estimated on "
                      f"{Path(calibration).name}: {lam:.3f}")
    return lam


def _with_reconstruction(df, rm, bk, reconstruct: str, lam):
    import numpy as np

    from ..studies.reconstruction import reconstruct_accuracy

    rec = reconstruct_accuracy(rm, bk, theta=np.clip(df["theta"].to_numpy(), -50, 50),
                               lam=lam if reconstruct == "gpirt" else None)
    df["mean_score_pirt"] = rec["accuracy_pirt"].to_numpy()
    if reconstruct == "gpirt":
        df["mean_score_gpirt"] = rec["accuracy_gpirt"].to_numpy()
    return df


def _show(df, output, method: str, n_bank_items: int, rm, n_form=None) -> None:
    """Write the scores (or print them, titled by the items answered: the bank's, as many of
    them as ``rm`` (the responses on the bank's items) answers, or a ``--form``'s ``n_form``),
    then the count and the median SE."""
    if output is not None:
        write_scores_csv(df, output)
        console.print(f"wrote {len(df)} scores ({method}) to {output}")
    else:
        print_frame(df, title=f"theta by {method.upper()} "
                              f"({_asked(n_bank_items, rm, n_form)})")
    console.print(se_line(df["se"].to_numpy(float), rm.weights))


def _asked(n_bank_items: int, rm, n_form) -> str:
    """The items the table's thetas rest on: "N bank items" when the responses answer each of
    the bank's items, "K of the bank's N items answered" when they answer only K of them (a
    column with no answer counts as unanswered), the form's K items with ``--form``."""
    if n_form is not None:
        return f"the form's {n_form} items, of the bank's {n_bank_items}"
    n_answered = int(rm.observed.any(axis=0).sum())
    if n_answered < n_bank_items:
        return f"{n_answered} of the bank's {n_bank_items} items answered"
    return f"{n_bank_items} bank items"
