"""The groups of a multiple-group calibration (:mod:`atlascat.irt.groups`, and the graded /
GPCM one of :func:`atlascat.irt.polyfit.fit_ordinal`): each subject's group, the groups file,
a group's prior on the grid and its M-step (the posterior moments), the groups' summary, the
groups' priors as a summary or a bank records them (:func:`group_priors`, :func:`bank_group_priors`).
Light: no scoring or EM imports, so the ordinal calibration takes them without a cycle."""
from __future__ import annotations

import math

import numpy as np

from ..errors import ConfigError

__all__ = ["GroupLabels", "group_labels", "group_mapping", "posterior_moments",
           "group_log_weights", "group_summary", "add_group_errors", "read_groups",
           "MIN_GROUP_SIZE", "LOG_VAR_BOUNDS", "MEAN_BOUND", "group_priors",
           "GROUP_PRIORS_COLUMN", "with_group_priors", "bank_group_priors", "check_bank_priors",
           "fitted_model", "GroupPriorWarning", "single_prior_note", "warn_single_prior"]


class GroupPriorWarning(UserWarning):
    """A bank of a multiple-group fit (it records its groups' priors, :func:`bank_group_priors`)
    used under one prior for every subject: scores and adaptive tests as if all were from the
    reference group (:func:`atlascat.irt.groupscore.score_groups` puts each under its own)."""

#: fewest subjects a group may have (its mean and variance are estimated from them)
MIN_GROUP_SIZE = 10
LOG_VAR_BOUNDS = (math.log(1e-3), math.log(100.0))
MEAN_BOUND = 10.0


class GroupLabels:
    """The subjects' groups: ``labels`` (one per group, the reference first) and ``index``
    (each subject's group, 0 = the reference)."""

    def __init__(self, labels, index):
        self.labels = [str(v) for v in labels]
        self.index = np.asarray(index, dtype=np.intp)

    @property
    def reference(self) -> str:
        return self.labels[0]

    def sizes(self, weights=None) -> np.ndarray:
        return np.bincount(self.index, weights=weights, minlength=len(self.labels))


def group_labels(groups, subject_ids, reference=None) -> GroupLabels:
    """The groups of the subjects ``subject_ids`` from ``groups``: a dict subject id -> group
    (:func:`group_mapping`) or what that takes.
    ``reference``: the group whose trait is N(0, 1) (default: the first label in sorted
    order, as R's factor levels: numeric labels by value). A ConfigError of one line for an unknown or unlabelled
    subject, a single group, a group of fewer than :data:`MIN_GROUP_SIZE` subjects or an
    unknown reference."""
    ids = [str(s) for s in subject_ids]
    mapping = groups if isinstance(groups, dict) else group_mapping(groups, subject_ids)
    missing = [s for s in ids if s not in mapping]
    if missing:
        raise ConfigError(f"{len(missing)} subject(s) have no group, e.g. {missing[:3]}; "
                          "give every subject of the responses a group")
    raw = [mapping[s] for s in ids]
    text = []
    for s, v in zip(ids, raw):
        if v is None or (isinstance(v, float) and math.isnan(v)) or str(v).strip() == "":
            raise ConfigError(f"subject {s!r} has an empty group label")
        text.append(str(v).strip())
    labels = sorted(set(text), key=_level_order(set(text)))
    if len(labels) < 2:
        raise ConfigError(f"groups needs at least two groups, got one ({labels[0]!r}); "
                          "calibrate without groups")
    if reference is not None:
        if str(reference) not in labels:
            raise ConfigError(f"reference group {reference!r} is not one of the groups "
                              f"{labels[:10]}")
        labels.remove(str(reference))
        labels.insert(0, str(reference))
    pos = {g: i for i, g in enumerate(labels)}
    out = GroupLabels(labels, [pos[g] for g in text])
    counts = out.sizes()
    small = [(g, int(c)) for g, c in zip(labels, counts) if c < MIN_GROUP_SIZE]
    if small:
        raise ConfigError(f"group {small[0][0]!r} has {small[0][1]} subject(s); each group "
                          f"needs at least {MIN_GROUP_SIZE} (merge it or leave it out)")
    return out


