"""Scale linking: put a new calibration on the scale of a reference one.

A linear change of the latent scale theta_ref = A theta_new + B leaves the model's probabilities
unchanged when the items move with it::

    a* = a / A,   b* = A b + B,   c* = c,   u* = u.

The constants (A, B) come from either

- **common persons** (the same subjects scored on both scales, as in partitioned calibration):
  mean-sigma on the thetas, A = sd(theta_ref) / sd(theta_new), B = mean(theta_ref) - A mean(theta_new);
- **common (anchor) items** calibrated in both banks:

  * mean-sigma (Marco, 1977): the same formula on the anchors' b;
  * mean-mean (Loyd and Hoover, 1980): A = mean(a_new) / mean(a_ref),
    B = mean(b_ref) - A mean(b_new);
  * Haebara (1980): minimize sum_q w_q sum_j [P_ref_j(x_q) - P*_new_j(x_q)]^2;
  * Stocking and Lord (1983): minimize sum_q w_q [sum_j P_ref_j(x_q) - sum_j P*_new_j(x_q)]^2,

  where P*_new uses the transformed parameters and x_q, w_q is a normal grid on the reference
  scale (default 61 nodes on [-4, 4], N(0, 1) weights). The characteristic-curve criteria are
  minimized over (log A, B) by BFGS with analytic gradients, started from mean-sigma.

:func:`icc_rmsd` measures how far two banks' item characteristic curves are apart
(sqrt of the N(0, 1)-weighted mean squared difference of P over theta), per item.

**Anchor drift** (:func:`anchor_drift`): an anchor whose difficulty moved between the two
calibrations (item exposure, a changed prompt) pulls every constant. After linking, each
anchor's gap is measured on its characteristic curves, g_j = sum_q w_q (P*_new_j(x_q) -
P_ref_j(x_q)) over N(0, 1) on the reference scale, and compared with the others' by the robust
z of Huynh and Meyer (2010), z_j = (g_j - median g) / (0.74 IQR g). The b gap d_j = b*_new_j -
b_ref_j is not the yardstick: sound anchors' b differ by their estimation error, large where a
is small or b extreme (real ARC: b of -94 and 45 whose curves agree), and the robust z of d
flagged a sound anchor in 40% of drift-free simulated links with 10 anchors and 85% with 40
(benchmarks/study_drift_alarm.py); the curves' gap shrinks with a and away from the groups.
Where both banks carry a ``b_se`` column, z_j = (d_j - median d) / sqrt(se*_new_j^2 +
se_ref_j^2) instead (se*_new = A se_new). An anchor is flagged when |z_j| passes
:func:`drift_threshold` (a family-wise rate, not a per-anchor one: the robust z, ``drift_z``
= 4 up to 20 anchors, then growing with the Bonferroni quantile of the normal; the SE z, that
quantile at 5%) and d_j strays more than
``drift_min`` (0.3 on theta's scale) from the median, with 4 anchors or more; so is an anchor
whose slope changes sign between the banks (left out of the median and IQR). Simulated, no
drift: 11% of links with 10 anchors and 1% with 40 flag a sound anchor; anchors moved by 0.5-1.5
in b: 57% and 51% caught (70% and 64% by the old rule); with b_se (``calibrate(se=True)``), 9% and 6% false
alarms, 60% and 53% caught.
Anchors whose item text (a ``question`` column in both banks) differs are not the same items:
refused, or with ids given, warned. ``drop_drift`` links again without the flagged anchors (one pass).

**Non-equivalent groups** (a bank calibrated on weak models, the other on strong ones;
benchmarks/results/linking_groups.md): with anchors that pin the link down, Stocking-Lord and
Haebara recover the constants (simulated group shifts to 2.5 SD: B within 0.13-0.16 RMSE) and
agree with each other (|dA| + |dB| <= 0.52 in 192 simulated links). Where the groups do not
overlap and the anchors are few or extreme for one group, each criterion fits a different
extrapolation and they part (real ARC, weak vs strong half, 10 anchors: A = 1.57, B = 5.13 vs
2.00, 8.00; the concurrent calibration's 0.83, 2.75): |dA| + |dB| > ``CC_DISAGREE`` (the largest
gap between the two links' thetas for theta_new in [-1, 1]) is warned.

References
----------
Kolen, M. J. and Brennan, R. L. (2014). Test Equating, Scaling, and Linking, 3rd ed., ch. 6.
Haebara, T. (1980). Equating logistic ability scales by a weighted least squares method.
Japanese Psychological Research 22, 144-149.
Huynh, H. and Meyer, P. (2010). Use of robust z in detecting unstable items in item response
theory models. Practical Assessment, Research & Evaluation 15(2).
Stocking, M. L. and Lord, F. M. (1983). Developing a common metric in item response theory.
Applied Psychological Measurement 7, 201-210.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.special import expit

from .defaults import DRIFT_ALPHA, DRIFT_MIN, DRIFT_Z, QUADPTS, THETA_RANGE
from ..errors import ConfigError
from .bank import ItemBank
from .linkmoments import check_constants, linked_metadata, mean_mean, mean_sigma
from .quadrature import normal_quadrature

__all__ = ["LINK_METHODS", "Linking", "transform_bank", "mean_sigma", "mean_mean", "haebara",
           "stocking_lord", "link_banks", "icc_rmsd", "anchor_drift", "drift_threshold",
           "tcc_rmsd"]

LINK_METHODS = ("stocking-lord", "haebara", "mean-sigma", "mean-mean")
MIN_DRIFT_ANCHORS = 4
#: Stocking-Lord and Haebara constants further apart than this (|dA| + |dB|) are warned
CC_DISAGREE = 0.5


@dataclass(frozen=True)
class Linking:
    """Linking constants theta_ref = A theta_new + B and how they were found."""

    A: float
    B: float
    method: str
    anchors: tuple = ()
    criterion: float | None = None
    #: per anchor (:func:`anchor_drift`): b_ref, b_linked, d, robust_z, icc_rmsd, flagged
    drift: pd.DataFrame | None = field(default=None, compare=False, repr=False)
    #: anchors flagged for drift and left out of these constants (``drop_drift``)
    dropped: tuple = ()

    @property
    def drifted(self) -> tuple:
        """Ids of the anchors flagged for drift (dropped or not)."""
        if self.drift is None:
            return ()
        return tuple(self.drift.index[self.drift["flagged"].to_numpy()])

    def transform(self, bank):
        """The bank (binary ItemBank or ordinal / mixed PolyBank) moved onto the reference
        scale."""
        from .polybank import PolyBank

        if isinstance(bank, PolyBank):
            from .polylinking import transform_poly

            return transform_poly(bank, self.A, self.B)
        return transform_bank(bank, self.A, self.B)

    def merge(self, ref, new):
        """``ref`` plus ``new``'s items that ``ref`` lacks, moved onto ``ref``'s scale: one bank
        (a PolyBank when either is ordinal; binary 1PL/2PL items join it as graded items)."""
        from .polybank import PolyBank

        linked = self.transform(new)
        extra = [i for i in linked.item_ids if i not in ref]
        if not extra:
            return ref
        part = linked.subset(extra)
        if isinstance(ref, PolyBank) or isinstance(part, PolyBank):
            from .polylinking import as_poly

            return PolyBank.combine(as_poly(ref, "reference"), as_poly(part, "new"))
        from .bank import stacked_metadata

        cols = [np.concatenate([getattr(ref, k), getattr(part, k)]) for k in ("a", "b", "c", "u")]
        return ItemBank(list(ref.item_ids) + list(part.item_ids), *cols,
                        metadata=stacked_metadata((ref, part)))   # as PolyBank.combine

    def theta(self, theta):
        """Thetas moved onto the reference scale."""
        return self.A * np.asarray(theta, float) + self.B

    def to_dict(self) -> dict:
        flagged = [] if self.drift is None else [
            {"item_id": str(i), "d": float(r.d), "robust_z": float(r.robust_z),
             "drift_z": float(r.drift_z), "threshold": float(r.threshold),
             "slope_flips": bool(r.slope_flips)}
            for i, r in self.drift[self.drift["flagged"]].iterrows()]
        return {"method": self.method, "A": self.A, "B": self.B, "n_anchors": len(self.anchors),
                "criterion": self.criterion, "drift_flagged": list(self.drifted),
                "drift": flagged, "dropped": list(self.dropped)}


def transform_bank(bank: ItemBank, A: float, B: float) -> ItemBank:
    """a* = a / A, b* = A b + B (c, u, ids unchanged; standard errors in the metadata moved
    with their parameters, :func:`.linkmoments.linked_metadata`)."""
    check_constants(A, B)
    return ItemBank(bank.item_ids, bank.a / A, A * bank.b + B, bank.c, bank.u,
                    metadata=linked_metadata(bank.metadata, A), model=bank.model)


def _curves(params_new, log_a_scale, B, x):
    """P* of the transformed new items on the grid and dP*/d(log A), dP*/dB; (q, m) each."""
    a, b, c, u = params_new
    A = np.exp(log_a_scale)
    z = a * ((x[:, None] - B) / A - b)
    s = expit(z)
    ds = (u - c) * s * (1.0 - s)
    p = c + (u - c) * s
    dp_dloga = ds * (-a * (x[:, None] - B) / A)
    dp_db = ds * (-a / A)
    return p, dp_dloga, dp_db


def _cc_link(ref: ItemBank, new: ItemBank, kind: str, quadpts: int, theta_range) -> tuple:
    from scipy.optimize import minimize  # lazy: 0.25 s at import, only linking needs it

    quad = normal_quadrature(quadpts, theta_range)
    x, w = quad.nodes, quad.weights
    p_ref = ref.probability(x)                  # (q, m)
    params = new.params
    try:
        A0, B0 = mean_sigma(ref.b, new.b) if len(ref) > 1 else (1.0, 0.0)
    except ConfigError:
        A0, B0 = 1.0, 0.0
    if not (np.isfinite(A0) and 0.05 < A0 < 20 and np.isfinite(B0) and abs(B0) < 20):
        A0, B0 = 1.0, 0.0

    def fun(v):
        p, dla, db = _curves(params, v[0], v[1], x)
        diff = p_ref - p
        if kind == "haebara":
            f = float(w @ (diff**2).sum(axis=1))
            g = np.array([-2 * w @ (diff * dla).sum(axis=1), -2 * w @ (diff * db).sum(axis=1)])
        else:
            tdiff = diff.sum(axis=1)
            f = float(w @ tdiff**2)
            g = np.array([-2 * w @ (tdiff * dla.sum(axis=1)), -2 * w @ (tdiff * db.sum(axis=1))])
        return f, g

    res = minimize(fun, np.array([np.log(A0), B0]), jac=True, method="BFGS",
                   options={"gtol": 1e-10, "maxiter": 500})
    return float(np.exp(res.x[0])), float(res.x[1]), float(res.fun)


def haebara(ref: ItemBank, new: ItemBank, *, quadpts: int = QUADPTS, theta_range=(-4.0, 4.0)):
    """Haebara constants (A, B, criterion) from two banks holding the same anchor items in order."""
    return _cc_link(ref, new, "haebara", quadpts, theta_range)


def stocking_lord(ref: ItemBank, new: ItemBank, *, quadpts: int = QUADPTS, theta_range=(-4.0, 4.0)):
    """Stocking-Lord constants (A, B, criterion) from two banks holding the same anchors in order."""
    return _cc_link(ref, new, "stocking-lord", quadpts, theta_range)


def link_banks(ref: ItemBank, new: ItemBank, method: str = "stocking-lord", *, anchors=None,
               quadpts: int = QUADPTS, theta_range=(-4.0, 4.0), drift_z: float = DRIFT_Z,
               drift_min: float = DRIFT_MIN, drop_drift: bool = False) -> Linking:
    """Linking constants that put ``new`` on the scale of ``ref`` through their common items.

    ``anchors``: the item ids to use (default: every id present in both banks; at least 2; a
    repeated id counts once). The result's ``drift`` flags anchors whose difficulty moved
    (:func:`anchor_drift`: the curves' gap, or b's over its SE, |z| above
    :func:`drift_threshold` and b ``drift_min`` from the median); ``drop_drift`` links again
    without them.
    """
    from .bank import check_bank
    from .polybank import PolyBank

    for bank in (ref, new):
        check_bank(bank, also=(PolyBank,), what="an ItemBank or a PolyBank (ordinal items)")
    method = str(method).lower().replace("_", "-")
    if method not in LINK_METHODS:
        raise ConfigError(f"unknown linking method {method!r}; choose one of {', '.join(LINK_METHODS)}")
    given = anchors is not None
    if not given:
        anchors = [i for i in ref.item_ids if i in new]
    anchors = list(dict.fromkeys(str(i) for i in anchors))   # a repeated id is one anchor
    missing = [i for i in anchors if i not in ref or i not in new]
    if missing:
        raise ConfigError(f"anchor item(s) {missing[:5]} are not in both banks")
    if len(anchors) < 2:
        raise ConfigError(_too_few_anchors(ref, new, anchors, given))
    _check_same_items(ref, new, anchors, given)
    A, B, crit = _constants(ref, new, anchors, method, quadpts, theta_range)
    r_anchors, n_anchors = ref.subset(anchors), new.subset(anchors)
    drift = anchor_drift(r_anchors, n_anchors, A, B, drift_z=drift_z, drift_min=drift_min,
                         quadpts=quadpts)
    flagged = list(drift.index[drift["flagged"].to_numpy()])
    dropped, kept = (), anchors
    if drop_drift and flagged:
        kept = [i for i in anchors if i not in set(flagged)]
        if len(kept) < 2:
            raise ConfigError(f"{len(flagged)} of the {len(anchors)} anchors are flagged for drift "
                              f"({', '.join(flagged[:5])}); without them {len(kept)} remain and "
                              "linking needs 2: link without --drop-drift, or raise --drift-z")
        A, B, crit = _constants(ref, new, kept, method, quadpts, theta_range)
        drift = anchor_drift(r_anchors, n_anchors, A, B, drift_z=drift_z, drift_min=drift_min,
                             quadpts=quadpts)
        drift["flagged"] = drift.index.isin(flagged)   # the flags that chose the anchors
        dropped = tuple(flagged)
    _check_moments(ref, new, kept, method, A, B, quadpts, theta_range)
    _check_agreement(ref, new, kept, method, A, B, quadpts, theta_range)
    return Linking(A, B, method, tuple(kept), crit, drift, dropped)


def tcc_rmsd(ref, new, A: float, B: float, *, quadpts: int = QUADPTS,
             theta_range=(-4.0, 4.0)) -> float:
    """How far the anchors' test characteristic curves stay apart after linking: sqrt(sum_q
    w_q [sum_j E_ref_j(x_q) - sum_j E*_new_j(x_q)]^2), in items (expected levels for ordinal
    items), on the reference grid; ``ref`` and ``new`` hold the same anchors."""
    if _ordinal(ref, new):
        from .polylinking import as_poly

        ref, new = as_poly(ref, "reference"), as_poly(new, "new")
    x = normal_quadrature(quadpts, theta_range)
    moved = Linking(A, B, "").transform(new)
    if _ordinal(ref):
        gap = ref.expected_score(x.nodes).sum(axis=1) - moved.expected_score(x.nodes).sum(axis=1)
    else:
        gap = ref.probability(x.nodes).sum(axis=1) - moved.probability(x.nodes).sum(axis=1)
    return float(np.sqrt(x.weights @ gap**2))


def _check_moments(ref, new, anchors, method: str, A: float, B: float, quadpts: int,
                   theta_range) -> None:
    """A moment method's constants follow the anchors' b, which a few poorly estimated items
    (near-zero a, |b| of 10 or more) dominate: warned when they leave the anchors' curves more
    than 3 times as far apart as Stocking-Lord's and by more than 1% of the anchors."""
    if method not in ("mean-sigma", "mean-mean"):
        return
    from ..errors import warn_user

    r, n = ref.subset(anchors), new.subset(anchors)
    gap = tcc_rmsd(r, n, A, B, quadpts=quadpts, theta_range=theta_range)
    try:
        sl = _constants(ref, new, anchors, "stocking-lord", quadpts, theta_range)
    except ConfigError:   # no usable Stocking-Lord constants to compare with
        return
    best = tcc_rmsd(r, n, sl[0], sl[1], quadpts=quadpts, theta_range=theta_range)
    if gap > max(3 * best, 0.01 * len(anchors)):
        warn_user(f"{method}'s constants leave the {len(anchors)} anchors' expected scores "
                  f"{gap:.3g} items apart on the reference scale (RMS), Stocking-Lord's "
                  f"{best:.3g}: moment methods follow the anchors' b, which poorly estimated "
                  "anchors (near-zero a, extreme b) pull; use --method stocking-lord")


