"""Items with content: loaders for benchmark item files, joining to a bank, prompt building.

An item that can be *asked* needs more than its IRT parameters. Content-bearing banks carry
these metadata columns (one row per item, indexed by item id):

==============  ==========================================================================
``benchmark``   arc, gsm8k, hellaswag, mmlu, truthfulqa, winogrande
``question``    the question / context text
``choices``     list of option texts (empty list for open-answer items such as GSM8K)
``answer``      the key: an option letter ``A``, ``B``, ... (multiple choice) or the final
                number as text (GSM8K)
``scorer``      name of the scorer in :mod:`atlascat.live.scorers` (``mc``, ``gsm8k``, ...)
``fewshot``     the Open LLM Leaderboard's few-shot context for this item (ends with the
                item's own question, ready for a completion endpoint), or empty
``source_id``   the id of the item in its original dataset, where known
==============  ==========================================================================

and, to be asked the Open LLM Leaderboard's way (:mod:`atlascat.content.requests`, built by
:func:`load_item_content` from the harness formats and the item's ``*_longprompt``), the
:data:`~atlascat.content.requests.REQUEST_COLUMNS`:

=================  =======================================================================
``rule``           acc_norm, acc, mc1, partial, gsm8k_exact or exact_match
``context``        the context shared by the item's requests (stored once per item)
``ctx_suffixes``   per-request text appended to ``context`` (WinoGrande's options), or []
``continuations``  one per log-likelihood request ([] for generation items)
``gold``           index of the correct request (-1 for generation items)
``target``         GSM8K's gold answer string as the harness extracts it, else ""
``n_choices``      how many leading requests the rule scores (TruthfulQA: the mc1 targets)
``mc2_true``       TruthfulQA: how many of the mc2 targets (after the mc1 ones) are true
``until``          (optional) a generation item's stop strings (default GSM8K's)
``max_gen_toks``   (optional) a generation item's token limit (default 256)
=================  =======================================================================

Options are always *presented* with letters A, B, C, ... in list order whatever labels the
source used (a few ARC items use ``1``-``4``), and the key is stored as that letter.
TruthfulQA's mc1 lists the correct answer first; its options are put in a fixed per-item
permuted order (a hash of the item id) so that "always answer A" does not score 100%.

The item files are ``../shared/data/openllm/items/<bench>[-secondary].parquet`` (metabench's
item sets; ``metabench_idx`` is the matrix item id, MMLU uses ``mb_sub_idx``). The package ships
a content bank per benchmark: :func:`atlascat.catalogue.load_content_bank`.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from ..errors import BankError, ConfigError
from .defaults import PROMPT_STYLE, PROMPT_STYLES, TEMPERATURE
from .parsing import letters, parse_choices, parse_literal, to_list

if TYPE_CHECKING:  # pandas loads where a frame is built
    import pandas as pd

__all__ = [
    "CONTENT_BENCHMARKS", "CONTENT_COLUMNS", "PROMPT_STYLES", "Prompt", "parse_choices",
    "load_item_content", "attach_content", "normalize_loaded",
    "build_prompt", "item_record", "letters", "SHIPPED_BANKS", "content_item_ids",
    "ITEM_ID_COLUMN",
]

CONTENT_BENCHMARKS = ("arc", "gsm8k", "hellaswag", "mmlu", "truthfulqa", "winogrande")
CONTENT_COLUMNS = ("benchmark", "question", "choices", "answer", "scorer", "fewshot", "source_id")
#: column of the item files holding the response-matrix item id
ITEM_ID_COLUMN = {"arc": "metabench_idx", "gsm8k": "metabench_idx", "hellaswag": "metabench_idx",
                  "mmlu": "mb_sub_idx", "truthfulqa": "metabench_idx",
                  "winogrande": "metabench_idx"}
#: benchmarks whose content bank ships with the package -> file name in datasets/data
SHIPPED_BANKS = {bench: f"banks/{bench}.parquet" for bench in CONTENT_BENCHMARKS}
def _gsm8k_key(solution: str) -> str:
    match = re.search(r"####\s*(.+?)\s*$", str(solution).strip())
    if match is None:
        raise BankError(f"GSM8K solution has no '#### <answer>' line: {str(solution)[-80:]!r}")
    return match.group(1).replace(",", "").strip()


def _stable_permutation(item_id: str, n: int) -> np.ndarray:
    """A fixed permutation of ``range(n)`` derived from the item id (no global randomness)."""
    seed = int.from_bytes(hashlib.sha256(f"atlas-options:{item_id}".encode()).digest()[:8], "little")
    return np.random.default_rng(seed).permutation(n)


# ---------------------------------------------------------------------------- loaders
def _read_item_files(bench: str, items_dir: Path) -> pd.DataFrame:
    import pandas as pd

    frames = []
    for name in (f"{bench}.parquet", f"{bench}-secondary.parquet"):
        path = items_dir / name
        if path.exists():
            frames.append(pd.read_parquet(path))
    if not frames:
        raise BankError(f"no item file {bench}.parquet in {str(items_dir)!r}; point items_dir at "
                        "the folder holding the metabench item parquet files")
    df = pd.concat(frames, ignore_index=True)
    df["item_id"] = df[ITEM_ID_COLUMN[bench]].astype(str)
    return df.drop_duplicates("item_id", keep="first").reset_index(drop=True)


def _mc_row(item_id, question, texts, correct: int, fewshot, source_id, bench, scorer="mc"):
    keys = letters(len(texts))
    if not 0 <= correct < len(texts):
        raise BankError(f"item {item_id}: answer index {correct} outside its {len(texts)} options")
    return {"item_id": item_id, "benchmark": bench, "question": str(question),
            "choices": [str(t) for t in texts], "answer": keys[correct], "scorer": scorer,
            "fewshot": fewshot or "", "source_id": source_id or ""}


def _check_bench(bench: str) -> str:
    bench = str(bench).lower()
    if bench not in CONTENT_BENCHMARKS:
        raise ConfigError(f"no content loader for {bench!r}; choose one of {', '.join(CONTENT_BENCHMARKS)}")
    return bench


def content_item_ids(bench: str, items_dir) -> list[str]:
    """Ids (response-matrix id space) of the items of ``bench`` that have content.

    ``metabench_idx`` as a string, or ``mb_sub_idx`` (``subject.idx``) for MMLU, from
    ``<bench>.parquet`` and ``<bench>-secondary.parquet`` in ``items_dir`` (first occurrence
    kept). Counts for ``../shared/data/openllm/items``: arc 245, hellaswag 151, mmlu 198,
    truthfulqa 290, winogrande 239, gsm8k 486.
    """
    bench = _check_bench(bench)
    return _read_item_files(bench, Path(items_dir))["item_id"].tolist()


def load_item_content(bench: str, items_dir, *, requests: bool = True) -> pd.DataFrame:
    """Normalized item content of a benchmark: ``item_id``, :data:`CONTENT_COLUMNS` and (with
    ``requests=True``) the leaderboard request data, :data:`~atlascat.content.requests.REQUEST_COLUMNS`.

    Parameters
    ----------
    bench : one of :data:`CONTENT_BENCHMARKS`
    items_dir : folder holding ``<bench>.parquet`` and optionally ``<bench>-secondary.parquet``
        (metabench's item sets, e.g. ``../shared/data/openllm/items``). Both are read; ids are
        the response-matrix item ids (``metabench_idx``, or ``mb_sub_idx`` for MMLU).
    requests : also build the harness requests (checked against each item's longprompt;
        a mismatch raises :class:`BankError`).

    Join it to a calibrated bank with :func:`attach_content`; then
    :func:`atlascat.live.build_requests` gives each item's requests.
    """
    import pandas as pd

    from .requests import REQUEST_COLUMNS, request_fields

    bench = _check_bench(bench)
    df = _read_item_files(bench, Path(items_dir))
    rows = []
    for rec in df.to_dict("records"):
        iid = rec["item_id"]
        if requests:
            extra = request_fields(bench, rec, iid)
        else:
            extra = {}
        if bench == "arc":
            labels, texts = parse_choices(rec["choices"])
            key = str(rec["answerKey"]).strip()
            if key not in labels:
                raise BankError(f"ARC item {iid}: answerKey {key!r} not among labels {labels}")
            rows.append(_mc_row(iid, rec["question"], texts, labels.index(key),
                                rec.get("alltwentyfiveshot_longprompt"), rec.get("id"), bench))
        elif bench == "mmlu":
            _, texts = parse_choices(rec["choices"])
            rows.append(_mc_row(iid, rec["question"], texts, int(rec["answer"]),
                                rec.get("allfiveshot_longprompt"), rec.get("mb_sub_idx"), bench))
        elif bench == "hellaswag":
            _, texts = parse_choices(rec["endings"])
            question = f"{rec['activity_label']}: {rec['ctx']}"
            rows.append(_mc_row(iid, question, texts, int(rec["label"]),
                                rec.get("alltenshot_longprompt"), rec.get("source_id"), bench))
        elif bench == "winogrande":
            texts = [rec["option1"], rec["option2"]]
            rows.append(_mc_row(iid, rec["sentence"], texts, int(rec["answer"]) - 1,
                                rec.get("allfiveshot_longprompt"), None, bench))
        elif bench == "truthfulqa":
            targets = rec["mc1_targets"]
            if isinstance(targets, str):
                targets = parse_literal(targets, "mc1_targets")
            _, texts = parse_choices(targets)
            labels = np.asarray(to_list(targets["labels"]), dtype=int)
            perm = _stable_permutation(iid, len(texts))
            texts = [texts[j] for j in perm]
            correct = int(np.flatnonzero(labels[perm] == 1)[0])
            rows.append(_mc_row(iid, rec["question"], texts, correct, None, None, bench))
        else:  # gsm8k
            rows.append({"item_id": iid, "benchmark": bench, "question": str(rec["question"]),
                         "choices": [], "answer": _gsm8k_key(rec["answer"]), "scorer": "gsm8k",
                         "fewshot": rec.get("allfiveshot_longprompt") or "", "source_id": ""})
        rows[-1].update(extra)
    columns = ["item_id", *CONTENT_COLUMNS, *(REQUEST_COLUMNS if requests else ())]
    out = pd.DataFrame(rows, columns=columns)
    return out.reset_index(drop=True)


#: rules whose request context is the leaderboard's longprompt (= the chat ``fewshot`` text)
_FEWSHOT_IS_CONTEXT = ("acc_norm", "acc", "gsm8k_exact")


def _restore_fewshot(rec: dict) -> dict:
    """``fewshot`` is stored empty where it equals the request ``context``; fill it back in."""
    few = rec.get("fewshot")
    empty = few is None or (isinstance(few, float) and np.isnan(few)) or few == ""
    ctx = rec.get("context")
    if empty and isinstance(ctx, str) and ctx and rec.get("rule") in _FEWSHOT_IS_CONTEXT:
        rec["fewshot"] = ctx
    return rec


def attach_content(bank, content: pd.DataFrame, *, missing: str = "drop"):
    """Join item content to a bank by item id.

    Parameters
    ----------
    bank : ItemBank
    content : frame with an ``item_id`` column (or index) and the :data:`CONTENT_COLUMNS`
        (plus, from :func:`load_item_content`, the request columns
        :data:`~atlascat.content.requests.REQUEST_COLUMNS`, which are carried along)
    missing : "drop" (keep only bank items that have content) or "error"

    Returns
    -------
    ItemBank with the content columns as metadata (existing metadata columns are kept). The
    long few-shot text is stored once: ``fewshot`` is left empty where it equals the request
    ``context`` (ARC, HellaSwag, MMLU, GSM8K); :func:`item_record` and
    :func:`load_content_bank` fill it back in.
    """
    import pandas as pd

    from ..irt.bank import ItemBank

    content = content.copy()
    if "item_id" in content.columns:
        content = content.set_index("item_id")
    content.index = content.index.astype(str)
    have = np.array([i in content.index for i in bank.item_ids])
    if not have.any():
        raise BankError("no bank item has content: item ids do not match (e.g. bank "
                        f"{list(bank.item_ids[:3])} vs content {list(content.index[:3])})")
    if not have.all():
        if missing == "error":
            lacking = bank.item_ids[~have]
            raise BankError(f"{lacking.size} bank item(s) have no content, e.g. {list(lacking[:5])}")
        bank = bank.subset(have)
    from .requests import GENERATION_COLUMNS, REQUEST_COLUMNS

    wanted = [c for c in (*CONTENT_COLUMNS, *REQUEST_COLUMNS, *GENERATION_COLUMNS)
              if c in content.columns]
    meta = content.loc[list(bank.item_ids), wanted]
    if "fewshot" in meta.columns and "context" in meta.columns and "rule" in meta.columns:
        meta = meta.copy()
        same = (meta["fewshot"] == meta["context"]) & meta["rule"].isin(_FEWSHOT_IS_CONTEXT)
        meta.loc[same, "fewshot"] = ""
    if bank.metadata is not None:
        old = bank.metadata[[c for c in bank.metadata.columns if c not in meta.columns]]
        meta = pd.concat([old.reset_index(drop=True), meta.reset_index(drop=True)], axis=1)
    return ItemBank(bank.item_ids, *bank.params, metadata=meta.reset_index(drop=True),
                    model=bank.model)


def normalize_loaded(bank):
    """Parquet gives numpy arrays for list cells and None for empty strings; make them plain."""
    meta = bank.metadata
    if meta is None or "choices" not in meta.columns:
        return bank
    meta = meta.copy()
    meta["choices"] = [list(to_list(v)) if not isinstance(v, str) else parse_choices(v)[1]
                       for v in meta["choices"]]
    for col in ("fewshot", "source_id"):
        if col in meta.columns:
            meta[col] = meta[col].fillna("").astype(str)
    if "fewshot" in meta.columns and "context" in meta.columns and "rule" in meta.columns:
        meta["fewshot"] = [_restore_fewshot({"fewshot": f, "context": c, "rule": r})["fewshot"]
                           for f, c, r in zip(meta["fewshot"], meta["context"], meta["rule"])]
    from ..irt.bank import ItemBank

    return ItemBank(bank.item_ids, *bank.params, metadata=meta.reset_index(drop=True),
                    model=bank.model)


_normalize_loaded = normalize_loaded  # the name used before


def item_record(bank, item_id: str) -> dict:
    """One item's content as a plain dict (``item_id`` + metadata columns)."""
    if bank.metadata is None:
        raise BankError("this bank has no item content (metadata); use a content bank "
                        "(atlascat.catalogue.load_content_bank / attach_content)")
    if str(item_id) not in bank:
        raise BankError(f"item {item_id!r} is not in the bank")
    rec = bank.metadata.loc[str(item_id)].to_dict()
    missing = [c for c in ("question", "answer", "scorer") if c not in rec]
    if missing:
        raise BankError(f"bank metadata lacks column(s) {missing} needed to ask an item")
    choices = rec.get("choices")
    if choices is None or (isinstance(choices, float) and np.isnan(choices)):
        rec["choices"] = []
    elif isinstance(choices, str):
        rec["choices"] = parse_choices(choices)[1]
    else:
        rec["choices"] = [str(c) for c in to_list(choices)]
    rec["item_id"] = str(item_id)
    return _restore_fewshot(rec)


# ---------------------------------------------------------------------------- prompts
@dataclass(frozen=True)
class Prompt:
    """What is sent to a model: chat ``messages`` or completion ``text``, plus generation settings.

    :meth:`hash` is the SHA-256 of the canonical JSON of everything that determines the answer
    (kind, messages/text, max_tokens, temperature, stop); the response cache is keyed on it.
    """

    kind: str  # "chat" | "completion"
    messages: tuple = ()
    text: str = ""
    max_tokens: int = 16
    temperature: float = TEMPERATURE
    stop: tuple = ()
    extra: Mapping = field(default_factory=dict)

    def payload(self) -> dict:
        """The request body fields other than ``model``."""
        body: dict = {"max_tokens": int(self.max_tokens), "temperature": float(self.temperature)}
        if self.kind == "chat":
            body["messages"] = [dict(m) for m in self.messages]
        else:
            body["prompt"] = self.text
        if self.stop:
            body["stop"] = list(self.stop)
        body.update(dict(self.extra))
        return body

    def hash(self) -> str:
        canon = json.dumps({"kind": self.kind, **self.payload()}, sort_keys=True,
                           ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canon.encode("utf-8")).hexdigest()

    def render(self) -> str:
        """Human-readable text of the prompt (stored with each step)."""
        if self.kind == "chat":
            return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in self.messages)
        return self.text


