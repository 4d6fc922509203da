"""``atlas calibrate RATINGS --model graded|gpcm``: ordinal items, categories from each item's
observed integer levels (:func:`atlascat.irt.polycal.calibrate_ordinal`)."""
from __future__ import annotations

import json

from ._common import console, json_safe, next_stage, progress_bar, subjects_text, wrote_line


def calibrate_ordinal_cmd(responses, output, model: str, *, fmt: str, summary, scores,
                          freq_column, rating_range, prior_a: str, quadpts: int, max_iter: int,
                          tol: float, quiet: bool, se: bool = False, normalize_ids: bool = False,
                          binary_only: dict | None = None, drop_empty: bool = False,
                          name: str | None = None, grouping: dict | None = None) -> None:
    import pandas as pd

    from ..errors import ConfigError
    from ..irt.polycal import calibrate_ordinal, read_ratings
    from ..validation import normalize_item_id

    given = [name for name, on in (binary_only or {}).items() if on]
    if given:
        raise ConfigError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for the "
                          f"binary models; drop {'it' if len(given) == 1 else 'them'} for "
                          f"--model {model} (it takes {ordinal_options(model)})")
    values, sids, iids, weights = read_ratings(responses, freq_column=freq_column)
    if normalize_ids:
        iids = [normalize_item_id(i) for i in iids]
    frame = pd.DataFrame(values, index=sids, columns=iids)
    settings = dict(weights=weights, prior_a=None if prior_a in ("auto", "none") else prior_a,
                    value_range=rating_range, quadpts=quadpts, max_iter=max_iter, tol=tol,
                    se=se, on_empty="drop" if drop_empty else "error", **(grouping or {}))
    if quiet:
        res = calibrate_ordinal(frame, model, **settings)
    else:
        with progress_bar("EM", total=max_iter) as advance:
            reached = [0]   # the EM iteration the bar shows (an accelerated step reports two)

            def on_iter(info):
                it = int(info["iteration"])
                advance(it - reached[0])
                reached[0] = max(reached[0], it)

            on_se = next_stage(advance, "SE")   # --se: the standard errors on a second bar
            res = calibrate_ordinal(frame, model, callback=on_iter, se_callback=on_se,
                                    **settings)
            if not on_se.started:
                advance(max(res.n_iter - reached[0], 0), total=max(res.n_iter, 1))  # ends full
    _write_outputs(res, output, fmt, summary, scores, responses, name,
                   (frame, weights, (grouping or {}).get("groups")))
    _print_result(res, model, weights, settings["prior_a"], rating_range)
    console.print(wrote_line(output, summary, scores))


def ordinal_options(model: str) -> str:
    """The ``atlas calibrate`` options an ordinal fit takes besides RESPONSES and -o (pcm has
    no slopes, so no --prior-a), for the line refusing a binary model's option."""
    slope = "" if model == "pcm" else "--prior-a, "
    return (f"--rating-range, --name, {slope}--groups, --reference-group, --quadpts, "
            "--max-iter, --tol, --se, --format, --summary, --scores, --freq-column, "
            "--normalize-ids, --drop-empty, --mirt-defaults, --quiet")


def _write_outputs(res, output, fmt: str, summary, scores, responses, name=None,
                   ratings=(None, None)) -> None:
    """The bank (with ``<parameter>_se`` columns under --se; named by --name), --summary and
    --scores (``ratings``: the ratings read, their weights [, the --groups mapping])."""
    bank = res.bank_with_standard_errors(fmt)   # <parameter>_se columns under --se
    bank = bank if name is None else bank.with_benchmark(name)
    bank.write(output, format=fmt)
    info = res.to_dict()
    info.update({"responses": str(responses), "output": str(output), "format": fmt,
                 **({"benchmark": name} if name else {})})
    if summary is not None:
        summary.parent.mkdir(parents=True, exist_ok=True)
        summary.write_text(json.dumps(json_safe(info), indent=2, default=str))
    if scores is not None:
        _write_scores(res, scores, *ratings)


def _write_scores(res, path, frame, weights, groups=None) -> None:
    """--scores: the subjects' EAP scores in the columns ``atlas score`` writes on the written
    bank (``frame``, ``weights``: the ratings read; ``groups``: a --groups fit's)."""
    import numpy as np

    from ..irt.polyscore import aligned_ratings
    from ._score_table import calibration_scores, with_ratings, write_calibration_scores

    rows = frame.index.get_indexer([str(s) for s in res.subject_ids])
    frame = frame.iloc[rows]
    weights = None if weights is None else np.asarray(weights)[rows]
    aligned = aligned_ratings(frame, res.bank)[0]
    known = [c for c in frame.columns if c in res.bank]
    df = calibration_scores(res, aligned, groups)
    write_calibration_scores(with_ratings(df, frame[known].to_numpy(float), aligned, res.bank,
                                          weights), path)