def _check_agreement(ref, new, anchors, method: str, A: float, B: float, quadpts: int,
                     theta_range) -> None:
    """Stocking-Lord's and Haebara's constants fit the same anchors by two criteria; where the
    anchors pin the link down they agree (module docstring). Warned when the two links put a
    new theta in [-1, 1] more than ``CC_DISAGREE`` apart on the reference scale."""
    if method not in ("stocking-lord", "haebara"):
        return
    from ..errors import warn_user

    other = "haebara" if method == "stocking-lord" else "stocking-lord"
    try:
        A2, B2, _ = _constants(ref, new, anchors, other, quadpts, theta_range)
    except ConfigError:   # the other criterion runs away: nothing to compare with
        return
    gap = abs(A - A2) + abs(B - B2)
    if gap > CC_DISAGREE:
        warn_user(f"{method} (A = {A:.3g}, B = {B:.3g}) and {other} (A = {A2:.3g}, "
                  f"B = {B2:.3g}) disagree: they place the new bank's thetas in [-1, 1] up to "
                  f"{gap:.2g} apart on the reference scale, so the {len(anchors)} anchors do not "
                  "pin the link down (groups that barely overlap in ability, e.g. banks "
                  "calibrated on weak and on strong models, with few anchors or anchors "
                  "extreme for one group); add anchors both groups answer neither always nor "
                  "never right, and check the link on models both banks can score")


