"""Validation at the public boundary: files, tables, DataFrames, arrays, settings.

Every check raises an :class:`~atlascat.errors.AtlasError` subclass with a one-line message that
names the culprit (file, row, column, item id, option) and says how to fix it. Library entry
points and CLI commands call these helpers before any numerical work, so that a malformed input
never reaches an estimator (where it would surface as a traceback, or worse, as a NaN result
flagged ``ok``).

What is refused here, and why, is listed in ``docs/robustness.md``.
"""
from __future__ import annotations

import gzip
import math
import os
import re
import zlib
from pathlib import Path

import numpy as np

from .errors import AtlasError, BankError, ConfigError, ResponseDataError

#: the seeded train/test split's defaults (:func:`atlascat.filtering.stratified_split`, the
#: studies' :class:`~atlascat.studies.config.BenchmarkConfig`): share of test subjects, score bins
TEST_SIZE = 0.1
N_BINS = 10

__all__ = [
    "MAX_ABS_A", "MAX_ABS_B",
    "one_line", "check_input_file", "check_output_file", "check_page_output", "check_output_dir",
    "read_frame",
    "check_finite", "check_positive", "check_scores", "check_prob_array", "check_identified",
    "check_snapshot",
]

# Parameters beyond these are refused by ItemBank: no calibrated bank comes near them (the
# paper's five banks: |a| <= 35, |b| <= 4671; a near-zero slope gives a large |b|, hence the
# generous b limit), and past them P(theta) is a step function (huge a) or d = -a b overflows
# the likelihood, information and fit statistics.
MAX_ABS_A = 1e3
MAX_ABS_B = 1e8

_TEXT_SUFFIXES = (".csv", ".gz", ".txt", ".tsv")


def one_line(text) -> str:
    """Collapse a message to one line (library messages may quote multi-line exceptions)."""
    return " ".join(str(text).split())


def _label(path, option) -> str:
    return f"{option} {str(path)!r}" if option else repr(str(path))


# ----------------------------------------------------------------------------------- files
def check_input_file(path, *, what: str = "input file", option: str | None = None,
                     error=ResponseDataError) -> Path:
    """An existing, readable regular file (not a directory)."""
    if path is None:
        raise error(f"no {what} given" + (f"; pass {option}" if option else ""))
    p = Path(path)
    if not p.exists():
        raise error(f"{what} {_label(p, option)} does not exist; check the path")
    if p.is_dir():
        raise error(f"{what} {_label(p, option)} is a directory; give a file inside it")
    if not os.access(p, os.R_OK):
        raise error(f"{what} {_label(p, option)} is not readable (permission denied); "
                    "fix its permissions or copy it")
    return p


def _writable_ancestor(p: Path, option, what, target: Path | None = None) -> None:
    """``p``: the directory that must exist or be creatable; ``target``: the path the user gave
    (named in the message)."""
    anc = p
    p = p if target is None else target
    while not anc.exists():
        if anc.parent == anc:
            break
        anc = anc.parent
    if anc.exists() and not anc.is_dir():
        raise ConfigError(f"{what} {_label(p, option)} cannot be created: {str(anc)!r} is a "
                          "file, not a directory; choose another path")
    if anc.exists() and not os.access(anc, os.W_OK | os.X_OK):
        raise ConfigError(f"{what} {_label(p, option)} is not writable ({str(anc)!r}: permission "
                          "denied); choose a writable location")
    if anc.is_dir():   # what access() cannot tell (a read-only mount, /proc, an ACL): a probe
        import tempfile

        try:
            with tempfile.TemporaryFile(dir=anc):
                pass
        except OSError as exc:
            raise ConfigError(f"{what} {_label(p, option)} cannot be written in {str(anc)!r} "
                              f"({exc.strerror or exc}); choose a writable location") from None


def _same_file(a: Path, b) -> bool:
    """``b`` (an existing file) is ``a``, also through another spelling or a link."""
    try:
        return Path(b).is_file() and a.exists() and os.path.samefile(a, b)
    except (OSError, ValueError, TypeError):
        return False


