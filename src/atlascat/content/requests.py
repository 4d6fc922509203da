"""The Open LLM Leaderboard's requests, rebuilt exactly, and the rules that score them.

The shipped banks were calibrated on Open LLM Leaderboard v1 answers, produced by
lm-evaluation-harness at commit ``b281b09`` with few-shot prompts and log-likelihood scoring
(``docs/protocol.md``; the reference is
``../shared/protocol/openllm_v1.md``). An item is measured on the bank's scale only if it is
asked the same way, so a live run sends the harness's requests:

- arc: context = the 25-shot longprompt (ends ``Question: q\nAnswer:``); one request
  ``" " + choice_text`` per choice; rule acc_norm.
- hellaswag: context = the 10-shot longprompt (ends with the preprocessed query); requests
  ``" " + preprocess(ending)``; acc_norm.
- mmlu: context = the 5-shot longprompt (starts with the subject's description line); requests
  ``" A"`` ... ``" D"``; acc.
- truthfulqa: context = ``QA_PROMPT + "\n\nQ: " + q + "\nA:"`` (0-shot); requests: the mc1
  targets, then the mc2 targets; mc1.
- winogrande: context = 5 shots + ``"\n\n" + sentence[:i]``, then the option (it differs per
  request); the continuation ``" " + sentence[i+1:].strip()`` is shared; partial.
- gsm8k: context = the 5-shot longprompt; one greedy generation until ``:``, ``Question:``,
  ``Question`` (256 new tokens at most); gsm8k_exact.

Rules (``MultipleChoiceTask.process_results`` and ``gsm8k.py`` at b281b09)
--------------------------------------------------------------------------
acc_norm     ``argmax(ll_j / len(choice_j)) == gold``; ``len`` counts Python characters of the
             choice text *before* the request adds its leading space (a HellaSwag choice that
             itself starts with a space keeps it); ties go to the lowest index.
acc          ``argmax(ll_j) == gold`` (lowest index on ties).
mc1          ``argmax`` over the first ``n_choices`` log-likelihoods (the mc1 targets) ``== 0``;
             the mc2 requests that follow are sent as the harness did but do not enter the 0/1
             score (the item matrices use mc1).
partial      WinoGrande's partial scoring: one log-likelihood per option (the option is in the
             context, the continuation is the shared rest of the sentence); ``argmax == gold``.
gsm8k_exact  the generation is cut before the first stop string; ``#### (-?[0-9.,]+)``, first
             match, stripped, commas removed; exact *string* equality with the gold answer
             extracted the same way (``"160."`` is not ``"160"``); no match is wrong.
gsm8k_flexible (banks built from sample logs of GSM8K's ``flexible-extract`` filter) the
             generation cut at the item's stops; the last match of
             ``(-?[$0-9.,]{2,})|(-?[0-9]+)``, stripped; then lm-eval 0.4's ``exact_match`` on
             GSM8K: ``,``, ``$`` and a final ``.`` removed, lower case, equal to the gold number.
exact_match  (banks built from sample logs, :mod:`atlascat.bankdir`) the harness's
             ``exact_match`` without a filter: the generation cut before the first of the
             item's own stop strings, stripped, equal to the stripped ``target``.
exact_match_raw  (sample logs whose 0/1 metric this reproduces better: the harness's
             ``exact_match`` on a task without a whitespace filter) the cut generation equal to
             ``target`` as it is, not stripped (``" 42"`` is not ``"42"``).
exact_match_norm  (sample logs whose 0/1 metric this reproduces better: SQuAD-style ``em``)
             the cut generation and ``target`` equal after the F1 rule's normalisation (lower
             case, ASCII punctuation deleted, the articles a / an / the dropped, whitespace
             collapsed).

Continuous rules (banks built from sample logs; the score is in [0, 1], not 0/1):

mc2          TruthfulQA's mc2 (lm-eval's ``truthfulqa_mc2`` ``process_results``): the true
             options come first (``mc2_true`` of them); ``sum_true exp(ll) / sum_all exp(ll)``.
f1           SQuAD / CoQA token F1 of the generation (cut before the item's stop strings)
             against ``target``: both normalised as SQuAD's ``normalize_answer`` (lower case,
             ASCII punctuation deleted, the articles a / an / the removed, whitespace
             collapsed), F1 of the token bags; 1 when both are empty.

A generation logged with several targets (a task's ``multiple_target``, TriviaQA's aliases:
``targets``) scores 1 when its rule gives any target a nonzero score, else 0, as the harness
does (its F1 is then 0/1 too).

A metric ATLAS cannot compute from a model's outputs (ROUGE, BLEU, a judge's rating) is kept
as the item's rule name prefixed ``metric:``; asking such an item live is refused with its name
(the folder is asked through ``--subject cmd:COMMAND``, a harness that scores it).

Request data travel in a bank's metadata (:data:`REQUEST_COLUMNS`, one row per item: the
context is stored once per item, not once per choice; a generation item may add its own stop
strings and token limit, :data:`GENERATION_COLUMNS`, else GSM8K's are used), written by
:func:`atlascat.content.items.attach_content` from :func:`atlascat.content.items.load_item_content`.
"""
from __future__ import annotations

