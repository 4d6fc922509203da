"""Calibration defaults: the IRT model and item priors chosen from the size of the data.

``calibrate(responses)`` with no model and no priors given (``model="auto"``, ``prior_a="auto"``,
``prior_c="auto"``) resolves them here, from N = the number of subjects (sum of pattern
frequencies):

==============  ======  ======================================  ==================================
N (subjects)    model   priors                                  why (held-out log-loss, below)
==============  ======  ======================================  ==================================
N < 500         2PL     a ~ lognormal(0, 1)                     best or tied at 10-20 models, few
                                                                extreme slopes to 200; beats the 1PL
500 <= N < 1000 3PL     a ~ lognormal(0, 0.3), c ~ beta(10, 40) first held-out run (3PL settings)
N >= 1000       4PL     a ~ normal(1, 0.5), c ~ beta(5, 17),    held-out log-loss below mirt's
                        u ~ beta(10, 2)                         3PL on 6 of 6 leaderboards
==============  ======  ======================================  ==================================

The 4PL row (second run, after the engine kept u > c): every other 4PL and 3PL setting tried
either lost to mirt's prior-free 3PL on held-out log-loss (every log-normal slope prior: it
forbids the negative slopes a few mislabelled items need) or kept 25-80% of items at a > 5 (no
slope prior). The normal prior on the raw slope does both: -0.0003 to -0.0023 log-loss per
response against mirt, 0-6% of items with a > 5, CAT coverage 0.92-0.99; Winogrande keeps 8% of
items with c > 0.5 (two options: chance is 0.5). Below 1000 subjects (size study on ARC,
TruthfulQA, Winogrande) it still beats the 3PL band's priors but trails mirt's 3PL on two of
three; the 3PL band stays there, where the identification table asks for about 1000 subjects
for a 4PL even with priors.

Both choices were made on held-out models (``benchmarks/bench_calibration_defaults.py``; tables
in ``docs/calibration.md``):

- the size bands by a subsampling study on the dense ARC and TruthfulQA matrices (N random train
  models, the same held-out models): the slope prior is what makes small samples work. Without it
  a 2PL or 3PL at N <= 50 predicts held-out answers far worse than a 1PL (log-loss 0.39-1.29 vs
  0.33-0.38); with it the 2PL beats the 1PL at every N from 10 up (TruthfulQA N = 10: 0.356 vs
  0.381) and the prior-ed 3PL overtakes the 2PL between 200 and 500 models (ARC 500: 0.265 vs
  0.267; TruthfulQA 500: 0.270 vs 0.271, 1000: 0.263 vs 0.269). This agrees with the
  sample-size literature for marginal ML without priors (2PL: several hundred subjects, 3PL:
  about 1000; Hulin, Lissak and Drasgow, 1982; de Ayala, 2009, ch. 5) once priors are counted
  (Mislevy, 1986). No 1PL band: the data never preferred it.
- the large-sample priors among 7 settings on 6 benchmarks: the rule (mean CAT coverage >= 0.95
  and mean held-out log-loss within 0.01 of mirt's, then the fewest items with a > 5 or
  c > 0.5) picks a ~ lognormal(0, 0.3), c ~ beta(10, 40). It does NOT predict held-out answers
  better than mirt's prior-free 3PL (0.0016-0.0116 worse per response): at N ~ 2000 the maximum
  likelihood fit is the better predictor, the steep slopes are in the data. It trades that for
  CAT coverage closer to nominal (mean 0.956 vs 0.939) and 5-29% instead of 1-53% extreme items.

``mirt_defaults=True`` (CLI ``--mirt-defaults``) restores mirt's choice for parity: 3PL, no priors,
whatever the size. An explicit model or prior is always kept, but a model that the data cannot
identify is flagged with an :class:`IdentificationWarning` (also listed in the fitted object's
``settings["defaults"]["warnings"]``):

- the model has more item parameters than the sample supports: N below
  ``MODEL_MIN_SUBJECTS_NO_PRIOR`` (without priors: 1PL 30, Linacre's +-1 logit at 95%; 2PL 500;
  3PL 1000; 4PL 2000) or ``MODEL_MIN_SUBJECTS_WITH_PRIOR`` (2PL 100, 3PL 500, 4PL 1000) for it,
  for example a 3PL on 21 subjects;
- fewer subjects than ``SUBJECTS_PER_PARAMETER`` (5) per free parameter of an item;
- items every subject answered the same way (their MLE is at infinity; left out) or with fewer
  than ``MIN_MINORITY`` (3) answers in their rarer category (slope and asymptote then rest on
  one or two answers).

An automatic choice smaller than the large-sample model is announced by a
:class:`DefaultsWarning` naming the model and the reason, so a 21-model leaderboard is never
calibrated silently as a "converged" 3PL.

References
----------
Hulin, C. L., Lissak, R. I. and Drasgow, F. (1982). Recovery of two- and three-parameter logistic
item characteristic curves: a Monte Carlo study. Applied Psychological Measurement, 6, 249-260.
Linacre, J. M. (1994). Sample size and item calibration stability. Rasch Measurement
Transactions, 7(4), 328.
de Ayala, R. J. (2009). The Theory and Practice of Item Response Theory. Guilford.
Mislevy, R. J. (1986). Bayes modal estimation in item response models. Psychometrika, 51, 177-195.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import warn_user
from . import arrays
from .colstats import binary_counts

__all__ = ["AUTO", "QUADPTS", "SCORE_QUADPTS", "SCORE_QUADRATURE", "THETA_RANGE", "MAX_ITER", "TOL", "CONVERGENCE", "LINK", "DefaultsChoice", "DefaultsWarning", "IdentificationWarning",
           "MODEL_MIN_SUBJECTS", "LARGE_N_DEFAULT", "LARGE_N_PRIOR_U", "MID_N_DEFAULT",
           "SMALL_N_DEFAULT", "PREDICTION_PRIOR_SD", "PREDICTION_MIN_SOURCES", "choose_defaults",
           "is_auto", "identification_problems", "resolve"]

AUTO = "auto"
#: the quadrature grid every marginal likelihood, EAP and fit statistic integrates on by
#: default: mirt's for one factor, 61 equally spaced nodes on [-6, 6]
QUADPTS = 61
#: the EAP score's grid (estimate_ability, atlas score): mirt's fscores default for one
#: factor, 121 nodes on [-6, 6]; 61 nodes are 0.2 apart, too coarse for a posterior SD of 0.1
#: (hundreds of items), where the 61-node EAP is up to 0.05 off
SCORE_QUADPTS = 121
#: how the EAP score integrates (estimate_ability, eap, atlas score --quadrature, the scores a
#: calibration carries): "adaptive" keeps the grid's numbers where they agree with every other
#: node's and integrates the others again on a grid 8 times finer (irt.adaptquad: the posterior
#: SD within 1e-5 of a 20,001-node grid, where the grid alone leaves it up to 30% off on the
#: shipped leaderboards); "fixed": the grid alone (mirt's fscores)
SCORE_QUADRATURE = "adaptive"
#: anchor drift in linking: |z| of the anchor's curve gap (or b gap over its SE) above DRIFT_Z
#: (up to 20 anchors; more beyond, linking.drift_threshold) and a b gap DRIFT_MIN from the median
DRIFT_Z = 4.0
DRIFT_MIN = 0.3
#: family-wise rate of drift flags among sound anchors (the threshold grows with their number)
DRIFT_ALPHA = 0.05
THETA_RANGE = (-6.0, 6.0)
#: the prior SD of the EAP behind an ordinal bank's predicted mean rating (N(0, 3^2)): the
#: target model is not drawn from the calibration population N(0, 1), and under that prior a
#: model stronger than every source model is shrunk toward them (benchmarks/results/polytomous.md)
PREDICTION_PRIOR_SD = 3.0
#: the fewest source models (an ordinal bank's median ``n_responses``) from which its predicted
#: mean rating's 95% interval held 95% of held-out models; below, the interval holds theta's
#: uncertainty, not the calibration's, and says so (benchmarks/results/polytomous.md)
PREDICTION_MIN_SOURCES = 100
#: EM's stopping rule: at most MAX_ITER iterations, stop when the largest parameter change
#: (CONVERGENCE "params", mirt's rule) is below TOL; partitions linked by LINK
MAX_ITER = 1000
TOL = 1e-4
#: the binary models calibrate fits (re-exported by irt.calibrate; here so a config can check a
#: name without importing the calibration code)
MODELS = ("rasch", "1pl", "2pl", "3pl", "4pl")
CONVERGENCE = "params"
LINK = "mean-sigma"
# smallest N (subjects) at which the default uses each model
MODEL_MIN_SUBJECTS = {"2pl": 0, "3pl": 500, "4pl": 1000}
# the same without priors (an explicit model with no prior is flagged below these)
MODEL_MIN_SUBJECTS_NO_PRIOR = {"rasch": 30, "1pl": 30, "2pl": 500, "3pl": 1000, "4pl": 2000}
# ... and with priors on the slope (and c): below these an IdentificationWarning is given
MODEL_MIN_SUBJECTS_WITH_PRIOR = {"rasch": 30, "1pl": 30, "2pl": 100, "3pl": 500, "4pl": 1000}
# the defaults per size band: (model, prior_a, prior_c); the 4PL's prior on u is LARGE_N_PRIOR_U
SMALL_N_DEFAULT = ("2pl", "lognorm(0,1)", None)
MID_N_DEFAULT = ("3pl", "lognorm(0,0.3)", "beta(10,40)")
LARGE_N_DEFAULT = ("4pl", "norm(1,0.5)", "beta(5,17)")
LARGE_N_PRIOR_U = "beta(10,2)"
MIRT_DEFAULT = ("3pl", None, None)
# the automatic priors of each model (what an explicit model with prior_a/prior_c="auto" gets):
# the ones measured for it on held-out data
MODEL_PRIORS = {"rasch": (None, None), "1pl": (None, None), "2pl": SMALL_N_DEFAULT[1:],
                "3pl": MID_N_DEFAULT[1:], "4pl": LARGE_N_DEFAULT[1:]}
# the automatic prior on the 4PL's upper asymptote u (none below the 4PL, none under
# mirt_defaults)
MODEL_PRIOR_U = {"4pl": LARGE_N_PRIOR_U}
SUBJECTS_PER_PARAMETER = 5
MIN_MINORITY = 3
_PER_ITEM = {"rasch": 1, "1pl": 1, "2pl": 2, "3pl": 3, "4pl": 4}


class IdentificationWarning(UserWarning):
    """The data cannot pin down some of the model's parameters (too few subjects or answers)."""