def _print_result(res, model: str, weights, prior_a, rating_range) -> None:
    """The fit's line, its criteria, the prior used and a note on undeclared scales."""
    k = res.bank.n_cat
    w_kept = None if weights is None else [res.n_observations]   # rows are response patterns
    status = "converged" if res.converged else "[yellow]not converged (raise --max-iter)[/]"
    console.print(
        f"calibrated [bold]{len(res.bank)}[/] items ({model}, {int(k.min())}-{int(k.max())} "
        f"categories) on {subjects_text(len(res.subject_ids), w_kept)}: log-likelihood "
        f"{res.loglik:.3f}, "
        f"{res.n_iter} EM iterations, {status}, {res.seconds:.1f} s")
    from ._common import print_groups
    from ._criteria import print_criteria

    print_criteria(res)
    print_groups(res)
    if prior_a is not None:
        console.print(f"prior a ~ {prior_a} on every slope (MAP-EM; mirt's fit has "
                      "no prior: --prior-a none)", markup=False, highlight=False)
    if rating_range is None and res.bank.rating_scale() is None:
        ends = sorted({(float(lo), float(hi)) for lo, hi in res.bank.level_ends})
        lo, hi = min(e[0] for e in ends), max(e[1] for e in ends)
        console.print(f"note: the items' observed ratings span {len(ends)} different ranges "
                      f"(e.g. {ends[0][0]:g}-{ends[0][1]:g}, {ends[-1][0]:g}-{ends[-1][1]:g}), "
                      "so each item's scale is its own range and mean ratings read as shares "
                      f"of it; if they share one scale, declare it (--rating-range {lo:g} "
                      f"{hi:g}): outputs then read on it and a rating an item never had is "
                      "scored", markup=False, highlight=False)


def read_bank_and_ratings(bank, responses, freq_column, normalize_ids: bool):
    """An ordinal bank and the ratings scored on it: (PolyBank, subjects x items frame,
    pattern weights or None); ``normalize_ids``: R's X514 -> 514, in both."""
    import pandas as pd

    from ..irt.polybank import PolyBank
    from ..irt.polycal import read_ratings

    bk = PolyBank.read(bank)
    values, sids, iids, weights = read_ratings(responses, freq_column=freq_column)
    if normalize_ids:
        from ..validation import normalize_item_id

        iids = [normalize_item_id(i) for i in iids]
        bk = bk.with_ids([normalize_item_id(i) for i in bk.item_ids])
    return bk, pd.DataFrame(values, index=sids, columns=iids), weights


def score_ordinal_cmd(responses, bank, method: str, output, *, freq_column, prior_mean: float,
                      prior_sd: float, quadpts: int, extra_items: str,
                      quadrature: str | None = None,
                      normalize_ids: bool = False, binary_only: dict | None = None,
                      grouping: dict | None = None) -> None:
    """``atlas score RATINGS --bank ORDINAL_BANK``: theta and SE of every subject, the mean
    of its ratings (``mean_rating``, on the items' own scale) and its predicted mean rating
    over the whole bank with the 95% interval (``score``, ``score_lo``, ``score_hi``:
    :func:`~atlascat.irt.polyscore.predict_mean_rating`, what ``atlas simulate`` and a live
    run predict); ``grouping`` (a bank of calibrate --groups): each subject under its group's
    prior, a group column."""
    import numpy as np

    from ..errors import ConfigError

    given = [name for name, on in (binary_only or {}).items() if on]
    if given:
        raise ConfigError(f"{', '.join(given)}: binary banks only; drop for an ordinal bank")

    from ..irt.ability import estimate_ability
    from ..irt.defaults import SCORE_QUADRATURE
    from ._common import err_console, print_frame, se_line, warn

    quadrature = quadrature or SCORE_QUADRATURE     # None: the default

    bk, frame, weights = read_bank_and_ratings(bank, responses, freq_column, normalize_ids)
    if method in ("eap", "map"):   # ML and WLE take no prior
        from ._common import check_grouped_bank

        check_grouped_bank(bk, grouping, prior=(prior_mean, prior_sd))
    iids = list(frame.columns)
    if grouping is None:
        df = estimate_ability(frame, bk, method, prior_mean=prior_mean, prior_sd=prior_sd,
                              quadpts=quadpts, extra_items=extra_items, quadrature=quadrature)
    else:
        from ..irt.groupscore import score_groups

        df = score_groups(frame, bk, grouping["groups"], grouping["priors"], method,
                          quadpts=quadpts, extra_items=extra_items, quadrature=quadrature)
    from ..irt.polyscore import aligned_ratings
    from ._common import note_unseen_ratings
    from ._score_table import with_ratings

    aligned = aligned_ratings(frame, bk)[0]
    note_unseen_ratings(bk, aligned)
    known = [c for c in iids if c in bk]
    if known and len(known) < len(iids) and extra_items != "error":
        err_console.print(f"note: {len(iids) - len(known)} response item(s) not in the bank "
                          f"were left out (e.g. {[c for c in iids if c not in bk][:3]})",
                          markup=False)
    df = with_ratings(df, frame[known].to_numpy(float), aligned, bk, weights)
    se = df["se"].to_numpy(float)
    few = bk.few_sources_warning(aligned)
    if few:
        warn(few)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(output, index=False, float_format="%.8g")
        console.print(f"wrote {len(df)} scores ({method}) to {output}")
    else:
        n_answered = int((~np.isnan(aligned)).any(axis=0).sum())
        asked = (f"{len(bk)} ordinal bank items" if n_answered >= len(bk) else
                 f"{n_answered} of the ordinal bank's {len(bk)} items answered")
        print_frame(df, title=f"theta by {method.upper()} ({asked})")
    console.print(se_line(se, weights))
