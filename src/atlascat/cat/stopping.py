"""Stopping rules: small components the engine asks, after every answer, whether to stop.

Each rule looks at the state of a block of examinees (``rows``) and returns a boolean array;
the engine evaluates the rules in order and records the name of the first one that fires as the
examinee's ``stop_reason``. Precision and cost rules only fire once ``n >= min_items``; the
length and budget rules always apply.

=================  ========================================================================
rule               stops when
=================  ========================================================================
``floor``          theta + z SE < floor_theta (the test is sure the examinee is where the
                   score link's curve is within a margin of its lowest value: at or near
                   chance; ``bound_z`` = z)
``ceiling``        theta - z SE > ceiling_theta (the same at the top of the curve)
``score_precision``SD of the score link's curve over N(theta, SE^2) <= the link's target at
                   theta (a fraction of the published score's residual SD there): more items
                   cannot narrow the predicted score's interval by more than a few percent
``se``             SE <= se_stop (SE per ``se_method``: information or posterior SD)
``reliability``    1 - posterior variance / prior variance >= reliability_stop
``min_information``the best remaining item has I_j(theta) < min_info_stop
``cost``           value_per_se x E[SE reduction by the next best item] < its cost
                   (cost-aware stopping; the expected reduction is 1/sqrt(I + P) -
                   1/sqrt(I + I_best + P) for the information SE, and the preposterior
                   expected posterior SD for the posterior SE)
``budget``         spent cost + cost of the cheapest item left > budget
``max_items``      n >= max_items
=================  ========================================================================

The floor and ceiling rules (catR's classification stop, Magis and Raiche, 2012, with the
thresholds where the leaderboard score stops moving) come before ``se``, so that a test ending
there says so; so does the score-precision rule, which generalizes them to curves that are
flat but not level (ARC's whole-population curve rises 3 points per theta unit near chance,
where the bank has no information: weak models never reach SE 0.2 nor clear a 2-point
floor). The CAT layer does not know score links: the thresholds and curves are plain numbers
in the config, produced by ``ScoreLink.stop_settings(margin)``.

The engine object passed to ``check`` exposes, per examinee row, ``n_items``, ``theta``, ``se``,
``post_sd``, ``test_info`` (sum of item information at theta), ``spent`` (cost so far),
``scores`` and ``items`` (answers and bank positions so far, NaN / -1 padded), ``used`` (items
out of the pool), and ``config``, ``prior_precision``, ``item_cost`` and
``best_remaining(rows)`` -> (best item, its information), computed once per check and shared by
the rules that need it.

Your own rule: subclass :class:`StopRule` (a ``reason`` and a vectorized ``check``; set
``precision = False`` for a rule that may fire before ``min_items``) and pass it as
``CATConfig(stop_rules=[rule])`` (``Stopping(rules=...)``); :func:`build_stop_rules` checks it
after the built-in rules, before ``max_items``.

References
----------
Babcock, B. and Weiss, D. J. (2012). Termination criteria in computerized adaptive tests: do
variable-length CATs provide efficient and effective measurement? JCAT, 1, 1-18.
Magis, D. and Raiche, G. (2012). Random generation of response patterns under computerized
adaptive testing with the R package catR. Journal of Statistical Software, 48(8) (stop rule
"classification").
Wainer, H. (ed.) (2000). Computerized Adaptive Testing: A Primer, ch. 5 (stopping rules).
"""
from __future__ import annotations

import numpy as np

__all__ = [
    "StopRule",
    "ScorePrecisionStop",
    "SEStop",
    "FloorStop",
    "CeilingStop",
    "ReliabilityStop",
    "MinInformationStop",
    "CostAwareStop",
    "BudgetStop",
    "MaxItemsStop",
    "build_stop_rules",
]


