"""A bank of ordinal items (graded response / generalized partial credit): :class:`PolyBank`.

Each item has a model (``graded``, ``gpcm``, or ``pcm``: a partial credit item, the GPCM with
the slope common to every pcm item and fixed, as mirt's ``"Rasch"`` of ratings, where
calibrate(model="pcm") puts sigma, the trait's SD), mirt's slope-intercept parameters ``a1,
d1..d(K-1)`` (:mod:`atlascat.irt.polytomous`) and the observed levels its categories stand
for: category k of an item is its k-th smallest observed level (a judge's ratings 1-10, a
rubric's 0-3), so data on the original scale is scored without any recoding by the user.

Each item also has a rating *scale* [lo, hi]: the declared range of the ratings (a judge's
1-10) where the calibration was told it, else its lowest and highest observed level. A
whole-number rating on the scale that the item never had at calibration (a 10 where its best
was 9) is scored as the category it falls in: under the graded model an item calibrated on
levels l_0 < .. < l_(K-1) has its boundaries only there, so category k holds every rating in
[l_k, l_(k+1)) (the first one also those below l_0, the last those above l_(K-1)): the
largest observed level at or below the rating (the lowest when none is). For a GPCM item the
same collapse is the convention. A rating off the scale, or between its whole numbers, is
refused.

File format (CSV or Parquet): ``X, model, a1, d1, ..., d(K_max-1), levels`` with empty
cells for an item's absent categories and ``levels`` as ``"0;1;2;3"`` (mirt's columns, plus the
two ATLAS needs to read a rating back), and ``scale`` as ``"1;10"`` where an item's scale is
wider than its levels; ``--format ours`` writes the threshold form ``a, b1..``
instead of the intercepts, as mirt's IRTpars: graded b_k = -d_k / a, GPCM step thresholds
b_k = -(d_k - d_(k-1)) / a (:func:`atlascat.irt.polytomous.thresholds`).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import BankError, ConfigError
from ..validation import theta_values
from . import polytomous as poly
from .polytomous import is_poly_frame

if TYPE_CHECKING:  # pandas loads where a frame is built
    import pandas as pd

__all__ = ["PolyBank", "BANK_MODELS", "is_poly_frame", "is_poly_bank_file", "encode_levels"]

#: the models a bank's ``model`` column may name: the kernels (graded, gpcm) and pcm, a GPCM
#: item whose slope is the bank's one fixed slope (the model-fit statistics count it once)
BANK_MODELS = ("graded", "gpcm", "pcm")


def kernel_models(kinds) -> np.ndarray:
    """The item response function of each bank model: pcm items are GPCM items."""
    kinds = np.asarray(kinds, dtype=object)
    return np.where(kinds == "pcm", "gpcm", kinds).astype(object)

A_LIMIT = 50.0
D_LIMIT = 150.0


def encode_levels(values, levels, item_ids=None, subject_ids=None, scales=None) -> np.ndarray:
    """Category index of every cell (float, NaN for missing) given each item's sorted levels.

    ``values``: (n, m) on the items' own scale; ``scales``: (m, 2) [lo, hi] per item (default
    each item's lowest and highest level). A level among an item's categories is its index; a
    whole number on the item's scale that it never had is the category it falls in (the
    largest level at or below it, the lowest when none is: the module docstring); a rating
    off the scale, or between whole numbers where the levels are whole, raises
    :class:`ConfigError` naming the cell (its item by ``item_ids`` and its model by
    ``subject_ids`` when given, else by position).
    """
    values = np.asarray(values, dtype=float)
    out = np.full(values.shape, np.nan)
    for j, lev in enumerate(levels):            # one searchsorted per item column
        col = values[:, j]
        obs = ~np.isnan(col)
        x = col[obs]
        lo, hi = (lev[0], lev[-1]) if scales is None else scales[j]
        idx = np.maximum(np.searchsorted(lev, x, side="right") - 1, 0)
        whole = bool(np.all(lev == np.round(lev)))
        ok = (lev[idx] == x) | ((x >= lo) & (x <= hi) & (x == np.round(x)) & whole)
        if not ok.all():
            r = np.flatnonzero(obs)[np.flatnonzero(~ok)[0]]
            who = f"of model {str(subject_ids[r])!r}" if subject_ids is not None else f"at row {r}"
            item = f"item {str(item_ids[j])!r}" if item_ids is not None else f"item column {j}"
            raise ConfigError(f"rating {values[r, j]:g} {who} on {item} "
                              f"{_off_scale(values[r, j], lev, lo, hi)}; score only ratings on "
                              "the scale")
        out[obs, j] = idx
    return out


def _off_scale(value: float, lev, lo: float, hi: float) -> str:
    """Why a rating is not scored on an item of levels ``lev`` and scale [lo, hi]."""
    whole = bool(np.all(lev == np.round(lev)))
    why = (f"is not a whole number on the item's scale {lo:g}-{hi:g}" if whole and lo <= value <= hi
           else f"is outside the item's scale {lo:g}-{hi:g} (a bank's scale is set when it is "
           "calibrated: value_range (CLI --rating-range LO HI))" if whole
           else f"is not one of the item's levels {_fmt_levels(lev)}")
    return f"{why} (levels observed at calibration: {_fmt_levels(lev)})"


def _scale_array(scales, ends) -> np.ndarray:
    """(n_items, 2) [lo, hi]: each item's lowest and highest level (``ends``) where ``scales``
    is None, one (lo, hi) for every item, or one pair per item (None for the item's own)."""
    n = len(ends)
    if scales is None:
        return ends.copy()
    arr = np.asarray(scales, dtype=object)
    if arr.ndim == 1 and arr.size == 2 and all(np.isscalar(v) for v in arr):
        return np.tile(np.asarray(scales, dtype=float), (n, 1))
    if len(arr) != n:
        raise BankError(f"scales: {len(arr)} entries for {n} items")
    return np.array([ends[j] if s is None else np.asarray(s, dtype=float)
                     for j, s in enumerate(scales)], dtype=float).reshape(n, 2)


def _mirt_gpcm_constants(df, cols, ids, num) -> None:
    """mirt's ``coef()`` of a GPCM item also lists its constants, the scoring ``ak0..`` (0, 1,
    ..) and the intercept ``d0`` (0): accepted as such (and left out), any other value refused
    (a nominal model's scoring is not a GPCM's)."""
    for c in cols:
        if c == "d0" or (c[:2] == "ak" and c[2:].isdigit()):
            want = 0.0 if c == "d0" else float(c[2:])
            v = num(c)
            bad = np.flatnonzero(~np.isnan(v) & (v != want))
            if bad.size:
                raise BankError(f"item {ids[bad[0]]}: column {c!r} is {v[bad[0]]:g}; mirt's "
                                f"GPCM fixes it at {want:g} (a1, d1.. are the parameters)")


def _fmt_levels(lev) -> str:
    return ";".join(f"{v:g}" for v in lev)


def _numbers(text, item, column: str, count: int | None = None) -> np.ndarray:
    """A bank cell of numbers separated by ';' (``levels`` "0;1;2", ``scale`` "1;10")."""
    try:
        out = np.array([float(v) for v in str(text).split(";")])
    except ValueError:
        out = None
    if out is None or (count is not None and out.size != count):
        what = "two numbers" if count == 2 else "numbers"
        raise BankError(f"item {item}: {column} {text!r} must be {what} separated by ';'")
    return out


def is_poly_bank_file(path) -> bool:
    """True when ``path`` is a CSV / Parquet bank of ordinal items (read its first rows only)."""
    path = Path(str(path))
    if not path.is_file():
        return False
    if path.suffix != ".parquet":  # the header alone says no for most files (no pandas load)
        from .._table import read_csv_header

        header = read_csv_header(path)
        if header is not None and not {"d1", "b1", "model"} & set(header):
            return False
    import pandas as pd

    try:
        df = (pd.read_parquet(path) if path.suffix == ".parquet"
              else pd.read_csv(path, nrows=5))
    except Exception:  # an unreadable file is the binary reader's to report
        return False
    return is_poly_frame(df)


class PolyBank:
    """A calibrated bank of ordinal items (value object; arrays are read-only).

    Graded (Samejima, 1969): P(X >= k | theta) = 1 / (1 + exp(-(a1 theta + d_k))), d_1 > d_2
    > ...; GPCM (Muraki, 1992): P(X = k | theta) proportional to exp(k a1 theta + d_k), d_0 = 0
    (mirt's slope-intercept form; :mod:`atlascat.irt.polytomous`).

    Parameters
    ----------
    item_ids : sequence of str
    params : (n_items, K_max) array ``[a1, d1..d(K_max-1)]``, NaN beyond an item's categories
    model : "graded" | "gpcm" | "pcm", one for all items or one per item ("pcm": the
        partial credit model, GPCM items of one common slope, fixed: ``kinds`` keeps it,
        ``models`` the GPCM kernel every computation uses, :attr:`is_pcm` for the whole bank)
    levels : per item, the sorted observed values its categories stand for (default 0..K-1)
    scales : the rating scale [lo, hi]: one pair for every item (a judge's (1, 10)), one per
        item (None: its levels' ends), or None (each item's lowest and highest level)
    metadata : DataFrame or None, one row per item
    """

    def __init__(self, item_ids, params, model="graded", levels=None, *, scales=None,
                 metadata=None):
        import pandas as pd

        ids = np.asarray([str(i) for i in item_ids], dtype=object)
        try:
            params = np.array(params, dtype=float, ndmin=2)
        except (TypeError, ValueError):
            raise BankError(f"params must be numbers, one row (a1, d1, d2, ...) per item, got "
                            f"{params!r}"[:160] + "; the order is PolyBank(item_ids, params, "
                            "model)") from None
        n = len(ids)
        if n == 0:
            raise BankError("the item bank is empty; it needs at least one item row")
        if params.ndim != 2 or params.shape[0] != n or params.shape[1] < 2:
            raise BankError(f"params must be (n_items={n}, 1 + n_thresholds), got {params.shape}")
        kinds = np.array(np.broadcast_to(np.asarray(model, dtype=object), (n,)), dtype=object)
        kinds = np.array([str(m).lower() for m in kinds], dtype=object)
        bad = [m for m in kinds if m not in BANK_MODELS]
        if bad:
            raise BankError(f"unknown ordinal model {bad[0]!r}; use graded, gpcm or pcm")
        models = kernel_models(kinds)
        #: each item's model as the bank file names it (graded, gpcm, pcm); ``models`` the
        #: item response functions (pcm items are GPCM items)
        self.kinds = kinds
        self.item_ids, self.params, self.models = ids, params, models
        self.n_cat = poly.n_categories(params)
        #: True when no levels were given (a table of mirt's coef(): categories 0..K-1 assumed)
        self.levels_assumed = levels is None
        if levels is None:
            levels = [np.arange(k, dtype=float) for k in self.n_cat]
        self.levels = [np.asarray(lv, dtype=float) for lv in levels]
        if len(self.levels) != n:
            raise BankError(f"levels: {len(self.levels)} entries for {n} items")
        #: (n_items, 2) each item's lowest and highest observed level
        self.level_ends = np.array([[lv[0], lv[-1]] for lv in self.levels], dtype=float)
        self.scales = _scale_array(scales, self.level_ends)
        self._validate()
        for arr in (ids, params, models, kinds, self.n_cat, self.scales, self.level_ends,
                    *self.levels):
            arr.flags.writeable = False
        self.metadata = None if metadata is None else pd.DataFrame(metadata).reset_index(drop=True)
        self.model = models[0] if (models == models[0]).all() else "mixed"
        self._index = {item: i for i, item in enumerate(ids)}

    def _validate(self):
        ids, p = self.item_ids, self.params
        uniq, counts = np.unique(ids.astype(str), return_counts=True)
        if (counts > 1).any():
            raise BankError(f"duplicate item id(s): {[str(u) for u in uniq[counts > 1]][:5]}; "
                            "ids must be unique")
        pcm = np.flatnonzero(self.kinds == "pcm")
        slope = p[pcm[0], 0] if pcm.size else np.nan   # the pcm items' one slope
        for j, item in enumerate(ids):
            d = p[j, 1:]
            k = int(self.n_cat[j]) - 1
            if k < 1:
                raise BankError(f"item {item!r} has no intercept: an ordinal item needs a1 and "
                                "at least d1")
            if np.isnan(d[:k]).any() or not np.isnan(d[k:]).all():
                raise BankError(f"item {item!r}: the intercepts d1..d{k} must be given first "
                                "and the unused ones left empty")
            if not np.isfinite(p[j, 0]) or abs(p[j, 0]) > A_LIMIT:
                raise BankError(f"item {item!r}: slope a1 = {p[j, 0]:g} is not a finite number "
                                f"within +-{A_LIMIT:g}")
            if (np.abs(d[:k]) > D_LIMIT).any() or not np.isfinite(d[:k]).all():
                raise BankError(f"item {item!r}: intercepts {d[:k].tolist()} exceed "
                                f"+-{D_LIMIT:g}")
            if self.models[j] == "graded" and (np.diff(d[:k]) >= 0).any():
                raise BankError(f"item {item!r}: graded intercepts must decrease (d1 > d2 > ...),"
                                f" got {np.round(d[:k], 4).tolist()}")
            lev = self.levels[j]
            if self.kinds[j] == "pcm" and not np.isclose(p[j, 0], slope, rtol=1e-9, atol=0.0):
                raise BankError(f"item {item!r}: a partial credit (pcm) item has the bank's one "
                                f"slope a1 = {slope:g}, got {p[j, 0]:g}; items of their own "
                                "slopes are gpcm")
            if lev.shape != (k + 1,) or (np.diff(lev) <= 0).any():
                raise BankError(f"item {item!r}: {k + 1} categories need {k + 1} increasing "
                                f"levels, got {lev.tolist()}")
            lo, hi = self.scales[j]
            if not (np.isfinite(lo) and np.isfinite(hi) and lo <= lev[0] and hi >= lev[-1]):
                raise BankError(f"item {item!r}: its scale {lo:g}-{hi:g} must hold its levels "
                                f"{_fmt_levels(lev)}")

    # ------------------------------------------------------------------ basics
    def __len__(self) -> int:
        return len(self.item_ids)

    def __repr__(self) -> str:
        model = "pcm" if self.is_pcm else self.model
        return (f"PolyBank({len(self)} items, model={model!r}, categories "
                f"{int(self.n_cat.min())}-{int(self.n_cat.max())})")

    def __contains__(self, item_id) -> bool:
        return str(item_id) in self._index

    @property
    def is_pcm(self) -> bool:
        """True for a partial credit bank (every item pcm: one common slope, fixed, as
        mirt's "Rasch" of ratings; calibrate(model="pcm")): the model-fit statistics count
        its intercepts and one variance, not a slope per item."""
        return bool((self.kinds == "pcm").all())

    @property
    def n_items(self) -> int:
        """The number of items, ``len(bank)``."""
        return len(self)

    @property
    def a(self) -> np.ndarray:
        """Each item's slope a_j (mirt's a1), shape (n_items,)."""
        return self.params[:, 0]

    def index_of(self, item_ids):
        """Positions of the given item ids (a single id: its position as an int); ids not in
        the bank are a BankError naming them, as :meth:`ItemBank.index_of`."""
        if isinstance(item_ids, (str, bytes, np.str_)) or np.ndim(item_ids) == 0:
            return int(self.index_of([item_ids])[0])
        missing = [str(i) for i in item_ids if str(i) not in self._index]
        if missing:
            raise BankError(f"{len(missing)} item id(s) not in the bank, e.g. {missing[:5]}")
        return np.array([self._index[str(i)] for i in item_ids], dtype=int)

    def subset(self, items) -> "PolyBank":
        """The bank of the given items, in that order: ids, or positions / a boolean mask as a
        NumPy array."""
        if isinstance(items, (str, bytes, np.str_)):
            items = [items]                     # one id, not its characters
        idx = self.index_of(list(items)) if not isinstance(items, np.ndarray) or \
            items.dtype.kind not in "iub" else (np.flatnonzero(items) if items.dtype == bool
                                                 else items)
        p = self.params[idx]
        kmax = int(self.n_cat[idx].max())
        meta = None if self.metadata is None else self.metadata.iloc[idx]
        out = PolyBank(self.item_ids[idx], p[:, :kmax], self.kinds[idx],
                       [self.levels[i] for i in idx], scales=self.scales[idx], metadata=meta)
        out.levels_assumed = self.levels_assumed
        return out

    def with_ids(self, item_ids) -> "PolyBank":
        """The same items under new ids (one per item, in order): parameters, models,
        levels, scales and metadata kept (R's ``X514`` read back as ``514``)."""
        if len(item_ids) != len(self):
            raise BankError(f"with_ids: {len(item_ids)} ids for {len(self)} items")
        out = PolyBank(item_ids, self.params, self.kinds, self.levels, scales=self.scales,
                       metadata=self.metadata)
        out.levels_assumed = self.levels_assumed
        return out

    def with_benchmark(self, name: str) -> "PolyBank":
        """The same bank naming the benchmark it measures (a ``benchmark`` column, written
        with it): what every output calls it (``atlas calibrate --name``), not the file's
        name."""
        from .bank import benchmark_column

        return PolyBank(self.item_ids, self.params, self.kinds, self.levels,
                        scales=self.scales, metadata=benchmark_column(self.metadata, name,
                                                                      len(self)))

    def param_names(self) -> list[list[str]]:
        """Each item's parameter names in mirt's order, ``a1, d1..d(K-1)``."""
        return poly.param_names(self.params)

    def encode(self, values, subject_ids=None) -> np.ndarray:
        """Responses on the items' own scale (n, n_items) -> category indices (NaN missing);
        ``subject_ids`` name the rows in an error; a whole number on an item's scale that it
        never had is the category it falls in (:func:`encode_levels`)."""
        try:
            return encode_levels(values, self.levels, self.item_ids, subject_ids, self.scales)
        except ConfigError as exc:
            if not self.levels_assumed:
                raise
            raise ConfigError(f"{exc}; the bank has no 'levels' column (as mirt's coef() "
                              "table), so its categories were taken as 0..K-1: add a 'levels' "
                              "column, each item's ratings lowest first (e.g. 1;2;3;4)") from None

    def rating_problem(self, item_id, rating) -> str | None:
        """None when ``rating`` is scored on item ``item_id`` (:meth:`encode`), else why not
        (off the item's scale, or between its whole numbers)."""
        j = self.index_of(str(item_id))
        try:
            encode_levels(np.array([[float(rating)]]), [self.levels[j]], scales=self.scales[[j]])
        except ConfigError:
            return _off_scale(float(rating), self.levels[j], *self.scales[j])
        return None

    def unseen(self, values) -> np.ndarray:
        """(n, n_items) True where a rating is a whole number on its item's scale that is not
        one of its levels (what :meth:`encode` scores as the category it falls in); NaN cells
        and ratings :meth:`encode` refuses (off the scale, between whole numbers) are False."""
        values = np.asarray(values, dtype=float)
        lev = self.scores()                                       # (n_items, K_max), NaN pad
        whole = np.all(np.isnan(lev) | (lev == np.round(lev)), axis=1)
        with np.errstate(invalid="ignore"):
            on_scale = ((values >= self.scales[:, 0]) & (values <= self.scales[:, 1])
                        & (values == np.round(values)))
        among = (values[..., None] == lev).any(axis=-1)
        return on_scale & whole & ~among

    def unseen_note(self, values) -> str | None:
        """One sentence on the ratings of ``values`` (n, n_items) that :meth:`unseen` finds,
        with the first of them as its example, in the bank's own words (the item, the rating,
        the levels its source models gave); None when there is none."""
        hit = self.unseen(values)
        n = int(hit.sum())
        if not n:
            return None
        r, j = np.argwhere(hit)[0]
        v = float(np.asarray(values, dtype=float)[r, j])
        return (f"{n} rating(s) are levels their item never had at calibration (e.g. item "
                f"{str(self.item_ids[j])!r} rated {v:g}, where its source models gave "
                f"{_fmt_levels(self.levels[j])}); each is scored as the category it falls in "
                "(the item's nearest level below, its lowest level when below all)")

    def scores(self) -> np.ndarray:
        """(n_items, K_max) level of every category (NaN where absent)."""
        out = np.full((len(self), self.params.shape[1]), np.nan)
        for j, lev in enumerate(self.levels):
            out[j, :len(lev)] = lev
        return out

    def locations(self) -> np.ndarray:
        """Each item's location, the mean of its thresholds b_k
        (:func:`atlascat.irt.polytomous.thresholds`: graded -d_k / a, GPCM's steps
        -(d_k - d_(k-1)) / a): the theta around which its categories sit."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.nanmean(poly.thresholds(self.models, self.params), axis=1)

    def summary(self) -> dict:
        """Item count, model(s), quantiles of the slope ``a1`` and of each item's location
        (:meth:`locations`), the categories and the rating scales, and the items with
        a1 <= 0 (as :meth:`ItemBank.summary` for binary banks)."""
        q = [0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0]
        names = ["min", "q05", "q25", "median", "q75", "q95", "max"]
        loc = self.locations()
        quant = {name: dict(zip(names, np.quantile(arr[np.isfinite(arr)], q).round(4).tolist()))
                 for name, arr in (("a1", self.a), ("location", loc)) if np.isfinite(arr).any()}
        scales: dict[str, int] = {}
        for lev in self.levels:
            key = _fmt_levels(lev)
            scales[key] = scales.get(key, 0) + 1
        models, counts = np.unique(self.kinds.astype(str), return_counts=True)
        return {
            "n_items": len(self),
            "model": "pcm" if self.is_pcm else self.model,
            "models": dict(zip(models.tolist(), counts.astype(int).tolist())),
            "n_categories": {"min": int(self.n_cat.min()), "max": int(self.n_cat.max())},
            "levels": scales,
            "rating_scale": None if self.rating_scale() is None else list(self.rating_scale()),
            "quantiles": quant,
            "nonpositive_a": self.item_ids[~(self.a > 0)].tolist(),
        }

    # ------------------------------------------------------------------ the model
    def log_prob(self, theta) -> np.ndarray:
        """log P(X_j = k | theta), (n_items, n_theta, K_max), -inf for absent categories."""
        return poly.log_prob(self.models, self.params, np.atleast_1d(theta_values(theta)))

    def probability(self, theta) -> np.ndarray:
        """Category probabilities P_jk(theta) (:mod:`atlascat.irt.polytomous`: graded,
        Samejima 1969; GPCM, Muraki 1992), shape (n_items, n_theta, K_max); 0 for absent
        categories."""
        return poly.prob(self.models, self.params, np.atleast_1d(theta_values(theta)))

    def information(self, theta) -> np.ndarray:
        """Item information, ``theta.shape + (n_items,)``."""
        return poly.item_information(self.models, self.params, theta_values(theta))

    def test_information(self, theta) -> np.ndarray:
        """Test information, the sum over items of :meth:`information`; shape of ``theta``."""
        return poly.test_information(self.models, self.params, theta_values(theta))

    def expected_score(self, theta) -> np.ndarray:
        """Expected level of every item (on its own scale), ``theta.shape + (n_items,)``."""
        theta = np.asarray(theta, dtype=float)
        p = np.nan_to_num(poly.prob(self.models, self.params, theta.reshape(-1)))
        e = np.einsum("jqk,jk->qj", p, np.nan_to_num(self.scores()))
        return e.reshape(theta.shape + (len(self),))

    def unseen_bounds(self, theta) -> tuple[np.ndarray, np.ndarray]:
        """(below, above), each ``theta.shape + (n_items,)``: 95% upper bounds of P(X < l_0 |
        theta) and P(X > l_(K-1) | theta), the chance of a rating on the item's scale below or
        above every level its n_j source responses had (0 where the scale adds nothing, or
        n_j is not in the bank's ``n_responses`` column).

        The unseen boundary is the graded model's next threshold, same slope a_j: P(X >
        l_(K-1) | theta) = logistic(a_j theta + c_j), c_j < d_(K-1). No source response past it
        bounds its rate in the calibration population by the rule of three (Hanley and
        Lippman-Hand, 1983): int logistic(a_j t + c_j) phi(t) dt = 3 / n_j, solved for c_j on
        the N(0, 1) grid; below, logistic(c_j - a_j theta) by symmetry. Each is capped by the
        probability of the category it would fall in (the first, the last)."""
        theta = np.asarray(theta, dtype=float)
        shape = theta.shape + (len(self),)
        n = (None if self.metadata is None or "n_responses" not in self.metadata
             else self.metadata["n_responses"].to_numpy(float))
        lo_gap = self.scales[:, 0] < self.level_ends[:, 0]
        hi_gap = self.scales[:, 1] > self.level_ends[:, 1]
        if n is None or not (lo_gap | hi_gap).any():
            return np.zeros(shape), np.zeros(shape)
        from .quadrature import normal_quadrature

        quad = normal_quadrature()
        a = np.where(self.a > 0, self.a, np.nan)
        rate = np.clip(3.0 / np.where(n > 0, n, np.nan), None, 0.5)
        lo_c, hi_c = np.full(len(self), -60.0), np.full(len(self), 60.0)
        for _ in range(60):   # bisection, all items at once: the rate rises with c
            c = (lo_c + hi_c) / 2
            mass = quad.weights / (1 + np.exp(-(a[:, None] * quad.nodes + c[:, None])))
            above = mass.sum(axis=1) > rate
            hi_c, lo_c = np.where(above, c, hi_c), np.where(above, lo_c, c)
        c = np.where(np.isnan(a) | np.isnan(rate), -np.inf, (lo_c + hi_c) / 2)  # a <= 0: none
        z = np.multiply.outer(theta, np.nan_to_num(a))
        with np.errstate(over="ignore"):
            up = 1 / (1 + np.exp(-(z + c)))
            down = 1 / (1 + np.exp(-(c - z)))
        p = np.nan_to_num(poly.prob(self.models, self.params, theta.reshape(-1)))  # (j, q, k)
        first = p[:, :, 0].T.reshape(shape)
        last = p[np.arange(len(self)), :, self.n_cat - 1].T.reshape(shape)
        return (np.where(lo_gap, np.minimum(down, first), 0.0),
                np.where(hi_gap, np.minimum(up, last), 0.0))

    def rating_scale(self) -> tuple[float, float] | None:
        """(lo, hi) when every item has that scale (a judge's 1-10: declared at calibration,
        or every item's lowest and highest level), else None: items on several scales."""
        ends = {(float(lo), float(hi)) for lo, hi in self.scales}
        return ends.pop() if len(ends) == 1 else None

    def source_models(self) -> float | None:
        """How many source ratings the items were calibrated on (the median of the bank's
        ``n_responses`` column), None when the bank does not say."""
        if self.metadata is None or "n_responses" not in self.metadata:
            return None
        n = self.metadata["n_responses"].to_numpy(float)
        n = n[np.isfinite(n)]
        return float(np.median(n)) if n.size else None

    def few_sources_warning(self, ratings=None) -> str | None:
        """One line when the items were calibrated on fewer source models than
        :data:`~atlascat.irt.defaults.PREDICTION_MIN_SOURCES`: the predicted mean rating's
        interval then holds theta's uncertainty, not the calibration's, and covers fewer
        than 95% of new models; None otherwise, when the bank does not say, or when
        ``ratings`` (n, n_items in the bank's order) rate every item (nothing predicted)."""
        from .defaults import PREDICTION_MIN_SOURCES

        n = self.source_models()
        if n is None or n >= PREDICTION_MIN_SOURCES:
            return None
        if ratings is not None and not np.isnan(np.asarray(ratings, dtype=float)).any():
            return None
        return (f"the bank was calibrated on {n:g} source models' ratings (fewer than "
                f"{PREDICTION_MIN_SOURCES}): the predicted mean rating's 95% interval holds "
                "theta's uncertainty, not the item parameters', and covers fewer new models "
                "than 95% (benchmarks/results/polytomous.md); for an interval that holds, read "
                "the ratings as a score on their scale (a bank folder's --score-range: its "
                "interval is design-based)")

    def rating_metric(self) -> str:
        """What :meth:`mean_rating` is: "mean rating" on the items' shared scale, else "mean
        rating, as a share of each item's scale"."""
        return ("mean rating" if self.rating_scale() is not None
                else "mean rating, as a share of each item's scale")

    def mean_rating(self, theta) -> np.ndarray:
        """The mean rating expected over all the items at theta, E[R | theta] = mean_j sum_k
        level_jk P_jk(theta) (Samejima, 1969; Muraki, 1992), on the scale the items share
        (:meth:`rating_scale`); items on several scales: each item's expectation as a share of
        its own scale, (E_j - lowest_j) / (highest_j - lowest_j), averaged (0-1).
        ``theta.shape``; it rises with theta where every slope a_j > 0."""
        return self._mean_of(self.expected_score(theta))

    def _mean_of(self, expected) -> np.ndarray:
        """Items' expected ratings (..., n_items) -> :meth:`mean_rating`'s number."""
        if self.rating_scale() is not None:
            return expected.mean(axis=-1)
        low, high = self.scales[:, 0], self.scales[:, 1]
        return ((expected - low) / np.where(high > low, high - low, 1.0)).mean(axis=-1)

    def mean_rating_interval(self, theta, se, z: float = 1.96):
        """(mean rating, low, high) at theta +- SE (:meth:`mean_rating`): the estimate at
        theta and its values at theta -+ z SE (a monotone map of theta's interval), the low
        end lowered by the ratings below every level an item had, (l_0 - lo_j) times their
        bounded chance, and the high end raised by those above, (hi_j - l_(K-1)) times theirs
        (:meth:`unseen_bounds`: a model stronger than every source model may rate 10 where
        their best was 9); each of ``theta``'s shape."""
        from ..validation import check_prob_array

        theta, se = np.broadcast_arrays(check_prob_array(theta, "theta"),
                                        check_prob_array(se, "se"))
        e_lo, e_hi = self._widened(np.stack([theta - z * se, theta + z * se]))
        low = self._mean_of(e_lo).min(axis=0)
        high = self._mean_of(e_hi).max(axis=0)
        mid = self.mean_rating(theta)
        return mid, np.minimum(low, mid), np.maximum(high, mid)

    def _widened(self, ends):
        """Each item's expected rating at ``ends`` (2, ...) lowered by the ratings below every
        level it had, (l_0 - lo_j) times their bounded chance, and raised by those above,
        (hi_j - l_(K-1)) times theirs (:meth:`unseen_bounds`): (lowered, raised), each
        ``ends.shape + (n_items,)``."""
        e = self.expected_score(ends)
        below, above = self.unseen_bounds(ends)
        return (e - below * (self.level_ends[:, 0] - self.scales[:, 0]),
                e + above * (self.scales[:, 1] - self.level_ends[:, 1]))

    def full_mean_rating(self, ratings, theta, se, z: float = 1.96):
        """(mean rating, low, high) over all the items, each subject's asked items as rated:
        M = (sum_asked r_j + sum_unasked E_j(theta)) / J (on the shared scale; else each
        item's share of its scale), its 95% interval from the unasked items' expectations at
        theta -+ z SE (their ends widened as :meth:`mean_rating_interval`'s) and their ratings'
        variance, half-width_side = sqrt(d_side^2 + z^2 sum_unasked Var(X_j | theta) / J^2).
        ``ratings`` (n, n_items), NaN where not asked; ``theta``, ``se`` (n,). All asked: the
        mean of the ratings, exactly."""
        ratings = np.asarray(ratings, dtype=float)
        theta, se = np.asarray(theta, dtype=float), np.asarray(se, dtype=float)
        asked = ~np.isnan(ratings)
        p = np.nan_to_num(poly.prob(self.models, self.params, theta))     # (J, n, K)
        lev = np.nan_to_num(self.scores())
        m1 = np.einsum("jnk,jk->nj", p, lev)                            # E_j(theta)
        var = np.einsum("jnk,jk->nj", p, lev ** 2) - m1 ** 2
        lowered, raised = self._widened(np.stack([theta - z * se, theta + z * se]))
        e_lo, e_hi = np.minimum(lowered[0], m1), np.maximum(raised[1], m1)
        if self.rating_scale() is None:        # each item's share of its own scale
            span = np.where(self.scales[:, 1] > self.scales[:, 0],
                            self.scales[:, 1] - self.scales[:, 0], 1.0)
            off = self.scales[:, 0]
        else:
            span, off = np.ones(len(self)), np.zeros(len(self))
        n = len(self)

        def total(unasked):
            return (np.where(asked, ratings, unasked) - off) / span

        mid = total(m1).sum(axis=-1) / n
        lo = total(e_lo).sum(axis=-1) / n
        hi = total(e_hi).sum(axis=-1) / n
        sd = np.sqrt(np.clip(np.where(asked, 0.0, var / span ** 2).sum(axis=-1), 0, None)) / n
        floor = total(self.scales[:, 0]).sum(axis=-1) / n     # every unasked item at its ends
        ceiling = total(self.scales[:, 1]).sum(axis=-1) / n
        return (mid, np.maximum(mid - np.hypot(mid - lo, z * sd), floor),
                np.minimum(mid + np.hypot(hi - mid, z * sd), ceiling))

    # ------------------------------------------------------------------ conversion
    @classmethod
    def from_item_bank(cls, bank) -> "PolyBank":
        """Binary 1PL/2PL items as graded items with one threshold (d1 = -a b, levels 0;1)."""
        if np.any(bank.c > 0) or np.any(bank.u < 1):
            raise BankError("only 1PL/2PL items are graded items with one threshold; a bank "
                            "with guessing or slipping (c > 0, u < 1) cannot join a graded bank")
        params = np.column_stack([bank.a, -bank.a * bank.b])
        return cls(bank.item_ids, params, "graded", metadata=bank.metadata)

    @classmethod
    def combine(cls, *banks) -> "PolyBank":
        """One bank of the items of several (PolyBanks, or binary 1PL/2PL ItemBanks as graded
        items with one threshold): a mixed bank of binary and ordinal items. Partial credit
        (pcm) items stay pcm where they share one slope, else they are gpcm items."""
        parts = [b if isinstance(b, PolyBank) else cls.from_item_bank(b) for b in banks]
        kinds = np.concatenate([p.kinds for p in parts])
        slopes = np.concatenate([p.a for p in parts])[kinds == "pcm"]
        if slopes.size and not np.allclose(slopes, slopes[0], rtol=1e-9, atol=0.0):
            kinds = kernel_models(kinds)
        kmax = max(p.params.shape[1] for p in parts)
        params = np.vstack([np.pad(p.params, ((0, 0), (0, kmax - p.params.shape[1])),
                                   constant_values=np.nan) for p in parts])
        from .bank import stacked_metadata

        return cls(np.concatenate([p.item_ids for p in parts]), params, kinds,
                   [lv for p in parts for lv in p.levels],
                   scales=np.vstack([p.scales for p in parts]),
                   metadata=stacked_metadata(parts))   # n_responses, *_se, ...: kept

    def to_frame(self, format: str = "mirt") -> pd.DataFrame:
        """mirt's ``X, model, a1, d1..`` (the id column named as R's write.csv and
        ``ItemBank.to_frame("mirt")``), or ``ours``: ``item_id, model, a, b1..`` (the thresholds of
        :func:`atlascat.irt.polytomous.thresholds`, as mirt's IRTpars); both with ``levels``."""
        import pandas as pd

        k = self.params.shape[1] - 1
        id_col = "X" if format == "mirt" else "item_id"   # as ItemBank's: R's write.csv names
        df = pd.DataFrame({id_col: self.item_ids.astype(str), "model": self.kinds})
        if format == "mirt":
            df["a1"] = self.params[:, 0]
            for i in range(k):
                df[f"d{i + 1}"] = self.params[:, i + 1]
        elif format == "ours":
            df["a"] = self.params[:, 0]
            b = poly.thresholds(self.models, self.params)
            for i in range(k):
                df[f"b{i + 1}"] = b[:, i]
        else:
            raise BankError(f"unknown bank format {format!r}; use 'ours' or 'mirt'")
        df["levels"] = [_fmt_levels(lv) for lv in self.levels]
        if (self.scales != self.level_ends).any():   # a declared scale wider than some item's levels
            df["scale"] = [_fmt_levels(sc) for sc in self.scales]
        if self.metadata is not None:
            meta = self.metadata.reset_index(drop=True)
            df = pd.concat([df, meta[[c for c in meta.columns if c not in df.columns]]], axis=1)
        from .bank import _se_beside

        return _se_beside(df)   # standard errors (a1_se, ...) beside their parameters

    @classmethod
    def from_frame(cls, df: pd.DataFrame) -> "PolyBank":
        import pandas as pd

        cols = [str(c) for c in df.columns]
        df = df.copy()
        df.columns = cols
        id_col = next((c for c in ("item_id", "X", "item") if c in cols), None)
        if id_col is None and cols and cols[0] in ("", "Unnamed: 0"):
            id_col = cols[0]   # R's write.csv(coef(mod, simplify = TRUE)$items): row names
        if id_col is None:
            raise BankError(f"no item id column among {cols[:10]}; name it 'item_id'")
        ids = df[id_col].astype(str).to_numpy()

        def num(c):
            v = pd.to_numeric(df[c], errors="coerce").to_numpy(float)
            bad = np.flatnonzero(np.isnan(v) & df[c].notna().to_numpy()
                                 & (df[c].astype(str).str.strip() != ""))
            if bad.size:
                raise BankError(f"column {c!r} has non-numeric value {df[c].iloc[bad[0]]!r} "
                                f"for item {ids[bad[0]]}")
            return v

        model = (df["model"].astype(str).str.lower().to_numpy() if "model" in cols
                 else "graded")
        if "a1" in cols:
            _mirt_gpcm_constants(df, cols, ids, num)
            dcols = sorted((c for c in cols if c[:1] == "d" and c[1:].isdigit() and c != "d0"),
                           key=lambda c: int(c[1:]))
            if not dcols:
                raise BankError("an ordinal bank in mirt's form needs columns a1, d1, d2, ...")
            params = np.column_stack([num("a1")] + [num(c) for c in dcols])
        elif "a" in cols:
            bcols = sorted((c for c in cols if c[:1] == "b" and c[1:].isdigit()),
                           key=lambda c: int(c[1:]))
            if not bcols and "b" in cols:   # item_id, a, b (c, u): binary items
                raise BankError("this is a bank of binary items (columns a, b): read it with "
                                "ItemBank.read (PolyBank.from_item_bank turns 1PL/2PL items "
                                "into graded ones)")
            if not bcols:
                raise BankError("an ordinal bank in threshold form needs columns a, b1, b2, ...")
            a = num("a")
            b = np.column_stack([num(c) for c in bcols])
            try:
                params = np.column_stack([a, poly.intercepts(kernel_models(model), a, b)])
            except ConfigError as e:
                raise BankError(str(e)) from None
        else:
            raise BankError(f"ordinal bank columns {cols[:12]} lack a1 (mirt) or a (ours)")
        levels = None
        if "levels" in cols:
            levels = [_numbers(s, ids[i], "levels") for i, s in enumerate(df["levels"].astype(str))]
        scales = None
        if "scale" in cols:
            scales = [None if str(s).strip() in ("", "nan") else _numbers(s, ids[i], "scale", 2)
                      for i, s in enumerate(df["scale"])]
            if levels is None:
                raise BankError("a bank with a 'scale' column needs its 'levels' column")
        used = {id_col, "model", "levels", "scale", "a1", "a", "d0"}
        extra = [c for c in cols if c not in used and not (
            c[:1] in "db" and c[1:].isdigit() or c[:2] == "ak" and c[2:].isdigit())]
        meta = df[extra].reset_index(drop=True) if extra else None   # n_responses, *_se, ...
        return cls(ids, params, model, levels, scales=scales, metadata=meta)

    @classmethod
    def read(cls, path) -> "PolyBank":
        from ..validation import read_frame

        path = Path(path)
        df = read_frame(path, what="bank file", error=BankError,
                        dtype=None if path.suffix == ".parquet" else {"item_id": str},
                        min_columns=2)
        if len(df) == 0:
            raise BankError(f"bank file {str(path)!r} has no item rows")
        return cls.from_frame(df)

    def write(self, path, *, format: str = "mirt") -> Path:
        """Write CSV or Parquet (by the extension), mirt's form or ours (thresholds)."""
        from .bank import write_frame

        return write_frame(self.to_frame(format), path)
