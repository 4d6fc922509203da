"""Whether a matrix of results measures one thing: Horn's parallel analysis of the raw item
correlations and of the fitted model's residuals.

**Something, not noise.** One latent trait shows as a first eigenvalue lambda_1 of the
inter-item correlation matrix well above what items of the same difficulties but unrelated to
one another give. Horn's parallel analysis (Horn 1965; Glorfeld 1995 for the 95th-percentile
rule) compares lambda_k with t_k, the 95th percentile of the k-th eigenvalues of ``n_perm``
matrices in which each item's column is permuted across the models independently (each item
keeps its difficulty, the items lose their common cause). The items measure something when
lambda_1 > :data:`MARGIN` t_1: one-trait 2PL matrices of 25 models x 40 items passed in 97-99%
of 400 (the rest show no more structure than random answers: 25 models cannot show it), random
answers of that size in none of 100.

**One thing, not two.** A second trait shows twice. (1) In the raw correlations, as a second
eigenvalue above random whose excess is a large share of the first's,
(lambda_2 - t_2) / (lambda_1 - t_1) >= :data:`SECOND_SHARE`; the ratio of the first two
eigenvalues is Lord's (1980) and Hattie's (1985) index, the excesses over random make it
comparable across sizes. Alone it mistakes "difficulty factors" (phi correlations of items of
very different difficulties: Hattie 1985) for a trait. (2) In what the fitted one-trait model
leaves unexplained: the standardised residuals x_ij - E[X_ij | theta_i] (Yen's (1984) Q3 is
their correlation matrix) have a first eigenvalue rho_1 whose excess over its own permutation
threshold s_1 is a large share of the raw first's, (rho_1 - s_1) / (lambda_1 - t_1) >=
:data:`SECOND_SHARE` (Smith 2002's principal components of residuals, judged by parallel
analysis as Raiche 2005). A fitted model absorbs difficulty factors, so (2) stays near 0 on
one-trait data; both must hold. The thresholds and their false-alarm and detection rates on
simulated and real matrices: ``benchmarks/bench_dimensionality.py``
(``benchmarks/results/dimensionality.md``).

The eigenvalues are those of the smaller of Z'Z / n and Z Z' / n, Z the n x p standardised
answers (a missing answer at its item's mean), whose nonzero eigenvalues equal the item
correlation matrix's: larger matrices are judged on a random ``max_models`` x ``max_items``
part, so the cost is at most 250^2 x 3000 per eigenvalue, whatever the matrix's size.

References
----------
Horn, J. L. (1965). A rationale and test for the number of factors in factor analysis.
Psychometrika, 30, 179-185.
Glorfeld, L. W. (1995). An improvement on Horn's parallel analysis methodology for selecting
the correct number of factors to retain. Educational and Psychological Measurement, 55, 377-393.
Lord, F. M. (1980). Applications of item response theory to practical testing problems. Erlbaum.
Hattie, J. (1985). Methodology review: assessing unidimensionality of tests and items. Applied
Psychological Measurement, 9, 139-164.
Yen, W. M. (1984). Effects of local item dependence on the fit and equating performance of the
three-parameter logistic model. Applied Psychological Measurement, 8, 125-145.
Smith, E. V. (2002). Detecting and evaluating the impact of multidimensionality using item fit
statistics and principal component analysis of residuals. J. of Applied Measurement, 3, 205-231.
Raiche, G. (2005). Critical eigenvalue sizes in standardized residual principal components
analysis. Rasch Measurement Transactions, 19, 1012.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

__all__ = ["Dimensionality", "DimensionalityWarning", "parallel_analysis", "of_calibration",
           "record", "MARGIN", "SECOND_SHARE"]

#: how far above the parallel-analysis threshold the first eigenvalue must lie
MARGIN = 1.15
#: the share of the first factor's excess over random from which a second factor (of the raw
#: correlations, and of the fitted model's residuals) is a second trait
SECOND_SHARE = 0.3

_NAN = float("nan")


class DimensionalityWarning(UserWarning):
    """The calibrated items do not measure one thing (random answers, or two traits)."""


@dataclass(frozen=True)
class Dimensionality:
    """The raw correlations' first two eigenvalues and their parallel-analysis thresholds (the
    95th percentiles of the permuted data's), the residuals' first eigenvalue and threshold
    (NaN when no fitted model was given), and the verdicts."""

    first: float
    threshold: float
    share: float            #: the first eigenvalue's share of the total (the items' count)
    n_models: int
    n_items: int
    second: float = _NAN
    second_threshold: float = _NAN
    residual: float = _NAN
    residual_threshold: float = _NAN
    #: the models (rows; pattern frequencies counted) the part was drawn from
    n_models_total: int = 0
    n_items_total: int = 0

    @property
    def noise(self) -> bool:
        """Whether the first eigenvalue fails to lie :data:`MARGIN` times above its threshold
        (False when there are too few items or models to compute it: nothing to say)."""
        return bool(self.first <= MARGIN * self.threshold)

    def _excess_share(self, value: float, threshold: float) -> float:
        room = self.first - self.threshold
        return (value - threshold) / room if room > 0 else _NAN

    @property
    def second_share(self) -> float:
        """(lambda_2 - t_2) / (lambda_1 - t_1): the second raw factor's strength beyond random."""
        return self._excess_share(self.second, self.second_threshold)

    @property
    def residual_share(self) -> float:
        """(rho_1 - s_1) / (lambda_1 - t_1): the residuals' first factor beyond random."""
        return self._excess_share(self.residual, self.residual_threshold)

    @property
    def second_dimension(self) -> bool:
        """Whether both the raw correlations and the residuals show a second trait (False when
        either is not computed, or the items are noise)."""
        return bool(not self.noise and self.second_share >= SECOND_SHARE
                    and self.residual_share >= SECOND_SHARE)

    @property
    def one_trait(self) -> bool:
        """Neither noise nor a second trait."""
        return not (self.noise or self.second_dimension)

    def to_dict(self) -> dict:
        return {"first_eigenvalue": self.first, "parallel_threshold": self.threshold,
                "first_share": self.share, "one_trait": self.one_trait,
                "n_models": self.n_models, "n_items": self.n_items,
                "second_eigenvalue": self.second, "second_threshold": self.second_threshold,
                "residual_eigenvalue": self.residual,
                "residual_threshold": self.residual_threshold,
                "second_dimension": self.second_dimension,
                "n_models_total": self.n_models_total, "n_items_total": self.n_items_total}

    @classmethod
    def from_dict(cls, d: dict) -> "Dimensionality":
        """The inverse of :meth:`to_dict` (a manifest's or a summary's record)."""
        names = {"first": "first_eigenvalue", "threshold": "parallel_threshold",
                 "share": "first_share", "second": "second_eigenvalue",
                 "residual": "residual_eigenvalue"}
        fields = asdict(cls(_NAN, _NAN, _NAN, 0, 0))
        got = {k: d.get(names.get(k, k), v) for k, v in fields.items()}
        return cls(**{k: _NAN if v is None else v for k, v in got.items()})   # JSON null: NaN

    def _judged(self) -> str:
        """"250 models x 20 items", or "a random 250 of the 1000 models x 20 items"."""
        def part(n, total, what):   # weighted rows are drawn with replacement: total < n
            return (f"a random {n} of the {total} {what}" if total > n
                    else f"{total or n} {what}")
        return (f"{part(self.n_models, self.n_models_total, 'models')} x "
                f"{part(self.n_items, self.n_items_total, 'items')}")

    def message(self) -> str:
        """One line saying that the items do not measure one thing ("" when they do)."""
        if self.noise:
            return (f"the items do not measure one thing: their first eigenvalue "
                    f"({self.first:.2f}) is not clearly larger than random answers of the same "
                    f"difficulties give ({self.threshold:.2f}, Horn's parallel analysis on "
                    f"{self._judged()}); the predictions of this bank are not to be "
                    "trusted (more models, or results that measure one skill)")
        if self.second_dimension:
            return (f"the items measure two things, not one: a second factor of the item "
                    f"correlations has {_share(self.second_share)} beyond random answers, and "
                    f"the one-trait fit leaves unexplained a factor with "
                    f"{_share(self.residual_share)} (Horn's parallel analysis on "
                    f"{self._judged()}); one theta per model "
                    "mixes the two: look for subtasks or answer formats to calibrate apart")
        return ""