def check_output_file(path, *, option: str | None = "-o/--output",
                      what: str = "output file", inputs=None, outputs=None) -> Path:
    """A path a file can be written to: not a directory, its folder creatable and writable; not
    one of ``inputs`` (``{option: path}``, the files the run reads: a bundled name or ``None``
    is skipped), whose content it would overwrite, nor one of ``outputs`` (``{option: path}``,
    the run's other output files), which it would overwrite or be overwritten by."""
    p = Path(path)
    for other, given in (inputs or {}).items():
        if given is not None and _same_file(p, given):
            raise ConfigError(f"{what} {_label(p, option)} is the {other} file {str(given)!r} "
                              f"it reads; writing it would destroy that input: give "
                              f"{option or 'the output'} another name")
    for other, given in (outputs or {}).items():
        if given is not None and Path(given).resolve() == p.resolve():
            raise ConfigError(f"{what} {_label(p, option)} is also {other}: one would overwrite "
                              f"the other; give each its own file")
    if p.is_dir():
        raise ConfigError(f"{what} {_label(p, option)} is a directory; give a file name inside "
                          f"it, e.g. {str(p / 'out.csv')!r}")
    _writable_ancestor(p.parent, option, what, target=p)
    if p.exists() and not os.access(p, os.W_OK):
        raise ConfigError(f"{what} {_label(p, option)} exists and is not writable; choose "
                          "another file")
    return p


def check_page_output(path, *, option: str | None = "-o/--output", inputs=None) -> Path:
    """An HTML page's path (:func:`check_output_file`): an existing file there must be a page
    (``.html``/``.htm``, an earlier one replaced), never data the page would destroy."""
    p = check_output_file(path, option=option, what="page", inputs=inputs)
    if p.is_file() and p.suffix.lower() not in (".html", ".htm"):
        raise ConfigError(f"page {_label(p, option)} would replace the file {p.name!r}, which is "
                          f"not an HTML page; give an .html path, e.g. "
                          f"{str(p.with_suffix('.html'))!r}")
    return p


