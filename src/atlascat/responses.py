"""ResponseMatrix: subjects (LLMs) x items, float64 scores in [0, 1], NaN = not administered.

Readers: wide CSV / CSV.GZ / Parquet (first column = subject id, named or not), long format
(subject, item, score; a judge's model, prompt, rating), pandas DataFrames, and response-pattern tables with a frequency column
(one row per pattern, ``freq`` = how many subjects gave it; kept as row ``weights``).

Validation happens once, at the boundary, with one clear error per problem that names the
offending row or column: duplicate subject or item ids, text cells, values outside [0, 1], an
empty matrix, all-missing rows or columns (an error unless ``on_empty="drop"``, which drops them
with a warning listing them, or ``on_empty="keep"``).
"""
from __future__ import annotations

import csv
import gzip
import io
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .errors import ResponseDataError, warn_user
from .validation import normalize_item_id

if TYPE_CHECKING:  # pandas loads where a frame is built
    import pandas as pd

__all__ = ["ResponseMatrix", "tinybenchmarks_threshold", "as_response_matrix",
           "as_labelled_responses", "register_name_resolver"]

#: how a name that is not a file becomes a ResponseMatrix (the catalogue registers its bundled
#: matrices here when imported; None: names are read as file paths)
_NAME_RESOLVER = None

_LONG_SUBJECT = ("subject_id", "subject", "model")
_LONG_ITEM = ("item_id", "item", "doc_id", "prompt")
_LONG_SCORE = ("score", "response", "correct", "acc", "value", "rating")


def _open_text(path: Path):
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


#: column names that count a response pattern's rows (a hint for --freq-column)
_FREQ_NAMES = ("freq", "frequency", "count", "counts", "n", "weight", "weights")


def _first_dupes(values) -> dict:
    seen: dict[str, list[int]] = {}
    for i, v in enumerate(values):
        seen.setdefault(v, []).append(i)
    return {k: rows for k, rows in seen.items() if len(rows) > 1}


def looks_long(df: pd.DataFrame) -> bool:
    """Whether a frame is long format: three columns, a subject, an item and a score column."""
    cols = {str(c) for c in df.columns}
    return (len(cols) == 3 and bool(cols & set(_LONG_SUBJECT)) and bool(cols & set(_LONG_ITEM))
            and bool(cols & set(_LONG_SCORE)))


def long_to_wide(df: pd.DataFrame, *, subject: str | None = None, item: str | None = None,
                 score: str | None = None, normalize_ids: bool = False) -> pd.DataFrame:
    """Long format (one row per subject, item and score; column names guessed when not given)
    to a wide numeric frame, subjects x items, NaN where a pair is absent. Refused with one
    line: a missing column, a repeated (subject, item) pair, a text score. The scores' range
    is the caller's to check (0/1 and partial credit, or ratings on their own scale)."""
    import pandas as pd

    cols = [str(c) for c in df.columns]

    def pick(given, candidates, what):
        if given is not None:
            if given not in cols:
                raise ResponseDataError(f"{what} column {given!r} not found in {cols}")
            return given
        for cand in candidates:
            if cand in cols:
                return cand
        raise ResponseDataError(
            f"no {what} column in long-format data (looked for {list(candidates)}); name it"
        )

    s, i, v = pick(subject, _LONG_SUBJECT, "subject"), pick(item, _LONG_ITEM, "item"), \
        pick(score, _LONG_SCORE, "score")
    long = df[[s, i, v]].copy()
    long[s] = long[s].astype(str)
    long[i] = long[i].astype(str)
    if normalize_ids:
        long[i] = long[i].map(normalize_item_id)
    dup = long.duplicated([s, i], keep=False)
    if dup.any():
        first = long[dup].iloc[0]
        raise ResponseDataError(
            f"{int(dup.sum())} rows repeat a (subject, item) pair, e.g. subject {first[s]!r}, "
            f"item {first[i]!r} (row {int(np.flatnonzero(dup.to_numpy())[0])}); keep one score per pair"
        )
    scores = pd.to_numeric(long[v], errors="coerce")
    bad = scores.isna() & long[v].notna()
    if bad.any():
        r = int(np.flatnonzero(bad.to_numpy())[0])
        raise ResponseDataError(f"text score {long[v].iloc[r]!r} at row {r} of column {v!r}")
    long[v] = scores
    return long.pivot(index=s, columns=i, values=v)


