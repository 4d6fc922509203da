"""A multidimensional 2PL bank's table: read from ATLAS's ``item_id, a1..aK, d`` or from mirt's
``coef(mod, simplify = TRUE)$items`` as R's ``write.csv`` writes it (the item ids in a first
column with an empty header, then ``a1..aK, d, g, u``), and mirt's table written back.

Used by :meth:`atlascat.irt.multidim.MultidimBank.from_frame` and
:meth:`atlascat.irt.multidimcal.MultidimCalibration.to_frame`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import BankError

__all__ = ["bank_columns", "mirt_frame"]

#: mirt's asymptotes and the value a 2PL fixes them at (g: lower, u: upper)
_ASYMPTOTES = {"g": 0.0, "u": 1.0}


def bank_columns(df: pd.DataFrame):
    """``(item_ids, loadings, intercepts, metadata or None)`` of a bank table. The id column:
    item_id, X, item, id, else an unnamed first column (R's row names). mirt's g and u columns
    are dropped when they hold the 2PL's 0 and 1, refused otherwise (a 3PL / 4PL bank: the
    multidimensional bank is a 2PL; read as one, its guessing would be lost)."""
    cols = [str(c) for c in df.columns]
    df = df.copy()
    df.columns = cols
    id_col = next((c for c in ("item_id", "X", "item", "id") if c in cols), None)
    if id_col is None and cols and (cols[0] == "" or cols[0].startswith("Unnamed")):
        id_col = cols[0]
    if id_col is None:
        raise BankError(f"no item id column among {cols[:10]}; name it 'item_id'")
    a_cols = sorted((c for c in cols if c[:1] == "a" and c[1:].isdigit()), key=lambda c: int(c[1:]))
    if not a_cols or "d" not in cols:
        raise BankError(f"a multidimensional bank needs columns a1..aK and d; got {cols[:12]}")
    if [int(c[1:]) for c in a_cols] != list(range(1, len(a_cols) + 1)):
        raise BankError(f"loading columns must be a1..aK without gaps; got {a_cols}")
    try:
        a = df[a_cols].apply(pd.to_numeric, errors="raise").to_numpy(float)
        d = pd.to_numeric(df["d"], errors="raise").to_numpy(float)
        fixed = {c: pd.to_numeric(df[c], errors="raise").to_numpy(float)
                 for c in _ASYMPTOTES if c in cols}
    except (ValueError, TypeError) as exc:
        raise BankError(f"non-numeric loading or intercept: {exc}") from exc
    for col, value in fixed.items():
        off = ~np.isclose(fixed[col], _ASYMPTOTES[col], rtol=0, atol=1e-12)
        if off.any():
            j = int(np.argmax(off))
            raise BankError(
                f"item {df[id_col].iloc[j]!r} has {col} = {fixed[col][j]:g}: the "
                f"multidimensional bank is a 2PL ({col} = {_ASYMPTOTES[col]:g}); a "
                "multidimensional 3PL / 4PL (mirt's itemtype '3PL', '4PL') is not supported")
    extra = [c for c in cols if c not in {id_col, "d", *a_cols, *fixed}]
    meta = df[extra].reset_index(drop=True) if extra else None
    return df[id_col].astype(str).to_numpy(), a, d, meta


def mirt_frame(bank) -> pd.DataFrame:
    """mirt's ``coef(mod, simplify = TRUE)$items`` of a multidimensional 2PL bank: ``X, a1..aK,
    d, g, u`` (g = 0, u = 1), then the bank's name column (``benchmark``) if it has one."""
    df = pd.DataFrame({"X": np.asarray(bank.item_ids).astype(str)})
    for k in range(bank.n_dims):
        df[f"a{k + 1}"] = bank.loadings[:, k]
    df["d"], df["g"], df["u"] = bank.intercepts, 0.0, 1.0
    meta = getattr(bank, "metadata", None)
    if meta is not None and "benchmark" in meta.columns:
        df["benchmark"] = meta["benchmark"].reset_index(drop=True)
    return df
