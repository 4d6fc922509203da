"""``atlas simulate RATINGS --bank ORDINAL_BANK``: the adaptive test on graded / gpcm items
(:func:`atlascat.cat.ordinal.simulate_ordinal_cat`), replayed or drawn from the model."""
from __future__ import annotations

import json

from ._common import (console, escape, json_safe, predicted_summary, print_frame, progress_bar,
                      tested_under_one_prior, warn)
from ._options import cli_names


def simulate_ordinal_cmd(o, bank: str, out, config, read_thetas) -> None:
    import pandas as pd

    from ..cat.answers import simulated_models
    from ..cat.generators import subject_generator
    from ..cat.ordinal import simulate_ordinal_cat
    from ..irt.polybank import PolyBank
    from ..irt.polycal import read_ratings

    _check_options(o)
    pb = PolyBank.read(bank)
    kwargs = {}
    if o.responses:
        values, sids, iids, _ = read_ratings(o.responses[0])
        kwargs["responses"] = pd.DataFrame(values, index=sids, columns=iids)
        from ..irt.polyscore import aligned_ratings
        from ._common import note_unseen_ratings

        note_unseen_ratings(pb, aligned_ratings(kwargs["responses"], pb)[0])
        rng = [subject_generator(o.seed, s) for s in sids]  # each model's own, as live
    else:
        ids, values = read_thetas(o.thetas)
        rng, seeds = simulated_models(o.seed, ids)   # each model as simulate:THETA live
        kwargs.update(thetas=values, subject_ids=ids, answer_seeds=seeds)
    tested_under_one_prior(pb, config)   # a multiple-group fit's bank: one line
    with progress_bar("simulating", 1) as advance:
        res = cli_names(lambda: simulate_ordinal_cat(pb, config, rng=rng, **kwargs))
        advance(1)
    if o.responses and o.thetas is not None:
        ids, values = read_thetas(o.thetas)
        ref = pd.Series(values, index=ids)
        res.persons["true_theta"] = ref[~ref.index.duplicated()].reindex(
            res.persons.subject_id).to_numpy(float)
    predicted, predicted_row = _predicted_mean_rating(pb, res, bank, bool(o.responses))
    out.mkdir(parents=True, exist_ok=True)
    res.persons.to_csv(out / "person_scores.csv", index=False)
    if o.selected:
        res.administered.to_csv(out / "selected_items.csv", index=False)
    if o.selected_folder:
        _write_selected_folder(res, out / "selected_items")
    res.exposure.rename_axis("item_id").reset_index().to_csv(out / "item_exposure.csv",
                                                             index=False)
    summary = _summary(o, bank, pb, res, config, predicted)
    few = (summary.get("warnings") or [None])[0]
    (out / "summary.json").write_text(json.dumps(json_safe(summary), indent=2))
    rows = [("examinees", summary["n_examinees"]),
            ("items mean", f"{summary['items_mean']:.1f}"),
            ("SE mean", f"{summary['se_mean']:.3f}"),
            ("max exposure", f"{summary['exposure_max']:.3f}"),   # as a binary bank's summary
            predicted_row]
    if "rmse" in summary:
        rows.append(("RMSE vs true theta", f"{summary['rmse']:.3f}"))
    print_frame(pd.DataFrame(rows, columns=["figure", "value"]),
                title=f"atlas simulate ({summary['benchmark']}: {pb.model} bank, "
                      f"{len(pb)} items)")
    if few:
        warn(few)
    console.print(f"wrote {escape(str(out))}/ (person_scores.csv, "
                  f"{'selected_items.csv, ' if o.selected else ''}"
                  f"{'selected_items/, ' if o.selected_folder else ''}item_exposure.csv, "
                  "summary.json)")