_MC_INSTRUCTION = ("The following is a multiple-choice question. Reply with the letter of the "
                   "correct option only.")
_NUM_INSTRUCTION = ("Solve the following problem. Reason step by step, then give the final "
                    "answer on the last line in the form '#### <number>'.")


def _zero_shot_text(item: Mapping) -> str:
    if item["choices"]:
        opts = "\n".join(f"{k}. {t}" for k, t in zip(letters(len(item["choices"])), item["choices"]))
        return f"{_MC_INSTRUCTION}\n\nQuestion: {item['question']}\n{opts}\nAnswer:"
    return f"{_NUM_INSTRUCTION}\n\nQuestion: {item['question']}\nAnswer:"


def build_prompt(item: Mapping, *, kind: str = "chat", style: str = PROMPT_STYLE,
                 max_tokens: int | None = None, temperature: float = TEMPERATURE,
                 system: str | None = None) -> Prompt:
    """The prompt asking ``item`` (a dict from :func:`item_record`).

    Styles
    ------
    zero-shot  an instruction, the question and lettered options; the model replies with a
               letter (multiple choice) or a worked answer ending ``#### <number>`` (GSM8K).
    few-shot   the Open LLM Leaderboard's few-shot context for the item (``fewshot`` column),
               verbatim; ARC's continues with the option *text* and MMLU's with a letter, both
               read by the ``mc`` scorer. Meant for completion endpoints and base models.
    """
    if kind not in ("chat", "completion"):
        raise ConfigError(f"prompt kind must be 'chat' or 'completion', not {kind!r}")
    if style not in PROMPT_STYLES:
        raise ConfigError(f"prompt style must be one of {PROMPT_STYLES}, not {style!r}")
    open_answer = not item["choices"]
    if max_tokens is None:
        max_tokens = 512 if open_answer else (48 if style == "few-shot" else 16)
    if style == "few-shot":
        if item.get("benchmark") in ("hellaswag", "winogrande"):
            raise ConfigError(f"the few-shot context of {item.get('benchmark')} items is a "
                              "loglikelihood continuation that cannot be scored from generated "
                              "text; use --prompt-style zero-shot")
        text = str(item.get("fewshot") or "")
        if not text:
            raise ConfigError(f"item {item['item_id']} has no few-shot context; use zero-shot")
        stop = ("\n\nQuestion:", "\n\n") if not open_answer else ("\n\nQuestion:",)
    else:
        text = _zero_shot_text(item)
        stop = ()
    if kind == "chat":
        messages = []
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": text})
        return Prompt("chat", messages=tuple(messages), max_tokens=max_tokens,
                      temperature=temperature, stop=stop)
    if kind == "completion" and style == "zero-shot" and not open_answer:
        stop = ("\n",)
    return Prompt("completion", text=text, max_tokens=max_tokens, temperature=temperature,
                  stop=stop)


def correct_answer_text(item: Mapping) -> str:
    """A reply that the item's scorer marks correct (used by scripted subjects)."""
    if item["choices"]:
        return str(item["answer"])
    return f"#### {item['answer']}"


def wrong_answer_text(item: Mapping) -> str:
    """A reply that the item's scorer marks wrong (used by scripted subjects)."""
    if item["choices"]:
        keys = letters(len(item["choices"]))
        return next(k for k in keys if k != str(item["answer"]))
    try:
        return f"#### {float(item['answer']) + 1:g}"
    except ValueError:
        return "#### none"


def items_frame(bank, item_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """Content of (some) bank items as a frame, for reports."""
    import pandas as pd

    ids = list(bank.item_ids if item_ids is None else item_ids)
    return pd.DataFrame([item_record(bank, i) for i in ids])
