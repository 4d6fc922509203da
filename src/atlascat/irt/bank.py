"""ItemBank: a calibrated set of items (ids, a, b, c, u) plus optional metadata columns.

File formats
------------
ours  ``item_id, a, b, c, u[, metadata columns ...]`` (CSV or Parquet).
mirt  slope-intercept ``X|item_id, a1, d, g, u`` as written by R's mirt ``coef(..., simplify)``
      and the paper's published banks: a = a1, b = -d / a1, c = g. Recognized automatically on
      read; ``write(..., format="mirt")`` exports it back.

Validation: every parameter finite, 0 <= c < u <= 1, unique non-empty ids. Items with a <= 0 are
allowed (a bank is a fact about data) but listed by :attr:`ItemBank.nonpositive_items`.
"""
from __future__ import annotations

import json
import re
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

import numpy as np

from ..errors import BankError, ConfigError
from ..validation import normalize_item_id, theta_values
from . import models

if TYPE_CHECKING:  # pandas loads where a frame is built (a plain bank file needs none)
    import pandas as pd

__all__ = ["ItemBank", "normalize_item_id", "check_bank", "warn_negative_slopes"]

PARAM_COLUMNS = ("a", "b", "c", "u")
MIRT_COLUMNS = ("a1", "d", "g", "u")
_ID_CANDIDATES = ("item_id", "X", "item", "id", "")
# Metadata columns holding lists/dicts: JSON-encoded in CSV, native in Parquet.
_JSON_COLUMNS = ("choices", "choice_labels", "fewshot")