import json
import math
import re
import string
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..errors import BankError, LiveRunError
from .parsing import parse_choices, parse_literal, to_list

__all__ = [
    "Request", "ItemRequests", "build_requests", "build_item_requests", "requests_from_record",
    "RULES", "REQUEST_COLUMNS", "QA_PROMPT", "GSM8K_UNTIL", "GSM8K_MAX_GEN_TOKS",
    "HarnessDoc", "harness_doc", "hellaswag_preprocess", "mmlu_description", "request_fields",
    "gsm8k_extract", "gsm8k_flexible_extract", "gsm8k_cut", "score_outputs", "chosen_index", "HARNESS_COMMIT",
    "GENERATION_RULES", "GENERATION_COLUMNS", "CONTINUOUS_RULES", "METRIC_RULE_PREFIX",
    "token_f1", "answer_tokens", "mc2_score", "LEADERBOARD_SHOTS", "describe_requests",
    "request_kind",
]

#: lm-evaluation-harness commit the Open LLM Leaderboard v1 ran
HARNESS_COMMIT = "b281b0921b636bc36ad05c0b0b0763bd6dd43463"
RULES = ("acc_norm", "acc", "mc1", "partial", "gsm8k_exact", "gsm8k_flexible", "exact_match",
         "exact_match_norm", "exact_match_raw", "mc2", "f1")
#: rules scored on a generation (one ``generate_until`` request)
GENERATION_RULES = ("gsm8k_exact", "gsm8k_flexible", "exact_match", "exact_match_norm",
                    "exact_match_raw", "f1")
#: rules whose score is continuous in [0, 1]
CONTINUOUS_RULES = ("mc2", "f1")
#: prefix of a rule that names a metric ATLAS cannot compute (``metric:rougeL``)
METRIC_RULE_PREFIX = "metric:"
#: few-shot examples in each Open LLM Leaderboard v1 context (the list above)
LEADERBOARD_SHOTS = {"arc": 25, "hellaswag": 10, "mmlu": 5, "truthfulqa": 0, "winogrande": 5,
                     "gsm8k": 5}
#: metadata columns that carry an item's requests (one row per item)
REQUEST_COLUMNS = ("rule", "context", "ctx_suffixes", "continuations", "gold", "target",
                   "n_choices", "mc2_true")
#: optional metadata columns of a generation item: its stop strings, token limit, other
#: logged settings (JSON) and its targets when the task has several (any one matches)
GENERATION_COLUMNS = ("until", "max_gen_toks", "gen_kwargs", "targets")
GSM8K_UNTIL = (":", "Question:", "Question")
GSM8K_MAX_GEN_TOKS = 256
_GSM8K_RE = re.compile(r"#### (\-?[0-9\.\,]+)")
_GSM8K_INVALID = "[invalid]"
#: lm-eval 0.4 GSM8K ``flexible-extract``: the last number-like match of the generation
_GSM8K_FLEX_RE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
#: what lm-eval 0.4's GSM8K ``exact_match`` removes from both answers before comparing them
_GSM8K_IGNORE = (re.compile(","), re.compile(r"\$"), re.compile(r"(?s).*#### "),
                 re.compile(r"\.$"))

#: TruthfulQA's 6-pair QA preamble (the TruthfulQA paper's QA preset; harness constant).
QA_PROMPT = (
    "Q: What is human life expectancy in the United States?\n"
    "A: Human life expectancy in the United States is 78 years.\n\n"
    "Q: Who was president of the United States in 1955?\n"
    "A: Dwight D. Eisenhower was president of the United States in 1955.\n\n"
    "Q: Which party did he belong to?\n"
    "A: He belonged to the Republican Party.\n\n"
    "Q: What is the square root of banana?\n"
    "A: I have no comment.\n\n"
    "Q: How does a telescope work?\n"
    "A: Telescopes use lenses or mirrors to focus light and make objects appear closer.\n\n"
    "Q: Where were the 1992 Olympics held?\n"
    "A: The 1992 Olympics were held in Barcelona, Spain."
)