def _summary(o, bank: str, pb, res, config, predicted: dict) -> dict:
    """summary.json of an ordinal bank's simulated tests: the figures, the settings, the
    predicted mean rating's and, with true thetas, the RMSE and correlation."""
    import numpy as np

    p = res.persons
    summary = {"bank": str(bank), "model": pb.model, "n_examinees": int(len(p)),
               "items_mean": float(p.n_items.mean()), "se_mean": float(p.se.mean()),
               "stop_reasons": {str(k): int(v) for k, v in p.stop_reason.value_counts().items()},
               "exposure_max": float(res.exposure.max()),
               "settings": {"min_items": config.stopping.min_items,
                            "max_items": config.stopping.max_items,
                            "se_stop": config.stopping.se_stop,
                            "randomesque": config.selection.randomesque,
                            "estimator": config.estimation.method,
                            "se_method": config.estimation.se_method,
                            "exposure": config.exposure.method,
                            "r_max": (config.exposure.r_max
                                      if config.exposure.method == "eligibility" else None),
                            "seed": o.seed},
               **predicted}
    if "true_theta" in p:
        ok = np.isfinite(p.true_theta)
        summary["rmse"] = float(np.sqrt(np.mean((p.theta[ok] - p.true_theta[ok]) ** 2)))
        summary["correlation"] = float(np.corrcoef(p.theta[ok], p.true_theta[ok])[0, 1])
    return summary


def _predicted_mean_rating(pb, res, bank: str, replayed: bool) -> tuple[dict, tuple[str, str]]:
    """Each examinee's predicted mean rating over the whole bank with its 95% interval from
    the ratings it gave (``score``, ``score_lo``, ``score_hi`` added to ``res.persons``: what a
    live run of the model predicts, :func:`~atlascat.irt.polyscore.predict_mean_rating`), and
    the summary's figures and row (:func:`~atlascat.cli._common.predicted_summary`) named
    after the bank file, with the bank's few-sources warning where ``replayed`` ratings (not
    answers drawn from the bank itself) are predicted."""
    import numpy as np

    from ..catalogue import BankRef
    from ..irt.polyscore import predict_mean_rating

    persons, given = res.persons, res.administered
    ratings = np.full((len(persons), len(pb)), np.nan)
    row = {s: i for i, s in enumerate(persons["subject_id"].astype(str))}
    ratings[given["subject_id"].astype(str).map(row).to_numpy(int),
            pb.index_of(given["item_id"].astype(str).tolist())] = given["score"].to_numpy(float)
    score, lo, hi = predict_mean_rating(ratings, pb)
    persons["score"], persons["score_lo"], persons["score_hi"] = score, lo, hi
    scale = pb.rating_scale()
    words = {"benchmark": BankRef.from_option(bank).title, "metric": pb.rating_metric(),
             "ratings": True,
             **({"scale": list(scale)} if scale else {})}
    figures, row = predicted_summary(words, persons)
    # the items' estimation error left out (answers drawn from the bank itself have none)
    few = pb.few_sources_warning(ratings) if replayed else None
    return ({**figures, "warnings": [few]} if few else figures), row


def _check_options(o) -> None:
    """Refuse what the ordinal adaptive test does not do (one line each)."""
    from ..errors import ConfigError

    if o.batch_size is not None and o.batch_size > 1:
        raise ConfigError(f"an ordinal bank's adaptive test asks one item a round; drop "
                          f"--batch-size {o.batch_size}")
    if o.bound_margin is not None:     # (--no-bound-stop, which turns it off, is harmless)
        raise ConfigError("--bound-margin sets a score link's floor / top stop; an ordinal bank "
                          "has no score link: drop it")


def _write_selected_folder(res, folder) -> None:
    """selected_items/<subject>.csv: each examinee's administered items (catR's layout)."""
    from ._common import unique_filenames

    folder.mkdir(exist_ok=True)
    persons, given = res.persons, res.administered
    groups = dict(tuple(given.groupby("subject_id", sort=False)))
    empty = given.iloc[:0]
    for sid, stem in zip(persons["subject_id"], unique_filenames(persons["subject_id"])):
        groups.get(sid, empty).drop(columns="subject_id").to_csv(folder / f"{stem}.csv",
                                                                 index=False)
