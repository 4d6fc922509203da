"""Comparison tables in the ATLAS paper's layout, as numeric frames, CSV and Markdown.

- Table 2 (ability): items used, theta MAE +- SE against the whole-bank theta, IES and RIE
  relative to Random-100, and the 95% interval coverage (with the method's own SE; with the
  posterior SD as SE; and with the whole-bank SE added).
- Table 3 (accuracy): p-IRT reconstructed accuracy MAE +- SE against the full accuracy, and the
  method's direct estimate (mean score on its items; cluster-weighted for anchor points); on
  Random-k also the peers' estimates, tinyBenchmarks' gp-IRT and BenchPred's AIPW.
- Table 6 (security and time): items (mean, SD), item exposure (mean over the bank, max, share of
  items never used), test overlap, and selection + scoring time per model.

The frames are numeric (what the CSV holds); :func:`format_table` turns one into display strings
("0.123 ± 0.004") and :func:`to_markdown` into a GitHub Markdown table. A table built from several
runs (``atlas compare``) carries a leading ``benchmark`` column.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ConfigError

__all__ = ["TABLES", "make_table", "make_tables", "format_table", "to_markdown", "write_tables",
           "wide_ability_table", "WIDE_TITLE", "unique_names", "in_words", "table_title",
           "comparison", "whole_bank_note", "few_models_note", "table_notes"]

# name -> (title, numeric columns in order)
TABLES = {
    "ability": ("Table 2. Ability: theta error against the whole-bank theta",
                ["items_mean", "theta_mae", "theta_mae_se", "ies", "rie", "coverage",
                 "coverage_posterior", "coverage_joint", "coverage_calibrated", "whole_bank"]),
    "accuracy": ("Table 3. Accuracy: reconstructed accuracy error against the full accuracy",
                 ["items_mean", "acc_pirt_mae", "acc_pirt_mae_se", "acc_direct_mae",
                  "acc_direct_mae_se", "acc_gpirt_mae", "acc_gpirt_mae_se", "acc_aipw_mae",
                  "acc_aipw_mae_se", "whole_bank"]),
    "security": ("Table 6. Security and time",
                 ["items_mean", "items_sd", "exposure_mean", "exposure_max", "exposure_unused",
                  "overlap", "seconds_mean"]),
}

_HEADERS = {
    "items_mean": "Items", "whole_bank": "Whole bank given", "items_sd": "Items SD",
    "ies": "IES", "rie": "RIE",
    "coverage": "Coverage 95%", "coverage_posterior": "Cov. (posterior SD)",
    "coverage_joint": "Cov. (+ref SE)", "coverage_calibrated": "Cov. (val.-calibrated SE)",
    "exposure_mean": "Exposure mean", "exposure_max": "Exposure max",
    "exposure_unused": "Items unused", "overlap": "Overlap", "seconds_mean": "Seconds/model",
}
# (value column, se column, header) pairs shown as "value ± se"
_PAIRS = [("theta_mae", "theta_mae_se", "θ MAE ± SE"),
          ("acc_pirt_mae", "acc_pirt_mae_se", "p-IRT acc. MAE ± SE"),
          ("acc_direct_mae", "acc_direct_mae_se", "Direct acc. MAE ± SE"),
          ("acc_gpirt_mae", "acc_gpirt_mae_se", "gp-IRT acc. MAE ± SE"),
          ("acc_aipw_mae", "acc_aipw_mae_se", "AIPW acc. MAE ± SE")]


def unique_names(names) -> list[str]:
    """Run names made unique by appending " (2)", " (3)", ... to repeats."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name} ({seen[name]})")
    return out


def comparison(runs) -> tuple[pd.DataFrame, bool]:
    """The summaries of several benchmark runs stacked with a leading ``benchmark`` column (the
    runs' names, made unique), and whether every run holds continuous scores (its tables then
    say mean score where 0/1 runs say accuracy: :func:`in_words`); beside 0/1 runs, a
    continuous run's name carries "(mean score)", what its accuracy columns hold."""
    runs = list(runs)
    names = unique_names([r.name for r in runs])
    scores = [bool(getattr(r, "continuous", False)) for r in runs]
    if any(scores) and not all(scores):   # mixed: a continuous run's "accuracy" is its mean
        names = [f"{n} (mean score)" if c else n for n, c in zip(names, scores)]
    summary = pd.concat([r.summary.assign(benchmark=n) for r, n in zip(runs, names)],
                        ignore_index=True)
    return summary, bool(runs) and all(scores)


