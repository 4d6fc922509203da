"""Plain CSV tables without pandas, for the commands that must start fast.

:func:`read_plain_csv` reads a comma- or tab-separated file (``.gz`` too) with the ``csv``
module when it is plain: UTF-8 without a byte-order mark, a header of distinct non-empty names,
every row as long as the header, no blank line. Anything else gives None, and the caller reads
the file with pandas (whose reader then reports what is wrong with it).
:func:`is_decimal` says whether a cell is a plain decimal number, which pandas' parser and
Python's ``float`` read to the same double.

:func:`write_csv` writes columns (name -> 1-D array or list) as ``DataFrame.to_csv(index=False)``
does: floats as their shortest round-trip text (``repr``), NaN as an empty cell, integers and
booleans as ``str``, text quoted only where it holds a comma, a quote or a newline.
:func:`plain_text` lays out columns of text as ``DataFrame.to_string(index=False)`` does for
them: every column right-aligned to its widest cell or header, one space between columns.
"""
from __future__ import annotations

import csv
import gzip
import io
import re
from pathlib import Path

__all__ = ["read_plain_csv", "read_csv_header", "is_decimal", "decimals", "write_csv",
           "plain_text"]

_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_DECIMALS = re.compile(r"(?:[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\x00)+")


def is_decimal(text: str) -> bool:
    """A plain decimal number (digits, one point, an exponent): no spaces, no NaN/inf words."""
    return _DECIMAL.fullmatch(text) is not None


def decimals(cells: list) -> list | None:
    """The floats of cells that are all plain decimal numbers (:func:`is_decimal`), else None."""
    if not cells or _DECIMALS.fullmatch("\x00".join(cells) + "\x00") is None:
        return None
    try:  # a cell holding the separator passes the pattern as two numbers; float refuses it
        return [float(c) for c in cells]
    except ValueError:
        return None


def _open_text(path: Path):
    if path.suffix.lower() == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _sep(path: Path) -> str:
    return "\t" if ".tsv" in [s.lower() for s in path.suffixes] else ","


def read_csv_header(path) -> list[str] | None:
    """The header row of a CSV / TSV file (None where it cannot be read plainly)."""
    path = Path(path)
    try:
        with _open_text(path) as fh:
            row = next(csv.reader(fh, delimiter=_sep(path)), None)
    except (OSError, UnicodeDecodeError, EOFError, csv.Error, ValueError):
        return None
    return row


def read_plain_csv(path) -> tuple[list[str], list[list[str]]] | None:
    """(header, rows as lists of text) of a plain CSV / TSV file (see the module docstring);
    None for any other file, including a Parquet file and one that cannot be read."""
    path = Path(path)
    suffixes = [s.lower() for s in path.suffixes]
    if not suffixes or suffixes[-1] not in (".csv", ".tsv", ".gz", ".txt") or (
            suffixes[-1] == ".gz" and len(suffixes) < 2):
        return None
    try:
        with _open_text(path) as fh:
            rows = list(csv.reader(fh, delimiter=_sep(path)))
    except (OSError, UnicodeDecodeError, EOFError, csv.Error, ValueError):
        return None
    if len(rows) < 2:
        return None
    header, body = rows[0], rows[1:]
    width = len(header)
    if (width == 0 or header[0].startswith("\ufeff") or len(set(header)) != width
            or any(not h.strip() for h in header)
            or any(len(r) != width for r in body)
            or any("\x00" in h for h in header) or any("\x00" in r[0] for r in body)):
        return None   # a NUL byte in the ids: the full reader names it
    return header, body


_SPECIAL = re.compile(r'[,"\n]')  # the csv module's with lineterminator "\n"


def _quoted(cells: list) -> list:
    """Text cells as the csv module writes them (QUOTE_MINIMAL): in quotes, quotes doubled,
    where a cell holds a comma, a quote or a newline (a lone carriage return is not quoted)."""
    if not _SPECIAL.search("\x00".join(cells)):
        return cells
    return [f'"{c.replace(chr(34), chr(34) * 2)}"' if _SPECIAL.search(c) else c for c in cells]


def _float_texts(values, items: list) -> list:
    """``repr`` of every float, "" for NaN. A column of whole numbers below 1e16 in magnitude
    (none of them -0.0) is written as ``repr`` writes them, the integer's text and ".0",
    without formatting a float."""
    import numpy as np

    arr = np.asarray(values, dtype=float)
    finite = arr[~np.isnan(arr)]
    if (finite.size and np.all(np.abs(finite) < 1e16) and np.all(finite == np.trunc(finite))
            and not np.any(np.signbit(finite) & (finite == 0))):
        whole = np.where(np.isnan(arr), 0.0, arr).astype(np.int64).tolist()
        return [f"{w}.0" if x == x else "" for w, x in zip(whole, items)]
    return [repr(x) if x == x else "" for x in items]


def _texts(values) -> list:
    """The cells of one column as CSV text."""
    kind = getattr(getattr(values, "dtype", None), "kind", "O")
    items = values.tolist() if hasattr(values, "tolist") else list(values)
    if kind == "f":
        return _float_texts(values, items)
    if kind in "iub":
        return list(map(str, items))
    return _quoted(["" if x is None or (isinstance(x, float) and x != x) else
                    (repr(x) if isinstance(x, float) else str(x)) for x in items])


def write_csv(path, columns: dict) -> None:
    """Write the columns (same length each) as ``DataFrame(columns).to_csv(path,
    index=False)`` writes them (see the module docstring)."""
    texts = [_texts(v) for v in columns.values()]
    header = ",".join(_quoted([str(c) for c in columns]))
    if len(texts) == 1:  # one column: an empty cell is a quoted "" line (the csv module's way)
        texts = [[c if c else '""' for c in texts[0]]]
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(header + "\n")
        if texts and texts[0]:
            fh.write("\n".join(map(",".join, zip(*texts))) + "\n")


def plain_text(columns: dict) -> str:
    """Columns of text, right-aligned, as ``DataFrame.to_string(index=False)`` lays them out."""
    cols = [[str(name)] + [str(v) for v in values] for name, values in columns.items()]
    widths = [max(len(c) for c in col) for col in cols]
    lines = [" ".join(col[i].rjust(w) for col, w in zip(cols, widths))
             for i in range(len(cols[0]))]
    return "\n".join(lines)
