"""A self-contained HTML page per live run (inline CSS and SVG; no scripts, no external files).

Shows the result (theta +- SE, reconstructed accuracy, items used, stop reason), the protocol
the items were asked with (the leaderboard's log-likelihoods, or APPROXIMATE for chat), the run's
settings, the theta / SE trajectory, and every step (item, question, the model's answer, key,
score, theta, SE, latency, tokens). Every text is HTML-escaped; nothing secret is in the store,
so nothing secret can reach the page.
"""
from __future__ import annotations

import datetime as _dt
import html
import json
from pathlib import Path

import numpy as np

__all__ = ["render_run_report", "write_run_report", "describe_prediction"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;
color:#1b1f24;padding:0 1em}
h1{font-size:1.4em;margin-bottom:.2em}h2{font-size:1.1em;margin-top:1.6em}
.big{font-size:1.6em;font-weight:600}.muted{color:#667}
table{border-collapse:collapse;width:100%;font-size:.86em}
th,td{border-bottom:1px solid #e3e6ea;padding:.3em .5em;text-align:left;vertical-align:top}
th{background:#f5f7f9}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#17803d;font-weight:600}.bad{color:#b42318;font-weight:600}
.kv td:first-child{color:#556;width:14em}.pill{padding:.1em .5em;border-radius:1em;background:#eef}
pre{white-space:pre-wrap;margin:0;font-size:1.05em;font-family:ui-monospace,Menlo,Consolas,monospace}
"""


def _e(value) -> str:
    return html.escape("" if value is None else str(value))


def _fmt(value, spec=".3f") -> str:
    if value is None or (isinstance(value, (float, np.floating)) and not np.isfinite(value)):
        return "-"
    return format(value, spec)


def _val(x):
    """None for SQL NULLs that pandas turned into NaN."""
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return None
    return x


def _time(ts) -> str:
    if ts is None:
        return "-"
    return _dt.datetime.fromtimestamp(float(ts)).strftime("%Y-%m-%d %H:%M:%S")


def _trajectory_svg(theta, se, width=760, height=260) -> str:
    """Theta with a +-SE band and the SE itself against the step number."""
    n = len(theta)
    if n == 0:
        return "<p class='muted'>no answered item yet</p>"
    theta, se = np.asarray(theta, float), np.asarray(se, float)
    lo, hi = float(np.min(theta - se)), float(np.max(theta + se))
    pad = 0.1 * max(hi - lo, 0.5)
    lo, hi = lo - pad, hi + pad
    left, right, top, bottom = 62, 15, 15, 30
    w, h = width - left - right, height - top - bottom
    xs = left + (np.arange(n) / max(n - 1, 1)) * w

    def y(v):
        return top + (hi - np.asarray(v)) / (hi - lo) * h

    band = " ".join(f"{x:.1f},{v:.1f}" for x, v in zip(xs, y(theta + se)))
    band += " " + " ".join(f"{x:.1f},{v:.1f}" for x, v in zip(xs[::-1], y((theta - se)[::-1])))
    line = " ".join(f"{x:.1f},{v:.1f}" for x, v in zip(xs, y(theta)))
    ticks = np.linspace(lo, hi, 5)
    grid = "".join(f"<line x1='{left}' x2='{left + w}' y1='{y(t):.1f}' y2='{y(t):.1f}' stroke='#eee'/>"
                   f"<text x='{left - 6}' y='{y(t) + 4:.1f}' font-size='11' text-anchor='end'>{t:.2f}</text>"
                   for t in ticks)
    xt = "".join(f"<text x='{left + (k - 1) / max(n - 1, 1) * w:.1f}' y='{height - 8}' font-size='11' "
                 f"text-anchor='middle'>{k}</text>"
                 for k in sorted({1, n, *range(10, n, 10)}))
    legend = (f"<rect x='{left + w - 170}' y='{top + 4}' width='14' height='10' fill='#c7d7f5'/>"
              f"<text x='{left + w - 152}' y='{top + 13}' font-size='11'>theta &#177; 1 SE</text>"
              f"<line x1='{left + w - 84}' x2='{left + w - 70}' y1='{top + 9}' y2='{top + 9}' "
              f"stroke='#1f4fb5' stroke-width='2'/>"
              f"<text x='{left + w - 66}' y='{top + 13}' font-size='11'>theta (EAP)</text>")
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height + 14}' "
            f"role='img' aria-label='theta trajectory: theta and its SE band after each item'>"
            f"{grid}"
            f"<polygon points='{band}' fill='#c7d7f5' opacity='0.7'/>"
            f"<polyline points='{line}' fill='none' stroke='#1f4fb5' stroke-width='2'/>{xt}"
            f"{legend}"
            f"<text x='{left + w / 2:.0f}' y='{height + 10}' font-size='12' text-anchor='middle'>"
            "items asked</text>"
            f"<text x='14' y='{top + h / 2:.0f}' font-size='12' text-anchor='middle' "
            f"transform='rotate(-90 14 {top + h / 2:.0f})'>ability theta</text>"
            "</svg>")


def _short(text: str, n: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _choice_html(bank, item_id, answer) -> str:
    """The option the model chose and the gold one, with every option's log-likelihood (and
    per character, for acc_norm), or the generation and the answer read from it; "" when the
    bank has no requests for the item or the stored answer is not its outputs."""
    if bank is None or answer is None:
        return ""
    try:
        from ..content.requests import build_item_requests
        from .runner import _outputs_from_text

        ir = build_item_requests(bank, item_id)
        c = ir.choice(_outputs_from_text(ir, answer))
    except Exception:  # noqa: BLE001 - a page without the detail is still a page
        return ""
    if c["kind"] == "generation":
        return (f"answered <b>{_e(c['extracted'])}</b> (gold <b>{_e(c['gold'])}</b>)"
                f"<details><summary>generation</summary><pre>{_e(c['text'][:2000])}</pre>"
                "</details>")
    opts, chosen, gold = c["options"], c["chosen"], c["gold"]
    head = f"chose <b>{_e(_short(opts[chosen]))}</b>"
    head += " (the gold option)" if chosen == gold else f", gold <b>{_e(_short(opts[gold]))}</b>"
    per = c["per_char"]
    rows = "".join(
        f"<tr><td>{'&#9664; chosen' if i == chosen else ''}{' gold' if i == gold else ''}</td>"
        f"<td>{_e(_short(t, 80))}</td><td class='num'>{ll:.3f}</td>"
        + (f"<td class='num'>{per[i]:.4f}</td>" if per else "") + "</tr>"
        for i, (t, ll) in enumerate(zip(opts, c["loglikelihood"])))
    cols = "<th></th><th>option</th><th>log-likelihood</th>" + (
        "<th>per character</th>" if per else "")
    return (f"{head}<details><summary>log-likelihoods ({_e(c['rule'])})</summary>"
            f"<table><thead><tr>{cols}</tr></thead><tbody>{rows}</tbody></table></details>")


def _ordinal(p: float) -> str:
    n = int(round(p))
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def describe_prediction(lb, *, short: bool = False) -> str:
    """The one way a predicted leaderboard score is written (CLI, HTML report, ``atlas runs``).

    ``lb``: ``{score, lo, hi, percentile, ...}`` on the 0-1 scale (``ScorePrediction.to_dict()``
    or a run's ``leaderboard`` entry), or ``{note}``. Long: "71.9% (95% interval 68.5-75.3%),
    88th percentile of the leaderboard's models"; ``short``: "71.9% (68.5-75.3)".
    """
    if lb.get("score") is None:
        return f"not available ({lb.get('note', 'no score link')})"
    text = f"{100 * lb['score']:.1f}%"
    has_interval = lb.get("lo") is not None and lb.get("hi") is not None
    if short:
        return text + (f" ({100 * lb['lo']:.1f}-{100 * lb['hi']:.1f})" if has_interval else "")
    if has_interval:
        text += f" (95% interval {100 * lb['lo']:.1f}-{100 * lb['hi']:.1f}%)"
    if lb.get("percentile") is not None:
        text += f", {_ordinal(lb['percentile'])} percentile of the leaderboard's models"
    return text


def render_run_report(store, run_id: str, bank=None, leaderboard=None, *,
                      headline: str | None = None, sections: str = "") -> str:
    """The HTML text of a run's page. ``bank`` (optional) adds each item's question and key;
    ``leaderboard`` (optional, ``atlas evaluate``'s {score, lo, hi, percentile, warning} or
    {note}) the predicted leaderboard score and its one-line warning. ``headline`` replaces
    the theta line at the top, ``sections`` (HTML) goes after the summary (a suite run's
    table)."""
    info = store.get_run(run_id)
    steps = store.steps(run_id)
    answered = steps[steps["status"] == "answered"]
    meta = getattr(bank, "metadata", None)
    subj, cfg, prm = info["subject"], info["config"], info["prompt"]
    theta, se = info["theta"], info["se"]
    ci = (f"[{theta - 1.96 * se:.3f}, {theta + 1.96 * se:.3f}]"
          if theta is not None and se is not None else "-")
    n = int(info["n_items"])
    lat = answered["latency_s"].astype(float)
    from .runner import PROTOCOL_LABELS

    proto = info.get("protocol") or "approximate"
    kv = [
        ("model", subj.get("model")),
        ("protocol", PROTOCOL_LABELS.get(proto, proto)),
        ("items per round", info.get("batch_size") or 1),
        ("endpoint", subj.get("base_url", subj.get("type"))),
        ("endpoint kind", subj.get("kind")),
        ("bank", f"{info['bank_ref'] or '(in memory)'} ({info['n_bank_items']} items)"),
        ("status", info["status"] + (f" ({info['stop_reason']})" if info["stop_reason"] else "")),
        ("theta (95% CI)", f"{_fmt(theta)} {ci}"),
        ("SE", _fmt(se)),
        ("model-based accuracy (expected over the bank at theta)",
         _fmt(info["accuracy"], ".1%") if info["accuracy"] is not None else "-"),
        ("observed accuracy (right / asked)",
         _fmt(info["n_correct"] / n, ".1%") if n else "-"),
        ("items used", f"{n} ({int(info['n_correct'])} correct)"),
        ("tokens (prompt / completion)", f"{info['prompt_tokens']} / {info['completion_tokens']}"),
        ("latency total / median per item",
         f"{info['latency_s']:.2f} s / {(float(np.median(lat)) if len(lat) else 0.0):.3f} s"),
        ("CAT", f"SE stop {cfg.get('se_stop')}, items {cfg.get('min_items')}-{cfg.get('max_items')}, "
                f"{cfg.get('selection')} (randomesque {cfg.get('randomesque')}), seed {info['seed']}"),
        ("prompt", f"{prm.get('style')}, max_tokens {prm.get('max_tokens') or 'auto'}, "
                   f"temperature {prm.get('temperature')}"),
        ("started / updated", f"{_time(info['created_at'])} / {_time(info['updated_at'])}"),
    ]
    lb = leaderboard or {}
    warn_html = ""
    if "score" in lb:
        kv.insert(9, ("predicted leaderboard score", describe_prediction(lb)))
        if lb.get("warning"):
            kv.insert(10, ("warning", lb["warning"]))
            warn_html = f"<p class='bad'>warning: {_e(lb['warning'])}</p>"
    elif lb.get("note"):
        kv.insert(9, ("predicted leaderboard score", f"not available ({lb['note']})"))
    if info["error"]:
        kv.append(("last error", info["error"]))
    rows = []
    for rec in steps.to_dict("records"):
        rec = {k: _val(v) for k, v in rec.items()}
        q = key = ""
        if meta is not None and rec["item_id"] in meta.index:
            q = str(meta.loc[rec["item_id"], "question"])
            key = str(meta.loc[rec["item_id"], "answer"])
        choice = _choice_html(bank, rec["item_id"], rec["answer"]) if proto != "approximate" \
            else ""
        score = rec["score"]
        mark = ("<span class='ok'>&#10003;</span>" if score == 1 else
                "<span class='bad'>&#10007;</span>" if score == 0 else "<span class='pill'>pending</span>")
        ans = rec["answer"] if rec["answer"] is not None else ""
        chars = rec.get("answer_chars")
        if chars is not None and int(chars) > len(ans):
            ans = (f"{ans[:200]} [stored cut: {int(chars)} characters, sha256 "
                   f"{str(rec.get('answer_sha256'))[:16]}...]")
        toks = "" if rec["prompt_tokens"] is None else \
            f"{int(rec['prompt_tokens'])}/{int(rec['completion_tokens'] or 0)}"
        rows.append(
            f"<tr><td class='num'>{int(rec['step']) + 1}</td><td>{_e(rec['item_id'])}</td>"
            f"<td>{_e(q[:160] + ('...' if len(q) > 160 else ''))}</td>"
            + (f"<td>{choice}</td>" if choice else
               f"<td><pre>{_e(ans if '[stored cut:' in ans else ans[:200] + ('...' if len(ans) > 200 else ''))}</pre></td>") +
            f"<td>{_e(key)}</td><td>{mark}</td>"
            f"<td class='num'>{_fmt(rec['theta'])}</td><td class='num'>{_fmt(rec['se'])}</td>"
            f"<td class='num'>{_fmt(rec['latency_s'])}</td><td class='num'>{toks}</td>"
            f"<td>{'cache' if rec['cached'] == 1 else ''}</td></tr>")
    table = ("<table><thead><tr><th>#</th><th>item</th><th>question</th><th>answer</th><th>key</th>"
             "<th>score</th><th>theta</th><th>SE</th><th>latency s</th><th>tokens</th><th></th>"
             "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    settings = _e(json.dumps({"cat": cfg, "prompt": prm, "subject": subj}, indent=1, sort_keys=True))
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>ATLAS run {_e(run_id)} - {_e(info['model'])}</title><style>{_CSS}</style></head><body>"
        f"<h1>ATLAS live run <code>{_e(run_id)}</code></h1>"
        f"<div class='muted'>{_e(info['model'])} on {_e(info['bank_ref'] or 'bank')} &middot; "
        f"protocol: {_e(PROTOCOL_LABELS.get(proto, proto))}</div>"
        + (f"<p class='big'>{_e(headline)}" if headline is not None else
           f"<p class='big'>theta = {_fmt(theta)} &#177; {_fmt(se)}")
        + f"<span class='muted'> &middot; {n} items &middot; model-based accuracy "
        f"{_fmt(info['accuracy'], '.1%') if info['accuracy'] is not None else '-'}</span></p>"
        "<table class='kv'>" + "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in kv)
        + "</table>" + warn_html + sections +
        f"<h2>Trajectory</h2>{_trajectory_svg(answered['theta'].tolist(), answered['se'].tolist())}"
        f"<h2>Items</h2>{table}"
        f"<h2>Settings</h2><pre>{settings}</pre>"
        "<p class='muted'>Generated by ATLAS. Model-based accuracy = mean probability correct "
        "over the bank's items at theta; observed accuracy = right / asked over the adaptively "
        "chosen items.</p></body></html>")


def write_run_report(store, run_id: str, path, bank=None, leaderboard=None) -> Path:
    """Write :func:`render_run_report` to ``path`` (folders created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_run_report(store, run_id, bank=bank, leaderboard=leaderboard),
                    encoding="utf-8")
    return path