def _check_same_items(ref, new, anchors, given: bool) -> None:
    """Common ids whose item text differs in the two banks (both carry a ``question``) are
    different items: an error, or a warning when the user named them as anchors."""
    from ..errors import warn_user

    texts = []
    for bank in (ref, new):
        meta = bank.metadata
        if meta is None or "question" not in meta.columns:
            return
        q = meta["question"].iloc[bank.index_of(anchors)]
        texts.append([" ".join(str(t).split()) if isinstance(t, str) else None for t in q])
    differ = [(i, r, n) for i, r, n in zip(anchors, *texts) if r and n and r != n]
    if not differ:
        return
    i, r, n = differ[0]
    msg = (f"{len(differ)} of the {len(anchors)} common ids name different questions in the two "
           f"banks (id {i!r}: {r[:40]!r} vs {n[:40]!r}): they are not the same items")
    if given:
        warn_user(msg + "; linking through them as --anchors says")
        return
    raise ConfigError(msg + "; give the ids of items both banks share with --anchors")


def _too_few_anchors(ref: ItemBank, new: ItemBank, anchors, given: bool) -> str:
    """Why fewer than 2 anchors: the user's list, or the banks' ids (R's 'X' named when
    stripping it would make more of them match)."""
    from ..validation import normalize_item_id

    shared = sum(i in new for i in ref.item_ids)
    if given:
        return (f"the anchor list names {len(anchors)} item(s); linking needs at least 2 "
                f"common anchor items (the banks share {shared})")
    strip = {normalize_item_id(i) for i in ref.item_ids}
    stripped = sum(normalize_item_id(i) in strip for i in new.item_ids)
    bare = {normalize_item_id(i.strip()) for i in ref.item_ids}
    spaced = sum(normalize_item_id(i.strip()) in bare for i in new.item_ids)
    hint = (f"; they share {stripped} once R's 'X' is stripped from ids (X514 = 514): pass "
            "--normalize-ids (Python: ItemBank.read(..., normalize_ids=True))"
            if stripped > shared else
            f"; they share {spaced} once the spaces around ids are dropped: write the ids "
            "without them" if spaced > shared else "")
    return (f"the banks share {shared} item(s); linking needs at least 2 common anchor "
            f"items (ref: {list(ref.item_ids[:3])}, new: {list(new.item_ids[:3])}){hint}")


