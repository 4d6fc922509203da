"""In-process Hugging Face ``transformers`` subject, answering requests as lm-evaluation-harness.

``HFSubject("path/or/name", device="cuda", dtype="bfloat16")`` loads a causal LM and answers
the leaderboard's requests (:class:`~atlascat.content.requests.Request`) the way the harness's
``hf-causal-experimental`` model did at the Open LLM Leaderboard's commit (see
``shared/protocol/openllm_v1.md`` section 1):

- log-likelihood: trailing whitespace of the context moves to the continuation;
  ``ctx = tok(context)``, ``whole = tok(context + continuation)``, ``cont = whole[len(ctx):]``
  (the continuation is tokenized jointly with the context, then split; no BOS token,
  ``add_special_tokens=False``); the model reads ``(ctx + cont)[-(max_len+1):][:-1]`` and the
  score is the sum of the log-softmax at the continuation tokens;
- generation: greedy (``do_sample=False``, the model's generation config otherwise), at most
  ``max_gen_toks`` new tokens, the context truncated on the left to ``max_len - max_gen_toks``
  tokens, the text decoded without special tokens and cut before the first stop string (the
  request's ``until`` and the tokenizer's EOS string).

Requests that share a context (all choices of an item) are scored from ONE pass over that
context: the contexts of a batch run once (right-padded) with the key/value cache kept, then
every continuation runs on its context's cache rows (continuations batched, the context's padding
masked out, positions continuing after the real context). Requests whose context + continuation
exceed the model length are scored on their own, truncated as the harness does. Results equal
the per-request computation up to floating-point reassociation (``shared_prefix=False`` gives the
per-request computation itself).

A local GGUF file is converted once into the model cache (:mod:`atlascat.live.model_cache`:
float32 safetensors, config and tokenizer, keyed by the file's SHA-256) and every load, the first
included, reads that folder (``model_cache=false`` reads the GGUF file itself each time).

``torch`` and ``transformers`` are imported when a subject is created (extra ``atlascat[hf]``).
"""
from __future__ import annotations

import copy
import inspect
from typing import Any, Sequence

import numpy as np

from ..errors import AtlasError, ConfigError
from .toylm import cut_at_stop, harness_pair

__all__ = ["HFSubject", "hf_subject_from_spec", "find_gguf", "DTYPES"]

DTYPES = ("auto", "float32", "float16", "bfloat16", "float64")
_HUGE = 1000000000000000019884624838656  # transformers' "no limit" model_max_length


class HFSubjectError(AtlasError, RuntimeError):
    """The Hugging Face subject cannot be created or cannot answer."""


def _imports():
    try:
        import torch
        import transformers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise HFSubjectError(
            f"hf subjects need torch and transformers ({exc.name} is not installed): "
            "pip install 'atlascat[hf]'") from exc
    return torch, transformers


def _need_gguf() -> None:
    """transformers reads a GGUF checkpoint with the ``gguf`` package; without it, one line
    naming the extra that brings it (transformers' own ImportError would be a traceback)."""
    try:
        import gguf  # noqa: F401  (optional dependency, the 'hf' extra)
    except ImportError as exc:
        raise HFSubjectError("a GGUF checkpoint needs the gguf package (not installed): "
                             "pip install 'atlascat[hf]'") from exc


