"""Accuracy reconstruction from a short test: p-IRT and gp-IRT (tinyBenchmarks; ATLAS app. F).

A subject answered the items A (administered) of a target set T (by default every bank item).
Its full accuracy on T is estimated by

    p-IRT   Z_p  = (1/|T|) [ sum_{j in A} y_j + sum_{j in T \\ A} P_j(theta) ]
                 = lam_A * ybar_A + (1 - lam_A) * mean_{j in T \\ A} P_j(theta),   lam_A = |A| / |T|

(observed answers where we have them, the model's expectation elsewhere), and

    gp-IRT  Z_gp = lam * ybar_A + (1 - lam) * Z_p

with lam estimated on calibration data. The sample mean ybar_A is unbiased for a random A but
noisy (variance acc (1 - acc) / |A| (|T| - |A|) / (|T| - 1)); p-IRT has little variance but a bias
where the model misfits. For two estimators with uncorrelated errors the MSE-optimal weight is

    lam = MSE(Z_p) / (MSE(Z_p) + Var(ybar_A)),

the rule of tinyBenchmarks (Polo et al., 2024: lam = b^2 / (b^2 + sigma^2), with b the p-IRT
error and sigma^2 the sample mean's variance). :func:`estimate_gpirt_lambda` measures both on
calibration subjects by drawing random item sets of the target size (``method="analytic"``), or
picks the lam in [0, 1] with the smallest mean absolute error on those draws
(``method="validation"``, as the tinyBenchmarks experiments do).

Everything is vectorized over subjects and items.

References
----------
Polo, F. M. et al. (2024). tinyBenchmarks: evaluating LLMs with fewer examples. ICML.
Li, P. et al. (2025). ATLAS: adaptive testing for LLM evaluation, appendix F.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import ConfigError, ResponseDataError
from ..irt.ability import estimate_ability, response_array
from ..irt.bank import ItemBank

__all__ = ["pirt", "gpirt", "observed_accuracy", "random_administration",
           "estimate_gpirt_lambda", "LambdaEstimate", "reconstruct_accuracy", "pirt_experiment"]


def _target_mask(bank: ItemBank, items) -> np.ndarray:
    if items is None:
        return np.ones(len(bank), dtype=bool)
    sel = np.asarray(items)
    if sel.dtype == bool:
        if sel.shape != (len(bank),):
            raise ConfigError(f"target mask has shape {sel.shape}; expected ({len(bank)},)")
        mask = sel.copy()
    else:
        mask = np.zeros(len(bank), dtype=bool)
        mask[bank.index_of(sel.tolist()) if sel.dtype.kind not in "iu" else sel] = True
    if not mask.any():
        raise ConfigError("the target item set is empty")
    return mask


def _responses(responses, bank):
    return response_array(responses, bank, extra="ignore")


def observed_accuracy(responses, bank: ItemBank, *, items=None) -> np.ndarray:
    """Mean score over each subject's answered target items (NaN when none)."""
    y = _responses(responses, bank)[:, _target_mask(bank, items)]
    obs = ~np.isnan(y)
    n = obs.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, np.where(obs, y, 0.0).sum(axis=1) / n, np.nan)


def pirt(responses, bank: ItemBank, theta, *, items=None) -> np.ndarray:
    """p-IRT accuracy on the target items (default: the whole bank), one value per subject.

    ``responses``: administered answers in bank order (NaN = not administered) or a
    ResponseMatrix (aligned by item id; items not in the bank are ignored). ``theta``: one
    ability per subject (e.g. from :func:`atlascat.irt.ability.estimate_ability`).
    """
    y = _responses(responses, bank)
    theta = np.asarray(theta, dtype=float).reshape(-1)
    if theta.shape[0] != y.shape[0]:
        raise ResponseDataError(f"{theta.shape[0]} thetas for {y.shape[0]} subjects")
    mask = _target_mask(bank, items)
    sub = bank.subset(mask) if not mask.all() else bank
    y = y[:, mask]
    # infinite ML thetas: the IRF is at its asymptote long before |theta| = 50
    p = sub.probability(np.clip(np.nan_to_num(theta, nan=0.0), -50.0, 50.0))
    filled = np.where(np.isnan(y), p, y)
    return filled.mean(axis=1)