@dataclass
class DefaultsChoice:
    """What :func:`choose_defaults` resolved and why (stored in the calibration's settings)."""

    model: str
    prior_a: object
    prior_c: object
    n_subjects: float
    n_items: int
    source: str                      # "auto" | "user" | "mirt"
    reason: str
    warnings: list = field(default_factory=list)
    prior_u: object = None           # 4PL only


    def to_dict(self) -> dict:
        d = asdict(self)
        d["prior_a"] = None if self.prior_a is None else str(self.prior_a)
        d["prior_c"] = None if self.prior_c is None else str(self.prior_c)
        d["prior_u"] = None if self.prior_u is None else str(self.prior_u)
        return d


def is_auto(value) -> bool:
    """True for the setting "auto" (any case, surrounding blanks ignored)."""
    return isinstance(value, str) and value.strip().lower() == AUTO


_is_auto = is_auto   # former name


def _is_none(value) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in ("none", ""))


def default_for_size(n_subjects: float) -> tuple[str, object, object, str]:
    """(model, prior_a, prior_c, reason) of the size band of ``n_subjects``."""
    n = float(n_subjects)
    if n < MODEL_MIN_SUBJECTS["3pl"]:
        m, pa, pc = SMALL_N_DEFAULT
        why = (f"{n:g} subjects < {MODEL_MIN_SUBJECTS['3pl']}: 2PL with a ~ {pa} (the prior-ed "
               "2PL was best or tied on held-out models at 10-20 train models and keeps extreme "
               "slopes rare below 500; lower asymptotes need more subjects)")
    elif n < MODEL_MIN_SUBJECTS["4pl"]:
        m, pa, pc = MID_N_DEFAULT
        why = (f"{MODEL_MIN_SUBJECTS['3pl']} <= {n:g} subjects < {MODEL_MIN_SUBJECTS['4pl']}: "
               f"3PL with priors a ~ {pa}, c ~ {pc} (a 4PL needs about "
               f"{MODEL_MIN_SUBJECTS['4pl']} subjects even with priors; docs/calibration.md)")
    else:
        m, pa, pc = LARGE_N_DEFAULT
        why = (f"{n:g} subjects >= {MODEL_MIN_SUBJECTS['4pl']}: 4PL with priors a ~ {pa}, "
               f"c ~ {pc}, u ~ {LARGE_N_PRIOR_U} (better held-out log-loss than mirt's 3PL on "
               "6 of 6 leaderboards; docs/calibration.md)")
    return m, pa, pc, why