def _ordinal(*banks) -> bool:
    from .polybank import PolyBank

    return any(isinstance(b, PolyBank) for b in banks)


def _constants(ref: ItemBank, new: ItemBank, anchors, method: str, quadpts: int, theta_range):
    """(A, B, criterion or None) of ``method`` on the ``anchors`` (ids in both banks)."""
    from ..validation import check_link_anchors, check_linking_result

    r, n = ref.subset(anchors), new.subset(anchors)
    if _ordinal(r, n):
        from .polylinking import as_poly, poly_constants

        r, n = as_poly(r, "reference"), as_poly(n, "new")
        check_link_anchors(r, n, "ordinal")
        A, B, crit = poly_constants(r, n, method, quadpts, theta_range)
        check_linking_result(A, B, method)
        return A, B, crit
    check_link_anchors(r, n, method)
    crit = None
    if method == "mean-sigma":
        A, B = mean_sigma(r.b, n.b)
    elif method == "mean-mean":
        A, B = mean_mean(r.a, r.b, n.a, n.b)
    else:
        A, B, crit = _cc_link(r, n, method, quadpts, theta_range)
    check_linking_result(A, B, method)
    return A, B, crit


def anchor_drift(ref, new, A: float, B: float, *, drift_z: float = DRIFT_Z,
                 drift_min: float = DRIFT_MIN, quadpts: int = QUADPTS) -> pd.DataFrame:
    """Each anchor's drift after linking (module docstring), indexed by item id.

    ``ref`` and ``new`` hold the same anchors in the same order; columns ``b_ref``,
    ``b_linked`` (A b_new + B; an ordinal item's mean threshold), ``d`` (their gap),
    ``robust_z`` (of d, for reference), ``icc_gap`` (mean linked minus reference P, or expected
    level as a share of its range, N(0, 1)-weighted), ``drift_z`` (the robust z of icc_gap, or
    with ``b_se`` in both binary banks d over its SE), ``threshold`` (what |drift_z| must pass:
    :func:`drift_threshold`), ``icc_rmsd`` (reference vs linked curve),
    ``slope_flips`` (a > 0 in one bank, a <= 0 in the other: not the same item) and
    ``flagged`` (a flip, or |drift_z| > ``threshold`` and |d - median d| >
    ``drift_min`` with ``MIN_DRIFT_ANCHORS`` anchors or more).
    """
    from ..validation import check_finite

    check_finite(drift_z, "drift_z (CLI --drift-z)")
    check_finite(drift_min, "drift_min (CLI --drift-min)")
    if not drift_z > 0:
        raise ConfigError(f"drift_z (CLI --drift-z) must be > 0, got {drift_z:g}")
    if drift_min < 0:
        raise ConfigError(f"drift_min (CLI --drift-min) must be >= 0, got {drift_min:g}")
    if _ordinal(ref, new):
        from .polylinking import as_poly

        ref, new = as_poly(ref, "reference"), as_poly(new, "new")
    linked = Linking(A, B, "").transform(new)
    b_ref, b_linked = ((ref.locations(), linked.locations()) if _ordinal(ref)
                       else (ref.b, linked.b))
    d = b_linked - b_ref
    med = np.median(d)
    z = _robust_z(d, d)
    flips = np.sign(ref.a) != np.sign(new.a)   # the same item cannot turn around on a scale
    same = ~flips if (~flips).sum() >= 2 else np.ones_like(flips)   # flipped: not a yardstick
    quad = normal_quadrature(quadpts, THETA_RANGE)
    diff = _curve01(linked, quad.nodes) - _curve01(ref, quad.nodes)   # as icc_rmsd's grid
    gap = quad.weights @ diff
    se = _linked_b_se(ref, linked)
    if se is None:
        test = _robust_z(gap, gap[same])
    else:
        test = np.where(se > 0, (d - np.median(d[same])) / se, 0.0)
    cut = drift_threshold(len(d), drift_z, se=se is not None)
    flagged = flips | ((np.abs(test) > cut)
                       & (np.abs(d - med) > drift_min) & (len(d) >= MIN_DRIFT_ANCHORS))
    return pd.DataFrame({"b_ref": b_ref, "b_linked": b_linked, "d": d, "robust_z": z,
                         "icc_gap": gap, "drift_z": test, "threshold": cut,
                         "icc_rmsd": np.sqrt(quad.weights @ diff**2),
                         "slope_flips": flips, "flagged": flagged},
                        index=pd.Index(list(ref.item_ids), name="item_id"))