def make_table(summary: pd.DataFrame, name: str) -> pd.DataFrame:
    """Numeric table ``name`` (ability | accuracy | security) from a per-method summary.

    Columns absent from the summary are left out; ``benchmark`` (if present) and ``method`` lead.
    ``whole_bank`` (the share of test models given every bank item) is shown only when some
    method gave it to some model: such a row is the reference itself, not a shorter test.
    """
    if name not in TABLES:
        raise ConfigError(f"unknown table {name!r}; choose one of {', '.join(TABLES)}")
    keys = [c for c in ("benchmark", "method") if c in summary.columns]
    if "method" not in keys:
        raise ConfigError("the summary needs a 'method' column")
    cols = [c for c in TABLES[name][1] if c in summary.columns
            and (c != "whole_bank" or (summary[c].fillna(0) > 0).any())]
    return summary[keys + cols].reset_index(drop=True)


def whole_bank_note(summary: pd.DataFrame, continuous: bool = False) -> str | None:
    """One sentence naming the methods that gave some test models every bank item (their error
    against the whole-bank theta and full accuracy is near 0 by construction, so their MAE,
    IES and coverage show no gain of a shorter test); None when no method did."""
    if "whole_bank" not in summary.columns:
        return None
    rows = summary[summary["whole_bank"].fillna(0) > 0]
    if rows.empty:
        return None
    bench = (rows["benchmark"].astype(str) + ": " if "benchmark" in rows.columns else "")
    who = ", ".join(f"{m} to {100 * w:.0f}% of the test models"
                    for m, w in zip(bench + rows["method"].astype(str), rows["whole_bank"]))
    return in_words(f"Whole bank given: {who}. A model given every bank item is scored against "
                    "its own whole-bank theta and full accuracy, so its error is near 0 by "
                    "construction, not a saving of items (raise tau, or use a larger bank, to "
                    "judge a shorter test).",
                    continuous)


def few_models_note(summary: pd.DataFrame, below: int = 20) -> str | None:
    """On fewer than ``below`` test models a coverage is a count, not a rate (4 models: steps of
    25%, so "100.0%" says 4 of 4): one sentence saying so, None on enough models."""
    if "n_models" not in summary.columns or summary.empty:
        return None
    n = int(summary["n_models"].min())
    if n >= below:
        return None
    return (f"Few test models: {n}, so a coverage moves in steps of {100 / max(n, 1):.0f}% "
            f"(100% is {n} of {n}) and an MAE rests on {n} errors; hold out more models "
            "(--test-size, test_size) or add models before reading these as rates.")


def table_notes(summary: pd.DataFrame, continuous: bool = False) -> str | None:
    """What a reader must know under the tables (:func:`whole_bank_note`,
    :func:`few_models_note`), as one paragraph; None when nothing."""
    notes = [n for n in (whole_bank_note(summary, continuous), few_models_note(summary)) if n]
    return " ".join(notes) or None