def _param_array(values, name: str) -> np.ndarray:
    """One parameter's values as a writable float vector; text is a BankError naming it."""
    try:
        return np.array(values, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        bad = next((v for v in np.asarray(values, dtype=object).reshape(-1)
                    if not _is_number(v)), values)
        raise BankError(f"parameter {name!r} holds {bad!r}, not a number; give numbers "
                        "(one per item)") from None


def _is_number(value) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


class ItemBank:
    """A calibrated item bank (value object; arrays are read-only).

    Item j answers right with P_j(theta) = c_j + (u_j - c_j) / (1 + exp(-a_j (theta - b_j)))
    (Birnbaum, 1968; the 4PL's upper asymptote u: Barton & Lord, 1981), no 1.702 scaling, as
    mirt and catR; mirt's slope-intercept form is a1 = a, d = -a b, g = c.

    Parameters
    ----------
    item_ids : sequence of str
    a, b : array-like, discrimination and difficulty
    c, u : array-like or None, lower and upper asymptote (default 0 and 1)
    metadata : DataFrame or None, one row per item in the same order (content area, prompt,
        choices, answer key, scorer, ...). Its index is replaced by the item ids.
    model : "1pl" | "2pl" | "3pl" | "4pl" or None (inferred from the parameters)
    """

    def __init__(self, item_ids, a, b, c=None, u=None, *, metadata=None, model=None):
        ids = np.asarray([str(i) for i in item_ids], dtype=object)
        n = len(ids)
        a, b = _param_array(a, "a"), _param_array(b, "b")
        c = np.zeros(n) if c is None else _param_array(c, "c")
        u = np.ones(n) if u is None else _param_array(u, "u")
        for name, arr in (("a", a), ("b", b), ("c", c), ("u", u)):
            if arr.shape != (n,):
                raise BankError(
                    f"parameter {name!r} has {arr.size} values but there are {n} item ids; "
                    "give one value per item"
                )
        self._validate(ids, a, b, c, u)
        for arr in (a, b, c, u):
            arr.flags.writeable = False
        ids.flags.writeable = False
        self.item_ids = ids
        self.a, self.b, self.c, self.u = a, b, c, u
        if metadata is not None:
            import pandas as pd

            metadata = pd.DataFrame(metadata).reset_index(drop=True)
            if len(metadata) != n:
                raise BankError(f"metadata has {len(metadata)} rows but the bank has {n} items")
            metadata.index = pd.Index(ids, name="item_id")
        self.metadata = metadata
        if model is not None and str(model).lower() not in ("rasch", "1pl", "2pl", "3pl", "4pl"):
            raise BankError(f"unknown bank model {model!r}; use rasch, 1pl, 2pl, 3pl or 4pl (or "
                            "None to infer it from the parameters)")
        self.model = str(model).lower() if model else self._infer_model()
        self._index = {item: i for i, item in enumerate(ids)}

    # ------------------------------------------------------------------ validation
    @staticmethod
    def _validate(ids, a, b, c, u):
        if len(ids) == 0:
            raise BankError("the item bank is empty; it needs at least one item row")
        empty = [i for i, item in enumerate(ids) if item.strip() == "" or item.lower() == "nan"]
        if empty:
            raise BankError(f"item id is empty at row(s) {empty[:10]}; every item needs an id")
        uniq, counts = np.unique(ids.astype(str), return_counts=True)
        dup = [str(d) for d in uniq[counts > 1]]
        if dup:
            rows = "; ".join(f"{d!r} at rows {[int(i) for i in np.flatnonzero(ids == d)]}"
                             for d in dup[:5])
            raise BankError(f"duplicate item id(s): {rows} ({len(dup)} duplicated id(s) in all); "
                            "ids must be unique: rename or drop the repeated rows")
        for name, arr in (("a", a), ("b", b), ("c", c), ("u", u)):
            bad = np.flatnonzero(~np.isfinite(arr))
            if bad.size:
                raise BankError(
                    f"parameter {name!r} is not finite for item(s) "
                    f"{[ids[i] for i in bad[:10]]} (row(s) {bad[:10].tolist()}); fix or drop them"
                )
        from ..validation import MAX_ABS_A, MAX_ABS_B, bank_param_error

        for name, arr, limit in (("a", a, MAX_ABS_A), ("b", b, MAX_ABS_B)):
            bad = np.flatnonzero(np.abs(arr) > limit)
            if bad.size:
                raise bank_param_error(name, ids, arr, bad)
        bad = np.flatnonzero((c < 0) | (c >= u) | (u > 1))
        if bad.size:
            detail = ", ".join(f"{ids[i]} (row {i}: c={c[i]:.4g}, u={u[i]:.4g})" for i in bad[:10])
            raise BankError(
                f"asymptotes must satisfy 0 <= c < u <= 1; violated by {detail}"
            )

    def _infer_model(self) -> str:
        if np.any(self.u < 1):
            return "4pl"
        if np.any(self.c > 0):
            return "3pl"
        if np.allclose(self.a, self.a[0]):
            return "1pl"
        return "2pl"

    # ------------------------------------------------------------------ basics
    def __len__(self) -> int:
        return len(self.item_ids)

    def __repr__(self) -> str:
        return f"ItemBank(n_items={len(self)}, model={self.model!r})"

    @property
    def n_items(self) -> int:
        """The number of items, ``len(bank)``."""
        return len(self.item_ids)

    @property
    def d(self) -> np.ndarray:
        """mirt intercept d = -a b."""
        return -self.a * self.b

    @property
    def params(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(a, b, c, u) as a tuple, ready for ``atlascat.irt.models`` functions."""
        return self.a, self.b, self.c, self.u

    @property
    def nonpositive_items(self) -> np.ndarray:
        """Ids of items with a <= 0 (they carry no or reversed information about theta)."""
        return self.item_ids[self.a <= 0]

    def index_of(self, item_ids: Iterable[str] | str):
        """Positions of the given item ids; a clear error names ids not in the bank.

        A single id (a string) gives its position as an int; a sequence gives an array."""
        if isinstance(item_ids, (str, bytes, np.str_)) or np.ndim(item_ids) == 0:
            return int(self.index_of([item_ids])[0])
        ids = [str(i) for i in item_ids]
        missing = [i for i in ids if i not in self._index]
        if missing:
            raise BankError(
                f"{len(missing)} item id(s) not in the bank, e.g. {missing[:5]}; "
                "check the id format (R-style 'X514' vs '514': use normalize_ids=True)"
            )
        return np.fromiter((self._index[i] for i in ids), dtype=np.intp, count=len(ids))

    def __contains__(self, item_id) -> bool:
        return str(item_id) in self._index

    __iter__ = None   # not iterable: its ids are item_ids (iter(bank) is Python's TypeError)

    def __array__(self, dtype=None, copy=None):
        """The bank as one object (a 0-d array), never as a sequence of its items: NumPy reads
        an object with ``__getitem__`` as one, and a bank passed where numbers belong is then
        refused by the check that names what was given."""
        out = np.empty((), dtype=object)
        out[()] = self
        return out

    def __getitem__(self, key):
        """Refused: a bank is read through its attributes (:class:`~atlascat.errors.
        BankIndexError` names them)."""
        from ..errors import BankIndexError

        raise BankIndexError(
            f"an ItemBank is not indexed (bank[{key!r}]): its item ids are bank.item_ids, its "
            "parameters bank.a, bank.b, bank.c, bank.u (bank.params), an item's position "
            f"bank.index_of({key!r}), some items as a bank bank.subset([...]), ids, parameters "
            "and metadata as a table bank.to_frame()")

    def subset(self, items) -> "ItemBank":
        """A new bank with the selected items: ids (one id: a one-item bank), a boolean mask, or
        integer positions."""
        sel = np.atleast_1d(np.asarray(items))
        if sel.dtype == bool:
            if sel.shape != (len(self),):
                raise BankError(f"boolean mask has shape {sel.shape}; expected ({len(self)},)")
            idx = np.flatnonzero(sel)
        elif sel.dtype.kind in "iu":
            idx = sel.astype(np.intp)
            if idx.size and not (-len(self) <= idx.min() and idx.max() < len(self)):
                raise BankError(f"item positions must be in [0, {len(self)}), got "
                                f"{idx.min()}..{idx.max()}; ids go in as text")
        else:
            idx = self.index_of(sel.tolist())
        meta = None if self.metadata is None else self.metadata.iloc[idx]
        return ItemBank(self.item_ids[idx], self.a[idx], self.b[idx], self.c[idx], self.u[idx],
                        metadata=meta, model=self.model)

    def with_metadata(self, metadata: pd.DataFrame) -> "ItemBank":
        """Attach metadata given as a frame indexed (or with a column ``item_id``) by item id."""
        meta = metadata.copy()
        if "item_id" in meta.columns:
            meta = meta.set_index("item_id")
        meta.index = meta.index.astype(str)
        missing = [i for i in self.item_ids if i not in meta.index]
        if missing:
            raise BankError(f"metadata lacks {len(missing)} bank item(s), e.g. {missing[:5]}")
        return ItemBank(self.item_ids, *self.params, metadata=meta.loc[list(self.item_ids)],
                        model=self.model)

    def with_benchmark(self, name: str) -> "ItemBank":
        """The same bank naming the benchmark it measures (a ``benchmark`` column, written
        with it in either format): what every output calls it (``atlas calibrate --name``),
        not the file's name."""
        return ItemBank(self.item_ids, *self.params, model=self.model,
                        metadata=benchmark_column(self.metadata, name, len(self)))

    # ------------------------------------------------------------------ IRT shortcuts
    def probability(self, theta) -> np.ndarray:
        """P(correct) for every theta and item; shape ``theta.shape + (n_items,)``."""
        return models.probability(theta_values(theta), *self.params)

    def log_probability(self, theta):
        """``(log P, log (1 - P))`` for every theta and item, each computed without
        cancellation (:func:`atlascat.irt.models.log_probability`)."""
        return models.log_probability(theta_values(theta), *self.params)

    def information(self, theta) -> np.ndarray:
        """Item Fisher information for every theta and item."""
        return models.item_information(theta_values(theta), *self.params)

    def test_information(self, theta) -> np.ndarray:
        """Test information I(theta) = sum_j I_j(theta) (Lord, 1980); shape of ``theta``."""
        return models.test_information(theta_values(theta), *self.params)

    def summary(self) -> dict:
        """Item count, model, parameter quantiles (and, for continuous scores, of each item's
        dispersion phi), and items worth a look."""
        q = [0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0]
        quant = {name: dict(zip(["min", "q05", "q25", "median", "q75", "q95", "max"],
                                np.quantile(arr, q).round(4).tolist()))
                 for name, arr in zip(PARAM_COLUMNS, self.params)}
        import pandas as pd

        meta = self.metadata   # continuous scores: the dispersion dividing the information
        phi = (None if meta is None or "dispersion" not in meta.columns else
               pd.to_numeric(meta["dispersion"], errors="coerce").to_numpy(float))
        if phi is not None and not np.all(phi == 1.0):   # all 1: 0/1 answers (dispersion.py)
            quant["dispersion"] = dict(zip(["min", "q05", "q25", "median", "q75", "q95", "max"],
                                           np.quantile(phi, q).round(4).tolist()))
        return {
            "n_items": len(self),
            "model": self.model,
            "quantiles": quant,
            "nonpositive_a": self.nonpositive_items.tolist(),
            "c_above_0.5": self.item_ids[self.c > 0.5].tolist(),
        }

    # ------------------------------------------------------------------ frames and files
    def to_frame(self, format: str = "ours") -> pd.DataFrame:
        """Our format ``item_id, a, b, c, u, <metadata>`` or mirt's ``X, a1, d, g, u``."""
        import pandas as pd

        if format == "ours":
            df = pd.DataFrame({"item_id": self.item_ids.astype(str), "a": self.a, "b": self.b,
                               "c": self.c, "u": self.u})
            if self.metadata is not None:
                meta = self.metadata.reset_index(drop=True)
                meta = meta[[col for col in meta.columns if col not in df.columns]]
                df = pd.concat([df, meta], axis=1)
            return _se_beside(df)
        if format == "mirt":
            df = pd.DataFrame({"X": self.item_ids.astype(str), "a1": self.a, "d": self.d,
                               "g": self.c, "u": self.u})
            if self.metadata is not None:   # standard errors of mirt's parameters, a1_se, ...
                meta = self.metadata.reset_index(drop=True)
                se = [col for col in meta.columns if col in {f"{p}_se" for p in MIRT_COLUMNS}
                      or col in ("benchmark", "group_priors")]   # --name; a grouped fit's
                df = pd.concat([df, meta[se]], axis=1)
            return _se_beside(df)
        raise BankError(f"unknown bank format {format!r}; use 'ours' or 'mirt'")

    @classmethod
    def from_frame(cls, df: pd.DataFrame, *, normalize_ids: bool = False, model=None) -> "ItemBank":
        """Build a bank from a frame in our format or mirt's slope-intercept form (auto-detected)."""
        import pandas as pd

        df = df.copy()
        cols = [str(col) for col in df.columns]
        df.columns = cols
        id_col = next((col for col in _ID_CANDIDATES if col in cols), None)
        if id_col is None and cols and cols[0].startswith("Unnamed"):
            id_col = cols[0]
        if id_col is None:
            if not isinstance(df.index, pd.RangeIndex):
                df = df.reset_index()
                id_col = str(df.columns[0])
                df.columns = [str(col) for col in df.columns]
            else:
                raise BankError(
                    f"no item id column found among {cols[:10]}; name it 'item_id' (or 'X' for mirt)"
                )
        ids = df[id_col].astype(str).to_numpy()
        if normalize_ids:
            ids = np.array([normalize_item_id(i) for i in ids], dtype=object)
        if all(col in df.columns for col in ("a1", "a2", "d")):   # read as 1-D, a2.. were lost
            raise BankError("this is a multidimensional 2PL bank (loadings a1, a2, ..., "
                            "intercepts d; atlascat.irt.multidim.MultidimBank): this step takes "
                            "a one-dimensional bank (a, b, c, u or mirt's a1, d, g, u)")
        if all(col in df.columns for col in ("a1", "d")):
            a = cls._numeric(df, "a1", ids)
            d = cls._numeric(df, "d", ids)
            zero = np.flatnonzero(a == 0)
            if zero.size:
                raise BankError(
                    f"a1 = 0 for item(s) {[ids[i] for i in zero[:10]]}: difficulty b = -d/a1 is "
                    "undefined; drop these items"
                )
            b = -d / a
            c = cls._numeric(df, "g", ids) if "g" in df.columns else None
            used = {id_col, "a1", "d", "g", "u"}
        elif all(col in df.columns for col in ("a", "b")):
            a = cls._numeric(df, "a", ids)
            b = cls._numeric(df, "b", ids)
            c = cls._numeric(df, "c", ids) if "c" in df.columns else None
            used = {id_col, "a", "b", "c", "u"}
        else:
            from .polytomous import is_poly_frame

            if is_poly_frame(df):
                raise BankError("this is a bank of ordinal items (graded / gpcm: columns a1, "
                                "d1, d2, ...): read it with atlascat.irt.polybank.PolyBank; "
                                "scoring and the adaptive test take it, this step takes "
                                "binary items only")
            raise BankError(
                f"bank columns {cols[:12]} are neither ours (item_id, a, b, c, u) nor mirt's "
                "(X, a1, d, g, u)"
            )
        u = cls._numeric(df, "u", ids) if "u" in df.columns else None
        extra = [col for col in df.columns if col not in used]
        meta = df[extra].reset_index(drop=True) if extra else None
        if meta is not None:
            for col in _JSON_COLUMNS:
                if col in meta.columns:
                    meta[col] = meta[col].map(_maybe_json)
        return cls(ids, a, b, c, u, metadata=meta, model=model)

    @staticmethod
    def _numeric(df, col, ids):
        import pandas as pd

        values = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)
        bad = np.flatnonzero(np.isnan(values) & df[col].notna().to_numpy())
        if bad.size:
            raise BankError(
                f"column {col!r} has non-numeric value {df[col].iloc[bad[0]]!r} for item "
                f"{ids[bad[0]]} (row {bad[0]})"
            )
        return values

    @classmethod
    def read(cls, path, *, normalize_ids: bool = False, model=None) -> "ItemBank":
        """Read a bank from CSV (optionally .gz) or Parquet; mirt form is recognized automatically."""
        from ..validation import read_frame

        path = Path(path)
        plain = _read_plain_bank(path, normalize_ids, model)
        if plain is not None:
            return plain
        df = read_frame(path, what="bank file", error=BankError,
                        dtype=None if path.suffix == ".parquet" else {"item_id": str, "X": str},
                        min_columns=2)
        if path.suffix != ".parquet":
            from ..validation import literal_id_column

            for col in ("item_id", "X"):
                df = literal_id_column(df, path, col)
        if len(df) == 0:
            raise BankError(f"bank file {str(path)!r} has no item rows")
        # pandas names a repeated header 'a.1': back to the names as written, to find a repeat
        names = [str(c) for c in df.columns]
        _check_unique_columns([b if b in names else n for n, b in
                               ((n, re.sub(r"\.\d+$", "", n)) for n in names)], path)
        return cls.from_frame(df, normalize_ids=normalize_ids, model=model)

    def write(self, path, *, format: str = "ours") -> Path:
        """Write CSV or Parquet (by extension) in our format or mirt's slope-intercept form."""
        return write_frame(self.to_frame(format), path)


def _check_unique_columns(header, path: Path) -> None:
    """A column named twice (two 'a' columns) leaves which one is meant unknown: refused."""
    seen = set()
    for name in header:
        if name in seen:
            raise BankError(f"bank file {str(path)!r} has the column {name!r} twice; keep one")
        seen.add(name)


def _read_plain_bank(path: Path, normalize_ids: bool, model) -> "ItemBank | None":
    """The bank of a plain CSV (:func:`atlascat._table.read_plain_csv`) that holds an id column
    (item_id or X) and parameter columns only, every parameter a plain decimal number: read
    without pandas, the same bank :meth:`ItemBank.read` builds from the frame. None for any
    other file (metadata columns, missing or odd cells, a = 0 in mirt's form)."""
    from .._table import decimals, read_plain_csv

    got = read_plain_csv(path)
    if got is None:
        return None
    header, rows = got
    _check_unique_columns(header, path)
    cols = set(header)
    id_col = "item_id" if "item_id" in cols else "X"
    params = cols - {id_col}
    mirt = {"a1", "d"} <= params <= set(MIRT_COLUMNS)
    if id_col not in cols or not (mirt or {"a", "b"} <= params <= set(PARAM_COLUMNS)):
        return None
    at = {name: header.index(name) for name in cols}
    ids = [r[at[id_col]] for r in rows]
    if any(not i for i in ids):
        return None
    value = {}
    for p in params:
        numbers = decimals([r[at[p]] for r in rows])
        if numbers is None:
            return None
        value[p] = np.array(numbers)
    if normalize_ids:
        ids = [normalize_item_id(i) for i in ids]
    if mirt:
        a = value["a1"]
        if np.any(a == 0):
            return None
        b, c = -value["d"] / a, value.get("g")
    else:
        a, b, c = value["a"], value["b"], value.get("c")
    return ItemBank(ids, a, b, c, value.get("u"), model=model)


def write_frame(df: pd.DataFrame, path) -> Path:
    """A bank's frame to CSV or Parquet (by the extension), numbers at full precision; in a CSV
    the JSON-valued columns as JSON text. Returns the path written."""
    from ..validation import check_output_file, write_guard

    path = check_output_file(path, option=None, what="bank file")
    with write_guard(path, option=None, what="bank file"):
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".parquet":
            df.to_parquet(path, index=False)
        else:
            df = df.assign(**{c: df[c].map(_to_json) for c in _JSON_COLUMNS if c in df.columns})
            df.to_csv(path, index=False, float_format="%.17g")
    return path


def _se_beside(df: pd.DataFrame) -> pd.DataFrame:
    """Each standard-error column ``<p>_se`` moved beside its parameter ``<p>``."""
    cols = [c for c in df.columns if not (str(c).endswith("_se") and str(c)[:-3] in df.columns)]
    out = []
    for c in cols:
        out.append(c)
        if f"{c}_se" in df.columns:
            out.append(f"{c}_se")
    return df[out]


def _to_json(value):
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, ensure_ascii=False)
    return value


