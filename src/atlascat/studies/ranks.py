"""How theta re-ranks models that accuracy cannot separate (ATLAS paper, figures 2, 3, 7, 8).

For n models with accuracy x_i and ability theta_i (+- SE_i):

- rank agreement: Spearman's rho and Kendall's tau-b between theta and accuracy; values within
  ``theta_tol`` (``accuracy_tol``) of each other are one tie, so two models with the same
  answers, whose thetas differ in the 13th digit, share a rank as they share a pattern;
- rank shifts: rank_x(i) - rank_theta(i), ranks 1 = best, ties get their average rank; the share
  of models moving more than ``shift_threshold`` (10) positions;
- accuracy ties: pairs of models with equal accuracy (|x_i - x_j| <= ``accuracy_tol``) whose
  thetas differ (|theta_i - theta_j| > ``theta_tol``), and, with standard errors, whose thetas
  differ significantly (|theta_i - theta_j| > z sqrt(SE_i^2 + SE_j^2)).

``plot_rank_analysis`` writes the figures (matplotlib, Agg backend) to files.

References
----------
Li, P. et al. (2025). ATLAS: adaptive testing for LLM evaluation, section 5 and appendix H.
Kendall, M. G. (1945). The treatment of ties in ranking problems. Biometrika, 33, 239-251.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import kendalltau, rankdata, spearmanr

from ..errors import ConfigError, warn_user

__all__ = ["RankReport", "rank_analysis", "tied_pairs", "plot_rank_analysis"]


@dataclass
class RankReport:
    """Result of :func:`rank_analysis`: ``table`` has one row per model."""

    table: pd.DataFrame
    spearman: float
    spearman_p: float
    kendall: float
    kendall_p: float
    shift_threshold: int
    n_shifted: int
    share_shifted: float
    max_shift: float
    n_tied_pairs: int
    n_tied_pairs_theta_differs: int
    n_tied_pairs_significant: int | None
    pairs: pd.DataFrame = field(repr=False, default=None)
    #: what the observed score is called ("accuracy" for right / wrong answers; "mean score",
    #: with ``scale``, on a metric's own scale): its table column is ``score_column``
    score_name: str = "accuracy"
    scale: tuple | None = None

    @property
    def score_column(self) -> str:
        """The table's column of the observed score ("accuracy", "mean_score"); the rank by
        it is ``rank_<score_column>``."""
        return self.score_name.replace(" ", "_")

    def summary(self) -> dict:
        keys = ("spearman", "spearman_p", "kendall", "kendall_p", "shift_threshold", "n_shifted",
                "share_shifted", "max_shift", "n_tied_pairs", "n_tied_pairs_theta_differs",
                "n_tied_pairs_significant")
        out = {k: getattr(self, k) for k in keys}
        out["n_models"] = int(len(self.table))
        out["score_name"] = self.score_name
        out["scale"] = None if self.scale is None else [float(v) for v in self.scale]
        out["share_tied_pairs_theta_differs"] = (
            self.n_tied_pairs_theta_differs / self.n_tied_pairs if self.n_tied_pairs else 0.0)
        return {k: (float(v) if isinstance(v, (np.floating,)) else
                    int(v) if isinstance(v, np.integer) else v) for k, v in out.items()}


def _snap(values: np.ndarray, tol: float) -> np.ndarray:
    """Each run of sorted values whose steps are all <= ``tol`` set to the run's first value:
    floating-point noise (the same answers summed in another order) is not a rank."""
    order = np.argsort(values, kind="stable")
    v = values[order]
    start = np.r_[True, np.diff(v) > tol]
    out = np.empty_like(values)
    out[order] = v[start][np.cumsum(start) - 1]
    return out


def tied_pairs(accuracy, theta, se=None, *, accuracy_tol: float = 1e-9, z: float = 1.959964,
               subject_ids=None) -> pd.DataFrame:
    """Every pair of models with equal accuracy: ids, accuracy, both thetas, |d theta| and
    (with ``se``) the z-score of the difference. Vectorized: after sorting by accuracy, pairs are
    collected by offset within tie groups (one pass per offset, not per model)."""
    acc = np.asarray(accuracy, dtype=float)
    th = np.asarray(theta, dtype=float)
    n = acc.size
    ids = np.asarray([str(s) for s in (range(n) if subject_ids is None else subject_ids)])
    order = np.argsort(acc, kind="stable")
    a_sorted = acc[order]
    new_group = np.r_[True, np.diff(a_sorted) > accuracy_tol]
    group = np.cumsum(new_group) - 1
    sizes = np.bincount(group)
    left, right = [], []
    for off in range(1, int(sizes.max()) if sizes.size else 1):
        same = group[off:] == group[:-off]
        i = np.flatnonzero(same)
        left.append(order[i])
        right.append(order[i + off])
    li = np.concatenate(left) if left else np.zeros(0, dtype=int)
    ri = np.concatenate(right) if right else np.zeros(0, dtype=int)
    out = pd.DataFrame({"subject_1": ids[li], "subject_2": ids[ri], "accuracy": acc[li],
                        "theta_1": th[li], "theta_2": th[ri],
                        "theta_diff": np.abs(th[li] - th[ri])})
    if se is not None:
        s = np.asarray(se, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            out["z"] = out["theta_diff"].to_numpy() / np.sqrt(s[li] ** 2 + s[ri] ** 2)
        out["significant"] = out["z"] > z
    return out


def rank_analysis(theta, accuracy, *, se=None, subject_ids=None, shift_threshold: int = 10,
                  accuracy_tol: float = 1e-9, theta_tol: float = 1e-6,
                  z: float = 1.959964, score_name: str = "accuracy",
                  scale=None) -> RankReport:
    """Compare the ranking by theta with the ranking by accuracy (module docstring).
    ``score_name``: what the observed score is called where it is not a share right ("mean
    score": continuous scores, or on a metric's own ``scale`` (low, high) as given), naming
    its table columns (:attr:`RankReport.score_column`)."""
    th = np.asarray(theta, dtype=float).reshape(-1)
    acc = np.asarray(accuracy, dtype=float).reshape(-1)
    if th.shape != acc.shape:
        raise ConfigError(f"{th.size} thetas but {acc.size} accuracies")
    if th.size < 3:
        raise ConfigError("rank analysis needs at least 3 models")
    if not shift_threshold >= 0:   # a negative threshold counts every model as moved
        raise ConfigError(f"shift_threshold (CLI --shift) must be >= 0 rank positions, got "
                          f"{shift_threshold}")
    if np.isnan(th).any() or np.isnan(acc).any():
        raise ConfigError("theta and accuracy must not contain NaN; drop those models first")
    n = th.size
    ids = np.asarray([str(s) for s in (range(n) if subject_ids is None else subject_ids)])
    th_r, acc_r = _snap(th, theta_tol), _snap(acc, accuracy_tol)   # ranks, correlations
    r_acc = rankdata(-acc_r, method="average")
    r_th = rankdata(-th_r, method="average")
    shift = r_acc - r_th
    same = [w for w, v in (("theta", th_r), (score_name, acc_r)) if np.ptp(v) == 0]
    if same:   # a constant has no ranking: the correlations are undefined (NaN), said once
        warn_user(f"every model has the same {same[0]}: the rank correlations are undefined")
        rho = rho_p = tau = tau_p = float("nan")
    else:
        rho, rho_p = spearmanr(th_r, acc_r)
        tau, tau_p = kendalltau(th_r, acc_r)
    col = score_name.replace(" ", "_")
    table = pd.DataFrame({"subject_id": ids, col: acc, "theta": th,
                          f"rank_{col}": r_acc, "rank_theta": r_th, "rank_shift": shift})
    if se is not None:
        table.insert(3, "se", np.asarray(se, dtype=float))
    pairs = tied_pairs(acc, th, se, accuracy_tol=accuracy_tol, z=z, subject_ids=ids)
    moved = np.abs(shift) > shift_threshold
    return RankReport(
        table=table, spearman=float(rho), spearman_p=float(rho_p), kendall=float(tau),
        kendall_p=float(tau_p), shift_threshold=int(shift_threshold), n_shifted=int(moved.sum()),
        share_shifted=float(moved.mean()), max_shift=float(np.abs(shift).max()),
        n_tied_pairs=int(len(pairs)),
        n_tied_pairs_theta_differs=int((pairs["theta_diff"] > theta_tol).sum()),
        n_tied_pairs_significant=int(pairs["significant"].sum()) if se is not None else None,
        pairs=pairs, score_name=score_name,
        scale=None if scale is None else tuple(float(v) for v in scale))


def plot_rank_analysis(report: RankReport, outdir, *, prefix: str = "ranks",
                       n_tie_groups: int = 12) -> list[Path]:
    """Write the rank figures as PNG files into ``outdir``; returns their paths.

    ``<prefix>_theta_vs_accuracy.png`` (scatter, SE bars when known), ``<prefix>_rank_shift.png``
    (rank by accuracy vs by theta, the +-threshold band shaded), ``<prefix>_shift_hist.png`` and
    ``<prefix>_ties.png`` (theta spread within the largest groups of equal accuracy).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    t = report.table.rename(columns={report.score_column: "accuracy",
                                     f"rank_{report.score_column}": "rank_accuracy"})
    what = report.score_name     # the axes name the observed score as the table does
    paths = []

    fig, ax = plt.subplots(figsize=(6, 4.5))
    if "se" in t.columns:
        ax.errorbar(t["accuracy"], t["theta"], yerr=t["se"], fmt="none", ecolor="0.8", lw=0.6,
                    zorder=1)
    ax.scatter(t["accuracy"], t["theta"], s=8, alpha=0.7, zorder=2)
    ax.set_xlabel(what)
    ax.set_ylabel("theta")
    ax.set_title(f"Spearman {report.spearman:.3f}, Kendall {report.kendall:.3f}")
    paths.append(_save(fig, out / f"{prefix}_theta_vs_accuracy.png"))

    fig, ax = plt.subplots(figsize=(5.5, 5.5))
    n = len(t)
    moved = np.abs(t["rank_shift"]) > report.shift_threshold
    xs = np.array([1, n])
    ax.fill_between(xs, xs - report.shift_threshold, xs + report.shift_threshold, color="0.9",
                    label=f"|shift| <= {report.shift_threshold}")
    ax.scatter(t["rank_accuracy"][~moved], t["rank_theta"][~moved], s=6, c="C0", label="kept")
    ax.scatter(t["rank_accuracy"][moved], t["rank_theta"][moved], s=8, c="C3",
               label=f"moved ({report.share_shifted:.0%})")
    ax.set_xlabel(f"rank by {what}")
    ax.set_ylabel("rank by theta")
    ax.legend(loc="upper left", fontsize=8)
    paths.append(_save(fig, out / f"{prefix}_rank_shift.png"))

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.hist(t["rank_shift"], bins=50, color="C0")
    ax.axvline(-report.shift_threshold, color="C3", ls="--")
    ax.axvline(report.shift_threshold, color="C3", ls="--")
    ax.set_xlabel(f"rank by {what} - rank by theta")
    ax.set_ylabel("models")
    paths.append(_save(fig, out / f"{prefix}_shift_hist.png"))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    groups = t.groupby("accuracy")["theta"]
    sizes = groups.size()
    big = sizes[sizes > 1].sort_values(ascending=False).index[:n_tie_groups]
    for k, accv in enumerate(sorted(big)):
        vals = t.loc[t["accuracy"] == accv, "theta"].to_numpy()
        ax.scatter(np.full(vals.size, k), vals, s=10, alpha=0.7)
    ax.set_xticks(range(len(big)))
    ax.set_xticklabels([f"{v:.3f}" for v in sorted(big)], rotation=60, fontsize=7)
    ax.set_xlabel(f"models with this exact {what}")
    ax.set_ylabel("theta")
    ax.set_title(f"{report.n_tied_pairs_theta_differs} of {report.n_tied_pairs} equal-{what} "
                 "pairs differ in theta")
    paths.append(_save(fig, out / f"{prefix}_ties.png"))
    return paths


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