def drift_threshold(k: int, drift_z: float = DRIFT_Z, *, se: bool = False) -> float:
    """The |z| an anchor's drift statistic must pass among ``k`` anchors, a family-wise rate
    (more sound anchors must not mean more flags by chance). The robust z of the curves' gap:
    ``drift_z`` up to 20 anchors, then growing as the two-sided Bonferroni quantile of the
    normal at ``DRIFT_ALPHA``, ``drift_z`` z_(alpha/2k) / z_(alpha/40) (4.27 at 40, 4.61 at
    100). With standard errors (``se``), a z that is N(0, 1) for a sound anchor: z_(alpha/2k)
    itself at the default ``drift_z`` (3.02 at 10 anchors, 3.23 at 40), scaled by
    ``drift_z`` / ``DRIFT_Z`` otherwise."""
    from scipy.stats import norm

    if se:
        return float(drift_z / DRIFT_Z * norm.isf(DRIFT_ALPHA / (2 * max(k, 1))))
    return float(drift_z * norm.isf(DRIFT_ALPHA / (2 * max(k, 20))) / norm.isf(DRIFT_ALPHA / 40))


def _robust_z(x, among) -> np.ndarray:
    """(x - median) / (0.74 IQR), median and IQR of ``among``: Huynh and Meyer's robust z; an
    IQR of 0 makes any value off the median infinite."""
    q75, med, q25 = np.percentile(among, [75, 50, 25])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == med, 0.0, (x - med) / (0.74 * (q75 - q25)))


