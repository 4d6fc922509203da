"""A self-contained HTML page per live run (inline CSS and SVG; no scripts, no external files).

Shows the result (theta +- SE, model-based score, items used, stop reason), the protocol
the items were asked with (the leaderboard's log-likelihoods, or APPROXIMATE for chat), the run's
settings, the theta / SE trajectory, and every step (item, question, the model's answer, key,
score, theta, SE, latency, tokens). Every text is HTML-escaped; nothing secret is in the store,
so nothing secret can reach the page.
"""
from __future__ import annotations

import datetime as _dt
import html
import json
import os
from pathlib import Path

import numpy as np

from .scale import SCALED_FIELDS, on_metric_scale  # noqa: F401 - report's names too
from .trajectory import trajectory_svg
from ..scorelink.words import LEADERBOARD, SOURCE, population_of, score_name  # noqa: F401 - report's names too

__all__ = ["render_run_report", "write_run_report", "describe_prediction", "protocol_label",
           "on_metric_scale", "benchmark_of", "model_based_words",
           "protocol_name", "protocol_value", "SOURCE_PROTOCOL", "score_name", "population_of",
           "scale_words", "SOURCE", "LEADERBOARD", "GENERATION_RULES", "predicted_steps"]

#: scoring rules whose requests are generations (see atlascat.content.requests)
GENERATION_RULES = frozenset({"gsm8k_exact", "gsm8k_flexible", "exact_match",
                              "exact_match_norm", "exact_match_raw", "f1"})


def protocol_label(protocol: str | None, bank=None, *, folder: bool = False,
                   scale=None) -> str:
    """How a run's protocol reads (CLI, ``results.json`` and HTML alike): a leaderboard run says
    whether its bank's items are scored by log-likelihood or by generation (GSM8K: exact
    match), from the bank's ``rule`` column; on a bank ``folder`` (built from the user's own
    results) the requests are the source models' logged ones, not a leaderboard's; ``scale``
    (low, high): the folder's metric scale, on which your command prints each score."""
    from .runner import PROTOCOL_LABELS
    from .subjects import is_ordinal

    proto = protocol or "approximate"
    meta = getattr(bank, "metadata", None)
    label = PROTOCOL_LABELS.get(proto, proto)
    if proto == "leaderboard" and meta is not None and "rule" in meta.columns:
        rules = {str(r) for r in meta["rule"].dropna()}
        if rules and rules <= GENERATION_RULES:   # scored as the rules score: F1 is no match
            how = [w for w, r in (("exact match", rules - {"f1"}), ("token F1", rules & {"f1"}))
                   if r]
            label = f"leaderboard (generation, {' and '.join(how)})"
        elif rules & GENERATION_RULES:
            label = "leaderboard (log-likelihood and generation)"
    if proto == "leaderboard" and folder:
        label = label.replace("leaderboard (", "as the source models were asked (", 1)
    if proto == "request command" and not folder:     # a shipped bank: the leaderboard's
        label = label.replace("the logged requests", "the leaderboard's requests", 1)
    if proto in ORDINAL_LABELS and is_ordinal(bank):  # graded / gpcm items answer ratings
        label = ORDINAL_LABELS[proto]
    elif proto == "request command" and meta is not None and "rule" in meta.columns:
        from .subjects.cmdrequests import opaque_metrics

        opaque = opaque_metrics(bank)
        if opaque:
            label = ("the logged requests answered and scored by your command "
                     f"({', '.join(opaque)}" + ("" if scale is None else
                                               f", on the metric's scale "
                                               f"{float(scale[0]):g}-{float(scale[1]):g}") + ")")
    elif proto == "item command" and scale is not None:
        label = ("scored by your command (item ids in, a score on the metric's scale, "
                 f"{float(scale[0]):g}-{float(scale[1]):g}, out)")
    return label


#: a run's ``protocol`` in results.json and ``--json`` when it asked a bank folder's logged
#: requests (stored as ``"leaderboard"``, the log-likelihood protocol of the shipped banks)
SOURCE_PROTOCOL = "source models"


def protocol_value(protocol: str | None, bank_ref=None) -> str | None:
    """A run's ``protocol`` as results.json and ``--json`` write it: the stored one, except
    :data:`SOURCE_PROTOCOL` for a bank folder's logged requests (not a leaderboard's)."""
    if protocol == "leaderboard" and _is_folder(bank_ref):
        return SOURCE_PROTOCOL
    return protocol