class StopRule:
    """Base class: ``check(engine, rows) -> bool array``; ``reason`` names the rule."""

    reason = "base"
    precision = True  # only fires once n >= min_items

    def check(self, engine, rows) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class SEStop(StopRule):
    """SE <= tau."""

    reason = "se"

    def __init__(self, tau: float):
        self.tau = float(tau)

    def check(self, engine, rows):
        return engine.se[rows] <= self.tau

    def __repr__(self) -> str:
        return f"SEStop(tau={self.tau})"


class FloorStop(StopRule):
    """theta + z SE < floor_theta: the examinee's theta range lies wholly where the score link's
    curve is within its margin of the bottom (at or near chance)."""

    reason = "floor"

    def __init__(self, floor_theta: float, z: float = 1.96):
        self.floor_theta = float(floor_theta)
        self.z = float(z)

    def check(self, engine, rows):
        return engine.theta[rows] + self.z * engine.se[rows] < self.floor_theta

    def __repr__(self) -> str:
        return f"FloorStop(floor_theta={self.floor_theta}, z={self.z})"


class ScorePrecisionStop(StopRule):
    """The predicted score is as precise as the score link allows: SD of g over N(theta, SE^2)
    <= target(theta).

    ``curve`` (g, a score link's curve) and ``target`` are values on ``linspace(-6, 6, K)``;
    the SD is taken over 9 Gauss-Hermite nodes. Where g is flat (chance level, the top of the
    leaderboard) a wide theta SE already gives a precise score and the test stops; where g is
    steep the SE rule decides. The link sets the target to a fraction of the published score's
    residual SD at theta, so that more items could narrow the score's interval by a few
    percent at most.
    """

    reason = "score_precision"

    def __init__(self, curve, target):
        self.curve = np.asarray(curve, float)
        self.target = np.asarray(target, float)
        self.grid = np.linspace(-6.0, 6.0, self.curve.size)
        z, w = np.polynomial.hermite_e.hermegauss(9)
        self.z, self.w = z, w / w.sum()

    def check(self, engine, rows):
        th = engine.theta[rows]
        pts = th[:, None] + engine.se[rows][:, None] * self.z[None, :]
        g = np.interp(pts, self.grid, self.curve)
        mean = g @ self.w
        sd = np.sqrt(np.maximum(((g - mean[:, None]) ** 2) @ self.w, 0.0))
        return sd <= np.interp(th, self.grid, self.target)

    def __repr__(self) -> str:
        return f"ScorePrecisionStop(K={self.curve.size})"


class CeilingStop(StopRule):
    """theta - z SE > ceiling_theta: the theta range lies wholly where the curve is within its
    margin of the top."""

    reason = "ceiling"

    def __init__(self, ceiling_theta: float, z: float = 1.96):
        self.ceiling_theta = float(ceiling_theta)
        self.z = float(z)

    def check(self, engine, rows):
        return engine.theta[rows] - self.z * engine.se[rows] > self.ceiling_theta

    def __repr__(self) -> str:
        return f"CeilingStop(ceiling_theta={self.ceiling_theta}, z={self.z})"


class ReliabilityStop(StopRule):
    """Marginal reliability of the estimate, 1 - var(theta | y) / var(theta) >= target."""

    reason = "reliability"

    def __init__(self, target: float, prior_sd: float):
        self.target = float(target)
        self.prior_var = float(prior_sd) ** 2

    def check(self, engine, rows):
        return 1.0 - engine.post_sd[rows] ** 2 / self.prior_var >= self.target


class MinInformationStop(StopRule):
    """The best item left has Fisher information below ``threshold`` at theta."""

    reason = "min_information"

    def __init__(self, threshold: float):
        self.threshold = float(threshold)

    def check(self, engine, rows):
        best, info = engine.best_remaining(rows)
        return (best >= 0) & (info < self.threshold)   # no item left: bank_exhausted


