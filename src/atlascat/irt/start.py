"""Starting values of the EM: classical item statistics, or a warm start from a bank.

Item p-values and item-rest point-biserial correlations converted to biserials r, then
a = 1.702 r / sqrt(1 - r^2) and d = 1.702 Phi^-1(p) / sqrt(1 - r^2) (Lord and Novick, 1968,
ch. 16; logistic scaling), c = 0.1 (or the mode of c's prior), u = 0.95.
"""
from __future__ import annotations

import numpy as np

from . import arrays
from .bank import ItemBank
from .itemmodel import C_START, U_START, UC_GAP, ItemModel

__all__ = ["start_values", "warm_start"]


def start_values(values: np.ndarray, weights, model: ItemModel, filled=None, counts=None):
    """Classical starting values (p-values, item-rest biserials), see the module docstring.

    Every per-item sum is one matrix-vector product over the data (no full-size temporaries
    beyond the squared scores of non-0/1 data, and the zero-filled copy (squared in place)
    and the mask when cells are missing). ``filled``: the scores with 0 in missing cells,
    when the caller holds them (float64, the layout of ``values``), used instead of a copy.
    0/1 answers with missing cells: the subjects' counts from ``counts``
    (:func:`atlascat.irt.colstats.binary_counts` of ``values``, computed when not given) and
    the sums over blocks of rows (:func:`_binary_sums`), no full-size temporary.
    """
    # scipy.stats.norm's ppf and pdf, bit for bit, without importing scipy.stats (0.3-1 s)
    from scipy.special import ndtri

    n_rows, n_items = values.shape
    w = np.ones(n_rows) if weights is None else np.asarray(weights, float)
    missing = arrays.has_nan(values)
    if missing and counts is None:
        from .colstats import binary_counts

        counts = binary_counts(values)
    if missing and counts is not None:     # 0/1 answers
        k, tot = counts.row_seen.astype(float), counts.row_right.astype(float)
        inv = 1.0 / np.maximum(k - 1.0, 1.0)
        ti = tot * inv
        (sw, s_ti, s_ti2), (s_y, s_y_inv, s_y_tinv2, s_y_ti, s_yy_inv2) = _binary_sums(
            values, np.stack([w, w * ti, w * ti * ti], axis=1),
            np.stack([w, w * inv, w * tot * inv**2, w * ti, w * inv**2], axis=1))
        s_yy_inv = s_y_inv                 # 0/1 answers are their own squares
        return _from_sums(model, sw, s_ti, s_ti2, s_y, s_y_inv, s_y_tinv2, s_y_ti, s_yy_inv2,
                          s_yy_inv, ndtri)
    if missing:
        nan = np.isnan(values)
        obs_t = arrays.observed_t(values, nan)     # (items x subjects), float64
        y = np.where(nan, 0.0, values) if filled is None else filled
        del nan
        k = obs_t.sum(axis=0)
    else:
        y, k = values, np.full(n_rows, float(n_items))
    tot = y.sum(axis=1)
    # item-rest correlation: rest_ij = (T_i - y_ij) / (K_i - 1), over subjects who saw item j
    inv = 1.0 / np.maximum(k - 1.0, 1.0)
    ti = tot * inv
    # sum_i over the subjects who saw j, of w, w ti, w ti^2
    W_cols = np.stack([w, w * ti, w * ti * ti], axis=1)
    sw, s_ti, s_ti2 = (obs_t @ W_cols if missing else
                       np.broadcast_to(W_cols.sum(axis=0), (n_items, 3))).T
    # sum_i w y_ij (1, inv, tot inv^2, tot inv) and sum_i w y_ij^2 (inv^2, inv)
    s_y, s_y_inv, s_y_tinv2, s_y_ti = (y.T @ np.stack([w, w * inv, w * tot * inv**2, w * ti],
                                                      axis=1)).T
    if missing and filled is None:    # this function's own copy: squared where it lies
        yy = np.multiply(y, y, out=y)
    else:                             # 0/1 answers are their own squares
        yy = y if _zero_one(y) else y * y
    s_yy_inv2, s_yy_inv = (yy.T @ np.stack([w * inv**2, w * inv], axis=1)).T
    return _from_sums(model, sw, s_ti, s_ti2, s_y, s_y_inv, s_y_tinv2, s_y_ti, s_yy_inv2,
                      s_yy_inv, ndtri)


