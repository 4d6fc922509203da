"""Any lm-evaluation-harness model backend as an ATLAS subject (``--subject lmeval:...``).

``LMEvalSubject("hf,pretrained=EleutherAI/pythia-160m,dtype=float32")`` builds the harness's
model with ``lm_eval.api.registry.get_model(name).create_from_arg_string(args, extra)`` and
passes every round's requests to its ``LM.loglikelihood`` / ``LM.generate_until`` as
``lm_eval.api.instance.Instance`` objects, in one call per round, so the harness does the
batching, dtypes, devices and token boundary it is trusted for (``hf``, ``vllm``,
``local-completions``, ... any registered name). An ``LM`` object already built can be given
instead of a spec.

``lm_eval`` is imported when a subject is created (extra ``atlascat[lmeval]``).
"""
from __future__ import annotations

from typing import Any, Sequence

from ..errors import AtlasError, ConfigError

__all__ = ["LMEvalSubject", "parse_lmeval_spec"]


class LMEvalError(AtlasError, RuntimeError):
    """lm-evaluation-harness is missing or its model cannot be built."""


#: lm_eval model types that run torch in process and default to "cuda" themselves
_TORCH_BACKENDS = ("hf", "hf-auto", "huggingface", "hf-multimodal", "mamba_ssm")


#: lm-evaluation-harness's install extra that brings a model type's packages (since lm-eval
#: 0.4.9 torch, transformers and accelerate come with ``lm-eval[hf]`` only)
_LMEVAL_EXTRAS = {**{t: "hf" for t in _TORCH_BACKENDS}, "vllm": "vllm",
                  "local-completions": "api", "local-chat-completions": "api",
                  "openai-completions": "api", "openai-chat-completions": "api"}


def _missing_package(model_type: str, default: str) -> str:
    """What to install when lm_eval's model ``model_type`` fails to import: its lm-eval extra
    (``pip install 'lm-eval[hf]'``) when it has one, else ``default``."""
    extra = _LMEVAL_EXTRAS.get(model_type)
    return f"pip install 'lm-eval[{extra}]'" if extra else default


def _default_device(model_type: str) -> str | None:
    """``"cpu"`` for an in-process torch backend when torch has no CUDA (the harness's own
    default, ``"cuda"``, fails there with "Torch not compiled with CUDA enabled"); else None
    (the backend chooses)."""
    if model_type not in _TORCH_BACKENDS:
        return None
    try:
        import torch
    except ImportError:
        return None
    return None if torch.cuda.is_available() else "cpu"


def _lm_eval():
    try:
        from lm_eval.api.instance import Instance
        from lm_eval.api import registry
    except ImportError as exc:
        raise LMEvalError("lmeval subjects need lm-evaluation-harness (lm_eval is not "
                          "installed): pip install 'atlascat[lmeval]'") from exc
    return registry, Instance


def parse_lmeval_spec(spec: str) -> tuple[str, str]:
    """``"hf,pretrained=gpt2,dtype=float32"`` -> ``("hf", "pretrained=gpt2,dtype=float32")``
    (``"hf:pretrained=..."`` is read the same way)."""
    spec = spec.strip()
    if spec.startswith("lmeval:"):
        spec = spec[len("lmeval:"):]
    name, _, args = spec.partition(",")
    if ":" in name and "=" not in name:
        name, _, first = name.partition(":")
        args = first + ("," + args if args else "")
    name = name.strip()
    if not name or "=" in name:
        raise ConfigError(f"lmeval subject spec {spec!r} must start with a model type, e.g. "
                          "lmeval:hf,pretrained=gpt2 or lmeval:vllm,pretrained=...")
    return name, args.strip()


