"""``atlas fit RATINGS --bank ORDINAL_BANK``: mirt's M2* / C2 with RMSEA / SRMSR / TLI / CFI
and S-X2 per item for graded / GPCM items (:mod:`atlascat.irt.polyfitstats`)."""
from __future__ import annotations


def ordinal_fit_report(frame, bank, *, weights=None, statistic: str = "auto",
                       estimated=None, items: bool = True, gpcm_slope: str = "exact",
                       bar=None, grouping=None) -> dict:
    """The JSON-ready report (library calls only; used by the command and by tests); ``bar``:
    a progress bar's ``advance`` (M2's steps, then S-X2 as a second stage); ``grouping`` (a
    bank of calibrate --groups: :func:`._common.group_priors_option`): M2* / C2 over the groups
    and S-X2 within each group under its prior (:func:`_group_report`)."""
    import numpy as np

    from ..errors import ConfigError
    from ..irt.polyfitstats import m2_df, m2_ordinal, ordinal_estimated, sx2_ordinal
    from ._common import bar_progress

    kind, df, n_mom, n_free = m2_df(bank, statistic, estimated)
    report = {"n_subjects": int(len(frame)), "n_items": int(len(bank)),
              "model": "pcm" if bank.is_pcm else bank.model,
              "statistic": kind, "estimated": ordinal_estimated(estimated)}
    if grouping is not None:
        return _group_report(report, frame, bank, weights, grouping, items, gpcm_slope)
    if df <= 0 and items and statistic.upper() == "AUTO":   # neither M2* nor C2 has df
        report["M2_note"] = no_m2("C2", df, n_mom, n_free)
    else:
        try:
            res = m2_ordinal(frame, bank, statistic=statistic, estimated=estimated,
                             weights=weights, gpcm_slope=gpcm_slope,
                             progress=None if bar is None else bar_progress(bar))
        except ConfigError as exc:   # the library's hint in the command's words
            raise ConfigError(str(exc).replace("statistic='C2'", "--m2 C2")) from None
        d = res.to_dict()
        report["statistic"] = res.statistic   # auto: C2 where M2* is not determined (warned)
        if statistic.upper() == "AUTO" and kind == "C2":
            report["note"] = (f"M2* has too few degrees of freedom on {len(bank)} items: C2 "
                              "(mirt: M2(mod, type = 'C2'))")
        elif res.statistic != kind:
            report["note"] = ("M2* is not determined by these ratings, as warned: C2 "
                              "(mirt: M2(mod, type = 'C2'))")
        report.update({k: d[k] for k in ("M2", "df", "p", "RMSEA", "RMSEA_5", "RMSEA_95",
                                          "SRMSR", "TLI", "CFI", "n", "n_free", "M2_null",
                                          "df_null", "n_dropped")})
    if items:
        w = np.ones(len(frame)) if weights is None else np.asarray(weights, dtype=float)
        rated = ~frame.isna().to_numpy()
        if sx2_subjects(report, float(w[rated.all(axis=1)].sum()),
                        float(w[rated.any(axis=1)].sum()), rating=True,
                        statistic=report["statistic"] if "M2" in report else None):
            if bar is not None:
                bar.stage("S-X2", 1)
            sx = sx2_ordinal(frame, bank, estimated=estimated, weights=weights)
            report["items"] = sx2_rows(sx)
            if bar is not None:
                bar(1)
    return report


def _group_report(report: dict, frame, bank, weights, grouping, items: bool,
                  gpcm_slope: str = "exact"):
    """A multiple-group ordinal bank's report: M2* or C2 over the groups
    (:func:`atlascat.irt.groupfit.m2_ordinal_groups`, SRMSR per group; a note in its place
    where it cannot be computed) and S-X2 within each group under its prior (a ``group`` per
    row; the subjects who rated every item); a partial credit fit's (``grouping["pcm"]``) with
    its slopes fixed and its reference group's variance estimated, as mirt's "Rasch"."""
    from ..errors import ConfigError, ResponseDataError
    from ..irt.groupfit import m2_ordinal_groups, sx2_groups

    pcm = bool(grouping.get("pcm"))
    if pcm:
        report["model"] = "pcm"

    kind = report["statistic"]      # auto: M2* where it has df, else C2
    report["group_delta"] = grouping.get("group_delta", True)   # False: mirt's M2
    try:
        if report["estimated"] != "all":
            raise ConfigError("it needs the bank's parameters estimated from these ratings "
                              "(--estimated all)")
        report.update(m2_ordinal_groups(frame, bank, grouping["groups"], grouping["priors"],
                                        statistic=kind, gpcm_slope=gpcm_slope, pcm=pcm,
                                        group_delta=grouping.get("group_delta", True)))
    except (ConfigError, ResponseDataError) as exc:
        report["M2_note"] = f"{kind} left out: {exc}; item fit (S-X2) within each group below"
    if items:
        sx = sx2_groups(frame, bank, grouping["groups"], grouping["priors"],
                        estimated=report["estimated"], weights=weights, pcm=pcm)
        report["items"] = [{**row, "group": g} for row, g in zip(sx2_rows(sx), sx["group"])]
    return report


