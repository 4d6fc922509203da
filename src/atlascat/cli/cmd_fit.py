"""``atlas fit RESPONSES --bank BANK``: M2 / RMSEA / SRMSR / CFI / TLI, item fit S-X2, and
optionally person fit (lz*, outfit, infit) and Q3; partition-wise M2 for large banks. An
ordinal (graded / gpcm) bank: mirt's M2* / C2 and S-X2 on the ratings (:mod:`atlascat.cli._fit_ordinal`)."""
from __future__ import annotations

import json
from pathlib import Path

import typer

from ..validation import json_safe

from ._common import (GROUPS_HELP, RESPONSES_HELP, SUMMARY_HELP, bank_option_help, check_seed,
                      console, err_console, output_file, print_frame)

_GROUPS = typer.Option(None, "--groups", metavar="FILE", help=GROUPS_HELP + " M2 over the "
                       "groups and S-X2 within each under its prior (mirt's M2 and itemfit on "
                       "multipleGroup).")
_SUMMARY = typer.Option(None, "--summary", metavar="JSON", help=SUMMARY_HELP)
_GROUP_DELTA = typer.Option(None, "--group-delta", help="With --groups: full (the groups' means "
                            "and variances among M2's parameters, in Delta) or mirt to "
                            "reproduce mirt 1.45.1's M2 on a multipleGroup fit (leaves them "
                            "out of Delta; df the same) [default: full].")
_M2 = typer.Option(None, "--m2", help="Ordinal banks: M2* (mirt's default: item-score "
                   "moments), C2 (category proportions and item-score products), or auto (M2*; "
                   "C2 where M2* has no df or the moments leave parameters undetermined) "
                   "[default: auto].")
_GPCM_SLOPE = typer.Option(None, "--gpcm-slope", help="Ordinal banks: exact, or mirt to "
                           "reproduce mirt 1.45.1's M2 of GPCM items (its dP slope "
                           "derivative; a pcm bank's: the latent variance left out of Delta) "
                           "[default: exact].")


def _check_choices(extra_items, m2_type, gpcm_slope, group_delta, groups) -> None:
    """--extra-items, --m2, --gpcm-slope and --group-delta (with --groups only) checked: a
    one-line error for a value not among their choices."""
    from ..errors import ConfigError

    if extra_items not in ("ignore", "error"):
        raise ConfigError(f"--extra-items must be ignore or error, got {extra_items!r}")
    if m2_type is not None and m2_type.upper() not in ("M2*", "C2", "AUTO"):
        raise ConfigError(f"--m2 must be M2*, C2 or auto, got {m2_type!r}")
    if gpcm_slope is not None and gpcm_slope.lower() not in ("exact", "mirt"):
        raise ConfigError(f"--gpcm-slope must be exact or mirt, got {gpcm_slope!r}")
    if group_delta is not None and group_delta.lower() not in ("full", "mirt"):
        raise ConfigError(f"--group-delta must be full or mirt, got {group_delta!r}")
    if group_delta is not None and groups is None:
        raise ConfigError("--group-delta sets M2 over the groups of a multiple-group bank: "
                          "give --groups and --summary")