def _binary_sums(values: np.ndarray, V: np.ndarray, U: np.ndarray, cells: int = 1 << 18):
    """(O^T V, Y^T U) transposed, for O the observed mask and Y the zero-filled scores of a
    matrix of 0/1 answers (NaN = missing): both written as float64 one block of rows at a
    time (``cells`` cells), the products summed over the blocks of each chunk of rows, then
    over the chunks in order (:func:`atlascat.irt.colstats.map_row_chunks`: threads)."""
    from .colstats import map_row_chunks

    n, m = values.shape
    rows = max(1, int(cells) // max(1, m))

    def chunk(a, b):
        ob = np.empty((min(rows, b - a), m))
        yb = np.empty((min(rows, b - a), m))
        ov = np.zeros((m, V.shape[1]))
        yu = np.zeros((m, U.shape[1]))
        for s in range(a, b, rows):
            blk = values[s:min(s + rows, b)]
            r = blk.shape[0]
            np.equal(blk, blk, out=ob[:r])      # 1.0 where observed (NaN != NaN)
            np.equal(blk, 1.0, out=yb[:r])      # the answer, 0.0 where missing
            ov += ob[:r].T @ V[s:s + r]
            yu += yb[:r].T @ U[s:s + r]
        return ov, yu

    parts = map_row_chunks(chunk, n, m, blas=True)
    ov, yu = parts[0]
    for o, y in parts[1:]:
        ov, yu = ov + o, yu + y
    return ov.T, yu.T


def _from_sums(model, sw, s_ti, s_ti2, s_y, s_y_inv, s_y_tinv2, s_y_ti, s_yy_inv2, s_yy_inv,
               ndtri):
    """The start values from the per-item sums over the subjects who saw the item."""
    p = s_y / sw
    e_rest = (s_ti - s_y_inv) / sw
    e_rest2 = (s_ti2 - 2.0 * s_y_tinv2 + s_yy_inv2) / sw
    e_yrest = (s_y_ti - s_yy_inv) / sw
    var_rest = np.maximum(e_rest2 - e_rest**2, 1e-12)
    var_y = np.maximum(p * (1 - p), 1e-12)
    r_pb = (e_yrest - p * e_rest) / np.sqrt(var_y * var_rest)
    pc = np.clip(p, 0.01, 0.99)
    r_bis = r_pb * np.sqrt(pc * (1 - pc)) / (np.exp(-ndtri(pc) ** 2 / 2.0) / np.sqrt(2 * np.pi))
    lam = np.clip(np.nan_to_num(r_bis, nan=0.3), -0.9, 0.9)
    root = np.sqrt(1 - lam**2)
    n = len(p)
    if model.model in ("rasch", "1pl"):
        a = np.ones(n)
        # E sigma(theta + d) ~ sigma(d / sqrt(1 + pi / 8)) for theta ~ N(0, 1)
        d = np.log(pc / (1 - pc)) * np.sqrt(1 + np.pi / 8)
        c, u = np.zeros(n), np.ones(n)
    else:
        a = 1.702 * lam / root
        if model.log_slope:
            a = np.maximum(a, 0.25)
        c = (np.full(n, model.prior_c.mode if model.prior_c is not None else C_START)
             if model.has_c else np.zeros(n))
        c = np.minimum(c, 0.5)
        u = np.full(n, U_START) if model.has_u else np.ones(n)
        if model.has_u and model.prior_u is not None:
            u = np.full(n, max(float(model.prior_u.mode), 0.6))
        p_adj = np.clip((pc - c) / (u - c), 0.02, 0.98)
        d = 1.702 * ndtri(p_adj) / root
    return model.internal(a, d, c, u)


def _zero_one(y: np.ndarray) -> bool:
    """Whether a contiguous array holds only +0.0 and 1.0 (then y * y is y bit for bit)."""
    if not (y.flags.c_contiguous or y.flags.f_contiguous) or y.dtype != np.float64:
        return False
    bits = y.view(np.uint64)
    return int(np.count_nonzero(bits == 0)) + \
        int(np.count_nonzero(bits == np.uint64(0x3FF0000000000000))) == y.size


def warm_start(th0: np.ndarray, start_bank: ItemBank, item_ids, item_model: ItemModel):
    """``th0`` (internal parameters, modified in place) with the free columns of the items
    ``start_bank`` holds replaced by the bank's values; a 4PL start with u <= c + gap gets c
    halfway below u, so every start is ordered."""
    free = item_model.free
    have = np.array([i in start_bank for i in item_ids])
    if have.any():
        sb = start_bank.subset([str(i) for i in item_ids[have]])
        c_sb = np.clip(sb.c, 1e-6, 1 - 1e-6)
        u_sb = np.clip(sb.u, 1e-6, 1 - 1e-6)
        if item_model.has_u:  # an unordered start (u <= c + gap): c halfway below u
            bad = u_sb - c_sb < 1e3 * UC_GAP
            c_sb = np.where(bad, np.minimum(c_sb, u_sb) / 2.0, c_sb)
            u_sb = np.where(bad, np.maximum(u_sb, 2e3 * UC_GAP), u_sb)
        given = item_model.internal(sb.a, sb.d, c_sb, u_sb)
        th0[np.ix_(np.flatnonzero(have), free)] = given[:, free]
    return th0
