"""Live runner rounds: items used, theta difference and wall time for k = 1, 2, 4, 8, 16 on the
live path (requests built, subject called, rule applied, every round persisted), on real answers
(``ReplaySubject`` over the dense ARC matrix, content bank from ``attach_content``), and the HTTP
completions path (``OpenAICompletionsSubject`` -> mock server with ToyLM) for k = 1 vs 8.

    PYTHONPATH=src OPENBLAS_NUM_THREADS=1 python benchmarks/bench_live_rounds.py [N_MODELS]

Needs the protocol (requests), cat-batch (next_items) and live-backends (ToyLM, mock server)
modules. Timings depend on the machine's load: compare rows of one run only.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from atlascat import catalogue
from atlascat.cat.config import CATConfig
from atlascat.live import service
from atlascat.content.items import attach_content, load_item_content
from atlascat.live.store import RunStore
from atlascat.live.subjects import OpenAICompletionsSubject, ReplaySubject

ITEMS = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "openllm" / "items"


def main(n_models: int = 40) -> None:
    bank = attach_content(catalogue.load_paper_bank("arc"), load_item_content("arc", ITEMS))
    rm = catalogue.load_responses("arc")
    bank = bank.subset([i for i in bank.item_ids if i in set(rm.item_ids)])
    rng = np.random.default_rng(0)
    models = [str(m) for m in rng.choice(rm.subject_ids, n_models, replace=False)]
    tmp = Path(tempfile.mkdtemp())
    cfg = CATConfig(se_stop=0.3)
    print(f"ARC content bank, {len(bank)} items, {n_models} models replayed, SE stop 0.3, "
          "store synchronous=FULL")
    print("k | items mean | rounds mean | mean |theta_k - theta_1| | wall s/run (median)")
    base = {}
    for k in (1, 2, 4, 8, 16):
        items, rounds, diffs, walls = [], [], [], []
        for m in models:
            subj = ReplaySubject(rm, m, bank=bank)
            calls = []
            orig = subj.loglikelihood
            subj.loglikelihood = lambda reqs, orig=orig: (calls.append(1), orig(reqs))[1]
            t0 = time.perf_counter()
            res = service.evaluate(bank, subj, store=RunStore(tmp / f"k{k}.sqlite"), config=cfg,
                                  batch_size=k, seed=1)
            walls.append(time.perf_counter() - t0)
            items.append(res.n_items)
            rounds.append(len(calls))
            if k == 1:
                base[m] = res.theta
            diffs.append(abs(res.theta - base[m]))
        print(f"{k:>2} | {np.mean(items):6.1f} | {np.mean(rounds):6.1f} | {np.mean(diffs):.3f} | "
              f"{statistics.median(walls):.3f}")

    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.toylm import ToyLM

    lm = ToyLM(seed=3, name="toy")
    cfg = CATConfig(se_stop=0.3, min_items=24, max_items=24)
    print("HTTP completions (mock server + ToyLM), 24 items, median of 3 runs:")
    for k in (1, 8):
        walls = []
        for rep in range(3):
            with MockOpenAIServer(lm=lm) as srv:
                subj = OpenAICompletionsSubject(srv.url, "toy", timeout=60, batch_prompts=64)
                t0 = time.perf_counter()
                service.evaluate(bank, subj, store=RunStore(tmp / f"h{k}-{rep}.sqlite"),
                                config=cfg, batch_size=k, seed=rep)
                walls.append(time.perf_counter() - t0)
                n_req = len(srv.log)
        print(f"  k={k}: {statistics.median(walls):.2f} s/run, {n_req} HTTP requests per run")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