def fit_report(rm, bank, *, estimated=None, partition_size: int | None = None, seed: int = 0,
               items: bool = True, person: bool = False, q3: bool = False, bar=None,
               grouping=None) -> dict:
    """The JSON-ready fit report (library calls only; used by the command and by tests);
    ``bar``: a progress bar's ``advance`` (M2's steps, then S-X2 as a second stage);
    ``grouping`` (a multiple-group bank: :func:`._common.group_priors_option`): S-X2 per group,
    no M2."""
    import numpy as np

    from ..irt import fit

    est = bank.model if estimated is None else estimated
    report: dict = {"n_subjects": int(rm.n_subjects), "n_items": int(len(bank)), "estimated": est}
    if grouping is not None:
        return _group_report(report, rm, bank, estimated, grouping, items, person)
    n = len(bank)
    if partition_size is None and n > fit.MAX_M2_ITEMS:
        partition_size = 100
        err_console.print(f"note: {n} items is too many for one M2; using partitions of ~100 items "
                          "(set --partition-size to choose)")
    if partition_size is not None:
        rng = np.random.default_rng(seed)
        parts = fit.partition_items(n, partition_size, rng, max_size=fit.MAX_M2_ITEMS)
        from ._common import bar_progress

        table, summary = fit.m2_partitioned(rm, bank, partitions=parts, estimated=est,
                                            progress=None if bar is None else bar_progress(bar))
        report.update({k: summary[k] for k in ("M2", "df", "p", "RMSEA", "RMSEA_5", "RMSEA_95",
                                               "SRMSR", "TLI", "CFI")})
        report["n_partitions"] = summary["n_partitions"]
        report["partitions"] = table.to_dict(orient="records")
        report["note"] = "M2 and the indices are averages over item partitions"
    else:
        parts = [np.arange(n)]
        from ._common import bar_progress
        from ._fit_ordinal import no_m2

        df, n_mom, n_free = fit.m2_df(n, est)
        if df <= 0 and items:   # mirt's M2 refuses too; its itemfit still runs
            report["M2_note"] = no_m2("M2", df, n_mom, n_free)
        else:
            res = fit.m2(rm, bank, estimated=est,
                         progress=None if bar is None else bar_progress(bar))
            d = res.to_dict()
            report.update({k: d[k] for k in ("M2", "df", "p", "RMSEA", "RMSEA_5", "RMSEA_95",
                                             "SRMSR", "TLI", "CFI", "n", "n_free", "M2_null",
                                             "df_null", "n_dropped")})
    if items:
        _binary_item_fit(report, rm, bank, parts, est, bar)
    if person:
        from ..irt.meansquare import person_fit_summary

        report["person_fit"] = person_fit_summary(fit.person_fit(rm, bank, method="wle"),
                                                  weights=rm.weights)
    if q3:
        _, summary = fit.q3(rm, bank)
        report["q3"] = summary
    return report


def _group_report(report: dict, rm, bank, estimated, grouping, items: bool, person: bool):
    """A multiple-group bank's report: M2 over the groups (:func:`atlascat.irt.groupfit.
    m2_groups`, SRMSR per group; a note in its place where it cannot be computed), S-X2 within
    each group under its prior (:func:`atlascat.irt.groupfit.sx2_groups`, a ``group`` per row)
    and person fit (WLE: no prior)."""
    from ..errors import ConfigError, ResponseDataError
    from ..irt import fit
    from ..irt.groupfit import m2_groups, sx2_groups
    from ._fit_ordinal import sx2_rows

    report["group_delta"] = grouping.get("group_delta", True)   # False: mirt's M2
    try:
        report.update(m2_groups(rm, bank, grouping["groups"], grouping["priors"],
                                estimated=estimated,
                                group_delta=grouping.get("group_delta", True)))
    except (ConfigError, ResponseDataError) as exc:
        report["M2_note"] = f"M2 left out: {exc}; item fit (S-X2) within each group below"
    if items:
        sx = sx2_groups(rm, bank, grouping["groups"], grouping["priors"], estimated=estimated)
        report["items"] = [{**row, "group": g} for row, g in zip(sx2_rows(sx), sx["group"])]
    if person:
        from ..irt.meansquare import person_fit_summary

        report["person_fit"] = person_fit_summary(fit.person_fit(rm, bank, method="wle"),
                                                  weights=rm.weights)
    return report


def _binary_item_fit(report: dict, rm, bank, parts, est, bar=None) -> None:
    """S-X2 within each partition (its own summed score) on the subjects who answered all of
    its items; with missing answers the report says how many (``sx2_note``, ``n_sx2``)."""
    import numpy as np
    import pandas as pd

    from ..irt import fit
    from ._fit_ordinal import sx2_rows, sx2_subjects

    y = rm.aligned_values(bank.item_ids)
    w = np.ones(y.shape[0]) if rm.weights is None else np.asarray(rm.weights, dtype=float)
    complete = [float(w[~np.isnan(y[:, idx]).any(axis=1)].sum()) for idx in parts]
    if not sx2_subjects(report, min(complete), float(w[~np.isnan(y).all(axis=1)].sum()),
                        partitions=len(parts) > 1):
        return
    if bar is not None:
        bar.stage("S-X2", len(parts))
    rows = []
    for idx in parts:
        rows.append(fit.sx2(y[:, idx], bank.subset(idx), estimated=est, weights=w))
        if bar is not None:
            bar(1)
    report["items"] = sx2_rows(pd.concat(rows, ignore_index=True))


