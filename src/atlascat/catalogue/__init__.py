"""The catalogue: what ships with the package and is found by name.

- response matrices: ``load_responses("arc")`` (the dense Open LLM Leaderboard matrices of arc,
  gsm8k, hellaswag, truthfulqa, winogrande, mmlu), the paper's test-model files
  (``load_test_thetas``, ``load_test_accuracy``, ``load_m2_partitions``), ARC's item content
  (``load_items``);
- banks, by the names ``--bank`` takes (``load_bank``): ``arc``, ``hellaswag``, ``mmlu``,
  ``truthfulqa``, ``winogrande``, ``gsm8k`` are our content banks (``load_content_bank``), each
  with its score link (``load_score_link``); ``paper-arc`` ... ``paper-winogrande`` the ATLAS
  paper's published 3PL banks (``load_paper_bank``);
- :class:`BankRef`: what every ``--bank`` and ``--suite`` names (a bank file, a bank folder, a
  bundled bank, a suite), decoded once, with one set of errors; ``resolve_responses``: a
  response matrix's file path or bundled name;
- suites (``bundled_suites``, ``suite_path``): ``openllm-v1``, read by
  :func:`atlascat.suite.load_suite`.

Below it sit the data types (:class:`~atlascat.responses.ResponseMatrix`,
:class:`~atlascat.irt.bank.ItemBank`), the IRT core and the score link, none of which know a
shipped name or file; above it the evaluation code, the live runner and the CLI use it. The
library's functions that take a response matrix also take a bundled name: importing this module
registers :func:`resolve_responses` with :mod:`atlascat.responses` (``atlascat`` imports it).
"""
from .. import responses as _responses
from .bankref import KINDS, ONE_BANK, BankRef
from .banks import (bank_names, content_bank_path, is_bundled_name, load_bank, load_content_bank,
                    load_paper_bank)
from .files import (BANK_BENCHMARKS, CONTENT_BENCHMARKS, DATA_DIR, PAPER_PREFIX,
                    RESPONSE_BENCHMARKS, data_path)
from .links import LINK_BENCHMARKS, load_bundled_bank, load_score_link, score_link_path
from .suites import SUITES_DIR, bundled_suites, suite_path
from .matrices import (load_items, load_m2_partitions, load_responses, load_test_accuracy,
                       load_test_thetas, resolve_responses)

_responses.register_name_resolver(resolve_responses)

__all__ = ["RESPONSE_BENCHMARKS", "BANK_BENCHMARKS", "CONTENT_BENCHMARKS", "LINK_BENCHMARKS",
           "PAPER_PREFIX", "DATA_DIR", "data_path", "load_responses", "load_test_thetas",
           "load_test_accuracy", "load_m2_partitions", "load_items", "bank_names",
           "is_bundled_name", "load_bank", "load_content_bank", "load_paper_bank",
           "content_bank_path", "BankRef", "KINDS", "ONE_BANK", "resolve_responses", "score_link_path",
           "load_score_link", "load_bundled_bank", "SUITES_DIR", "bundled_suites",
           "suite_path"]