def gpirt(responses, bank: ItemBank, theta, lam: float, *, items=None) -> np.ndarray:
    """gp-IRT: ``lam * observed mean + (1 - lam) * p-IRT`` (p-IRT alone where nothing observed)."""
    if not 0.0 <= lam <= 1.0:
        raise ConfigError(f"lambda must be in [0, 1], got {lam}")
    zp = pirt(responses, bank, theta, items=items)
    ybar = observed_accuracy(responses, bank, items=items)
    return np.where(np.isnan(ybar), zp, lam * np.nan_to_num(ybar) + (1.0 - lam) * zp)


def random_administration(observed: np.ndarray, n_items: int, rng: np.random.Generator):
    """Boolean mask choosing ``n_items`` random answered items per row (all of them if fewer),
    vectorized: the n smallest of i.i.d. uniform keys among the answered cells."""
    if n_items < 1:
        raise ConfigError(f"n_items must be >= 1, got {n_items}")
    keys = np.where(observed, rng.random(observed.shape), np.inf)
    k = min(int(n_items), observed.shape[1])
    idx = np.argpartition(keys, k - 1, axis=1)[:, :k]
    mask = np.zeros(observed.shape, dtype=bool)
    np.put_along_axis(mask, idx, True, axis=1)
    return mask & observed


@dataclass
class LambdaEstimate:
    """gp-IRT weight and the figures it came from."""

    lam: float
    method: str
    n_items: int
    mse_pirt: float
    var_sample: float
    mae_by_lambda: pd.Series = field(repr=False, default=None)


def estimate_gpirt_lambda(calibration, bank: ItemBank, n_items: int, *, rng=None,
                          n_draws: int = 3, method: str = "analytic", theta_method: str = "eap",
                          items=None) -> LambdaEstimate:
    """Estimate gp-IRT's lambda on calibration subjects (module docstring).

    ``calibration``: full answers of calibration subjects (ResponseMatrix or bank-ordered array);
    ``n_items``: the test length the weight is for. Each draw gives every subject ``n_items``
    random answered target items; theta comes from those answers (``theta_method``).
    """
    if method not in ("analytic", "validation"):
        raise ConfigError(f"method must be 'analytic' or 'validation', got {method!r}")
    rng = np.random.default_rng() if rng is None else rng
    mask = _target_mask(bank, items)
    y = _responses(calibration, bank)
    y_t = np.where(mask[None, :], y, np.nan)
    obs = ~np.isnan(y_t)
    n_obs = obs.sum(axis=1)
    keep = n_obs > n_items
    if keep.sum() < 2:
        raise ResponseDataError(
            f"need calibration subjects with more than {n_items} answered target items")
    y_t, obs, n_obs = y_t[keep], obs[keep], n_obs[keep]
    # each subject's "full accuracy" is over the target items it answered; p-IRT likewise
    truth = np.where(obs, y_t, 0.0).sum(axis=1) / n_obs
    zps, ybars, truths, variances = [], [], [], []
    for _ in range(n_draws):
        adm = random_administration(obs, n_items, rng)
        y_adm = np.where(adm, y_t, np.nan)
        theta = estimate_ability(y_adm, bank, theta_method)["theta"].to_numpy()
        p = bank.probability(np.clip(np.nan_to_num(theta), -50.0, 50.0))
        zps.append(np.where(adm, y_t, np.where(obs, p, 0.0)).sum(axis=1) / n_obs)
        k = adm.sum(axis=1)
        ybars.append(np.where(adm, y_t, 0.0).sum(axis=1) / k)
        truths.append(truth)
        fpc = (n_obs - k) / np.maximum(n_obs - 1, 1)
        variances.append(truth * (1.0 - truth) / k * fpc)
    zp, ybar, tr = np.concatenate(zps), np.concatenate(ybars), np.concatenate(truths)
    mse = float(np.mean((zp - tr) ** 2))
    var = float(np.mean(np.concatenate(variances)))
    grid = np.linspace(0.0, 1.0, 101)
    mae = np.abs(grid[:, None] * ybar[None, :] + (1 - grid[:, None]) * zp[None, :]
                 - tr[None, :]).mean(axis=1)
    mae_s = pd.Series(mae, index=pd.Index(grid, name="lambda"), name="mae")
    if method == "analytic":
        lam = mse / (mse + var) if (mse + var) > 0 else 0.0
    else:
        lam = float(grid[int(np.argmin(mae))])
    return LambdaEstimate(float(lam), method, int(n_items), mse, var, mae_s)