def register(app: typer.Typer) -> None:
    @app.command("fit")
    def fit_cmd(
        responses: str = typer.Argument(..., metavar="RESPONSES",
                                        help=RESPONSES_HELP + " 0/1 scores (ratings for an ordinal "
                                             "bank); a pattern table with "
                                             "--freq-column."),
        bank: str = typer.Option(..., "--bank", "-b", help=bank_option_help()),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
        output: Path = typer.Option(None, "--output", "-o", help="Also write the JSON report here."),
        freq_column: str = typer.Option(None, "--freq-column", help="Pattern frequency column."),
        normalize_ids: bool = typer.Option(False, "--normalize-ids", help="X514 -> 514 item ids."),
        estimated: str = typer.Option(None, "--estimated",
                                      help="Parameters estimated from these data: none, rasch, 1pl, "
                                           "2pl, 3pl or 4pl; none for a bank calibrated on other "
                                           "data [default: the bank's model]. An ordinal bank: "
                                           "all or none [default: all]."),
        partition_size: int = typer.Option(None, "--partition-size",
                                           help="M2 per item partition of about this size "
                                                "[default: 100 above 150 items, else none]."),
        seed: int = typer.Option(0, "--seed", help="Seed of the random item partition."),
        no_items: bool = typer.Option(False, "--no-items", help="Skip the S-X2 item fit."),
        person: bool = typer.Option(False, "--person-fit", help="Add person fit (lz*, mirt's outfit "
                                                  "and infit)."),
        q3: bool = typer.Option(False, "--q3", help="Add Q3 residual correlations."),
        extra_items: str = typer.Option("ignore", "--extra-items",
                                        help="ignore or error: response items not in the bank."),
        m2_type: str = _M2,
        gpcm_slope: str = _GPCM_SLOPE,
        groups: Path = _GROUPS,
        summary: Path = _SUMMARY,
        group_delta: str = _GROUP_DELTA,
    ):
        """Model fit: M2, df, p, RMSEA (90% CI), SRMSR, TLI, CFI, and S-X2 per item.

        With missing answers M2 uses every answer (pairwise, as mirt's M2) and S-X2 the
        subjects who answered every item (mirt's itemfit(mod, na.rm = TRUE)). Banks over 150
        items are split into partitions of about --partition-size items (averages reported).
        An ordinal (graded / gpcm) bank: RESPONSES are ratings on the items' own scales, and
        the statistics are mirt's M2(mod) (M2* or C2, --m2) and itemfit(mod) S-X2.
        """
        from ..irt.polybank import is_poly_bank_file

        _check_choices(extra_items, m2_type, gpcm_slope, group_delta, groups)
        check_seed(seed)
        grouping = (groups, summary, group_delta)
        output_file(output, inputs={"RESPONSES": responses, "--bank": bank, "--groups": groups,
                                    "--summary": summary})
        if is_poly_bank_file(bank):   # graded / gpcm items: ratings on their own scales
            from ._fit_ordinal import fit_ordinal_cmd

            report = fit_ordinal_cmd(
                responses, bank, freq_column=freq_column, normalize_ids=normalize_ids,
                extra_items=extra_items, estimated=estimated,
                statistic=None if m2_type is None else m2_type.upper(),
                gpcm_slope=None if gpcm_slope is None else gpcm_slope.lower(),
                items=not no_items,
                binary_only={"--partition-size": partition_size is not None,
                             "--person-fit": person, "--q3": q3}, grouping=grouping)
        else:
            report = _binary_fit(responses, bank, freq_column=freq_column,
                                 normalize_ids=normalize_ids, extra_items=extra_items,
                                 estimated=estimated, partition_size=partition_size, seed=seed,
                                 items=not no_items, person=person, q3=q3,
                                 ordinal_only=(("--m2", m2_type), ("--gpcm-slope", gpcm_slope)),
                                 grouping=grouping)
        _show(report, output, as_json)


def _show(report: dict, output, as_json: bool) -> None:
    """The report written to --output (as JSON) and printed (as JSON with --json)."""
    text = json.dumps(json_safe(report), indent=2)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text)
    if as_json:
        console.print_json(text)
        return
    _print_report(report)
    if output is not None:
        console.print(f"wrote {output}")