def _maybe_json(value):
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


#: the banks already warned about their negative slopes
_WARNED: "weakref.WeakSet" = weakref.WeakSet()


def warn_negative_slopes(bank) -> None:
    """Warn, once per bank object, when items have a negative slope (a < 0): a right answer
    lowers theta, so they measure the opposite of ability (a wrong answer key, items
    calibrated without a slope prior). Scoring models them as they are and the adaptive test
    still selects them by information, which grows with a^2; the adaptive test
    (:func:`~atlascat.cat.simulate.simulate_cat`, every session on the bank) and
    :func:`~atlascat.irt.ability.estimate_ability` call it."""
    from ..errors import warn_user

    a = getattr(bank, "a", None)
    if a is None or bank in _WARNED:
        return
    _WARNED.add(bank)
    negative = np.flatnonzero(np.asarray(a) < 0)
    if negative.size:
        ids = [str(i) for i in np.asarray(bank.item_ids)[negative[:3]]]
        warn_user(f"{negative.size} of the bank's {len(bank)} items have a negative slope "
                  f"(a < 0, e.g. {', '.join(ids)}): a right answer on them lowers theta, they "
                  "measure the opposite of ability (a wrong answer key?); check them or drop "
                  "them from the bank")


def check_bank(bank, also: tuple = (), what: str = "an atlascat.ItemBank"):
    """An ItemBank, or one of the classes ``also`` (named by ``what``): anything else is a
    ConfigError naming the argument (a path or a bundled name with the call that loads it, a
    DataFrame with ``ItemBank.from_frame``), not an AttributeError deep inside the caller."""
    if isinstance(bank, (ItemBank, *also)):
        return bank
    if isinstance(bank, (str, Path)):
        raise ConfigError(f"bank {str(bank)!r} is a name or path, not an ItemBank; load it with "
                          "atlascat.load_bank(name) for a bundled bank, ItemBank.read(path) for "
                          "a file, or atlascat.catalogue.BankRef.from_option(...).load() for a "
                          "bank folder")
    hint = ("; a frame of item parameters (item_id, a, b, c, u) becomes one by "
            "ItemBank.from_frame(df)" if type(bank).__name__ == "DataFrame" else "")
    raise ConfigError(f"bank must be {what}, got {type(bank).__name__}{hint}")