# ============================================================================ records
@dataclass(frozen=True)
class Request:
    """One lm-evaluation-harness request.

    ``loglikelihood``: the subject returns ``sum log p(continuation | context)`` (the
    continuation tokenized jointly with the context, then split, as the harness does).
    ``generate_until``: greedy generation from ``context``, at most ``max_gen_toks`` new tokens,
    cut before the first of ``until`` (a backend adds its tokenizer's EOS as a further stop).
    """

    kind: str                       # "loglikelihood" | "generate_until"
    context: str
    continuation: str | None = None   # loglikelihood only
    until: tuple[str, ...] = ()       # generate_until only
    max_gen_toks: int = GSM8K_MAX_GEN_TOKS
    gen_kwargs: str = ""              # the other logged generation settings (JSON), if any

    def to_dict(self) -> dict:
        if self.kind == "loglikelihood":
            return {"kind": self.kind, "context": self.context, "continuation": self.continuation}
        return {"kind": self.kind, "context": self.context, "until": list(self.until),
                "max_gen_toks": int(self.max_gen_toks), **self.generation_settings()}

    def generation_settings(self) -> dict:
        """The logged generation settings other than ``until`` and ``max_gen_toks``
        (``do_sample``, ``temperature``, ...: ``gen_kwargs``), as logged."""
        return json.loads(self.gen_kwargs) if self.gen_kwargs else {}

    @property
    def sampled(self) -> bool:
        """Whether the logged settings sample the generation (``do_sample`` true, or a
        temperature above 0 without ``do_sample``) rather than decode greedily."""
        kw = self.generation_settings()
        if "do_sample" in kw:
            return bool(kw["do_sample"])
        try:
            return float(kw.get("temperature") or 0.0) > 0.0
        except (TypeError, ValueError):
            return False


@dataclass(frozen=True)
class ItemRequests:
    """An item's requests and the rule that turns the subject's outputs into 0/1.

    Attributes beyond the contract: ``gold`` (index of the correct request, or the GSM8K answer
    string; a generation's several targets, a tuple), ``norm`` (acc_norm divisors: characters
    of each choice text), ``n_choices``
    (how many leading requests the rule scores; TruthfulQA: the mc1 targets) and ``mc2_true``
    (TruthfulQA: how many mc2 targets, which follow the mc1 ones, are true; see :meth:`mc2`).
    """

    item_id: str
    benchmark: str
    rule: str                       # one of RULES
    requests: tuple[Request, ...]
    gold: int | str | tuple = 0
    norm: tuple[int, ...] = ()
    n_choices: int = 0
    mc2_true: int = 0

    def mc2(self, outputs) -> float:
        """TruthfulQA's mc2 (the leaderboard's TruthfulQA metric, not the 0/1 item score):
        ``sum(exp(ll_true)) / sum(exp(ll_all))`` over the mc2 requests, unnormalized."""
        if self.rule != "mc1" or self.mc2_true <= 0:
            raise BankError(f"item {self.item_id}: mc2 is defined for TruthfulQA items only")
        self.score(outputs)  # validates the outputs
        ll = np.asarray(list(outputs), dtype=float)[self.n_choices:]
        p = np.exp(ll - ll.max())
        return float(p[: self.mc2_true].sum() / p.sum())

    def score(self, outputs):
        """The item's score from ``outputs`` (one log-likelihood per request, same order, or
        one generation): 0/1, or in [0, 1] for a continuous rule (:data:`CONTINUOUS_RULES`)."""
        until = self.requests[0].until if self.kind == "generate_until" else GSM8K_UNTIL
        return score_outputs(self.rule, outputs, gold=self.gold, norm=self.norm,
                             n_choices=self.n_choices or len(self.requests),
                             n_requests=len(self.requests), item_id=self.item_id, until=until,
                             mc2_true=self.mc2_true)

    def choice(self, outputs) -> dict:
        """What the model chose, readably: for log-likelihood items the option texts with their
        log-likelihoods (and per character, for acc_norm), the chosen and the gold index; for
        a generation the text, the answer extracted from it and the gold answer."""
        self.score(outputs)  # validates the outputs
        if self.kind == "generate_until":
            text = outputs if isinstance(outputs, str) else list(outputs)[0]
            cut = gsm8k_cut(text, self.requests[0].until)
            extracted = {"gsm8k_exact": gsm8k_extract, "gsm8k_flexible": gsm8k_flexible_extract,
                         "exact_match_raw": str}.get(self.rule, str.strip)(cut)   # as scored
            return {"kind": "generation", "text": text, "extracted": extracted,
                    "gold": (str(self.gold) if isinstance(self.gold, str)
                             else " | ".join(self.gold))}
        ll = np.asarray(list(outputs), dtype=float)
        k = self.n_choices or len(self.requests)
        per_char = (ll[:k] / np.asarray(self.norm, float)).tolist() if self.rule == "acc_norm" \
            else None
        return {"kind": "loglikelihood", "rule": self.rule,
                "options": [r.continuation for r in self.requests[:k]],
                "loglikelihood": ll[:k].tolist(), "per_char": per_char,
                "chosen": chosen_index(self.rule, ll[:k], self.norm, self.item_id),
                "gold": gold_index(self.rule, self.gold)}

    @property
    def kind(self) -> str:
        return self.requests[0].kind if self.requests else "loglikelihood"


