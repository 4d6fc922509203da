"""Standard errors of a multiple-group calibration (:mod:`atlascat.irt.groups`), as mirt's
``multipleGroup(..., SE = TRUE)`` (``SE.type = "Oakes"``, mirt 1.45.1).

The observed information is Oakes' (:func:`atlascat.irt.information.observed_information`)
with each subject's posterior under its own group's prior and the latent distributions'
parameters as extra parameters, in mirt's parameterization: each non-reference group's mean
and variance (mirt's ``MEAN_1`` and ``COV_11``), then the reference group's variance of a
Rasch fit. Their complete-data scores are sum_g sum_q N_gq d log pi_gq / d phi, pi_gq the
group's normalized grid weights, as mirt's (its standard errors of the means and variances
are within 1e-4 of these on tests/data/mirt_groups). The item parameters'
standard errors are those of :mod:`atlascat.irt.se` (:class:`GroupStandardErrors` is a
:class:`atlascat.irt.se.StandardErrors`); the groups' are in :meth:`GroupStandardErrors.
group_frame`, on the fitted scale (mirt's) or on the bank's (a Rasch fit's divided by the
reference group's SD, by the delta method; SDs' by the delta method too).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ConfigError
from .information import BINARY_NAMES, binary_dlog_prob, binary_log_prob, category_indices, \
    observed_information
from .se import StandardErrors, binary_parts, ordinal_parts

__all__ = ["GroupStandardErrors", "group_standard_errors", "ordinal_group_standard_errors"]


def _latent_vector(means, variances, rasch: bool) -> np.ndarray:
    """mirt's order of the latent parameters: each non-reference group's mean and variance,
    then (Rasch) the reference group's variance."""
    return np.concatenate([np.column_stack([means[1:], variances[1:]]).reshape(-1),
                           [variances[0]] if rasch else []])


def _split_latent(p, n_groups: int, rasch: bool):
    """(means, variances) of every group from :func:`_latent_vector`'s ``p`` (the reference's
    mean 0, its variance 1 unless Rasch)."""
    G = n_groups
    mu = np.concatenate([[0.0], p[0:2 * (G - 1):2]])
    var = np.concatenate([[p[-1] if rasch else 1.0], p[1:2 * (G - 1):2]])
    return mu, var


@dataclass
class GroupStandardErrors(StandardErrors):
    """:class:`atlascat.irt.se.StandardErrors` of the items, with the groups' latent means and
    variances: ``group_labels`` (the reference first), ``group_means`` and ``group_vars`` on
    the fitted scale; their covariance is the tail of ``covariance`` (``info.index`` rows
    (-1, l): mean and variance of group 1, of group 2, ..., then a Rasch fit's reference
    variance)."""

    group_labels: tuple = ()
    group_means: np.ndarray | None = None
    group_vars: np.ndarray | None = None

    def _latent_cov(self):
        n_lat = int(np.sum(self.info.index[:, 0] < 0))
        return self.covariance[-n_lat:, -n_lat:]

    def group_frame(self, scale: str = "fitted") -> pd.DataFrame:
        """``group, mean, mean_se, var, var_se, sd, sd_se``, one row per group (the reference's
        fixed parameters with NaN SEs). ``scale``: "fitted" (mirt's ``MEAN_1``, ``COV_11``;
        a Rasch fit's reference variance estimated) or "standard" (the bank's scale: the
        reference group N(0, 1), a Rasch fit's values divided by its SD)."""
        if scale not in ("fitted", "standard"):
            raise ConfigError(f"scale must be 'fitted' or 'standard', not {scale!r}")
        G = len(self.group_labels)
        rasch = self.latent_variance is not None
        phi = _latent_vector(self.group_means, self.group_vars, rasch)
        C = self._latent_cov()

        def values(p):
            means, variances = _split_latent(p, G, rasch)
            v0 = variances[0]
            if scale == "standard":
                means, variances = means / np.sqrt(v0), variances / v0
            return np.concatenate([means, variances, np.sqrt(variances)])

        v0 = values(phi)
        J = np.empty((len(v0), len(phi)))
        for l in range(len(phi)):
            h = 1e-6 * (1.0 + abs(phi[l]))
            e = np.zeros(len(phi))
            e[l] = h
            J[:, l] = (values(phi + e) - values(phi - e)) / (2 * h)
        se = np.sqrt(np.maximum(np.einsum("il,lk,ik->i", J, C, J), 0.0))
        se = np.where(np.any(np.abs(J) > 1e-9, axis=1), se, np.nan)
        out = {"group": list(self.group_labels)}
        for b, name in enumerate(("mean", "var", "sd")):
            out[name] = v0[b * G:(b + 1) * G]
            out[f"{name}_se"] = se[b * G:(b + 1) * G]
        return pd.DataFrame(out)[["group", "mean", "mean_se", "var", "var_se", "sd", "sd_se"]]