def identification_problems(values: np.ndarray, weights, model: str, prior_a, prior_c, *,
                            suggest_auto: bool = True, counts=None) -> list[str]:
    """One-line descriptions of what the data cannot identify under ``model`` (may be empty).
    ``counts``: the :class:`atlascat.irt.colstats.BinaryCounts` of ``values`` (0/1 answers)
    when the caller holds them, used instead of a pass over the data."""
    model = str(model).lower()
    w = np.ones(values.shape[0]) if weights is None else np.asarray(weights, float)
    n = float(w.sum())
    out = []
    per = _PER_ITEM.get(model, 3)
    unpriored = (model in ("2pl", "3pl", "4pl") and _is_none(prior_a)) or \
                (model in ("3pl", "4pl") and _is_none(prior_c))
    table = MODEL_MIN_SUBJECTS_NO_PRIOR if unpriored else MODEL_MIN_SUBJECTS_WITH_PRIOR
    limit = table.get(model, 0)
    if n < limit:
        what = "difficulties" if model in ("rasch", "1pl") else "item parameters"
        prior = "" if model in ("rasch", "1pl") else (" without priors" if unpriored
                                                       else " even with priors")
        name = "Rasch" if model == "rasch" else model.upper()   # as mirt's itemtype
        out.append(f"a {name} on {n:g} subjects: its {what} are weakly identified by so "
                   f"few answers{prior} (it needs about {limit}); treat the bank as provisional"
                   + ("" if model in ("rasch", "1pl") or not suggest_auto
                      else " or use model='auto' (CLI --model auto)"))
    if n < SUBJECTS_PER_PARAMETER * per and model not in ("rasch", "1pl"):
        out.append(f"{n:g} subjects for {per} parameters per item (fewer than "
                   f"{SUBJECTS_PER_PARAMETER} per parameter): estimates lean on the priors")
    if counts is None and weights is None and arrays.has_nan(values):
        counts = binary_counts(values)
    binary = counts is not None
    if binary and weights is None and counts.has_missing:
        # 0/1 answers, one weight each: sums of ones counted exactly
        right, seen = counts.right.astype(float), counts.seen.astype(float)
    elif arrays.has_nan(values):
        right = np.where(np.isnan(values), 0.0, values).T @ w
        seen = arrays.observed_t(values) @ w
    else:  # dense: one matrix-vector product, no temporaries
        right = values.T @ w
        seen = np.full(values.shape[1], w.sum())
    minority = np.minimum(right, seen - right)
    const = int(np.sum(minority == 0))
    if const:
        out.append(f"{const} item(s) were answered the same way by every subject: not identified "
                   "(left out)")
    few = int(np.sum((minority > 0) & (minority < MIN_MINORITY)))
    if few and model not in ("rasch", "1pl"):
        with np.errstate(invalid="ignore"):   # continuous: no categories
            scores = False if binary else bool(np.any((values > 0) & (values < 1)))
        out.append(f"{few} item(s) have fewer than {MIN_MINORITY} answers in their rarer "
                   "category" if not scores else
                   f"{few} item(s) have scores summing to less than {MIN_MINORITY} full "
                   "ranges from their floor or their ceiling (nearly every subject at the "
                   "lowest or at the highest score)")
        out[-1] += ": their slopes (and asymptotes) are barely identified"
    return out