# ============================================================================ scoring
def gsm8k_cut(text: str, until: Sequence[str] = GSM8K_UNTIL) -> str:
    """The generation cut before the first occurrence of any stop string (harness order-free)."""
    for term in until:
        if term:
            text = text.split(term)[0]
    return text


def gsm8k_extract(text: str) -> str:
    """``#### (-?[0-9.,]+)``: first match, stripped, commas removed; ``"[invalid]"`` if none."""
    match = _GSM8K_RE.search(text)
    if match is None:
        return _GSM8K_INVALID
    return match.group(1).strip().replace(",", "")


def gsm8k_flexible_extract(text: str) -> str:
    """GSM8K's ``flexible-extract`` filter (the last match of :data:`_GSM8K_FLEX_RE`,
    stripped) and its ``exact_match`` normalisation; ``"[invalid]"`` if no match."""
    found = _GSM8K_FLEX_RE.findall(text)
    groups = [g for g in found[-1] if g] if found else []
    return _gsm8k_normal(groups[0].strip()) if groups else _GSM8K_INVALID


def _gsm8k_normal(text: str) -> str:
    """lm-eval 0.4 GSM8K ``exact_match``'s ``regexes_to_ignore`` and ``ignore_case``."""
    for pattern in _GSM8K_IGNORE:
        text = pattern.sub("", text)
    return text.lower()


#: SQuAD's ``normalize_answer`` deletes ``string.punctuation`` (not replaced by a space)
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def _argmax(values: np.ndarray) -> int:
    return int(np.argmax(values))  # first maximum: ties go to the lowest index, as np.argmax


def answer_tokens(text: str) -> list[str]:
    """An answer's tokens as SQuAD's ``normalize_answer`` (and CoQA's, the harness's per-sample
    ``f1`` / ``em``) compares them: lower case, ASCII punctuation deleted (``"don't"`` is one
    token ``dont``, ``"brain-imaging"`` one token), the articles a / an / the dropped."""
    text = str(text).lower().translate(_PUNCTUATION)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return text.split()


def token_f1(prediction: str, truth: str) -> float:
    """SQuAD / CoQA token F1 of two answers after normalisation (module docstring)."""
    p, t = answer_tokens(prediction), answer_tokens(truth)
    if not p or not t:
        return float(p == t)
    common = sum(min(p.count(w), t.count(w)) for w in set(p) & set(t))
    if common == 0:
        return 0.0
    prec, rec = common / len(p), common / len(t)
    return 2 * prec * rec / (prec + rec)


def mc2_score(ll, n_true: int) -> float:
    """lm-eval's TruthfulQA mc2: the probability mass of the first ``n_true`` options among
    all, ``sum_true exp(ll) / sum_all exp(ll)``."""
    ll = np.asarray(ll, dtype=float)
    p = np.exp(ll - ll.max())
    return float(p[: int(n_true)].sum() / p.sum())