def find_gguf(model: Any, gguf_file: str | None = None) -> tuple[str, str] | None:
    """``(folder, file name)`` when ``model`` names a GGUF checkpoint, else None.

    A GGUF checkpoint is a ``.gguf`` file, or a folder holding one (``gguf_file`` picks one of
    several) and no ``config.json`` (a folder with a ``config.json`` is an ordinary
    transformers checkpoint, unless ``gguf_file`` is given). transformers then loads the model
    and its tokenizer from the GGUF file itself (``from_pretrained(folder, gguf_file=name)``,
    weights de-quantized), so no hand conversion is needed. Needs no torch.
    """
    from pathlib import Path

    if not isinstance(model, (str, Path)):
        return None
    path = Path(model).expanduser()
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            return None
        if gguf_file and gguf_file != path.name:
            raise ConfigError(f"gguf_file={gguf_file!r} but the model is the file {str(path)!r}")
        return str(path.parent), path.name
    if str(model).lower().endswith(".gguf"):
        raise HFSubjectError(f"GGUF file {str(model)!r} does not exist")
    if not path.is_dir():
        if gguf_file:  # a Hub repository and one of its GGUF files
            return str(model), gguf_file
        return None
    found = sorted(p.name for p in path.iterdir()
                   if p.is_file() and p.suffix.lower() == ".gguf")
    if gguf_file:
        if gguf_file not in found:
            raise HFSubjectError(f"{str(path)!r} has no GGUF file {gguf_file!r} "
                                 f"(it has: {', '.join(found) or 'none'})")
        return str(path), gguf_file
    if not found or (path / "config.json").is_file():
        return None
    if len(found) > 1:
        raise ConfigError(f"{str(path)!r} holds {len(found)} GGUF files ({', '.join(found)}): "
                          "name one, hf:FOLDER/FILE.gguf or hf:FOLDER,gguf_file=FILE.gguf")
    return str(path), found[0]


def _cached_gguf(transformers, gguf: tuple[str, str], kw: dict) -> str | None:
    """The model-cache folder of the local GGUF file ``gguf`` (``(folder, file name)``),
    converted first when it is missing or incomplete; None (the GGUF file is then read
    directly) for a Hub file or when the cache cannot be written."""
    import warnings
    from pathlib import Path

    from .model_cache import gguf_cache_dir, valid_folder, write_folder

    path = Path(gguf[0]) / gguf[1]
    if not path.is_file():
        return None
    folder, key = gguf_cache_dir(path)
    if valid_folder(folder, key):
        return str(folder)

    def convert(tmp: Path) -> None:
        mdl = transformers.AutoModelForCausalLM.from_pretrained(
            gguf[0], **_dtype_arg(transformers, "float32"), **kw)
        tok = transformers.AutoTokenizer.from_pretrained(gguf[0], **kw)
        # the weights are plain de-quantized tensors: transformers refuses to save a model it
        # loaded from GGUF while the GGUF quantizer is attached
        mdl.hf_quantizer = None
        if getattr(mdl.config, "quantization_config", None) is not None:
            del mdl.config.quantization_config
        mdl.save_pretrained(tmp)
        tok.save_pretrained(tmp)

    try:
        return str(write_folder(folder, key, convert))
    except OSError as exc:
        warnings.warn(f"the model cache {str(folder)!r} cannot be written ({exc}); "
                      "reading the GGUF file itself", stacklevel=3)
        return None


def _dtype_arg(transformers, dtype) -> dict:
    """``{"dtype": dtype}`` (transformers < 4.56 names the argument ``torch_dtype``)."""
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype" if (major, minor) >= (4, 56) else "torch_dtype": dtype}


def _new_cache(model):
    """An empty ``DynamicCache`` for ``model`` (the form transformers supports; the legacy
    tuple-of-tuples ``past_key_values`` is deprecated), or None on a transformers without one
    (the model then makes its own)."""
    try:
        from transformers import DynamicCache
    except ImportError:  # pragma: no cover - very old transformers
        return None
    try:
        return DynamicCache(config=model.config)  # sliding-window layers need the config
    except TypeError:  # transformers < 4.56: no config argument
        return DynamicCache()


def _select_cache(cache, idx):
    """A cache holding rows ``idx`` of ``cache`` (``cache`` itself is left as it is)."""
    if isinstance(cache, tuple):
        rows = tuple(tuple(t[idx] for t in layer) for layer in cache)
        try:  # hand the model a Cache object, not the deprecated tuple form
            from transformers import DynamicCache

            return DynamicCache.from_legacy_cache(rows)
        except (ImportError, AttributeError):  # pragma: no cover - depends on transformers
            return rows
    sub = copy.copy(cache)
    if hasattr(cache, "layers"):
        sub.layers = [copy.copy(layer) for layer in cache.layers]
    if hasattr(cache, "key_cache"):
        sub.key_cache = list(cache.key_cache)
        sub.value_cache = list(cache.value_cache)
    sub.batch_select_indices(idx)
    return sub