def protocol_name(protocol: str | None, bank_ref=None) -> str:
    """A run's protocol in one word or a few (the tables of ``atlas evaluate`` and ``atlas
    runs``): the stored protocol, except that a bank folder's logged requests are the source
    models' ("as the source models (mc2)", with the folder's metric; "your command, as the
    source models (mc2)" when a command was sent them), not a leaderboard's."""
    proto = protocol or "approximate"
    if proto not in ("leaderboard", SOURCE_PROTOCOL, "request command") \
            or not _is_folder(bank_ref):
        return proto
    folder = _stored_folder(bank_ref)
    metric = None if folder is None else (folder.manifest.get("source") or {}).get("metric")
    return ("your command, as the source models" if proto == "request command"
            else "as the source models") + (f" ({metric})" if metric else "")


#: how an item-scored protocol reads on a graded / gpcm bank
ORDINAL_LABELS = {"item command": "rated by your command (item ids in, a rating on each "
                                  "item's scale out)",
                  "recorded": "recorded ratings (by item id)"}


def _is_folder(bank_ref) -> bool:
    """Whether a stored bank reference names a bank folder (:class:`BankRef`'s ``dir``)."""
    from ..catalogue.bankref import BankRef

    try:
        return bool(bank_ref) and BankRef.parse(bank_ref).kind == "dir"
    except Exception:  # noqa: BLE001 - a reference no longer parsed: a shipped bank's words
        return False


def _stored_folder(bank_ref):
    """The bank folder a stored bank reference names, or None (another kind of bank, or a
    folder no longer readable: the page then goes by the words and answers alone)."""
    from ..catalogue.bankref import BankRef

    if not _is_folder(bank_ref):
        return None
    try:
        return BankRef.parse(bank_ref).folder()
    except Exception:  # noqa: BLE001 - a folder no longer readable
        return None


def _folder_continuous(bank_ref) -> bool:
    """Whether a stored bank reference names a bank folder whose items are scored on a
    continuum (:func:`~atlascat.bankdir.predict.continuous_scores`)."""
    from ..bankdir.predict import continuous_scores

    folder = _stored_folder(bank_ref)
    return folder is not None and bool(continuous_scores(folder))


def _folder_identity(bank_ref) -> dict:
    """A bank folder's benchmark, population (:data:`SOURCE`), metric and scale
    (:func:`~atlascat.bankdir.predict.folder_words`), for the page of a run that has no
    prediction (not finished): its words and units are the folder's."""
    from ..bankdir.predict import folder_words

    folder = _stored_folder(bank_ref)
    if folder is None:  # no longer readable: its name alone
        return {"benchmark": _bank_title(bank_ref), "population": SOURCE}
    return folder_words(folder)


def benchmark_of(prediction, bank_ref) -> str:
    """The benchmark a run measured, by name: its prediction's ``benchmark``, else the title of
    its stored bank reference (never a path)."""
    return (prediction or {}).get("benchmark") or _bank_title(bank_ref)


def _bank_title(bank_ref) -> str:
    """The benchmark's name of a stored bank reference (:attr:`BankRef.title`), never a path."""
    from ..catalogue.bankref import BankRef

    if not bank_ref:
        return "bank"
    try:
        return BankRef.parse(bank_ref).title
    except Exception:  # noqa: BLE001 - a reference no longer parsed: its last part
        return str(bank_ref).replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


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
        from .asking import outputs_from_text as _outputs_from_text

        from .subjects.cmdrequests import reply_outputs

        ir = build_item_requests(bank, item_id)
        sent = reply_outputs(ir, answer)         # a command's reply to the requests
        c = ir.choice(sent if sent is not None else _outputs_from_text(ir, answer))
    except Exception:  # noqa: BLE001 - a page without the detail is still a page
        return ""
    if c["kind"] == "generation":
        return (f"answered <b>{_e(c['extracted'])}</b> (gold <b>{_e(c['gold'])}</b>)"
                f"<details><summary>generation</summary><pre>{_e(c['text'][:2000])}</pre>"
                "</details>")
    opts, chosen, gold = c["options"], c["chosen"], c["gold"]
    if c["rule"] == "partial":  # WinoGrande: the options are the fillers that end the contexts
        fill = _bank_choices(bank, item_id, len(opts)) or \
            _fillers([r.context for r in ir.requests[:len(opts)]])
        opts = [f"{f} ... {_short(t, 40)}" for f, t in zip(fill, opts)]
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


def _meta_text(meta, item_id, column: str) -> str:
    """The item's ``column`` from the bank's content as text; "" when the bank has no such
    column (a bank file whose extra columns are other notes) or the cell is empty."""
    if column not in meta.columns:
        return ""
    value = meta.loc[item_id, column]
    return "" if value is None or (isinstance(value, float) and value != value) else str(value)