class CostAwareStop(StopRule):
    """Stop when the value of the next best item's expected SE reduction is below its cost.

    With v = value per unit of SE and c_j the cost of the best remaining item j* (by Fisher
    information at theta, per unit cost under ``mfi-cost``; among the items the budget
    allows): stop iff v * (SE_now - E[SE after j*]) < c_j*. For the information
    SE, E[SE after j*] = 1 / sqrt(I(theta) + I_j*(theta) + 1/sigma^2) (no 1/sigma^2 for the
    ML and WLE estimators); for the posterior SE it
    is sum_y P(y) SD(theta | y_1..n, y), y in {0, 1} (preposterior analysis); on a bank of
    continuous scores (a ``dispersion`` column: y is not 0/1) the normal approximation
    1 / sqrt(1 / SD^2 + I_j*(theta)), I_j* divided by the item's dispersion.
    """

    reason = "cost"

    def __init__(self, value_per_se: float):
        self.value = float(value_per_se)

    def check(self, engine, rows):
        best, info = engine.best_affordable(rows)   # within the budget, if any
        info = np.where(best >= 0, info, 0.0)   # no item left (-inf): nothing to gain
        if engine.config.estimation.se_method == "information":
            after = 1.0 / np.sqrt(engine.test_info[rows] + info + engine.tab.se_precision)
        elif engine.tab.dispersion is not None:
            after = 1.0 / np.sqrt(1.0 / np.maximum(engine.se[rows], 1e-12) ** 2 + info)
        else:
            after = engine.expected_posterior_sd(rows, best)
        gain = self.value * np.maximum(engine.se[rows] - after, 0.0)
        cost = engine.item_cost[np.maximum(best, 0)]
        return (best >= 0) & (gain < cost)   # no item left: bank_exhausted


class BudgetStop(StopRule):
    """Stop when no item left fits in the budget: spent + min cost of the available items > B.

    With item costs (``cost_column``) the engine also never selects an item that would exceed
    the budget, so the total cost never passes it.
    """

    reason = "budget"
    precision = False

    def __init__(self, budget: float):
        self.budget = float(budget)

    def check(self, engine, rows):
        if engine.uniform_cost:
            cheapest = np.full(len(rows), engine.item_cost[0])
        else:
            cost = np.where(engine.used[rows], np.inf, engine.item_cost[None, :])
            cheapest = cost.min(axis=1)
        left = engine.n_used[rows] < engine.tab.n_items   # none left: bank_exhausted
        return left & (engine.spent[rows] + cheapest > self.budget * (1 + 1e-12))


class MaxItemsStop(StopRule):
    """n >= max_items."""

    reason = "max_items"
    precision = False

    def __init__(self, max_items: int):
        self.max_items = int(max_items)

    def check(self, engine, rows):
        return engine.n_items[rows] >= self.max_items


def build_stop_rules(config) -> list[StopRule]:
    """The rules a config enables, in the order they are checked."""
    stop = config.stopping
    rules: list[StopRule] = []
    if stop.floor_theta is not None:
        rules.append(FloorStop(stop.floor_theta, stop.bound_z))
    if stop.ceiling_theta is not None:
        rules.append(CeilingStop(stop.ceiling_theta, stop.bound_z))
    if stop.score_curve is not None:
        rules.append(ScorePrecisionStop(stop.score_curve, stop.score_sd_stop))
    if stop.se_stop is not None:
        rules.append(SEStop(stop.se_stop))
    if stop.reliability_stop is not None:
        rules.append(ReliabilityStop(stop.reliability_stop, config.estimation.prior_sd))
    if stop.min_info_stop is not None:
        rules.append(MinInformationStop(stop.min_info_stop))
    if stop.value_per_se is not None:
        rules.append(CostAwareStop(stop.value_per_se))
    if stop.budget is not None:
        rules.append(BudgetStop(stop.budget))
    rules.extend(stop.rules)  # the user's own (CATConfig(stop_rules=...))
    rules.append(MaxItemsStop(stop.max_items))
    return rules
