"""A command asked a bank's requests (``cmd:COMMAND`` on a bank that holds them: a folder built
from sample logs, a shipped content bank): what it reads and prints, and how its outputs are
scored.

One JSON object a line on its standard input, per item::

    {"item_id": "17", "request_type": "loglikelihood", "rule": "acc_norm", "scored_by": "atlas",
     "arguments": [[context, continuation], ...]}
    {"item_id": "4", "request_type": "generate_until", "rule": "exact_match", "scored_by": "atlas",
     "arguments": [[context, {"until": ["\\n"], "max_gen_toks": 32}]]}

``arguments`` are the item's requests as the harness sent them (lm-evaluation-harness's
``Instance.args``, in order; a logged item's ``gen_args_k``, with every logged generation
setting: ``do_sample``, ``temperature``, ...): the command answers what a
harness model's ``loglikelihood`` / ``generate_until`` returns, one output per request::

    {"item_id": "17", "resps": [-12.5, -9.75, ...]}      (or [[-12.5, false], ...], lm-eval's pairs)
    {"item_id": "4", "resps": [" 42\\nQuestion: ..."]}    (the raw generation, not cut)

and atlas scores them by the item's rule (:func:`atlascat.content.requests.score_outputs`:
``acc_norm``, ``acc``, ``mc2``, ``exact_match`` cut at the item's stop strings, ``f1``, ...),
the rule that reproduces the logged models' scores from their logged outputs. An item whose
logged metric atlas cannot compute (rule ``metric:<name>``: ROUGE, BLEU per sample, a judge)
is sent with ``"scored_by": "command"``, ``"metric": "<name>"`` and, for a generation, the
logged ``"target"`` (a list for a task with several) it is scored against: the command prints
``{"item_id", "score"}``, the metric as the harness computes it (on the folder's scale). A
score for an item atlas scores, or outputs that are not one per request, stop the run with one
line (the answers so far are kept, ``--resume`` continues it).
"""
from __future__ import annotations

import json
import math

from ...content.requests import METRIC_RULE_PREFIX, build_item_requests
from ...errors import LiveRunError
from .base import reply_records

__all__ = ["asks_requests", "request_line", "parse_outputs", "opaque_metric",
           "opaque_metrics", "reply_outputs", "build_item_requests"]


def asks_requests(bank) -> bool:
    """Whether a command is asked ``bank``'s requests (its items have a ``rule`` and a
    ``context``), rather than item ids alone (a folder built from a response matrix)."""
    meta = getattr(bank, "metadata", None)
    return meta is not None and {"rule", "context"} <= {str(c) for c in meta.columns}


def opaque_metric(rule: str) -> str | None:
    """The metric's name when ``rule`` is one atlas cannot compute (``metric:<name>``)."""
    rule = str(rule)
    return rule[len(METRIC_RULE_PREFIX):] if rule.startswith(METRIC_RULE_PREFIX) else None


def opaque_metrics(bank) -> list[str]:
    """The logged metrics atlas cannot compute among ``bank``'s items (sorted, each once): the
    ones a command scores itself."""
    meta = getattr(bank, "metadata", None)
    if meta is None or "rule" not in meta.columns:
        return []
    return sorted({m for m in map(opaque_metric, meta["rule"].dropna()) if m})


def request_line(ir) -> dict:
    """The JSON object sent for one item (:class:`~atlascat.content.requests.ItemRequests`)."""
    metric = opaque_metric(ir.rule)
    out = {"item_id": str(ir.item_id), "request_type": ir.kind, "rule": str(ir.rule),
           "scored_by": "command" if metric else "atlas"}
    if metric:
        out["metric"] = metric
        if ir.kind == "generate_until":            # the reference the metric compares with
            out["target"] = ir.gold if isinstance(ir.gold, str) else list(ir.gold)
    out["arguments"] = [[r.context, r.continuation] if r.kind == "loglikelihood" else
                        [r.context, {"until": list(r.until), "max_gen_toks": int(r.max_gen_toks),
                                     **r.generation_settings()}]
                        for r in ir.requests]
    return out