def _bank_choices(bank, item_id, n: int) -> list[str] | None:
    """The item's option texts from the bank's content (``choices``), when it has ``n``."""
    meta = getattr(bank, "metadata", None)
    if meta is None or "choices" not in meta.columns or item_id not in meta.index:
        return None
    value = meta.loc[item_id, "choices"]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    value = [str(v) for v in value] if value is not None else []
    return value if len(value) == n else None


def _fillers(contexts: list[str]) -> list[str]:
    """WinoGrande's options as read from their requests: each context is the shared few-shot
    prefix and sentence start, then the option; the shared part is cut at its last whitespace
    (two options may begin alike, "Sarah" / "Samuel")."""
    if not contexts:
        return []
    prefix = os.path.commonprefix(contexts)
    cut = max(prefix.rfind(" "), prefix.rfind("\n")) + 1
    return [c[cut:].strip() or c[-40:] for c in contexts]


def _ordinal(p: float) -> str:
    n = int(round(p))
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def scale_words(lb) -> str:
    """The scale a prediction reads on: "in percent (0-100)", or the metric's own (an ordinal
    bank's: the rating scale its items share)."""
    if lb.get("scale"):
        own = "the rating scale" if lb.get("ratings") else "the metric's own scale"
        return f"on {own} ({lb['scale'][0]:g}-{lb['scale'][1]:g})"
    return "in percent (0-100)"


def describe_prediction(lb, *, short: bool = False) -> str:
    """The one way a predicted score is written (CLI, HTML report, ``atlas runs``).

    ``lb``: ``{score, lo, hi, percentile, population, ...}`` on the 0-1 scale, shown in
    percent, or on a metric's own ``scale`` (low, high), shown as it is
    (``ScorePrediction.to_dict()`` or a run's ``prediction`` entry), or ``{note}``. Long:
    "71.9% (95% interval 68.5-75.3%), 88th percentile of the leaderboard's models" (of the
    source models for a bank folder's, :func:`population_of`); ``short``: "71.9% (68.5-75.3)".
    A run not done (``partial``, :func:`~atlascat.live.service.predict_run`) says so after it:
    "..., interrupted after 31 items" (alone when it has no prediction yet).
    """
    after = f", {progress_words(lb)}" if lb.get("partial") else ""
    if lb.get("score") is None:
        if short and after:
            return progress_words(lb)
        return f"not available ({lb.get('note', 'no score link')}){after}"
    from ..scorelink.prediction import score_text

    scale = lb.get("scale") or None
    k, pct = (1.0, "") if scale else (100.0, "%")   # a metric's own scale, or 0-1

    def num(key):   # the one digits rule, by the scale's width
        return score_text(k * lb[key], scale)

    text = f"{num('score')}{pct}"
    has_interval = lb.get("lo") is not None and lb.get("hi") is not None
    if short:
        return text + (f" ({num('lo')}-{num('hi')})" if has_interval else "") + after
    if has_interval:
        text += f" (95% interval {num('lo')}-{num('hi')}{pct})"
    if lb.get("percentile") is not None:
        text += f", {_ordinal(lb['percentile'])} percentile of {population_of(lb)}"
    return text + after


def progress_words(lb) -> str:
    """How far a run that is not done got: "interrupted after 31 items", "stopped by an error
    after 31 items", "running, 31 items so far"."""
    items, state = (f"{lb.get('answered', 0)} item{'' if lb.get('answered') == 1 else 's'}",
                    lb.get("state") or "interrupted")
    return {"running": f"running, {items} so far", "error": f"stopped by an error after "
            f"{items}"}.get(state, f"{state} after {items}")


def describe_method(lb) -> str:
    """How a benchmark predictor's score was made (CLI and HTML report): the design-based
    estimate alone for a model unlike the source models, else pooled."""
    if lb.get("method") == "design":
        return "the design-based estimate alone: the model is unlike the source models"
    return "design-based estimate pooled with the model prediction calibrated on the source models"