def _level_order(labels):
    """The sort key of R's factor levels: numbers by value when every label is one (groups
    2 and 10: 2 first, as R's factor of a numeric column), else the text."""
    try:
        [float(v) for v in labels]
    except ValueError:
        return str
    return lambda v: (float(v), v)


def posterior_moments(nodes, node_mass):
    """(mean, variance) of the posterior mass ``node_mass`` on ``nodes`` (host arrays): a
    group's M-step, as mirt's (the variance kept within [1e-3, 100], the mean within +-10)."""
    x = np.asarray(nodes, float)
    m = np.asarray(node_mass, float)
    m = m / m.sum()
    mean = float(m @ x)
    var = float(m @ ((x - mean) ** 2))
    lo, hi = np.exp(LOG_VAR_BOUNDS)
    return float(np.clip(mean, -MEAN_BOUND, MEAN_BOUND)), float(np.clip(var, lo, hi))


def group_log_weights(nodes, mean, var):
    """log pi_q of N(``mean``, ``var``) at the ``nodes`` (host array), normalized: a group's
    grid weights in its E-step (mirt's)."""
    lw = -0.5 * (nodes - mean) ** 2 / var
    mx = np.max(lw)
    return lw - (mx + np.log(np.sum(np.exp(lw - mx))))


def group_summary(groups: GroupLabels, fit: dict, weights=None) -> dict:
    """The groups' latent means and SDs on the bank's N(0, 1) scale (the reference group's;
    a Rasch fit's divided by its SD), with their sizes as the fit's own (``n_subjects`` its
    rows, ``n_observations`` the subjects they stand for, the sum of the pattern frequencies):
    JSON-ready."""
    sd0 = math.sqrt(fit["var"])
    return {"reference": groups.reference,
            "groups": [{"group": g, "n_subjects": int(rows), "n_observations": float(n),
                        "mean": float(mu) / sd0, "sd": math.sqrt(float(v)) / sd0}
                       for g, rows, n, mu, v in zip(groups.labels, groups.sizes(),
                                                    groups.sizes(weights), fit["group_means"],
                                                    fit["group_vars"])]}


def group_mapping(groups, subject_ids) -> dict:
    """``groups`` as a dict subject id -> label for the subjects ``subject_ids`` (before any
    filtering): a mapping (dict, pandas Series) must name only these subjects, a sequence
    must hold one label per subject, in their order. A ConfigError of one line otherwise."""
    ids = [str(s) for s in subject_ids]
    if hasattr(groups, "items") and not isinstance(groups, np.ndarray):
        mapping = {str(k): v for k, v in groups.items()}
        unknown = sorted(set(mapping) - set(ids))
        if unknown:
            raise ConfigError(f"groups names {len(unknown)} subject(s) not in the responses, "
                              f"e.g. {unknown[:3]}")
        return mapping
    raw = list(np.asarray(groups, dtype=object).reshape(-1))
    if len(raw) != len(ids):
        raise ConfigError(f"groups has {len(raw)} labels for {len(ids)} subjects; give one per "
                          "subject (or a mapping subject id -> group)")
    return dict(zip(ids, raw))


def add_group_errors(summary: dict, ses) -> None:
    """Each group's ``mean_se``, ``var``, ``var_se``, ``sd_se`` (on the bank's scale, from
    :meth:`atlascat.irt.groupse.GroupStandardErrors.group_frame`) into the rows of
    :func:`group_summary`'s ``summary``."""
    table = ses.group_frame("standard")
    for row, t in zip(summary["groups"], table.itertuples()):
        row.update({"mean_se": _num(t.mean_se), "var": float(t.var),
                    "var_se": _num(t.var_se), "sd_se": _num(t.sd_se)})


def _num(v):
    """A float for JSON, None for NaN (a fixed parameter's standard error)."""
    return None if not math.isfinite(float(v)) else float(v)