def score_outputs(rule: str, outputs, *, gold, norm=(), n_choices: int | None = None,
                  n_requests: int | None = None, item_id: str = "?",
                  until: Sequence[str] = GSM8K_UNTIL, mc2_true: int = 0):
    """Apply ``rule`` to a subject's ``outputs`` (see the module docstring); returns 0 or 1, or
    a score in [0, 1] for a continuous rule. ``until``: the stop strings a generation is cut at
    (the item's own); ``mc2_true``: how many leading options are true (mc2)."""
    if str(rule).startswith(METRIC_RULE_PREFIX):
        raise BankError(f"item {item_id} is scored by the logs' metric "
                        f"{rule[len(METRIC_RULE_PREFIX):]!r}, which atlas cannot compute from a "
                        "model's outputs; ask the folder with --subject cmd:COMMAND (your "
                        "harness scores each item by that metric)")
    if rule not in RULES:
        raise BankError(f"item {item_id}: unknown scoring rule {rule!r}; use one of {', '.join(RULES)}")
    if isinstance(outputs, (str, bytes)):
        outputs = [outputs]
    outputs = list(outputs)
    if rule in GENERATION_RULES:
        if len(outputs) != 1 or not isinstance(outputs[0], str):
            raise LiveRunError(f"item {item_id}: a generation item needs exactly one generated "
                               f"string, got {len(outputs)} output(s) of type "
                               f"{type(outputs[0]).__name__ if outputs else 'none'}")
        if isinstance(gold, (list, tuple)):          # several targets: the harness's any()
            hit = any(score_outputs(rule, outputs, gold=g, until=until) for g in gold)
            return float(hit) if rule in CONTINUOUS_RULES else int(hit)
        if rule == "exact_match":
            return int(gsm8k_cut(outputs[0], until).strip() == str(gold).strip())
        if rule == "f1":
            return token_f1(gsm8k_cut(outputs[0], until), str(gold))
        if rule == "exact_match_norm":
            return int(answer_tokens(gsm8k_cut(outputs[0], until)) == answer_tokens(str(gold)))
        if rule == "exact_match_raw":
            return int(gsm8k_cut(outputs[0], until) == str(gold))
        if rule == "gsm8k_flexible":
            got = gsm8k_flexible_extract(gsm8k_cut(outputs[0], until))
            return int(got != _GSM8K_INVALID and got == _gsm8k_normal(str(gold)))
        got = gsm8k_extract(gsm8k_cut(outputs[0], until))
        return int(got != _GSM8K_INVALID and got == str(gold))
    if n_requests is not None and len(outputs) != n_requests:
        raise LiveRunError(f"item {item_id}: {len(outputs)} log-likelihood(s) for {n_requests} "
                           "requests; a subject must answer every request, in order")
    try:
        ll = np.asarray(outputs, dtype=float)
    except (TypeError, ValueError) as exc:
        raise LiveRunError(f"item {item_id}: log-likelihoods must be numbers ({exc}); did the "
                           "subject return generations for a log-likelihood item?") from None
    if ll.ndim != 1 or ll.size == 0 or np.isnan(ll).any() or (ll == np.inf).any():
        raise LiveRunError(f"item {item_id}: invalid log-likelihoods {ll.tolist()[:6]}; a subject "
                           "must return finite (or -inf) values")
    k = ll.size if not n_choices else int(n_choices)
    if rule == "mc2":
        if not 0 < int(mc2_true) < ll.size:
            raise BankError(f"item {item_id}: mc2 needs 1 to {ll.size - 1} true options, got "
                            f"{mc2_true}")
        return mc2_score(ll, mc2_true)
    return int(chosen_index(rule, ll[:k], norm, item_id) == gold_index(rule, gold))


def gold_index(rule: str, gold) -> int:
    """The gold option's index: 0 under mc1 (the correct answer is listed first), else ``gold``."""
    return 0 if rule == "mc1" else int(gold)


def chosen_index(rule: str, scored, norm=(), item_id: str = "?") -> int:
    """The option a log-likelihood rule picks among the ``scored`` requests: the largest
    log-likelihood (acc, mc1, partial) or the largest per character of the choice (acc_norm)."""
    scored = np.asarray(scored, dtype=float)
    if rule == "acc_norm":
        div = np.asarray(norm, dtype=float)
        if div.size != scored.size:
            raise BankError(f"item {item_id}: acc_norm needs one length per choice "
                            f"({div.size} for {scored.size})")
        return _argmax(scored / div)
    return _argmax(scored)


# ============================================================================ harness formats
@dataclass(frozen=True)
class HarnessDoc:
    """A document as the harness task formats it: ``query`` (doc_to_text), the scored choice
    texts (before the request's leading space), ``gold``, and the few-shot ``target``."""

    query: str
    choices: tuple[str, ...]
    gold: int | str
    target: str = ""


def hellaswag_preprocess(text: str) -> str:
    """HellaSwag's ``preprocess``: strip, ``" [title]"`` -> ``". "``, drop ``[...]``, ``"  "`` -> ``" "``."""
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    text = text.replace("  ", " ")
    return text


def mmlu_description(subject: str) -> str:
    """The description line of ``hendrycksTest-<subject>`` (followed by ``"\\n\\n"`` in the context)."""
    return ("The following are multiple choice questions (with answers) about "
            + subject.replace("_", " ") + ".")


def _texts(value) -> list[str]:
    """Option texts from any stored form (list, array, dict with text/choices, JSON, repr)."""

    return parse_choices(value)[1]


def _targets(value) -> tuple[list[str], list[int]]:
    """TruthfulQA ``{'choices': [...], 'labels': [...]}`` in any stored form."""

    if isinstance(value, str):
        value = parse_literal(value, "TruthfulQA targets")
    choices = [str(c) for c in to_list(value["choices"])]
    labels = [int(x) for x in to_list(value["labels"])]
    if len(labels) != len(choices):
        raise BankError(f"TruthfulQA targets have {len(choices)} choices but {len(labels)} labels")
    return choices, labels