def _share(value: float) -> str:
    """A factor's strength beyond random answers against the first's: "45% of the first's
    strength", or "1.2 times the first's strength" past it."""
    return (f"{value:.0%} of the first's strength" if value < 0.995
            else f"{value:.1f} times the first's strength")


def _standardised(y: np.ndarray, keep=None):
    """(z, keep): the columns of ``y`` centred and scaled to unit variance over the rows (a
    missing value at its column's mean), the constant ones (or those not in ``keep``) left
    out."""
    seen = np.isfinite(y)
    mean = np.where(seen, y, 0.0).sum(0) / np.maximum(seen.sum(0), 1)
    z = np.where(seen, y, mean[None, :]) - mean[None, :]
    sd = np.sqrt((z ** 2).mean(0))
    keep = (sd > 1e-12) if keep is None else keep & (sd > 1e-12)
    return z[:, keep] / sd[keep], keep


def _top_eigenvalues(z: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` largest eigenvalues of the column correlations Z'Z / n, from the smaller of
    Z'Z and Z Z'."""
    n = z.shape[0]
    gram = z.T @ z if z.shape[1] <= n else z @ z.T
    return np.linalg.eigvalsh(gram / n)[::-1][:k].astype(float)


def _horn(z: np.ndarray, k: int, n_perm: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """(the k largest eigenvalues of Z's correlations, the 95th percentiles of the k largest
    of ``n_perm`` matrices with each column permuted independently); in float32, whose
    rounding (1e-6 of an eigenvalue) is far below the permutations' spread."""
    z = np.asarray(z, np.float32)
    observed = _top_eigenvalues(z, k)
    perm = np.array([_top_eigenvalues(rng.permuted(z, axis=0), k) for _ in range(n_perm)])
    return observed, np.quantile(perm, 0.95, axis=0)


def parallel_analysis(values, *, expected=None, weights=None, n_perm: int = 10, rng=None,
                      max_models: int = 250, max_items: int = 3000,
                      residuals: str = "needed") -> Dimensionality:
    """Horn's parallel analysis (module docstring) of ``values`` (models x items, NaN missing;
    constant items left out). ``expected``: a function of row indices returning E[X | theta]
    of those rows' models for every item (the fitted one-trait model's), for the residuals'
    test; without it only the raw correlations are judged. ``weights``: the rows' frequencies
    (response patterns), drawn in proportion to them. Larger results are judged on a random
    ``max_models`` x ``max_items`` part. ``residuals``: "needed" tests them only where the raw
    correlations show a second factor (the verdict needs both; the rest is half the cost),
    "always" records them for every matrix; on half as many permutations, as their threshold
    only shifts a share of lambda_1 - t_1 (by about a hundredth)."""
    from ..validation import as_generator

    rng = as_generator(rng)
    y = np.asarray(values, float)
    n, p = y.shape
    if weights is not None:
        w = np.asarray(weights, float)
        rows = np.sort(rng.choice(n, max_models, replace=True, p=w / w.sum()))
    elif n > max_models:
        rows = np.sort(rng.choice(n, max_models, replace=False))
    else:
        rows = np.arange(n)
    cols = np.sort(rng.choice(p, max_items, replace=False)) if p > max_items else np.arange(p)
    part = y[np.ix_(rows, cols)]
    z, keep = _standardised(part)
    if z.shape[1] < 2 or z.shape[0] < 3:
        return Dimensionality(_NAN, _NAN, _NAN, z.shape[0], z.shape[1])
    lam, t = _horn(z, 2, n_perm, rng)
    lam, t = np.append(lam, _NAN)[:2], np.append(t, _NAN)[:2]
    res, s = _NAN, _NAN
    total = n if weights is None else int(round(float(np.sum(weights))))
    raw = Dimensionality(float(lam[0]), float(t[0]), float(lam[0]) / z.shape[1], z.shape[0],
                         z.shape[1], float(lam[1]), float(t[1]), n_models_total=total,
                         n_items_total=int(keep.sum()) if p <= max_items else p)
    needed = not raw.noise and raw.second_share >= SECOND_SHARE
    if expected is not None and (needed or residuals == "always"):
        e = np.asarray(expected(rows), float)[:, cols]
        zr, _ = _standardised(part - e, keep)
        if zr.shape[1] >= 2:
            (res,), (s,) = _horn(zr, 1, max(n_perm // 2, 3), rng)
    return replace(raw, residual=float(res), residual_threshold=float(s))


def of_calibration(values, weights, bank, theta, item_ids, *, rng=None,
                   residuals: str = "needed") -> Dimensionality:
    """:func:`parallel_analysis` of a calibration: ``values`` (models x items in ``item_ids``'
    order), the fitted ``bank`` (an ItemBank: E[X | theta] = P(theta); a PolyBank: the expected
    rating) and the models' ``theta`` (EAP) give the residuals."""
    ids = [str(i) for i in item_ids]
    pos = slice(None) if [str(i) for i in bank.item_ids] == ids else bank.index_of(ids)
    theta = np.asarray(theta, float)
    mean = getattr(bank, "expected_score", None) or bank.probability

    def expected(rows):
        return np.asarray(mean(theta[rows]), float)[:, pos]

    return parallel_analysis(values, expected=expected, weights=weights, rng=rng,
                             residuals=residuals)


def record(result, values, weights, item_ids, warnings: list, random_state=None) -> Dimensionality:
    """Run :func:`of_calibration` on a fitted ``result`` (its bank and thetas), keep it in
    ``result.settings["dimensionality"]`` and, when the items do not measure one thing, add
    the one-line message to ``warnings`` (the result's warning list) and warn
    (:class:`DimensionalityWarning`). The permutations' seed is ``random_state`` when it is a
    whole number (a Generator is left untouched), else fixed: the same data, the same verdict."""
    from ..errors import warn_user

    seed = [int(random_state), 13] if isinstance(random_state, (int, np.integer)) else 13
    dims = of_calibration(values, weights, result.bank, result.theta, item_ids, rng=seed)
    result.settings["dimensionality"] = dims.to_dict()
    msg = dims.message()
    if msg:
        warnings.append(msg)
        warn_user(msg, DimensionalityWarning)
    return dims