class HFSubject:
    """A ``transformers`` causal LM answering log-likelihood and generation requests.

    Parameters
    ----------
    model : a local path or Hub name, or an already loaded ``PreTrainedModel``
    tokenizer : a tokenizer (default: loaded from ``model``)
    device : "cpu", "cuda", "cuda:1", ... (default: "cuda" when available, else "cpu")
    dtype : "auto" (the checkpoint's dtype on GPU, float32 on CPU), "float32", "float16",
        "bfloat16" or "float64"
    batch_size : at most this many sequences per forward pass (contexts in the first stage of
        shared-prefix scoring, continuations in the second, whole requests otherwise)
    max_batch_tokens : and at most this many (padded) tokens per forward pass (one sequence
        always runs, whatever its length)
    generation_batch_size : generation requests run together (default 1: one at a time, as
        the harness; more is faster on a GPU, equal up to floating-point ties)
    max_length : the model length (default as the harness: the config's ``n_positions`` /
        ``max_position_embeddings`` / ``n_ctx``, else the tokenizer's, else 2048)
    shared_prefix : score each distinct context once (default) or every request on its own
    name : the model name reported in runs (default: ``model``)
    gguf_file : the GGUF file in the folder ``model`` (default: found; see :func:`find_gguf`:
        ``model`` may also be a ``.gguf`` file or a folder holding one)
    model_cache : a local GGUF file is converted once and loaded from the model cache
        (default; :mod:`atlascat.live.model_cache`), or parsed on every load (False)
    revision, trust_remote_code, local_files_only : passed to ``from_pretrained``
    """

    kind = "loglikelihood"

    def __init__(self, model: Any, tokenizer: Any = None, *, device: str | None = None,
                 dtype: str = "auto", batch_size: int = 16, max_batch_tokens: int = 16384,
                 generation_batch_size: int = 1, max_length: int | None = None,
                 shared_prefix: bool = True, name: str | None = None,
                 revision: str | None = None, trust_remote_code: bool = False,
                 local_files_only: bool = False, gguf_file: str | None = None,
                 model_cache: bool = True):
        torch, transformers = _imports()
        self._torch = torch
        if dtype not in DTYPES:
            raise ConfigError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
        if int(batch_size) < 1:
            raise ConfigError(f"batch_size must be >= 1 (got {batch_size!r})")
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ConfigError(f"device {device!r} asked but torch sees no CUDA device; "
                              "use --device cpu or install a CUDA build of torch")
        self.batch_size = int(batch_size)
        self.max_batch_tokens = int(max_batch_tokens)
        self.generation_batch_size = int(generation_batch_size)
        self.shared_prefix = bool(shared_prefix)
        self.revision = revision
        kw = {"revision": revision, "trust_remote_code": trust_remote_code,
              "local_files_only": local_files_only}
        gguf = find_gguf(model, gguf_file)
        self.gguf_file = gguf[1] if gguf else None
        source = model
        #: the folder the weights were read from when a GGUF file went through the model cache
        self.loaded_from: str | None = None
        if gguf:
            _need_gguf()
            source = gguf[0]
            kw["gguf_file"] = gguf[1]
            if model_cache and isinstance(model, str) and tokenizer is None:
                cached = _cached_gguf(transformers, gguf, kw)
                if cached is not None:
                    source, self.loaded_from = cached, cached
                    kw.pop("gguf_file")
        if isinstance(model, str):
            self.model_name = model
            if dtype == "auto":
                torch_dtype = "auto" if self.device.type == "cuda" else torch.float32
            else:
                torch_dtype = getattr(torch, dtype)
            try:
                mdl = transformers.AutoModelForCausalLM.from_pretrained(
                    source, **_dtype_arg(transformers, torch_dtype), **kw)
            except (OSError, ValueError) as exc:
                raise HFSubjectError(f"cannot load the model {model!r}: "
                                     f"{str(exc).splitlines()[0]}") from exc
        else:
            mdl = model
            self.model_name = getattr(getattr(mdl, "config", None), "_name_or_path", "") or \
                type(mdl).__name__
            if dtype != "auto":
                mdl = mdl.to(getattr(torch, dtype))
        if tokenizer is None:
            try:
                tokenizer = transformers.AutoTokenizer.from_pretrained(
                    source if isinstance(model, str) else self.model_name, **kw)
            except (OSError, ValueError) as exc:
                raise HFSubjectError(f"cannot load the tokenizer of {self.model_name!r}: "
                                     f"{str(exc).splitlines()[0]}") from exc
        self.model = mdl.to(self.device).eval()
        self.tokenizer = tokenizer
        self.dtype = str(next(self.model.parameters()).dtype).replace("torch.", "")
        self.name = name or self.model_name
        self.max_length = int(max_length) if max_length else self._default_max_length()
        self.eos_token_id = tokenizer.eos_token_id
        self.eos_token = tokenizer.eos_token
        pad = tokenizer.pad_token_id
        self.pad_token_id = pad if pad is not None else (self.eos_token_id or 0)
        params = inspect.signature(self.model.forward).parameters
        self._keep_arg = next((a for a in ("logits_to_keep", "num_logits_to_keep")
                               if a in params), None)
        # transformers >= 5.x names the key/value cache `cache` (`past_key_values` deprecated)
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        self.cache_key = f"hf:{self.model_name}@{revision or 'main'}:{self.dtype}" + (
            f":gguf={self.gguf_file}"  # a folder's GGUF file (a .gguf path names its file)
            if self.gguf_file and not self.model_name.endswith(self.gguf_file) else "")
        self.stats = {"forward_passes": 0, "tokens_run": 0}

    @classmethod
    def from_spec(cls, spec: str, *, device: str | None = None, dtype: str | None = None,
                  batch_size: int | None = None, max_batch_tokens: int | None = None,
                  generation_batch_size: int | None = None, max_length: int | None = None, shared_prefix: bool | None = None,
                  revision: str | None = None, name: str | None = None,
                  trust_remote_code: bool | None = None,
                  local_files_only: bool | None = None,
                  gguf_file: str | None = None,
                  model_cache: bool | None = None) -> "HFSubject":
        """From the text after ``hf:`` (see :func:`hf_subject_from_spec`); the keyword
        arguments are defaults that options in the spec override."""
        kw = dict(device=device, dtype=dtype, batch_size=batch_size,
                  max_batch_tokens=max_batch_tokens, generation_batch_size=generation_batch_size,
                  max_length=max_length,
                  shared_prefix=shared_prefix, revision=revision, name=name,
                  trust_remote_code=trust_remote_code, local_files_only=local_files_only,
                  gguf_file=gguf_file, model_cache=model_cache)
        return hf_subject_from_spec(spec, **kw)

    # ------------------------------------------------------------------ basics
    def _default_max_length(self) -> int:
        cfg = self.model.config
        for attr in ("n_positions", "max_position_embeddings", "n_ctx"):
            if getattr(cfg, attr, None):
                return int(getattr(cfg, attr))
        mml = getattr(self.tokenizer, "model_max_length", None)
        if mml and mml != _HUGE and mml < 10**9:
            return int(mml)
        return 2048

    def describe(self) -> dict:
        return {"type": "hf", "model": self.model_name, "name": self.name,
                "revision": self.revision,
                "device": str(self.device), "dtype": self.dtype, "batch_size": self.batch_size,
                "max_batch_tokens": self.max_batch_tokens,
                "generation_batch_size": self.generation_batch_size,
                "max_length": self.max_length, "shared_prefix": self.shared_prefix,
                **({"gguf_file": self.gguf_file} if self.gguf_file else {}),
                "protocol": "lm-evaluation-harness loglikelihood (joint tokenization, no BOS)"}

    def __repr__(self) -> str:
        return f"HFSubject({self.model_name!r}, device={str(self.device)!r}, dtype={self.dtype!r})"

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """The harness's ``(context_enc, continuation_enc)``."""
        context, continuation = harness_pair(context, continuation)
        if context == "":
            return [self.eos_token_id], self.encode(continuation)
        ctx = self.encode(context)
        whole = self.encode(context + continuation)
        return ctx, whole[len(ctx):]

    def _forward(self, input_ids, attention_mask=None, keep=None, **kw):
        """logits for ``input_ids`` (only at positions ``keep`` (1-d index tensor) when the model
        supports ``logits_to_keep``; then returns ``(logits, True)``)."""
        args = dict(input_ids=input_ids, attention_mask=attention_mask, **kw)
        kept = False
        if keep is not None and self._keep_arg is not None:
            args[self._keep_arg] = keep
            kept = True
        self.stats["forward_passes"] += 1
        self.stats["tokens_run"] += int(input_ids.numel())
        out = self.model(**args)
        return out, kept

    def _batches(self, widths: list[int]):
        """Consecutive ``(start, stop)`` ranges of sequences (sorted longest first) that fit
        ``batch_size`` rows and ``max_batch_tokens`` padded tokens, and no row shorter than
        half the batch's width (padding would cost more than a separate pass)."""
        start = 0
        while start < len(widths):
            stop = start + 1
            while (stop < len(widths) and stop - start < self.batch_size
                   and (stop + 1 - start) * widths[start] <= self.max_batch_tokens
                   and 2 * widths[stop] >= widths[start]):
                stop += 1
            yield start, stop
            start = stop

    def _gather(self, logits, rows, cols, toks):
        """log-softmax of ``logits[rows[n], cols[n]]`` at token ``toks[n]`` (only the rows used
        are normalized), as float64 numpy."""
        torch = self._torch
        if not toks:
            return np.zeros(0)
        dev = logits.device
        sel = logits[torch.as_tensor(rows, device=dev), torch.as_tensor(cols, device=dev)]
        lp = self._logprobs(sel)
        n = len(toks)
        tk = torch.as_tensor(toks, device=dev)
        self._last_hits = (lp.argmax(dim=-1) == tk).cpu().numpy()  # greedy token at each position
        return lp[torch.arange(n, device=dev), tk].double().cpu().numpy()

    def _logprobs(self, logits):
        torch = self._torch
        dt = torch.float64 if logits.dtype == torch.float64 else torch.float32
        return torch.log_softmax(logits.to(dt), dim=-1)

    # ------------------------------------------------------------------ scoring
    def loglikelihood(self, requests: Sequence) -> list[float]:
        """Sum of log p(continuation | context) per request, as the harness computes it."""
        return self.loglikelihood_greedy(requests)[0]

    def loglikelihood_greedy(self, requests: Sequence) -> tuple[list[float], list[bool]]:
        """``(log-likelihoods, is_greedy)``: the harness's pair, ``is_greedy`` true when every
        continuation token is the argmax of its position (the scores use only the first)."""
        torch = self._torch
        pairs = []
        enc_cache: dict[str, list[int]] = {}
        for r in requests:
            if r.continuation is None:
                raise ConfigError("a loglikelihood request has no continuation")
            ctx, cont = harness_pair(r.context, r.continuation)
            if ctx == "":
                pairs.append(([self.eos_token_id], self.encode(cont)))
                continue
            if ctx not in enc_cache:
                enc_cache[ctx] = self.encode(ctx)
            c = enc_cache[ctx]
            pairs.append((c, self.encode(ctx + cont)[len(c):]))
        out = [0.0] * len(pairs)
        self._greedy_out = [True] * len(pairs)
        alone, groups = [], {}
        for i, (c, k) in enumerate(pairs):
            if not k:
                continue  # nothing to score: the harness sums over no tokens
            if self.shared_prefix and len(c) + len(k) <= self.max_length:
                groups.setdefault(tuple(c), []).append(i)
            else:
                alone.append(i)
        # a context asked once gains nothing from a separate pass
        for key in [g for g, idx in groups.items() if len(idx) == 1]:
            alone.extend(groups.pop(key))
        with torch.inference_mode():
            if alone:
                self._score_whole(pairs, alone, out)
            if groups:
                self._score_shared(pairs, groups, out)
        return out, self._greedy_out

    def _hit(self, i: int, a: int, b: int) -> None:
        """Request ``i`` stays greedy only if positions ``a:b`` of the last gather were."""
        self._greedy_out[i] = self._greedy_out[i] and bool(self._last_hits[a:b].all())

    def _score_whole(self, pairs, idx: list[int], out: list[float]) -> None:
        """Each request on its own: the harness's computation, right-padded batches."""
        torch = self._torch
        seqs = []
        for i in idx:
            c, k = pairs[i]
            inp = (c + k)[-(self.max_length + 1):][:-1]
            seqs.append((i, inp, k))
        seqs.sort(key=lambda s: -len(s[1]))
        for b0, b1 in self._batches([len(s[1]) for s in seqs]):
            batch = seqs[b0:b1]
            width = len(batch[0][1])
            ids = torch.full((len(batch), width), self.pad_token_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for j, (_, inp, _) in enumerate(batch):
                ids[j, :len(inp)] = torch.tensor(inp)
                mask[j, :len(inp)] = 1
            rows, cols, toks = [], [], []
            for j, (_, inp, k) in enumerate(batch):
                n = len(inp)
                for t, tok in enumerate(k):
                    rows.append(j)
                    cols.append(n - len(k) + t)
                    toks.append(tok)
            keep = torch.tensor(sorted(set(cols)), dtype=torch.long)
            res, kept = self._forward(ids.to(self.device), mask.to(self.device), keep=keep.to(self.device))
            logits = res.logits
            if kept:
                where = {int(p): q for q, p in enumerate(keep.tolist())}
                cols = [where[c] for c in cols]
            vals = self._gather(logits, rows, cols, toks)
            at = 0
            for j, (i, _, k) in enumerate(batch):
                out[i] = float(vals[at:at + len(k)].sum())
                self._hit(i, at, at + len(k))
                at += len(k)

    def _score_shared(self, pairs, groups: dict, out: list[float]) -> None:
        """One pass per distinct context (cache kept), then the continuations on its cache."""
        torch = self._torch
        order = sorted(groups.items(), key=lambda kv: -len(kv[0]))
        for b0, b1 in self._batches([len(c) for c, _ in order]):
            chunk = order[b0:b1]
            lens = [len(c) for c, _ in chunk]
            width = max(lens)
            ids = torch.full((len(chunk), width), self.pad_token_id, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for g, (c, _) in enumerate(chunk):
                ids[g, :len(c)] = torch.tensor(c)
                mask[g, :len(c)] = 1
            last = [n - 1 for n in lens]
            keep = torch.tensor(sorted(set(last)), dtype=torch.long)
            ids, mask = ids.to(self.device), mask.to(self.device)
            fresh = _new_cache(self.model)
            res, kept = self._forward(ids, mask, keep=keep.to(self.device), use_cache=True,
                                      **({} if fresh is None else {self._cache_arg: fresh}))
            cache = res.cache if self._cache_arg == "cache" else res.past_key_values
            where = {int(p): q for q, p in enumerate(keep.tolist())} if kept else None
            # first continuation token from each context's last position
            members = [(g, i) for g, (_, idx) in enumerate(chunk) for i in idx]
            first = self._gather(res.logits, [g for g, _ in members],
                                 [(where[last[g]] if kept else last[g]) for g, _ in members],
                                 [pairs[i][1][0] for _, i in members])
            for n, ((g, i), v) in enumerate(zip(members, first)):
                out[i] = float(v)
                self._hit(i, n, n + 1)
            del res
            # the rest of each continuation, batched on its context's cache rows
            rest = [(g, i) for g, i in members if len(pairs[i][1]) > 1]
            rest.sort(key=lambda gi: -len(pairs[gi[1]][1]))
            # the cache rows count as tokens of the batch too
            for s0, s1 in self._batches([width + len(pairs[i][1]) - 1 for _, i in rest]):
                sub = rest[s0:s1]
                lc = max(len(pairs[i][1]) - 1 for _, i in sub)
                cids = torch.full((len(sub), lc), self.pad_token_id, dtype=torch.long)
                cmask = torch.zeros((len(sub), lc), dtype=torch.long)
                pos = torch.zeros((len(sub), lc), dtype=torch.long)
                for j, (g, i) in enumerate(sub):
                    k = pairs[i][1][:-1]
                    cids[j, :len(k)] = torch.tensor(k)
                    cmask[j, :len(k)] = 1
                    pos[j] = lens[g] + torch.arange(lc)
                gi = torch.tensor([g for g, _ in sub], device=self.device)
                sub_cache = _select_cache(cache, gi)
                full_mask = torch.cat([mask[gi], cmask.to(self.device)], dim=1)
                extra = {"position_ids": pos.to(self.device), self._cache_arg: sub_cache,
                         "use_cache": True}
                res2, _ = self._forward(cids.to(self.device), full_mask, **extra)
                r_rows, r_cols, r_toks = [], [], []
                for j, (g, i) in enumerate(sub):
                    k = pairs[i][1]
                    for t in range(1, len(k)):
                        r_rows.append(j)
                        r_cols.append(t - 1)
                        r_toks.append(k[t])
                vals = self._gather(res2.logits, r_rows, r_cols, r_toks)
                at = 0
                for j, (g, i) in enumerate(sub):
                    n = len(pairs[i][1]) - 1
                    out[i] += float(vals[at:at + n].sum())
                    self._hit(i, at, at + n)
                    at += n
                del res2, sub_cache
            del cache

    # ------------------------------------------------------------------ OpenAI-style scores
    def _offsets(self, text: str, ids: list[int]) -> list[int]:
        """Start of each token in ``text``: the end of the token before it (so leading spaces
        that a tokenizer trims from its offsets stay with their token)."""
        try:
            enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
            ends = [int(e) for _, e in enc["offset_mapping"]]
        except (NotImplementedError, ValueError, KeyError):  # slow tokenizer
            ends = [len(self.tokenizer.decode(ids[:i + 1])) for i in range(len(ids))]
        starts, prev = [], 0
        for e in ends:
            starts.append(min(prev, len(text)))
            prev = max(prev, e)
        return starts

    def _sequence_logprobs(self, ids: list[int], top: int = 0):
        torch = self._torch
        if len(ids) > self.max_length:
            raise HFSubjectError(f"the text has {len(ids)} tokens, more than the model's "
                                 f"{self.max_length}")
        if len(ids) < 2:
            return [None] * len(ids), [None] * len(ids)
        with torch.inference_mode():
            res, _ = self._forward(torch.tensor([ids], device=self.device))
            lp = self._logprobs(res.logits[0, :-1])
            nxt = torch.tensor(ids[1:], device=lp.device)
            vals = lp[torch.arange(len(ids) - 1, device=lp.device), nxt].double().cpu().tolist()
            tops = [None]
            if top > 0:
                v, ix = torch.topk(lp, min(int(top), lp.shape[-1]), dim=-1)
                for vrow, irow in zip(v.double().cpu().tolist(), ix.cpu().tolist()):
                    tops.append({self.tokenizer.decode([t]): float(x) for t, x in zip(irow, vrow)})
        return [None] + [float(x) for x in vals], tops

    def token_logprobs(self, text: str) -> tuple[list[str], list[float | None], list[int]]:
        """``(tokens, logprobs, offsets)`` of ``text`` tokenized whole (no BOS), as an OpenAI
        completions server echoes a prompt: the first token's log-probability is ``None``;
        token strings are the text between consecutive offsets."""
        ids = self.encode(text)
        offsets = self._offsets(text, ids)
        bounds = offsets[1:] + [len(text)]
        tokens = [text[a:b] for a, b in zip(offsets, bounds)]
        logprobs, _ = self._sequence_logprobs(ids)
        return tokens, logprobs, offsets

    def top_logprobs(self, text: str, n: int) -> list[dict[str, float] | None]:
        """The ``n`` most likely tokens at every position of ``text`` (``None`` first)."""
        _, tops = self._sequence_logprobs(self.encode(text), top=n)
        return tops

    # ------------------------------------------------------------------ generation
    def _generate_rows(self, rows: list[list[int]], max_new: int, stops: list[str]):
        """Greedy new ids for each context in ``rows`` (left-padded when more than one); a row
        stops at EOS or once its decoded new text holds a stop string."""
        torch, transformers = self._torch, _imports()[1]
        tok = self.tokenizer
        width = max(len(r) for r in rows)

        class _Stop(transformers.StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):
                done = [any(s in tok.decode(input_ids[j, width:], skip_special_tokens=True)
                            for s in stops) for j in range(input_ids.shape[0])]
                return torch.tensor(done, dtype=torch.bool, device=input_ids.device)

        x = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for j, r in enumerate(rows):
            x[j, width - len(r):] = torch.tensor(r)
            mask[j, width - len(r):] = 1
        x, mask = x.to(self.device), mask.to(self.device)
        with torch.inference_mode():
            gen = self.model.generate(
                x, attention_mask=mask, max_new_tokens=int(max_new), do_sample=False,
                pad_token_id=self.pad_token_id,
                stopping_criteria=transformers.StoppingCriteriaList([_Stop()]))
        out = []
        for j in range(len(rows)):
            new = gen[j, width:].tolist()
            if self.eos_token_id is not None and self.eos_token_id in new:
                new = new[:new.index(self.eos_token_id) + 1]
            out.append(new)
        return out

    def generate_ids(self, ids: list[int], max_new: int, until: Sequence[str] = ()) -> list[int]:
        """Greedy new token ids after ``ids`` (at most ``max_new``; stops at EOS or once the
        decoded new text holds a stop string)."""
        if max_new <= 0:
            return []
        return self._generate_rows([list(ids)], max_new, [u for u in until if u])[0]

    def generate_until(self, requests: Sequence) -> list[str]:
        """Greedy generation, cut before the first stop string (see the module docstring).
        One request at a time, as the harness did, unless ``generation_batch_size > 1`` (then
        requests with the same stop strings and length run together, left-padded: faster on a
        GPU, and equal up to floating-point ties)."""
        results: list = [None] * len(requests)
        groups: dict = {}
        for i, r in enumerate(requests):
            stops = [u for u in tuple(r.until) if u] + ([self.eos_token] if self.eos_token else [])
            groups.setdefault((tuple(stops), int(r.max_gen_toks)), []).append(i)
        for (stops, max_gen), idx in groups.items():
            ctxs = []
            for i in idx:
                c = requests[i].context
                ids = self.encode(c) if c else [self.eos_token_id]
                ctxs.append(ids[-max(self.max_length - max_gen, 1):])
            step = max(1, self.generation_batch_size)
            for b in range(0, len(idx), step):
                news = (self._generate_rows(ctxs[b:b + step], max_gen, list(stops))
                        if max_gen > 0 else [[] for _ in idx[b:b + step]])
                for i, new in zip(idx[b:b + step], news):
                    text = self.tokenizer.decode(new, skip_special_tokens=True)
                    results[i] = cut_at_stop(text, stops)
        return results

    # ------------------------------------------------------------------ token-id prompts
    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))

    def ids_logprobs(self, ids: Sequence[int], n_top: int = 0):
        """For a server given a prompt of token ids: ``(token strings, logprobs, top_logprobs)``
        of ``ids`` (first entries ``None``)."""
        logprobs, tops = self._sequence_logprobs(list(ids), top=n_top)
        return [self.tokenizer.decode([t]) for t in ids], logprobs, tops