def make_tables(summary: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Every table of :data:`TABLES` from a benchmark run's summary, by name."""
    return {name: make_table(summary, name) for name in TABLES}


def _fmt(v, digits=3) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "–"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return f"{float(v):.{digits}f}"


def in_words(text: str, continuous: bool = False) -> str:
    """``text`` as it reads for the run's scores: on continuous scores (F1, ROUGE, a similarity)
    a model's mean over the items is its mean score, not an accuracy."""
    if not continuous:
        return text
    return (text.replace("accuracy", "mean score").replace("Accuracy", "Mean score")
            .replace("acc.", "score"))


def table_title(name: str, continuous: bool = False) -> str:
    """The title of table ``name`` (:data:`TABLES`), in the run's words (:func:`in_words`)."""
    return in_words(TABLES[name][0], continuous)


def format_table(table: pd.DataFrame, continuous: bool = False) -> pd.DataFrame:
    """Display strings: MAE and its SE merged into "m ± se", items with one decimal, rates in %
    with one decimal, times in seconds with 3 significant digits; headers in the run's words
    (:func:`in_words`)."""
    out = pd.DataFrame(index=table.index)
    used = set()
    for col in table.columns:
        if col in used:
            continue
        pair = next((p for p in _PAIRS if p[0] == col), None)
        if pair and pair[1] in table.columns:
            out[pair[2]] = [f"{_fmt(m, 3)} ± {_fmt(s, 3)}" if np.isfinite(m) else "–"
                            for m, s in zip(table[pair[0]], table[pair[1]])]
            used.update(pair[:2])
            continue
        header = _HEADERS.get(col, col)
        vals = table[col]
        if col in ("benchmark", "method"):
            out[header] = vals.astype(str)
        elif col == "whole_bank":
            out[header] = ["–" if not np.isfinite(v) else f"{100 * v:.0f}%" for v in vals]
        elif col.startswith("items"):
            out[header] = [_fmt(v, 1) for v in vals]
        elif col.startswith(("coverage", "exposure", "overlap")):
            out[header] = ["–" if not np.isfinite(v) else f"{100 * v:.1f}%" for v in vals]
        elif col == "seconds_mean":
            out[header] = ["–" if not np.isfinite(v) else f"{v:.3g}" for v in vals]
        else:
            out[header] = [_fmt(v, 3) for v in vals]
        used.add(col)
    out.columns = [in_words(str(c), continuous) for c in out.columns]
    return out.reset_index(drop=True)


def to_markdown(df: pd.DataFrame, *, title: str | None = None) -> str:
    """A GitHub-flavoured Markdown table (first two columns left-aligned, others right)."""
    cols = [str(c) for c in df.columns]
    rows = [[str(v) for v in r] for r in df.itertuples(index=False)]
    width = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(cols)]
    left = {i for i, c in enumerate(cols) if c in ("benchmark", "method", "Benchmark", "Method")}

    def line(cells):
        return "| " + " | ".join(c.ljust(w) if i in left else c.rjust(w)
                                 for i, (c, w) in enumerate(zip(cells, width))) + " |"

    sep = "|" + "|".join((":" + "-" * (w + 1)) if i in left else ("-" * (w + 1) + ":")
                         for i, w in enumerate(width)) + "|"
    text = "\n".join([line(cols), sep] + [line(r) for r in rows])
    return (f"**{title}**\n\n{text}\n" if title else text + "\n")


#: what a cell of :func:`wide_ability_table` holds (its title in every output)
WIDE_TITLE = "Theta MAE ± SE (mean items) by benchmark"


def wide_ability_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Methods x benchmarks: "MAE ± SE (items)" cells, the paper's Table 2 shape across runs."""
    if "benchmark" not in summary.columns:
        raise ConfigError("wide_ability_table needs a 'benchmark' column (several runs)")
    cell = [f"{m:.3f} ± {s:.3f} ({n:.0f})" for m, s, n in
            zip(summary["theta_mae"], summary["theta_mae_se"], summary["items_mean"])]
    df = summary.assign(cell=cell)
    methods = list(dict.fromkeys(df["method"]))
    benches = list(dict.fromkeys(df["benchmark"]))
    wide = df.pivot(index="method", columns="benchmark", values="cell").reindex(methods)[benches]
    return wide.fillna("–").reset_index().rename(columns={"method": "Method"})


def write_tables(summary: pd.DataFrame, out_dir, *, prefix: str = "",
                 continuous: bool = False) -> dict[str, Path]:
    """Write every table as ``<prefix>table_<name>.csv`` (numeric) and ``.md`` (formatted, in the
    run's words: :func:`in_words`); returns the paths by name (and ``markdown`` for the combined
    ``<prefix>tables.md``)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths, blocks = {}, []
    notes = {"ability": table_notes(summary, continuous),
             "accuracy": whole_bank_note(summary, continuous)}
    for name, table in make_tables(summary).items():
        csv = out / f"{prefix}table_{name}.csv"
        table.to_csv(csv, index=False)
        md = to_markdown(format_table(table, continuous), title=table_title(name, continuous))
        if notes.get(name):
            md += f"\n{notes[name]}\n"
        (out / f"{prefix}table_{name}.md").write_text(md, encoding="utf-8")
        paths[name] = csv
        blocks.append(md)
    if "benchmark" in summary.columns:
        blocks.insert(0, to_markdown(wide_ability_table(summary),
                                     title=WIDE_TITLE))
    combined = out / f"{prefix}tables.md"
    combined.write_text("\n".join(blocks), encoding="utf-8")
    paths["markdown"] = combined
    return paths