def read_groups(path, option: str = "--groups") -> dict:
    """A groups file: a CSV (a .tsv: tab-separated) whose first column is the subject id and whose ``group`` column
    (else its second column) is the subject's group, one row per subject, with a header; as
    a dict subject id -> group. A ConfigError of one line, naming ``option``, for a missing
    or unreadable file, fewer than two columns, a repeated subject or an empty label."""
    from pathlib import Path

    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{option}: no such file: {path}")
    sep = "\t" if ".tsv" in [x.lower() for x in p.suffixes] else ","   # as the responses
    try:
        df = pd.read_csv(p, sep=sep, dtype=str, keep_default_na=False)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{option}: cannot read {path} as CSV ({str(exc).splitlines()[0]})"
                          ) from None
    if df.shape[1] < 2 or len(df) == 0:
        raise ConfigError(f"{option}: {path} needs a header and two columns, subject id and "
                          "group, with a row per subject (comma-separated; tabs in a .tsv)")
    col = "group" if "group" in list(df.columns[1:]) else df.columns[1]
    ids = df.iloc[:, 0].str.strip()
    dup = ids[ids.duplicated()]
    if len(dup):
        raise ConfigError(f"{option}: subject {dup.iloc[0]!r} appears more than once in {path}")
    labels = df[col].str.strip()
    empty = ids[labels == ""]
    if len(empty):
        raise ConfigError(f"{option}: subject {empty.iloc[0]!r} has an empty group in {path}")
    return dict(zip(ids, labels))


#: the bank column in which a multiple-group fit records its groups' priors: on every row the
#: same JSON text {label: [mean, sd], ...}, in the fit's order (the reference first)
GROUP_PRIORS_COLUMN = "group_priors"


def group_priors(source) -> dict:
    """Each group's prior (mean, SD) on the bank's scale, as a dict label -> (mean, sd), in
    the fit's order (the reference first), from ``source``: a
    :class:`~atlascat.irt.result.CalibrationResult` of a multiple-group fit, its ``groups``
    dict, the JSON summary ``atlas calibrate --groups --summary`` writes (a dict or its path)
    or this function's own answer, {label: (mean, sd)}.
    A ConfigError of one line when ``source`` holds no groups or a group without a finite
    mean and a positive SD."""
    name = "the summary"
    if isinstance(source, (str, bytes)) or hasattr(source, "read_text"):
        source, name = _read_summary(source), str(source)
    info = getattr(source, "groups", source) if not isinstance(source, dict) else source
    if isinstance(info, dict) and isinstance(info.get("groups"), dict):
        info = info["groups"]            # a whole summary: its "groups" entry
    rows = info.get("groups") if isinstance(info, dict) else None
    if isinstance(info, dict) and info and all(isinstance(v, (tuple, list)) and len(v) == 2
                                               for v in info.values()):
        rows = [{"group": k, "mean": v[0], "sd": v[1]} for k, v in info.items()]
    if not isinstance(rows, list) or not rows:
        raise ConfigError(f"{name} has no groups: give the summary of a multiple-group "
                          "calibration (each group's latent mean and sd)")
    out = {}
    for row in rows:
        try:
            label, mean, sd = str(row["group"]), float(row["mean"]), float(row["sd"])
        except (KeyError, TypeError, ValueError):
            raise ConfigError(f"{name}: a group without its group, mean and sd: {row!r}"
                              ) from None
        if not (math.isfinite(mean) and math.isfinite(sd) and sd > 0):
            raise ConfigError(f"{name}: group {label!r} has mean {mean} and sd {sd}; a prior "
                              "needs a finite mean and a positive sd")
        out[label] = (mean, sd)
    return out


def with_group_priors(bank, source):
    """``bank`` (an ItemBank or PolyBank) with the groups' priors of ``source`` (anything
    :func:`group_priors` takes) recorded in its :data:`GROUP_PRIORS_COLUMN` metadata column:
    what a multiple-group fit's bank carries, in its file too, so that a reader knows it was
    fitted with groups (:func:`bank_group_priors`)."""
    import json

    from .bank import ItemBank, constant_column

    text = json.dumps({g: [m, s] for g, (m, s) in group_priors(source).items()})
    meta = constant_column(bank.metadata, GROUP_PRIORS_COLUMN, text, len(bank))
    if isinstance(bank, ItemBank):
        return ItemBank(bank.item_ids, *bank.params, metadata=meta, model=bank.model)
    return type(bank)(bank.item_ids, bank.params, bank.kinds, bank.levels, scales=bank.scales,
                      metadata=meta)