def _summary_rows(info, leaderboard, suite, continuous: bool = False,
                  ordinal: bool = False) -> list[tuple[str, str]]:
    """The quantities a run reports, each once with its one interval: a bank run's predicted
    score (:func:`score_name`), theta and the model-based score (a mean score when the scores
    are ``continuous`` or on a metric's own scale, a mean rating for ``ordinal`` items, else
    the accuracy); a suite run's predicted average (its benchmarks are in the suite table; a
    suite has no theta)."""
    theta, se = info["theta"], info["se"]
    if suite is not None:
        avg = suite.get("average")
        rows = [("predicted average", describe_prediction(avg) if avg else "no answered item yet")]
        if suite.get("se_points") is not None:
            rows.append(("SE of the average", f"{suite['se_points']:.2f} points"))
        return rows
    lb = leaderboard or {}
    rows = []
    if "score" in lb:
        rows.append((score_name(lb), describe_prediction(lb)))
        if lb.get("metric"):
            rows.append(("metric", f"{lb['metric']}, {scale_words(lb)}"))
        if lb.get("design"):
            rows.append(("how", describe_method(lb)))
    elif lb.get("note"):
        rows.append((score_name(lb), describe_prediction(lb)))
    ci = (f"[{theta - 1.96 * se:.3f}, {theta + 1.96 * se:.3f}]"
          if theta is not None and se is not None else "-")
    rows.append(("theta (95% CI)", f"{_fmt(theta)} {ci}"))
    what = model_based_words(info.get("kind") == "predictor")
    if lb.get("scale"):  # a mean score on the metric's own scale, not a share
        own = "mean rating" if ordinal else "mean score"
        rows.append((f"model-based {own} ({what}, on {_own_scale(ordinal)})",
                     _on_scale(info["model_based_score"], lb["scale"])))
    else:
        mod = info["model_based_score"]
        own = ("mean rating, as a share of each item's scale" if ordinal else
               "mean score" if continuous else "accuracy")
        rows.append((f"model-based {own} ({what})",
                     _fmt(mod, ".1%") if mod is not None else "-"))
    return rows


def model_based_words(predictor: bool) -> str:
    """What a run's model-based score is, as every reader words it: the mean score expected
    over the bank at theta (an adaptive test), or the benchmark predictor's model part (its IRT
    and ridge prediction of the mean over all the benchmark's items)."""
    return ("the predictor's model part, over all the benchmark's items" if predictor
            else "expected over the bank at theta")


def _own_scale(ordinal: bool) -> str:
    """The scale a mean score is on: the rating scale of ordinal items, else the metric's."""
    return "the rating scale" if ordinal else "the metric's own scale"


def _on_scale(value, scale) -> str:
    """A 0-1 value on a metric's own ``scale`` (low, high): low + (high - low) x value, to the
    one digits rule (:func:`~atlascat.scorelink.prediction.score_digits`)."""
    if value is None:
        return "-"
    from ..scorelink.prediction import level

    return level(float(value), scale)


def _observed_rows(info, ordinal: bool, scale, continuous: bool,
                   word: str = "asked") -> list[tuple[str, str]]:
    """The observed score and the items used: right / asked for right / wrong answers, the
    mean score for scores in [0, 1] (on the metric's own ``scale`` when it has one: the mean
    rating of ordinal items on one rating scale), each rating's share of its scale for
    ordinal items on several; ``word`` "scored" where some items asked got no score."""
    n = int(info["n_items"])
    mean = info["score_sum"] / n if n else None
    if ordinal and not scale:   # ratings on several scales: each one's share of its own
        label = ("observed share of the scale (each rating's (r - lowest) / (highest - "
                 "lowest))")
    elif scale:
        own = "mean rating" if ordinal else "mean score"
        return [(f"observed {own} (over the items {word}, on {_own_scale(ordinal)})",
                 _on_scale(mean, scale)), ("items used", f"{n}")]
    elif continuous:
        label = f"observed mean score (over the items {word})"
    else:
        label = f"observed accuracy (right / {word})"
    used = f"{n}" if ordinal or continuous else f"{n} ({float(info['score_sum']):.4g} correct)"
    return [(label, _fmt(mean, ".1%") if n else "-"), ("items used", used)]


def _test_row(info, cfg, suite) -> tuple[str, str]:
    """How the test was run: a bank's CAT settings, or a suite's budget and rounds."""
    if suite is not None:
        target = cfg.get("target_se")
        stop = (f"stop at an SE of {target} points or {cfg.get('max_items')} items"
                if target else f"{cfg.get('max_items')} items (the budget)")
        return ("test", f"suite {suite.get('suite') or cfg.get('suite')}: {stop}, at least "
                        f"{cfg.get('min_items')}, rounds of {cfg.get('batch_size')}, seed "
                        f"{info['seed']}")
    if info["kind"] == "predictor":
        return ("test", f"benchmark predictor: {cfg.get('max_items')} items drawn one after "
                        "another at random (weighted to the items the IRT model is unsure "
                        f"about), seed {info['seed']}")
    stop = (f"SE stop {cfg['se_stop']}" if cfg.get("se_stop") is not None
            else "score-precision stop")
    least, most, n_bank = cfg.get("min_items"), cfg.get("max_items"), info.get("n_bank_items")
    if most is not None and n_bank and int(most) >= int(n_bank):
        most = f"{n_bank} (the whole bank)"
    items = f"{least}-{most}"
    if least is not None and n_bank and int(least) >= int(n_bank):   # no range: all of them
        items = f"all {n_bank} (the whole bank; at least {least} asked for)"
    return ("CAT", f"{stop}, items {items}, "
                   f"{cfg.get('selection')} (randomesque {cfg.get('randomesque')}), "
                   f"seed {info['seed']}")