def choose_defaults(model, prior_a, prior_c, *, n_subjects: float, n_items: int,
                    mirt_defaults: bool = False, prior_u=AUTO) -> DefaultsChoice:
    """Resolve ``"auto"`` model and priors for data of ``n_subjects`` x ``n_items``.

    Explicit values (a model name, a prior spec, or None for no prior) are kept. With
    ``mirt_defaults`` the automatic values are mirt's: 3PL, no priors.
    """
    auto_model = _is_auto(model)
    if mirt_defaults:
        m, pa, pc = MIRT_DEFAULT
        why = ("the paper's mirt fit (3PL, no priors) requested for parity; mirt's own default "
               "itemtype is the 2PL (model='2pl', prior_a=None)")
        source = "mirt"
    else:
        m, pa, pc, why = default_for_size(n_subjects)
        source = "auto"
    chosen = m if auto_model else str(model).lower()
    if not auto_model:
        source = "user"
        why = f"model {chosen!r} given by the caller"
    # priors: explicit ones kept; automatic ones are the resolved model's own (MODEL_PRIORS:
    # a 2PL gets the slope prior measured for the 2PL, a 1PL none), or none under mirt_defaults
    auto_a, auto_c = (None, None) if mirt_defaults else MODEL_PRIORS.get(chosen, (None, None))
    prior_a = auto_a if _is_auto(prior_a) else (None if _is_none(prior_a) else prior_a)
    prior_c = auto_c if _is_auto(prior_c) else (None if _is_none(prior_c) else prior_c)
    auto_u = None if mirt_defaults else MODEL_PRIOR_U.get(chosen)
    prior_u = auto_u if _is_auto(prior_u) else (None if _is_none(prior_u) else prior_u)
    given = [f"{p} ~ {v}" for p, v in (("a", prior_a), ("c", prior_c), ("u", prior_u))
             if v is not None]
    if source == "user" and given:
        why += f"; priors {', '.join(given)}"
    return DefaultsChoice(model=chosen, prior_a=prior_a, prior_c=prior_c,
                          n_subjects=float(n_subjects), n_items=int(n_items), source=source,
                          reason=why, prior_u=prior_u)


