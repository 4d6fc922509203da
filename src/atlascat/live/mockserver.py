"""A scripted OpenAI-compatible HTTP server, for tests, demos and checking a setup offline.

It speaks ``POST /v1/chat/completions`` and ``POST /v1/completions`` (and ``GET /v1/models``),
recognizes which bank item a prompt asks (by its question text) and answers it correctly iff
``item_uniform(seed, item) < P_item(theta)`` under the bank: exactly the policy of
:class:`~atlascat.live.subjects.SimulatedSubject`, so a live run against it must reproduce an
in-process simulated run with the same seeds.

Faults are injected by a hook ``fault(n, item_id, times_seen) -> action`` called for every
completion request (``n`` counts requests from 1, ``times_seen`` how often this item was
requested before): ``None`` (answer), ``"429"`` (``Retry-After: 0``; ``"429:S"``: ``Retry-After:
S``), ``"500"``, ``"malformed"`` (200 with a broken
body), ``"hang"`` (sleep ``hang_s`` before answering), ``"drop"`` (close without a reply),
``"cut"`` (the headers and half the body, then the connection closed: a reply cut mid-way) or
``"nologprobs"`` (a log-likelihood reply with ``logprobs: null``, as one bad reply of a proxy),
``"400"`` (HTTP 400: the prompt is longer than the context, :data:`CONTEXT_400`), ``"404"``
(a model name it does not serve) or
``"error200"`` (HTTP 200 with an ``{"error": ...}`` body; ``"error200-400"``: its ``code`` 400
and the message of ``"400"``).
Every request is appended to :attr:`MockOpenAIServer.log` (with its JSON ``body``); :attr:`max_in_flight` is the
largest number of completion requests it was serving at once.

Language-model mode (log-likelihood scoring)
--------------------------------------------
``POST /v1/completions`` with ``echo=true`` and ``logprobs=N`` (``max_tokens=0``) is answered
like vLLM / OpenAI's legacy API: ``choices[i].logprobs = {tokens, token_logprobs, text_offset,
top_logprobs}`` for the prompt (first token's log-probability ``None``), computed by ``lm``, any
object with ``token_logprobs(text) -> (tokens, logprobs, offsets)`` (optionally
``top_logprobs(text, n)`` and ``generate_until(requests)``): a
:class:`~atlascat.live.toylm.ToyLM` by default, or an :class:`~atlascat.live.hf.HFSubject`.
``prompt`` may be a string or a list of strings (one choice each), or token ids (a list of
integers, or a list of such lists) when ``lm`` works on ids (``HFSubject``: then the scores are
those of exactly these tokens, as lm-evaluation-harness's ``local-completions`` sends them).
With ``max_tokens > 0`` the lm generates greedily (``stop`` honoured). When ``lm`` is given (or no bank), every completion and
chat request is answered by the lm; otherwise only echo+logprobs requests are.
``prompt_logprobs="none"`` behaves like llama.cpp's server (echo ignored, ``logprobs: null``
for the prompt); ``"null"`` echoes the prompt tokens with every ``token_logprobs`` entry
``None``.

    python -m atlascat.live.mockserver --lm toylm --port 8000

    python -m atlascat.live.mockserver --bank arc --theta 0.5 --port 8000
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from ..errors import AtlasError, LiveRunError
from ..content.items import item_record
from ..content.parsing import letters
from .subjects import item_uniform
from .toylm import cut_at_stop

PROMPT_LOGPROBS = ("full", "none", "null", "shifted")

#: the message of a ``"400"`` fault: vLLM's for a prompt longer than the model's context
CONTEXT_400 = ("This model's maximum context length is 2048 tokens. However, you requested "
               "2154 tokens in the messages. Please reduce the length of the messages.")


def _shift(logprobs: dict) -> dict:
    """Echoed log-probabilities one token late: position i carries position i + 1's values
    (the last gets the first's, a null one)."""
    vals, tops = logprobs["token_logprobs"], logprobs["top_logprobs"]
    return {**logprobs, "token_logprobs": [*vals[1:], -30.0],
            "top_logprobs": [*tops[1:], {logprobs["tokens"][-1]: -30.0}]}

__all__ = ["MockOpenAIServer"]


class MockOpenAIServer:
    """Scripted OpenAI-compatible server on ``host:port`` (port 0 = a free port) in a thread.

    Parameters
    ----------
    bank : content bank the prompts come from
    theta, seed : the simulated model's ability and answer seed
    api_key : if set, requests must carry ``Authorization: Bearer <api_key>`` (else 401)
    fault : the fault hook described in the module docstring
    hang_s : how long a ``"hang"`` lasts
    lm : the language model of the log-likelihood mode (module docstring); default ToyLM
    prompt_logprobs : "full" (default), "none" (like llama.cpp), "null" or "shifted" (every
        entry one token late, as llama-cpp-python's server 0.3.36 echoes them)
    model_name : the model id reported by ``GET /v1/models`` and in replies
    """

    def __init__(self, bank=None, theta: float = 0.0, *, seed: int = 0,
                 host: str = "127.0.0.1", port: int = 0, api_key: str | None = None,
                 fault: Callable[[int, str, int], str | None] | None = None,
                 hang_s: float = 2.0, lm=None, prompt_logprobs: str = "full",
                 model_name: str | None = None):
        if prompt_logprobs not in PROMPT_LOGPROBS:
            from ..errors import ConfigError
            raise ConfigError(f"prompt_logprobs {prompt_logprobs!r} is not one of "
                              f"{', '.join(PROMPT_LOGPROBS)}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            from ..errors import ConfigError
            raise ConfigError(f"--port {port} is not a TCP port: give 1-65535 (0: any free "
                              "port)")
        self.bank = bank
        self.theta = float(theta)
        self.lm_only = lm is not None or bank is None
        if lm is None:
            from .toylm import ToyLM
            lm = ToyLM(seed=seed)
        self.lm = lm
        self.prompt_logprobs = prompt_logprobs
        self.model_name = model_name or getattr(lm, "name", None) or "mock"
        self._lm_lock = threading.Lock()
        self.seed = int(seed)
        self.api_key = api_key
        self.fault = fault
        self.hang_s = float(hang_s)
        self.log: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}
        self._p: dict[str, float] = {}
        self._by_question: dict[str, list[str]] = {}
        if bank is not None:
            p = bank.probability(self.theta)
            self._p = dict(zip(bank.item_ids.tolist(), p.tolist()))
            if "question" in bank.metadata:
                for item_id, q in zip(bank.item_ids, bank.metadata["question"]):
                    self._by_question.setdefault(str(q).strip(), []).append(str(item_id))
        try:
            self._server = ThreadingHTTPServer((host, port), self._handler())
        except OSError as exc:  # EADDRINUSE, EACCES (a port below 1024), a host not here
            raise LiveRunError(f"cannot serve on {host}:{port}: {exc.strerror or exc}; another "
                               "server may hold the port: pick another with --port (0: any "
                               "free port)") from None
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "MockOpenAIServer":
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="mock-openai", kwargs={"poll_interval": 0.05})
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket (also of a server never started: it
        waited forever for a loop that never ran)."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread = None
        self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ------------------------------------------------------------------ policy
    def identify(self, text: str) -> str | None:
        """The bank item whose question a prompt asks (the last ``Question:`` block)."""
        at = text.rfind("Question: ")
        if at < 0:
            return None
        rest = text[at + len("Question: "):]
        for sep in ("\nA. ", "\nAnswer:"):
            cut = rest.find(sep)
            if cut >= 0:
                rest = rest[:cut]
                break
        ids = self._by_question.get(rest.strip())
        return ids[0] if ids and len(ids) == 1 else None

    def correct(self, item_id: str) -> bool:
        return item_uniform(self.seed, item_id) < self._p[item_id]

    def reply(self, item_id: str, few_shot: bool) -> str:
        item = item_record(self.bank, item_id)
        ok = self.correct(item_id)
        if not item["choices"]:
            value = item["answer"] if ok else f"{float(item['answer']) + 1:g}"
            return f"Let me think step by step.\n#### {value}"
        keys = letters(len(item["choices"]))
        key = item["answer"] if ok else next(k for k in keys if k != item["answer"])
        if few_shot:
            return " " + item["choices"][keys.index(key)]
        # vary the wording so the scorer's extraction is exercised
        return key if item_uniform(self.seed + 1, item_id) < 0.5 else f"The answer is ({key})."

    # ------------------------------------------------------------------ language model
    def _generate(self, prompt: str, max_tokens: int, stop) -> str:
        from ..content.requests import Request

        if max_tokens <= 0:
            return ""
        if not hasattr(self.lm, "generate_until"):
            raise ValueError("this server's language model cannot generate")
        until = (stop,) if isinstance(stop, str) else tuple(stop or ())
        with self._lm_lock:
            return self.lm.generate_until([Request("generate_until", prompt, until=until,
                                                   max_gen_toks=int(max_tokens))])[0]

    def _logprobs(self, text: str, start: int, n_top: int, null: bool = False) -> dict:
        """OpenAI ``logprobs`` object for the tokens of ``text`` at offsets >= ``start``."""
        with self._lm_lock:
            toks, lps, offs = self.lm.token_logprobs(text)
            tops = (self.lm.top_logprobs(text, n_top)
                    if n_top > 0 and not null and hasattr(self.lm, "top_logprobs") else None)
        keep = [i for i, o in enumerate(offs) if o >= start]
        if tops is None:
            tops = [None if (null or lps[i] is None) else {toks[i]: lps[i]}
                    for i in range(len(toks))]
        return {"tokens": [toks[i] for i in keep],
                "token_logprobs": [None if null else lps[i] for i in keep],
                "text_offset": [offs[i] for i in keep],
                "top_logprobs": [None if null else tops[i] for i in keep]}

    def _ids_choice(self, k: int, ids: list, body: dict) -> tuple[dict, int, int]:
        """A choice for a prompt of token ids (lm-evaluation-harness's API models send these);
        needs an lm with ``ids_logprobs``, ``generate_ids`` and ``decode`` (HFSubject)."""
        lm = self.lm
        if not all(hasattr(lm, a) for a in ("ids_logprobs", "generate_ids", "decode")):
            raise ValueError("this server's language model takes text prompts only")
        if not ids or not all(isinstance(t, int) for t in ids):
            raise ValueError("a token-id prompt must be a non-empty list of integers")
        echo = bool(body.get("echo", False))
        n_top = body.get("logprobs")
        max_tokens = int(body.get("max_tokens") if body.get("max_tokens") is not None else 16)
        stop = body.get("stop")
        until = [stop] if isinstance(stop, str) else [u for u in (stop or []) if u]
        with self._lm_lock:
            gen = lm.generate_ids(ids, max_tokens, until)
            gen_text = lm.decode(gen)
            full = list(ids) + list(gen)
            logprobs = None
            mode = self.prompt_logprobs
            if n_top is not None and not (mode == "none" and not gen):
                toks, lps, tops = lm.ids_logprobs(full, int(n_top))
                offs, at = [], 0
                for t in toks:
                    offs.append(at)
                    at += len(t)
                first = 0 if (echo and mode != "none") else len(ids)
                null = mode == "null"
                logprobs = {"tokens": toks[first:],
                            "token_logprobs": [None if null else v for v in lps[first:]],
                            "text_offset": offs[first:],
                            "top_logprobs": [None if null else v for v in tops[first:]]}
            text = (lm.decode(ids) if echo and mode != "none" else "") + cut_at_stop(gen_text, until)
        finish = "length" if max_tokens <= 0 or len(gen) >= max_tokens else "stop"
        return ({"index": k, "text": text, "logprobs": logprobs, "finish_reason": finish},
                len(ids), len(gen))

    def _count_tokens(self, text: str) -> int:
        if not text:
            return 0
        for how in ("encode", "tokenize"):
            if hasattr(self.lm, how):
                return len(getattr(self.lm, how)(text))
        return len(self.lm.token_logprobs(text)[0])

    def lm_completion(self, body: dict) -> dict:
        """The reply to an lm-mode ``/v1/completions`` request (raises ValueError when bad)."""
        prompts = body.get("prompt", "")
        if isinstance(prompts, str) or (isinstance(prompts, list) and prompts
                                        and isinstance(prompts[0], int)):
            prompts = [prompts]
        if not isinstance(prompts, list) or not all(isinstance(p, (str, list)) for p in prompts):
            raise ValueError("prompt must be a string, a list of strings, or token ids")
        echo = bool(body.get("echo", False))
        n_top = body.get("logprobs")
        max_tokens = int(body.get("max_tokens") if body.get("max_tokens") is not None else 16)
        choices, n_prompt, n_gen = [], 0, 0
        for k, prompt in enumerate(prompts):
            if isinstance(prompt, list):
                choice, n_p, n_g = self._ids_choice(k, prompt, body)
                choices.append(choice)
                n_prompt += n_p
                n_gen += n_g
                continue
            gen = self._generate(prompt, max_tokens, body.get("stop"))
            full = prompt + gen
            logprobs = None
            mode = self.prompt_logprobs
            if n_top is not None:
                if echo and mode == "full":
                    logprobs = self._logprobs(full, 0, int(n_top))
                elif echo and mode == "shifted":
                    logprobs = _shift(self._logprobs(full, 0, int(n_top)))
                elif echo and mode == "null":
                    logprobs = self._logprobs(full, 0, 0, null=True)
                elif gen:  # completion tokens only (as llama.cpp and non-echo requests)
                    logprobs = self._logprobs(full, len(prompt), int(n_top))
            text = full if (echo and mode != "none") else gen
            with self._lm_lock:
                n_p = self._count_tokens(prompt)
                n_f = self._count_tokens(full) if gen else n_p
            n_prompt += n_p
            n_gen += n_f - n_p
            finish = "length" if max_tokens <= 0 or n_f - n_p >= max_tokens else "stop"
            choices.append({"index": k, "text": text, "logprobs": logprobs,
                            "finish_reason": finish})
        return {"object": "text_completion", "choices": choices,
                "model": body.get("model", self.model_name),
                "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_gen,
                          "total_tokens": n_prompt + n_gen}}

    def lm_chat(self, body: dict) -> dict:
        msgs = body.get("messages") or []
        text = str(msgs[-1].get("content", "")) if msgs else ""
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or 256
        gen = self._generate(text, int(max_tokens), body.get("stop"))
        return {"object": "chat.completion", "model": body.get("model", self.model_name),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": gen},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": len(text.split()), "completion_tokens": len(gen.split()),
                          "total_tokens": len(text.split()) + len(gen.split())}}

    # ------------------------------------------------------------------ HTTP
    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True
            wbufsize = -1  # buffer headers + body, flushed in one send

            def log_message(self, *args):  # keep test output clean
                pass

            def _done(self):
                """The request stops counting as in flight (before its reply is written, so a
                client that reacts to the reply never sees it counted)."""
                if getattr(self, "_counted", False):
                    self._counted = False
                    with server._lock:
                        server.in_flight -= 1

            def _send(self, status: int, body: bytes, headers=None):
                self._done()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(body)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    data = ([{"id": server.model_name, "object": "model"}]
                            if server.lm_only else [])
                    self._send(200, json.dumps({"object": "list", "data": data}).encode())
                else:
                    self._send(404, b'{"error": "not found"}')

            def do_POST(self):
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                self._counted = True
                try:
                    self._post()
                finally:
                    self._done()

            def _post(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                path = self.path.rstrip("/")
                entry = {"n": 0, "path": path, "item_id": None, "status": None,
                         "time": time.time(), "auth": self.headers.get("Authorization")}
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    body = {}
                chat = path.endswith("/chat/completions")
                if chat:
                    msgs = body.get("messages") or []
                    text = msgs[-1].get("content", "") if msgs else ""
                elif path.endswith("/completions"):
                    prompt = body.get("prompt", "")
                    text = prompt if isinstance(prompt, str) else \
                        (str(prompt[0]) if isinstance(prompt, list) and prompt else "")
                else:
                    self._send(404, b'{"error": "unknown endpoint"}')
                    return
                use_lm = server.lm_only or (not chat and bool(body.get("echo"))
                                            and body.get("logprobs") is not None)
                entry["lm"] = use_lm
                entry["body"] = body  # what was asked, as received (tests compare requests)
                item_id = server.identify(text) if server._by_question else None
                with server._lock:
                    entry["n"] = len(server.log) + 1
                    entry["item_id"] = item_id
                    key = item_id if item_id is not None else text
                    times = server._seen.get(key, 0)
                    server._seen[key] = times + 1
                    server.log.append(entry)
                if server.api_key is not None and entry["auth"] != f"Bearer {server.api_key}":
                    entry["status"] = 401
                    self._send(401, b'{"error": {"message": "invalid api key"}}')
                    return
                if item_id is None and not use_lm:
                    entry["status"] = 400
                    self._send(400, b'{"error": {"message": "no known question in the prompt"}}')
                    return
                action = server.fault(entry["n"], item_id, times) if server.fault else None
                entry["fault"] = action
                if isinstance(action, str) and action.partition(":")[0] == "429":
                    entry["status"] = 429
                    self._send(429, b'{"error": {"message": "rate limited"}}',
                               {"Retry-After": action.partition(":")[2] or "0"})
                    return
                if action == "500":
                    entry["status"] = 500
                    self._send(500, b'{"error": {"message": "internal error"}}')
                    return
                if action == "400":   # the item's request refused (a prompt past the context)
                    entry["status"] = 400
                    self._send(400, json.dumps({"error": {"message": CONTEXT_400}}).encode())
                    return
                if action == "404":   # a model name the server does not serve
                    entry["status"] = 404
                    self._send(404, json.dumps({"error": {"message": "The model `"
                               f"{body.get('model')}` does not exist."}}).encode())
                    return
                if action in ("error200", "error200-400"):   # 200, an error body (proxies)
                    entry["status"] = 200
                    err = ({"message": "upstream overloaded"} if action == "error200" else
                           {"message": CONTEXT_400, "type": "invalid_request_error",
                            "code": 400})
                    self._send(200, json.dumps({"error": err}).encode())
                    return
                if action == "malformed":
                    entry["status"] = 200
                    entry["malformed"] = True
                    self._send(200, b'{"choices": [{"message": {"content": "B"')
                    return
                if action == "drop":
                    entry["status"] = "dropped"
                    self.close_connection = True
                    return
                if action == "cut":   # the headers and half the body, then the connection closed
                    entry["status"] = "cut"
                    body = b'{"choices": [{"index": 0, "text": " B", "message": {"content": "B"}}]}'
                    self._done()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body[:len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if action == "hang":
                    entry["hung"] = True
                    entry["status"] = "hanging"
                    time.sleep(server.hang_s)
                if use_lm:
                    try:
                        payload = server.lm_chat(body) if chat else server.lm_completion(body)
                    except (ValueError, TypeError, AtlasError) as exc:
                        entry["status"] = 400
                        self._send(400, json.dumps({"error": {"message": str(exc)}}).encode())
                        return
                    payload.update({"id": f"mock-{entry['n']}", "created": int(time.time())})
                    if action == "nologprobs":
                        for choice in payload.get("choices", []):
                            choice["logprobs"] = None
                    entry["status"] = 200
                    entry["answer"] = payload["choices"][0].get("text", "") if not chat else \
                        payload["choices"][0]["message"]["content"]
                    self._send(200, json.dumps(payload).encode())
                    return
                answer = server.reply(item_id, few_shot="Reply with the letter" not in text)
                usage = {"prompt_tokens": len(text.split()), "completion_tokens": len(answer.split()),
                         "total_tokens": len(text.split()) + len(answer.split())}
                if chat:
                    choice = {"index": 0, "message": {"role": "assistant", "content": answer},
                              "finish_reason": "stop"}
                    obj = "chat.completion"
                else:
                    choice = {"index": 0, "text": answer, "finish_reason": "stop"}
                    obj = "text_completion"
                payload = {"id": f"mock-{entry['n']}", "object": obj, "created": int(time.time()),
                           "model": body.get("model", "mock"), "choices": [choice], "usage": usage}
                entry["status"] = 200
                entry["answer"] = answer
                self._send(200, json.dumps(payload).encode())

        return Handler


def main(argv=None) -> int:
    """``python -m atlascat.live.mockserver``: serve until Ctrl-C; a port that cannot be served
    ends in one line ``error: ...`` and exit status 2 (tests/test_daily_use.py)."""
    import sys

    try:
        return _serve(argv)
    except AtlasError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _serve(argv) -> int:  # pragma: no cover - manual use
    import argparse

    from ..catalogue import load_content_bank

    class _Parser(argparse.ArgumentParser):
        def error(self, message):  # one line, exit 2 (main), as every atlas error
            from ..errors import ConfigError
            raise ConfigError(f"{message} (see --help)")

    parser = _Parser(description="Scripted OpenAI-compatible server (ATLAS)")
    parser.add_argument("--bank", default="arc")
    parser.add_argument("--theta", type=float, default=0.0)
    parser.add_argument("--lm", default=None,
                        help="answer everything with a language model: 'toylm' or "
                             "'hf:PATH' (needs atlascat[hf])")
    parser.add_argument("--prompt-logprobs", default="full", choices=PROMPT_LOGPROBS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    if args.lm:
        if args.lm == "toylm":
            from .toylm import ToyLM
            lm = ToyLM(seed=args.seed)
        elif args.lm.startswith("hf:"):
            from .hf import hf_subject_from_spec
            lm = hf_subject_from_spec(args.lm[3:])
        else:
            parser.error(f"--lm must be 'toylm' or 'hf:PATH', got {args.lm!r}")
        srv = MockOpenAIServer(None, lm=lm, seed=args.seed, host=args.host, port=args.port,
                               prompt_logprobs=args.prompt_logprobs).start()
        print(f"serving {srv.url} (lm={args.lm}); Ctrl-C stops", flush=True)
    else:
        srv = MockOpenAIServer(load_content_bank(args.bank), args.theta, seed=args.seed,
                               host=args.host, port=args.port,
                               prompt_logprobs=args.prompt_logprobs).start()
        print(f"serving {srv.url} (theta={args.theta}, seed={args.seed}); Ctrl-C stops",
              flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
