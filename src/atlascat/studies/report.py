"""A self-contained HTML report of one or more benchmark runs (``atlas report``).

One file, no external resources, no scripts: inline CSS, the tables as HTML, every figure a
base64 PNG data URI rendered with Matplotlib's Agg canvas (no pyplot state, no display needed).
Per run:

- the comparison tables (paper Tables 2, 3 and 6) and the run's settings and sizes;
- error against items used (each method's theta MAE +- SE at its mean test length);
- per method, subset theta against whole-bank theta (identity plots);
- whole-bank theta against full accuracy, and the rank shift between the two orderings;
- the test information functions of the fixed forms;
- the item exposure histogram of each CAT setting;
- the theta +- 1.96 SE trajectory of example models through the CAT.
"""
from __future__ import annotations

import base64
import html
import io
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .tables import TABLES, format_table, in_words, make_table, table_title, table_notes

__all__ = ["build_report", "write_report", "figure_data_uri", "calibration_words"]

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#1d2330;
background:#f6f7f9;line-height:1.45}
main{max-width:1280px;margin:0 auto;padding:24px 32px 64px}
h1{font-size:28px;margin:8px 0 4px}h2{font-size:22px;margin:36px 0 8px;border-bottom:2px solid
#d9dde5;padding-bottom:4px}h3{font-size:17px;margin:22px 0 6px}
p.lead{color:#4a5263;margin:0 0 16px}
.card{background:#fff;border:1px solid #e1e4ea;border-radius:8px;padding:14px 18px;margin:12px 0}
table{border-collapse:collapse;font-size:13.5px;margin:6px 0 4px;background:#fff}
th,td{padding:5px 10px;border-bottom:1px solid #e6e8ee;text-align:right;white-space:nowrap}
th{background:#eef1f6;font-weight:600}td:first-child,th:first-child{text-align:left}
tr.cat td{background:#f3f8ff}
dl.kv{display:grid;grid-template-columns:max-content auto;gap:2px 16px;margin:4px 0;font-size:14px}
dl.kv dt{color:#5a6273}dl.kv dd{margin:0}
figure{margin:10px 0}figure img{max-width:100%;height:auto;border:1px solid #e1e4ea;
border-radius:6px;background:#fff}figcaption{font-size:13px;color:#4a5263;margin-top:4px}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:12px}
.note{font-size:13px;color:#4a5263}
"""

_CAT_COLOR = "#1f6fd1"
_STATIC_COLOR = "#8a8f99"


def _new_figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def figure_data_uri(fig) -> str:
    """Render a Matplotlib figure to a ``data:image/png;base64,...`` URI."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _img(fig, caption: str, alt: str) -> str:
    return (f'<figure><img src="{figure_data_uri(fig)}" alt="{html.escape(alt)}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _is_cat(method: str) -> bool:
    return str(method).startswith("ATLAS")


# ----------------------------------------------------------------------------- figures
def _fig_error_vs_items(summary: pd.DataFrame):
    fig = _new_figure(7.5, 4.2)
    ax = fig.add_subplot()
    for _, r in summary.iterrows():
        color = _CAT_COLOR if _is_cat(r["method"]) else _STATIC_COLOR
        ax.errorbar(r["items_mean"], r["theta_mae"], yerr=1.96 * r["theta_mae_se"], fmt="o",
                    color=color, capsize=3)
    ax.set_xlabel("mean items administered")
    ax.set_ylabel("theta MAE vs whole-bank theta")
    ax.set_title("Error against test length (bars: 95% CI of the MAE)")
    ax.grid(alpha=0.3)
    ax.set_ylim(bottom=0)
    lo, hi = ax.get_xlim()
    ax.set_xlim(lo, hi + 0.18 * (hi - lo))   # room for the labels of the longest tests
    _label_points(ax, summary["items_mean"].to_numpy(float),
                  summary["theta_mae"].to_numpy(float), list(summary["method"]))
    return fig


def _label_points(ax, x, y, labels, fontsize: int = 8, gap_pt: float = 10.0) -> None:
    """Label each point to its right, moving a label up until it is ``gap_pt`` points above
    every label already placed whose horizontal extent it would overlap (labels placed from the
    lowest point up), so that no two labels print over each other."""
    fig = ax.figure
    fig.canvas.draw()   # final layout: data -> pixels
    px = ax.transData.transform(np.column_stack([x, y]))
    per_pt = fig.dpi / 72.0
    renderer = fig.canvas.get_renderer()
    placed: list[tuple[float, float, float]] = []   # (left, right, y) in pixels
    for k in np.argsort(px[:, 1], kind="stable"):
        left = px[k, 0] + 6 * per_pt
        probe = ax.text(0, 0, labels[k], fontsize=fontsize)
        right = left + probe.get_window_extent(renderer).width
        probe.remove()
        target = px[k, 1] + 4 * per_pt
        for pl, pr, py in sorted(placed, key=lambda p: p[2]):
            if pl < right and left < pr and abs(target - py) < gap_pt * per_pt:
                target = py + gap_pt * per_pt
        placed.append((left, right, target))
        ax.annotate(labels[k], (x[k], y[k]), textcoords="offset points", fontsize=fontsize,
                    xytext=(6, (target - px[k, 1]) / per_pt))


def _fig_identity(persons: pd.DataFrame, summary: pd.DataFrame, kind: str = "theta",
                  continuous: bool = False):
    """One panel per method: its theta against whole-bank theta (``kind`` "theta"), or its
    p-IRT accuracy (mean score on continuous scores) against the full one on the metric's own
    0-1 scale (``kind`` "accuracy"); first replicate of Random-k; the panel title carries the
    table's MAE (averaged over replicates) and the correlation."""
    y_col, x_col, mae_col, y_label, x_label, pad = {
        "theta": ("theta", "theta_ref", "theta_mae", "method theta", "whole-bank theta", 0.2),
        "accuracy": ("accuracy_pirt", "accuracy_full", "acc_pirt_mae",
                     in_words("method's p-IRT accuracy", continuous),
                     in_words("full accuracy", continuous), 0.02)}[kind]
    methods = list(summary["method"])
    mae = dict(zip(summary["method"], summary.get(mae_col, pd.Series(np.nan, summary.index))))
    if "replicate" in persons.columns:
        first = persons.groupby("method", sort=False)["replicate"].transform("min")
        pts = persons[persons["replicate"] == first]
    else:
        pts = persons
    n = len(methods)
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig = _new_figure(3.2 * cols, 3.0 * rows)
    vals = pts[[y_col, x_col]].to_numpy(float)
    lo = float(np.nanmin(vals)) - pad
    hi = float(np.nanmax(vals)) + pad
    for k, method in enumerate(methods):
        ax = fig.add_subplot(rows, cols, k + 1)
        g = pts[pts["method"] == method]
        ax.plot([lo, hi], [lo, hi], color="#c44", lw=1)
        ax.scatter(g[x_col], g[y_col], s=7, alpha=0.6,
                   color=_CAT_COLOR if _is_cat(method) else _STATIC_COLOR)
        ok = np.isfinite(g[y_col]) & np.isfinite(g[x_col])
        r = (np.corrcoef(g[x_col][ok], g[y_col][ok])[0, 1]
             if ok.sum() > 2 and np.ptp(g[y_col][ok]) > 0 else np.nan)
        ax.set_title(f"{method}\nMAE {mae.get(method, np.nan):.3f}, r {r:.3f}", fontsize=9)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.tick_params(labelsize=7)
        if k % cols == 0:
            ax.set_ylabel(y_label, fontsize=8)
        if k >= (rows - 1) * cols:
            ax.set_xlabel(x_label, fontsize=8)
    return fig


def _shift_threshold(m: int) -> int:
    """Positions a model must move between the two orders to count as a rank shift: 10 (the
    paper's, on 220 test models), a tenth of the models on fewer than 100."""
    return min(10, max(1, m // 10))


def _rank(x: np.ndarray) -> np.ndarray:
    """Rank 1 = best (highest value); ties get the average rank."""
    return pd.Series(-x).rank(method="average").to_numpy()


def _fig_theta_accuracy(reference: pd.DataFrame, continuous: bool = False):
    fig = _new_figure(11, 4.2)
    ref = reference.dropna(subset=["theta_ref", "accuracy_full"])
    theta = ref["theta_ref"].to_numpy()
    acc = ref["accuracy_full"].to_numpy()
    ax = fig.add_subplot(1, 2, 1)
    ax.scatter(acc, theta, s=8, alpha=0.6, color=_CAT_COLOR)
    ax.set_xlabel(in_words("full accuracy on the bank's items", continuous))
    ax.set_ylabel("whole-bank theta (WLE)")
    ax.set_title(in_words("Theta against accuracy (test models)", continuous))
    ax.grid(alpha=0.3)
    ax2 = fig.add_subplot(1, 2, 2)
    r_acc, r_theta = _rank(acc), _rank(theta)
    shift = np.abs(r_acc - r_theta)
    m = len(theta)
    t = _shift_threshold(m)
    big = shift > t
    ax2.scatter(r_acc[~big], r_theta[~big], s=8, alpha=0.5, color=_STATIC_COLOR,
                label=f"shift <= {t}")
    ax2.scatter(r_acc[big], r_theta[big], s=10, alpha=0.8, color="#d1495b",
                label=f"shift > {t} ({big.mean():.0%} of models)")
    ax2.plot([1, m], [1, m], color="#333", lw=0.8)
    ax2.set_xlabel(in_words("rank by accuracy (1 = best)", continuous))
    ax2.set_ylabel("rank by theta")
    ax2.set_title(in_words("Rank shift: accuracy order vs theta order", continuous))
    ax2.legend(fontsize=8, loc="upper left")
    ax2.grid(alpha=0.3)
    return fig, (float(big.mean()) if m else float("nan")), t


def _fig_tif(run) -> object | None:
    forms = run.forms
    if forms is None or forms.empty:
        return None
    bank = run.bank
    grid = np.linspace(-4, 4, 161)
    info = bank.information(grid)  # (grid, items)
    fig = _new_figure(7.5, 4.2)
    ax = fig.add_subplot()
    for method, g in forms.groupby("method", sort=False):
        g = g[g["replicate"] == g["replicate"].min()]
        idx = bank.index_of(g["item_id"].astype(str))
        ax.plot(grid, info[:, idx].sum(axis=1), lw=1.6, label=f"{method} ({len(idx)} items)")
    if len(run.reference):
        ax2 = ax.twinx()
        ax2.hist(run.reference["theta_ref"].dropna(), bins=30, range=(-4, 4), color="#999",
                 alpha=0.18)
        ax2.set_yticks([])
    ax.set_xlabel("theta")
    ax.set_ylabel("test information")
    ax.set_title("Test information functions of the fixed forms (grey: test models' theta)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def _fig_exposure(exposure: pd.DataFrame):
    cats = [c for c in exposure.columns if _is_cat(c)]
    if not cats:
        return None
    fig = _new_figure(4.0 * len(cats), 3.4)
    for k, method in enumerate(cats):
        ax = fig.add_subplot(1, len(cats), k + 1)
        rates = exposure[method].to_numpy()
        ax.hist(rates, bins=np.linspace(0, 1, 41), color=_CAT_COLOR)
        ax.set_title(f"{method}: mean {rates.mean():.3f}, max {rates.max():.2f}\n"
                     f"{np.mean(rates == 0):.0%} of items never used", fontsize=9)
        ax.set_xlabel("exposure rate")
        if k == 0:
            ax.set_ylabel("items")
    return fig


def _fig_trajectory(traj: pd.DataFrame, reference: pd.DataFrame):
    if traj is None or traj.empty:
        return None
    methods = list(dict.fromkeys(traj["method"]))
    method = methods[len(methods) // 2]
    t = traj[traj["method"] == method]
    subjects = list(dict.fromkeys(t["subject_id"]))[:3]
    ref = reference.set_index("subject_id")
    fig = _new_figure(4.0 * len(subjects), 3.6)
    for k, s in enumerate(subjects):
        ax = fig.add_subplot(1, len(subjects), k + 1)
        g = t[t["subject_id"] == s].sort_values("order")
        x = g["order"].to_numpy()
        th, se = g["theta"].to_numpy(), g["se"].to_numpy()
        ax.fill_between(x, th - 1.96 * se, th + 1.96 * se, color=_CAT_COLOR, alpha=0.18,
                        label="theta ± 1.96 SE")
        ax.plot(x, th, color=_CAT_COLOR, lw=1.5, label="theta")
        if s in ref.index:
            r = ref.loc[s]
            ax.axhline(r["theta_ref"], color="#d1495b", lw=1, ls="--", label="whole-bank theta")
        ax.set_ylim(np.nanmin(th - 1.96 * se) - 0.2, np.nanmax(th + 1.96 * se) + 0.2)
        ax.set_title(f"{s[:40]}", fontsize=9)
        ax.set_xlabel("items administered")
        if k == 0:
            ax.set_ylabel("theta")
            ax.legend(fontsize=7, loc="lower right")
        ax.grid(alpha=0.3)
    fig.suptitle(f"{method}: theta ± 1.96 SE after each item", fontsize=10)
    return fig


# ----------------------------------------------------------------------------- HTML
def _table_html(table: pd.DataFrame, continuous: bool = False) -> str:
    shown = format_table(table, continuous)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in shown.columns)
    body = []
    methods = table["method"].tolist() if "method" in table.columns else [""] * len(shown)
    for method, (_, row) in zip(methods, shown.iterrows()):
        cls = ' class="cat"' if _is_cat(method) else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row)
                    + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _kv(items: dict) -> str:
    return "<dl class=kv>" + "".join(f"<dt>{html.escape(str(k))}</dt><dd>{html.escape(str(v))}</dd>"
                                     for k, v in items.items()) + "</dl>"


def calibration_words(cal: dict) -> str:
    """A run's calibration as the demo prints it and its report shows it: "2pl MML-EM,
    log-likelihood -34406.7, 160 iterations, converged True, 0.9 s" (the log-likelihood to one
    decimal, not -3.441e+04)."""
    def num(key, spec):
        v = cal.get(key)
        return "?" if v is None else format(float(v), spec)

    return (f"{cal.get('model', '?')} MML-EM, log-likelihood {num('loglik', '.1f')}, "
            f"{cal.get('n_iter', '?')} iterations, converged {cal.get('converged', '?')}, "
            f"{num('seconds', '.1f')} s")


def _fixed_forms(summary: pd.DataFrame) -> str:
    """The fixed forms the run scored, as its tables label them (the size used: a size above
    the bank is capped at it), with the replicates of a randomized form; "none" if none."""
    rows = summary[~summary["method"].map(_is_cat)]
    return ", ".join(f"{r['method']}" + (f" x {int(r['replicates'])} replicates"
                                          if int(r.get("replicates", 1)) > 1 else "")
                     for _, r in rows.iterrows()) or "none"


def _run_section(run, anchor: str) -> str:
    info = run.info or {}
    words = getattr(run, "continuous", False)   # continuous scores: "mean score" for accuracy
    cal = info.get("calibration", {}) or {}
    cfg = run.config
    facts = {
        "models (train / test)": f"{info.get('n_train', '?')} / {info.get('n_test', '?')}",
        "bank items": f"{info.get('n_bank_items', len(run.bank))} of "
                      f"{info.get('n_items_matrix', '?')} in the matrix",
        "calibration": calibration_words(cal),
        "model fit (M2, partition mean)": (", ".join(
            f"{k} {info['fit'][k]:.3f}" for k in ("RMSEA", "SRMSR", "CFI", "TLI")
            if k in info["fit"]) if info.get("fit") and "skipped" not in info["fit"] else
            "not computed" + (f" ({info['fit']['skipped']})" if info.get("fit") else "")),
        "CAT": f"tau in {', '.join(f'{t:g}' for t in cfg.taus)}; options {cfg.cat_options or 'paper defaults'}",
        "fixed forms": _fixed_forms(run.summary),
        "seed": cfg.seed,
    }
    parts = [f'<h2 id="{anchor}">{html.escape(run.name)}</h2>', '<div class="card">', _kv(facts),
             "</div>"]
    for name in TABLES:
        table = make_table(run.summary, name)
        parts.append(f"<h3>{html.escape(table_title(name, words))}</h3>"
                     f"{_table_html(table, words)}")
    parts.append('<p class="note">IES = (θ MAE × mean items) / (Random-k θ MAE × its mean items): '
                 "lower is better, Random-k = 1. RIE uses MAE² (inverse relative information per "
                 "item, length-invariant). Coverage 95%: share of test models whose whole-bank θ "
                 "lies in θ̂ ± 1.96 SE (the CAT's SE is its stopping SE, by default the information SE); "
                 "posterior SD: the same with the posterior SD as SE; +ref SE: the interval also "
                 "carries the whole-bank estimate's SE. gp-IRT (tinyBenchmarks, on the random "
                 "and anchor forms) and AIPW (BenchPred, on the random forms: a ridge learned on the train "
                 "models, plus the form's mean residual) are the peers' estimators.</p>")
    note = table_notes(run.summary, words)
    if note:
        parts.append(f'<p class="note"><b>{html.escape(note)}</b></p>')
    parts.append(_img(_fig_error_vs_items(run.summary), "Each method's theta MAE against its "
                      "mean test length; blue: ATLAS CAT, grey: fixed forms.", "error vs items"))
    parts.append(_img(_fig_identity(run.persons, run.summary), "Per method: theta from the "
                      "method's items (y) against whole-bank theta (x); red: identity line. "
                      "Random-k shows its first replicate; the MAE in the title is the table's "
                      "(averaged over replicates).", "identity plots"))
    if {"accuracy_pirt", "accuracy_full"} <= set(run.persons.columns):
        parts.append(_img(_fig_identity(run.persons, run.summary, "accuracy", words), in_words(
            "Per method: the p-IRT accuracy from the method's items (y) against the full "
            "accuracy on the bank's items (x), on the metric's own 0-1 scale; red: identity "
            "line; the MAE in the title is Table 3's.", words),
            in_words("accuracy identity plots", words)))
    fig, share, t = _fig_theta_accuracy(run.reference, words)
    parts.append(_img(fig, in_words(f"Left: whole-bank theta against full accuracy. Right: rank "
                                    f"by accuracy against rank by theta; {share:.0%} of the test "
                                    f"models move more than {t} position{'s' * (t != 1)}.",
                                    words),
                      in_words("theta vs accuracy", words)))
    tif = _fig_tif(run)
    if tif is not None:
        parts.append(_img(tif, "Test information function of each fixed form (first replicate "
                          "of Random-k).", "test information functions"))
    exp = _fig_exposure(run.exposure)
    if exp is not None:
        parts.append(_img(exp, "Distribution of item exposure rates under each CAT setting.",
                          "exposure histograms"))
    traj = _fig_trajectory(run.trajectories, run.reference)
    if traj is not None:
        parts.append(_img(traj, "Theta ± 1.96 SE after each administered item for example test "
                          "models (dashed: whole-bank theta).", "theta trajectory"))
    return "\n".join(parts)


def build_report(runs, *, title: str = "ATLAS benchmark report") -> str:
    """The HTML text of a report on one or more :class:`BenchmarkRun` objects."""
    from .._version import __version__

    runs = list(runs)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body><main>",
             f"<h1>{html.escape(title)}</h1>",
             f'<p class="lead">ATLAS adaptive testing against static subsets on recorded '
             f"answers: each held-out test model is scored from its own answers on the items "
             f"each method picks, and compared with its whole-bank theta. atlascat "
             f"{__version__}.</p>"]
    if len(runs) > 1:
        from .tables import WIDE_TITLE, unique_names, wide_ability_table

        names = unique_names([r.name for r in runs])
        allsum = pd.concat([r.summary.assign(benchmark=n) for r, n in zip(runs, names)],
                           ignore_index=True)
        wide = wide_ability_table(allsum)
        parts.append(f"<h2>Overview</h2><h3>{html.escape(WIDE_TITLE)}</h3>" +
                     "<table><thead><tr>" +
                     "".join(f"<th>{html.escape(str(c))}</th>" for c in wide.columns) +
                     "</tr></thead><tbody>" +
                     "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) +
                             "</tr>" for row in wide.itertuples(index=False)) +
                     "</tbody></table>")
        parts.append("<p>" + " · ".join(f'<a href="#run{k}">{html.escape(r.name)}</a>'
                                         for k, r in enumerate(runs)) + "</p>")
    for k, run in enumerate(runs):
        parts.append(_run_section(run, f"run{k}"))
    parts.append("</main></body></html>")
    return "\n".join(parts)


def write_report(run_dirs, out, *, title: str = "ATLAS benchmark report") -> Path:
    """Read run directories and write the self-contained HTML report to ``out`` (a new file or
    an earlier page: an existing file that is not .html/.htm, e.g. a CSV of answers, is refused,
    never replaced)."""
    from .protocol import BenchmarkRun

    if isinstance(run_dirs, (str, Path)):
        run_dirs = [run_dirs]
    out = Path(out)
    for d in run_dirs:   # the page never replaces a file of a run it reads
        if out.is_file() and out.suffix.lower() not in (".html", ".htm") \
                and out.resolve().parent == Path(d).resolve():
            from ..errors import ConfigError

            raise ConfigError(f"report -o {str(out)!r} is the file {out.name!r} of the benchmark "
                              f"run {str(d)!r}; writing the page there would destroy the run: "
                              f"give an .html path, e.g. {str(Path(d) / 'report.html')!r}")
    from ..validation import check_page_output

    check_page_output(out, option=None)   # nor any other file that is not a page (your data)
    runs = [BenchmarkRun.read(d) for d in run_dirs]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(build_report(runs, title=title), encoding="utf-8")
    return out