def _endpoint_kind(subj, bank, asked) -> str | None:
    """What the endpoint was asked: for a subject asked the bank's requests (kind
    ``loglikelihood``), the requests of the items ``asked`` as their rules make them
    (:func:`~atlascat.content.requests.request_kind`: generation for an f1 or exact-match
    task); any other subject's kind (chat, item, ...) as it is."""
    from ..content.requests import request_kind

    kind = subj.get("kind")
    meta = getattr(bank, "metadata", None)
    if kind != "loglikelihood" or meta is None or "rule" not in meta.columns:
        return kind
    ids = [i for i in dict.fromkeys(asked) if i in meta.index] or list(meta.index)
    return request_kind(meta.loc[ids]) or kind


def _who_scores(bank) -> str:
    """Who scored a command's answers to the requests: atlas by each item's rule, or the
    command by a logged metric atlas cannot compute."""
    from .subjects.cmdrequests import opaque_metrics

    meta = getattr(bank, "metadata", None)
    rules = [] if meta is None or "rule" not in meta.columns else meta["rule"].dropna()
    opaque = opaque_metrics(bank)
    mine = "your command answers the outputs, atlas scores them by each item's rule"
    return mine if not opaque else (
        f"your command answers them and scores items by {', '.join(opaque)}"
        + ("" if len(opaque) == len(set(map(str, rules))) else f" ({mine} for the others)"))


def _asked_rows(subj, prm, proto, bank, items=()) -> list[tuple[str, str]]:
    """What answered and how the items were asked: a simulated or replayed run sent nothing (its
    items are still named with their shots and scoring), a live log-likelihood run sent the
    bank's requests (the endpoint kind: what the asked ``items`` needed, log-likelihoods or
    generations), a chat run its chat prompt."""
    from ..content.requests import describe_requests

    asked = describe_requests(getattr(bank, "metadata", None))
    kind = subj.get("type")
    if kind == "simulate":
        return [("endpoint kind", "none: simulated (answers drawn from the bank's IRT model)"),
                ("requests", "none sent" + (f"; the items: {asked}" if asked else ""))]
    if kind == "replay":
        return [("endpoint kind", f"none: replay (recorded answers, {subj.get('matrix')})"),
                ("requests", "none sent" + (f"; recorded as {asked}" if asked else ""))]
    if kind == "cmd" and subj.get("sends") == "requests":   # the requests, to the program
        return [("endpoint kind", "the items' requests, to your command (a JSON line each)"),
                ("requests", (asked or "the bank's requests") + "; " + _who_scores(bank))]
    if kind == "cmd":      # the items' ids went to the user's program, which asks them
        return [("endpoint kind", "item ids, to your command"),
                ("requests", "none sent by atlas; your command asks each item"
                 + (f" (the source models were asked {asked})" if asked else ""))]
    if proto == "approximate":
        return [("endpoint kind", subj.get("kind")),
                ("prompt", f"{prm.get('style')} chat prompt, max_tokens "
                           f"{prm.get('max_tokens') or 'auto'}, temperature "
                           f"{prm.get('temperature')}")]
    return [("endpoint kind", _endpoint_kind(subj, bank, items))] + (
        [("requests", asked)] if asked else [])


def _warnings(leaderboard, suite) -> list[str]:
    if suite is not None:
        return [f"{b['name']}: {b['warning']}" for b in suite.get("benchmarks") or []
                if b.get("warning")]
    lb = leaderboard or {}
    return [lb["warning"]] if lb.get("warning") else []


def _predictor_path(info, scale=None):
    """A benchmark predictor run's prediction after each answer (its stored session:
    :meth:`atlascat.predict.session.PredictSession.trajectory`; on the metric's ``scale``
    (low, high) when given, else 0-1), or None for another run."""
    if info.get("kind") != "predictor":
        return None
    from dataclasses import replace

    from .predictor_session import PredictorLiveSession

    try:
        path = PredictorLiveSession.from_dict(info.get("session")).inner.trajectory()
    except Exception:  # noqa: BLE001 - a damaged snapshot: the page shows theta instead
        return None
    if scale is None:
        return path
    lo, hi = (float(v) for v in scale)
    return [replace(q, score=lo + (hi - lo) * q.score, lower=lo + (hi - lo) * q.lower,
                    upper=lo + (hi - lo) * q.upper) for q in path]


