"""Partitioned calibration (the ATLAS paper, appendix C.2).

The items are split at random into K = floor(n_items / partition_size) partitions, each
calibrated jointly on all subjects (:func:`atlascat.irt.em.fit_joint`); every partition is
linked to the first by mean-sigma on the subjects' EAP thetas (A = sd_ref / sd_k,
B = mean_ref - A mean_k; a* = a / A, b* = A b + B) or by mean-mean (A = 1, location only), and
a final fixed-parameter scoring pass computes EAP thetas on the linked bank.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from .bank import ItemBank
from .em import fit_joint
from .estep import bank_estep
from .itemmodel import ItemModel, to_bank
from .linking import mean_sigma, transform_bank
from .quadrature import normal_quadrature
from .result import CalibrationResult
from .defaults import LINK, QUADPTS, THETA_RANGE

__all__ = ["fit_partitioned"]


def fit_partitioned(values, weights, item_ids, item_model: ItemModel, model: str, rng, *,
                    partition_size: int, link: str = LINK, quadpts: int = QUADPTS,
                    theta_range=THETA_RANGE, **em_settings) -> CalibrationResult:
    """Calibrate ``values`` (subjects x items) in linked random partitions of at least
    ``partition_size`` items; ``em_settings`` go to :func:`atlascat.irt.em.fit_joint`.
    The result's subject ids, dropped items, filter report and settings are left for the
    caller to fill in."""
    n_items = values.shape[1]
    size = int(partition_size)
    n_parts = max(1, n_items // size)
    parts = [np.sort(p) for p in np.array_split(rng.permutation(n_items), n_parts)]
    w = np.ones(values.shape[0]) if weights is None else np.asarray(weights, float)
    banks, linking = [], []
    traces, n_iter, converged = [], 0, True
    ref_theta = ref_seen = None
    for k, idx in enumerate(parts):
        sub = values[:, idx]
        fit = fit_joint(sub, weights, item_model, part=k, n_parts=n_parts, quadpts=quadpts,
                        theta_range=theta_range, item_ids=item_ids[idx], **em_settings)
        bank = to_bank(item_ids[idx], fit["th"], item_model, model, fit["var"])
        theta = fit["theta"] / np.sqrt(fit["var"]) if model == "1pl" else fit["theta"]
        seen = (~np.isnan(sub)).any(axis=1)
        traces.append(fit["trace"])
        n_iter = max(n_iter, fit["n_iter"])
        converged &= fit["converged"]
        if k == 0:
            ref_theta, ref_seen = theta, seen
            A, B, n_common = 1.0, 0.0, int(seen.sum())
        else:
            common = seen & ref_seen
            n_common = int(common.sum())
            if n_common < 3:
                raise ConfigError(
                    f"partition {k} shares only {n_common} subjects with partition 0; "
                    "common-person linking needs overlapping subjects (use a larger "
                    "partition_size or joint calibration)"
                )
            if link == "mean-sigma":
                A, B = mean_sigma(ref_theta[common], theta[common], weights=w[common])
            else:
                mref = np.average(ref_theta[common], weights=w[common])
                mk = np.average(theta[common], weights=w[common])
                A, B = 1.0, float(mref - mk)
            bank = transform_bank(bank, A, B)
        banks.append(bank)
        linking.append({"partition": k, "A": float(A), "B": float(B), "n_common": n_common,
                        "n_iter": int(fit["n_iter"]), "converged": bool(fit["converged"]),
                        "loglik": float(fit["loglik"])})
    order = np.concatenate(parts)
    inv = np.empty_like(order)
    inv[order] = np.arange(order.size)
    cat = lambda attr: np.concatenate([getattr(b, attr) for b in banks])[inv]  # noqa: E731
    bank = ItemBank(item_ids, cat("a"), cat("b"), cat("c"), cat("u"),
                    model="1pl" if model in ("rasch", "1pl") else model)
    # fixed-parameter scoring pass on the linked bank
    quad = normal_quadrature(int(quadpts), theta_range)
    es = bank_estep(values, weights, bank, quad)
    theta, se = es.theta, es.se
    return CalibrationResult(
        bank=bank, model=model, loglik=float(es.loglik), loglik_trace=np.concatenate(traces),
        n_iter=n_iter, converged=bool(converged), seconds=0.0, theta=theta, theta_se=se,
        subject_ids=None, latent_variance=1.0, log_posterior=None,
        partitions=[item_ids[p].tolist() for p in parts], linking=linking)

