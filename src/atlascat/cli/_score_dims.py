"""``atlas score RESPONSES --bank MBANK`` on a multidimensional 2PL bank (a1..aK, d): EAP, MAP,
ML or WLE theta_1..theta_K and their SEs, as mirt's ``fscores(mod, full.scores.SE = TRUE)``
(the work: :func:`atlascat.irt.multidimscore.score_multidim`)."""
from __future__ import annotations

from pathlib import Path

from ._common import align_items, console, load_responses, print_frame, write_scores_csv
from ._score_table import with_mean_score

#: what a multidimensional bank is scored by, said when something else is asked
SUPPORTED = ("a multidimensional bank is scored by --method eap, map, ml or wle (mirt's "
             "fscores), eap and map with the prior N(0, I) on the bank's axes")


def is_multidim_bank(spec) -> bool:
    """True for a CSV / Parquet bank file with a1, a2 and d columns."""
    path = Path(str(spec))
    if not path.is_file() or path.suffix.lower() not in (".csv", ".parquet"):
        return False
    from ..irt.multidim import MultidimBank

    return MultidimBank.is_multidim_file(path)


def score_dims_cmd(responses, bank, method: str, output, *, freq_column, normalize_ids: bool,
                   quadpts, rotate: str, extra_items: str, unsupported: dict) -> None:
    """Score, then write the scores to ``output`` (or print them) and one line on the axes,
    the prior and the median SE of each dimension. ``unsupported``: options given that a
    multidimensional bank has no use for (refused)."""
    from ..errors import ConfigError
    from ..irt.multidim import MultidimBank
    from ..irt.multidimscore import METHODS, score_multidim
    from ..irt.rotation import ROTATIONS

    given = [opt for opt, on in unsupported.items() if on]
    if given:
        raise ConfigError(f"{given[0]} is not available with a multidimensional bank; {SUPPORTED}")
    if method not in METHODS:
        raise ConfigError(f"--method {method}: {SUPPORTED}")
    if rotate not in ROTATIONS:
        raise ConfigError(f"--rotate must be one of {', '.join(ROTATIONS)}, not {rotate!r}")
    bk = MultidimBank.read(bank)
    rm = load_responses(responses, freq_column=freq_column, normalize_ids=normalize_ids)
    rm, bk = align_items(rm, bk, extra_items)
    res = score_multidim(rm, bk, method, quadpts=quadpts, rotate=rotate)
    df = res.to_frame()
    df = with_mean_score(df, rm.aligned_values(bk.item_ids), rm.weights,
                         at=df.columns.get_loc("n_items") + 1)
    if output is not None:
        write_scores_csv(df, output)
        console.print(f"wrote {len(df)} scores ({method}, {bk.n_dims} dimensions) to {output}")
    else:
        print_frame(df, title=f"theta by {method.upper()} ({len(bk)} items, {bk.n_dims} "
                              "dimensions)")
    console.print(summary_line(res, rm.weights), markup=False, highlight=False)


def summary_line(res, weights=None) -> str:
    """``"2000 subjects, EAP on the bank's axes (prior N(0, I)), median SE 0.61, 0.58"``; ML and
    WLE: no prior, and the count of each flag other than ok."""
    import numpy as np

    from ..filtering import weighted_percentile

    w = None if weights is None else np.asarray(weights, float)
    n = len(res.theta) if w is None else float(w.sum())
    prior = res.flag is None
    ok = slice(None) if prior else np.asarray(res.flag) == "ok"
    wk = None if w is None else w[ok]
    med = ", ".join(f"{weighted_percentile(res.se[ok, k], 50, wk):.4f}" if res.se[ok].size
                    else "-" for k in range(res.n_dims))
    axes = ("the bank's axes" + (" (prior N(0, I))" if prior else "") if res.rotate == "none"
            else f"{res.rotate} axes (" + ("prior N(0, Phi), " if prior else "")
            + f"Phi_12 {res.phi[0, 1]:.3f})")
    line = (f"{n:g} subjects, {res.method.upper()} on {axes}, median SE "
            + ("" if prior else "of the ok scores ") + f"by dimension {med}")
    if not prior:
        flag = np.asarray(res.flag, dtype=str)
        for f in sorted(set(flag) - {"ok"}):
            line += f"; {(flag == f).sum() if w is None else w[flag == f].sum():g} {f}"
    return line
