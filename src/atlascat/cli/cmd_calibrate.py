"""``atlas calibrate RESPONSES -o BANK``: calibrate an item bank by marginal maximum likelihood."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..errors import ResponseDataError
from ..irt.defaults import AUTO, CONVERGENCE, LINK, MAX_ITER, QUADPTS, THETA_RANGE, TOL
from ._common import (RESPONSES_HELP, console, group_keywords, json_safe, load_responses,
                      output_file, next_stage, print_groups, progress_bar, quiet_option,
                      subjects_text, warn, whole_ratings, wrote_line)


_MODEL = typer.Option(AUTO, "--model",
    help="IRT model: auto, rasch, 1pl, 2pl, 3pl or 4pl; auto is chosen "
         "from the number of subjects (2PL < 500, 3PL < 1000, else "
         "4PL); graded, gpcm or pcm (partial credit: mirt's Rasch) for "
         "ordinal ratings (e.g. 1-10, 0-3: each item's observed levels "
         "are its categories).")

_RATING_RANGE = typer.Option(
    None, "--rating-range", metavar="LO HI",
    help="graded/gpcm/pcm: the ratings' declared range; a rating outside it is refused.")

_NAME = typer.Option(
    None, "--name",
    help="The benchmark's name, kept in the bank (a benchmark column): what atlas simulate, "
         "evaluate, runs and the run page call it. [default: the bank file's name]")

_QUADPTS = typer.Option(QUADPTS, "--quadpts",
    help=f"Quadrature nodes on [{THETA_RANGE[0]:g}, {THETA_RANGE[1]:g}] (--dims: per "
         "dimension, default mirt's 31 for K = 2, 15 for K = 3).")

_PRIOR_C = typer.Option(AUTO, "--prior-c",
    help="Prior on c: auto (the default for the model and data size), "
         "none, or e.g. 'beta(5,17)', 'logitnorm(-1.4,1)'.")

_PRIOR_A = typer.Option(AUTO, "--prior-a",
    help="Prior on a: auto, none, or e.g. 'lognorm(0,0.5)', 'norm(1,1)' (--dims: on every "
         "loading, auto is norm(0,3), or norm(0,SD)).")

_PRIOR_U = typer.Option(AUTO, "--prior-u",
    help="Prior on the 4PL's upper asymptote u: auto (the 4PL's "
         "default), none, or e.g. 'beta(17,5)'.")

_MIRT_DEFAULTS = typer.Option(False, "--mirt-defaults",
    help="No priors, and auto means 3PL: the paper's mirt fit, for parity "
         "(mirt's own default itemtype is 2PL: --model 2pl --prior-a none; --dims: no priors "
         "on loadings and intercepts, mirt's mirt(data, K)).")

_PARTITION_SIZE = typer.Option(None, "--partition-size",
    help="Calibrate random partitions of at least N "
         "items and link them (joint when absent).")

_LINK = typer.Option(LINK, "--link",
    help="Partition linking: mean-sigma | mean-mean.")

_FILTER = typer.Option(None, "--filter/--no-filter", show_default=False,
    help="Psychometric item/subject filtering before "
         "calibrating [default: as atlascat.calibrate].")

_CONVERGENCE = typer.Option(CONVERGENCE, "--convergence",
    help="params (mirt's rule on parameters) | icc (largest "
         "change of any item curve).")

_SUMMARY = typer.Option(None, "--summary",
    help="Write a JSON summary here (log-likelihood, "
         "n_parameters, AIC, BIC, SABIC, HQ, ...).")

_SE = typer.Option(False, "--se",
    help="Standard errors of the item parameters (observed "
         "information, Oakes 1999, as mirt's SE=TRUE): a "
         "<parameter>_se column beside each parameter.")

_SCORES = typer.Option(None, "--scores",
    help="Write the subjects' EAP theta and SE (CSV), in the columns atlas score writes on "
         "the bank written.")

_FREQ_COLUMN = typer.Option(None, "--freq-column",
    help="Column holding pattern frequencies (pattern data).")

_NORMALIZE_IDS = typer.Option(False, "--normalize-ids",
    help="Strip R's 'X' from item ids (X514 -> 514).")

_DROP_EMPTY = typer.Option(False, "--drop-empty",
    help="Drop all-missing subjects/items instead of failing (graded/gpcm/pcm: items rated "
         "at fewer than two levels).")

_GROUPS = typer.Option(
    None, "--groups", metavar="FILE",
    help="Multiple-group calibration (binary, graded, gpcm, pcm): a CSV of subject id and "
         "group (a 'group' column, else the second), one row per subject. Items shared by the groups; the reference group's "
         "trait N(0, 1), every other group's mean and SD estimated (mirt's multipleGroup).")

_REFERENCE_GROUP = typer.Option(
    None, "--reference-group", metavar="LABEL",
    help="With --groups: the group whose trait is N(0, 1) [default: the first label in "
         "sorted order, numbers by value, as R's factor levels].")

#: not given (None): the 1-D fit's MAX_ITER, TOL; --dims: mirt's, as MultidimIRT's
_MAX_ITER = typer.Option(None, "--max-iter", help=f"EM iteration cap [default: {MAX_ITER}; "
                         "--dims: mirt's 500, MH-RM 2000 after a burn-in of 100].")
_TOL = typer.Option(None, "--tol", help=f"Stop when the largest parameter change < TOL "
                    f"[default: {TOL:g}; --dims K >= 4: MH-RM's 1e-3, as mirt].")
_DIMS = typer.Option(None, "--dims", metavar="K",
    help="K >= 2: the exploratory K-dimensional 2PL (0/1 answers; mirt's mirt(data, K)): a "
         "bank of loadings a1..aK and intercepts d, and mirt's summary (--rotate).")

_ROTATE = typer.Option("oblimin", "--rotate", metavar="oblimin|geomin|varimax|none",
    help="--dims: the rotation of the loadings shown and in --summary (oblimin, as mirt's "
         "summary; the bank keeps varimax loadings).")

_DEVICE = typer.Option("cpu", "--device",
    help="Where the EM runs: cpu (NumPy) | cuda (GPU through "
         "PyTorch or CuPy, the package's 'gpu' extra).")


def calibrate_command(
    responses: str = typer.Argument(..., metavar="RESPONSES", help=RESPONSES_HELP),
    output: Path = typer.Option(..., "-o", "--output", help="Bank file to write (.csv or .parquet)."),
    model: str = _MODEL,
    rating_range: Optional[tuple[float, float]] = _RATING_RANGE,
    name: Optional[str] = _NAME,
    quadpts: int = _QUADPTS,
    prior_c: str = _PRIOR_C,
    prior_a: str = _PRIOR_A,
    prior_u: str = _PRIOR_U,
    mirt_defaults: bool = _MIRT_DEFAULTS,
    partition_size: Optional[int] = _PARTITION_SIZE,
    link: str = _LINK,
    filter_: Optional[bool] = _FILTER,
    max_iter: Optional[int] = _MAX_ITER,
    tol: Optional[float] = _TOL,
    convergence: str = _CONVERGENCE,
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed (partition assignment; --dims K >= 4: the MH-RM draws)."),
    fmt: str = typer.Option("ours", "--format",
                            help="Bank format: ours (a,b,c,u; graded/gpcm/pcm: a,b1..) | mirt "
                                 "(a1,d,g,u; graded/gpcm/pcm: a1,d1..; --dims: a1..aK,d,g,u)."),
    summary: Optional[Path] = _SUMMARY,
    se: bool = _SE,
    scores: Optional[Path] = _SCORES,
    freq_column: Optional[str] = _FREQ_COLUMN,
    normalize_ids: bool = _NORMALIZE_IDS,
    drop_empty: bool = _DROP_EMPTY,
    dtype: str = typer.Option("float64", "--dtype", help="E-step precision: float64 | float32."),
    device: str = _DEVICE,
    groups: Optional[Path] = _GROUPS,
    reference_group: Optional[str] = _REFERENCE_GROUP,
    dims: Optional[int] = _DIMS,
    rotate: str = _ROTATE,
    quiet: bool = quiet_option(),
):
    """Calibrate an IRT item bank (1PL-4PL; graded or GPCM for ratings; --dims K: the
    exploratory K-dimensional 2PL, mirt's mirt(data, K)) by marginal maximum likelihood (EM).

    Filters items and subjects first when asked (--filter/--no-filter; the default is the
    library's), fits all items jointly (or linked partitions)."""
    from ._options import calibrator

    name = _checked_options(locals())   # the choices, --name, the output files
    if dims is not None:
        return _calibrate_dims(locals())
    max_iter, tol = MAX_ITER if max_iter is None else max_iter, TOL if tol is None else tol
    grouping = group_keywords(groups, reference_group)   # read before the responses
    def ordinal(kind: str):
        from ._calibrate_ordinal import calibrate_ordinal_cmd

        return calibrate_ordinal_cmd(
            responses, output, kind, name=name, fmt=fmt, summary=summary, scores=scores,
            freq_column=freq_column, rating_range=rating_range, prior_a=prior_a,
            quadpts=quadpts, max_iter=max_iter, tol=tol, quiet=quiet, se=se,
            normalize_ids=normalize_ids, drop_empty=drop_empty, grouping=grouping,
            binary_only=_binary_only(prior_c, prior_u, partition_size, link, filter_, seed,
                                     convergence, dtype, device))

    if _is_ordinal(model, rating_range):
        return ordinal(model.lower())
    cal = calibrator(model=model, quadpts=quadpts, prior_a=prior_a, prior_c=prior_c,
                     prior_u=prior_u, max_iter=max_iter, tol=tol, partition_size=partition_size,
                     link=link, dtype=dtype, random_state=seed, convergence=convergence,
                     mirt_defaults=mirt_defaults, device=device, se=se, filter_=filter_,
                     # scores in (0, 1): each item's dispersion (0/1 answers: fitted once, as
                     # without it); a joint fit only, and none in mirt's fit
                     dispersion=None if partition_size or mirt_defaults else "auto")
    rm = _responses(responses, freq_column, normalize_ids, drop_empty, bool(grouping),
                    mirt_ratings=mirt_defaults and model.lower() == "auto")
    if rm is None:                  # mirt(data, 1) fits whole-number ratings as graded
        return ordinal("graded")
    res = _fit(cal, rm, quiet, partition_size, max_iter, grouping)
    bank = res.bank_with_standard_errors(fmt)
    (bank if name is None else bank.with_benchmark(name)).write(output, format=fmt)
    if summary is not None:
        _write_summary(res, summary, responses=str(responses), output=str(output), format=fmt,
                       **({"benchmark": name} if name else {}))
    _write_scores(res, rm, scores, grouping.get("groups"))
    _report(res, rm, link, responses)
    console.print(wrote_line(output, summary, scores))


def _checked_options(o: dict):
    """The command's options ``o`` checked before any work: --format, --convergence, --rotate
    (with --dims only), -o, --summary and --scores (none of them an input or another); returns
    --name checked (None when not given)."""
    from ..errors import ConfigError
    from ._common import check_seed

    _check_choices(o["fmt"], o["convergence"])
    check_seed(o["seed"])
    if o["dims"] is None and o["rotate"] != "oblimin":
        raise ConfigError("--rotate rotates the factors of a multidimensional fit: give --dims K")
    responses, output, summary = o["responses"], o["output"], o["summary"]
    output_file(output, inputs={"RESPONSES": responses})
    output_file(summary, "--summary", inputs={"RESPONSES": responses}, outputs={"-o": output})
    output_file(o["scores"], "--scores", inputs={"RESPONSES": responses},
                outputs={"-o": output, "--summary": summary})
    return _bank_name(o["name"])


def _calibrate_dims(opts: dict) -> None:
    """--dims K: the exploratory K-dimensional 2PL (:mod:`._calibrate_dims`); ``opts`` the
    command's options."""
    from ._calibrate_dims import calibrate_dims_cmd

    o = opts
    return calibrate_dims_cmd(
        o["responses"], o["output"], o["dims"], model=o["model"], prior_a=o["prior_a"],
        mirt_defaults=o["mirt_defaults"], quadpts=None if o["quadpts"] == QUADPTS else o["quadpts"],
        max_iter=o["max_iter"], tol=o["tol"], rotate=o["rotate"], summary=o["summary"],
        name=o["name"], freq_column=o["freq_column"], normalize_ids=o["normalize_ids"],
        drop_empty=o["drop_empty"], seed=o["seed"], quiet=o["quiet"], scores=o["scores"],
        se=o["se"], fmt=o["fmt"],
        unsupported={"--rating-range": o["rating_range"] is not None,
                     **_binary_only(o["prior_c"], o["prior_u"], o["partition_size"], o["link"],
                                    o["filter_"], None, o["convergence"], o["dtype"],
                                    o["device"], o["groups"], o["reference_group"])})


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate_command)


def _responses(responses, freq_column, normalize_ids, drop_empty: bool, grouped: bool, *,
               mirt_ratings: bool):
    """RESPONSES as 0/1 or [0, 1] scores; None for whole-number ratings when ``mirt_ratings``
    (--mirt-defaults: mirt's default for them is the graded model), said in one line.
    --drop-empty with --groups (``grouped``): the library drops the empty subjects, after
    matching the groups file to the subjects read (and names them)."""
    on_empty = ("keep" if grouped else "drop") if drop_empty else "error"
    try:
        return load_responses(responses, freq_column=freq_column, normalize_ids=normalize_ids,
                              on_empty=on_empty)
    except ResponseDataError:
        if not (mirt_ratings and whole_ratings(responses, freq_column)):
            raise
    console.print("whole-number ratings: mirt's default for them, the graded model (no priors)",
                  highlight=False)
    return None


def _bank_name(name):
    """--name checked: non-empty text, not a shipped benchmark's (None when not given)."""
    if name is None:
        return None
    from ..catalogue.links import own_benchmark_name
    from ..irt.bank import check_benchmark_name

    return own_benchmark_name(check_benchmark_name(name))


def _is_ordinal(model: str, rating_range) -> bool:
    """Whether --model names an ordinal model; --rating-range belongs to those only."""
    if model.lower() in ("graded", "gpcm", "pcm"):
        return True
    if rating_range is not None:
        from ..errors import ConfigError

        raise ConfigError("--rating-range is for the ordinal models (--model graded|gpcm|pcm)")
    return False


def _write_summary(res, path: Path, **fields) -> None:
    """The fit's JSON summary (log-likelihood, criteria, settings) with ``fields``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    info = {**res.to_dict(), **fields}
    path.write_text(json.dumps(json_safe(info), indent=2, default=_jsonable))


def _binary_only(prior_c, prior_u, partition_size, link, filter_, seed, convergence, dtype,
                 device, groups=None, reference_group=None) -> dict:
    """The binary models' options and whether each was given (refused for graded/gpcm)."""
    return {"--prior-c": prior_c != AUTO, "--prior-u": prior_u != AUTO,
            "--partition-size": partition_size is not None, "--link": link != LINK,
            "--filter/--no-filter": filter_ is not None, "--seed": seed is not None,
            "--convergence": convergence != CONVERGENCE, "--dtype": dtype != "float64",
            "--device": device != "cpu", "--groups": groups is not None,
            "--reference-group": reference_group is not None}


def _check_choices(fmt: str, convergence: str) -> None:
    from ..errors import ConfigError

    if fmt not in ("ours", "mirt"):
        raise ConfigError(f"--format must be 'ours' or 'mirt', not {fmt!r}")
    if convergence not in ("params", "icc"):
        raise ConfigError(f"--convergence must be 'params' or 'icc', not {convergence!r}")


def _write_scores(res, rm, path: Optional[Path], groups=None) -> None:
    """The subjects' EAP scores in the columns ``atlas score`` writes on the written bank
    (CSV; nothing without --scores); ``groups`` (a --groups fit's): a group column."""
    if path is None:
        return
    from ._score_table import calibration_scores, with_mean_score, write_calibration_scores

    rm = rm.subset(subjects=[str(s) for s in res.subject_ids], on_empty="keep")
    values = rm.aligned_values(res.bank.item_ids, extra="ignore")
    df = calibration_scores(res, values, groups)
    write_calibration_scores(with_mean_score(df, values, rm.weights), path)


def _report(res, rm, link: str, responses=None) -> None:
    """The fit in a few lines: items, subjects, log-likelihood, iterations, the model chosen
    and why, the identification and dimensionality warnings (a second trait of 0/1 answers:
    the commands that fit it, ``responses`` the data's path), filtering, a Rasch fit's scale,
    the partitions."""
    import numpy as np

    from ._common import dimension_advice

    status = "converged" if res.converged else "[yellow]not converged (raise --max-iter)[/]"
    console.print(
        f"calibrated [bold]{len(res.bank)}[/] items ({model_name(res.model)}) on "
        f"{_subjects(rm, res.subject_ids)}: log-likelihood {res.loglik:.3f}, "
        f"{res.n_iter} EM iterations, {status}, {res.seconds:.1f} s"
    )
    from ._criteria import print_criteria

    print_criteria(res)
    chosen = res.settings.get("defaults") if res.settings else None
    if chosen:
        console.print(f"model {model_name(chosen['model'])} ({chosen['source']}): "
                      f"{chosen['reason']}{_mirt_hint(chosen)}", markup=False, highlight=False)
        binary = (res.settings or {}).get("scores") != "continuous"   # --dims: 0/1 answers
        for msg in chosen.get("warnings", []):
            warn(dimension_advice(msg, responses) if binary else msg)
    if res.filter_report is not None:
        rep = res.filter_report
        console.print(f"filtering dropped {rep.n_items_before - rep.n_items_after} item(s) and "
                      f"{rep.n_subjects_before - rep.n_subjects_after} subject(s)")
    phi = res.settings.get("dispersion") if res.settings else None
    if phi:
        console.print(f"scores in (0, 1): each item's term divided by its dispersion (median "
                      f"{float(np.median(phi)):.3g}; the extended quasi-likelihood), kept in "
                      "the bank's dispersion column for the adaptive test", highlight=False)
    if res.model == "rasch":
        console.print(f"latent variance {res.latent_variance:.4f}; bank written on the N(0, 1) "
                      f"scale as the equivalent 1PL (common slope {res.bank.a[0]:.4f})")
    print_groups(res)
    if res.linking:
        As = np.array([lk["A"] for lk in res.linking])
        console.print(f"{len(res.linking)} partitions linked by {link}: A in "
                      f"[{As.min():.3f}, {As.max():.3f}]")


def _mirt_hint(chosen: dict) -> str:
    """Where a fit has priors: the options that give mirt's fit (which has none)."""
    given = [f"--prior-{p} none" for p in ("a", "c", "u") if chosen.get(f"prior_{p}")]
    return f" (mirt's fit has no priors: {' '.join(given)})" if given else ""


def model_name(model: str) -> str:
    """A binary model as mirt's itemtype spells it: Rasch, 1PL, 2PL, 3PL, 4PL."""
    return "Rasch" if model == "rasch" else model.upper()


def _subjects(rm, kept) -> str:
    """The subjects the fit used (after filtering), counted in people when rows are patterns."""
    if rm.weights is None:
        return subjects_text(len(kept))
    import pandas as pd

    freq = pd.Series(rm.weights, index=[str(s) for s in rm.subject_ids])
    return subjects_text(len(kept), freq.loc[[str(s) for s in kept]].to_numpy())


def _fit(cal, rm, quiet: bool, partition_size, max_iter: int, grouping=None):
    """The calibration's result, fitted with a progress bar over the EM iterations (of every
    partition) unless quiet; the bar ends at the iteration the fit stopped at, not at the cap.
    The defaults', identification and dimensionality warnings are left to :func:`_report`,
    which prints them once (``settings["defaults"]["warnings"]``)."""
    import warnings

    from ..irt.defaults import DefaultsWarning, IdentificationWarning
    from ..irt.dimensionality import DimensionalityWarning

    with warnings.catch_warnings():
        for category in (DefaultsWarning, IdentificationWarning, DimensionalityWarning):
            warnings.simplefilter("ignore", category)
        _fit_with_bar(cal, rm, quiet, partition_size, max_iter, grouping or {})
    return cal.result_


def _fit_with_bar(cal, rm, quiet: bool, partition_size, max_iter: int, grouping) -> None:
    if quiet:
        cal.fit(rm, **grouping)
        return
    n_parts = 1
    if partition_size:
        n_parts = max(1, rm.n_items // int(partition_size))
    with progress_bar("EM", total=max_iter * n_parts) as advance:
        reached: dict = {}  # partition -> last iteration reported

        def on_iter(info):
            part, it = info.get("partition", 0), int(info["iteration"])
            if it > reached.get(part, 0):
                advance(it - reached.get(part, 0))
                reached[part] = it

        cal.callback = on_iter
        on_se = next_stage(advance, "SE")   # --se: the standard errors on a second bar
        cal.fit(rm, se_callback=on_se, **grouping)
        if not on_se.started:
            advance(0, total=max(sum(reached.values()), 1))


def _jsonable(value):
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
