"""Evaluation metrics of the ATLAS paper (appendix E), plus honesty of the reported uncertainty.

Notation: for test model i, theta_ref_i is its whole-bank theta (WLE on every bank item),
theta_hat_i and SE_i a method's estimate and standard error, n_i the items it used.

Ability error (paper Table 2)
    MAE = (1/n) sum_i |theta_hat_i - theta_ref_i|,   SE(MAE) = sd_i |theta_hat_i - theta_ref_i| / sqrt(n)
    (sd with ddof = 1, as R's ``sd``; this reproduces the paper's ``summary_theta_mae_sd_se.csv``).

Accuracy error (paper Table 3): the same MAE +- SE between a reconstructed accuracy and the model's
    full accuracy on the bank's items.

Information Efficiency Score, relative to Random-100 (lower is better)
    IES_m = (MAE_m * nbar_m) / (MAE_R * nbar_R),   R = Random-100 (nbar_R = 100), so IES_R = 1.

    The error-times-test-length product: how much "error x items" a method spends compared with
    drawing 100 items at random. IES < 1 means the method is more efficient than Random-100
    (fewer items for its error, or a smaller error for its items). The paper's appendix E text
    was not available offline when this was written; this is our precise definition, chosen
    before looking at any result, and the direction (lower = better) follows from it.

    We also report the length-invariant variant
    ``RIE_m = (MAE_m^2 * nbar_m) / (MAE_R^2 * nbar_R)``: as MSE ~ 1 / (n * Ibar) for n items of mean
    information Ibar (Lord, 1980, ch. 10), RIE ~ Ibar_R / Ibar_m is the inverse relative information
    per item; a random subset of any length has RIE ~ 1, so RIE < 1 means genuinely more
    informative items, not merely a shorter test. Lower is better as well.

95% interval coverage
    coverage = (1/n) sum_i 1{|theta_hat_i - theta_ref_i| <= z SE_i},  z = 1.959964
    the share of test models whose whole-bank theta lies inside theta_hat +- 1.96 SE.
    ``coverage_posterior`` uses the posterior SD as the SE (for a CAT whose stopping SE is the
    information SE 1 / sqrt(I(theta) + prior precision)); ``coverage_joint`` widens the interval by the whole-bank estimate's own SE,
    z sqrt(SE_i^2 + SE_ref_i^2): that is how the 66% (HellaSwag) to 94% (ARC) figures for the
    paper's own CAT results at SE <= 0.1 are obtained (see tests/test_metrics.py).
    ``coverage_calibrated`` uses ``se_calibrated`` = k_tau x SE, with k_tau estimated on a
    validation split of the train models (:func:`atlascat.studies.protocol.validation_se_factors`);
    it is reported next to the raw coverage, never in its place.

Exposure and overlap (paper appendix E and G.1): the exposure rate of an item is the share of test
models it was given to; the test overlap rate is the expected share of items two models share,
from :mod:`atlascat.cat.security`. A fixed form has exposure 1 on its items and overlap 1.

References
----------
Lord, F. M. (1980). Applications of Item Response Theory to Practical Testing Problems, ch. 10.
Chen, S.-Y., Ankenmann, R. D. and Spray, J. A. (2003). The relationship between item exposure and
test overlap in computerized adaptive testing. J. Educ. Meas. 40(2).
Li, P. et al. (2025). Adaptive testing for LLM evaluation: a psychometric alternative to static
benchmarks (ATLAS), appendix E.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from ..errors import ConfigError

__all__ = ["ErrorSummary", "error_summary", "interval_coverage", "information_efficiency",
           "relative_information_efficiency", "exposure_rates", "security_summary",
           "summarize_persons", "normalize_cat_results"]


@dataclass(frozen=True)
class ErrorSummary:
    """Mean absolute error with its sampling SE over subjects."""

    mae: float
    sd: float
    se: float
    n: int

    def to_dict(self) -> dict:
        return asdict(self)


def error_summary(estimate, reference) -> ErrorSummary:
    """MAE, SD of the absolute errors (ddof = 1) and SE = SD / sqrt(n) over finite pairs."""
    est = np.asarray(estimate, dtype=float)
    ref = np.asarray(reference, dtype=float)
    if est.shape != ref.shape:
        raise ConfigError(f"estimate and reference shapes differ: {est.shape} vs {ref.shape}")
    err = np.abs(est - ref)
    err = err[np.isfinite(err)]
    n = err.size
    if n == 0:
        return ErrorSummary(float("nan"), float("nan"), float("nan"), 0)
    sd = float(err.std(ddof=1)) if n > 1 else float("nan")
    return ErrorSummary(float(err.mean()), sd, sd / np.sqrt(n) if n > 1 else float("nan"), n)


def _z(level: float) -> float:
    from scipy.stats import norm  # lazy: scipy.stats costs ~1 s at import

    if not 0 < level < 1:
        raise ConfigError(f"coverage level must be in (0, 1), got {level}")
    return float(norm.ppf(0.5 + level / 2))


def covered(estimate, se, reference, *, level: float = 0.95, reference_se=None) -> np.ndarray:
    """Per-subject indicator: |estimate - reference| <= z * sqrt(se^2 [+ reference_se^2])."""
    est, s, ref = (np.asarray(v, dtype=float) for v in (estimate, se, reference))
    width = s ** 2 if reference_se is None else s ** 2 + np.asarray(reference_se, float) ** 2
    return np.abs(est - ref) <= _z(level) * np.sqrt(width)


def interval_coverage(estimate, se, reference, *, level: float = 0.95, reference_se=None) -> float:
    """Share of subjects whose reference theta lies in estimate +- z SE (finite rows only).

    With ``reference_se`` the interval is for the difference of two independent estimates:
    +- z sqrt(SE^2 + SE_ref^2).
    """
    est, s, ref = (np.asarray(v, dtype=float) for v in (estimate, se, reference))
    ok = np.isfinite(est) & np.isfinite(s) & np.isfinite(ref)
    if reference_se is not None:
        rse = np.asarray(reference_se, dtype=float)
        ok &= np.isfinite(rse)
        rse = rse[ok]
    else:
        rse = None
    if not ok.any():
        return float("nan")
    return float(covered(est[ok], s[ok], ref[ok], level=level, reference_se=rse).mean())


def information_efficiency(mae, n_items, ref_mae, ref_n_items=100.0):
    """IES = (MAE * items) / (MAE_ref * items_ref); lower is better, the reference scores 1."""
    return (np.asarray(mae, float) * np.asarray(n_items, float)) / (float(ref_mae) * float(ref_n_items))


def relative_information_efficiency(mae, n_items, ref_mae, ref_n_items=100.0):
    """RIE = (MAE^2 * items) / (MAE_ref^2 * items_ref): inverse relative information per item."""
    return ((np.asarray(mae, float) ** 2 * np.asarray(n_items, float))
            / (float(ref_mae) ** 2 * float(ref_n_items)))


# ----------------------------------------------------------------------------- security
def exposure_rates(administered) -> np.ndarray:
    """Share of examinees (rows) who were given each item (columns) of a boolean matrix."""
    adm = np.asarray(administered, dtype=bool)
    if adm.ndim != 2 or adm.shape[0] == 0:
        raise ConfigError("administered must be a (n_examinees, n_items) boolean matrix")
    return adm.mean(axis=0)


def security_summary(administered) -> dict:
    """Exposure (mean over items, max, share of items never used) and test overlap.

    The overlap rate is Chen's (2005) variable-length test overlap from the exposure rates and
    test lengths (:func:`atlascat.cat.security.overlap_from_exposure`): the expected number of
    items two random examinees share over the expected test length (1 for a fixed form).
    """
    from ..cat import security

    adm = np.asarray(administered, dtype=bool)
    rates = exposure_rates(adm)
    return {
        "exposure_mean": float(rates.mean()),
        "exposure_max": float(rates.max()),
        "exposure_unused": float(np.mean(rates == 0)),
        "overlap": float(security.overlap_from_exposure(rates, adm.sum(axis=1))),
    }


# ----------------------------------------------------------------------------- per-method summary
def summarize_persons(persons: pd.DataFrame, *, level: float = 0.95,
                      reference_method: str | None = "Random-100",
                      reference_items: float | None = None) -> pd.DataFrame:
    """One row of metrics per method from a long per-person result table.

    ``persons`` columns: ``method, subject_id, theta, se, n_items, theta_ref`` and optionally
    ``replicate, se_ref, posterior_sd, accuracy_full, accuracy_pirt, accuracy_direct,
    accuracy_gpirt, accuracy_aipw (the peers' estimates on random forms), seconds, n_items_full`` (``coverage_posterior`` uses ``posterior_sd`` in place of ``se``;
    ``whole_bank``, from ``n_items_full``, is the share of models given every bank item they
    answered, whose error against the whole-bank reference is small by construction). Replicated
    methods (several ``replicate`` values, e.g. Random-k over seeds) are averaged per subject first
    (absolute error, coverage indicator, items, time), then over subjects; so the SE is over
    subjects of the replicate-averaged errors.

    IES and RIE are relative to ``reference_method`` (its own MAE and mean items) when present.
    """
    need = {"method", "subject_id", "theta", "se", "n_items", "theta_ref"}
    missing = need - set(persons.columns)
    if missing:
        raise ConfigError(f"persons table lacks column(s) {sorted(missing)}")
    df = persons.copy()
    df["abs_err"] = np.abs(df["theta"] - df["theta_ref"])
    df["covered"] = covered(df["theta"], df["se"], df["theta_ref"], level=level).astype(float)
    df.loc[~np.isfinite(df["abs_err"] + df["se"]), "covered"] = np.nan
    has_ref_se = "se_ref" in df.columns
    has_post = "posterior_sd" in df.columns
    if has_post:
        df["covered_posterior"] = covered(df["theta"], df["posterior_sd"], df["theta_ref"],
                                          level=level).astype(float)
        df.loc[~np.isfinite(df["abs_err"] + df["posterior_sd"]), "covered_posterior"] = np.nan
    has_cal = "se_calibrated" in df.columns
    if has_cal:
        df["covered_calibrated"] = covered(df["theta"], df["se_calibrated"], df["theta_ref"],
                                           level=level).astype(float)
        df.loc[~np.isfinite(df["abs_err"] + df["se_calibrated"]), "covered_calibrated"] = np.nan
    if has_ref_se:
        df["covered_joint"] = covered(df["theta"], df["se"], df["theta_ref"], level=level,
                                      reference_se=df["se_ref"]).astype(float)
    has_full = "n_items_full" in df.columns   # every bank item a model answered
    if has_full:
        df["whole_bank"] = (df["n_items"] >= df["n_items_full"]).astype(float)
    acc_cols = [c for c in ("accuracy_pirt", "accuracy_direct", "accuracy_gpirt",
                            "accuracy_aipw") if c in df.columns]
    if "accuracy_full" in df.columns:
        for c in acc_cols:
            df[c + "_err"] = np.abs(df[c] - df["accuracy_full"])
    agg_cols = ["abs_err", "covered", "n_items"] + (["covered_joint"] if has_ref_se else [])
    agg_cols += ["covered_posterior"] if has_post else []
    agg_cols += ["covered_calibrated"] if has_cal else []
    agg_cols += [c + "_err" for c in acc_cols if "accuracy_full" in df.columns]
    agg_cols += [c for c in ("seconds",) if c in df.columns]
    agg_cols += ["whole_bank"] if has_full else []
    n_rep = (df.groupby("method", sort=False)["replicate"].nunique()
             if "replicate" in df.columns else None)
    per = df.groupby(["method", "subject_id"], sort=False)[agg_cols].mean().reset_index()

    rows = []
    for method, g in per.groupby("method", sort=False):
        e = error_summary(g["abs_err"], np.zeros(len(g)))
        row = {"method": method, "n_models": int(len(g)),
               "replicates": int(n_rep[method]) if n_rep is not None else 1,
               "items_mean": float(g["n_items"].mean()),
               "items_sd": float(g["n_items"].std(ddof=1)) if len(g) > 1 else 0.0,
               "theta_mae": e.mae, "theta_mae_sd": e.sd, "theta_mae_se": e.se,
               "coverage": float(g["covered"].mean())}
        if has_post:
            row["coverage_posterior"] = float(g["covered_posterior"].mean())
        if has_ref_se:
            row["coverage_joint"] = float(g["covered_joint"].mean())
        if has_cal:  # NaN for methods without a calibrated SE (the fixed forms)
            row["coverage_calibrated"] = float(g["covered_calibrated"].mean())
        for c in acc_cols:
            if c + "_err" in g:
                a = error_summary(g[c + "_err"], np.zeros(len(g)))
                row[c.replace("accuracy_", "acc_") + "_mae"] = a.mae
                row[c.replace("accuracy_", "acc_") + "_mae_se"] = a.se
        if "seconds" in g:
            row["seconds_mean"] = float(g["seconds"].mean())
        if has_full:   # share of models given every bank item: no test, the reference itself
            row["whole_bank"] = float(g["whole_bank"].mean())
        rows.append(row)
    out = pd.DataFrame(rows)
    if reference_method is not None and reference_method in set(out["method"]):
        ref = out.loc[out["method"] == reference_method].iloc[0]
        ref_items = ref["items_mean"] if reference_items is None else reference_items
        out["ies"] = information_efficiency(out["theta_mae"], out["items_mean"], ref["theta_mae"],
                                            ref_items)
        out["rie"] = relative_information_efficiency(out["theta_mae"], out["items_mean"],
                                                     ref["theta_mae"], ref_items)
    else:
        out["ies"] = np.nan
        out["rie"] = np.nan
    return out


def normalize_cat_results(df: pd.DataFrame) -> pd.DataFrame:
    """The paper's CAT result files use two headers (``Model_Name, Theta_ATLAS, SE, Num_Items,
    Time_Taken_Sec`` and ``model, theta_atlas, se, num_items, time_sec``): map both to
    ``subject_id, theta, se, n_items, seconds``."""
    lower = {c: c.lower() for c in df.columns}
    out = df.rename(columns=lower).rename(columns={
        "model_name": "subject_id", "model": "subject_id", "theta_atlas": "theta",
        "num_items": "n_items", "time_taken_sec": "seconds", "time_sec": "seconds"})
    need = {"subject_id", "theta", "se"}
    if not need <= set(out.columns):
        raise ConfigError(f"CAT result table lacks {sorted(need - set(out.columns))}; columns "
                          f"are {list(df.columns)}")
    return out
