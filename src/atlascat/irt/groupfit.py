"""S-X2 item fit of a multiple-group calibration, one table per group, as R mirt's ``itemfit``
on a ``multipleGroup`` model.

mirt's itemfit takes each group apart: the group's subjects, its latent N(mu_g, sigma_g^2)
(:mod:`atlascat.irt.groupscore`'s priors) in the summed-score expectations, and the group's
free latent parameters (a non-reference group's mean and variance: 2; the Rasch model's
reference variance) counted with the item's own in each item's df. :func:`sx2_groups` is :func:`atlascat.irt.fit.sx2` per group with those
three; items a group never answered are left out of its table (S-X2 takes the subjects who
answered every item).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["sx2_groups"]


def sx2_groups(responses, bank, groups, priors, *, estimated=None, **settings) -> pd.DataFrame:
    """S-X2 of every item within each group (:func:`atlascat.irt.fit.sx2`'s columns, then
    ``group``; the groups in the fit's order): ``groups`` each subject's group and ``priors``
    the fit's groups, as :func:`atlascat.irt.groupscore.score_groups` takes them (the first
    group the reference). A non-reference group's df is 2 fewer than a one-group fit's (its
    latent mean and variance, as mirt counts them; a Rasch bank's 1 fewer, one-group Rasch
    counting the latent variance already). ``settings``: sx2's ``mincell``,
    ``quadpts``, ``theta_range``, ``weights``."""
    from ..errors import ConfigError
    from ..responses import ResponseMatrix, as_labelled_responses
    from .fit import _SHARED, _estimated, sx2
    from .groupscore import group_priors, subject_groups
    from .sx2table import sx2_frame

    table = group_priors(priors)
    rm = as_labelled_responses(responses)
    if not isinstance(rm, ResponseMatrix):
        raise ConfigError("sx2_groups matches subjects to groups by id: give labelled "
                          "responses (a ResponseMatrix or DataFrame)")
    labels = subject_groups(groups, rm.subject_ids, list(table))
    # a non-reference group's mean and variance, beyond the latent variance a one-group Rasch
    # fit counts already (its reference group's)
    extra = 2 - _SHARED.get(_estimated(bank, estimated), 0)
    y = rm.aligned_values(bank.item_ids, extra="ignore")
    weights = settings.pop("weights", rm.weights)
    out = []
    for k, (label, (mean, sd)) in enumerate(table.items()):
        rows = labels == label
        if not rows.any():
            continue
        seen = np.flatnonzero((~np.isnan(y[rows])).any(axis=0))
        w = None if weights is None else np.asarray(weights, dtype=float)[rows]
        one = sx2(y[np.ix_(rows, seen)], bank.subset(seen), estimated=estimated,
                  prior_mean=mean, prior_sd=sd, weights=w, **settings)
        latent = extra if k > 0 else 0
        complete = ~np.isnan(y[np.ix_(rows, seen)]).any(axis=1)    # the subjects sx2 used
        n = float(complete.sum() if w is None else w[complete].sum())
        df = np.maximum(one["df_S_X2"].to_numpy() - latent, 0)
        frame = sx2_frame(one["item_id"], one["S_X2"], df, n, n_groups=one["n_groups"])
        frame["group"] = label
        out.append(frame)
    return pd.concat(out, ignore_index=True)
