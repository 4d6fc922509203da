"""Scores under each subject's own group prior: the EAP and MAP of a multiple-group calibration.

A multiple-group fit (:mod:`atlascat.irt.groups`) puts group g's trait at N(mu_g, sigma_g^2)
on the bank's scale (the reference group's N(0, 1)). As R mirt's ``fscores`` on a
``multipleGroup`` model, a subject of group g is scored under that prior:

    EAP_i = sum_q x_q L_i(x_q) phi(x_q; mu_g, sigma_g) / sum_q L_i(x_q) phi(x_q; mu_g, sigma_g)

on the fixed grid of :func:`atlascat.irt.ability.eap` (121 nodes on [-6, 6], mirt's), and the
MAP maximizes log L_i + log phi(theta; mu_g, sigma_g) (SE 1 / sqrt(I + 1 / sigma_g^2)).
:func:`score_by_prior` takes one prior per subject and scores the subjects that share one
together (one batched call per distinct prior: per group, never per subject);
:func:`score_groups` reads the priors from a fit's groups (:func:`group_priors`) and each
subject's group from a mapping. ML and WLE have no prior and are refused here.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..errors import ConfigError
from .defaults import SCORE_QUADPTS, SCORE_QUADRATURE, THETA_RANGE
# the groups' priors, as a fit's summary or its bank records them (light, with the groups)
from .grouplabels import (GROUP_PRIORS_COLUMN, bank_group_priors, check_bank_priors,
                          fitted_model, group_priors, with_group_priors)

__all__ = ["group_priors", "fitted_model", "subject_groups", "eap_by_prior", "score_by_prior",
           "score_groups", "GROUP_PRIORS_COLUMN", "with_group_priors", "bank_group_priors", "check_bank_priors"]


def subject_groups(groups, subject_ids, known) -> np.ndarray:
    """The group label of each of ``subject_ids`` from ``groups`` (a mapping subject id ->
    label, e.g. :func:`atlascat.irt.groups.read_groups`'s, or one label per subject in their
    order); ``known``: the fit's labels. Subjects the mapping names beyond these are ignored
    (the calibration's groups file scores a subset). A ConfigError of one line for a subject
    without a group or a label not among ``known``."""
    ids = [str(s) for s in subject_ids]
    if hasattr(groups, "items") and not isinstance(groups, np.ndarray):
        mapping = {str(k): v for k, v in groups.items()}
        missing = [s for s in ids if s not in mapping]
        if missing:
            raise ConfigError(f"{len(missing)} subject(s) of the responses have no group, e.g. "
                              f"{missing[:3]}; give every subject its group")
        raw = [mapping[s] for s in ids]
    else:
        raw = list(np.asarray(groups, dtype=object).reshape(-1))
        if len(raw) != len(ids):
            raise ConfigError(f"groups has {len(raw)} labels for {len(ids)} subjects; give one "
                              "per subject (or a mapping subject id -> group)")
    labels = np.array(["" if v is None else str(v).strip() for v in raw], dtype=object)
    known = [str(k) for k in known]
    bad = ~np.isin(labels, known)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ConfigError(f"subject {ids[i]!r} is in group {labels[i]!r}, not one of the fit's "
                          f"groups {known[:10]}")
    return labels


def _distinct_priors(prior_mean, prior_sd, n: int):
    """(mean, sd, rows) for each distinct prior of ``n`` subjects (scalars broadcast)."""
    mean = np.broadcast_to(np.asarray(prior_mean, dtype=float), (n,))
    sd = np.broadcast_to(np.asarray(prior_sd, dtype=float), (n,))
    pairs, which = np.unique(np.stack([mean, sd], axis=1), axis=0, return_inverse=True)
    which = np.asarray(which).reshape(-1)
    return [(float(m), float(s), np.flatnonzero(which == k)) for k, (m, s) in enumerate(pairs)]


def eap_by_prior(y, bank, prior_mean, prior_sd, *, quadpts: int = SCORE_QUADPTS,
                 theta_range=THETA_RANGE, device="cpu", memory_limit=None,
                 quadrature: str = SCORE_QUADRATURE):
    """(theta, se): the EAPs of ``y`` (subjects x the bank's items, NaN = missing) with
    subject i's prior N(prior_mean[i], prior_sd[i]^2), as :func:`atlascat.irt.ability.fscores`
    (float64 on ``device``; ``memory_limit`` bytes of device memory; ``quadrature`` as
    :func:`atlascat.irt.ability.eap`'s) one call per distinct prior: the scores a
    multiple-group calibration result carries."""
    from .adaptquad import check_quadrature
    from .ability import _eap_array

    y = np.asarray(y, dtype=float)
    theta, se = np.empty(y.shape[0]), np.empty(y.shape[0])
    for m, s, rows in _distinct_priors(prior_mean, prior_sd, y.shape[0]):
        theta[rows], se[rows] = _eap_array(y[rows], bank, quadpts, theta_range, m, s,
                                           device=device, memory_limit=memory_limit,
                                           quadrature=check_quadrature(quadrature))
    return theta, se


def _score_parts(responses, bank, method, prior_mean, prior_sd, n, labelled, ratings,
                 subject_ids, extra_items, settings):
    """:func:`score_by_prior`'s calls of estimate_ability, one per distinct prior: (frames,
    the rows of each)."""
    from ..responses import ResponseMatrix
    from .ability import estimate_ability

    parts, order = [], []
    for k, (m, s, rows) in enumerate(_distinct_priors(prior_mean, prior_sd, n)):
        part = ResponseMatrix(responses.values[rows], responses.subject_ids[rows],
                              responses.item_ids, on_empty="keep") if labelled else \
            responses.iloc[rows] if ratings else \
            np.asarray(responses, dtype=float)[rows]     # a group may skip some items
        parts.append(estimate_ability(part, bank, method, prior_mean=m, prior_sd=s,
                                      extra_items=extra_items if k == 0 else "ignore",
                                      subject_ids=np.asarray(subject_ids)[rows], **settings))
        order.append(rows)
    return parts, order


def score_by_prior(responses, bank, method: str, prior_mean, prior_sd, *, subject_ids=None,
                   extra_items: str = "warn", **settings) -> pd.DataFrame:
    """:func:`atlascat.irt.ability.estimate_ability` (EAP or MAP) with subject i's prior
    N(prior_mean[i], prior_sd[i]^2): one array entry per subject (or one scalar for all), in
    the responses' order. The subjects sharing a prior are scored in one call (the groups of a
    multiple-group fit: a handful of calls, never one per subject); the frame is the one
    ``estimate_ability`` returns, rows in the responses' order. ``settings``: its
    ``quadpts``, ``theta_range``, ``bounds``, ``device``."""
    import warnings

    from ..responses import ResponseMatrix, as_labelled_responses
    from .grouplabels import GroupPriorWarning

    method = str(method).lower()
    if method not in ("eap", "map"):
        raise ConfigError(f"a prior per subject is for EAP and MAP; {method!r} uses none")
    ratings = _ratings_frame(responses, bank)
    responses = responses if ratings else as_labelled_responses(responses)
    labelled = isinstance(responses, ResponseMatrix)
    if labelled and subject_ids is None:
        subject_ids = responses.subject_ids
    if ratings and subject_ids is None:
        subject_ids = np.array([str(i) for i in responses.index], dtype=object)
    n = responses.n_subjects if labelled else len(responses)
    if subject_ids is None:
        subject_ids = np.arange(n)
    with warnings.catch_warnings():   # each subject under its own prior: nothing to say
        warnings.simplefilter("ignore", GroupPriorWarning)
        parts, order = _score_parts(responses, bank, method, prior_mean, prior_sd, n, labelled,
                                    ratings, subject_ids, extra_items, settings)
    out = pd.concat(parts, ignore_index=True)
    out = out.iloc[np.argsort(np.concatenate(order), kind="stable")].reset_index(drop=True)
    out.attrs["method"] = method
    return out


def _ratings_frame(responses, bank) -> bool:
    """Whether ``responses`` are ratings in a labelled DataFrame scored on an ordinal bank
    (:class:`atlascat.irt.polybank.PolyBank`: rows sliced as a frame, not read as 0/1)."""
    from .polybank import PolyBank

    return isinstance(bank, PolyBank) and isinstance(responses, pd.DataFrame)


def score_groups(responses, bank, groups, priors, method: str = "eap", *, subject_ids=None,
                 **settings) -> pd.DataFrame:
    """EAP or MAP of every subject under its own group's prior, as mirt's ``fscores`` on a
    ``multipleGroup`` model: ``groups`` each subject's group (:func:`subject_groups`),
    ``priors`` the fit's groups (:func:`group_priors` reads them: a result, its ``groups``,
    the --summary JSON or its path). ``settings``: :func:`score_by_prior`'s. The frame of
    :func:`atlascat.irt.ability.estimate_ability` with a ``group`` column."""
    from ..responses import ResponseMatrix, as_labelled_responses

    table = group_priors(priors)
    if _ratings_frame(responses, bank):     # ratings on an ordinal bank: the frame's index
        ids = subject_ids if subject_ids is not None else \
            np.array([str(i) for i in responses.index], dtype=object)
    else:
        responses = as_labelled_responses(responses)
        ids = responses.subject_ids if isinstance(responses, ResponseMatrix) else subject_ids
    if ids is None:
        raise ConfigError("score_groups matches subjects to groups by id: give labelled "
                          "responses (a ResponseMatrix or DataFrame) or subject_ids")
    labels = subject_groups(groups, ids, list(table))
    mean = np.array([table[g][0] for g in labels], dtype=float)
    sd = np.array([table[g][1] for g in labels], dtype=float)
    df = score_by_prior(responses, bank, method, mean, sd, subject_ids=ids, **settings)
    df["group"] = labels
    return df