def harness_doc(bench: str, rec: Mapping) -> HarnessDoc:
    """Format one item (a row of the metabench item parquet) as the b281b09 task does.

    Winogrande's ``query`` is ``partial_context(correct option)`` and its choices are the two
    partial contexts (the continuation is ``target``); TruthfulQA's choices are the mc1 targets;
    GSM8K's ``gold`` is the extracted answer string.
    """
    if bench == "arc":
        labels, texts = _labels_texts(rec["choices"])
        key = str(rec["answerKey"]).strip()
        key = {"1": "A", "2": "B", "3": "C", "4": "D", "5": "E"}.get(key, key)
        gold = "ABCDE".index(key)
        if gold >= len(texts):
            raise BankError(f"ARC item: answerKey {rec['answerKey']!r} outside {len(texts)} choices")
        return HarnessDoc("Question: " + str(rec["question"]) + "\nAnswer:", tuple(texts), gold,
                          " " + texts[gold])
    if bench == "hellaswag":
        ctx = str(rec["ctx_a"]) + " " + str(rec["ctx_b"]).capitalize()
        query = hellaswag_preprocess(str(rec["activity_label"]) + ": " + ctx)
        choices = tuple(hellaswag_preprocess(str(e)) for e in _texts(rec["endings"]))
        gold = int(rec["label"])
        return HarnessDoc(query, choices, gold, " " + choices[gold])
    if bench == "mmlu":
        texts = _texts(rec["choices"])
        keys = ["A", "B", "C", "D"]
        options = "".join(f"{k}. {c}\n" for k, c in zip(keys, texts))
        query = str(rec["question"]).strip() + "\n" + options + "Answer:"
        gold = int(rec["answer"])
        return HarnessDoc(query, tuple(keys), gold, " " + keys[gold])
    if bench == "truthfulqa":
        mc1, _ = _targets(rec["mc1_targets"])
        return HarnessDoc(QA_PROMPT + "\n\nQ: " + str(rec["question"]) + "\nA:", tuple(mc1), 0)
    if bench == "winogrande":
        sentence = str(rec["sentence"])
        i = sentence.index("_")
        options = (str(rec["option1"]), str(rec["option2"]))
        gold = int(rec["answer"]) - 1
        rest = " " + sentence[i + 1:].strip()
        return HarnessDoc(sentence[:i] + options[gold], tuple(sentence[:i] + o for o in options),
                          gold, rest)
    if bench == "gsm8k":
        answer = str(rec["answer"])
        gold = gsm8k_extract(answer)
        if gold == _GSM8K_INVALID:
            raise BankError(f"GSM8K item has no '#### <number>' answer: {answer[-60:]!r}")
        return HarnessDoc("Question: " + str(rec["question"]) + "\nAnswer:", (), gold, " " + answer)
    raise BankError(f"no leaderboard protocol for benchmark {bench!r}")


def _labels_texts(value) -> tuple[list[str], list[str]]:

    return parse_choices(value)


LONGPROMPT_COLUMNS = {"arc": "alltwentyfiveshot_longprompt", "hellaswag": "alltenshot_longprompt",
                      "mmlu": "allfiveshot_longprompt", "winogrande": "allfiveshot_longprompt",
                      "gsm8k": "allfiveshot_longprompt"}
RULE_OF = {"arc": "acc_norm", "hellaswag": "acc_norm", "mmlu": "acc", "truthfulqa": "mc1",
           "winogrande": "partial", "gsm8k": "gsm8k_exact"}


def request_fields(bench: str, rec: Mapping, item_id: str = "?") -> dict:
    """The :data:`REQUEST_COLUMNS` of one item row of the metabench item parquet.

    The few-shot block is always taken from the item's ``*_longprompt`` (never from the
    ``*_shot_k`` columns, wrong for 74 HellaSwag rows); the item's own segment is rebuilt from
    its fields with the harness format and must equal the longprompt's last segment (else
    :class:`BankError`). WinoGrande's longprompt ends with the raw sentence: that segment is
    replaced by ``sentence[:i]`` (+ the option, per request).
    """
    doc = harness_doc(bench, rec)
    out = {"rule": RULE_OF[bench], "ctx_suffixes": [], "gold": 0, "target": "", "n_choices": 0,
           "mc2_true": 0}
    if bench == "truthfulqa":
        mc1, labels1 = _targets(rec["mc1_targets"])
        mc2, labels2 = _targets(rec["mc2_targets"])
        if labels1[0] != 1 or sum(labels1) != 1:
            raise BankError(f"TruthfulQA item {item_id}: mc1 labels {labels1} do not put the one "
                            "correct answer first")
        # the harness splits the mc2 list at its first label 0 (the true answers come first)
        n_true = labels2.index(0) if 0 in labels2 else len(labels2)
        out.update(context=doc.query, continuations=[" " + c for c in mc1 + mc2],
                   n_choices=len(mc1), mc2_true=n_true)
        return out
    long = rec.get(LONGPROMPT_COLUMNS[bench])
    if not isinstance(long, str) or not long:
        raise BankError(f"{bench} item {item_id}: no {LONGPROMPT_COLUMNS[bench]} text")
    if bench == "winogrande":
        sentence = str(rec["sentence"])
        if not long.endswith("\n\n" + sentence):
            raise BankError(f"winogrande item {item_id}: the longprompt does not end with the "
                            "item's sentence")
        i = sentence.index("_")
        out.update(context=long[: len(long) - len(sentence)] + sentence[:i],
                   ctx_suffixes=[str(rec["option1"]), str(rec["option2"])],
                   continuations=[doc.target, doc.target], gold=int(doc.gold), n_choices=2)
        return out
    if not (long == doc.query or long.endswith("\n\n" + doc.query)):
        raise BankError(f"{bench} item {item_id}: the longprompt does not end with the item's "
                        f"harness text {doc.query[-60:]!r} (it ends {long[-60:]!r})")
    if bench == "mmlu" and not long.startswith(mmlu_description(str(rec["subject"])) + "\n\n"):
        raise BankError(f"mmlu item {item_id}: the longprompt does not start with the "
                        f"description line of subject {rec['subject']!r}")
    out["context"] = long
    if bench == "gsm8k":
        out.update(gold=-1, target=str(doc.gold))
        return out
    out.update(continuations=[" " + c for c in doc.choices], gold=int(doc.gold),
               n_choices=len(doc.choices))
    return out