def _outputs(ir, resps, who: str) -> list:
    """One output per request from a reply's ``resps``: a log-likelihood (a number, or lm-eval's
    ``[log-likelihood, is_greedy]`` pair) or a generated string."""
    n, item = len(ir.requests), ir.item_id
    gen = ir.kind == "generate_until"
    what = "generated string" if gen else "log-likelihood"
    if not isinstance(resps, list) or len(resps) != n:
        got = len(resps) if isinstance(resps, list) else type(resps).__name__
        raise LiveRunError(f"{who}: item {item!r} has {n} request(s) and its \"resps\" holds "
                           f"{got}: print one {what} per request, in order")
    out = []
    for v in resps:
        if isinstance(v, list) and len(v) in (1, 2):     # lm-eval's (ll, is_greedy), [text]
            v = v[0]
        ok = isinstance(v, str) if gen else (isinstance(v, (int, float))
                                             and not isinstance(v, bool))
        if not ok or (not gen and (math.isnan(v) or v == math.inf)):
            raise LiveRunError(f"{who}: item {item!r}: {json.dumps(v)[:60]} is not a {what}"
                               + ("" if gen else " (a finite number, or -Infinity)"))
        out.append(v)
    return out


def reply_outputs(ir, line: str):
    """The outputs in a stored reply line of a command (``{"item_id", "resps"}``), one per
    request as scored; None when the line holds none (a score the command printed)."""
    try:
        rec = json.loads(line)
    except (TypeError, ValueError):
        return None
    if not isinstance(rec, dict) or "resps" not in rec:
        return None
    return _outputs(ir, rec["resps"], "a stored reply")


def parse_outputs(irs, text: str, who: str, *, score_item=None,
                  whole_round: bool = True) -> list[tuple]:
    """(score, reply line) per item of ``irs`` from the command's JSON lines ``text``: the
    item's rule applied to its ``resps``; ``score_item(item_id, line)`` reads the score the
    command printed for an item scored by a metric atlas cannot compute. One clear
    :class:`LiveRunError` for a line that is not such an object, an item missing, repeated or
    not asked, a score printed where atlas scores, or log-likelihoods that are all equal over
    a round of several requests (a model that does not read the continuations; not checked
    when ``whole_round`` is False: a stored reply read again alone)."""
    want = {str(ir.item_id): ir for ir in irs}
    got, lls = {}, []
    for n, line, rec in reply_records(text, who, ("item_id",), "item_id and resps"):
        item = str(rec["item_id"])
        ir = want.get(item)
        if ir is None:
            raise LiveRunError(f"{who}: reply line {n} answers item {item!r}, which was not asked")
        if item in got:
            raise LiveRunError(f"{who}: item {item!r} is answered twice")
        metric = opaque_metric(ir.rule)
        if metric:
            if "score" not in rec:
                raise LiveRunError(f"{who}: item {item!r} is scored by the logs' metric "
                                   f"{metric!r}, which atlas cannot compute: print "
                                   '{"item_id": ..., "score": ...}, its score by that metric')
            got[item] = (score_item(item, line.strip()), line.strip())
            continue
        if "resps" not in rec:
            what = "one generated string" if ir.kind == "generate_until" else \
                "one log-likelihood per request"
            raise LiveRunError(
                f"{who}: item {item!r} is scored by {ir.rule} from the model's outputs, as the "
                f'logged models were: print {{"item_id": ..., "resps": [...]}} with {what} '
                f"({len(ir.requests)}), not a score")
        outputs = _outputs(ir, rec["resps"], who)
        if ir.kind != "generate_until":
            lls += outputs
        got[item] = (ir.score(outputs), line.strip())
    missing = [i for i in want if i not in got]
    if missing:
        raise LiveRunError(f"{who}: no reply for {len(missing)} of the {len(want)} item(s) asked "
                           f"(e.g. {missing[0]!r}); print one line per item_id read")
    if whole_round and len(lls) >= 2 and len(set(lls)) == 1:
        raise LiveRunError(f"{who} printed the same log-likelihood ({lls[0]}) for all "
                           f"{len(lls)} requests of the round: it is not reading the "
                           "continuations; refusing to score at chance")
    return [got[str(ir.item_id)] for ir in irs]