def _binary_fit(responses, bank, *, freq_column, normalize_ids, extra_items, estimated,
                partition_size, seed, items, person, q3, ordinal_only,
                grouping=(None, None, None)) -> dict:
    """The report of a binary bank (its options checked; the ordinal-only ones refused);
    ``grouping``: --groups, --summary and --group-delta (:func:`._common.fit_grouping`)."""
    from ..catalogue import BankRef
    from ..errors import ConfigError
    from ..bankdir.predict import read_answers
    from ._common import align_items, binary_bank_only, check_grouped_bank, fit_grouping

    grouping = fit_grouping(*grouping)
    clash = [o for o, on in (("--partition-size", partition_size is not None), ("--q3", q3))
             if on and grouping is not None]
    if clash:
        raise ConfigError(f"--groups: M2, S-X2 per group and person fit only; drop {clash[0]}")

    if estimated is not None and estimated.lower() not in ("none", "rasch", "1pl",
                                                           "2pl", "3pl", "4pl"):
        raise ConfigError(f"--estimated must be none, rasch, 1pl, 2pl, 3pl or 4pl, "
                          f"got {estimated!r}")
    ref = BankRef.from_option(bank, normalize_ids=normalize_ids)
    bk = ref.load()
    given = [o for o, v in ordinal_only if v]
    if given:
        raise ConfigError(f"{', '.join(given)}: ordinal (graded / gpcm) banks only; "
                          f"drop {'it' if len(given) == 1 else 'them'} for {bank!r}")
    binary_bank_only(bk, bank, "atlas fit", "tests right/wrong items (M2, S-X2)",
                     "compare its models by the AIC and BIC atlas calibrate prints")
    check_grouped_bank(bk, grouping, "M2 and S-X2 computed")
    rm = read_answers(responses, ref, freq_column=freq_column, normalize_ids=normalize_ids)
    rm, bk = align_items(rm, bk, extra_items, restrict_bank=True)
    from ._common import progress_bar

    with progress_bar("M2", total=None) as advance:
        return fit_report(rm, bk, estimated=None if estimated is None else estimated.lower(),
                          partition_size=partition_size, seed=seed, items=items, person=person,
                          q3=q3, bar=advance, grouping=grouping)


def _print_report(report: dict) -> None:
    """The M2 line, RMSEA and the rest, the worst items' S-X2 and the optional parts."""
    import numpy as np

    what = {"all": "all item parameters estimated",
            "none": "no parameter estimated: a bank from other data"}.get(
        report["estimated"], f"{report['estimated']} parameters estimated")
    if "M2" not in report:
        console.print(report["M2_note"], markup=False, highlight=False)
    else:
        console.print(f"[bold]{report.get('statistic', 'M2')}[/] = {report['M2']:.3f} on "
                      f"{report['df']:.0f} df, p = {report['p']:.4g}   ({what})")
        num = {k: (f"{report[k]:.4f}" if np.isfinite(report[k]) else "undefined")
               for k in ("RMSEA", "RMSEA_5", "RMSEA_95", "TLI", "CFI")}
        srmsr = report["SRMSR"]    # a multiple-group bank's: per group
        num["SRMSR"] = ", ".join(f"{g} {v:.4f}" for g, v in srmsr.items()) \
            if isinstance(srmsr, dict) else f"{srmsr:.4f}" if np.isfinite(srmsr) else "undefined"
        console.print(f"RMSEA = {num['RMSEA']} [{num['RMSEA_5']}, {num['RMSEA_95']}]   "
                      f"SRMSR = {num['SRMSR']}   TLI = {num['TLI']}   CFI = {num['CFI']}")
    if "statistic" in report and "note" in report:
        console.print(f"({report['note']})")
    if "n_partitions" in report:
        console.print(f"(averages over {report['n_partitions']} item partitions)")
    if "sx2_note" in report:
        console.print(report["sx2_note"], markup=False, highlight=False)
    if "items" in report:
        import pandas as pd

        items = pd.DataFrame(report["items"]).sort_values("p_S_X2").head(20)
        # no degrees of freedom left after collapsing: no statistic, shown as "-" (not nan)
        print_frame(items.astype(object).where(items.notna(), None),
                    title="S-X2 item fit (worst 20)")
    if "person_fit" in report:
        pf = report["person_fit"]
        if pf["mean"] is not None:
            console.print(f"person fit lz*: mean {pf['mean']:.3f}, sd {pf['sd']:.3f}, "
                          f"{pf['share_below_-1.645']:.1%} below -1.645")
        for name in ("outfit", "infit"):   # mirt's personfit() mean squares
            mean, share = pf.get(f"{name}_mean"), pf.get(f"{name}_share_z_above_1.96")
            if mean is not None and share is not None:
                console.print(f"person fit {name}: mean {mean:.3f}, {share:.1%} with "
                              f"z_{name} above 1.96")
    if "q3" in report and report["q3"].get("n_pairs"):
        q = report["q3"]
        console.print(f"Q3: mean {q['mean']:.3f}, max |Q3| {q['max_abs']:.3f}, "
                      f"{q['n_above']} of {q['n_pairs']} pairs above {q['threshold']}")