def _step_path(info, steps, scale=None) -> dict | None:
    """A benchmark predictor run's prediction after each answered step, by step number (from
    0): after the step's round, whose answers come in together (:func:`_predictor_path`)."""
    path = _predictor_path(info, scale)
    if path is None:
        return None
    answered = steps[steps["status"] == "answered"]
    k = answered["step"].astype(int).tolist()
    if "round" in answered:   # each step: the prediction after its round
        ends = answered.dropna(subset=["round"]).groupby("round")["step"].max().to_dict()
        path = [path[int(ends.get(r, j))] for j, r in zip(k, answered["round"])]
    return dict(zip(k, path))


def predicted_steps(info, steps, scale=None) -> dict | None:
    """A benchmark predictor run's predicted score and 95% interval after each answered step
    (step number from 0 -> ("39.3", "26.7-47.0")), as its page and ``atlas runs --run`` print
    them: in percent, or on the metric's ``scale`` (low, high); None for another run."""
    return _step_texts(_step_path(info, steps, scale), scale)


def _step_texts(path, scale) -> dict | None:
    from ..scorelink.prediction import score_text

    unit = 1.0 if scale is not None else 100.0

    def num(v):
        return score_text(unit * v, scale)
    return None if path is None else {
        k: (num(q.score), f"{num(q.lower)}-{num(q.upper)}") for k, q in path.items()}


def _skipped_rows(steps) -> list:
    from .refusals import NO_RECORDED_ANSWER, refused_line, refused_summary

    n_refused, first = refused_summary(steps)
    skipped = int((steps["status"] == "skipped").sum())
    blank = int(((steps["status"] == "skipped") & (steps["answer"] == NO_RECORDED_ANSWER)).sum())
    k = skipped - n_refused - blank   # null scores (a judge's), the refused and blanks aside
    asked = skipped + int((steps["status"] == "answered").sum())   # as RunResult.n_asked
    refused = refused_line(n_refused, first)
    rows = [("items asked", f"{asked} (scored and not)")] if skipped else []
    if k:
        rows.append(("left out", f"{k} item{'s' if k != 1 else ''} got no score (null), left "
                     "out unscored"))
    if blank:
        rows.append(("no recorded answer", f"{blank} item{'s' if blank != 1 else ''} (blanks "
                     "of the matrix), skipped as a simulation skips them"))
    return rows + ([("refused", refused)] if refused else [])