def bank_group_priors(bank) -> dict | None:
    """The groups' priors {label: (mean, sd)} a bank of a multiple-group fit records
    (:func:`with_group_priors`; read back from its file), or None for a bank without them
    (one-group fits, mirt's files, banks whose rows record different ones)."""
    import json

    meta = getattr(bank, "metadata", None)
    if meta is None or GROUP_PRIORS_COLUMN not in meta.columns:
        return None
    texts = {v if isinstance(v, str) else json.dumps(v) for v in meta[GROUP_PRIORS_COLUMN]
             if isinstance(v, (str, dict))}
    if len(texts) != 1:
        return None
    try:
        return group_priors(json.loads(texts.pop()))
    except (ValueError, ConfigError):
        return None


def single_prior_note(bank, what: str = "scored", prior=(0.0, 1.0)) -> str | None:
    """The start of the line that says a bank of a multiple-group fit (its priors recorded,
    :func:`bank_group_priors`) is used under the one ``prior`` (mean, sd) for every subject
    (``what``: "scored", "tested", ...); None for a bank without groups."""
    own = bank_group_priors(bank)
    if own is None:
        return None
    m, s = (float(v) for v in prior)
    one = "N(0, 1)" if (m, s) == (0.0, 1.0) else f"N({m:g}, {s:g}^2)"
    return (f"the bank is from a multiple-group fit (groups {', '.join(own)}): {what} under "
            f"{one} for every subject")


def warn_single_prior(bank, what: str = "scored", prior=(0.0, 1.0)) -> None:
    """A :class:`GroupPriorWarning` (once, from the caller's line) where ``bank`` is a
    multiple-group fit's and every subject is ``what`` under the one ``prior``
    (:func:`single_prior_note`); nothing for a bank without groups."""
    note = single_prior_note(bank, what, prior)
    if note is not None:
        from ..errors import warn_user

        warn_user(note + "; score_groups(responses, bank, groups, priors) (atlascat.irt."
                  "groupscore) puts each subject under its group's prior", GroupPriorWarning)


def check_bank_priors(bank, priors, *, rtol: float = 1e-6) -> None:
    """A ConfigError of one line when ``bank`` records groups' priors
    (:func:`bank_group_priors`) other than ``priors`` ({label: (mean, sd)}): a summary of
    another fit than the one that wrote the bank. Nothing for a bank that records none."""
    own = bank_group_priors(bank)
    if own is None:
        return
    if set(own) != set(priors):
        raise ConfigError(f"the bank was fitted with groups {', '.join(own)}, the summary holds "
                          f"{', '.join(priors)}: give the summary of the fit that wrote the bank")
    for g, (m, s) in own.items():
        if not np.allclose(priors[g], (m, s), rtol=rtol, atol=rtol):
            raise ConfigError(
                f"group {g!r} is N({m:.4g}, {s:.4g}^2) in the bank, N({priors[g][0]:.4g}, "
                f"{priors[g][1]:.4g}^2) in the summary: give the summary of the fit that "
                "wrote the bank")


def fitted_model(source) -> str | None:
    """The model of a calibration's summary ``source`` (the JSON ``atlas calibrate --summary``
    writes, its path, or a :class:`~atlascat.irt.result.CalibrationResult`): "pcm" for a
    partial credit fit (its bank's items are GPCM items of one slope), None where not said."""
    if isinstance(source, (str, bytes)) or hasattr(source, "read_text"):
        source = _read_summary(source)
    model = source.get("model") if isinstance(source, dict) else getattr(source, "model", None)
    return None if model is None else str(model)


def _read_summary(path) -> dict:
    import json
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"no such summary file: {path}")
    try:
        return json.loads(p.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path} as JSON ({str(exc).splitlines()[0]})") from None