def benchmark_column(metadata, name: str, n_items: int) -> pd.DataFrame:
    """``metadata`` (a bank's, or None) with a ``benchmark`` column holding ``name`` for each
    of the ``n_items`` items: the name :attr:`atlascat.catalogue.BankRef.bench` reads back.
    A name that is empty or not text is refused."""
    return constant_column(metadata, "benchmark", check_benchmark_name(name), n_items)


def constant_column(metadata, column: str, value, n_items: int) -> pd.DataFrame:
    """``metadata`` (a bank's, or None) with ``column`` holding ``value`` for each of the
    ``n_items`` items: what a bank records of itself (its benchmark, a grouped fit's priors)."""
    import pandas as pd

    meta = (pd.DataFrame(index=range(n_items)) if metadata is None
            else metadata.reset_index(drop=True).copy())
    meta[column] = value
    return meta


def stacked_metadata(banks):
    """The banks' metadata one under the other (item text, SEs, benchmark kept; a bank without
    any gives empty rows), or None when none of them has any."""
    import pandas as pd

    if all(b.metadata is None for b in banks):
        return None
    return pd.concat([b.metadata if b.metadata is not None else pd.DataFrame(index=range(len(b)))
                      for b in banks], ignore_index=True)


def check_benchmark_name(name, option: str = "--name") -> str:
    """``name`` stripped, or a ConfigError naming ``option`` when it is empty or not text."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{option} must be the benchmark's name (non-empty text), got {name!r}")
    return name.strip()