def group_standard_errors(values, weights, fit: dict, item_model, group_index, labels, *,
                          item_ids, model: str, progress=None) -> GroupStandardErrors:
    """Standard errors of the fit ``fit`` of :func:`atlascat.irt.groups.fit_groups` (its
    ``th``, ``nodes``, ``group_means``, ``group_vars``) on the data it was fitted to;
    ``group_index`` each subject's group (0 = the reference), ``labels`` the groups';
    ``progress(done, total)`` as :func:`~atlascat.irt.information.observed_information`'s."""
    params, free, log_prior = binary_parts(fit["th"], item_model)
    rasch = item_model.model == "rasch"
    info, means, variances = _information(
        binary_log_prob, binary_dlog_prob, params, free, category_indices(values), weights,
        fit, group_index, rasch, log_prior, progress)
    return GroupStandardErrors(np.asarray(item_ids), BINARY_NAMES, params, free, info, model,
                               float(variances[0]) if rasch else None, log_prior is not None,
                               group_labels=tuple(labels), group_means=means,
                               group_vars=variances)


def ordinal_group_standard_errors(codes, weights, fit: dict, models, group_index, labels, *,
                                  item_ids, model: str, prior_a=None, progress=None,
                                  latent_variance: bool = False) -> GroupStandardErrors:
    """Standard errors of a multiple-group graded / GPCM fit (:func:`atlascat.irt.polyfit.
    fit_ordinal` with groups: its ``params``, ``nodes``, ``group_means``, ``group_vars``) on
    the categories ``codes`` it was fitted to (NaN missing), as
    :func:`atlascat.irt.se.ordinal_standard_errors` with the groups' means and variances.
    ``latent_variance``: a partial credit fit's (mirt's ``"Rasch"``; ``params`` of slope 1,
    fixed): the reference group's variance is a parameter too, as a binary Rasch fit's."""
    from . import polytomous as poly

    params, free, y, names, log_prior = ordinal_parts(codes, fit["params"], prior_a,
                                                      latent_variance)
    info, means, variances = _information(
        lambda p, x: poly.log_prob(models, p, x), lambda p, x: poly.dlog_prob(models, p, x),
        params, free, y, weights, fit, group_index, latent_variance, log_prior, progress)
    return GroupStandardErrors(np.asarray(item_ids), names, params, free, info, model,
                               float(variances[0]) if latent_variance else None,
                               log_prior is not None, np.asarray(models, dtype=object),
                               group_labels=tuple(labels), group_means=means,
                               group_vars=variances)


def _information(log_prob, dlog_prob, params, free, y, weights, fit, group_index, rasch,
                 log_prior, progress):
    """(observed information, means, variances): the items' and the groups' latent
    parameters, each subject under its group's grid weights."""
    from .estep import grid_log_weights

    nodes = np.asarray(fit["nodes"], dtype=float)
    means = np.asarray(fit["group_means"], dtype=float)
    variances = np.asarray(fit["group_vars"], dtype=float)
    G = len(means)
    phi = _latent_vector(means, variances, rasch)

    def log_weights(p):
        mu, var = _split_latent(p, G, rasch)
        # N(m, v) at the nodes, normalized: the grid weights of the group's E-step
        return np.stack([grid_log_weights(nodes - m, v) for m, v in zip(mu, var)])

    info = observed_information(
        log_prob, params, free, y, weights, nodes, log_weights(phi), dlog_prob=dlog_prob,
        log_prior=log_prior, latent_log_weights=log_weights, latent_params=phi,
        groups=group_index, progress=progress)
    return info, means, variances