class LMEvalSubject:
    """Wraps an lm-evaluation-harness ``LM`` (see the module docstring).

    Parameters
    ----------
    spec : ``"MODEL_TYPE,key=value,..."`` (the harness's ``--model`` and ``--model_args``), or
        an ``lm_eval.api.model.LM`` instance
    batch_size, device : passed to ``create_from_arg_string`` as its extra config when given
    name : model name reported in runs (default: the ``pretrained``/``model`` argument)
    gen_kwargs : extra generation settings merged into every ``generate_until`` request
    """

    kind = "loglikelihood"

    def __init__(self, spec: Any, *, batch_size: int | str | None = None,
                 device: str | None = None, name: str | None = None,
                 gen_kwargs: dict | None = None):
        registry, self._Instance = _lm_eval()
        self.gen_kwargs = dict(gen_kwargs or {})
        if isinstance(spec, str):
            self.model_type, self.model_args = parse_lmeval_spec(spec)
            try:
                cls = registry.get_model(self.model_type)
            except ValueError as exc:
                raise LMEvalError(f"lm_eval has no model type {self.model_type!r}: "
                                  f"{str(exc).splitlines()[0][:300]}") from exc
            except ImportError as exc:
                how = _missing_package(self.model_type, f"pip install {exc.name}")
                raise LMEvalError(f"lm_eval model {self.model_type!r} needs a package that is "
                                  f"not installed ({exc.name}): {how}") from exc
            extra = {}
            if batch_size is not None:
                extra["batch_size"] = batch_size
            if device is None and "device=" not in self.model_args:
                device = _default_device(self.model_type)
            if device is not None:
                extra["device"] = device
            try:
                self.lm = cls.create_from_arg_string(self.model_args, extra or None)
            except ImportError as exc:
                why = exc.name or str(exc).splitlines()[0][:200]
                how = _missing_package(self.model_type, "see lm-evaluation-harness's "
                                       "install extras, e.g. pip install 'lm-eval[api]'")
                raise LMEvalError(f"lm_eval model {self.model_type!r} needs a package that is "
                                  f"not installed ({why}): {how}") from exc
            args = dict(kv.split("=", 1) for kv in self.model_args.split(",") if "=" in kv)
            default = args.get("pretrained") or args.get("model") or self.model_type
        else:
            self.lm = spec
            self.model_type, self.model_args = type(spec).__name__, ""
            default = type(spec).__name__
        self.name = name or default
        self.cache_key = f"lmeval:{self.model_type}:{self.model_args}"
        self.calls = 0

    @classmethod
    def from_spec(cls, spec: str, *, batch_size: int | str | None = None,
                  device: str | None = None, name: str | None = None) -> "LMEvalSubject":
        """From the text after ``lmeval:``, e.g. ``"hf,pretrained=gpt2,dtype=float32"``."""
        return cls(spec, batch_size=batch_size, device=device, name=name)

    def describe(self) -> dict:
        # model_args may carry a URL or key: drop anything that looks like a secret
        args = ",".join(kv for kv in self.model_args.split(",")
                        if kv and not kv.lower().startswith(("api_key", "token", "key")))
        return {"type": "lmeval", "model_type": self.model_type, "model_args": args,
                "name": self.name,
                "protocol": "lm-evaluation-harness LM interface"}

    def __repr__(self) -> str:
        return f"LMEvalSubject({self.model_type!r}, {self.model_args!r})"

    def _instances(self, kind: str, args: list[tuple]) -> list:
        return [self._Instance(request_type=kind, doc={}, arguments=a, idx=0,
                               metadata=("atlas", i, 1), doc_id=i, task_name="atlas",
                               repeats=1)
                for i, a in enumerate(args)]

    def loglikelihood(self, requests: Sequence) -> list[float]:
        """``LM.loglikelihood`` on ``(context, continuation)`` instances; the first element of
        each result (the log-likelihood)."""
        if not requests:
            return []
        for r in requests:
            if r.continuation is None:
                raise ConfigError("a loglikelihood request has no continuation")
        inst = self._instances("loglikelihood", [(r.context, r.continuation) for r in requests])
        self.calls += 1
        res = self.lm.loglikelihood(inst)
        return [float(x[0] if isinstance(x, (tuple, list)) else x) for x in res]

    def generate_until(self, requests: Sequence) -> list[str]:
        """``LM.generate_until`` with ``{"until": [...], "max_gen_toks": N, "do_sample": False}``."""
        if not requests:
            return []
        args = []
        for r in requests:
            kw = {"until": list(r.until), "max_gen_toks": int(r.max_gen_toks),
                  "do_sample": False}
            kw.update(self.gen_kwargs)
            args.append((r.context, kw))
        self.calls += 1
        return [str(x) for x in self.lm.generate_until(self._instances("generate_until", args))]