def reconstruct_accuracy(responses, bank: ItemBank, *, theta=None, theta_method: str = "eap",
                         lam: float | None = None, items=None) -> pd.DataFrame:
    """Observed, p-IRT and (with ``lam``) gp-IRT accuracy for every subject.

    Columns: subject_id, n_administered, accuracy_observed, accuracy_pirt[, accuracy_gpirt].
    Items of a ResponseMatrix that the bank lacks are ignored (they cannot be reconstructed).
    """
    from ..responses import ResponseMatrix

    y = _responses(responses, bank)
    ids = (responses.subject_ids if isinstance(responses, ResponseMatrix)
           else np.arange(y.shape[0])).astype(str)
    if theta is None:
        theta = estimate_ability(y, bank, theta_method)["theta"].to_numpy()
    mask = _target_mask(bank, items)
    out = pd.DataFrame({"subject_id": ids,
                        "n_administered": (~np.isnan(y[:, mask])).sum(axis=1),
                        "accuracy_observed": observed_accuracy(y, bank, items=mask),
                        "accuracy_pirt": pirt(y, bank, theta, items=mask)})
    if lam is not None:
        out["accuracy_gpirt"] = gpirt(y, bank, theta, lam, items=mask)
    return out


def pirt_experiment(responses, bank: ItemBank, n_items: int = 100, *, rng=None,
                    theta_method: str = "eap", lam: float | None = None):
    """Reconstruct full accuracy from ``n_items`` random items per subject.

    The target set is the bank items present in ``responses`` (items outside the bank are
    dropped: the model says nothing about them). Returns ``(frame, summary)``: per subject the
    full accuracy on the target items, the random-sample mean and the p-IRT (and gp-IRT)
    estimates; the summary has MAE and its SE for each estimator and ``n_target_items``,
    ``n_dropped_items``.
    """
    from ..responses import ResponseMatrix

    rng = np.random.default_rng() if rng is None else rng
    if isinstance(responses, ResponseMatrix):
        in_bank = np.array([i in bank for i in responses.item_ids])
        dropped = int((~in_bank).sum())
        ids = responses.subject_ids.astype(str)
    else:
        dropped = 0
        ids = np.arange(np.asarray(responses).shape[0]).astype(str)
    y = _responses(responses, bank)
    target = ~np.isnan(y).all(axis=0)
    obs = ~np.isnan(y) & target[None, :]
    full = np.where(obs, y, 0.0).sum(axis=1) / np.maximum(obs.sum(axis=1), 1)
    adm = random_administration(obs, n_items, rng)
    y_adm = np.where(adm, y, np.nan)
    theta = estimate_ability(y_adm, bank, theta_method)["theta"].to_numpy()
    frame = pd.DataFrame({"subject_id": ids, "theta": theta, "n_administered": adm.sum(axis=1),
                          "accuracy_full": full,
                          "accuracy_sample": observed_accuracy(y_adm, bank, items=target),
                          "accuracy_pirt": pirt(y_adm, bank, theta, items=target)})
    cols = ["accuracy_sample", "accuracy_pirt"]
    if lam is not None:
        frame["accuracy_gpirt"] = gpirt(y_adm, bank, theta, lam, items=target)
        cols.append("accuracy_gpirt")
    summary = {"n_subjects": int(len(frame)), "n_items": int(n_items),
               "n_target_items": int(target.sum()), "n_dropped_items": dropped}
    for col in cols:
        err = np.abs(frame[col] - frame["accuracy_full"])
        key = col.replace("accuracy_", "")
        summary[f"mae_{key}"] = float(err.mean())
        summary[f"mae_{key}_se"] = float(err.std(ddof=1) / np.sqrt(len(err)))
    return frame, summary