def _mostly_scores(col) -> bool:
    """An object column whose cells are mostly 0/1 numbers with a few text cells is an item
    with a typo ("yes" among 0/1), not the subject ids: its text cell is reported as such."""
    import pandas as pd

    num = pd.to_numeric(col, errors="coerce").dropna()
    return len(num) * 2 >= len(col) > 1 and bool(num.isin([0, 1]).all())


class ResponseMatrix:
    """Scores of subjects (rows) on items (columns).

    Parameters
    ----------
    values : array-like (n_subjects, n_items), float in [0, 1] or NaN for missing
    subject_ids, item_ids : sequences of str (default "0", "1", ...)
    weights : optional (n_subjects,) positive frequencies (response-pattern data)
    on_empty : what to do with all-missing rows/columns: "error" (default), "drop" (drop them
        with a warning listing them) or "keep" (keep them, e.g. to describe a file as it is)
    """

    def __init__(self, values, subject_ids=None, item_ids=None, *, weights=None,
                 on_empty: str = "error"):
        import pandas as pd

        from .validation import check_scores

        if isinstance(values, ResponseMatrix):
            subject_ids = values.subject_ids if subject_ids is None else subject_ids
            item_ids = values.item_ids if item_ids is None else item_ids
            weights = values.weights if weights is None else weights
            values = values.values
        elif isinstance(values, pd.DataFrame):  # keep the frame's labels
            subject_ids = list(values.index) if subject_ids is None else subject_ids
            item_ids = list(values.columns) if item_ids is None else item_ids
            values = values.to_numpy(dtype=object)
        sid_hint = None if subject_ids is None else [str(s) for s in subject_ids]
        iid_hint = None if item_ids is None else [str(i) for i in item_ids]
        arr = np.array(check_scores(values, item_ids=iid_hint, subject_ids=sid_hint) if
                       np.asarray(values).dtype.kind not in "fiub" else values,
                       dtype=float, copy=True)
        if arr.ndim != 2 or arr.size == 0:
            raise ResponseDataError(
                f"the response matrix is empty (shape {arr.shape}); it needs at least one "
                "subject row and one item column"
            )
        n, m = arr.shape
        sids = np.asarray([str(s) for s in (range(n) if subject_ids is None else subject_ids)],
                          dtype=object)
        iids = np.asarray([str(i) for i in (range(m) if item_ids is None else item_ids)],
                          dtype=object)
        if sids.shape != (n,):
            raise ResponseDataError(f"{len(sids)} subject ids for {n} rows")
        if iids.shape != (m,):
            raise ResponseDataError(f"{len(iids)} item ids for {m} columns")
        dup = _first_dupes(sids.tolist())
        if dup:
            k, rows = next(iter(dup.items()))
            same = sum(all(np.array_equal(arr[r[0]], arr[j], equal_nan=True) for j in r[1:])
                       for r in dup.values())
            hint = (f"; {same} of them repeat identical rows: keep one of each (pandas: "
                    "df[~df.index.duplicated()])" if same else "")
            fix = f"each subject must appear once: merge or rename the rows{hint}"
            if all(str(x) in ("0", "1", "0.0", "1.0") for x in dup):   # scores, not names
                freq = next((str(c) for c in iids if str(c).lower() in _FREQ_NAMES), None)
                fix = "the first column holds 0/1 scores, not model ids: " + (
                    f"a table of response patterns counted in column {freq!r} needs "
                    f"--freq-column {freq} (Python: freq_column={freq!r})" if freq else
                    "put each model's id in the first column")
            # an unnamed pattern table repeats its first column's 0 on hundreds of rows
            where = (str(rows) if len(rows) <= 5 else
                     f"[{', '.join(str(r) for r in rows[:5])}, ...] ({len(rows)} rows)")
            raise ResponseDataError(
                f"duplicate subject id {k!r} at rows {where} ({len(dup)} duplicated id(s) in all); "
                + fix)
        _refuse_unnamed([] if item_ids is None else item_ids)
        dup = _first_dupes(iids.tolist())
        if dup:
            k, cols = next(iter(dup.items()))
            raise ResponseDataError(
                f"duplicate item id {k!r} in columns {cols} ({len(dup)} duplicated id(s) in all); "
                "each item must appear once"
            )
        lo, hi = np.fmin.reduce(arr, axis=None), np.fmax.reduce(arr, axis=None)  # NaN-ignoring
        in_range = (lo >= 0 and hi <= 1) or (np.isnan(lo) and np.isnan(hi))
        bad = None if in_range else \
            np.argwhere(np.isinf(arr) | (~np.isnan(arr) & ((arr < 0) | (arr > 1))))
        if bad is not None and bad.size:
            r, c = bad[0]
            obs = arr[~np.isnan(arr)]
            ratings = bool(np.isfinite(obs).all() and (obs == np.round(obs)).all())
            cols = np.unique(bad[:, 1])
            if len(cols) == 1 and str(iids[c]).lower() in _FREQ_NAMES and ratings:
                hint = (f"; column {iids[c]!r} looks like pattern frequencies (a table of "
                        "response patterns, as mirt's LSAT7): pass --freq-column "
                        f"{iids[c]} (Python: freq_column={str(iids[c])!r})")
            elif ratings and np.isin(obs, (0.0, hi)).all():     # right / wrong as 0 / 100
                hint = (f"; only 0 and {hi:g}: right / wrong on a 0-{hi:g} scale: divide by "
                        f"{hi:g}, or give the scale (--score-range 0 {hi:g} of a bank folder)")
            elif ratings:
                hint = (f"; whole numbers {lo:g}-{hi:g} are ratings: fit them with the graded "
                        "or gpcm model (--model graded; Python: calibrate(ratings, "
                        "model='graded'), the ratings a DataFrame or the file's path, not a "
                        "ResponseMatrix), or give their scale to read them as a score "
                        f"(--score-range {lo:g} {hi:g} of a bank folder)")
            elif np.isfinite(obs).all():
                hint = (f"; values {lo:g}-{hi:g}: a score on another scale (BLEU 0-100) is "
                        "read with its scale given (--score-range LO HI of a bank folder)")
            else:
                hint = ""
            raise ResponseDataError(
                f"value {arr[r, c]:g} outside [0, 1] at row {r} (subject {sids[r]!r}), column "
                f"{iids[c]!r} ({len(bad)} such cell(s)); scores must be 0/1 or partial credit "
                "in [0, 1]" + hint
            )
        if weights is not None:
            weights = np.asarray(weights, dtype=float).reshape(-1)
            if weights.shape != (n,) or np.any(~np.isfinite(weights)) or np.any(weights < 0):
                raise ResponseDataError(
                    f"weights must be {n} finite non-negative frequencies, one per row"
                )
        observed = ~np.isnan(arr)
        empty_rows = np.flatnonzero(~observed.any(axis=1))
        empty_cols = np.flatnonzero(~observed.any(axis=0))
        if empty_rows.size or empty_cols.size:
            what = []
            if empty_rows.size:
                what.append(f"subject(s) with no response: {sids[empty_rows[:10]].tolist()}"
                            + (" ..." if empty_rows.size > 10 else ""))
            if empty_cols.size:
                what.append(f"item(s) with no response: {iids[empty_cols[:10]].tolist()}"
                            + (" ..." if empty_cols.size > 10 else ""))
                if any(str(iids[j]).startswith("Unnamed: ") for j in empty_cols):
                    what.append("an empty column without a header is a delimiter at the end "
                                "of every line: re-save the file without it")
            if on_empty not in ("error", "drop", "keep"):
                raise ResponseDataError(f"on_empty must be 'error', 'drop' or 'keep', not {on_empty!r}")
            if on_empty == "error":
                raise ResponseDataError(
                    "; ".join(what) + ". Pass on_empty='drop' (CLI: --drop-empty) to drop them"
                )
        if (empty_rows.size or empty_cols.size) and on_empty == "drop":
            warn_user("dropped all-missing rows/columns: " + "; ".join(what))
            keep_r = np.setdiff1d(np.arange(n), empty_rows)
            keep_c = np.setdiff1d(np.arange(m), empty_cols)
            if keep_r.size == 0 or keep_c.size == 0:
                raise ResponseDataError("no responses left after dropping all-missing rows/columns")
            arr = arr[np.ix_(keep_r, keep_c)]
            sids, iids = sids[keep_r], iids[keep_c]
            weights = None if weights is None else weights[keep_r]
        arr.flags.writeable = False
        self.values = arr
        self.subject_ids = sids
        self.item_ids = iids
        self.weights = weights

    # ------------------------------------------------------------------ properties
    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape

    @property
    def n_subjects(self) -> int:
        return self.values.shape[0]

    @property
    def n_items(self) -> int:
        return self.values.shape[1]

    @property
    def observed(self) -> np.ndarray:
        """Boolean mask of administered cells."""
        return ~np.isnan(self.values)

    @property
    def missing_fraction(self) -> float:
        return float(np.isnan(self.values).mean())

    @property
    def is_binary(self) -> bool:
        v = self.values[~np.isnan(self.values)]
        return bool(np.all((v == 0) | (v == 1)))

    @property
    def accuracy(self) -> np.ndarray:
        """Per-subject mean score over administered items (NaN for a subject with none)."""
        obs = self.observed
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(obs, self.values, 0.0).sum(1) / obs.sum(1)

    @property
    def item_means(self) -> np.ndarray:
        """Per-item mean score (classical p-value) over subjects who saw it (frequency-weighted)."""
        w = self.subject_weights()[:, None]
        obs = self.observed
        with np.errstate(invalid="ignore", divide="ignore"):
            return (np.where(obs, self.values, 0.0) * w).sum(0) / (obs * w).sum(0)

    @property
    def n_observed(self) -> np.ndarray:
        """Number of administered items per subject."""
        return self.observed.sum(axis=1)

    def subject_weights(self) -> np.ndarray:
        """Each subject's weight: its pattern frequency (``weights``), 1 when there are none."""
        return np.ones(self.n_subjects) if self.weights is None else self.weights

    def __repr__(self) -> str:
        weighted = ("" if self.weights is None else
                    f", weights: {self.n_subjects} response patterns of "
                    f"{float(np.sum(self.weights)):g} subjects")
        return (f"ResponseMatrix(n_subjects={self.n_subjects}, n_items={self.n_items}, "
                f"missing={self.missing_fraction:.1%}{weighted})")

    # ------------------------------------------------------------------ transforms
    def subset(self, subjects=None, items=None, *, on_empty: str = "error") -> "ResponseMatrix":
        """Select subjects / items by ids, boolean mask, or integer positions (order kept as given);
        ``on_empty``: a subject or item left with no answer, as the constructor's."""
        r = self._select(subjects, self.subject_ids, "subject")
        c = self._select(items, self.item_ids, "item")
        w = None if self.weights is None else self.weights[r]
        return ResponseMatrix(self.values[np.ix_(r, c)], self.subject_ids[r], self.item_ids[c],
                              weights=w, on_empty=on_empty)

    @staticmethod
    def _select(sel, ids, what):
        if sel is None:
            return np.arange(len(ids))
        sel = np.atleast_1d(np.asarray(sel))   # one id: that one, not its characters
        if sel.dtype == bool:
            if sel.shape != ids.shape:
                raise ResponseDataError(f"{what} mask has shape {sel.shape}; expected {ids.shape}")
            return np.flatnonzero(sel)
        if sel.dtype.kind in "iu":
            if sel.size and not (-len(ids) <= sel.min() and sel.max() < len(ids)):
                raise ResponseDataError(f"{what} positions must be in [0, {len(ids)}), got "
                                        f"{sel.min()}..{sel.max()}; ids go in as text")
            return sel.astype(np.intp)
        index = {v: i for i, v in enumerate(ids)}
        missing = [s for s in sel.tolist() if str(s) not in index]
        if missing:
            raise ResponseDataError(f"{len(missing)} {what} id(s) not in the matrix, e.g. {missing[:5]}")
        return np.array([index[str(s)] for s in sel.tolist()], dtype=np.intp)

    def binarize(self, threshold: float = 0.5) -> "ResponseMatrix":
        """Scores strictly above ``threshold`` become 1, others 0; missing stays missing."""
        v = np.where(np.isnan(self.values), np.nan, (self.values > threshold).astype(float))
        return ResponseMatrix(v, self.subject_ids, self.item_ids, weights=self.weights)

    def expand(self) -> "ResponseMatrix":
        """Repeat each row ``weights`` times (integer frequencies) to get one row per subject."""
        if self.weights is None:
            return self
        reps = self.weights.astype(int)
        if not np.allclose(reps, self.weights):
            raise ResponseDataError("expand() needs integer frequencies")
        idx = np.repeat(np.arange(self.n_subjects), reps)
        sids = [f"{self.subject_ids[i]}#{k}" for i, k in
                zip(idx, np.concatenate([np.arange(r) for r in reps]))]
        return ResponseMatrix(self.values[idx], sids, self.item_ids)

    def normalize_item_ids(self) -> "ResponseMatrix":
        """Rename R-style item ids ``X514`` to ``514``."""
        return ResponseMatrix(self.values, self.subject_ids,
                              [normalize_item_id(i) for i in self.item_ids], weights=self.weights)

    def aligned_values(self, item_ids, *, extra: str = "error") -> np.ndarray:
        """Scores as an array whose columns follow ``item_ids`` (e.g. a bank's item order).

        Items in ``item_ids`` the matrix lacks become all-missing columns. Items of the matrix not
        in ``item_ids`` are an error (``extra="error"``) or left out (``extra="ignore"``).
        """
        index = {v: i for i, v in enumerate(self.item_ids)}
        wanted = [str(i) for i in item_ids]
        if extra == "error":
            known = set(wanted)
            unknown = [i for i in self.item_ids if i not in known]
            if unknown:
                raise ResponseDataError(
                    f"{len(unknown)} item(s) of the responses are not in the bank, e.g. "
                    f"{unknown[:5]}; check the id format (R-style 'X514' vs '514': normalize_ids) "
                    "or subset the responses to the bank's items"
                )
        out = np.full((self.n_subjects, len(wanted)), np.nan)
        src = np.array([index.get(i, -1) for i in wanted], dtype=np.intp)
        have = src >= 0
        out[:, have] = self.values[:, src[have]]
        return out

    # ------------------------------------------------------------------ frames
    def to_frame(self) -> pd.DataFrame:
        """Wide frame indexed by subject id (index name ``subject_id``), one column per item."""
        import pandas as pd

        df = pd.DataFrame(self.values, index=pd.Index(self.subject_ids.astype(str), name="subject_id"),
                          columns=self.item_ids.astype(str))
        if self.weights is not None:
            df.insert(0, "freq", self.weights)
        return df

    def to_long(self) -> pd.DataFrame:
        """Long frame (subject_id, item_id, score) of the administered cells."""
        import pandas as pd

        r, c = np.nonzero(self.observed)
        return pd.DataFrame({"subject_id": self.subject_ids[r].astype(str),
                             "item_id": self.item_ids[c].astype(str),
                             "score": self.values[r, c]})

    @classmethod
    def from_frame(cls, df: pd.DataFrame, *, subject_column: str | None = None,
                   freq_column: str | None = None, normalize_ids: bool = False,
                   on_empty: str = "error") -> "ResponseMatrix":
        """Wide DataFrame: subject ids in ``subject_column``, else the index when it is not a
        default RangeIndex, else the first column. Every other column is an item."""
        import pandas as pd

        df = df.copy()
        _refuse_unnamed(df.columns)   # before NaN becomes the string "nan"
        df.columns = [str(c) for c in df.columns]
        if subject_column is not None:
            if subject_column not in df.columns:
                raise ResponseDataError(f"subject column {subject_column!r} not found")
            df = df.set_index(subject_column)
        elif isinstance(df.index, pd.RangeIndex) and len(df.columns) > 0 and (
                ((df.dtypes.iloc[0] == object or str(df.dtypes.iloc[0]).startswith("str"))
                 and not _mostly_scores(df.iloc[:, 0]))
                or df.columns[0] in ("", "model", "subject", "subject_id")
                or df.columns[0].startswith("Unnamed")):
            df = df.set_index(df.columns[0])
        weights = None
        if freq_column is not None:
            if freq_column not in df.columns:
                raise ResponseDataError(
                    f"frequency column {freq_column!r} not found; columns are {list(df.columns)[:10]}"
                )
            weights = pd.to_numeric(df.pop(freq_column), errors="coerce").to_numpy(float)
            if np.any(np.isnan(weights)):
                raise ResponseDataError(f"frequency column {freq_column!r} has non-numeric cells")
        if df.shape[1] == 0 or df.shape[0] == 0:
            raise ResponseDataError(
                f"the response matrix is empty ({df.shape[0]} rows, {df.shape[1]} item columns)"
            )
        missing_ids = [i for i, v in enumerate(df.index) if v is None or (isinstance(v, float)
                                                                          and np.isnan(v))
                       or (isinstance(v, str) and not v.strip())]
        if missing_ids:
            raise ResponseDataError(f"subject id is missing at row(s) {missing_ids[:10]}; every "
                                    "row needs an id in the first column (or the index)")
        values = cls._numeric_values(df)
        items = [normalize_item_id(c) for c in df.columns] if normalize_ids else list(df.columns)
        sids = [str(s) for s in df.index] if not (freq_column and isinstance(df.index, pd.RangeIndex)) \
            else [f"pattern{i}" for i in range(len(df))]
        return cls(values, sids, items, weights=weights, on_empty=on_empty)

    @staticmethod
    def _numeric_values(df: pd.DataFrame) -> np.ndarray:
        import pandas as pd

        numeric = df.apply(pd.to_numeric, errors="coerce")
        text = numeric.isna().to_numpy() & df.notna().to_numpy()
        if text.any():
            # blank-looking strings count as missing, anything else is an error
            raw = df.to_numpy(dtype=object)
            for r, c in np.argwhere(text):
                cell = raw[r, c]
                if isinstance(cell, str) and cell.strip().upper() in ("", "NA", "NAN", "NULL"):
                    continue
                column = (f"; column {df.columns[c]!r} holds no score at all: the first "
                          "column names the models and every other is an item, so drop it"
                          if c == 0 and len(df) > 1 and numeric.iloc[:, c].isna().all()
                          else "")
                names = {str(n).lower() for n in df.columns} | {str(df.index.name).lower()}
                if {"item", "item_id"} & names:   # one row per (subject, item, score)
                    column = ("; it looks like long format (an item column): read it with "
                               "format='long' (ResponseMatrix.from_long for a DataFrame)")
                subject = df.index[r].item() if hasattr(df.index[r], "item") else df.index[r]
                raise ResponseDataError(
                    f"text cell {cell!r} at row {r} (subject {subject!r}), column "
                    f"{df.columns[c]!r}; scores must be numbers in [0, 1] or blank for missing"
                    + column)
        return numeric.to_numpy(dtype=float)

    @classmethod
    def from_long(cls, df: pd.DataFrame, *, subject: str | None = None, item: str | None = None,
                  score: str | None = None, normalize_ids: bool = False,
                  on_empty: str = "error") -> "ResponseMatrix":
        """Long format: one row per (subject, item, score); column names are guessed if not given."""
        wide = long_to_wide(df, subject=subject, item=item, score=score,
                            normalize_ids=normalize_ids)
        return cls(wide.to_numpy(float), wide.index, wide.columns, on_empty=on_empty)

    # ------------------------------------------------------------------ files
    @classmethod
    def read(cls, path, *, format: str | None = None, normalize_ids: bool = False,
             freq_column: str | None = None, on_empty: str = "error",
             subject_column: str | None = None) -> "ResponseMatrix":
        """Read a wide (default) or long (``format="long"``) matrix from CSV, CSV.GZ or Parquet.

        Wide files: first column = subject id (also when unnamed); other columns = items.
        """
        import pandas as pd

        from .validation import check_input_file, read_frame

        path = check_input_file(path, what="response file")
        what = "response file"
        if path.suffix == ".parquet":
            df = read_frame(path, what=what, min_columns=2)
            if not isinstance(df.index, pd.RangeIndex):
                df = df.reset_index()
        elif path.suffix in (".csv", ".gz", ".txt", ".tsv"):
            sep = "\t" if ".tsv" in path.suffixes else ","
            try:
                with _open_text(path) as fh:
                    header = next(csv.reader(fh, delimiter=sep), None)
            except (OSError, UnicodeDecodeError, EOFError, zlib.error, csv.Error):
                read_frame(path, what=what)  # raises the one-line error naming the defect
                raise ResponseDataError(f"cannot read {what} {str(path)!r}; check its format")
            if not header:
                raise ResponseDataError(f"{what} {str(path)!r} is empty; expected a header row "
                                        "of item ids")
            dup = _first_dupes(header[1:])
            if dup and format != "long":
                k, cols = next(iter(dup.items()))
                raise ResponseDataError(
                    f"duplicate item id {k!r} in the header of {str(path)!r} (columns "
                    f"{[c + 1 for c in cols]}); each item must appear once"
                )
            # pattern tables (freq_column) may have no subject column: don't force one to text
            dtype = None if freq_column else {header[0]: str}
            df = read_frame(path, what=what, dtype=dtype, min_columns=2)
            if not freq_column:
                from .validation import literal_id_column

                df = literal_id_column(df, path, header[0], sep=sep)
            if df.shape[0] == 0:
                raise ResponseDataError(f"{what} {str(path)!r} has a header but no subject rows")
        else:
            raise ResponseDataError(
                f"unsupported file type {path.suffix!r} for {str(path)!r}; use .csv, .csv.gz or .parquet"
            )
        if format == "long" or (format is None and looks_long(df)):
            return cls.from_long(df, normalize_ids=normalize_ids, on_empty=on_empty)
        if subject_column is None and freq_column is None:
            subject_column = str(df.columns[0])
        if freq_column is None:
            df = _drop_identical_repeats(df, subject_column, path)
        return cls.from_frame(df, subject_column=subject_column, freq_column=freq_column,
                              normalize_ids=normalize_ids, on_empty=on_empty)

    def write(self, path, *, score_range=None) -> Path:
        """Write wide CSV (``.csv``/``.csv.gz``) or Parquet; first column ``subject_id``.
        ``score_range`` (lo, hi): each score written on that scale, lo + (hi - lo) y (the
        inverse of ``atlas build-bank --score-range``'s y = (x - lo) / (hi - lo))."""
        from .validation import check_output_file, write_guard

        path = check_output_file(path, option=None, what="response file")
        df = self.to_frame()
        if score_range is not None:
            lo, hi = map(float, score_range)
            items = list(self.item_ids.astype(str))
            df[items] = lo + (hi - lo) * df[items]
        df = df.reset_index()
        with write_guard(path, option=None, what="response file"):
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.suffix == ".parquet":
                df.to_parquet(path, index=False)
            else:
                df.to_csv(path, index=False, float_format="%.10g")
        return path