def no_m2(kind: str, df: int, n_mom: int, n_free: int) -> str:
    """The line that stands where M2 cannot be computed (no degrees of freedom)."""
    return (f"{kind} left out: {df} degrees of freedom ({n_mom} moments, {n_free} free "
            "parameters; mirt's M2 refuses too); item fit (S-X2) below")


def sx2_subjects(report: dict, n_complete: float, n_total: float, *, partitions: bool = False,
                 rating: bool = False, statistic: str | None = "M2") -> bool:
    """Say in the report which subjects S-X2 uses when some answers are missing (``n_sx2``,
    ``sx2_note``; ``statistic``: the report's M2, M2* or C2, None where it has none); False
    where no subject answered every item (S-X2 then left out)."""
    if n_complete >= n_total:
        return True
    what, answer = ("rated", "rating") if rating else ("answered", "answer")
    report["n_sx2"] = n_complete
    if n_complete < 2:
        scope = "all items of a partition" if partitions else "every item"
        report["sx2_note"] = (f"S-X2 left out: no subject {what} {scope} (S-X2 needs complete "
                              "rows, as mirt's itemfit(mod, na.rm = TRUE))" + (
                                  f"; {statistic} above uses every {answer}, as mirt's M2"
                                  if statistic else ""))
        return False
    lead = (f"S-X2 on the {n_complete:g} of {n_total:g} subjects who {what} every item"
            if not partitions else
            f"S-X2 in each partition on the subjects who {what} all its items (at least "
            f"{n_complete:g} of {n_total:g})")
    report["sx2_note"] = (f"{lead} (mirt: itemfit(mod, na.rm = TRUE))" + (
        f"; {statistic} uses every {answer} (pairwise, as mirt's M2)" if statistic else ""))
    return True


def fit_ordinal_cmd(responses, bank, *, freq_column, normalize_ids: bool, extra_items: str,
                    estimated, statistic, gpcm_slope, items: bool,
                    binary_only: dict, grouping=(None, None, None)) -> dict:
    """Read the ratings and the ordinal bank, refuse the binary-only options, and return
    :func:`ordinal_fit_report` (the command prints it as for a binary bank); ``grouping``:
    --groups, --summary and --group-delta (:func:`._common.fit_grouping`)."""
    from ..errors import ConfigError
    from ..irt.polyfitstats import ordinal_estimated
    from ._calibrate_ordinal import read_bank_and_ratings
    from ._common import check_grouped_bank, fit_grouping

    given = [name for name, on in binary_only.items() if on]
    if given:
        raise ConfigError(f"{', '.join(given)}: binary banks only; drop "
                          f"{'it' if len(given) == 1 else 'them'} for an ordinal bank (its fit "
                          "takes --m2, --gpcm-slope, --estimated all|none, --no-items, "
                          "--groups with --summary)")
    grouping = fit_grouping(*grouping)
    est = ordinal_estimated(estimated)
    bk, frame, weights = read_bank_and_ratings(bank, responses, freq_column, normalize_ids)
    check_grouped_bank(bk, grouping, "M2 and S-X2 computed")
    iids = list(frame.columns)
    unknown = [str(i) for i in iids if str(i) not in bk]
    if unknown and extra_items == "error":
        raise ConfigError(f"{len(unknown)} response item(s) are not in the bank, e.g. "
                          f"{unknown[:5]}")
    rated = [str(i) for i in iids if str(i) in bk]
    if not rated:
        raise ConfigError(f"none of the {len(iids)} rated items is in the bank (ratings: "
                          f"{[str(i) for i in iids[:3]]}, bank: {list(bk.item_ids[:3])})")
    frame = frame.loc[:, [str(i) in bk for i in iids]]
    bk = bk.subset(rated)   # the bank items the ratings cover, as for a binary bank
    from ._common import progress_bar

    with progress_bar("M2", total=None) as advance:
        return ordinal_fit_report(frame, bk, weights=weights, statistic=statistic or "auto",
                                  estimated=est, items=items, gpcm_slope=gpcm_slope or "exact",
                                  bar=advance, grouping=grouping)


def sx2_rows(sx) -> list[dict]:
    """S-X2 table rows as JSON-ready dicts (None where mirt gives NA), binary or ordinal."""
    import numpy as np

    def num(v, kind=float):
        return None if np.isnan(v) else kind(v)

    return [{"item_id": r.item_id, "S_X2": num(r.S_X2), "df_S_X2": num(r.df_S_X2, int),
             "RMSEA_S_X2": num(r.RMSEA_S_X2), "p_S_X2": num(r.p_S_X2)}
            for r in sx.itertuples()]
