"""Live evaluation overhead: what ATLAS adds per asked item, apart from the model's own latency.

Figures (medians over repeated runs on the shipped ARC bank, scripted model at theta = 0.5):
- per-step overhead of the runner (CAT update + prompt + scoring + two SQLite transactions) with
  synchronous=FULL (the default, durable across power loss) and NORMAL;
- per-request round trip to the local mock OpenAI server (httpx, keep-alive);
- items used per run and the run's wall time through HTTP.

    python benchmarks/bench_live.py
"""
from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from atlascat.cat.config import CATConfig
from atlascat.live import service
from atlascat.content.items import build_prompt, item_record
from atlascat.catalogue import load_content_bank
from atlascat.live.mockserver import MockOpenAIServer
from atlascat.live.store import RunStore
from atlascat.live.subjects import OpenAICompatible, SimulatedSubject


def main() -> None:
    bank = load_content_bank("arc")
    config = CATConfig(se_stop=0.1)
    tmp = Path(tempfile.mkdtemp())
    for sync in ("FULL", "NORMAL"):
        store = RunStore(tmp / f"bench_{sync}.sqlite", synchronous=sync)
        per_step, items = [], []
        for seed in range(10):
            t0 = time.perf_counter()
            res = service.evaluate(bank, SimulatedSubject(bank, 0.5, seed=seed), store=store,
                                  seed=seed, config=config, cache=False)
            per_step.append((time.perf_counter() - t0) / res.n_items)
            items.append(res.n_items)
        print(f"runner overhead per step, synchronous={sync:<6}: "
              f"{1e3 * statistics.median(per_step):6.2f} ms (median of 10 runs; "
              f"median {statistics.median(items):.0f} items per run)")

    with MockOpenAIServer(bank, 0.5, seed=1) as srv:
        subj = OpenAICompatible(srv.url, "mock", timeout=10)
        rtt = []
        for item_id in bank.item_ids[:100]:
            item = item_record(bank, item_id)
            t0 = time.perf_counter()
            subj.ask(build_prompt(item), item)
            rtt.append(time.perf_counter() - t0)
        print(f"HTTP round trip to the local mock server: {1e3 * statistics.median(rtt):6.2f} ms "
              "(median of 100)")
        walls = []
        for seed in range(5):
            t0 = time.perf_counter()
            res = service.evaluate(bank, subj, store=RunStore(tmp / "http.sqlite"), seed=seed,
                                  config=config, cache=False)
            walls.append(time.perf_counter() - t0)
        print(f"full live run over HTTP (FULL sync): {statistics.median(walls):.2f} s for "
              f"{res.n_items} items (median of 5)")


if __name__ == "__main__":
    main()