def _drop_identical_repeats(df, column: str, path):
    """``df`` without the rows that repeat an earlier row exactly, id and every answer (a
    leaderboard export listing a model twice), with a warning; unchanged when a repeated id
    has answers that differ (the matrix then refuses the ids: which row is right is the user's
    call)."""
    if column not in df.columns:
        return df
    ids = df[column].astype(str)
    repeat = ids.duplicated(keep="first").to_numpy()
    if not repeat.any() or not (df.duplicated(keep="first").to_numpy() == repeat).all():
        return df
    names = ids[repeat].unique()
    warn_user(f"{str(path)!r}: {len(names)} subject id(s) repeat an identical row "
              f"({int(repeat.sum())} row(s) in all, e.g. {names[0]!r}): kept the first of each")
    return df[~repeat].reset_index(drop=True)


def tinybenchmarks_threshold(responses: ResponseMatrix, grid=None) -> float:
    """Binarization threshold c minimizing mean_i |mean_j(y_ij > c) - mean_j(y_ij)|.

    The tinyBenchmarks recipe (Polo et al., 2024) for partial-credit scores: pick the c whose
    binarized accuracy best matches each subject's partial-credit accuracy, averaged over subjects.
    """
    grid = np.arange(0.01, 1.0, 0.01) if grid is None else np.asarray(grid, float)
    y = responses.values
    obs = ~np.isnan(y)
    n_obs = obs.sum(axis=1)
    mean = np.nansum(y, axis=1) / n_obs
    # (n_grid, n_subjects): binarized accuracy at every threshold, one pass per threshold column
    above = np.stack([((y > c) & obs).sum(axis=1) / n_obs for c in grid])
    gap = np.abs(above - mean[None, :]).mean(axis=1)
    return float(grid[int(np.argmin(gap))])