def hf_subject_from_spec(spec: str, **kw) -> HFSubject:
    """``HFSubject`` from ``"PATH_OR_NAME[,key=value,...]"`` (keys: device, dtype, batch_size,
    max_batch_tokens, generation_batch_size, max_length, shared_prefix, revision, trust_remote_code, local_files_only,
    name, gguf_file, model_cache); keyword arguments are defaults that the spec's own options override.
    ``PATH`` may be a ``.gguf`` file or a folder holding one (:func:`find_gguf`)."""
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts or "=" in parts[0]:
        raise ConfigError(f"hf subject spec {spec!r} must start with a model path or name, "
                          "e.g. hf:gpt2,dtype=float32")
    model, opts = parts[0], {}
    casts = {"batch_size": int, "max_batch_tokens": int, "generation_batch_size": int,
             "max_length": int, "shared_prefix": _bool,
             "trust_remote_code": _bool, "local_files_only": _bool, "model_cache": _bool}
    for p in parts[1:]:
        key, sep, value = p.partition("=")
        key = key.strip()
        known = ("device", "dtype", "batch_size", "max_batch_tokens", "generation_batch_size",
                 "max_length",
                 "shared_prefix", "revision", "trust_remote_code", "local_files_only", "name",
                 "gguf_file", "model_cache")
        if not sep or key not in known:
            raise ConfigError(f"hf subject option {p!r} is not key=value with a known key "
                              f"({', '.join(known)})")
        opts[key] = casts.get(key, str)(value.strip())
    return HFSubject(model, **{**{k: v for k, v in kw.items() if v is not None}, **opts})


def _bool(v: str) -> bool:
    if v.lower() in ("1", "true", "yes"):
        return True
    if v.lower() in ("0", "false", "no"):
        return False
    raise ConfigError(f"{v!r} is not a boolean (true/false)")