def check_output_dir(path, *, option: str | None = "-o/--output",
                     what: str = "output directory", writes=(), marker=None) -> Path:
    """A directory that exists or can be created and written to (not an existing file). With
    ``writes`` (the files the run writes there) and ``marker`` (the file, or files, an earlier
    run of the same kind left, rewritten in place): an existing folder without one whose own
    files the run would replace is refused, naming them."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{what} {_label(p, option)} is an existing file; give a directory "
                          "(it is created if missing)")
    markers = (marker,) if isinstance(marker, str) else tuple(marker or ())
    if markers and p.is_dir() and not any((p / m).exists() for m in markers):
        mine = [name for name in writes if (p / name).exists()]
        if mine:
            raise ConfigError(f"{what} {_label(p, option)} holds {', '.join(mine)} of its own "
                              f"(no {' or '.join(markers)} of an earlier run there), which the "
                              "run would replace; give a new or empty folder")
    _writable_ancestor(p, option, what)
    return p


def write_guard(path, *, option: str | None = "-o/--output", what: str = "output file"):
    """Context manager turning OS errors while writing ``path`` into one-line ConfigErrors."""
    from contextlib import contextmanager

    @contextmanager
    def _guard():
        try:
            yield
        except OSError as exc:
            raise ConfigError(f"cannot write {what} {_label(path, option)}: "
                              f"{exc.strerror or exc}; choose a writable location") from None

    return _guard()


def read_frame(path, *, what: str = "input file", option: str | None = None,
               error=ResponseDataError, dtype=None, nrows: int | None = None,
               min_columns: int = 1):
    """Read CSV / CSV.GZ / TSV / Parquet into a DataFrame with one-line errors for every way a
    file can be broken: missing, directory, unreadable, not UTF-8, truncated or damaged gzip,
    corrupt Parquet, empty, unparsable CSV, or (with ``min_columns`` > 1) a single column that
    looks delimited by ``;``, tab or ``|`` (hint: save it comma-separated)."""
    import pandas as pd

    p = check_input_file(path, what=what, option=option, error=error)
    label = _label(p, option)
    suffix = p.suffix.lower()
    try:
        if suffix == ".parquet":
            df = pd.read_parquet(p)
            if nrows is not None:
                df = df.head(nrows)
        elif suffix in _TEXT_SUFFIXES or suffix == "":
            sep = "\t" if ".tsv" in [s.lower() for s in p.suffixes] else ","
            df = pd.read_csv(p, sep=sep, dtype=dtype, nrows=nrows, low_memory=False,
                             encoding="utf-8")
        else:
            raise error(f"unsupported file type {suffix!r} for {what} {label}; use .csv, "
                        ".csv.gz, .tsv or .parquet")
    except AtlasError:
        raise
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start:exc.start + 1] if isinstance(exc.object, bytes) else b""
        raise error(f"{what} {label} is not UTF-8 text (byte {bad!r} at offset {exc.start}); "
                    "re-save it as UTF-8 CSV") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise error(f"{what} {label} is a truncated or damaged gzip file ({one_line(exc)}); "
                    "re-download or re-compress it") from None
    except pd.errors.EmptyDataError:
        raise error(f"{what} {label} is empty; expected a header row and data rows") from None
    except pd.errors.ParserError as exc:
        raise error(f"{what} {label} is not valid CSV ({one_line(exc)}); check the delimiter "
                    "(commas expected) and quoting") from None
    except (IsADirectoryError, PermissionError) as exc:
        raise error(f"cannot read {what} {label}: {exc.strerror}") from None
    except Exception as exc:  # pyarrow / fastparquet errors on a corrupt Parquet file
        if suffix == ".parquet":
            reason = one_line(exc).split(". ")[0][:120]
            raise error(f"{what} {label} is not a readable Parquet file ({reason}); re-write it "
                        "(DataFrame.to_parquet) or give a CSV") from None
        raise
    _refuse_nul(df, what, label, error)
    if min_columns > 1 and df.shape[1] < min_columns and df.shape[1] >= 1:
        head = str(df.columns[0])
        for sep, name in ((";", "semicolons"), ("\t", "tabs"), ("|", "'|'")):
            if sep in head:
                raise error(f"{what} {label} has one column whose header contains {name}: it "
                            f"looks delimited by {sep!r}, but commas are expected; re-save it "
                            "comma-separated" + (" or name it .tsv" if sep == "\t" else ""))
    return df


def _refuse_nul(df, what: str, label: str, error) -> None:
    """A NUL byte in the header or the id column (the first): a binary or damaged file, whose
    ids would be carried with an invisible character (an item matching no bank id)."""
    import pandas as pd

    cells = [("the header", str(c)) for c in df.columns]
    if df.shape[1] and not pd.api.types.is_numeric_dtype(df.dtypes.iloc[0]):
        ids = df.iloc[:, 0]
        hit = ids.astype(str).str.contains("\x00", regex=False).to_numpy(dtype=bool, na_value=False)
        cells += [(f"row {r}", str(ids.iloc[r])) for r in np.flatnonzero(hit)[:1]]
    for where, text in cells:
        if "\x00" in text:
            raise error(f"{what} {label} holds a NUL byte in {where} ({text!r}): a binary or "
                        "damaged file; re-save it as UTF-8 CSV")


# ------------------------------------------------------------------------------ numbers
def check_finite(value, name: str, *, error=ConfigError) -> float:
    """A finite real number (NaN, inf and text refused)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise error(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(v):
        raise error(f"{name} must be a finite number, got {value!r}")
    return v


def check_positive(value, name: str, *, error=ConfigError) -> float:
    """A finite number > 0 (text, NaN, inf, zero and negatives refused, naming ``name``)."""
    v = check_finite(value, name, error=error)
    if not v > 0:
        raise error(f"{name} must be positive, got {value!r}")
    return v


def check_scores(y: np.ndarray, *, item_ids=None, subject_ids=None) -> np.ndarray:
    """A float array of scores in [0, 1] with NaN for missing; anything else is refused with the
    first offending cell named."""
    try:
        arr = np.asarray(y, dtype=float)
    except (TypeError, ValueError):
        raw = np.asarray(y, dtype=object)
        for idx in np.ndindex(raw.shape):
            try:
                float(raw[idx])
            except (TypeError, ValueError):
                raise ResponseDataError(
                    f"non-numeric score {raw[idx]!r} at {_cell(idx, item_ids, subject_ids)}; "
                    "scores must be numbers in [0, 1], NaN for missing") from None
        raise
    if arr.size == 0:
        return arr
    flat = arr.ravel()
    lo, hi = np.fmin.reduce(flat), np.fmax.reduce(flat)  # NaN-ignoring, one pass each
    if (lo >= 0 and hi <= 1) or (np.isnan(lo) and np.isnan(hi)):
        return arr
    bad = np.argwhere(np.isinf(arr) | (~np.isnan(arr) & ((arr < 0) | (arr > 1))))
    if bad.size:
        idx = tuple(bad[0])
        raise ResponseDataError(
            f"score {arr[idx]:g} outside [0, 1] at {_cell(idx, item_ids, subject_ids)} "
            f"({len(bad)} such cell(s)); scores must be 0/1 or partial credit in [0, 1], NaN "
            "for missing")
    return arr


def _cell(idx, item_ids, subject_ids) -> str:
    if len(idx) == 0:
        return ("the one value given (not a table of scores: pass a ResponseMatrix, DataFrame "
                "or array)")
    if len(idx) == 1:
        c = idx[0]
        return f"column {c}" + (f" (item {item_ids[c]!r})" if item_ids is not None else "")
    r, c = idx[0], idx[1]
    s = f"row {r}" + (f" (subject {subject_ids[r]!r})" if subject_ids is not None else "")
    return s + f", column {c}" + (f" (item {item_ids[c]!r})" if item_ids is not None else "")


def check_prob_array(values, name: str) -> np.ndarray:
    """A float array of finite numbers (text, NaN and inf refused, naming ``name``)."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be numbers, got {values!r}"[:200]) from None
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f"{name} must be finite")
    return arr


def check_thetas(values, name: str = "thetas", *, error=ResponseDataError,
                 finite: bool = True) -> np.ndarray:
    """One ability per examinee: a 1-D float array of numbers, finite unless ``finite=False``
    (a single column is flattened; a table with several columns is refused, not read row by
    row)."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise error(f"{name} must be numbers, got {values!r}"[:200]) from None
    if arr.ndim > 1 and sum(d > 1 for d in arr.shape) > 1:
        raise error(f"{name} must be one value per examinee (1-D), got shape {arr.shape}; "
                    "pass a list, 1-D array or Series (e.g. df['theta'])")
    arr = arr.reshape(-1)
    if finite and not np.all(np.isfinite(arr)):
        bad = np.flatnonzero(~np.isfinite(arr))[:5].tolist()
        raise error(f"{name} must be finite; not at rows {bad}")
    return arr


def theta_values(theta):
    """``theta`` for a bank's probability / information: an array of numbers passes as it is
    (NumPy, or another array-API namespace on its device); a number or list becomes a float
    array; text is refused, naming it."""
    kind = getattr(getattr(theta, "dtype", None), "kind", None)
    if kind is not None and not isinstance(theta, np.ndarray):
        return theta                                  # a torch / cupy array: its own namespace
    if kind in ("f", "i", "u", "b"):
        return theta
    try:
        return np.asarray(theta, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError(f"theta must be a number or an array of numbers, got "
                          f"{theta!r}"[:160]) from None


def check_seed(seed, name: str = "seed") -> int:
    """A seed argument as an int: a whole number >= 0 (not a bool, a text or a Generator, which
    :func:`as_generator` takes where an ``rng`` is); anything else a ConfigError naming it."""
    import numbers

    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        hint = ("; a Generator goes where an rng= is taken" if
                isinstance(seed, np.random.Generator) else "")
        raise ConfigError(f"{name} must be a whole number >= 0, got {seed!r}"[:160] + hint)
    return int(seed)


def as_generator(rng, name: str = "rng") -> np.random.Generator:
    """``numpy.random.default_rng(rng)`` (a Generator as it is, a seed, None for fresh entropy);
    anything else is a ConfigError naming ``name``."""
    try:
        return np.random.default_rng(rng)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a numpy Generator, an int seed or None, got "
                          f"{rng!r}"[:160]) from None


# ------------------------------------------------------------------ model identification
_N_PARAMS = {"rasch": 1, "1pl": 1, "2pl": 2, "3pl": 3, "4pl": 4}
_EXTRA = {"rasch": 1, "1pl": 1}  # the common slope / latent variance


def check_subjects(n: int, minimum: int = 2) -> None:
    if n < minimum:
        raise ResponseDataError(f"calibration needs at least {minimum} subjects (rows), got {n}; "
                                "item parameters describe a population: add subjects")


def check_identified(values: np.ndarray, model: str) -> None:
    """Refuse a calibration the data cannot identify: more free parameters than the pattern
    table has free cells (2^m - 1 for m items), or fewer than two subjects.

    One item under a 2PL, for example, has two parameters but a single observable proportion:
    EM then 'converges' to any point of a ridge (a ~ 1e-16, b ~ 1e16)."""
    n, m = values.shape
    model = str(model).lower()
    if n < 2:
        raise ResponseDataError(f"calibration needs at least 2 subjects, got {n}; add subjects")
    k = _N_PARAMS.get(model, 3) * m + _EXTRA.get(model, 0)
    cells = 2.0 ** min(m, 60) - 1
    if k > cells:
        smaller = [mm for mm in ("1pl", "2pl", "3pl") if _N_PARAMS[mm] * m + _EXTRA.get(mm, 0)
                   <= cells]
        raise ResponseDataError(
            f"{m} item(s) cannot identify a {model.upper()} ({k} parameters from {int(cells)} "
            "free response-pattern proportions); add items"
            + (f" or use model {smaller[-1]!r}" if smaller else " (at least 3 for a 1PL/2PL)"))


# --------------------------------------------------------------------- CAT snapshots
_SNAPSHOT_KEYS = {"format": str, "config": dict, "bank": dict, "events": list, "scores": list,
                  "seconds": list, "rng": dict, "done": (bool, int),
                  "stop_reason": (str, type(None))}
_SNAPSHOT_OPTIONAL = {"sh_rejected": list, "pending": (str, int, type(None)),
                      "pending_seconds": (int, float), "pending_batch": (list, type(None)),
                      "unchecked": (bool, int)}


def check_snapshot(d) -> None:
    """Structure of a ``CATSession.to_dict()`` snapshot: keys, types, one score and one time per
    recorded answer. Raises ConfigError naming the first defect (truncated or edited data)."""
    if not isinstance(d, dict):
        raise ConfigError(f"a CATSession snapshot is a dict (from to_dict()), got "
                          f"{type(d).__name__}")
    if d.get("format") != "atlascat.CATSession/1":
        raise ConfigError("not a CATSession snapshot (missing format 'atlascat.CATSession/1')")
    for key, typ in _SNAPSHOT_KEYS.items():
        if key not in d:
            raise ConfigError(f"CATSession snapshot lacks {key!r} (truncated?); save it again "
                              "with to_dict()")
        if not isinstance(d[key], typ):
            raise ConfigError(f"CATSession snapshot field {key!r} has type "
                              f"{type(d[key]).__name__}; it was edited or damaged")
    for key, typ in _SNAPSHOT_OPTIONAL.items():
        if key in d and not isinstance(d[key], typ):
            raise ConfigError(f"CATSession snapshot field {key!r} has type "
                              f"{type(d[key]).__name__}; it was edited or damaged")
    if "fingerprint" not in d["bank"]:
        raise ConfigError("CATSession snapshot lacks the bank fingerprint; save it again")
    events = d["events"]
    for i, ev in enumerate(events):
        if (not isinstance(ev, (list, tuple)) or len(ev) != 2 or not isinstance(ev[0], str)
                or not ev[0] or not isinstance(ev[1], (str, int))):
            raise ConfigError(f"CATSession snapshot event {i} is {ev!r}; expected [kind, item_id] "
                              "such as ['r', 'q12']")
    n_rec = sum(1 for ev in events if ev[0] == "r")
    for key in ("scores", "seconds"):
        if len(d[key]) < n_rec:
            raise ConfigError(f"CATSession snapshot has {n_rec} recorded answer(s) but "
                              f"{len(d[key])} {key} (truncated or edited); save it again")
    for i, v in enumerate(d["scores"]):
        try:
            ok = 0.0 <= float(v) <= 1.0
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ConfigError(f"CATSession snapshot score {i} is {v!r}; scores are in [0, 1]")
    if "bit_generator" not in d["rng"] or "state" not in d["rng"]:
        raise ConfigError("CATSession snapshot has no usable RNG state; save it again")
    if not hasattr(np.random, str(d["rng"]["bit_generator"])):
        raise ConfigError(f"CATSession snapshot names an unknown bit generator "
                          f"{d['rng']['bit_generator']!r}")


def bank_param_error(name: str, ids, values, rows) -> BankError:
    limit = MAX_ABS_A if name in ("a", "a1") else MAX_ABS_B
    detail = ", ".join(f"{ids[i]} (row {i}: {name}={values[i]:.4g})" for i in rows[:5])
    return BankError(f"parameter {name!r} beyond +-{limit:g} for item(s) {detail}: no calibrated "
                     "item is that extreme; fix or drop these items (when calibrating: a prior "
                     "such as --prior-a 'lognorm(0,0.5)' keeps slopes finite)")


# ------------------------------------------------------------------ ids
_R_PREFIX = re.compile(r"^X(?=[0-9])")


def normalize_item_id(item_id: str) -> str:
    """Strip the ``X`` that R's ``make.names`` puts before ids starting with a digit (``X514``)."""
    return _R_PREFIX.sub("", str(item_id))


# ------------------------------------------------------------------ library arguments
def check_ability_settings(*, prior_mean, prior_sd, quadpts=None, theta_range=None,
                           bounds=(-10.0, 10.0), extra_items="error") -> None:
    """The settings of an ability estimate (None: not used by the estimator, not checked)."""
    check_finite(prior_mean, "prior_mean (CLI --prior-mean)")
    check_positive(prior_sd, "prior_sd (CLI --prior-sd)")
    if quadpts is not None:
        try:
            q = int(quadpts)
        except (TypeError, ValueError):
            raise ConfigError(f"quadpts must be an integer, got {quadpts!r}") from None
        if q != quadpts or q < 5 or q > 10001:
            raise ConfigError(f"quadpts (CLI --quadpts) must be an integer in [5, 10001], got "
                              f"{quadpts!r}")
    for name, pair in (("theta_range", theta_range), ("bounds", bounds)):
        if pair is None:
            continue
        lo, hi = (check_finite(v, name) for v in pair)
        if not hi > lo:
            raise ConfigError(f"{name} must be (low, high) with low < high, got {pair!r}")
    grid = theta_range if theta_range is not None else bounds
    if grid is not None and not grid[0] <= prior_mean <= grid[1]:
        raise ConfigError(f"prior_mean (CLI --prior-mean) {prior_mean:g} lies outside the theta "
                          f"range [{grid[0]:g}, {grid[1]:g}] the estimate searches; a prior "
                          "centred there only pushes every theta to the range's end: give a "
                          "mean inside it (0 for the usual N(0, 1) prior)")
    if extra_items not in ("warn", "error", "ignore"):
        raise ConfigError(f"extra_items must be 'warn', 'error' or 'ignore', got {extra_items!r}")


def check_fit_sample(weights, what: str = "M2", minimum: float = 2.0) -> None:
    """Refuse a fit statistic on fewer than ``minimum`` subjects with an answer."""
    n = float(np.sum(weights))
    if not n >= minimum:
        raise ResponseDataError(
            f"{what} needs at least {minimum:g} subjects with a 0/1 answer, got {n:g}; it is a "
            "statistic about a sample: add subjects")


def check_link_anchors(ref, new, method: str) -> None:
    """Refuse a linking the anchors cannot identify: fewer than two anchors with a > 0 in both
    banks, or (mean-sigma) no spread of b."""
    ok = (np.asarray(ref.a) > 0) & (np.asarray(new.a) > 0)
    if ok.sum() < 2:
        raise ConfigError(
            f"only {int(ok.sum())} of the {len(ok)} anchor item(s) have a > 0 in both banks; "
            "items without discrimination carry no scale information, so A and B are not "
            "identified: use anchors with positive a")
    if method == "mean-sigma":
        for name, bank in (("reference", ref), ("new", new)):
            if np.std(np.asarray(bank.b)[ok]) <= 1e-12:
                raise ConfigError(f"the anchors' b have no spread in the {name} bank, so "
                                  "mean-sigma cannot estimate A; use --method stocking-lord")


def check_linking_result(A, B, method: str) -> None:
    """Finite constants with A > 0, and no scale stretched 100-fold or moved by 100 SDs: the
    criterion ran away (anchors that disagree, e.g. slopes of opposite sign)."""
    if not (np.isfinite(A) and np.isfinite(B) and 0.01 < A < 100 and abs(B) < 100):
        raise ConfigError(f"{method} linking gave A = {A:g}, B = {B:g}, not a usable scale "
                          "transformation; check the anchors or try another --method")


def literal_id_column(df, path, column, *, sep: str = ","):
    """Ids are text: a subject or item called ``NA``, ``null`` or ``nan`` must not become a
    missing value. When pandas turned cells of the id ``column`` into NaN, re-read that column
    verbatim (only then, so large files are parsed once in the usual case)."""
    import pandas as pd

    if column not in df.columns or not df[column].isna().any():
        return df
    raw = pd.read_csv(path, sep=sep, usecols=[column], dtype=str, keep_default_na=False,
                      encoding="utf-8")[column]
    if len(raw) == len(df):
        df = df.copy()
        df[column] = raw.to_numpy()
    return df


def zero_one_items(values, item_ids, scale) -> str | None:
    """One line when some items hold only the scores 0 and 1 (both) on a wide ``scale`` (lo, hi;
    four points or more: on a 0-3 rubric a hard item rated 0 or 1 is no sign) whose other items
    use it (reach lo + 3 or more): right/wrong items mixed into ratings, whose 1 would read as
    one point of the scale (a hard prompt rated only 0 or 1 is possible, hence a warning, not a
    refusal); None otherwise. ``values``: (subjects, items), NaN = missing."""
    lo, hi = (float(v) for v in scale)
    v = np.asarray(values, dtype=float)
    if not (lo <= 0.0 and hi >= 1.0 and hi - lo >= 4.0) or v.size == 0:
        return None
    seen = ~np.isnan(v)
    zero = np.any(seen & (v == 0.0), axis=0)
    one = np.any(seen & (v == 1.0), axis=0)
    only = np.all(~seen | (v == 0.0) | (v == 1.0), axis=0) & zero & one
    with np.errstate(invalid="ignore"):
        used = np.nanmax(np.where(seen, v, np.nan), axis=0, initial=-np.inf) >= lo + 3.0
    if not only.any() or not used.any():
        return None
    ids = [str(item_ids[j]) for j in np.flatnonzero(only)]
    return (f"{len(ids)} item(s) (e.g. {ids[0]!r}) hold only 0 and 1 on the {lo:g}-{hi:g} scale, "
            "where the others use the whole scale: if they are right/wrong items, a right answer "
            f"counts as 1 point of {hi - lo:g}; calibrate them apart, or score them on the "
            "scale (right = its top)")


def json_safe(obj):
    """A JSON-ready copy: numpy scalars and arrays to Python, non-finite floats to None (so the
    output is strict JSON: no NaN / Infinity). Other objects pass through unchanged."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [json_safe(v) for v in obj.tolist()]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    return obj