# ------------------------------------------------------------------ library arguments
def register_name_resolver(resolver) -> None:
    """Let the library's functions read a bundled name where they take a response matrix:
    ``resolver(spec, option=..., on_empty=...)`` returns a ResponseMatrix for a path or a
    name. :mod:`atlascat.catalogue` registers its own on import, so the data types below it
    need not know what ships."""
    global _NAME_RESOLVER
    _NAME_RESOLVER = resolver


def one_subject_frame(responses):
    """One subject's answers, a mapping ``{item_id: score}`` or a Series indexed by item id,
    as a one-row DataFrame (its id the Series' name, else 0); anything else as it is."""
    from collections.abc import Mapping

    import pandas as pd

    if isinstance(responses, Mapping):
        responses = pd.Series(dict(responses), dtype=object)
    if isinstance(responses, pd.Series):
        return pd.DataFrame([responses.to_numpy(dtype=object)], columns=responses.index,
                            index=pd.Index([0 if responses.name is None else responses.name]))
    return responses


def as_labelled_responses(responses, *, on_empty: str = "keep"):
    """A pandas DataFrame (or Series, or a mapping {item_id: score}: one subject) becomes a
    ResponseMatrix that keeps its labels: the index
    as subject ids, the columns as item ids (so it is aligned to a bank by id, whatever the
    column order). A frame without labels (RangeIndex columns) stays positional. A file path
    (or, with the catalogue loaded, a bundled name) is read. Other inputs pass through."""
    import pandas as pd

    if isinstance(responses, (str, Path)):  # a file or a bundled name, as in the CLI
        if _NAME_RESOLVER is not None:
            return _NAME_RESOLVER(responses, option="responses", on_empty=on_empty)
        if not Path(responses).exists() and not Path(responses).suffix:
            raise ResponseDataError(f"responses {str(responses)!r} is not an existing file; a "
                                    "bundled matrix is read by atlascat.catalogue.load_responses"
                                    f"({str(responses)!r})")
        return ResponseMatrix.read(responses, on_empty=on_empty)
    responses = one_subject_frame(responses)
    if isinstance(responses, pd.DataFrame):
        if isinstance(responses.columns, pd.RangeIndex):
            return responses.to_numpy(dtype=object)
        return ResponseMatrix.from_frame(responses, on_empty=on_empty)
    return responses


def _refuse_unnamed(labels) -> None:
    """Refuse item columns without a name (a label None, NaN or blank), here at the boundary (a
    bank refuses them after the whole fit); a string "nan" or "None" is an id like any other."""
    empty = [j for j, i in enumerate(labels)
             if i is None or (isinstance(i, float) and i != i) or not str(i).strip()]
    if empty:
        raise ResponseDataError(f"item id is missing at column(s) {empty[:10]}; every item "
                                "column needs a name (a NaN or empty column label)")


def as_response_matrix(responses, *, on_empty: str = "keep") -> ResponseMatrix:
    """A ResponseMatrix from a ResponseMatrix, a labelled DataFrame (labels kept), an array
    (NaN = missing), or a file path / bundled name."""
    responses = as_labelled_responses(responses, on_empty=on_empty)
    if isinstance(responses, ResponseMatrix):
        return responses
    arr = np.asarray(responses, dtype=object)
    if arr.ndim != 2:
        raise ResponseDataError(f"responses must be 2-D (subjects x items), got shape {arr.shape}")
    return ResponseMatrix(arr, on_empty=on_empty)