def render_run_report(store, run_id: str, bank=None, leaderboard=None, *,
                      suite: dict | None = None, sections: str = "") -> str:
    """The HTML text of a run's page. ``bank`` (optional) adds each item's question, its
    options and key; ``leaderboard`` (``atlas evaluate``'s {score, lo, hi, percentile,
    warning} or {note}) the predicted leaderboard score that heads the page. ``suite`` (a
    suite run's :func:`atlascat.live.suite_run.suite_result`) makes it a suite page: the
    predicted average heads it, the trajectory is the average, no theta is shown; ``sections``
    (HTML) goes after the summary (the suite table)."""
    from .subjects import is_ordinal

    info = store.get_run(run_id)
    if suite is None and "population" not in (leaderboard or {}) \
            and _is_folder(info.get("bank_ref")):   # unfinished: no prediction, its words
        leaderboard = {**(leaderboard or {}), **_folder_identity(info["bank_ref"])}
    steps = store.steps(run_id)
    answered = steps[steps["status"] == "answered"]
    meta = getattr(bank, "metadata", None)
    subj, cfg, prm = info["subject"], info["config"], info["prompt"]
    by_id = subj.get("kind") == "item"     # scored by id: no prompt was sent
    replayed = subj.get("type") == "replay"   # scores from a matrix, not a model's answers
    n = int(info["n_items"])
    lat = answered["latency_s"].astype(float)
    proto = info.get("protocol") or "approximate"
    own = (leaderboard or {}).get("scale") if suite is None else None   # a metric's range
    label = protocol_label(proto, bank, folder=_is_folder(info.get("bank_ref")), scale=own)
    ordinal = is_ordinal(bank)          # scores are ratings on the items' own scales
    scores = answered["score"].astype(float)
    continuous = not ordinal and (bool(((scores > 0) & (scores < 1)).any())   # in [0, 1]
                                  or _folder_continuous(info.get("bank_ref")))
    tokens = steps["prompt_tokens"].notna().any()
    summary = _summary_rows(info, leaderboard, suite, continuous, ordinal)
    word = "scored" if (steps["status"] == "skipped").any() else "asked"   # 22/31 scored
    warnings = _warnings(leaderboard, suite)
    kv = [
        ("model", subj.get("model")),
        ("protocol", label),
        ("items per round", info.get("batch_size") or 1),
        ("endpoint", subj.get("base_url", subj.get("command", subj.get("type")))),
        *_asked_rows(subj, prm, proto, bank, steps["item_id"].astype(str).tolist()),
        ("bank", f"{info['bank_ref'] or '(in memory)'} ({info['n_bank_items']} items)"),
        ("status", info.get("state", info["status"])
         + (f" ({info['stop_reason']})" if info["stop_reason"] else "")),
        *_skipped_rows(steps),
        *summary[1:],  # the first is the page's headline
        *_observed_rows(info, ordinal, own, continuous, word),
        *([("ratings", (leaderboard or {})["unseen_note"])]   # levels the items never had
          if (leaderboard or {}).get("unseen_note") else []),
        ("tokens (prompt / completion)", f"{info['prompt_tokens']} / {info['completion_tokens']}"
         + (f" of a budget of {info['token_budget']}" if info.get("token_budget") else "")
         if tokens or info["prompt_tokens"] else "not reported by the subject"),
        ("latency total / median per item",
         f"{info['latency_s']:.2f} s / {(float(np.median(lat)) if len(lat) else 0.0):.3f} s"),
        _test_row(info, cfg, suite),
        ("started / updated", f"{_time(info['created_at'])} / {_time(info['updated_at'])}"),
    ]
    if info["error"]:
        kv.append(("last error", info["error"]))
    warn_html = "".join(f"<p class='bad'>warning: {_e(w)}</p>" for w in warnings)
    own_scale = (leaderboard or {}).get("scale")
    path = _step_path(info, steps, own_scale) if suite is None else None
    said = _step_texts(path, own_scale) or {}
    path = None if path is None else list(path.values())   # the answered steps in order
    if suite is not None:
        est, est_se, scale, spec = "average %", "SE (points)", 100.0, ".1f"
    elif path is not None:
        est, est_se, scale, spec = ("predicted" if (leaderboard or {}).get("scale") else
                                    "predicted %"), "95% interval", 1.0, ".1f"
    else:
        est, est_se, scale, spec = "theta", "SE", 1.0, ".3f"
    texts = {i: tuple(_meta_text(meta, i, c) for c in ("question", "answer"))
             if meta is not None and i in meta.index else ("", "") for i in steps["item_id"]}
    has_q, has_key = (any(t[k] for t in texts.values()) for k in (0, 1))  # else no column
    rows = []
    for rec in steps.to_dict("records"):
        rec = {k: _val(v) for k, v in rec.items()}
        q, key = texts[rec["item_id"]]
        # a replayed score's outputs are made to score so: no option was chosen, no text said
        choice = _choice_html(bank, rec["item_id"], rec["answer"]) \
            if proto != "approximate" and not replayed else ""
        score = rec["score"]
        mark = (f"<span class='pill'>{'no score' if rec['status'] == 'skipped' else 'pending'}"
                "</span>" if score is None else
                f"{float(score):g}" if ordinal else      # a rating, on its own scale
                _on_scale(score, own) if own else
                f"{float(score):.2f}" if continuous else      # as the step lines print it
                "<span class='ok'>&#10003;</span>" if score == 1 else
                "<span class='bad'>&#10007;</span>")
        ans = rec["answer"] if rec["answer"] is not None else ""
        chars = rec.get("answer_chars")    # the answer's length; more than stored: cut
        if replayed and score is not None:   # no text to show, nothing cut of it
            what = ("rating", "ratings") if ordinal else ("score", "scores")
            ans, chars = (f"recorded {what[0]}, replayed (the matrix holds {what[1]}, not the "
                          "model's text)"), None
        if chars is not None and int(chars) > len(rec["answer"] or ""):
            ans = (f"{ans[:200]} [stored cut: {int(chars)} characters, sha256 "
                   f"{str(rec.get('answer_sha256'))[:16]}...]")
        toks = "" if rec["prompt_tokens"] is None else \
            f"{int(rec['prompt_tokens'])}/{int(rec['completion_tokens'] or 0)}"
        est_v = None if rec["theta"] is None else scale * rec["theta"]
        # a suite's SE in points to 2 decimals, as its step lines and "SE of the average"
        se_v = None if rec["se"] is None else _fmt(scale * rec["se"],
                                                         ".2f" if suite is not None else spec)
        if path is not None:  # the predictor: its predicted score after this answer
            est_v, se_v = said.get(int(rec["step"]), (None, "-")) if score is not None \
                else (None, "-")
        rows.append(
            f"<tr><td class='num'>{int(rec['step']) + 1}</td><td>{_e(rec['item_id'])}</td>"
            + (f"<td>{_e(q[:160] + ('...' if len(q) > 160 else ''))}</td>" if has_q else "")
            + (f"<td>{choice}</td>" if choice else
               f"<td><pre>{_e(ans if '[stored cut:' in ans else ans[:200] + ('...' if len(ans) > 200 else ''))}</pre></td>")
            + (f"<td>{_e(key)}</td>" if has_key else "") + f"<td>{mark}</td>"
            f"<td class='num'>{est_v if isinstance(est_v, str) else _fmt(est_v, spec)}</td><td class='num'>{_e(se_v or '-')}</td>"
            f"<td class='num'>{_fmt(rec['latency_s'])}</td>"
            + (f"<td class='num'>{toks}</td>" if tokens else "") +
            f"<td>{'cache' if rec['cached'] == 1 else ''}</td></tr>")
    table = ("<table><thead><tr><th>#</th><th>item</th>" + ("<th>question</th>" if has_q else "")
             + "<th>answer</th>" + ("<th>key</th>" if has_key else "") +
             f"<th>{'rating' if ordinal else 'score'}</th><th>{_e(est)}</th><th>{_e(est_se)}</th><th>latency s</th>"
             + ("<th>tokens</th>" if tokens else "") + "<th></th>"
             "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    if suite is not None:
        traj = trajectory_svg(answered["theta"].tolist(), answered["se"].tolist(),
                               label="average", axis="predicted average (%)", scale=100.0,
                               limits=(0.0, 100.0))
    elif path is not None:
        lb = leaderboard or {}
        traj = trajectory_svg([q.score for q in path], None, label="predicted score",
                               axis=score_name(lb) + ("" if lb.get("scale") else " (%)"),
                               scale=1.0 if lb.get("scale") else 100.0,
                               band=([q.lower for q in path], [q.upper for q in path]),
                               limits=lb.get("scale") or (0.0, 100.0),
                               digits=1)   # as the step lines print a predicted score
    else:
        traj = trajectory_svg(answered["theta"].tolist(), answered["se"].tolist())
    headline = f"{summary[0][0]}: {summary[0][1]}"
    shown = {"cat" if suite is None else "suite": cfg, "prompt": prm, "subject": subj}
    if info["kind"] == "predictor":   # the adaptive test's settings do not apply: its own
        shown.pop("cat")
        shown["predictor"] = {"max_items": cfg.get("max_items"), "seed": info["seed"]}
    if by_id or proto != "approximate":  # the chat prompt's settings apply to chat only
        shown.pop("prompt")
    if subj.get("type") in ("simulate", "replay"):  # no endpoint: no endpoint kind
        shown["subject"] = {k: v for k, v in subj.items() if k != "kind"}
    settings = _e(json.dumps(shown, indent=1, sort_keys=True))
    asked = ("items drawn at random" if (leaderboard or {}).get("design") else
             "adaptively chosen items")
    note = ("The trajectory is the predicted average (percent) and its SE after each round."
            if suite is not None else
            "Model-based mean rating = the rating expected over the bank's items at theta; "
            f"observed mean rating = the mean rating over the {asked}"
            + (", both on the rating scale." if own else
               ", both as shares of each item's scale ((r - lowest) / (highest - lowest)).")
            if ordinal else
            "Model-based mean score = the expected score over the bank's items at theta; "
            "observed mean score = the mean over the items asked; both on the metric's own "
            "scale." if own else
            "Model-based mean score = the expected score over the bank's items at theta; "
            f"observed mean score = the mean over the {asked}." if continuous else
            "Model-based accuracy = mean probability correct over the bank's items at theta; "
            f"observed accuracy = right / {word} over the {asked}.")
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>ATLAS run {_e(run_id)} - {_e(info['model'])}</title><style>{_CSS}</style></head><body>"
        f"<h1>ATLAS live run <code>{_e(run_id)}</code></h1>"
        f"<div class='muted'>{_e(info['model'])} on {_e(_bank_title(info['bank_ref']))} "
        "&middot; "
        f"protocol: {_e(label)}</div>"
        f"<p class='big'>{_e(headline)}<span class='muted'> &middot; {n} items</span></p>"
        "<table class='kv'>" + "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in kv)
        + "</table>" + warn_html + sections +
        f"<h2>Trajectory</h2>{traj}"
        f"<h2>Items</h2>{table}"
        f"<h2>Settings</h2><pre>{settings}</pre>"
        f"<p class='muted'>Generated by ATLAS. {note}</p></body></html>")


def write_run_report(store, run_id: str, path, bank=None, leaderboard=None) -> Path:
    """Write :func:`render_run_report` to ``path`` (folders created); returns the path."""
    from ..validation import check_page_output

    path = check_page_output(path, option=None, inputs={"run database": store.path})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_run_report(store, run_id, bank=bank, leaderboard=leaderboard),
                    encoding="utf-8")
    return path