def _linked_b_se(ref, linked):
    """sqrt(se_linked^2 + se_ref^2) of each anchor's b gap when both binary banks carry a finite
    ``b_se`` column (the linked bank's is already A se_new: :func:`.linkmoments.linked_metadata`;
    A's own error is shared by every anchor and left out), else None."""
    ses = []
    for bank in (ref, linked):
        meta = getattr(bank, "metadata", None)
        if _ordinal(bank) or meta is None or "b_se" not in meta.columns:
            return None
        ses.append(pd.to_numeric(meta["b_se"], errors="coerce").to_numpy(float))
    se = np.sqrt(ses[0] ** 2 + ses[1] ** 2)
    return se if np.all(np.isfinite(se)) else None


def icc_rmsd(bank1: ItemBank, bank2: ItemBank, *, quadpts: int = QUADPTS,
             theta_range=THETA_RANGE) -> pd.Series:
    """Per-item RMSD between two banks' characteristic curves, weighted by N(0, 1).

    RMSD_j = sqrt(sum_q pi_q (P1_j(x_q) - P2_j(x_q))^2) over the items of ``bank1`` that are in
    ``bank2`` (indexed by item id, in ``bank1`` order); an ordinal item's P is its expected
    level as a share of its range of levels.
    """
    common = [i for i in bank1.item_ids if i in bank2]
    if not common:
        raise ConfigError("the two banks have no item in common")
    quad = normal_quadrature(quadpts, theta_range)
    p1 = _curve01(bank1.subset(common), quad.nodes)
    p2 = _curve01(bank2.subset(common), quad.nodes)
    rmsd = np.sqrt(quad.weights @ (p1 - p2) ** 2)
    return pd.Series(rmsd, index=pd.Index(common, name="item_id"), name="icc_rmsd")


def _curve01(bank, x) -> np.ndarray:
    """(q, m): P of a binary item, an ordinal item's expected level mapped to [0, 1]."""
    from .polybank import PolyBank

    if not isinstance(bank, PolyBank):
        return bank.probability(x)
    lo, hi = bank.level_ends[:, 0], bank.level_ends[:, 1]
    return (bank.expected_score(x) - lo) / np.where(hi > lo, hi - lo, 1.0)