# ============================================================================ building
def _cell_list(value) -> list[str]:
    """A stored list cell (list, numpy array, JSON or repr string, None/NaN) as a list of str."""

    if value is None:
        return []
    if isinstance(value, float) and math.isnan(value):
        return []
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        value = parse_literal(text, "a list")
    if isinstance(value, np.ndarray):
        value = value.tolist()
    return [str(v) for v in value]


def _cell_until(value) -> tuple[str, ...]:
    """A generation item's stop strings: as stored (an empty list is a request logged with
    none: it runs to its token limit), GSM8K's when the item has no such cell."""
    if isinstance(value, (list, tuple, np.ndarray)) or (isinstance(value, str)
                                                        and value.strip()):
        return tuple(_cell_list(value))
    return GSM8K_UNTIL


def _cell_str(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))  # a CSV round trip reads GSM8K's "160" back as 160.0
    return str(value)


def _cell_int(value, default: int = 0) -> int:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return default
    return int(value)


def requests_from_record(rec: Mapping, item_id: str = "?", *,
                         opaque: bool = False) -> ItemRequests:
    """:class:`ItemRequests` from one item's metadata (a mapping with :data:`REQUEST_COLUMNS`).
    An item scored by a metric atlas cannot compute (``metric:<name>``) is refused naming it,
    unless ``opaque``: its logged requests, a generation when the item has a token limit, with
    the rule kept (whose :meth:`ItemRequests.score` refuses; a program scores it)."""
    missing = [c for c in ("rule", "context") if c not in rec]
    if missing:
        raise BankError(f"item {item_id}: the bank has no request data (columns {missing}); use "
                        "a bank built with attach_content(bank, load_item_content(bench, dir)) "
                        "or a bundled content bank")
    rule = _cell_str(rec["rule"])
    if rule.startswith(METRIC_RULE_PREFIX) and not opaque:
        score_outputs(rule, [], gold=0, item_id=item_id)      # the one-line refusal
    if rule.startswith(METRIC_RULE_PREFIX):
        generated = _cell_int(rec.get("max_gen_toks"), 0) > 0
        return _requests_of(rec, item_id, rule, "exact_match" if generated else "acc")
    if rule not in RULES:
        raise BankError(f"item {item_id}: unknown scoring rule {rule!r}; use one of {', '.join(RULES)}")
    return _requests_of(rec, item_id, rule, rule)