def warn_problems(choice: DefaultsChoice, values, weights, stacklevel: int = 3,
                  counts=None) -> DefaultsChoice:
    """Add the identification problems of ``choice`` on these data and warn about each
    (``counts`` as :func:`identification_problems`')."""
    probs = identification_problems(values, weights, choice.model, choice.prior_a, choice.prior_c,
                                    suggest_auto=choice.source != "auto", counts=counts)
    for p in probs:
        warn_user(p, IdentificationWarning)
    choice.warnings = list(choice.warnings) + probs
    return choice


class DefaultsWarning(UserWarning):
    """The calibration chose the small-sample 2PL, not a 3PL/4PL, because of the data's size
    (says which and why)."""


def resolve(model, prior_a, prior_c, values: np.ndarray, weights, *,
            mirt_defaults: bool = False, stacklevel: int = 3, prior_u=AUTO,
            counts=None) -> DefaultsChoice:
    """:func:`choose_defaults` on these data, then warn: a :class:`DefaultsWarning` when the
    automatic model is smaller than the large-sample default, an :class:`IdentificationWarning`
    for each identification problem (``counts``: the data's
    :class:`atlascat.irt.colstats.BinaryCounts`, when held). Returns the choice (warnings
    listed in it)."""
    w = None if weights is None else np.asarray(weights, float)
    n = float(values.shape[0] if w is None else w.sum())
    choice = choose_defaults(model, prior_a, prior_c, n_subjects=n, n_items=values.shape[1],
                             mirt_defaults=mirt_defaults, prior_u=prior_u)
    if choice.source == "auto" and choice.model == SMALL_N_DEFAULT[0]:
        prior = "" if choice.prior_a is None else f" with a ~ {choice.prior_a}"
        msg = (f"{n:g} subjects x {values.shape[1]} items: calibrated as a "
               f"{choice.model.upper()}{prior}, not a {MID_N_DEFAULT[0].upper()}: below "
               f"{MODEL_MIN_SUBJECTS['3pl']} subjects lower asymptotes are not identified and the "
               "prior keeps extreme slopes rare (docs/calibration.md); pass model= (CLI --model) "
               "to override")
        warn_user(msg, DefaultsWarning)
        choice.warnings.append(msg)
    return warn_problems(choice, values, w, stacklevel=stacklevel, counts=counts)
