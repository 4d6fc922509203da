"""Moved: the leaderboard's requests live in :mod:`atlascat.content.requests` (a data format,
below the live runner)."""
from .._moved import moved

_NAMES = ("HARNESS_COMMIT", "RULES", "REQUEST_COLUMNS", "QA_PROMPT", "GSM8K_UNTIL", "GSM8K_MAX_GEN_TOKS", "Request",
          "ItemRequests", "gsm8k_cut", "gsm8k_extract", "score_outputs", "HarnessDoc",
          "hellaswag_preprocess", "mmlu_description", "harness_doc", "LONGPROMPT_COLUMNS",
          "RULE_OF", "request_fields", "requests_from_record", "build_item_requests",
          "build_requests")
__getattr__ = moved(__name__, namespace=globals(), new_homes={n: "atlascat.content.requests" for n in _NAMES})