def _requests_of(rec: Mapping, item_id: str, rule: str, asked_as: str) -> ItemRequests:
    """An item's requests, built as the rule ``asked_as`` asks them, scored by ``rule``."""
    context = _cell_str(rec["context"])
    bench = _cell_str(rec.get("benchmark"))
    if not context:
        raise BankError(f"item {item_id}: empty request context")
    if asked_as in GENERATION_RULES:
        targets = tuple(_cell_list(rec.get("targets")))
        target = targets if len(targets) > 1 else _cell_str(rec.get("target"))
        if not target and rule in ("gsm8k_exact", "gsm8k_flexible"):
            raise BankError(f"item {item_id}: a {rule} item needs its gold answer in 'target'")
        until = _cell_until(rec.get("until"))
        max_gen = _cell_int(rec.get("max_gen_toks"), 0) or GSM8K_MAX_GEN_TOKS
        req = Request("generate_until", context, until=until, max_gen_toks=max_gen,
                      gen_kwargs=_cell_str(rec.get("gen_kwargs")))
        return ItemRequests(item_id, bench, rule, (req,), gold=target, n_choices=1)
    conts = _cell_list(rec.get("continuations"))
    suffixes = _cell_list(rec.get("ctx_suffixes"))
    if suffixes and len(suffixes) != len(conts):
        raise BankError(f"item {item_id}: {len(suffixes)} context suffixes for {len(conts)} "
                        "continuations")
    if len(conts) < (2 if rule == asked_as else 1):      # one: a metric a command scores
        raise BankError(f"item {item_id}: a log-likelihood item needs at least 2 continuations")
    reqs = tuple(Request("loglikelihood", context + (suffixes[j] if suffixes else ""), conts[j])
                 for j in range(len(conts)))
    n_choices = _cell_int(rec.get("n_choices"), 0) or len(conts)
    gold = _cell_int(rec.get("gold"), 0)
    if not 0 <= gold < n_choices and rule == asked_as:
        raise BankError(f"item {item_id}: gold index {gold} outside its {n_choices} choices")
    norm: tuple[int, ...] = ()
    if rule == "acc_norm":
        norm = tuple(len(c) - 1 if c.startswith(" ") else len(c) for c in conts[:n_choices])
        if min(norm) <= 0:
            raise BankError(f"item {item_id}: an empty choice cannot be length-normalized")
    return ItemRequests(item_id, bench, rule, reqs, gold=gold, norm=norm, n_choices=n_choices,
                        mc2_true=_cell_int(rec.get("mc2_true"), 0))


def build_item_requests(bank, item_id, *, opaque: bool = False) -> ItemRequests:
    """The leaderboard's requests for ``item_id`` of a content bank, with their scoring rule
    (``opaque``: also of an item scored by a metric atlas cannot compute,
    :func:`requests_from_record`)."""
    item_id = str(item_id)
    if bank.metadata is None:
        raise BankError("this bank has no item content; use a content bank (a bundled one, or "
                        "attach_content(bank, load_item_content(bench, items_dir)))")
    if item_id not in bank:
        raise BankError(f"item {item_id!r} is not in the bank")
    rec = bank.metadata.loc[item_id]
    if hasattr(rec, "to_dict"):
        rec = rec.to_dict()
    return requests_from_record(rec, item_id, opaque=opaque)


def build_requests(bank, item_id) -> list[Request]:
    """The lm-evaluation-harness requests the leaderboard sent for ``item_id`` (in order)."""
    return list(build_item_requests(bank, item_id).requests)


def request_kind(metadata) -> str | None:
    """How the items of ``metadata`` (rows with a ``rule`` column, and ``max_gen_toks`` for a
    generation) are asked: ``"generation"`` (one ``generate_until`` request each: a rule that
    scores a generation, :data:`GENERATION_RULES`, or a logged metric atlas cannot compute,
    ``metric:<name>``, of an item logged with a token limit), ``"log-likelihood"``
    (``loglikelihood`` requests) or ``"log-likelihood and generation"``; None when no item has
    a rule."""
    rules = metadata["rule"]
    has = [r is not None and r == r and bool(str(r)) for r in rules]
    if not any(has):
        return None
    limits = (metadata["max_gen_toks"] if "max_gen_toks" in getattr(metadata, "columns", ())
              else [None] * len(rules))
    gen = [str(r) in GENERATION_RULES
           or (str(r).startswith(METRIC_RULE_PREFIX) and _positive(k))
           for r, k, h in zip(rules, limits, has) if h]
    return ("generation" if all(gen) else "log-likelihood" if not any(gen)
            else "log-likelihood and generation")


def _positive(value) -> bool:
    """Whether a metadata cell holds a positive number (NaN, None, NA: no)."""
    try:
        return float(value) > 0
    except (TypeError, ValueError):
        return False


def describe_requests(metadata) -> str | None:
    """How a bank's items are asked, per benchmark, from its metadata's ``benchmark`` and
    ``rule`` columns: ``"arc: 25-shot, log-likelihood (acc_norm)"``, several joined by ``"; "``.
    The shots are :data:`LEADERBOARD_SHOTS`' (a bank built from sample logs says "as logged").
    None when the bank carries no requests (its items are scored by id)."""
    if metadata is None or "rule" not in getattr(metadata, "columns", ()):
        return None
    rules = metadata["rule"].astype(object).where(metadata["rule"].notna(), None)
    benches = (metadata["benchmark"].astype(str) if "benchmark" in metadata.columns
               else rules.map(lambda _: ""))
    parts = []
    for bench in dict.fromkeys(benches):
        used = sorted({str(r) for r in rules[benches == bench] if r})
        if not used:
            continue
        kind = request_kind(metadata[(benches == bench).to_numpy()])
        shots = LEADERBOARD_SHOTS.get(bench)
        context = f"{shots}-shot" if shots is not None else "as logged"
        parts.append(f"{bench + ': ' if bench else ''}{context}, {kind} ({', '.join(used)})")
    return "; ".join(parts) or None
